"""RemotingAdmin against a real Apache RocketMQ namesrv + two brokers (4.9.8 and 5.3.3).

Each version's cluster is the one shared with other modules (this module's topic and group are
its own); the tests run in file order and build on each other (send, then read, then move
offsets, then reset), as an operator's session would. The Java ``mqadmin`` of the same version
is the referee for the numbers.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from mqadmin import errors, fastjson
from mqadmin.cli import main as cli_main
from mqadmin.model import ConsumeStats, Message, MessageQueue
from mqadmin.output import Env
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.remoting.backend import RemotingAdmin
from mqadmin.remoting.client import RemotingClient
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

TOPIC = "RbTopic"
GROUP = "RbGroup"
QUEUES = 4  # per broker
BROKERS = 2
PER_QUEUE = 3  # messages sent to every queue
CLIENT_ID = "127.0.0.1@mqadmin-realbroker-test"
WAIT = 10.0


@dataclass
class Session:
    version: str
    cluster: rb.RealCluster
    admin: RemotingAdmin
    sent: dict[MessageQueue, list[tuple[str, str, bytes]]] = field(default_factory=dict)  # msg_id, uniq_key, body
    store_times: dict[MessageQueue, list[int]] = field(default_factory=dict)
    resets: list[RemotingCommand] = field(default_factory=list)

    @property
    def v4(self) -> bool:
        return rb.is_v4(self.version)

    def queues(self) -> list[MessageQueue]:
        return [MessageQueue(TOPIC, name, q) for name in self.cluster.broker_names for q in range(QUEUES)]

    def java(self, *args: str) -> str:
        return self.cluster.mqadmin(*args).stdout


@pytest.fixture(scope="module", params=rb.VERSIONS)
def session(request: pytest.FixtureRequest, shared_cluster: Callable[[str], rb.RealCluster]) -> Iterator[Session]:
    version: str = request.param
    cluster = shared_cluster(version)
    assert len(cluster.brokers) == BROKERS
    c = cluster.cluster_name
    cluster.mqadmin("updateTopic", "-c", c, "-t", TOPIC, "-r", str(QUEUES), "-w", str(QUEUES))
    cluster.mqadmin("updateSubGroup", "-c", c, "-g", GROUP)
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=WAIT)
    try:
        yield Session(version, cluster, admin)
    finally:
        admin.close()


def java_rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


# ---------------------------------------------------------------------------------------------


def test_cluster_routes_and_versions(session: Session) -> None:
    infos = session.admin.cluster_brokers()
    assert [(i.broker_name, i.addr, i.cluster) for i in infos] == [
        (name, addr, session.cluster.cluster_name) for name, addr in session.cluster.brokers
    ]
    assert {i.version for i in infos} == {session.version}
    assert all(i.server_side_reset is (not session.v4) for i in infos)

    route = session.admin.topic_route(TOPIC)
    assert route.message_queues() == session.queues()
    assert TOPIC in session.admin.list_topics()
    with pytest.raises(errors.TopicNotExist):
        session.admin.topic_route("NoSuchTopic")


def test_send_round_robin_then_offsets(session: Session) -> None:
    admin = session.admin
    started = int(time.time() * 1000)
    for i in range(PER_QUEUE * QUEUES * BROKERS):
        body = f"m{i}".encode()
        result = admin.send(TOPIC, Message(TOPIC, body, {"TAGS": f"t{i % 2}", "KEYS": f"k{i}"}))
        session.sent.setdefault(result.queue, []).append((result.msg_id, result.uniq_key or "", body))
        assert result.queue_offset == len(session.sent[result.queue]) - 1
        time.sleep(0.003)  # distinct store times make time searches exact
    assert sorted(session.sent) == session.queues()
    assert all(len(v) == PER_QUEUE for v in session.sent.values())

    for mq in session.queues():
        assert admin.min_offset(mq) == 0
        assert admin.max_offset(mq) == PER_QUEUE
        assert admin.earliest_store_time(mq) >= started - 1000

    # Java's topicStatus agrees on min/max.
    out = session.java("topicStatus", "-t", TOPIC)
    for name in session.cluster.broker_names:
        rows = {int(r[1]): (int(r[2]), int(r[3])) for r in java_rows(out, name)}
        assert rows == {q: (0, PER_QUEUE) for q in range(QUEUES)}


def test_pull_returns_what_was_sent(session: Session) -> None:
    admin = session.admin
    for mq in session.queues():
        result = admin.pull(mq, 0, 32)
        assert result.status == "FOUND"
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (PER_QUEUE, 0, PER_QUEUE)
        got = [(m.msg_id, m.uniq_key, m.body) for m in result.messages]
        assert got == session.sent[mq]
        assert [m.queue_offset for m in result.messages] == list(range(PER_QUEUE))
        assert all(m.broker_name == mq.broker_name and m.topic == TOPIC for m in result.messages)
        session.store_times[mq] = [m.store_timestamp for m in result.messages]

    mq = session.queues()[0]
    assert admin.pull(mq, 1, 1).messages[0].queue_offset == 1
    at_end = admin.pull(mq, PER_QUEUE)
    assert (at_end.status, at_end.next_begin_offset, at_end.messages) == ("OFFSET_OVERFLOW_ONE", PER_QUEUE, [])
    beyond = admin.pull(mq, PER_QUEUE + 5)
    assert (beyond.status, beyond.next_begin_offset) == ("OFFSET_OVERFLOW_BADLY", PER_QUEUE)
    # the store status travels in the remark, whatever the reply code (broker: PullMessageProcessor.java)
    empty = MessageQueue("TBW102", mq.broker_name, 0)
    assert admin.max_offset(empty) == 0
    assert (admin.pull(empty, 0).status, admin.pull(empty, 3).status) == ("NO_MESSAGE_IN_QUEUE",) * 2


def test_search_offset_by_time(session: Session) -> None:
    admin = session.admin
    for mq in session.queues():
        times = session.store_times[mq]
        assert len(set(times)) == PER_QUEUE
        for offset, ts in enumerate(times):
            assert admin.search_offset(mq, ts) == offset
        assert admin.search_offset(mq, times[0] - 60_000) == 0
        # after the last message 4.x answers max-1, 5.1+ answers max (store: DefaultMessageStore.java)
        after = admin.search_offset(mq, times[-1] + 60_000)
        assert after == (PER_QUEUE - 1 if session.v4 else PER_QUEUE)


def test_consumer_offsets_and_consume_stats(session: Session) -> None:
    admin = session.admin
    mq = session.queues()[0]
    # 4.x says 0 for a group without an offset on a queue whose first message is in memory
    # (broker: ConsumerManageProcessor.java)
    assert admin.consumer_offset(GROUP, mq) == (0 if session.v4 else None)
    for i, q in enumerate(session.queues()):
        admin.update_consumer_offset(GROUP, q, i % (PER_QUEUE + 1))
    for i, q in enumerate(session.queues()):
        assert admin.consumer_offset(GROUP, q) == i % (PER_QUEUE + 1)

    stats = admin.consume_stats(GROUP, TOPIC)
    assert list(stats.offsets) == session.queues()
    for i, (q, w) in enumerate(stats.offsets.items()):
        consumer = i % (PER_QUEUE + 1)
        assert (w.broker_offset, w.consumer_offset) == (PER_QUEUE, consumer)
        expected_last = session.store_times[q][consumer - 1] if consumer > 0 else 0
        assert w.last_timestamp == expected_last
    # No consumer ever started, so there is no %RETRY% route: every broker is asked.
    assert admin.consume_stats(GROUP).offsets == stats.offsets


def test_batch_reads_equal_the_per_group_and_per_queue_reads(session: Session) -> None:
    """GET_BROKER_CONSUME_STATS and GET_TOPIC_STATS_INFO give the numbers the one-by-one requests give."""
    admin = session.admin
    groups = [GROUP, "RbNoSuchGroup"]
    batch = admin.consume_stats_all(groups)
    single = admin.consume_stats(GROUP)
    got = batch[GROUP]
    assert isinstance(got, ConsumeStats)
    assert single.offsets and list(got.offsets) == list(single.offsets)
    for mq, w in got.offsets.items():
        s = single.offsets[mq]
        assert (w.broker_offset, w.consumer_offset, w.last_timestamp) == (
            s.broker_offset,
            s.consumer_offset,
            s.last_timestamp,
        )
    assert got.consume_tps == pytest.approx(single.consume_tps, abs=1.0)
    assert (
        batch["RbNoSuchGroup"]
        == ConsumeStats({}, 0.0)
        == ConsumeStats(admin.consume_stats("RbNoSuchGroup").offsets, 0.0)
    )
    # the broker really answered it: no per-group request was needed
    client = RemotingClient(session.cluster.namesrv_addr, timeout=WAIT)
    try:
        for _, addr in session.cluster.brokers:
            reply = client.invoke(
                addr, RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": False})
            )
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            assert GROUP in {g for entry in fastjson.loads(reply.body)["consumeStatsList"] for g in entry}
    finally:
        client.close()

    queues = [*session.queues(), MessageQueue("TBW102", session.cluster.broker_names[0], 0)]
    stats = admin.queue_stats(queues)
    assert list(stats) == queues
    for mq in queues:
        assert (stats[mq].min_offset, stats[mq].max_offset) == (admin.min_offset(mq), admin.max_offset(mq))
    for mq in session.queues():  # the store time of the last message
        assert stats[mq].last_update_timestamp == session.store_times[mq][-1]


def test_reset_without_online_consumers(session: Session) -> None:
    admin = session.admin
    ts = session.store_times[session.queues()[0]][1]
    expected = {q: admin.search_offset(q, ts) for q in session.queues()}
    if session.v4:
        with pytest.raises(errors.ConsumerNotOnline) as info:
            admin.reset_offset_by_time(TOPIC, GROUP, ts, True)
        assert info.value.addr in session.cluster.broker_addrs
        return
    # 5.2+: the broker resets on its side (broker: Broker2Client.java)
    table = admin.reset_offset_by_time(TOPIC, GROUP, ts, True)
    assert table == expected
    for q, offset in expected.items():
        assert admin.consumer_offset(GROUP, q) == offset
    assert {q: w.consumer_offset for q, w in admin.consume_stats(GROUP, TOPIC).offsets.items()} == expected

    # One queue to an explicit offset.
    one = session.queues()[-1]
    assert admin.reset_offset_by_time(
        TOPIC, GROUP, 0, True, broker_name=one.broker_name, queue_id=one.queue_id, offset=2
    ) == {one: 2}
    assert admin.consumer_offset(GROUP, one) == 2
    # An offset outside the queue is refused by the broker.
    with pytest.raises(errors.BrokerError) as info:
        admin.reset_offset_by_time(TOPIC, GROUP, 0, True, broker_name=one.broker_name, queue_id=0, offset=99)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    # While a reset is pending, commits are ignored (the broker says so in the remark).
    admin.update_consumer_offset(GROUP, one, 0)
    assert admin.consumer_offset(GROUP, one) == 2


def _heartbeat_body() -> bytes:
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": GROUP,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [
            {
                "classFilterMode": False,
                "codeSet": [],
                "expressionType": "TAG",
                "subString": "*",
                "subVersion": int(time.time() * 1000),
                "tagsSet": [],
                "topic": TOPIC,
            }
        ],
        "unitMode": False,
    }
    return json.dumps({"clientID": CLIENT_ID, "consumerDataSet": [consumer], "producerDataSet": []}).encode()


@pytest.fixture
def online_consumer(session: Session) -> Iterator[RemotingClient]:
    """A stand-in push consumer: heartbeats to every broker and records reset pushes (code 220)."""
    consumer = RemotingClient(session.cluster.namesrv_addr, timeout=WAIT)

    def on_reset(cmd: RemotingCommand) -> None:
        session.resets.append(cmd)

    consumer.register_handler(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
    for addr in session.cluster.broker_addrs:
        reply = consumer.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=_heartbeat_body()))
        assert reply.code == ResponseCode.SUCCESS, reply
    try:
        yield consumer
    finally:
        consumer.close()


def _routed_brokers(admin: RemotingAdmin, topic: str) -> set[str]:
    try:
        return {q.broker_name for q in admin.topic_route(topic).message_queues()}
    except errors.TopicNotExist:
        return set()


def test_online_consumer_connections_reset_and_java_progress(session: Session, online_consumer: RemotingClient) -> None:
    admin = session.admin
    conn = admin.consumer_connections(GROUP)
    assert [c.client_id for c in conn.connections] == [CLIENT_ID]
    assert conn.connections[0].language == "PYTHON"
    assert (conn.consume_type, conn.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
    assert conn.subscriptions == {TOPIC: "*"}
    with pytest.raises(errors.ConsumerNotOnline):
        admin.consumer_connections("NobodyHome")

    ts = session.store_times[session.queues()[0]][0]
    expected = {q: admin.search_offset(q, ts) for q in session.queues()}
    table = admin.reset_offset_by_time(TOPIC, GROUP, ts, True)
    assert table == expected
    if session.v4:
        # The broker pushed the same table to our consumer and left the committed offsets alone.
        deadline = time.monotonic() + WAIT
        while len(session.resets) < BROKERS and time.monotonic() < deadline:
            time.sleep(0.05)
        pushed: dict[MessageQueue, int] = {}
        for cmd in session.resets:
            assert (cmd.ext_fields["topic"], cmd.ext_fields["group"]) == (TOPIC, GROUP)
            pushed.update(fastjson.mq_table(fastjson.loads(cmd.body)["offsetTable"]))
        assert pushed == expected

    # Java consumerProgress (now that %RETRY% exists) shows what consume_stats returns. The tool
    # asks the brokers in the %RETRY% route, which reaches the name server with each broker's
    # registration after the heartbeat: wait until every broker is in it.
    deadline = time.monotonic() + WAIT
    while _routed_brokers(admin, "%RETRY%" + GROUP) != set(session.cluster.broker_names):
        assert time.monotonic() < deadline, "the %RETRY% topic is not routed to every broker"
        time.sleep(0.2)
    stats = admin.consume_stats(GROUP)
    ours = {
        (q.topic, q.broker_name, q.queue_id): (w.broker_offset, w.consumer_offset) for q, w in stats.offsets.items()
    }
    out = session.java("consumerProgress", "-g", GROUP)
    theirs = {}
    for topic in {q.topic for q in stats.offsets}:
        for row in java_rows(out, topic):
            theirs[(row[0], row[1], int(row[2]))] = (int(row[3]), int(row[4]))
    assert ours and theirs == ours
    total = sum(b - c for b, c in ours.values())
    footer = "Diff Total:" if session.v4 else "Consume Diff Total:"
    assert f"{footer} {total}" in out


def test_send_back_to_the_dead_letter_queue(session: Session) -> None:
    admin = session.admin
    mq = session.queues()[0]
    msg = admin.pull(mq, 0, 1).messages[0]
    admin.send_back(GROUP, msg, -1)  # a negative delay level goes straight to the DLQ
    dlq = MessageQueue(f"%DLQ%{GROUP}", mq.broker_name, 0)
    deadline = time.monotonic() + WAIT
    while admin.max_offset(dlq) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert admin.max_offset(dlq) == 1
    with pytest.raises(errors.BrokerError):
        admin.send_back(GROUP, Message(TOPIC, b"", commitlog_offset=1 << 40, broker_name=mq.broker_name))


def test_consumer_progress_no_clients_equals_the_default(session: Session) -> None:
    """consumerProgress (all groups) --no-clients: the default view's groups and figures, without
    the client columns; the lag of the same offsets moves only by the time between the two runs.
    Last in the module: the group's %RETRY% topic (how the Java tool and we list groups) is made
    here, as a consumer's first heartbeat would."""
    cluster = session.cluster
    cluster.mqadmin("updateTopic", "-c", cluster.cluster_name, "-t", "%RETRY%" + GROUP, "-r", "1", "-w", "1")
    for mq in session.queues():  # one message behind on every queue: a lag to compare
        session.admin.update_consumer_offset(GROUP, mq, PER_QUEUE - 1)
    out, err = io.StringIO(), io.StringIO()

    def groups(*extra: str) -> dict[str, dict[str, object]]:
        out.seek(0)
        out.truncate()
        argv = ["consumerProgress", "-n", session.cluster.namesrv_addr, "--json", *extra]
        code = cli_main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO()))
        assert code == 0, err.getvalue()
        return {g["group"]: g for g in json.loads(out.getvalue())["groups"]}

    started = time.time()
    full = groups()
    lean = groups("--no-clients")
    took_ms = (time.time() - started) * 1000
    assert list(lean) == list(full) and GROUP in lean
    assert set(lean[GROUP]) == {"group", "tps", "diff_total", "lag_time_ms"}
    assert lean[GROUP]["diff_total"] == full[GROUP]["diff_total"] > 0
    lag, lag_before = lean[GROUP]["lag_time_ms"], full[GROUP]["lag_time_ms"]
    assert isinstance(lag, int) and isinstance(lag_before, int) and 0 <= lag - lag_before <= took_ms
