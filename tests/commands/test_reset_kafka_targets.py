"""resetOffsetByTime's kafka-consumer-groups style targets (mqadmin extensions)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store

from tests.commands.test_reset_offset_by_time import offsets

RESET = ("resetOffsetByTime",)


def plan(store: Store, cli: Callable[..., CliResult], *args: str) -> tuple[CliResult, dict[tuple[str, int], Any]]:
    r = cli(*RESET, "-n", store.address, "-g", "g", "-t", "TopicTest", *args, "--json")
    doc: Any = r.json() if r.stdout else {"queues": []}
    return r, {(q["broker"], q["queue_id"]): q for q in doc["queues"]}


@pytest.mark.parametrize("version", BROKER_VERSIONS)
@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("--to-earliest",), lambda old: 0),
        (("--to-latest",), lambda old: 100),
        (("--shift-by", "-7"), lambda old: old - 7),
        (("--shift-by", "3"), lambda old: old + 3),
        (("--to-offset", "42"), lambda old: 42),
    ],
)
def test_each_target_moves_every_queue_and_undoes(
    version: str,
    args: tuple[str, ...],
    expect: Callable[[int], int],
    make_store: Callable[..., Store],
    cli: Callable[..., CliResult],
) -> None:
    store = make_store(version, count=800, groups={"g": int(time.time() * 1000) - HOUR_MS})
    before = offsets(store, "g")
    r, rows = plan(store, cli, *args)
    assert r.code == 0, r.stderr
    want = {k: expect(v) for k, v in before.items()}
    assert {k: q["new_offset"] for k, q in rows.items()} == want
    assert all(q["outcome"] == "applied" for q in rows.values())
    assert offsets(store, "g") == want
    doc: Any = r.json()
    assert doc["notes"][0] == f"Target: {' '.join(args)}" and doc["timestamp"] is None
    back = cli(*shlex.split(doc["undo"])[1:], "--yes")
    assert back.code == 0, back.stderr
    assert offsets(store, "g") == before


def test_shift_and_offset_are_kept_inside_min_max_and_say_so(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=800, groups={"g": int(time.time() * 1000) - HOUR_MS})
    before = offsets(store, "g")
    r, rows = plan(store, cli, "--shift-by", "-1000", "--dry-run")
    assert r.code == 0 and {q["new_offset"] for q in rows.values()} == {0}
    assert "8 queue(s) kept inside their [min, max]" in r.stderr
    assert any("kept inside their [min, max]" in n for n in r.json()["notes"])  # type: ignore[index]
    r, rows = plan(store, cli, "--to-offset", "5000", "--dry-run")
    assert r.code == 0 and {q["new_offset"] for q in rows.values()} == {100}
    assert "broker-a queue 0: 5000 -> 100" in r.stderr
    assert offsets(store, "g") == before


def test_selected_queues_only_and_force_false(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=800, groups={"g": int(time.time() * 1000) - HOUR_MS})
    before = offsets(store, "g")
    r, rows = plan(store, cli, "--to-offset", "7", "-b", "broker-b", "-q", "1")
    assert r.code == 0, r.stderr
    assert list(rows) == [("broker-b", 1)]
    assert offsets(store, "g") == before | {("broker-b", 1): 7}
    r, rows = plan(store, cli, "--to-latest", "-f", "false")  # only back: nothing moves
    assert r.code == 0 and "nothing to change" in r.stderr


def test_bad_combinations_are_refused_up_front(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Any
) -> None:
    store = make_store(count=800, groups={"g": int(time.time() * 1000) - HOUR_MS})
    before = offsets(store, "g")
    cases = [
        (("--to-earliest", "--to-latest"), "--to-earliest and --to-latest both choose the target"),
        (("--shift-by", "3", "-s", "now"), "--shift-by chooses the target itself: drop -s"),
        (("--to-offset", "3", "-b", "broker-a", "-q", "0", "-o", "4"), "drop -o"),
        (("--shift-by", "x"), "--shift-by"),
        (("--to-latest", "-q", "1"), "-q/--queue needs -b/--broker"),
    ]
    for args, message in cases:
        r = cli(*RESET, "-n", store.address, "-g", "g", "-t", "TopicTest", *args)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    assert offsets(store, "g") == before and not (mqadmin_home / "backups").exists()


def test_help_names_them_as_extensions(cli_proc: Callable[..., CliResult]) -> None:
    blocks: dict[str, str] = {}
    for line in cli_proc(*RESET, "--help").stdout.splitlines():
        if line.startswith("  -"):
            flag = line.split()[0]
            blocks[flag] = ""
        if blocks:
            blocks[flag] += " " + line.strip()
    for flag in ("--to-earliest", "--to-latest", "--shift-by", "--to-offset"):
        text = " ".join(blocks[flag].split())
        assert "mqadmin extension" in text and "groups --" in text, (flag, text)


def test_zero_is_a_value(make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Any) -> None:
    """0 is an offset and a shift like any other: never read as "not given"."""
    store = make_store(count=800, groups={"g": int(time.time() * 1000) - HOUR_MS})
    before = offsets(store, "g")
    refused = [
        (("-s", "-1h", "--to-offset", "0"), "--to-offset chooses the target itself: drop -s"),
        (("--to-latest", "--shift-by", "0"), "--to-latest and --shift-by both choose the target"),
        (
            ("--to-offset", "0", "-b", "broker-a", "-q", "0", "-o", "0"),
            "--to-offset chooses the target itself: drop -o",
        ),
    ]
    for args, message in refused:
        r = cli(*RESET, "-n", store.address, "-g", "g", "-t", "TopicTest", *args)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (args, r.stderr)
    r = cli(*RESET, "-n", store.address, "-g", "g", "-t", "TopicTest,Other", "-b", "broker-a", "-q", "0", "-o", "0")
    assert r.code == 2 and "-o takes one topic, not 2" in r.stderr, r.stderr
    assert offsets(store, "g") == before and not (mqadmin_home / "backups").exists()
    r, rows = plan(store, cli, "--shift-by", "0")
    assert r.code == 0 and "nothing to change" in r.stderr, r.stderr
    assert offsets(store, "g") == before
    r, rows = plan(store, cli, "--to-offset", "0")
    assert r.code == 0, r.stderr
    assert {q["new_offset"] for q in rows.values()} == {0} and r.json()["notes"][0] == "Target: --to-offset 0"  # type: ignore[index]
    assert set(offsets(store, "g").values()) == {0}
