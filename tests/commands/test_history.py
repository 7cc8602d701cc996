"""mqadmin history: every change is in the journal as the brokers hold it, filters find it, show
prints it, undo puts its backup back through restoreOffset, prune keeps what is still needed; a
run killed mid-apply leaves a whole line that says the change may be partial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import HOUR_MS, CliResult, Store

from mqadmin import journal
from tests.commands.test_reset_offset_by_time import offsets
from tests.test_journal import validate_journal

SECRET = "S3CR3T-not-in-the-journal"
RESET_3H = ["resetOffsetByTime", "-s", "-3h"]


def hour_ago() -> int:
    return int(time.time() * 1000) - HOUR_MS


def changes(cli: Callable[..., CliResult], *args: str) -> list[dict[str, Any]]:
    r = cli("history", *args, "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    return list(doc["changes"])


def test_each_change_is_journaled_as_printed_and_as_the_brokers_hold_it(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=800, groups={"g": hour_ago(), "src": hour_ago() - HOUR_MS // 2})
    before = offsets(store, "g")
    r = cli(
        "resetOffsetByTime",
        "-n",
        store.address,
        "-g",
        "g",
        "-t",
        "TopicTest",
        "-s",
        "-90m",
        "--reason",
        "INC-4711",
        "--access-key",
        "ops",
        "--secret-key",
        SECRET,
        "--json",
    )
    assert r.code == 0, r.stderr
    printed: Any = r.json()
    now = offsets(store, "g")
    [c] = changes(cli)
    assert (c["command"], c["group"], c["topics"], c["reason"], c["outcome"]) == (
        "resetOffsetByTime",
        "g",
        ["TopicTest"],
        "INC-4711",
        "applied",
    )
    assert c["address"] == store.address and c["clusters"] == ["DefaultCluster"] and c["finished"] is True
    assert c["backup"] == os.path.abspath(printed["backup"]) and c["user"] and c["host"]
    by_queue = {(q["broker"], q["queue_id"]): q for q in c["queues"]}
    assert by_queue.keys() == {(q["broker"], q["queue_id"]) for q in printed["queues"]}
    for q in printed["queues"]:
        entry = by_queue[(q["broker"], q["queue_id"])]
        key = (q["broker"], q["queue_id"])
        assert (entry["old"], entry["planned"], entry["read_back"], entry["outcome"]) == (
            before[key],
            q["new_offset"],
            now[key],
            q["outcome"],
        )
    raw = (mqadmin_home / "journal.jsonl").read_text()
    assert SECRET not in raw and "--secret-key" in raw and "ops" in raw
    docs = validate_journal(mqadmin_home / "journal.jsonl")
    assert [d["event"] for d in docs] == ["started", "finished"]

    # the other changing commands land in the journal too
    assert cli("skipAccumulatedMessage", "-n", store.address, "-g", "g", "-t", "TopicTest", "--yes").code == 0
    clone = cli("cloneGroupOffset", "-n", store.address, "-s", "src", "-d", "g", "-t", "TopicTest", "--yes")
    assert clone.code == 0, clone.stderr
    found = changes(cli)
    assert [c["command"] for c in found] == ["resetOffsetByTime", "skipAccumulatedMessage", "cloneGroupOffset"]
    assert found[2]["group"] == "g" and found[2]["source_group"] == "src"
    assert len(validate_journal(mqadmin_home / "journal.jsonl")) == 6


def test_filters_show_and_bad_ids(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": hour_ago(), "h": hour_ago()})
    for group, how in (("g", ["skipAccumulatedMessage"]), ("h", ["skipAccumulatedMessage"]), ("g", RESET_3H)):
        r = cli(*how, "-n", store.address, "-g", group, "-t", "TopicTest", "--yes")
        assert r.code == 0 and "Backup:" in r.stdout, r.stderr
    everything = changes(cli)
    assert [c["group"] for c in everything] == ["g", "h", "g"]
    assert [c["group"] for c in changes(cli, "-g", "g")] == ["g", "g"]
    assert changes(cli, "-t", "Other") == [] and len(changes(cli, "-t", "TopicTest")) == 3
    assert [c["id"] for c in changes(cli, "--last", "1")] == [everything[-1]["id"]]
    middle = str(everything[1]["started_at"])
    assert [c["group"] for c in changes(cli, "--since", middle)] == ["h", "g"]
    assert [c["group"] for c in changes(cli, "--until", middle)] == ["g"]
    assert changes(cli, "--since", "-1h", "--until", "now") == everything

    table = cli("history")
    assert table.code == 0 and table.stdout.count("skipAccumulatedMessage") == 2 and "applied" in table.stdout
    csv = cli("history", "--output", "csv")
    assert csv.code == 0 and csv.stdout.splitlines()[0].startswith("ID,Started,Command,Group")
    one = everything[1]
    shown = cli("history", "show", one["id"][:5])
    assert shown.code == 0, shown.stderr
    assert f"Change {one['id']}: skipAccumulatedMessage of group h on TopicTest" in shown.stdout
    assert f"Undo: mqadmin history undo {one['id']}" in shown.stdout and "Read Back" in shown.stdout
    as_json: Any = cli("history", "show", one["id"], "--json").json()
    assert as_json["queues"] == one["queues"]

    for args, message in (
        (["show", "ffffffff"], "no change 'ffffffff'"),
        (["show"], "needs the ID"),
        (["list", "abc"], "takes no ID"),
        (["frobnicate"], "must be one of"),
        (["--keep", "2"], "go with 'history prune'"),
        (["prune"], "needs --keep N"),
        (["prune", "--keep", "0"], "at least 1"),
        (["prune", "--older-than", "soon"], ""),
    ):
        bad = cli("history", *args)
        assert bad.code == 2 and message in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr


def test_undo_puts_the_change_back_through_restore(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=800, groups={"g": hour_ago()})
    before = offsets(store, "g")
    assert cli("skipAccumulatedMessage", "-n", store.address, "-g", "g", "-t", "TopicTest", "--yes").code == 0
    assert set(offsets(store, "g").values()) == {100}
    [skip] = changes(cli)
    dry = cli("history", "undo", skip["id"], "--dry-run")
    assert dry.code == 0 and "Dry run" in dry.stdout and set(offsets(store, "g").values()) == {100}
    undo = cli("history", "undo", skip["id"], "--yes", "--json")
    assert undo.code == 0, undo.stderr
    doc: Any = undo.json()
    assert doc["restored_from"] == skip["backup"] and offsets(store, "g") == before
    restore = changes(cli)[-1]
    assert restore["command"] == "restoreOffset" and restore["reason"] == f"undo of {skip['id']}"
    assert {(q["broker"], q["queue_id"]): q["read_back"] for q in restore["queues"]} == before

    again = cli("history", "undo", skip["id"], "--dry-run")
    assert again.code == 0 and f"discards the later change(s) {restore['id']} (restoreOffset, applied)" in again.stderr

    # restoreOffset's own checks stay in force: -n of another cluster is refused, nothing moves
    other = make_store(count=800, groups={"g": None})
    refused = cli("history", "undo", skip["id"], "-n", other.address, "--yes")
    assert refused.code == 2 and "--other-cluster" in refused.stderr, refused.stderr
    Path(skip["backup"]).unlink()
    gone = cli("history", "undo", skip["id"], "--yes")
    assert gone.code == 2 and "is gone" in gone.stderr and offsets(store, "g") == before


def test_prune_keeps_the_newest_backup_of_each_group_and_files_outside_the_home(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=80, groups={"g": None, "h": None})
    outside = tmp_path / "mine.json"
    steps = [("g", "-3h", ["--backup", str(outside)]), ("g", "now", []), ("g", "-3h", []), ("g", "now", [])]
    for group, when, extra in [*steps, ("h", "-3h", [])]:
        args = ["resetOffsetByTime", "-n", store.address, "-g", group, "-t", "TopicTest", "-s", when, "--yes"]
        r = cli(*args, *extra)
        assert r.code == 0 and "Backup:" in r.stdout, r.stderr
    found = changes(cli)
    backups = {c["id"]: Path(c["backup"]) for c in found}
    assert all(p.exists() for p in backups.values())
    g = [c["id"] for c in found if c["group"] == "g"]
    h = [c["id"] for c in found if c["group"] == "h"]

    assert cli("history", "prune", "--older-than", "1d").stdout.count("Removed 0 backup(s)") == 1
    dry = cli("history", "prune", "--keep", "1", "--dry-run", "--json")
    assert dry.code == 0 and all(p.exists() for p in backups.values())
    doomed = [r["id"] for r in dry.json()["removed"]]  # type: ignore[index]
    pruned = cli("history", "prune", "--keep", "1", "--json")
    assert pruned.code == 0, pruned.stderr
    removed = [r["id"] for r in pruned.json()["removed"]]  # type: ignore[index]
    assert removed == doomed
    newest_g = max((c for c in found if c["group"] == "g"), key=lambda c: c["started_at"])["id"]
    assert backups[newest_g].exists() and backups[h[0]].exists() and outside.exists()
    assert {i for i in g if not backups[i].exists()} == set(removed) and len(removed) == len(g) - 2
    assert "(gone: pruned or deleted)" in cli("history", "show", removed[0]).stdout


def test_a_replay_to_a_group_is_journaled_and_cannot_be_undone(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=80, groups={"g": None})
    r = cli(
        "rangeReplay", "-n", store.address, "-t", "TopicTest", "-b", "-3h", "--to", "group:g", "--yes",
        "--reason", "INC-9",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    [c] = changes(cli)
    assert (c["command"], c["group"], c["reason"], c["outcome"]) == ("rangeReplay", "g", "INC-9", "sent")
    assert c["replay"]["to"] == "group:g" and c["replay"]["sent"] == c["replay"]["messages"] == 80
    validate_journal(mqadmin_home / "journal.jsonl")
    undo = cli("history", "undo", c["id"], "--yes")
    assert undo.code == 2 and "stay sent" in undo.stderr


def test_a_change_of_broadcast_clients_local_offsets_is_journaled_and_undone(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    from mqadmin.localstore import CPP, JAVA
    from tests.commands.test_local_offsets import CPP_CLIENT, JAVA_CLIENT, TOPIC, Tree, queues, write_file

    t = Tree(tmp_path / "collected", make_store(count=800, groups={"g": None}))
    write_file(t.file(JAVA_CLIENT), JAVA, queues(90))
    write_file(t.file(CPP_CLIENT), CPP, queues(40))
    store = ["--local-store", str(t.root), "-n", t.store.address]
    r = cli("resetOffsetByTime", "-g", "sms", "-t", TOPIC, "-s", "-3h", *store, "--yes", "--reason", "INC-7")
    assert r.code == 0, r.stderr
    assert t.offsets(JAVA_CLIENT) == t.offsets(CPP_CLIENT) == queues(0)
    [c] = changes(cli)
    assert c["local_store"] == str(t.root) and c["reason"] == "INC-7" and c["outcome"] == "applied"
    assert {(q["client"], q["old"], q["planned"], q["read_back"]) for q in c["queues"]} == {
        (JAVA_CLIENT, 90, 0, 0),
        (CPP_CLIENT, 40, 0, 0),
    }
    assert "Client" in cli("history", "show", c["id"]).stdout
    undo = cli("history", "undo", c["id"], "--yes")
    assert undo.code == 0, undo.stderr
    assert (t.offsets(JAVA_CLIENT), t.offsets(CPP_CLIENT)) == (queues(90), queues(40))


def test_a_journal_that_cannot_be_written_stops_the_change_before_any_write(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=80, groups={"g": hour_ago()})
    before = offsets(store, "g")
    (mqadmin_home / "journal.jsonl").mkdir(parents=True)  # in the way of the file
    r = cli("skipAccumulatedMessage", "-n", store.address, "-g", "g", "-t", "TopicTest", "--yes")
    assert r.code == 1 and "journal.jsonl" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert offsets(store, "g") == before


@pytest.mark.integration
def test_a_run_killed_mid_apply_leaves_a_whole_line_saying_may_be_partial(
    tmp_path: Path, mqadmin_home: Path, cli: Callable[..., CliResult]
) -> None:
    """broker-b behind a fault proxy: right after it answered the 2nd offset write the CLI is
    SIGKILLed. The journal parses, the change says "may be partial", and its undo puts every
    queue back."""
    from tests.integration.test_reset_faults import GROUP, QUEUES, RESET_TS, TOPIC, make_rig
    from tests.support.faultproxy import Fault

    rigs = make_rig(tmp_path / "store", "5.3.3")
    rig = next(rigs)
    try:
        before = rig.offsets()
        args = ["resetOffsetByTime", "-n", rig.namesrv, "-g", GROUP, "-t", TOPIC, "-s", RESET_TS, "--yes"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "mqadmin", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        rig.proxy.arm(Fault(after_reply_to=2, hook=lambda: os.kill(proc.pid, signal.SIGKILL)))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, err
        after = rig.offsets()
        assert after != before  # killed mid-apply: some queues moved
        docs = validate_journal(mqadmin_home / "journal.jsonl")
        assert [d["event"] for d in docs] == ["started"]
        assert docs[0]["outcome"] == journal.IN_PROGRESS
        [c] = changes(cli)
        assert c["outcome"] == journal.MAY_BE_PARTIAL and c["finished"] is False
        assert {(q["broker"], q["queue_id"]) for q in c["queues"]} == set(QUEUES)
        listed = cli("history")
        assert "may be partial" in listed.stdout
        undo = cli("history", "undo", c["id"], "--yes")
        assert undo.code == 0, undo.stderr
        assert rig.offsets() == before
        assert [c["outcome"] for c in changes(cli)] == [journal.MAY_BE_PARTIAL, "applied"]
        assert json.loads((mqadmin_home / "journal.jsonl").read_text().splitlines()[-1])["event"] == "finished"
    finally:
        rigs.close()


def test_prune_ages_are_measured_from_the_runs_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--older-than counts back from the context's now (a test's clock), not the wall clock."""
    from mqadmin.commands.history import _prune

    from mqadmin import journal
    from mqadmin.context import Context
    from tests.commands.test_options import params

    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path))
    (tmp_path / "backups").mkdir()
    day, hour = 86_400_000, 3_600_000
    wall = int(time.time() * 1000)
    found = []
    for i, started in enumerate((wall - 3 * hour, wall - 2 * hour, wall - hour)):
        path = tmp_path / "backups" / f"b{i}.json"
        path.write_text("{}")
        found.append(journal.Entry({"id": f"c{i}", "group": "g", "time": started, "backup": str(path)}, True))
    prune = params("history", action="prune", older_than="1d")
    assert _prune(Context(now=wall), prune, found).removed == []  # hours old: kept
    later = _prune(Context(now=wall + 2 * day), prune, found)  # the same backups, two days on
    assert [e.id for e in later.removed] == ["c0", "c1"]
