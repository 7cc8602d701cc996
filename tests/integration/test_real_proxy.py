"""RocketMQ 5 clients through a real rocketmq-proxy (cluster mode) beside a broker of its line:
the 5.5.0 proxy beside a 5.5.1 broker (Central has no 5.5.1 proxy), and a 5.3.3 proxy and broker.

The clients are ``rocketmq-python-client`` peers (gRPC); the SimpleConsumer consumes by POP.
What a POP group looks like to the broker, and so to mqadmin:

* the broker moves the group's consumer offset when it hands messages out (pop), so a
  received but un-acked message is already behind the consumer offset; the broker's consume
  stats carry no in-flight count for POP (its counter only feeds its metrics), so the truthful
  Diff and Inflight are 0 then;
* an un-acked message comes back after its invisible time from the group's POP retry topic
  ``%RETRY%<group>_<topic>``, with the delivery attempt raised;
* the proxy keeps its gRPC clients to itself: the broker knows no connection of the group.

The Java tool's ``consumerProgress -g`` fails for such a group on 5.3.3 (it looks up the route
of ``%RETRY%<group>``, which a POP group never gets) and still exits 0.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.support import grpc_client
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.proxy, pytest.mark.integration]

#: cluster versions; the proxy is the one its release ships (rb.RealProxy). 5.3.3 (its own
#: cluster, ~3 min) only with MQADMIN_RMQ_EXTRA_VERSIONS=1: the suite's time budget
VERSIONS = ("5.5.1", "5.3.3") if rb.EXTRA_VERSIONS else ("5.5.1",)
#: versions whose broker is the cluster shared with other modules
SHARED_VERSIONS = ("5.5.1",)
PER_BATCH = 8  # two per queue on a 4-queue topic
WAIT_S = 60  # bound on every wait for deliveries


@dataclass
class Proxied:
    cluster: rb.RealCluster
    proxy: rb.RealProxy
    work: Path

    @property
    def namesrv(self) -> str:
        return self.cluster.namesrv_addr

    @property
    def broker_addr(self) -> str:
        return self.cluster.broker_addrs[0]

    def topic_and_group(self, topic: str, group: str) -> None:
        rb.create_topic(self.broker_addr, topic, 4)
        rb.create_group(self.broker_addr, group)

    def produce(self, topic: str, prefix: str) -> list[dict[str, Any]]:
        work = self.work / "peers" / topic
        return grpc_client.produce(self.proxy.grpc_endpoint, topic, PER_BATCH, workdir=work, prefix=prefix)

    def consumer(self, group: str, topic: str, name: str, **kwargs: Any) -> grpc_client.Peer:
        work = self.work / "peers" / f"{group}-{name}"
        return grpc_client.simple_consumer(self.proxy.grpc_endpoint, group, topic, workdir=work, name=name, **kwargs)

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """QUERY_CONSUMER_OFFSET straight from the broker, per queue (the harness's own client)."""
        out = {}
        for qid in range(4):
            head, _ = rb.remoting_call(
                self.broker_addr, rb.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": qid}
            )
            assert head["code"] == 0, head
            out[qid] = int(head["extFields"]["offset"])
        return out


@pytest.fixture(scope="module", params=VERSIONS)
def proxied(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shared_cluster: Callable[[str], rb.RealCluster],
) -> Iterator[Proxied]:
    """The proxy in front of a one-broker cluster of its own, or on 5.5.1 of the shared cluster
    (the proxy needs no broker setting; topics and groups here live on broker-a only)."""
    grpc_client.ensure_client()  # first, so a PyPI problem fails before any JVM starts
    version: str = request.param
    work = tmp_path_factory.mktemp(f"proxy-real-{version}")
    own = version not in SHARED_VERSIONS
    cluster = rb.RealCluster(version, work / "rmq") if own else shared_cluster(version)
    if own:
        cluster.start()
    proxy = rb.RealProxy(cluster, work / "proxy")
    try:
        proxy.start()
        yield Proxied(cluster, proxy, work)
    finally:
        proxy.terminate()  # shuts down alongside the broker: saves 10-15 s
        try:
            if own:
                cluster.stop()
        finally:
            proxy.stop()


def per_queue(sent: list[dict[str, Any]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for event in sent:
        counts[int(event["queue"])] = counts.get(int(event["queue"]), 0) + 1
    return counts


def two_batches(p: Proxied, topic: str) -> tuple[set[str], set[str], int, dict[int, int]]:
    """Batch ``a``, then a time T, then batch ``b``; returns (a bodies, b bodies, T, a's per queue)."""
    a = p.produce(topic, "a")
    time.sleep(1.1)  # store timestamps are ms; keep T clear of both batches
    boundary = int(time.time() * 1000)
    time.sleep(0.1)
    b = p.produce(topic, "b")
    return {str(e["body"]) for e in a}, {str(e["body"]) for e in b}, boundary, per_queue(a)


def bodies(events: list[dict[str, Any]], attempt: int | None = None) -> set[str]:
    return {str(e["body"]) for e in events if attempt is None or e["attempt"] == attempt}


def reset(cli_proc: Callable[..., CliResult], p: Proxied, group: str, topic: str, when: int) -> dict[str, Any]:
    res = cli_proc("resetOffsetByTime", "-n", p.namesrv, "-g", group, "-t", topic, "-s", str(when), "--yes", "--json")
    assert res.code == 0, res.stderr
    doc = res.json()
    assert isinstance(doc, dict)
    return doc


def test_consumer_progress_shows_a_pop_group_as_the_broker_does(
    proxied: Proxied, cli_proc: Callable[..., CliResult], tmp_path: Path
) -> None:
    p, topic, group = proxied, "PopProgressTopic", "pop_progress_group"
    p.topic_and_group(topic, group)
    sent = p.produce(topic, "m")
    # Two messages stay in flight (received, never acked) for the whole test.
    with p.consumer(group, topic, "held", hold=2, invisible_s=300) as consumer:
        got = consumer.wait_for_messages(PER_BATCH, timeout=WAIT_S)
        assert bodies(got) == bodies(sent) and sum(not e["acked"] for e in got) == 2

        res = cli_proc("consumerProgress", "-n", p.namesrv, "-g", group, "--json")
        assert res.code == 0, res.stderr
        doc = res.json()
        assert isinstance(doc, dict)
        rows = {q["queue_id"]: q for q in doc["queues"] if q["topic"] == topic}
        expected = per_queue(sent)
        assert {qid: q["broker_offset"] for qid, q in rows.items()} == expected
        # POP moved the consumer offset at receive time, the held messages included ...
        assert {qid: q["consumer_offset"] for qid, q in rows.items()} == p.committed(group, topic) == expected
        # ... and the broker reports no in-flight count for POP, so neither do we.
        assert all(q["diff"] == 0 and q["inflight"] == 0 for q in rows.values())
        assert doc["diff_total"] == 0

        text = cli_proc("consumerProgress", "-n", p.namesrv, "-g", group)
        assert text.code == 0, text.stderr
        assert f"Consumer group {group}" in text.stdout and topic in text.stdout

        # The proxy does not register its gRPC clients with the broker.
        conn = cli_proc("consumerConnection", "-n", p.namesrv, "-g", group)
        assert conn.code == 1
        assert conn.stderr.strip() == f"mqadmin: error: no client of consumer group '{group}' is online"

        java = p.cluster.mqadmin("consumerProgress", "-g", group, check=False)
        assert f"No topic route info in name server for the topic: %RETRY%{group}" in java.stdout + java.stderr
        assert java.returncode == 0  # the Java tool's failure still exits 0
        assert "#Broker Offset" not in java.stdout


def test_reset_with_the_consumer_stopped_reconsumes_from_the_new_offsets(
    proxied: Proxied, cli_proc: Callable[..., CliResult]
) -> None:
    p, topic, group = proxied, "PopStoppedTopic", "pop_stopped_group"
    p.topic_and_group(topic, group)
    a, b, boundary, a_per_queue = two_batches(p, topic)
    with p.consumer(group, topic, "first") as consumer:
        assert bodies(consumer.wait_for_messages(2 * PER_BATCH, timeout=WAIT_S)) == a | b
    assert p.committed(group, topic) == {qid: 2 * n for qid, n in a_per_queue.items()}

    doc = reset(cli_proc, p, group, topic, boundary)
    assert doc["verified"] == doc["planned"] == 4
    assert all(m.startswith("broker-side reset (server-side") for m in doc["method"].values()), doc["method"]
    assert {q["queue_id"]: q["new_offset"] for q in doc["queues"]} == a_per_queue
    assert p.committed(group, topic) == a_per_queue

    with p.consumer(group, topic, "second") as consumer:
        again = consumer.wait_for_messages(PER_BATCH, timeout=WAIT_S)
        time.sleep(3)  # one more long poll: nothing before T may come back
        again = consumer.messages
    assert sorted(str(e["body"]) for e in again) == sorted(b)
    assert all(e["attempt"] == 1 for e in again)

    # The Java tool resets a POP group too (consumer stopped) and lands on the same offsets.
    java = p.cluster.mqadmin("resetOffsetByTime", "-g", group, "-t", topic, "-s", str(boundary))
    rows = [line.split() for line in java.stdout.splitlines() if line.startswith("broker-a")]
    assert {int(r[1]): int(r[2]) for r in rows} == a_per_queue
    assert p.committed(group, topic) == a_per_queue


def test_reset_with_the_consumer_running_and_messages_in_flight(
    proxied: Proxied, cli_proc: Callable[..., CliResult]
) -> None:
    """The reset re-delivers from the new offsets; it does not cancel what is in flight: the
    un-acked messages come back once more when their invisible time ends (attempt 2)."""
    p, topic, group = proxied, "PopRunningTopic", "pop_running_group"
    p.topic_and_group(topic, group)
    a, b, boundary, a_per_queue = two_batches(p, topic)
    invisible = 15
    with p.consumer(group, topic, "running", hold=2, invisible_s=invisible) as consumer:
        first = consumer.wait_for_messages(2 * PER_BATCH, timeout=WAIT_S)
        assert bodies(first) == a | b
        held = {str(e["body"]) for e in first if not e["acked"]}
        assert len(held) == 2
        before = len(first)
        # Let the consumer's pending long poll (2 s) end and hold it still while the tool applies
        # and reads back: the broker answers the reset offset until the group's next pop takes
        # it (ConsumerOffsetManager.queryThenEraseResetOffset), so a pop within those few ms
        # would make the read-back see the consumer already past it.
        assert consumer.proc is not None
        consumer.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(3)
            doc = reset(cli_proc, p, group, topic, boundary)
        finally:
            consumer.proc.send_signal(signal.SIGCONT)
        assert doc["verified"] == doc["planned"] == 4
        assert {q["queue_id"]: q["new_offset"] for q in doc["queues"]} == a_per_queue

        def done(events: list[dict[str, Any]]) -> bool:
            after = [e for e in events[before:] if e.get("event") == "message"]
            return bodies(after) >= b | held and bodies(after, attempt=2) >= held

        consumer.wait_until(done, timeout=invisible + WAIT_S, what="re-delivery from T and of the held messages")
        time.sleep(3)
        after = consumer.messages[before:]
    # From the new offsets and nothing before T, plus the in-flight ones once more from the POP
    # retry topic. A pop still pending in the broker when the consumer was stopped may take the
    # reset and hand b to the stopped client, whose answer is then lost: those come back once their
    # invisible time ends, as attempt 2, so b is compared as bodies whatever their attempt.
    assert bodies(after) == b | held
    assert bodies(after, attempt=1) <= b
    assert bodies(after, attempt=2) >= held
