"""restoreOffset validates the whole backup before it changes anything, and its undo line pastes."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, Store


def offsets(store: Store, group: str = "g", topic: str = "TopicTest") -> dict[tuple[str, int], int]:
    cluster = store.open()
    try:
        return {(n, q): o for n, b in cluster.brokers.items() for q, o in b.offsets.get(f"{topic}@{group}", {}).items()}
    finally:
        cluster.close()


@pytest.fixture
def after_reset(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> tuple[Store, dict[str, Any]]:
    """A store whose group g was reset from 10 to 0 on every queue; the reset's JSON result."""
    store = make_store(count=80, groups={"g": None})
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h", "--json")
    assert r.code == 0, r.stderr
    doc: dict[str, Any] = r.json()  # type: ignore[assignment]
    assert set(offsets(store).values()) == {0}
    return store, doc


def edited(src: str, dst: Path, change: Callable[[dict[str, Any]], None]) -> str:
    doc = json.loads(Path(src).read_text())
    change(doc)
    dst.write_text(json.dumps(doc))
    return str(dst)


def set_first(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["offsets"][0][key] = value

    return change


def other_cluster(doc: dict[str, Any]) -> None:
    doc["address"] = "10.0.0.1:9876"
    doc["clusters"] = ["OtherCluster"]
    doc["brokers"] = {"broker-a": "10.0.0.2:10911", "broker-b": "10.0.0.3:10911"}


def test_every_bad_backup_is_refused_before_anything_changes(
    after_reset: tuple[Store, dict[str, Any]], cli: Callable[..., CliResult], tmp_path: Path, mqadmin_home: Path
) -> None:
    store, doc = after_reset
    backup = doc["backup"]
    truncated = tmp_path / "truncated.json"
    text = Path(backup).read_text()
    truncated.write_text(text[: len(text) // 2])
    cases = [
        (edited(backup, tmp_path / "g.json", lambda d: d.update(group="nope")), "unknown consumer group 'nope'"),
        (edited(backup, tmp_path / "t.json", lambda d: d.update(topic="Nope")), "unknown topic 'Nope'"),
        (edited(backup, tmp_path / "q.json", set_first("queue_id", 9)), "queue 9"),
        (edited(backup, tmp_path / "b.json", set_first("broker", "broker-z")), "broker-z queue"),
        (edited(backup, tmp_path / "n.json", set_first("offset", -5)), "negative offset"),
        (edited(backup, tmp_path / "c.json", other_cluster), "--other-cluster"),
        (edited(backup, tmp_path / "r.json", set_first("offset", 10**9)), "outside today's [min, max]"),
        (edited(backup, tmp_path / "e.json", lambda d: d.update(offsets=[])), "corrupt"),
        (str(truncated), "not readable JSON"),
    ]
    before_backups = sorted((mqadmin_home / "backups").iterdir())
    for path, message in cases:
        res = cli("restoreOffset", "-n", store.address, "--from", path, "--yes")
        assert res.code == 2 and message in res.stderr, (path, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
        assert set(offsets(store).values()) == {0}, path  # nothing written
        assert sorted((mqadmin_home / "backups").iterdir()) == before_backups, path  # no new backup


def test_other_cluster_names_both_and_the_flag_lets_it_through(
    after_reset: tuple[Store, dict[str, Any]], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store, doc = after_reset
    path = edited(doc["backup"], tmp_path / "c.json", other_cluster)
    res = cli("restoreOffset", "-n", store.address, "--from", path)
    assert res.code == 2
    assert "OtherCluster at 10.0.0.1:9876" in res.stderr and f"at {store.address}" in res.stderr
    dry = cli(
        "restoreOffset", "-n", store.address, "--from", path, "--dry-run"
    )  # shows the plan, says what applying needs
    assert dry.code == 0 and "applying this plan there needs --other-cluster" in dry.stderr
    assert set(offsets(store).values()) == {0}
    ok = cli("restoreOffset", "-n", store.address, "--from", path, "--other-cluster")
    assert ok.code == 0, ok.stderr
    assert set(offsets(store).values()) == {10}


def test_clamp_moves_out_of_range_offsets_to_the_nearest_bound(
    after_reset: tuple[Store, dict[str, Any]], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store, doc = after_reset
    path = edited(doc["backup"], tmp_path / "r.json", set_first("offset", 10**9))
    first = json.loads(Path(path).read_text())["offsets"][0]
    ok = cli("restoreOffset", "-n", store.address, "--from", path, "--clamp")
    assert ok.code == 0, ok.stderr
    assert "clamped" in ok.stderr and "not in [0, 10]" in ok.stderr
    now = offsets(store)
    assert now[(first["broker"], first["queue_id"])] == 10  # the max offset of an 80-message, 8-queue topic


def test_the_printed_undo_line_works_when_pasted(
    after_reset: tuple[Store, dict[str, Any]], cli: Callable[..., CliResult]
) -> None:
    store, doc = after_reset
    undo = doc["undo"]
    argv = shlex.split(undo)
    assert argv[:2] == ["mqadmin", "restoreOffset"] and "-n" in argv
    res = cli(*argv[1:], "--yes")
    assert res.code == 0, res.stderr
    assert set(offsets(store).values()) == {10}
    assert "Verified: 8 queues read back at their planned offsets" in res.stdout


def test_restore_without_n_uses_the_address_in_the_backup(
    after_reset: tuple[Store, dict[str, Any]], cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, doc = after_reset
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    res = cli("restoreOffset", "--from", doc["backup"])
    assert res.code == 0, res.stderr
    assert f"restoring to {store.address}, the address recorded in the backup" in res.stderr
    assert set(offsets(store).values()) == {10}


def test_backup_records_the_cluster(after_reset: tuple[Store, dict[str, Any]]) -> None:
    store, doc = after_reset
    saved = json.loads(Path(doc["backup"]).read_text())
    cluster = store.open()
    try:
        assert saved["clusters"] == [cluster.cluster_name] and saved["address"] == store.address
    finally:
        cluster.close()
    assert set(saved["brokers"]) == {"broker-a", "broker-b"}


def test_an_offset_that_is_not_a_json_integer_is_refused(
    after_reset: tuple[Store, dict[str, Any]], cli: Callable[..., CliResult], tmp_path: Path, mqadmin_home: Path
) -> None:
    store, doc = after_reset
    before_backups = sorted((mqadmin_home / "backups").iterdir())
    for value in (True, 12.5, "100", " 7 ", "+8", 1e3, "1_000", None):
        for key, said in (("offset", f"offset is {json.dumps(value)}, not an integer"), ("queue_id", "queue_id is")):
            path = edited(doc["backup"], tmp_path / "x.json", set_first(key, value))
            res = cli("restoreOffset", "-n", store.address, "--from", path, "--yes")
            assert res.code == 2 and said in res.stderr, (value, res.stderr)
            assert len(res.stderr.strip().splitlines()) == 1
            assert set(offsets(store).values()) == {0}
            assert sorted((mqadmin_home / "backups").iterdir()) == before_backups


def test_a_from_that_is_no_text_file_is_named_plainly(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """A binary file or a directory given to --from: what it is, in words, not codec or errno text."""
    store = make_store(count=16, groups={"g": None})
    binary_json, binary_csv = tmp_path / "b.json", tmp_path / "b.csv"
    binary_json.write_bytes(b"\x00\x01\xff{")
    binary_csv.write_bytes(b"\x00\x01\xff,")
    cases = [
        (binary_json, f"backup file {binary_json} is not text (not UTF-8 at byte 2): is it the right file?"),
        (binary_csv, f"plan file {binary_csv} is not text (not UTF-8 at byte 2): is it the right file?"),
        (tmp_path, f"backup file {tmp_path} is a directory, not a file"),
    ]
    for path, line in cases:
        r = cli("restoreOffset", "--from", str(path), "-n", store.address, "--yes")
        assert r.code == 2 and r.stderr == f"mqadmin: error: {line}\n", r.stderr
        assert "codec" not in r.stderr and "Errno" not in r.stderr
