"""mock://demo tells the README's story whenever it is used: re-seeded when stale and unchanged."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

from mqadmin.mock import seed

MIN = 60_000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Shift the demo's clock by ``delta`` ms from real time (the commands' own clock stays real)."""

    def shift(delta: int) -> None:
        monkeypatch.setattr(seed, "clock", lambda: int(time.time() * 1000) + delta)

    return shift


def tour(cli: Callable[..., CliResult]) -> tuple[Any, Any]:
    progress = cli("consumerProgress", "-n", "mock://demo", "-g", "demo_group", "-t", "TopicTest", "--json")
    plan = cli("resetOffsetByTime", "-n", "mock://demo", "-g", "demo_group", "-t", "TopicTest", "-s", "-30m", "--json")
    assert progress.code == 0 and plan.code == 0, progress.stderr + plan.stderr
    return progress.json(), json.loads(plan.stdout)


def test_the_story_holds_15_minutes_after_the_demo_was_made(
    cli: Callable[..., CliResult], clock: Callable[[int], None], mqadmin_home: Path
) -> None:
    clock(-15 * MIN)  # the newcomer made the demo a quarter of an hour ago...
    made = cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest", "--json")
    assert made.code == 0
    clock(0)  # ...and follows the tour now
    progress, plan = tour(cli)
    # demo_group stopped about 20 minutes ago, so -30m re-delivers on every queue and skips nothing
    assert 19 * MIN < progress["lag_time_ms"] < 21 * MIN
    assert all(q["delta"] < 0 for q in plan["queues"]) and len(plan["queues"]) == 8
    assert 1000 < sum(-q["delta"] for q in plan["queues"]) < 1200  # the README's "re-delivers 1108"
    meta = json.loads((mqadmin_home / "mock" / "demo" / "cluster.json").read_text())
    assert abs(meta["demo"]["seeded_at"] - time.time() * 1000) < MIN


def test_seeding_again_is_said_once(cli: Callable[..., CliResult], clock: Callable[[int], None]) -> None:
    clock(-6 * MIN)
    assert cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest").code == 0
    clock(0)
    again = cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest")
    assert (
        again.stderr
        == "mqadmin: warning: mock://demo was 6 min old and unchanged: seeded again, so its data ends now\n"
    )
    assert cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest").stderr == ""


def test_a_fresh_demo_is_kept(cli: Callable[..., CliResult], clock: Callable[[int], None], mqadmin_home: Path) -> None:
    clock(-4 * MIN)
    assert cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest").code == 0
    seeded = json.loads((mqadmin_home / "mock" / "demo" / "cluster.json").read_text())["demo"]["seeded_at"]
    clock(0)
    assert cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest").stderr == ""
    assert json.loads((mqadmin_home / "mock" / "demo" / "cluster.json").read_text())["demo"]["seeded_at"] == seeded


def test_a_demo_the_user_changed_is_never_replaced(
    cli: Callable[..., CliResult], clock: Callable[[int], None], mqadmin_home: Path
) -> None:
    clock(-15 * MIN)
    reset = cli("resetOffsetByTime", "-n", "mock://demo", "-g", "demo_group", "-t", "TopicTest", "-s", "-1h", "--yes")
    assert reset.code == 0, reset.stderr
    moved = cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest", "-g", "demo_group", "--json").json()
    clock(0)
    later = cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest", "-g", "demo_group", "--json")
    assert later.stderr == "" and later.json() == moved  # the user's offsets are still there


def test_a_demo_in_use_is_not_replaced(clock: Callable[[int], None], mqadmin_home: Path) -> None:
    from mqadmin.mock.backend import open_mock

    clock(-15 * MIN)
    holder = open_mock("mock://demo")  # writable: holds the store's lock, as a running mockBroker does
    try:
        clock(0)
        assert seed.reseed_if_stale(mqadmin_home / "mock" / "demo") is None
    finally:
        holder.close()
    assert seed.reseed_if_stale(mqadmin_home / "mock" / "demo") is not None


def test_a_stale_demo_on_a_full_disk_is_used_as_it_is(mqadmin_home: Path) -> None:
    """Seeding again needs room; without it (a file-size limit refuses the writes, as a full disk
    would) the old demo answers, whole, and the command succeeds."""
    import os
    import resource
    import subprocess
    import sys

    from mqadmin.mock.cluster import MockCluster

    root = mqadmin_home / "mock" / "demo"
    cluster = MockCluster.create(root)
    seed.seed_demo(cluster, int(time.time() * 1000) - 15 * MIN)
    cluster.close()
    before = (root / "cluster.json").read_text()

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    r = subprocess.run(
        [sys.executable, "-m", "mqadmin", "queryOffset", "-n", "mock://demo", "-t", "TopicTest", "--json"],
        env={**os.environ, "MQADMIN_HOME": str(mqadmin_home)},
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=120,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert [q["max_offset"] for q in json.loads(r.stdout)["queues"]] == [2500] * 8
    assert (root / "cluster.json").read_text() == before
    assert sorted(p.name for p in root.parent.iterdir()) == ["demo"]  # nothing half-built left behind
