"""RemotingAdmin against scripted name-server and broker stand-ins on loopback ports.

The reply bodies are the shapes a real 5.3.3 / 4.9.8 broker sends (fastjson: bare numeric
keys, MessageQueue objects as keys); the tests check both what we send and what we make of
the answers.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from mqadmin import errors
from mqadmin.admin import BrokerInfo, connect
from mqadmin.message import encode_message, parse_properties
from mqadmin.mock.backend import MockAdmin
from mqadmin.mock.server import MockServer
from mqadmin.model import (
    ConsumerConnection,
    ConsumeStats,
    Message,
    MessageQueue,
    OffsetWrapper,
    PullResult,
    QueueStats,
    TopicRoute,
)
from mqadmin.protocol.codec import FrameDecoder, RemotingCommand, encode
from mqadmin.protocol.codes import MQVersion, RequestCode, ResponseCode
from mqadmin.protocol.constants import TOOLS_CONSUMER_GROUP
from mqadmin.remoting.backend import MalformedReply, RemotingAdmin

WAIT = 5.0
Reply = Callable[[RemotingCommand], "RemotingCommand | None"]


class ScriptedServer:
    """Answers each request with ``routes[code](request)``; unknown codes get REQUEST_CODE_NOT_SUPPORTED."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.routes: dict[int, Reply] = {}
        self.requests: list[RemotingCommand] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def on(self, code: int, reply: Reply) -> None:
        self.routes[int(code)] = reply

    def sent(self, code: int) -> list[RemotingCommand]:
        with self.lock:
            return [r for r in self.requests if r.code == code]

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.socks.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        decoder = FrameDecoder()
        send_lock = threading.Lock()
        try:
            while data := sock.recv(65536):
                for cmd in decoder.feed(data):
                    with self.lock:
                        self.requests.append(cmd)
                    route = self.routes.get(cmd.code)
                    reply = (
                        route(cmd)
                        if route
                        else cmd.reply(
                            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
                        )
                    )
                    if reply is not None and not cmd.is_oneway:
                        reply.opaque = cmd.opaque
                        with send_lock:
                            sock.sendall(encode(reply))
        except (OSError, ValueError, errors.ConnectError):
            return

    def close(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone leaves the port listening
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in self.socks:
            s.close()


def ok(cmd: RemotingCommand, body: bytes | str = b"", **ext: object) -> RemotingCommand:
    data = body.encode() if isinstance(body, str) else body
    return cmd.reply(ResponseCode.SUCCESS, ext_fields=ext, body=data)


def fail(code: int, remark: str) -> Reply:
    return lambda cmd: cmd.reply(code, remark)


def mq_key(topic: str, broker: str, qid: int) -> str:
    return f'{{"brokerName":"{broker}","queueId":{qid},"topic":"{topic}"}}'


@dataclass
class Cluster:
    ns: ScriptedServer
    a: ScriptedServer
    b: ScriptedServer
    admin: RemotingAdmin
    routes: dict[str, str]

    def route(self, topic: str, *brokers: tuple[ScriptedServer, int, int], legacy: bool = False) -> None:
        """Register ``topic`` on the given (broker, queues, perm) with a route body in either dialect."""
        bdatas, qdatas = [], []
        for srv, queues, perm in brokers:
            key = "0" if legacy else '"0"'
            bdatas.append(f'{{"brokerAddrs":{{{key}:"{srv.addr}"}},"brokerName":"{srv.name}","cluster":"C"}}')
            flag = "topicSynFlag" if legacy else "topicSysFlag"
            qdatas.append(
                f'{{"brokerName":"{srv.name}","perm":{perm},"readQueueNums":{queues},"{flag}":0,"writeQueueNums":{queues}}}'
            )
        self.routes[topic] = (
            f'{{"brokerDatas":[{",".join(bdatas)}],"filterServerTable":{{}},"queueDatas":[{",".join(qdatas)}]}}'
        )


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    ns, a, b = ScriptedServer("namesrv"), ScriptedServer("broker-a"), ScriptedServer("broker-b")
    routes: dict[str, str] = {}

    def route(cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields.get("topic", "")
        if topic not in routes:
            return cmd.reply(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
        return ok(cmd, routes[topic])

    ns.on(RequestCode.GET_ROUTEINFO_BY_TOPIC, route)
    ns.on(
        RequestCode.GET_BROKER_CLUSTER_INFO,
        lambda cmd: ok(
            cmd,
            '{"brokerAddrTable":{'
            f'"broker-a":{{"brokerAddrs":{{0:"{a.addr}"}},"brokerName":"broker-a","cluster":"C","enableActingMaster":false}},'
            f'"broker-b":{{"brokerAddrs":{{0:"{b.addr}",1:"127.0.0.1:1"}},"brokerName":"broker-b","cluster":"C"}}}},'
            '"clusterAddrTable":{"C":["broker-a","broker-b"]}}',
        ),
    )
    ns.on(
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        lambda cmd: ok(cmd, '{"topicList":["T","%RETRY%g2","TBW102","%RETRY%g1","%DLQ%g1"]}'),
    )
    admin = RemotingAdmin(ns.addr, timeout=WAIT)
    yield Cluster(ns, a, b, admin, routes)
    admin.close()
    for s in (ns, a, b):
        s.close()


# ---------------------------------------------------------------------------------------------
# Routing


def test_topic_route_asks_for_standard_json(cluster: Cluster) -> None:
    cluster.route("T", (cluster.a, 4, 6), (cluster.b, 2, 4))
    route = cluster.admin.topic_route("T")
    (req,) = cluster.ns.sent(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    assert req.ext_fields == {"topic": "T", "acceptStandardJsonOnly": "true"}
    assert req.version >= MQVersion.V4_9_4
    assert [b.broker_name for b in route.brokers] == ["broker-a", "broker-b"]
    assert route.brokers[0].addrs == {0: cluster.a.addr}
    assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queues] == [
        ("broker-a", 4, 6),
        ("broker-b", 2, 4),
    ]
    assert len(route.message_queues()) == 6


def test_topic_route_reads_the_legacy_dialect(cluster: Cluster) -> None:
    cluster.route("T", (cluster.a, 8, 7), legacy=True)
    route = cluster.admin.topic_route("T")
    assert route.brokers[0].addrs == {0: cluster.a.addr}
    assert route.queues[0].read_queue_nums == 8


def test_unknown_topic_is_topic_not_exist(cluster: Cluster) -> None:
    with pytest.raises(errors.TopicNotExist) as info:
        cluster.admin.topic_route("nope")
    assert info.value.addr == cluster.ns.addr
    assert "No topic route info" in info.value.remark


def test_list_topics_and_groups(cluster: Cluster) -> None:
    assert cluster.admin.list_topics() == ["%DLQ%g1", "%RETRY%g1", "%RETRY%g2", "T", "TBW102"]
    assert cluster.admin.list_groups() == ["g1", "g2"]


def runtime_info(table: str, version: int = int(MQVersion.V5_3_3)) -> Reply:
    def reply(cmd: RemotingCommand) -> RemotingCommand:
        r = ok(cmd, f'{{"table":{{{table}}}}}')
        r.version = version
        return r

    return reply


def test_cluster_brokers_learns_versions(cluster: Cluster) -> None:
    cluster.a.on(
        RequestCode.GET_BROKER_RUNTIME_INFO, runtime_info('"brokerVersion":"479","brokerVersionDesc":"V5_3_3"')
    )
    cluster.b.on(RequestCode.GET_BROKER_RUNTIME_INFO, runtime_info('"brokerVersion":"409"'))
    infos = cluster.admin.cluster_brokers()
    assert [(i.broker_name, i.addr, i.cluster, i.version) for i in infos] == [
        ("broker-a", cluster.a.addr, "C", "5.3.3"),
        ("broker-b", cluster.b.addr, "C", "4.9.8"),
    ]
    assert [i.server_side_reset for i in infos] == [True, False]


def test_cluster_brokers_falls_back_to_the_header_version_then_to_nothing(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.GET_BROKER_RUNTIME_INFO, runtime_info('"putTps":"0.0"', version=int(MQVersion.V5_0_0)))

    def young_498(cmd: RemotingCommand) -> RemotingCommand:
        """A fresh 4.9.8 broker fails this request for a few seconds, but its header names it."""
        reply = cmd.reply(ResponseCode.SYSTEM_ERROR, "java.util.NoSuchElementException")
        reply.version = int(MQVersion.V4_9_8)
        return reply

    cluster.b.on(RequestCode.GET_BROKER_RUNTIME_INFO, young_498)
    assert [i.version for i in cluster.admin.cluster_brokers()] == ["5.0.0", "4.9.8"]
    cluster.b.close()
    cluster.admin.refresh()  # a new look (the run's snapshot is reused until then)
    infos = cluster.admin.cluster_brokers()
    assert [i.version for i in infos] == ["5.0.0", ""]
    assert not infos[1].server_side_reset


def test_the_cluster_snapshot_is_taken_once_per_run_and_dropped_on_a_connection_error(cluster: Cluster) -> None:
    """Cluster info and each broker's runtime info and settings are asked once, whoever asks; a
    connection error (the cluster may have changed) or ``refresh`` drops them, never a stale copy."""
    cluster.a.on(RequestCode.GET_BROKER_RUNTIME_INFO, runtime_info('"brokerVersionDesc":"V5_3_3"'))
    cluster.b.on(RequestCode.GET_BROKER_RUNTIME_INFO, runtime_info('"brokerVersionDesc":"V4_9_8"'))
    admin = cluster.admin

    def asked() -> tuple[int, int, int]:
        return (
            len(cluster.ns.sent(RequestCode.GET_BROKER_CLUSTER_INFO)),
            len(cluster.a.sent(RequestCode.GET_BROKER_RUNTIME_INFO)),
            len(cluster.b.sent(RequestCode.GET_BROKER_CONFIG)),
        )

    first = admin.cluster_brokers()
    assert [i.version for i in first] == ["5.3.3", "4.9.8"]
    assert admin.cluster_brokers() == first and len(admin.cluster_brokers(probe=False)) == 2
    admin.consumer_connections_all(["g"])  # another user of the name server's broker table
    assert asked() == (1, 1, 1)
    admin.refresh()
    assert admin.cluster_brokers() == first and asked() == (2, 2, 2)

    cluster.b.close()
    assert admin.cluster_brokers() == first and asked() == (2, 2, 2)  # nothing has failed yet
    with pytest.raises(errors.ConnectError):
        admin.max_offset(MessageQueue("T", "broker-b", 0))
    infos = admin.cluster_brokers()
    assert [i.version for i in infos] == ["5.3.3", ""] and asked()[:2] == (3, 3)
    admin.cluster_brokers()  # an answer missing a broker is not kept: the next call asks again
    assert asked()[:2] == (4, 4)


# ---------------------------------------------------------------------------------------------
# Queue and consumer offsets

MQ_A0 = MessageQueue("T", "broker-a", 0)
MQ_B1 = MessageQueue("T", "broker-b", 1)


def test_queue_offsets_send_the_right_fields(cluster: Cluster) -> None:
    a = cluster.a
    a.on(RequestCode.GET_MIN_OFFSET, lambda c: ok(c, offset=3))
    a.on(RequestCode.GET_MAX_OFFSET, lambda c: ok(c, offset=250))
    a.on(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, lambda c: ok(c, offset=120))
    a.on(RequestCode.GET_EARLIEST_MSG_STORETIME, lambda c: ok(c, timestamp=1700000000123))
    admin = cluster.admin
    assert admin.min_offset(MQ_A0) == 3
    assert admin.max_offset(MQ_A0) == 250
    assert admin.search_offset(MQ_A0, 1700000000000) == 120
    assert admin.earliest_store_time(MQ_A0) == 1700000000123
    assert a.sent(RequestCode.GET_MAX_OFFSET)[0].ext_fields == {"topic": "T", "queueId": "0", "committed": "true"}
    assert a.sent(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)[0].ext_fields == {
        "topic": "T",
        "queueId": "0",
        "timestamp": "1700000000000",
    }
    # the broker table came from the name server once and is reused
    assert len(cluster.ns.sent(RequestCode.GET_BROKER_CLUSTER_INFO)) == 1


def test_unknown_broker_name_is_a_connect_error(cluster: Cluster) -> None:
    with pytest.raises(errors.ConnectError, match="no broker named 'broker-z'"):
        cluster.admin.max_offset(MessageQueue("T", "broker-z", 0))


def test_missing_reply_field_is_a_malformed_reply(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.GET_MAX_OFFSET, lambda c: ok(c))
    with pytest.raises(MalformedReply, match="without a numeric 'offset'"):
        cluster.admin.max_offset(MQ_A0)


def test_consumer_offset_none_when_not_found(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.QUERY_CONSUMER_OFFSET, fail(ResponseCode.QUERY_NOT_FOUND, "Not found"))
    cluster.b.on(RequestCode.QUERY_CONSUMER_OFFSET, lambda c: ok(c, offset=42))
    assert cluster.admin.consumer_offset("g", MQ_A0) is None
    assert cluster.admin.consumer_offset("g", MQ_B1) == 42
    (req,) = cluster.a.sent(RequestCode.QUERY_CONSUMER_OFFSET)
    assert req.ext_fields == {"consumerGroup": "g", "topic": "T", "queueId": "0", "setZeroIfNotFound": "false"}


def test_update_consumer_offset_and_errors_carry_the_broker_address(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.UPDATE_CONSUMER_OFFSET, lambda c: ok(c))
    cluster.b.on(
        RequestCode.UPDATE_CONSUMER_OFFSET, fail(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group g not exist!")
    )
    cluster.admin.update_consumer_offset("g", MQ_A0, 77)
    (req,) = cluster.a.sent(RequestCode.UPDATE_CONSUMER_OFFSET)
    assert req.ext_fields == {"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "77"}
    assert not req.is_oneway  # a failed update must be seen
    with pytest.raises(errors.SubscriptionGroupNotExist) as info:
        cluster.admin.update_consumer_offset("g", MQ_B1, 1)
    assert info.value.addr == cluster.b.addr
    assert cluster.b.addr in str(info.value)


# ---------------------------------------------------------------------------------------------
# Group state


def stats_body(broker: str, rows: list[tuple[str, int, int, int, int, int | None]], tps: float = 0.0) -> str:
    parts = []
    for topic, qid, broker_off, consumer_off, last, pull in rows:
        pull_part = f',"pullOffset":{pull}' if pull is not None else ""
        parts.append(
            f'{mq_key(topic, broker, qid)}:{{"brokerOffset":{broker_off},"consumerOffset":{consumer_off},'
            f'"lastTimestamp":{last}{pull_part}}}'
        )
    return f'{{"consumeTps":{tps},"offsetTable":{{{",".join(parts)}}}}}'


def test_consume_stats_merges_the_retry_and_topic_brokers(cluster: Cluster) -> None:
    cluster.route("%RETRY%g", (cluster.a, 1, 6))
    cluster.route("T", (cluster.a, 2, 6), (cluster.b, 1, 6))
    cluster.a.on(
        RequestCode.GET_CONSUME_STATS,
        lambda c: ok(c, stats_body("broker-a", [("T", 1, 10, 8, 1700000000000, 9), ("T", 0, 5, 5, 0, 5)], 1.5)),
    )
    cluster.b.on(RequestCode.GET_CONSUME_STATS, lambda c: ok(c, stats_body("broker-b", [("T", 0, 7, 2, 0, None)], 2.0)))
    stats = cluster.admin.consume_stats("g", "T")
    assert list(stats.offsets) == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
    ]
    assert stats.offsets[MessageQueue("T", "broker-a", 1)] == OffsetWrapper(10, 8, 1700000000000, 9)
    # a 4.x broker sends no pullOffset: nothing is known to be in flight
    assert stats.offsets[MessageQueue("T", "broker-b", 0)] == OffsetWrapper(7, 2, 0, 2)
    assert stats.consume_tps == 3.5
    assert cluster.a.sent(RequestCode.GET_CONSUME_STATS)[0].ext_fields == {"consumerGroup": "g", "topic": "T"}


def test_consume_stats_without_routes_asks_every_broker(cluster: Cluster) -> None:
    """A group that only committed offsets has no %RETRY% topic; its offsets must still be found."""
    cluster.a.on(RequestCode.GET_CONSUME_STATS, lambda c: ok(c, stats_body("broker-a", [("T", 0, 5, 1, 0, 1)])))
    cluster.b.on(RequestCode.GET_CONSUME_STATS, lambda c: ok(c, '{"consumeTps":0.0,"offsetTable":{}}'))
    stats = cluster.admin.consume_stats("g")
    assert list(stats.offsets) == [MessageQueue("T", "broker-a", 0)]
    assert cluster.b.sent(RequestCode.GET_CONSUME_STATS)[0].ext_fields == {"consumerGroup": "g"}


def test_consume_stats_failure_names_the_broker(cluster: Cluster) -> None:
    cluster.route("%RETRY%g", (cluster.a, 1, 6), (cluster.b, 1, 6))
    cluster.a.on(RequestCode.GET_CONSUME_STATS, lambda c: ok(c, '{"consumeTps":0.0,"offsetTable":{}}'))
    cluster.b.on(RequestCode.GET_CONSUME_STATS, fail(ResponseCode.SYSTEM_ERROR, "oops"))
    with pytest.raises(errors.BrokerError) as info:
        cluster.admin.consume_stats("g")
    assert info.value.code == ResponseCode.SYSTEM_ERROR and info.value.addr == cluster.b.addr


def test_consume_stats_partial_names_the_unreachable_broker(cluster: Cluster) -> None:
    """partial=True: the brokers that answer, and the one that cannot be reached named; a broker
    that answers with an error, or no broker answering, still fails the call."""
    cluster.route("%RETRY%g", (cluster.a, 1, 6), (cluster.b, 1, 6))
    cluster.a.on(RequestCode.GET_CONSUME_STATS, lambda c: ok(c, stats_body("broker-a", [("T", 0, 5, 1, 0, 1)])))
    cluster.b.close()
    stats = cluster.admin.consume_stats("g", partial=True)
    assert list(stats.offsets) == [MessageQueue("T", "broker-a", 0)]
    assert list(stats.missing_brokers) == ["broker-b"] and cluster.b.addr in stats.missing_brokers["broker-b"]
    with pytest.raises(errors.ConnectError, match=cluster.b.addr):
        cluster.admin.consume_stats("g")
    cluster.a.on(RequestCode.GET_CONSUME_STATS, fail(ResponseCode.SYSTEM_ERROR, "oops"))
    with pytest.raises(errors.BrokerError):
        cluster.admin.consume_stats("g", partial=True)
    cluster.a.close()
    with pytest.raises(errors.ConnectError):
        cluster.admin.consume_stats("g", partial=True)


def test_consume_stats_all_asks_an_unreachable_broker_once(cluster: Cluster) -> None:
    """A broker that cannot be reached is not asked again per group: named in every group's
    missing_brokers with partial=True, else every group's answer is its error."""
    for g in ("g1", "g2", "g3"):
        cluster.route(f"%RETRY%{g}", (cluster.a, 1, 6), (cluster.b, 1, 6))
    cluster.a.on(RequestCode.GET_BROKER_CONSUME_STATS, lambda c: ok(c, BROKER_STATS_A))
    cluster.b.close()
    stats = cluster.admin.consume_stats_all(["g1", "g2", "g3"], partial=True)
    for g in ("g1", "g2", "g3"):
        one = stats[g]
        assert isinstance(one, ConsumeStats) and list(one.missing_brokers) == ["broker-b"], one
    g1 = stats["g1"]
    assert isinstance(g1, ConsumeStats) and {mq.broker_name for mq in g1.offsets} == {"broker-a"}
    assert not cluster.a.sent(RequestCode.GET_CONSUME_STATS)
    whole = cluster.admin.consume_stats_all(["g1", "g2"])
    assert all(isinstance(v, errors.ConnectError) and cluster.b.addr in str(v) for v in whole.values()), whole


# A ConsumeStatsList as a 5.3.3 broker writes it for GET_BROKER_CONSUME_STATS (fields sorted, one
# single-key map per subscription group, queue objects as keys, pullOffset left at 0), and as a
# 4.9.x broker does (no pullOffset at all). Laid out by hand from ConsumeStatsList/ConsumeStats.
BROKER_STATS_A = (
    '{"brokerAddr":"10.0.0.1:10911","consumeStatsList":['
    '{"g1":[{"consumeTps":1.5,"offsetTable":{'
    '{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
    '{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1700000000004,"pullOffset":0},'
    '{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
    '{"brokerOffset":7,"consumerOffset":7,"lastTimestamp":1700000000007,"pullOffset":0}}},'
    '{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"%RETRY%g1"}:'
    '{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}]},'
    '{"other":[]},'
    '{"g2":[]}],'
    '"totalDiff":6,"totalInflightDiff":-11}'
)
BROKER_STATS_B_4X = (
    '{"brokerAddr":"10.0.0.2:10911","consumeStatsList":[{"g1":[{"consumeTps":2.0,"offsetTable":{'
    '{"brokerName":"broker-b","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":1,"lastTimestamp":0}}}]}],'
    '"totalDiff":2,"totalInflightDiff":-1}'
)


def test_consume_stats_all_asks_each_broker_once(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.GET_BROKER_CONSUME_STATS, lambda c: ok(c, BROKER_STATS_A))
    cluster.b.on(RequestCode.GET_BROKER_CONSUME_STATS, lambda c: ok(c, BROKER_STATS_B_4X))
    stats = cluster.admin.consume_stats_all(["g1", "g2", "g3"])
    g1 = stats["g1"]
    assert isinstance(g1, ConsumeStats)
    assert g1.offsets == {
        MessageQueue("%RETRY%g1", "broker-a", 0): OffsetWrapper(0, 0, 0, 0),
        MessageQueue("T", "broker-a", 0): OffsetWrapper(10, 4, 1700000000004, 4),  # pullOffset 0 is "unset"
        MessageQueue("T", "broker-a", 1): OffsetWrapper(7, 7, 1700000000007, 7),
        MessageQueue("T", "broker-b", 0): OffsetWrapper(3, 1, 0, 1),
    }
    assert list(g1.offsets) == sorted(g1.offsets)
    assert g1.consume_tps == 3.5
    # a group with a subscription but no offsets, and one no broker knows: no rows, as per group
    assert stats["g2"] == ConsumeStats({}, 0.0) and stats["g3"] == ConsumeStats({}, 0.0)
    assert "other" not in stats
    for srv in (cluster.a, cluster.b):
        (req,) = srv.sent(RequestCode.GET_BROKER_CONSUME_STATS)
        assert req.ext_fields == {"isOrder": "false"}
        assert not srv.sent(RequestCode.GET_CONSUME_STATS)
    assert not cluster.ns.sent(RequestCode.GET_ROUTEINFO_BY_TOPIC)


@pytest.mark.parametrize(
    "refusal",
    [
        fail(ResponseCode.NO_PERMISSION, "no permission for GET_BROKER_CONSUME_STATS"),
        fail(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 317 not supported"),
        lambda c: ok(c, '{"consumeStatsList":[{"g1":[{"offsetTable":{"not a queue":{}}}]}]}'),
    ],
    ids=["acl", "unsupported", "malformed"],
)
def test_consume_stats_all_falls_back_per_group_on_a_refusing_broker(cluster: Cluster, refusal: Reply) -> None:
    cluster.route("%RETRY%g1", (cluster.a, 1, 6), (cluster.b, 1, 6))
    cluster.route("%RETRY%g2", (cluster.a, 1, 6))  # not on broker-b: not asked there
    cluster.route("%RETRY%g3", (cluster.b, 1, 6))
    cluster.a.on(RequestCode.GET_BROKER_CONSUME_STATS, lambda c: ok(c, BROKER_STATS_A))
    cluster.b.on(RequestCode.GET_BROKER_CONSUME_STATS, refusal)

    def per_group(cmd: RemotingCommand) -> RemotingCommand:
        if cmd.ext_fields["consumerGroup"] == "g3":
            return cmd.reply(ResponseCode.SYSTEM_ERROR, "broken")
        return ok(cmd, stats_body("broker-b", [("T", 0, 3, 1, 0, 2)], 2.0))

    cluster.b.on(RequestCode.GET_CONSUME_STATS, per_group)
    stats = cluster.admin.consume_stats_all(["g1", "g2", "g3"])
    g1 = stats["g1"]
    assert isinstance(g1, ConsumeStats) and g1.consume_tps == 3.5
    assert g1.offsets[MessageQueue("T", "broker-b", 0)] == OffsetWrapper(3, 1, 0, 2)
    assert g1.offsets[MessageQueue("T", "broker-a", 0)] == OffsetWrapper(10, 4, 1700000000004, 4)
    assert stats["g2"] == ConsumeStats({}, 0.0)
    # the per-group error is the group's answer, as consume_stats would raise it
    g3 = stats["g3"]
    assert isinstance(g3, errors.BrokerError) and g3.code == ResponseCode.SYSTEM_ERROR and g3.addr == cluster.b.addr
    asked = sorted(r.ext_fields["consumerGroup"] for r in cluster.b.sent(RequestCode.GET_CONSUME_STATS))
    assert asked == ["g1", "g3"]
    assert not cluster.a.sent(RequestCode.GET_CONSUME_STATS)


def topic_stats_body(broker: str, rows: list[tuple[int, int, int, int]]) -> str:
    parts = [
        f'{mq_key("T", broker, q)}:{{"lastUpdateTimestamp":{last},"maxOffset":{hi},"minOffset":{lo}}}'
        for q, lo, hi, last in rows
    ]
    return f'{{"offsetTable":{{{",".join(parts)}}},"topicPutTps":0.0}}'


def test_queue_stats_asks_once_per_topic_and_broker(cluster: Cluster) -> None:
    cluster.a.on(
        RequestCode.GET_TOPIC_STATS_INFO,
        lambda c: ok(c, topic_stats_body("broker-a", [(0, 2, 250, 1700000000250), (1, 0, 0, 0)])),
    )
    cluster.b.on(RequestCode.GET_TOPIC_STATS_INFO, lambda c: ok(c, topic_stats_body("broker-b", [(1, 5, 6, 1)])))
    mqs = [MQ_B1, MQ_A0, MessageQueue("T", "broker-a", 1)]
    stats = cluster.admin.queue_stats(mqs)
    assert list(stats) == mqs
    assert stats[MQ_A0] == QueueStats(2, 250, 1700000000250)
    assert stats[MQ_B1] == QueueStats(5, 6, 1)
    assert stats[MessageQueue("T", "broker-a", 1)] == QueueStats(0, 0, 0)
    (req,) = cluster.a.sent(RequestCode.GET_TOPIC_STATS_INFO)
    assert req.ext_fields == {"topic": "T"}
    assert not cluster.a.sent(RequestCode.GET_MIN_OFFSET) and not cluster.a.sent(RequestCode.GET_MAX_OFFSET)


def test_queue_stats_falls_back_per_queue(cluster: Cluster) -> None:
    """A broker that refuses (ACL, 4.x without the topic's stats) or leaves a queue out."""
    cluster.a.on(RequestCode.GET_TOPIC_STATS_INFO, fail(ResponseCode.NO_PERMISSION, "no permission"))
    cluster.b.on(RequestCode.GET_TOPIC_STATS_INFO, lambda c: ok(c, topic_stats_body("broker-b", [(0, 1, 2, 3)])))
    for srv, lo, hi in ((cluster.a, 3, 30), (cluster.b, 4, 40)):
        srv.on(RequestCode.GET_MIN_OFFSET, lambda c, lo=lo: ok(c, offset=lo))
        srv.on(RequestCode.GET_MAX_OFFSET, lambda c, hi=hi: ok(c, offset=hi))
    stats = cluster.admin.queue_stats([MQ_A0, MessageQueue("T", "broker-b", 0), MQ_B1])
    assert stats == {
        MQ_A0: QueueStats(3, 30),
        MessageQueue("T", "broker-b", 0): QueueStats(1, 2, 3),
        MQ_B1: QueueStats(4, 40),
    }
    assert cluster.b.sent(RequestCode.GET_MAX_OFFSET)[0].ext_fields == {
        "topic": "T",
        "queueId": "1",
        "committed": "true",
    }
    # a per-queue failure is the caller's error, as with max_offset
    cluster.a.on(RequestCode.GET_MAX_OFFSET, fail(ResponseCode.SYSTEM_ERROR, "disk"))
    with pytest.raises(errors.BrokerError):
        cluster.admin.queue_stats([MQ_A0])


CONNECTION_BODY = (
    '{"connectionSet":[{"clientAddr":"127.0.0.1:53122","clientId":"127.0.0.1@4242#DEFAULT","language":"CPP",'
    '"version":333}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
    '"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
    '"subString":"a || b","subVersion":1700000000000,"tagsSet":["a","b"],"topic":"T"}}}'
)


def test_consumer_connections_merges_and_tolerates_one_broker_not_knowing(cluster: Cluster) -> None:
    cluster.route("%RETRY%g", (cluster.a, 1, 6), (cluster.b, 1, 6))
    cluster.a.on(RequestCode.GET_CONSUMER_CONNECTION_LIST, lambda c: ok(c, CONNECTION_BODY))
    cluster.b.on(RequestCode.GET_CONSUMER_CONNECTION_LIST, fail(ResponseCode.CONSUMER_NOT_ONLINE, "not online"))
    conn = cluster.admin.consumer_connections("g")
    (client,) = conn.connections
    assert (client.client_id, client.client_addr, client.language, client.version) == (
        "127.0.0.1@4242#DEFAULT",
        "127.0.0.1:53122",
        "CPP",
        333,
    )
    assert (conn.consume_type, conn.message_model, conn.consume_from_where) == (
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
    )
    assert conn.subscriptions == {"T": "a || b"}


def test_consumer_connections_all_asks_each_broker_per_group_without_routes(cluster: Cluster) -> None:
    """No bulk request exists for connections: one per group and broker, all pipelined, merged
    per group as consumer_connections merges; a group nobody serves gets its own error."""

    def answer(cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields["consumerGroup"]
        if group == "online":
            return ok(cmd, CONNECTION_BODY)
        if group == "broken":
            return cmd.reply(ResponseCode.SYSTEM_ERROR, "disk full")
        return cmd.reply(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")

    cluster.a.on(RequestCode.GET_CONSUMER_CONNECTION_LIST, answer)
    cluster.b.on(RequestCode.GET_CONSUMER_CONNECTION_LIST, fail(ResponseCode.CONSUMER_NOT_ONLINE, "not online here"))
    got = cluster.admin.consumer_connections_all(["online", "offline", "broken"])
    online = got["online"]
    assert isinstance(online, ConsumerConnection) and [c.client_id for c in online.connections] == [
        "127.0.0.1@4242#DEFAULT"
    ]
    assert isinstance(got["offline"], errors.ConsumerNotOnline)
    broken = got["broken"]
    assert isinstance(broken, errors.BrokerError) and broken.code == ResponseCode.SYSTEM_ERROR
    for srv in (cluster.a, cluster.b):
        asked = sorted(r.ext_fields["consumerGroup"] for r in srv.sent(RequestCode.GET_CONSUMER_CONNECTION_LIST))
        assert asked == ["broken", "offline", "online"]
    assert not cluster.ns.sent(RequestCode.GET_ROUTEINFO_BY_TOPIC)


def test_consumer_connections_not_online(cluster: Cluster) -> None:
    cluster.route("%RETRY%g", (cluster.a, 1, 6))
    cluster.a.on(
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        fail(ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[g] not online"),
    )
    with pytest.raises(errors.ConsumerNotOnline) as info:
        cluster.admin.consumer_connections("g")
    assert info.value.addr == cluster.a.addr


# ---------------------------------------------------------------------------------------------
# Reset


def test_reset_offset_by_time_asks_every_broker_and_merges(cluster: Cluster) -> None:
    cluster.route("T", (cluster.a, 2, 6), (cluster.b, 1, 6))
    cluster.a.on(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        lambda c: ok(c, f'{{"offsetTable":{{{mq_key("T", "broker-a", 1)}:11,{mq_key("T", "broker-a", 0)}:10}}}}'),
    )
    cluster.b.on(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        lambda c: ok(c, f'{{"offsetTable":{{{mq_key("T", "broker-b", 0)}:20}}}}'),
    )
    table = cluster.admin.reset_offset_by_time("T", "g", 1700000000000, False)
    assert table == {
        MessageQueue("T", "broker-a", 0): 10,
        MessageQueue("T", "broker-a", 1): 11,
        MessageQueue("T", "broker-b", 0): 20,
    }
    (req,) = cluster.a.sent(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)
    assert req.ext_fields == {
        "topic": "T",
        "group": "g",
        "timestamp": "1700000000000",
        "isForce": "false",
        "queueId": "-1",
        "offset": "-1",
    }


def test_reset_one_queue_of_one_broker(cluster: Cluster) -> None:
    cluster.b.on(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        lambda c: ok(c, f'{{"offsetTable":{{{mq_key("T", "broker-b", 1)}:5}}}}'),
    )
    table = cluster.admin.reset_offset_by_time("T", "g", 0, True, broker_name="broker-b", queue_id=1, offset=5)
    assert table == {MQ_B1: 5}
    assert cluster.a.sent(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET) == []
    (req,) = cluster.b.sent(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)
    assert (req.ext_fields["queueId"], req.ext_fields["offset"], req.ext_fields["isForce"]) == ("1", "5", "true")


def test_reset_without_consumers_is_consumer_not_online(cluster: Cluster) -> None:
    cluster.route("T", (cluster.a, 2, 6))
    remark = "Consumer not online, so can not reset offset, Group: g Topic: T Timestamp: 0"
    cluster.a.on(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fail(ResponseCode.CONSUMER_NOT_ONLINE, remark))
    with pytest.raises(errors.ConsumerNotOnline) as info:
        cluster.admin.reset_offset_by_time("T", "g", 0, True)
    assert info.value.addr == cluster.a.addr and info.value.remark == remark


# ---------------------------------------------------------------------------------------------
# Messages


def stored(topic: str, qid: int, offset: int, body: bytes) -> Message:
    return Message(
        topic=topic,
        body=body,
        properties={"TAGS": "a", "UNIQ_KEY": f"U{offset}"},
        queue_id=qid,
        queue_offset=offset,
        commitlog_offset=1000 + offset,
        store_timestamp=1700000000000 + offset,
        store_host="127.0.0.1:10911",
    )


PULL_EXT = {"nextBeginOffset": 12, "minOffset": 0, "maxOffset": 20, "suggestWhichBrokerId": 0}


def test_pull_decodes_messages_and_sends_a_tools_pull(cluster: Cluster) -> None:
    records = encode_message(stored("T", 0, 10, b"one")) + encode_message(stored("T", 0, 11, b"two"))
    cluster.a.on(RequestCode.PULL_MESSAGE, lambda c: c.reply(remark="FOUND", ext_fields=PULL_EXT, body=records))
    result = cluster.admin.pull(MQ_A0, 10, 2)
    assert (result.status, result.next_begin_offset, result.min_offset, result.max_offset) == ("FOUND", 12, 0, 20)
    assert [(m.queue_offset, m.body, m.broker_name, m.uniq_key) for m in result.messages] == [
        (10, b"one", "broker-a", "U10"),
        (11, b"two", "broker-a", "U11"),
    ]
    (req,) = cluster.a.sent(RequestCode.PULL_MESSAGE)
    f = req.ext_fields
    assert f["consumerGroup"] == TOOLS_CONSUMER_GROUP
    assert (f["queueOffset"], f["maxMsgNums"], f["subscription"]) == ("10", "2", "*")
    assert int(f["sysFlag"]) == 4  # SUBSCRIPTION only: no COMMIT_OFFSET, no SUSPEND
    assert f["suspendTimeoutMillis"] == "0"


def test_pull_as_another_group_changes_only_the_group(cluster: Cluster) -> None:
    """--consumer-group: the same read (no commit flag, subscription "*"), under the group given."""
    cluster.a.on(RequestCode.PULL_MESSAGE, lambda c: c.reply(remark="FOUND", ext_fields=PULL_EXT, body=b""))
    cluster.admin.pull(MQ_A0, 10, 2, group="G1")
    cluster.admin.pull_raw(MQ_A0, 12, 2, group="G2").result()
    cluster.admin.pull(MQ_A0, 14, 2)
    sent = cluster.a.sent(RequestCode.PULL_MESSAGE)
    assert [r.ext_fields["consumerGroup"] for r in sent] == ["G1", "G2", TOOLS_CONSUMER_GROUP]
    assert {
        (int(r.ext_fields["sysFlag"]), r.ext_fields["subscription"], r.ext_fields["commitOffset"]) for r in sent
    } == {(4, "*", "0")}


@pytest.mark.parametrize(
    ("code", "remark", "status"),
    [
        (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_ONE"),
        (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", "OFFSET_TOO_SMALL"),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", "NO_MATCHED_MESSAGE"),
        # without a store status in the remark, the Java client's PullStatus names stand in
        (ResponseCode.PULL_NOT_FOUND, None, "NO_NEW_MSG"),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, "", "NO_MATCHED_MSG"),
        (ResponseCode.PULL_OFFSET_MOVED, "offset moved", "OFFSET_ILLEGAL"),
        (ResponseCode.SUCCESS, None, "FOUND"),
    ],
)
def test_pull_status(cluster: Cluster, code: int, remark: str | None, status: str) -> None:
    cluster.a.on(RequestCode.PULL_MESSAGE, lambda c: c.reply(code, remark, ext_fields=PULL_EXT))
    result = cluster.admin.pull(MQ_A0, 20)
    assert (result.status, result.next_begin_offset, result.messages) == (status, 12, [])


def test_pull_rejected_by_a_slave_says_why(cluster: Cluster) -> None:
    """A 5.x slave (slaveReadEnable=false, the default) rejects every pull as "system busy";
    the error says what it is instead. Other refusals keep the broker's words."""
    busy = "[REJECTREQUEST]system busy, start flow control for a while"
    cluster.a.on(RequestCode.PULL_MESSAGE, fail(ResponseCode.SYSTEM_BUSY, busy))
    with pytest.raises(errors.BrokerError) as info:
        cluster.admin.pull(MQ_A0, 0)
    assert info.value.code == ResponseCode.SYSTEM_BUSY and info.value.addr == cluster.a.addr
    assert "slave that serves no messages (5.x slaves need slaveReadEnable=true)" in str(info.value)
    assert "flow control" not in str(info.value)
    cluster.a.on(RequestCode.PULL_MESSAGE, fail(ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy"))
    with pytest.raises(errors.BrokerError, match=r"\[PC_SYNCHRONIZED\]broker busy"):
        cluster.admin.pull(MQ_A0, 0)


def test_pull_error_codes_raise(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.PULL_MESSAGE, fail(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "no group"))
    with pytest.raises(errors.SubscriptionGroupNotExist):
        cluster.admin.pull(MQ_A0, 0)


def send_reply(srv: ScriptedServer, code: int = ResponseCode.SUCCESS) -> Reply:
    counters: dict[str, int] = {}

    def reply(cmd: RemotingCommand) -> RemotingCommand:
        qid = cmd.ext_fields["e"]
        counters[qid] = counters.get(qid, -1) + 1
        return cmd.reply(code, ext_fields={"msgId": "7F00000100002A9F0000000000000000", "queueId": qid,
                                            "queueOffset": counters[qid]})  # fmt: skip

    return reply


def test_send_round_robins_over_writable_queues(cluster: Cluster) -> None:
    cluster.route("T", (cluster.a, 2, 6), (cluster.b, 2, 4))  # broker-b is read-only
    cluster.a.on(RequestCode.SEND_MESSAGE_V2, send_reply(cluster.a))
    msg = Message("T", b"payload", {"TAGS": "x", "KEYS": "k1 k2"})
    results = [cluster.admin.send("T", msg) for _ in range(4)]
    assert [r.queue.queue_id for r in results] in ([0, 1, 0, 1], [1, 0, 1, 0])
    assert all(r.queue.broker_name == "broker-a" for r in results)
    assert sorted(r.queue_offset for r in results) == [0, 0, 1, 1]
    assert msg.properties == {"TAGS": "x", "KEYS": "k1 k2"}  # the caller's message is untouched
    sent = cluster.a.sent(RequestCode.SEND_MESSAGE_V2)
    props = parse_properties(sent[0].ext_fields["i"])
    assert props["TAGS"] == "x" and props["KEYS"] == "k1 k2" and len(props["UNIQ_KEY"]) == 32
    assert results[0].uniq_key == props["UNIQ_KEY"]
    assert sent[0].body == b"payload"
    assert (sent[0].ext_fields["b"], sent[0].ext_fields["f"], sent[0].ext_fields["n"]) == ("T", "0", "broker-a")
    assert len({parse_properties(s.ext_fields["i"])["UNIQ_KEY"] for s in sent}) == 4
    assert len(cluster.ns.sent(RequestCode.GET_ROUTEINFO_BY_TOPIC)) == 1  # the route is reused


def test_send_to_a_given_queue_keeps_an_existing_uniq_key(cluster: Cluster) -> None:
    cluster.b.on(RequestCode.SEND_MESSAGE_V2, send_reply(cluster.b, ResponseCode.FLUSH_DISK_TIMEOUT))
    result = cluster.admin.send("T", Message("T", b"x", {"UNIQ_KEY": "ABC"}), MQ_B1)
    assert result.queue == MQ_B1 and result.uniq_key == "ABC"
    assert result.msg_id == "7F00000100002A9F0000000000000000"


def test_send_failure_raises(cluster: Cluster) -> None:
    cluster.a.on(
        RequestCode.SEND_MESSAGE_V2, fail(ResponseCode.NO_PERMISSION, "the broker sending message is forbidden")
    )
    with pytest.raises(errors.NoPermission) as info:
        cluster.admin.send("T", Message("T", b"x"), MQ_A0)
    assert info.value.addr == cluster.a.addr


def test_send_back_points_the_broker_at_the_stored_message(cluster: Cluster) -> None:
    cluster.a.on(RequestCode.CONSUMER_SEND_MSG_BACK, lambda c: ok(c))
    msg = stored("T", 0, 7, b"x")
    msg.broker_name = "broker-a"
    cluster.admin.send_back("sms", msg, 3)
    (req,) = cluster.a.sent(RequestCode.CONSUMER_SEND_MSG_BACK)
    assert req.ext_fields == {
        "offset": "1007",
        "group": "sms",
        "delayLevel": "3",
        "originMsgId": "U7",
        "originTopic": "T",
        "unitMode": "false",
        "maxReconsumeTimes": "16",
    }
    with pytest.raises(errors.UsageError):
        cluster.admin.send_back("sms", stored("T", 0, 7, b"x"))


# ---------------------------------------------------------------------------------------------
# Concurrency and wiring


def test_many_threads_share_one_admin(cluster: Cluster) -> None:
    """Replies come back late and out of order; every caller still gets its own answer."""
    rng = random.Random(7)
    rng_lock = threading.Lock()

    def slow_max(cmd: RemotingCommand) -> None:
        with rng_lock:
            delay = rng.random() * 0.02
        reply = ok(cmd, offset=int(cmd.ext_fields["queueId"]) * 10)
        reply.opaque = cmd.opaque
        sock = cluster.a.socks[-1]
        threading.Timer(delay, lambda: sock.sendall(encode(reply))).start()

    cluster.a.on(RequestCode.GET_MAX_OFFSET, slow_max)
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda q: cluster.admin.max_offset(MessageQueue("T", "broker-a", q)), range(200)))
    assert got == [q * 10 for q in range(200)]
    assert len(cluster.a.socks) == 1


def test_connect_picks_the_remoting_backend(cluster: Cluster) -> None:
    admin = connect(cluster.ns.addr, timeout=1.5)
    try:
        assert isinstance(admin, RemotingAdmin)
        assert admin.address == cluster.ns.addr and admin.timeout == 1.5
        assert admin.list_groups() == ["g1", "g2"]
    finally:
        admin.close()


def test_half_given_credentials_are_a_usage_error() -> None:
    with pytest.raises(errors.UsageError):
        RemotingAdmin("127.0.0.1:9876", access_key="ak")


def test_signed_admin_signs_namesrv_and_broker_requests(cluster: Cluster) -> None:
    from mqadmin.protocol import acl

    cluster.a.on(RequestCode.GET_MIN_OFFSET, lambda c: ok(c, offset=0))
    admin = RemotingAdmin(cluster.ns.addr, access_key="ak", secret_key="sk")
    try:
        admin.min_offset(MQ_A0)
    finally:
        admin.close()
    for req in cluster.ns.requests + cluster.a.requests:
        assert acl.verify(req.ext_fields, req.body, "sk"), req


def test_a_dead_broker_fails_fast_and_names_itself(cluster: Cluster) -> None:
    cluster.route("T", (cluster.a, 1, 6), (cluster.b, 1, 6))
    cluster.a.on(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, lambda c: ok(c, '{"offsetTable":{}}'))
    cluster.b.close()
    started = time.monotonic()
    with pytest.raises(errors.ConnectError) as info:
        cluster.admin.reset_offset_by_time("T", "g", 0, True)
    assert cluster.b.addr in str(info.value)
    assert time.monotonic() - started < WAIT


def test_an_unreachable_broker_address_is_looked_up_again(cluster: Cluster) -> None:
    """After a broker moved (restart on another port), the next call follows the name server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    where = {"addr": dead}
    cluster.ns.on(
        RequestCode.GET_BROKER_CLUSTER_INFO,
        lambda c: ok(
            c, f'{{"brokerAddrTable":{{"broker-a":{{"brokerAddrs":{{0:"{where["addr"]}"}},"brokerName":"broker-a"}}}}}}'
        ),
    )
    cluster.a.on(RequestCode.GET_MIN_OFFSET, lambda c: ok(c, offset=4))
    with pytest.raises(errors.ConnectError, match=f"cannot connect to {dead}"):
        cluster.admin.min_offset(MQ_A0)
    where["addr"] = cluster.a.addr
    assert cluster.admin.min_offset(MQ_A0) == 4
    assert len(cluster.ns.sent(RequestCode.GET_BROKER_CLUSTER_INFO)) == 2


# ---------------------------------------------------------------------------------------------
# The same questions to the embedded mock and, over the wire, to the mock server


def _normal(value: object) -> object:
    """Comparable forms of the facade's answers (errors by class and code)."""
    if isinstance(value, errors.MqadminError):
        return (type(value).__name__, getattr(value, "code", None))
    if isinstance(value, ConsumeStats):
        return {mq: (w.broker_offset, w.consumer_offset, w.last_timestamp) for mq, w in value.offsets.items()}
    if isinstance(value, PullResult):
        msgs = [(m.queue_offset, m.body, m.msg_id, m.store_timestamp, m.broker_name) for m in value.messages]
        return (value.status, value.next_begin_offset, value.min_offset, value.max_offset, msgs)
    if isinstance(value, TopicRoute):
        return (value.queues, [(b.broker_name, b.cluster) for b in value.brokers])
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], BrokerInfo):
        return [(i.broker_name, i.cluster, i.version) for i in value]
    return value


@pytest.mark.integration
@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_remoting_over_the_mock_server_answers_like_the_embedded_mock(
    version: str, make_store: Callable[..., Any]
) -> None:
    store = make_store(version, count=200, groups={"g1": int(time.time() * 1000) - 1800_000})
    cluster = store.open(writable=True)
    mq = MessageQueue("TopicTest", "broker-b", 2)
    middle = (store.start_ms + store.end_ms) // 2
    questions: list[tuple[str, tuple[object, ...]]] = [
        ("topic_route", ("TopicTest",)),
        ("topic_route", ("nope",)),
        ("cluster_brokers", ()),
        ("list_topics", ()),
        ("list_groups", ()),
        ("min_offset", (mq,)),
        ("max_offset", (mq,)),
        ("earliest_store_time", (mq,)),
        ("search_offset", (mq, middle)),
        ("consumer_offset", ("g1", mq)),
        ("consumer_offset", ("nobody", mq)),
        ("consume_stats", ("g1",)),
        ("consume_stats", ("g1", "TopicTest")),
        ("consume_stats_all", (["g1"],)),
        ("consumer_connections_all", (["g1", "nobody"],)),
        ("queue_stats", ([mq, MessageQueue("TopicTest", "broker-a", 0)],)),
        ("consumer_connections", ("g1",)),
        ("pull", (mq, 3, 4)),
        ("pull", (mq, 10**6)),
        ("reset_offset_by_time", ("TopicTest", "g1", middle, True)),
        ("consumer_offset", ("g1", mq)),
    ]
    try:
        with MockServer(cluster, namesrv_port=0) as server:
            embedded = MockAdmin(cluster, "mock")
            remote = RemotingAdmin(server.namesrv_addr, timeout=WAIT)
            try:
                for name, args in questions:
                    answers = []
                    for admin in (embedded, remote):
                        try:
                            answers.append(_normal(getattr(admin, name)(*args)))
                        except errors.MqadminError as exc:
                            answers.append(_normal(exc))
                    assert answers[0] == answers[1], (name, args)
                # Known difference: for a group with no route at all the remoting backend asks every
                # broker (and finds nothing) where the embedded mock raises TopicNotExist; commands
                # turn both into the same "unknown consumer group" usage error.
                assert remote.consume_stats("nobody").offsets == {}
                sent = remote.send("TopicTest", Message("TopicTest", b"over the wire", {"TAGS": "w"}), mq)
                (got,) = embedded.pull(mq, sent.queue_offset, 1).messages
                assert (got.body, got.uniq_key, got.msg_id) == (b"over the wire", sent.uniq_key, sent.msg_id)
            finally:
                remote.close()
    finally:
        cluster.close()
