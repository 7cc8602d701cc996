"""resetOffsetByTime over several topics (-t A,B, --all-topics): one plan, one backup, one undo."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, Store

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from tests.commands.test_reset_offset_by_time import offsets

HOUR_MS = 3_600_000
TOPICS = ("Orders", "Payments")
RETRY = "%RETRY%g"


@pytest.fixture(params=["5.3.3", "4.9.8"])
def store(request: pytest.FixtureRequest, tmp_path: Path, door: str) -> Iterator[Store]:
    """Group g has offsets on two topics and on its %RETRY% topic; group other on Orders only."""
    now = int(time.time() * 1000)
    path = tmp_path / "store"
    cluster = MockCluster.create(path, ("broker-a", "broker-b"), version=request.param)
    for topic in (*TOPICS, RETRY):
        fill_topic(cluster, topic, 80, now - 2 * HOUR_MS, now - 1000, queues_per_broker=2 if topic == RETRY else 4)
        for broker in cluster.brokers.values():
            commit_at_time(broker, "g", topic, now - HOUR_MS)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "other", TOPICS[0], None)
    cluster.close()
    s = Store(path, request.param, now - 2 * HOUR_MS, now - 1000)
    if door == "tcp":
        from mqadmin.mock.server import MockServer

        s.server = MockServer(MockCluster(path, writable=True), namesrv_port=0).start()
    try:
        yield s
    finally:
        if s.server is not None:
            s.server.stop()


def every(store: Store, group: str = "g") -> dict[str, dict[tuple[str, int], int]]:
    return {t: offsets(store, group, t) for t in (*TOPICS, RETRY)}


def test_two_topics_one_plan_one_backup_one_undo(store: Store, cli: Callable[..., CliResult]) -> None:
    before = every(store)
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", ",".join(TOPICS), "--to-earliest", "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert doc["topic"] == "Orders,Payments" and len(doc["queues"]) == 16
    assert {q["topic"] for q in doc["queues"]} == set(TOPICS)
    assert all(q["outcome"] == "applied" and q["new_offset"] == 0 for q in doc["queues"])
    after = every(store)
    assert all(set(after[t].values()) == {0} for t in TOPICS) and after[RETRY] == before[RETRY]
    saved = json.loads(Path(doc["backup"]).read_text())
    assert {(o["topic"], o["broker"], o["queue_id"]): o["offset"] for o in saved["offsets"]} == {
        (t, b, q): o for t in TOPICS for (b, q), o in before[t].items()
    }
    undo = shlex.split(doc["undo"])
    back = cli(*undo[1:], "--yes", "--json")
    assert back.code == 0, back.stderr
    assert every(store) == before
    assert offsets(store, "other", TOPICS[0]) == {k: 10 for k in before[TOPICS[0]]}


def test_all_topics_leaves_the_retry_topic_unless_asked(store: Store, cli: Callable[..., CliResult]) -> None:
    before = every(store)
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "--all-topics", "--to-latest", "--dry-run")
    assert r.code == 0, r.stderr
    assert "Reset plan for group g on topics Orders,Payments" in r.stdout
    assert r.stdout.splitlines()[1].split()[:2] == ["Topic", "Broker"]
    assert RETRY not in r.stdout
    r = cli(
        "resetOffsetByTime", "-n", store.address, "-g", "g", "--all-topics", "--include-retry", "-s", "now", "--json"
    )
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert {q["topic"] for q in doc["queues"]} == {*TOPICS, RETRY}
    after = every(store)
    assert all(set(after[t].values()) == {10} for t in TOPICS) and set(after[RETRY].values()) == {20}
    assert cli(*shlex.split(doc["undo"])[1:], "--yes").code == 0
    assert every(store) == before


def test_bad_topic_lists_are_refused_up_front(store: Store, cli: Callable[..., CliResult], mqadmin_home: Path) -> None:
    before = every(store)
    cases = [
        (("-t", "Orders,Nope", "--to-earliest"), "unknown topic 'Nope'"),
        (("-t", "Orders,,Payments", "--to-earliest"), "topics are named once each"),
        (("-t", "Orders,Orders", "--to-earliest"), "topics are named once each"),
        (("-t", "Orders", "--all-topics", "--to-earliest"), "-t and --all-topics both choose the topics"),
        (("-t", "Orders", "--include-retry", "--to-earliest"), "--include-retry goes with --all-topics"),
        (("-t", "Orders,Payments", "-b", "broker-a", "-q", "0", "-o", "3"), "-o takes one topic"),
        (("-t", "Orders,Payments", "-s", "-1h", "--exact"), "--exact takes one topic"),
    ]
    for args, message in cases:
        r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", *args)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "other", "-t", "Orders,Payments", "--to-earliest")
    assert r.code == 2 and "unknown consumer group 'other': it has no offsets for topic 'Payments'" in r.stderr
    assert every(store) == before and not (mqadmin_home / "backups").exists()


def test_time_reset_over_two_topics(store: Store, cli: Callable[..., CliResult]) -> None:
    """-s over two topics: each queue searched in its own topic; on 4.x with nobody online each
    broker falls back to direct updates for both topics."""
    before = every(store)
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", ",".join(TOPICS), "-s", "-90m", "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    moved = {(q["topic"], q["broker"], q["queue_id"]): q["new_offset"] for q in doc["queues"]}
    assert all(n < before[t][(b, qid)] for (t, b, qid), n in moved.items())
    after = every(store)
    assert {(t, b, qid): after[t][(b, qid)] for (t, b, qid) in moved} == moved
    assert cli(*shlex.split(doc["undo"])[1:], "--yes").code == 0
    assert every(store) == before


def test_a_plan_of_two_topics_round_trips_as_csv(store: Store, cli: Callable[..., CliResult], tmp_path: Path) -> None:
    before = every(store)
    path = tmp_path / "plan.csv"
    assert cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", ",".join(TOPICS), "--to-latest").code == 0
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "--all-topics", "--to-earliest", "--export", str(path))
    assert r.code == 0, r.stderr
    assert {line.split(",")[1] for line in path.read_text().splitlines()[1:]} == set(TOPICS)
    applied = cli("restoreOffset", "-n", store.address, "--from", str(path), "--yes", "--json")
    assert applied.code == 0, applied.stderr
    after = every(store)
    assert all(set(after[t].values()) == {0} for t in TOPICS) and after[RETRY] == before[RETRY]
    doc: Any = applied.json()
    assert cli(*shlex.split(doc["undo"])[1:], "--yes").code == 0
    assert all(set(every(store)[t].values()) == {10} for t in TOPICS)  # where --to-latest had put them
