"""The mock broker against a real Apache RocketMQ of the same version, driven identically.

Both get the same topic and group, the same 40 messages from the official C++ producer, the
same commits, time searches, pulls and resets (offline and with the official push consumer
online), through the same code (our remoting backend and CLI). Where answers differ the mock
is wrong. Store times differ between the two runs, so time searches use each side's own times.
On 5.5+ both also get the same lite parent topic, lite group and lite messages, and answer
queryOffset, consumerProgress, resets and restoreOffset of the lite group alike.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin.admin import connect
from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import Message, MessageQueue
from mqadmin.output import Env
from tests.support import official_client, shared_clusters
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

    lite: bool = False  # the real side has lite topics on (the 5.5+ shared cluster)

    def cli(self, *args: str) -> Any:
        """The command's JSON document; run in this process (the same ``main`` the shell runs)."""
        out, err = io.StringIO(), io.StringIO()
        code = main([*args, "-n", self.namesrv, "--json"], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        assert code == 0, f"{self.name}: {err.getvalue()}"
        return json.loads(out.getvalue())


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
            lite = not own and bool(shared_clusters.settings(version))
            real = Side("real", cluster.namesrv_addr, cluster.broker_addrs[0], work / "real-peers", lite)
            mock = Side("mock", server.namesrv_addr, server.broker_addrs["broker-a"], work / "mock-peers", lite)
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


LITE_PARENT, LITE_GROUP = "DiffLiteParent", "diff_lite"
LMQ = f"%LMQ%${LITE_PARENT}$"
#: lite topic -> (messages sent, offset committed; None: never committed): lags of 0 to 4
LITES: dict[str, tuple[int, int | None]] = {
    "dl0": (3, 1),
    "dl1": (2, 2),
    "dl2": (4, 0),
    "dl3": (1, None),
    "dl4": (2, 1),
    "dl5": (3, 3),
}
#: the lite topics sent before each side's mark
FIRST_HALF = ("dl0", "dl1", "dl2")


@pytest.fixture(scope="module")
def lite_sides(sides: tuple[Side, Side]) -> list[tuple[Side, int]]:
    """Both sides with a two-queue lite parent topic and a lite group on broker-a, LITES sent
    (alternating parent queues) and committed; each side with its mark, a time between the halves."""
    if not sides[0].lite:
        pytest.skip("lite topics are a 5.5 feature (and need enableLmq on the real side)")
    out = []
    for side in sides:
        rb.create_topic(side.broker_addr, LITE_PARENT, 2, attributes="+message.type=LITE")
        rb.create_group(side.broker_addr, LITE_GROUP, attributes={"+lite.bind.topic": LITE_PARENT})
        admin = connect(side.namesrv, timeout=10)
        try:
            parent = [MessageQueue(LITE_PARENT, "broker-a", q) for q in (0, 1)]
            sent = mark = 0
            for name, (count, _) in LITES.items():
                if name == list(LITES)[len(FIRST_HALF)]:
                    time.sleep(0.02)  # store times are in ms: the mark falls strictly between the halves
                    mark = int(time.time() * 1000)
                    time.sleep(0.02)
                for i in range(count):
                    msg = Message(LITE_PARENT, f"{name}-{i}".encode(), {"__LITE_TOPIC": name})
                    admin.send(LITE_PARENT, msg, parent[sent % 2])
                    sent += 1
            for name, (_, committed) in LITES.items():
                if committed is not None:
                    admin.update_consumer_offset(LITE_GROUP, MessageQueue(LMQ + name, "broker-a", 0), committed)
        finally:
            admin.close()
        out.append((side, mark))
    return out


def _lite_rows(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """queryOffset's lite rows without store times (each side has its own)."""
    assert doc["lite"] is True and (doc["topic"], doc["group"]) == (LITE_PARENT, LITE_GROUP), doc
    keys = ("lite_topic", "broker", "queue_id", "min_offset", "max_offset", "consumer_offset", "lag", "offset_at_time")
    return sorted(tuple(r.get(k) for k in keys) for r in doc["queues"])


def _plan(doc: dict[str, Any]) -> dict[str, Any]:
    """A reset's or restore's plan and outcome in side-independent terms."""
    queues = sorted(
        (r["topic"], r["queue_id"], r["old_offset"], r["new_offset"], r.get("outcome")) for r in doc["queues"]
    )
    return {"queues": queues, "method": doc.get("method_code"), "counts": (doc.get("planned"), doc.get("verified"))}


def test_same_lite_offsets_progress_resets_and_restore(
    lite_sides: list[tuple[Side, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = []
    for side, mark in lite_sides:
        monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / side.name))
        lite = ("-t", LITE_PARENT, "-g", LITE_GROUP)
        seen: dict[str, Any] = {"query": _lite_rows(side.cli("queryOffset", *lite, "-s", str(mark)))}
        progress = side.cli("consumerProgress", "-g", LITE_GROUP, "--all")
        seen["progress"] = (
            progress["parent_topic"],
            progress["diff_total"],
            [
                (r["lite_topic"], r["queue"], r["broker"], r["broker_offset"], r["consumer_offset"], r["diff"])
                for r in progress["lite_topics"]
            ],
            sorted(r["lite_topic"] for r in progress["lite_topics"] if r["lag_time_ms"] is not None),
        )
        one = side.cli("consumerProgress", "-g", LITE_GROUP, "-t", "dl2")
        seen["one"] = [(r["lite_topic"], r["consumer_offset"], r["diff"]) for r in one["lite_topics"]]
        by_time = side.cli("resetOffsetByTime", *lite, "-s", str(mark), "--yes")
        seen["by_time"] = _plan(by_time)
        seen["after_by_time"] = _lite_rows(side.cli("queryOffset", *lite))
        seen["earliest"] = _plan(side.cli("resetOffsetByTime", *lite, "--to-earliest", "--yes"))
        seen["after_earliest"] = _lite_rows(side.cli("queryOffset", *lite))
        seen["restore"] = _plan(side.cli("restoreOffset", "--from", by_time["backup"], "--yes"))
        seen["after_restore"] = _lite_rows(side.cli("queryOffset", *lite))
        results.append(seen)
    real, mock = results
    for key in real:
        assert real[key] == mock[key], (key, real[key], mock[key])
    # and both are the truth: the reset put the first half at its end and the rest at 0, restore undid it
    assert {r[0]: r[5] for r in real["after_by_time"]} == {
        n: (sent if n in FIRST_HALF else 0) for n, (sent, c) in LITES.items() if c is not None
    }
    assert {r[0]: r[5] for r in real["after_restore"]} == {n: c for n, (_, c) in LITES.items() if c is not None}
