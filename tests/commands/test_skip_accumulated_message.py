from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store

from tests.commands.test_reset_offset_by_time import offsets

SKIP = "skipAccumulatedMessage"


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_skip_moves_every_queue_to_its_max_and_the_undo_puts_it_back(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"g": store_hour_ago()})
    before = offsets(store, "g")
    assert all(0 < o < 100 for o in before.values())
    r = cli(SKIP, "-n", store.address, "-g", "g", "-t", "TopicTest", "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert len(doc["queues"]) == 8
    for q in doc["queues"]:
        key = (q["broker"], q["queue_id"])
        assert (q["old_offset"], q["new_offset"], q["delta"], q["outcome"]) == (
            before[key],
            100,
            100 - before[key],
            "applied",
        )
    assert set(offsets(store, "g").values()) == {100}
    saved = json.loads(Path(doc["backup"]).read_text())
    assert saved["reason"] == SKIP and {(o["broker"], o["queue_id"]): o["offset"] for o in saved["offsets"]} == before
    undo = shlex.split(doc["undo"])
    back = cli(*undo[1:], "--yes")
    assert back.code == 0, back.stderr
    assert offsets(store, "g") == before


def store_hour_ago() -> int:
    import time

    return int(time.time() * 1000) - HOUR_MS


def test_plan_shows_the_messages_each_queue_skips_and_a_dry_run_changes_nothing(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=800, groups={"g": store_hour_ago()})
    before = offsets(store, "g")
    r = cli(SKIP, "-n", store.address, "-g", "g", "-t", "TopicTest", "--dry-run")
    assert r.code == 0, r.stderr
    assert "Skip plan for group g on topic TopicTest" in r.stdout and "Dry run: nothing was changed." in r.stdout
    skipped = {
        (m.group(1), int(m.group(2))): int(m.group(3))
        for m in re.finditer(r"^(broker-[ab])\s+(\d)\s+\d+\s+100\s+\d+\s+100\s+skips (\d+)$", r.stdout, re.M)
    }
    assert skipped == {k: 100 - v for k, v in before.items()}
    assert f"Total: re-delivers 0, skips {sum(100 - v for v in before.values())}" in r.stdout
    assert offsets(store, "g") == before and not (mqadmin_home / "backups").exists()


def test_force_false_leaves_queues_below_their_max(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=800, groups={"g": store_hour_ago()})
    before = offsets(store, "g")
    r = cli(SKIP, "-n", store.address, "-g", "g", "-t", "TopicTest", "-f", "false", "--json")
    assert r.code == 0, r.stderr
    assert "nothing to change" in r.stderr and r.json()["backup"] is None  # type: ignore[index]
    assert offsets(store, "g") == before


def test_bad_input_is_one_line_exit_2_and_nothing_changes(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=800, groups={"g": store_hour_ago()})
    before = offsets(store, "g")
    cases = [
        (("-g", "nosuch", "-t", "TopicTest"), "unknown consumer group 'nosuch'"),
        (("-g", "g", "-t", "NoTopic"), "unknown topic 'NoTopic'"),
        (("-g", "g", "-t", "TopicTest", "-f", "yes"), "-f/--force takes true or false"),
        (("-t", "TopicTest"), "-g"),
    ]
    for args, message in cases:
        r = cli(SKIP, "-n", store.address, *args)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert offsets(store, "g") == before and not (mqadmin_home / "backups").exists()


def java_rows(text: str) -> dict[tuple[str, int], list[int]]:
    """The Java tool's table rows by (broker, queue id): the remaining integer columns."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].startswith("broker-"):
            rows[(cells[0], int(cells[1]))] = [int(c) for c in cells[2:]]
    return rows


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_output_java_is_the_java_tools_table(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"g": store_hour_ago()})
    before = offsets(store, "g")
    r = cli(SKIP, "-n", store.address, "-g", "g", "-t", "TopicTest", "--output", "java")
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    if version.startswith("4"):
        # no consumer online: the Java tool's old method and its six 20-wide columns
        heads = ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#rollbackOffset"]
        assert lines[0] == "  ".join(f"{h:<20}" for h in heads)
        assert java_rows(r.stdout) == {k: [100, v, 100, 100] for k, v in before.items()}
        assert lines[1] == "  ".join(f"{c:<20}" for c in ("broker-a", 0, 100, before[("broker-a", 0)], 100, 100))
    else:
        # 5.2+: the broker resets, and the Java tool prints the offsets it answered: 40-wide columns
        assert lines[0] == "  ".join(f"{h:<40}" for h in ("#brokerName", "#queueId", "#offset"))
        assert java_rows(r.stdout) == {k: [100] for k in before}
    assert len(lines) == 9
    assert set(offsets(store, "g").values()) == {100}
    assert "backup of the current offsets" in r.stderr


@pytest.mark.parametrize("command", ["skip", "clone"])
def test_terminal_confirmation_shows_the_plan_and_declining_changes_nothing(
    command: str, make_store: Callable[..., Store], mqadmin_home: Path
) -> None:
    from tests.commands.test_reset_offset_by_time import _run_on_terminal

    store = make_store(count=800, groups={"g": store_hour_ago(), "src": None})
    before = offsets(store, "g")
    args = {
        "skip": [SKIP, "-g", "g", "-t", "TopicTest"],
        "clone": ["cloneGroupOffset", "-s", "src", "-d", "g", "-t", "TopicTest"],
    }[command] + ["-n", store.address]
    code, err = _run_on_terminal(args, "n\n")
    assert code == 4 and "Apply to 8 queue(s) of group g" in err and "cancelled, nothing changed" in err
    assert "skips" in err  # the plan is shown before the question
    assert offsets(store, "g") == before and not (mqadmin_home / "backups").exists()
    code, err = _run_on_terminal(args, "y\n")
    assert code == 0, err
    assert set(offsets(store, "g").values()) == {100}
