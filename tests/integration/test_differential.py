"""The mock broker against a real Apache RocketMQ of the same version, driven identically.

Both get the same topic and group, the same 40 messages from the official C++ producer, the
same commits, time searches, pulls and resets (offline and with the official push consumer
online), through the same code (our remoting backend and CLI). Where answers differ the mock
is wrong. Store times differ between the two runs, so time searches use each side's own times.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import MessageQueue
from tests.support import official_client
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.interop]

TOPIC, GROUP, FRESH_GROUP, QUEUES, COUNT = "DiffTopic", "diff_group", "diff_fresh", 4, 40
#: versions whose real side is the cluster shared with other modules
SHARED_VERSIONS = ("5.5.1",)


@dataclass
class Side:
    name: str
    namesrv: str
    broker_addr: str
    workdir: Path

    def cli(self, *args: str) -> Any:
        proc = subprocess.run(
            [sys.executable, "-m", "mqadmin", *args, "-n", self.namesrv, "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "NO_COLOR": "1"},
        )
        assert proc.returncode == 0, f"{self.name}: {proc.stderr}"
        return json.loads(proc.stdout)


def prepare(side: Side) -> None:
    rb.create_topic(side.broker_addr, TOPIC, QUEUES)
    for group in (GROUP, FRESH_GROUP):
        rb.create_group(side.broker_addr, group)
    deadline = time.monotonic() + 30
    while True:  # the route reaches the name server with the broker's next registration at worst
        head, _ = rb.remoting_call(side.namesrv, 105, {"topic": TOPIC})
        if head["code"] == 0:
            break
        assert time.monotonic() < deadline, f"{side.name}: no route for {TOPIC} after 30 s: {head}"
        time.sleep(0.5)


@pytest.fixture(scope="module", params=rb.OFFSET_VERSIONS)
def sides(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shared_cluster: Callable[[str], rb.RealCluster],
) -> Iterator[tuple[Side, Side]]:
    """The real side: its own one-broker cluster, or on 5.5.1 the shared cluster (the topic on
    broker-a only, so both sides route the same four queues)."""
    version: str = request.param
    official_client.ensure_all()
    work = tmp_path_factory.mktemp(f"diff-{version}")
    own = version not in SHARED_VERSIONS
    with (
        rb.RealCluster(version, work / "real", brokers=1)
        if own
        else contextlib.nullcontext(shared_cluster(version)) as cluster
    ):
        server = MockServer(MockCluster.create(work / "mock", ("broker-a",), version=version), namesrv_port=0).start()
        try:
            real = Side("real", cluster.namesrv_addr, cluster.broker_addrs[0], work / "real-peers")
            mock = Side("mock", server.namesrv_addr, server.broker_addrs["broker-a"], work / "mock-peers")
            for side in (real, mock):
                prepare(side)
                sent = official_client.produce(
                    side.namesrv,
                    TOPIC,
                    COUNT,
                    workdir=side.workdir / "producer",
                    tags=("TagA", "TagB"),
                    keys="k-{i}",
                    body="body {i}",
                )
                assert len(sent) == COUNT
            yield real, mock
        finally:
            server.stop()


def queues() -> list[MessageQueue]:
    return [MessageQueue(TOPIC, "broker-a", q) for q in range(QUEUES)]


def observe(side: Side) -> dict[str, Any]:
    """Everything the admin facade answers about the topic, in side-independent terms."""
    admin = connect(side.namesrv, timeout=10)
    try:
        out: dict[str, Any] = {
            "route": [
                (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in admin.topic_route(TOPIC).queues
            ]
        }
        for mq in queues():
            lo, hi = admin.min_offset(mq), admin.max_offset(mq)
            msgs = admin.pull(mq, lo, 64).messages
            times = [m.store_timestamp for m in msgs]
            searches = {
                "before": admin.search_offset(mq, times[0] - 60_000),
                "after": admin.search_offset(mq, times[-1] + 60_000),
            }
            for k, t in enumerate(times):
                if times.count(t) == 1:
                    searches[f"exact{k}"] = admin.search_offset(mq, t)
                if k + 1 < len(times) and times[k + 1] - t > 2:
                    searches[f"after{k}"] = admin.search_offset(mq, t + 1)
            out[f"q{mq.queue_id}"] = {
                "bounds": (lo, hi),
                "messages": [
                    (
                        m.queue_offset,
                        m.body,
                        m.tags,
                        m.keys,
                        m.reconsume_times,
                        m.flag,
                        m.sys_flag,
                        sorted(set(m.properties) - {"MIN_OFFSET", "MAX_OFFSET"}),
                    )
                    for m in msgs
                ],
                "searches": searches,
                "earliest_is_first": admin.earliest_store_time(mq) == times[0],
                "fresh_offset": admin.consumer_offset(FRESH_GROUP, mq),
            }
        return out
    finally:
        admin.close()


def test_same_queues_messages_and_time_search(sides: tuple[Side, Side]) -> None:
    real, mock = sides
    seen_real, seen_mock = observe(real), observe(mock)
    for key in seen_real:
        if key.startswith("q"):
            # exact/after probes exist only where both sides' times allowed them
            common = set(seen_real[key]["searches"]) & set(seen_mock[key]["searches"])
            for probe in common:
                assert seen_real[key]["searches"][probe] == seen_mock[key]["searches"][probe], (key, probe)
            assert {"before", "after"} <= common
            for part in ("searches",):
                seen_real[key].pop(part), seen_mock[key].pop(part)
    assert seen_real == seen_mock


def test_same_offsets_stats_and_offline_reset(sides: tuple[Side, Side]) -> None:
    results = []
    for side in sides:
        admin = connect(side.namesrv, timeout=10)
        try:
            for mq in queues():
                admin.update_consumer_offset(GROUP, mq, 5)
            stats = admin.consume_stats(GROUP, TOPIC)
            rows = {mq: (w.broker_offset, w.consumer_offset) for mq, w in stats.offsets.items() if mq.topic == TOPIC}
            last_ok = all(
                w.last_timestamp == admin.pull(mq, 4, 1).messages[0].store_timestamp
                for mq, w in stats.offsets.items()
                if mq.topic == TOPIC
            )
            third = admin.pull(queues()[0], 2, 1).messages[0].store_timestamp
        finally:
            admin.close()
        progress = side.cli("consumerProgress", "-g", GROUP, "-t", TOPIC)
        reset = side.cli("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(third), "-f", "false")
        after = side.cli("queryOffset", "-t", TOPIC, "-g", GROUP)
        results.append(
            {
                "rows": rows,
                "last_ok": last_ok,
                "diff_total": progress["diff_total"],
                "method": sorted(reset["method"].values()),
                "q0_new": [q["new_offset"] for q in reset["queues"] if q["queue_id"] == 0],
                "q0_after": [q["consumer_offset"] for q in after["queues"] if q["queue_id"] == 0],
            }
        )
    assert results[0] == results[1]
    assert results[0]["last_ok"] and results[0]["q0_new"] == results[0]["q0_after"] == [2]


def committed(side: Side, group: str) -> bool:
    """Every queue has a committed offset at its end (an online group with none shows no rows)."""
    doc = side.cli("consumerProgress", "-g", group, "-t", TOPIC)
    return len(doc["queues"]) == QUEUES and doc["diff_total"] == 0


def test_same_reset_with_the_official_consumer_online(sides: tuple[Side, Side]) -> None:
    outcomes = []
    for side in sides:
        group = "diff_online"
        with official_client.push_consumer(side.namesrv, group, TOPIC, workdir=side.workdir / "consumer") as peer:
            peer.wait_for_messages(COUNT, timeout=60)
            deadline = time.monotonic() + 30
            while not committed(side, group):
                assert time.monotonic() < deadline, f"{side.name}: offsets not committed"
                time.sleep(1)
            reset = side.cli("resetOffsetByTime", "-g", group, "-t", TOPIC, "-s", "-1d")
            outcomes.append(
                (sorted(reset["method"].values()), [q["new_offset"] for q in reset["queues"]], reset.get("errors"))
            )
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == [0] * QUEUES and outcomes[0][2] is None
