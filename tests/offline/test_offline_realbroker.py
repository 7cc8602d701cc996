"""Proof on real files: a real Apache RocketMQ broker writes its store; once it is stopped,
``store://`` on that directory answers exactly what the live broker answered."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

from mqadmin.admin import Admin, connect
from mqadmin.model import Message, MessageQueue
from mqadmin.replay.planner import plan_window
from mqadmin.replay.worker import MessageFilter, run_slice
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

TOPIC = "OfflineTopic"
GROUP = "OfflineGroup"
QUEUES = 2  # per broker
PER_QUEUE = 12


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


@dataclass
class Answers:
    """What a backend says about the topic: every number a command asks for, and the messages."""

    bounds: dict[MessageQueue, tuple[int, int, int]] = field(default_factory=dict)  # min, max, earliest time
    consumer: dict[MessageQueue, int | None] = field(default_factory=dict)
    searches: dict[tuple[MessageQueue, int], int] = field(default_factory=dict)
    messages: dict[MessageQueue, list[tuple[Any, ...]]] = field(default_factory=dict)
    window: list[tuple[Any, ...]] = field(default_factory=list)
    stats: dict[MessageQueue, tuple[int, int, int]] = field(default_factory=dict)
    cli: dict[str, Any] = field(default_factory=dict)


def message_row(m: Message) -> tuple[Any, ...]:
    return (m.queue_offset, m.body, m.store_timestamp, m.msg_id, m.uniq_key, m.tags, m.keys, m.commitlog_offset)


def gather(admin: Admin, times: list[int], window: tuple[int, int]) -> Answers:
    out = Answers()
    queues = admin.topic_route(TOPIC).message_queues()
    for mq in queues:
        out.bounds[mq] = (admin.min_offset(mq), admin.max_offset(mq), admin.earliest_store_time(mq))
        out.consumer[mq] = admin.consumer_offset(GROUP, mq)
        for ts in times:
            out.searches[(mq, ts)] = admin.search_offset(mq, ts)
        out.messages[mq] = [message_row(m) for m in admin.pull(mq, 0, 64).messages]
    plan = plan_window(admin, queues, *window, slice_size=5)
    flt = MessageFilter(*window)
    out.window = [(s.broker, s.queue_id, *message_row(m)) for s in plan.slices for m in run_slice(admin, s, flt)[0]]
    stats = admin.consume_stats(GROUP, TOPIC)
    out.stats = {mq: (w.broker_offset, w.consumer_offset, w.last_timestamp) for mq, w in stats.offsets.items()}
    return out


@dataclass
class Run:
    version: str
    workdir: Path
    cluster: rb.RealCluster
    times: list[int]
    window: tuple[int, int]
    live: Answers
    committed: dict[MessageQueue, int]


@pytest.fixture(scope="module", params=rb.VERSIONS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Produce with our remoting backend, commit offsets, ask everything live, then stop the brokers."""
    version: str = request.param
    workdir = tmp_path_factory.mktemp(f"offline-{version}")
    cluster = rb.RealCluster(version, workdir, brokers=2)
    cluster.start()
    try:
        cluster.mqadmin("updateTopic", "-c", cluster.cluster_name, "-t", TOPIC, "-r", str(QUEUES), "-w", str(QUEUES))
        cluster.mqadmin("updateSubGroup", "-c", cluster.cluster_name, "-g", GROUP)
        admin = connect(cluster.namesrv_addr, timeout=10)
        try:
            stored: list[int] = []
            for i in range(PER_QUEUE * QUEUES * 2):
                admin.send(TOPIC, Message(TOPIC, f"body-{i}".encode(), {"TAGS": f"Tag{i % 3}", "KEYS": f"k{i}"}))
                time.sleep(0.004 if i % 5 else 0.02)  # uneven gaps: nearest and boundary cases differ
            queues = admin.topic_route(TOPIC).message_queues()
            committed = {mq: (3 * n) % (PER_QUEUE + 1) for n, mq in enumerate(queues)}
            for mq, offset in committed.items():
                admin.update_consumer_offset(GROUP, mq, offset)
            for mq in queues:
                stored += [m.store_timestamp for m in admin.pull(mq, 0, 64).messages]
            stored.sort()
            times = sorted(
                {stored[0] - 1000, stored[-1] + 1000, *stored[::3]}
                | {(a + b) // 2 for a, b in zip(stored, stored[1:], strict=False)}
            )
            window = (stored[len(stored) // 4], stored[3 * len(stored) // 4])
            live = gather(admin, times, window)
        finally:
            admin.close()
        live.cli = cli_answers(cluster.namesrv_addr, window)
        cluster.stop()  # a clean stop persists consumerOffset.json
    except BaseException:
        cluster.stop(check=False)
        raise
    yield Run(version, workdir, cluster, times, window, live, committed)


def cli_answers(address: str, window: tuple[int, int]) -> dict[str, Any]:
    import io
    import json

    from mqadmin.cli import main
    from mqadmin.output import Env

    out: dict[str, Any] = {}
    for name, args in {
        "query": ["queryOffset", "-t", TOPIC, "-g", GROUP, "-s", str(window[0])],
        "query_late": ["queryOffset", "-t", TOPIC, "-s", str(window[1] + 1)],
        "plan": ["resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(window[0]), "--dry-run"],
    }.items():
        stdout, stderr = io.StringIO(), io.StringIO()
        code = main([*args, "-n", address, "--json"], env=Env(stdout=stdout, stderr=stderr, stdin=io.StringIO()))
        assert code == 0, stderr.getvalue()
        out[name] = json.loads(stdout.getvalue())
    return out


def test_the_stopped_broker_s_store_answers_what_the_broker_answered(run: Run) -> None:
    before = snapshot(run.workdir)
    admin = connect(f"store://{run.workdir}")
    try:
        assert sorted(b.broker_name for b in admin.cluster_brokers()) == ["broker-a", "broker-b"]
        # the files tell the major version only (the time search differs per 4.x / 5.1.1+, ConsumeQueue.java:
        # docs/protocol.md "Search by time")
        assert {b.version.split(".")[0] for b in admin.cluster_brokers()} == {run.version.split(".")[0]}
        assert {b.cluster for b in admin.cluster_brokers()} == {run.cluster.cluster_name}
        offline = gather(admin, run.times, run.window)
    finally:
        admin.close()
    live = run.live
    assert offline.bounds == live.bounds
    assert offline.consumer == live.consumer
    assert {mq: o for mq, o in offline.consumer.items()} == run.committed
    mismatched = {k: (v, offline.searches[k]) for k, v in live.searches.items() if offline.searches[k] != v}
    assert not mismatched, f"time searches that differ (live, offline): {mismatched}"
    assert offline.messages == live.messages
    assert offline.window == live.window and len(live.window) >= PER_QUEUE * QUEUES
    assert offline.stats == live.stats
    assert snapshot(run.workdir) == before


def test_the_cli_prints_the_same_offline(run: Run, cli: Callable[..., CliResult]) -> None:
    before = snapshot(run.workdir)
    for store in (f"store://{run.workdir}", f"store://{run.cluster.store_dirs[0]};{run.cluster.store_dirs[1]}"):
        for name, args in {
            "query": ["queryOffset", "-t", TOPIC, "-g", GROUP, "-s", str(run.window[0])],
            "query_late": ["queryOffset", "-t", TOPIC, "-s", str(run.window[1] + 1)],
            "plan": ["resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(run.window[0]), "--dry-run"],
        }.items():
            r = cli(*args, "-n", store, "--json")
            assert r.code == 0, r.stderr
            assert r.json() == run.live.cli[name], name
    one = cli("queryOffset", "-t", TOPIC, "-n", f"store://{run.cluster.store_dirs[1]}", "--json")
    assert {q["broker"] for q in one.json()["queues"]} == {"broker-b"}  # type: ignore[index]  # named by broker.properties
    refused = cli("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "-1h", "-n", f"store://{run.workdir}")
    assert refused.code == 2 and "read-only" in refused.stderr
    assert snapshot(run.workdir) == before
