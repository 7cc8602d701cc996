"""The mock broker served over TCP, driven with raw frames as a client of any language sends them.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with the
codec only, so these tests check the wire (frames and headers, codes, fastjson bodies, pull
statuses and long polling, and what the C++ and Java clients need of a broker), not our client.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mqadmin import fastjson
from mqadmin.message import format_properties, iter_messages, java_string_hash
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.model import RETRY_PREFIX
from mqadmin.mock.server import MockServer, ServerReady, serve_store, tls_context
from mqadmin.model import Message, MessageQueue
from mqadmin.remoting import acl
from mqadmin.remoting.codec import FLAG_ONEWAY, FLAG_RESPONSE, FrameDecoder, RemotingCommand, encode
from mqadmin.remoting.codes import MQVersion, RequestCode, ResponseCode

pytestmark = pytest.mark.integration

TOPIC = "TopicTest"
GROUP = "g1"
QUEUES = 2
CPP_VERSION = int(MQVersion.V4_6_0)  # what rocketmq-client-python sends
JAVA_VERSION = int(MQVersion.V5_3_3)
REPLY_TIMEOUT_S = 10.0
PULL_SUBSCRIPTION_SUSPEND = 0x4 | 0x2
PULL_COMMIT = 0x1
PULL_SUBSCRIPTION = 0x4


Serve = Callable[..., MockServer]


class RawClient:
    """A bare remoting peer: sends frames, matches replies by opaque, queues server requests."""

    def __init__(self, addr: str, *, wrap: Callable[[socket.socket], socket.socket] | None = None) -> None:
        peer_host, peer_port = addr.rsplit(":", 1)
        sock = socket.create_connection((peer_host, int(peer_port)), timeout=REPLY_TIMEOUT_S)
        self.sock = wrap(sock) if wrap else sock
        self.sock.settimeout(None)
        host, port = self.sock.getsockname()[:2]
        self.local = f"{host}:{port}"
        self._decoder = FrameDecoder()
        self._replies: dict[int, RemotingCommand] = {}
        self._cond = threading.Condition()
        self.requests: queue.Queue[RemotingCommand] = queue.Queue()
        self.eof = threading.Event()
        self._opaque = 100
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                for cmd in self._decoder.feed(data):
                    if cmd.is_response:
                        with self._cond:
                            self._replies[cmd.opaque] = cmd
                            self._cond.notify_all()
                    else:
                        self.requests.put(cmd)
        except OSError:
            pass
        finally:
            self.eof.set()
            with self._cond:
                self._cond.notify_all()

    def send(self, cmd: RemotingCommand) -> int:
        self._opaque += 1
        cmd.opaque = self._opaque
        self.sock.sendall(encode(cmd))
        return cmd.opaque

    def wait(self, opaque: int, timeout: float = REPLY_TIMEOUT_S) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        with self._cond:
            while opaque not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof.is_set():
                    raise AssertionError(f"no reply to opaque {opaque} (eof={self.eof.is_set()})")
                self._cond.wait(left)
            return self._replies.pop(opaque)

    def call(
        self,
        code: int,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        version: int = JAVA_VERSION,
        language: str = "JAVA",
        timeout: float = REPLY_TIMEOUT_S,
    ) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext, body, version=version, language=language)
        return self.wait(self.send(cmd), timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._reader.join(5)


def _wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for state the server shows, instead of sleeping for it."""
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _held_watermarks(server: MockServer) -> list[int]:
    """The offsets the held pulls wait past, one per held pull."""
    with server.long_polling._arrival:
        return [h.watermark for held in server.long_polling._held.values() for h in held]


def make_cluster(root: Path, version: str) -> MockCluster:
    """Two brokers with TOPIC; GROUP exists (5.3 refuses offset updates for unknown groups)."""
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version=version)
    cluster.create_topic(TOPIC, QUEUES)
    for broker in cluster.brokers.values():
        broker.ensure_group(GROUP)
    return cluster


Clients = Callable[..., RawClient]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., MockServer]]:
    """serve(version="5.3.3", **server_kwargs) -> a started server over a fresh two-broker store."""
    started: list[tuple[MockServer, MockCluster]] = []

    def start(version: str = "5.3.3", **kwargs: Any) -> MockServer:
        cluster = make_cluster(tmp_path / f"store{len(started)}", version)
        server = MockServer(cluster, namesrv_port=0, **kwargs).start()
        started.append((server, cluster))
        return server

    yield start
    for server, cluster in started:
        server.stop()
        cluster.close()


@pytest.fixture
def clients() -> Iterator[Callable[..., RawClient]]:
    made: list[RawClient] = []

    def connect(addr: str, **kwargs: Any) -> RawClient:
        client = RawClient(addr, **kwargs)
        made.append(client)
        return client

    yield connect
    for c in made:
        c.close()


def send_v2(broker: RawClient, topic: str, qid: int, body: bytes, tags: str | None = None) -> RemotingCommand:
    props = {"UNIQ_KEY": f"KEY{qid}{body.hex()}", "WAIT": "true"}
    if tags:
        props["TAGS"] = tags
    ext: dict[str, object] = {
        "a": "pg",
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": qid,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": format_properties(props),
        "j": 0,
        "k": False,
        "m": False,
    }
    return broker.call(RequestCode.SEND_MESSAGE_V2, ext, body)


def pull(
    broker: RawClient,
    offset: int,
    *,
    qid: int = 0,
    sys_flag: int = PULL_SUBSCRIPTION,
    suspend_ms: int = 0,
    subscription: str = "*",
    commit: int = 0,
    group: str = GROUP,
    timeout: float = REPLY_TIMEOUT_S,
) -> RemotingCommand:
    ext: dict[str, object] = {
        "consumerGroup": group,
        "topic": TOPIC,
        "queueId": qid,
        "queueOffset": offset,
        "maxMsgNums": 32,
        "sysFlag": sys_flag,
        "commitOffset": commit,
        "suspendTimeoutMillis": suspend_ms,
        "subscription": subscription,
        "subVersion": 0,
    }
    return broker.call(RequestCode.PULL_MESSAGE, ext, timeout=timeout)


def cpp_heartbeat(client_id: str, group: str = GROUP, topic: str = TOPIC) -> bytes:
    """A heartbeat as the C++ client writes it: enum ordinals, subVersion as a string
    (rocketmq-client-cpp's HeartbeatData; Java's ConsumerData.java sends enum names)."""
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": 0,
                    "consumeType": 1,
                    "groupName": group,
                    "messageModel": 1,
                    "subscriptionDataSet": [{"subString": "*", "subVersion": "1700000000000", "topic": topic}],
                }
            ],
            "producerDataSet": [],
        }
    ).encode()


def java_heartbeat(client_id: str, group: str = GROUP, topic: str = TOPIC) -> bytes:
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "codeSet": [java_string_hash("TagA")],
                            "expressionType": "TAG",
                            "subString": "TagA",
                            "subVersion": 1700000000000,
                            "tagsSet": ["TagA"],
                            "topic": topic,
                        }
                    ],
                    "unitMode": False,
                }
            ],
            "heartbeatFingerprint": 0,
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    ).encode()


def seed(server: MockServer, count: int, qid: int = 0, broker: str = "broker-a", tags: str = "TagA") -> None:
    with server.lock:
        for i in range(count):
            msg = Message(topic=TOPIC, body=f"m{i}".encode(), properties={"TAGS": tags}, queue_id=qid)
            server.cluster.brokers[broker].put_message(msg)


# ---------------------------------------------------------------------------------------------
# Name server


def test_route_standard_json_for_new_clients_and_bare_keys_for_old(serve: Serve, clients: Clients) -> None:
    server = serve()
    ns = clients(server.namesrv_addr)
    new = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    assert new.code == ResponseCode.SUCCESS and new.flag == FLAG_RESPONSE
    route = json.loads(new.body)  # standard JSON: quoted broker-id keys
    assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b"]
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == server.broker_addrs["broker-a"]
    assert {q["readQueueNums"] for q in route["queueDatas"]} == {QUEUES}

    old = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, version=CPP_VERSION, language="CPP")
    assert b'"brokerAddrs":{0:' in old.body
    asked = ns.call(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC, "acceptStandardJsonOnly": True}, version=CPP_VERSION
    )
    assert b'"brokerAddrs":{"0":' in asked.body


def test_route_of_retry_and_default_topics_and_unknown_topic(serve: Serve, clients: Clients) -> None:
    server = serve()
    ns = clients(server.namesrv_addr)
    retry = json.loads(ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": RETRY_PREFIX + "newgroup"}).body)
    assert {(q["brokerName"], q["readQueueNums"], q["perm"]) for q in retry["queueDatas"]} == {
        ("broker-a", 1, 6),
        ("broker-b", 1, 6),
    }
    tbw = json.loads(ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}).body)
    assert {q["writeQueueNums"] for q in tbw["queueDatas"]} == {8}
    missing = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark == (
        "No topic route info in name server for the topic: Nope\n"
        "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
    )


def test_cluster_info_topic_list_and_kv(serve: Serve, clients: Clients) -> None:
    server = serve()
    ns = clients(server.namesrv_addr)
    info = ns.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    assert b'"brokerAddrs":{0:' in info.body  # ClusterInfo is never standardised
    doc = fastjson.loads(info.body)
    assert doc["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
    assert doc["brokerAddrTable"]["broker-b"]["brokerAddrs"][0] == server.broker_addrs["broker-b"]
    topics = json.loads(ns.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)
    assert topics == {"topicList": [RETRY_PREFIX + GROUP, TOPIC]}
    kv = ns.call(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC})
    assert kv.code == ResponseCode.QUERY_NOT_FOUND
    assert ns.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "x"}).code == ResponseCode.QUERY_NOT_FOUND
    assert ns.call(RequestCode.REGISTER_BROKER, {"brokerName": "x"}).code == ResponseCode.SUCCESS
    assert ns.call(RequestCode.PULL_MESSAGE, {}).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


# ---------------------------------------------------------------------------------------------
# Send and pull


def test_send_v1_and_v2_then_pull_found(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    v1_props = format_properties({"TAGS": "TagA", "KEYS": "k1"})
    v1 = broker.call(
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": "pg",
            "topic": TOPIC,
            "queueId": 0,
            "sysFlag": 0,
            "bornTimestamp": 1,
            "flag": 7,
            "properties": v1_props,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
        },
        b"first",
    )
    assert v1.code == ResponseCode.SUCCESS
    assert v1.ext_fields["queueId"] == "0" and v1.ext_fields["queueOffset"] == "0"
    assert len(v1.ext_fields["msgId"]) == 32 and v1.ext_fields["transactionId"]
    v2 = send_v2(broker, TOPIC, 0, b"second", tags="TagB")
    assert v2.code == ResponseCode.SUCCESS and v2.ext_fields["queueOffset"] == "1"
    assert v2.ext_fields["transactionId"] == "KEY0" + b"second".hex()

    found = pull(broker, 0)
    assert found.code == ResponseCode.SUCCESS and found.remark == "FOUND"
    assert found.ext_fields == {
        "nextBeginOffset": "2",
        "minOffset": "0",
        "maxOffset": "2",
        "suggestWhichBrokerId": "0",
        "topicSysFlag": "0",
        "groupSysFlag": "0",
    }
    msgs = list(iter_messages(found.body))
    assert [(m.body, m.queue_offset, m.flag) for m in msgs] == [(b"first", 0, 7), (b"second", 1, 0)]
    assert msgs[0].msg_id == v1.ext_fields["msgId"]
    assert msgs[0].born_host == broker.local  # the connection's remote address
    assert msgs[0].store_host == server.broker_addrs["broker-a"]


def test_pull_not_found_moved_and_filtered(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    seed(server, 3, tags="TagA")
    at_end = pull(broker, 3)
    assert (at_end.code, at_end.remark, at_end.ext_fields["nextBeginOffset"]) == (
        ResponseCode.PULL_NOT_FOUND,
        "OFFSET_OVERFLOW_ONE",
        "3",
    )
    beyond = pull(broker, 9)
    assert (beyond.code, beyond.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "3")
    empty = pull(broker, 5, qid=1)
    assert (empty.code, empty.remark, empty.ext_fields["nextBeginOffset"]) == (
        ResponseCode.PULL_OFFSET_MOVED,
        "NO_MESSAGE_IN_QUEUE",
        "0",
    )
    assert pull(broker, 0, qid=1).code == ResponseCode.PULL_NOT_FOUND
    other_tag = pull(broker, 0, subscription="TagB || TagC")
    assert (other_tag.code, other_tag.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "3")
    both = pull(broker, 0, subscription="TagB || TagA")
    assert len(list(iter_messages(both.body))) == 3
    bad_queue = pull(broker, 0, qid=QUEUES)
    assert bad_queue.code == ResponseCode.INVALID_PARAMETER
    no_sub = pull(broker, 0, sys_flag=0)
    assert no_sub.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


def test_numeric_ext_values_as_the_cpp_client_sends_them(serve: Serve, clients: Clients) -> None:
    """The C++ client writes some header values as JSON numbers, where Java writes strings
    (remoting: RemotingCommand.java); they must still parse."""
    server = serve()
    seed(server, 2)
    broker = clients(server.broker_addrs["broker-a"])
    header = {
        "code": 11,
        "extFields": {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": 0,
            "queueOffset": "0",
            "maxMsgNums": 32,
            "sysFlag": 4,
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
            "AccessKey": "",
            "OnsChannel": "ALIYUN",
            "Signature": "x",
        },
        "flag": 0,
        "language": "CPP",
        "opaque": 4242,
        "version": CPP_VERSION,
    }
    raw = json.dumps(header).encode()
    broker.sock.sendall(struct.pack(">ii", 4 + len(raw), len(raw)) + raw)
    reply = broker.wait(4242)
    assert reply.code == ResponseCode.SUCCESS and len(list(iter_messages(reply.body))) == 2


def test_long_poll_released_by_a_send(serve: Serve, clients: Clients) -> None:
    server = serve()
    consumer = clients(server.broker_addrs["broker-a"])
    producer = clients(server.broker_addrs["broker-a"])
    results: list[tuple[RemotingCommand, float]] = []

    def poll() -> None:
        t0 = time.monotonic()
        results.append(
            (pull(consumer, 0, sys_flag=PULL_SUBSCRIPTION_SUSPEND, suspend_ms=10_000), time.monotonic() - t0)
        )

    waiter = threading.Thread(target=poll)
    waiter.start()
    _wait_until(lambda: server.long_polling.count == 1, "the pull to be held")
    assert not results, "the pull must be held while the queue is empty"
    assert consumer.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).ext_fields["offset"] == "0"
    send_v2(producer, TOPIC, 0, b"wake")
    waiter.join(REPLY_TIMEOUT_S)
    reply, elapsed = results[0]
    assert reply.code == ResponseCode.SUCCESS and elapsed < 5
    assert [m.body for m in iter_messages(reply.body)] == [b"wake"]


def test_long_poll_times_out_with_not_found(serve: Serve, clients: Clients) -> None:
    server = serve()
    seed(server, 1)
    consumer = clients(server.broker_addrs["broker-a"])
    t0 = time.monotonic()
    reply = pull(consumer, 1, sys_flag=PULL_SUBSCRIPTION_SUSPEND, suspend_ms=500)
    elapsed = time.monotonic() - t0
    assert reply.code == ResponseCode.PULL_NOT_FOUND and reply.ext_fields["nextBeginOffset"] == "1"
    assert 0.45 <= elapsed < 3


def test_long_poll_keeps_holding_through_unwanted_tags(serve: Serve, clients: Clients) -> None:
    server = serve()
    consumer = clients(server.broker_addrs["broker-a"])
    producer = clients(server.broker_addrs["broker-a"])
    results: list[RemotingCommand] = []
    waiter = threading.Thread(
        target=lambda: results.append(
            pull(consumer, 0, sys_flag=PULL_SUBSCRIPTION_SUSPEND, suspend_ms=10_000, subscription="TagA")
        )
    )
    waiter.start()
    _wait_until(lambda: _held_watermarks(server) == [0], "the pull to be held")
    send_v2(producer, TOPIC, 0, b"skip", tags="TagB")
    # the long-polling thread looked at the unwanted message and holds on, waiting past it
    _wait_until(lambda: _held_watermarks(server) == [1], "the unwanted message to be looked at")
    assert not results
    send_v2(producer, TOPIC, 0, b"take", tags="TagA")
    waiter.join(REPLY_TIMEOUT_S)
    assert results[0].code == ResponseCode.SUCCESS
    assert [m.body for m in iter_messages(results[0].body)] == [b"take"]
    assert results[0].ext_fields["nextBeginOffset"] == "2"


def test_pull_commit_offset_flag_and_offset_requests(serve: Serve, clients: Clients) -> None:
    server = serve()
    seed(server, 4)
    broker = clients(server.broker_addrs["broker-a"])
    q = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0}
    assert broker.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": False}).code == (
        ResponseCode.QUERY_NOT_FOUND
    )
    pull(broker, 2, sys_flag=PULL_SUBSCRIPTION | PULL_COMMIT, commit=2)
    assert broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "2"
    update = broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 3})
    assert update.code == ResponseCode.SUCCESS and update.keep_empty_ext_fields
    assert broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "3"
    assert broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC}).code == (
        ResponseCode.INVALID_PARAMETER
    )

    mq = {"topic": TOPIC, "queueId": 0}
    assert broker.call(RequestCode.GET_MIN_OFFSET, mq).ext_fields["offset"] == "0"
    assert broker.call(RequestCode.GET_MAX_OFFSET, {**mq, "committed": True}).ext_fields["offset"] == "4"
    with server.lock:
        times = [server.cluster.brokers["broker-a"].store_time_at(TOPIC, 0, i) or 0 for i in range(4)]
    earliest = broker.call(RequestCode.GET_EARLIEST_MSG_STORETIME, mq)
    assert earliest.ext_fields["timestamp"] == str(times[0])
    lower = broker.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**mq, "timestamp": times[0] - 1})
    assert lower.ext_fields["offset"] == "0"
    after = broker.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**mq, "timestamp": times[-1] + 10_000})
    assert after.ext_fields["offset"] == "4"  # 5.1+ LOWER: max offset after the last message
    upper = broker.call(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**mq, "timestamp": times[-1] + 10_000, "boundaryType": "upper"}
    )
    assert upper.ext_fields["offset"] == "3"

    offsets = fastjson.loads(broker.call(RequestCode.GET_ALL_CONSUMER_OFFSET).body)
    assert offsets["offsetTable"] == {f"{TOPIC}@{GROUP}": {0: 3}}
    assert offsets["groupTopicMap"] == {GROUP: [TOPIC]}


def test_view_by_id_send_back_and_batch(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    sent = send_v2(broker, TOPIC, 1, b"original", tags="TagA")
    (msg,) = iter_messages(pull(broker, 0, qid=1).body)
    viewed = broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": msg.commitlog_offset})
    (again,) = iter_messages(viewed.body)
    assert again.msg_id == sent.ext_fields["msgId"] and again.body == b"original"
    missing = broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 999_999})
    assert missing.code == ResponseCode.SYSTEM_ERROR

    back = broker.call(
        RequestCode.CONSUMER_SEND_MSG_BACK,
        {
            "offset": msg.commitlog_offset,
            "group": "g2",
            "delayLevel": 0,
            "originMsgId": msg.msg_id,
            "originTopic": TOPIC,
            "unitMode": False,
            "maxReconsumeTimes": 16,
        },
    )
    assert back.code == ResponseCode.SUCCESS
    with server.lock:
        retry = server.cluster.brokers["broker-a"].pull(None, RETRY_PREFIX + "g2", 0, 0)
    (copy,) = [m for r in retry.records for m in iter_messages(r)]
    assert copy.reconsume_times == 1 and copy.properties["RETRY_TOPIC"] == TOPIC

    def record(body: bytes, props: dict[str, str]) -> bytes:
        p = format_properties(props).encode()
        size = 20 + len(body) + 2 + len(p)
        return struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p

    batch_body = record(b"b1", {"UNIQ_KEY": "U1"}) + record(b"b2", {"UNIQ_KEY": "U2"})
    ext: dict[str, object] = {
        "a": "pg",
        "b": TOPIC,
        "c": "TBW102",
        "d": 4,
        "e": 0,
        "f": 0,
        "g": 0,
        "h": 0,
        "i": "",
        "m": True,
    }
    batch = broker.call(RequestCode.SEND_BATCH_MESSAGE, ext, batch_body)
    assert batch.code == ResponseCode.SUCCESS and len(batch.ext_fields["msgId"].split(",")) == 2
    bodies = [(m.body, m.uniq_key) for m in iter_messages(pull(broker, 0, qid=0).body)]
    assert bodies == [(b"b1", "U1"), (b"b2", "U2")]


def test_send_refuses_bad_topics_and_creates_new_ones(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-b"])
    bad = send_v2(broker, "../escape", 0, b"x")
    # 5.3.2+ answers INVALID_PARAMETER (AbstractSendMessageProcessor.msgCheck); 4.x SYSTEM_ERROR
    assert bad.code == ResponseCode.INVALID_PARAMETER and "illegal characters" in (bad.remark or "")
    created = send_v2(broker, "Fresh", 3, b"x")
    assert created.code == ResponseCode.SUCCESS
    ns = clients(server.namesrv_addr)
    route = json.loads(ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Fresh"}).body)
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [("broker-b", 4)]


# ---------------------------------------------------------------------------------------------
# Clients, groups, stats


def test_heartbeat_consumer_list_connections_and_disconnect(serve: Serve, clients: Clients) -> None:
    server = serve()
    cpp = clients(server.broker_addrs["broker-a"])
    java = clients(server.broker_addrs["broker-a"])
    admin = clients(server.broker_addrs["broker-a"])
    hb = cpp.call(
        RequestCode.HEART_BEAT, body=cpp_heartbeat("10.0.0.9@4242#DEFAULT"), version=CPP_VERSION, language="CPP"
    )
    assert hb.code == ResponseCode.SUCCESS
    java.call(RequestCode.HEART_BEAT, body=java_heartbeat("10.0.0.8@777"))
    notified = cpp.requests.get(timeout=REPLY_TIMEOUT_S)  # the group changed when the Java client joined
    assert notified.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED and notified.flag == FLAG_ONEWAY
    assert notified.ext_fields == {"consumerGroup": GROUP}

    ids = json.loads(admin.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}).body)
    assert ids == {"consumerIdList": ["10.0.0.8@777", "10.0.0.9@4242#DEFAULT"]}
    conn = fastjson.loads(admin.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}).body)
    rows = {c["clientId"]: c for c in conn["connectionSet"]}
    assert rows["10.0.0.9@4242#DEFAULT"] == {
        "clientAddr": cpp.local,
        "clientId": "10.0.0.9@4242#DEFAULT",
        "language": "CPP",
        "version": CPP_VERSION,
    }
    assert rows["10.0.0.8@777"]["language"] == "JAVA"
    assert conn["consumeType"] == "CONSUME_PASSIVELY" and conn["messageModel"] == "CLUSTERING"
    assert conn["subscriptionTable"][TOPIC]["topic"] == TOPIC
    who = json.loads(admin.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}).body)
    assert who == {"groupList": [GROUP]}
    groups = fastjson.loads(admin.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert GROUP in groups["subscriptionGroupTable"]

    java.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "10.0.0.8@777", "consumerGroup": GROUP})
    cpp.close()
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while time.monotonic() < deadline:
        gone = admin.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
        if gone.code != ResponseCode.SUCCESS:
            break
        time.sleep(0.05)
    assert gone.code == ResponseCode.SYSTEM_ERROR and gone.remark == f"no consumer for this group, {GROUP}"
    offline = admin.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE


def test_pull_uses_the_heartbeat_subscription_without_the_subscription_flag(serve: Serve, clients: Clients) -> None:
    server = serve()
    seed(server, 2, tags="TagB")
    seed(server, 1, tags="TagA")
    java = clients(server.broker_addrs["broker-a"])
    java.call(RequestCode.HEART_BEAT, body=java_heartbeat("c1"))  # subscribes TagA only
    reply = pull(java, 0, sys_flag=0)
    assert [m.tags for m in iter_messages(reply.body)] == ["TagA"]


def test_consume_stats_and_topic_stats_bodies(serve: Serve, clients: Clients) -> None:
    server = serve("4.9.8")
    seed(server, 5, qid=0)
    seed(server, 2, qid=1)
    broker = clients(server.broker_addrs["broker-a"])
    for qid, offset in ((0, 3), (1, 2)):
        broker.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": qid, "commitOffset": offset},
        )
    stats = fastjson.loads(broker.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP}).body)
    table = fastjson.mq_table(stats["offsetTable"])
    row = table[MessageQueue(TOPIC, "broker-a", 0)]
    assert (row["brokerOffset"], row["consumerOffset"]) == (5, 3)
    assert "pullOffset" not in row  # 4.x OffsetWrapper has no pullOffset
    assert row["lastTimestamp"] > 0 and isinstance(stats["consumeTps"], float)
    assert (
        b'{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
        in broker.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC}).body
    )

    topic_stats = fastjson.loads(broker.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC}).body)
    per_queue = fastjson.mq_table(topic_stats["offsetTable"])
    assert per_queue[MessageQueue(TOPIC, "broker-a", 1)]["maxOffset"] == 2
    assert broker.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"}).code == ResponseCode.TOPIC_NOT_EXIST
    runtime = fastjson.loads(broker.call(RequestCode.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert runtime["brokerVersionDesc"] == "V4_9_8" and runtime["brokerVersion"] == str(int(MQVersion.V4_9_8))


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_broker_consume_stats_lists_every_group_as_per_group_stats_do(
    serve: Serve, clients: Clients, version: str
) -> None:
    server = serve(version)
    seed(server, 5, qid=0)
    seed(server, 2, qid=1)
    broker = clients(server.broker_addrs["broker-a"])
    for group, qid, offset in ((GROUP, 0, 3), (GROUP, 1, 2), ("second_group", 0, 1)):
        server.cluster.brokers["broker-a"].ensure_group(group)
        broker.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": TOPIC, "queueId": qid, "commitOffset": offset},
        )
    reply = broker.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    assert reply.code == ResponseCode.SUCCESS
    doc = fastjson.loads(reply.body)  # the general parser: the hand-built body is real fastjson
    assert fastjson.loads_queue_keyed(reply.body) == {
        **doc,
        "consumeStatsList": [
            {g: [{**s, "offsetTable": {_marked(mq): w for mq, w in s["offsetTable"].items()}} for s in v]}
            for entry in doc["consumeStatsList"]
            for g, v in entry.items()
        ],
    }
    assert list(doc) == ["brokerAddr", "consumeStatsList", "totalDiff", "totalInflightDiff"]
    by_group = {g: v for entry in doc["consumeStatsList"] for g, v in entry.items()}
    assert sorted(by_group) == sorted(["second_group", GROUP])
    (stats,) = by_group[GROUP]
    per_group = fastjson.loads(broker.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP}).body)
    batch_rows = fastjson.mq_table(stats["offsetTable"])
    single_rows = fastjson.mq_table(per_group["offsetTable"])
    assert list(batch_rows) == list(single_rows) and len(batch_rows) == QUEUES
    fields = ("brokerOffset", "consumerOffset", "lastTimestamp")
    for mq, row in batch_rows.items():
        assert [row[f] for f in fields] == [single_rows[mq][f] for f in fields]
        # the broker leaves pullOffset unset in this reply (5.x writes 0; 4.x has no such field)
        assert row.get("pullOffset", 0) == 0 and ("pullOffset" in row) == (version == "5.3.3")
    assert doc["totalDiff"] == (5 - 3) + (2 - 2) + (5 - 1) + (2 - 0)  # second_group: every queue of its topic
    # isOrder=true: only order topics (TopicTest is not one)
    ordered = fastjson.loads(broker.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"}).body)
    assert all(v == [] for entry in ordered["consumeStatsList"] for v in entry.values())
    # the header field is required, as @CFNotNull makes it on the broker
    missing = broker.call(RequestCode.GET_BROKER_CONSUME_STATS)
    assert missing.code == ResponseCode.SYSTEM_ERROR and "isOrder" in (missing.remark or "")


def _marked(key: Any) -> str:
    mq = fastjson.to_message_queue(key)
    return f"\x00{mq.topic}\x00{mq.broker_name}\x00{mq.queue_id}"


def test_lock_and_unlock_batch(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    mqs = [{"brokerName": "broker-a", "queueId": q, "topic": TOPIC} for q in range(2)]

    def lock(client_id: str, code: int = RequestCode.LOCK_BATCH_MQ) -> RemotingCommand:
        body = json.dumps({"clientId": client_id, "consumerGroup": GROUP, "mqSet": mqs, "onlyThisBroker": False})
        return broker.call(code, body=body.encode())

    first = fastjson.loads(lock("c1").body)
    assert len(first["lockOKMQSet"]) == 2
    assert fastjson.loads(lock("c2").body)["lockOKMQSet"] == []
    assert lock("c1", RequestCode.UNLOCK_BATCH_MQ).code == ResponseCode.SUCCESS
    assert len(fastjson.loads(lock("c2").body)["lockOKMQSet"]) == 2


# ---------------------------------------------------------------------------------------------
# Reset


def test_client_push_reset_sends_both_body_forms(serve: Serve, clients: Clients) -> None:
    server = serve("4.9.8")
    seed(server, 10, qid=0)
    admin = clients(server.broker_addrs["broker-a"])
    for qid in range(QUEUES):
        admin.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": qid, "commitOffset": 0 if qid else 8},
        )
    cpp = clients(server.broker_addrs["broker-a"])
    java = clients(server.broker_addrs["broker-a"])
    cpp.call(RequestCode.HEART_BEAT, body=cpp_heartbeat("cpp-1"), version=CPP_VERSION, language="CPP")
    java.call(RequestCode.HEART_BEAT, body=java_heartbeat("java-1"))

    def next_reset(client: RawClient) -> RemotingCommand:
        while True:
            cmd = client.requests.get(timeout=REPLY_TIMEOUT_S)
            if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                return cmd

    # As a real broker: the body form follows the admin request's language, for every client.
    reset = {"topic": TOPIC, "group": GROUP, "timestamp": 0, "isForce": True}
    reply = admin.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset, language="CPP")
    assert reply.code == ResponseCode.SUCCESS
    assert fastjson.mq_table(fastjson.loads(reply.body)["offsetTable"]) == {
        MessageQueue(TOPIC, "broker-a", 0): 0,
        MessageQueue(TOPIC, "broker-a", 1): 0,
    }
    for client in (cpp, java):
        for_c = next_reset(client)
        assert for_c.flag == FLAG_ONEWAY
        assert for_c.ext_fields == {"topic": TOPIC, "group": GROUP, "timestamp": "0", "isForce": "false"}
        assert json.loads(for_c.body) == {
            "offsetTable": [
                {"brokerName": "broker-a", "offset": 0, "queueId": 0, "topic": TOPIC},
                {"brokerName": "broker-a", "offset": 0, "queueId": 1, "topic": TOPIC},
            ]
        }
    assert admin.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset).code == ResponseCode.SUCCESS
    for client in (cpp, java):
        keyed = next_reset(client)
        assert fastjson.mq_table(fastjson.loads(keyed.body)["offsetTable"])[MessageQueue(TOPIC, "broker-a", 0)] == 0
    # Client-push mode: the broker does not write the offsets itself.
    q = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0}
    assert admin.call(RequestCode.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "8"
    assert server.stats()["resets_pushed"] == 4


def test_client_push_reset_without_consumers_is_not_online(serve: Serve, clients: Clients) -> None:
    server = serve("4.9.8")
    admin = clients(server.broker_addrs["broker-a"])
    for qid in range(QUEUES):
        admin.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": qid, "commitOffset": 0},
        )
    reply = admin.call(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": TOPIC, "group": GROUP, "timestamp": -1, "isForce": True}
    )
    assert reply.code == ResponseCode.CONSUMER_NOT_ONLINE


def test_server_side_reset_moves_the_next_pull(serve: Serve, clients: Clients) -> None:
    server = serve("5.3.3")
    seed(server, 6)
    consumer = clients(server.broker_addrs["broker-a"])
    consumer.call(RequestCode.HEART_BEAT, body=cpp_heartbeat("cpp-1"), version=CPP_VERSION, language="CPP")
    consumer.call(
        RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 5}
    )
    admin = clients(server.broker_addrs["broker-a"])
    reply = admin.call(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        {"topic": TOPIC, "group": GROUP, "timestamp": 0, "isForce": False, "queueId": 0, "offset": 2},
    )
    assert fastjson.mq_table(fastjson.loads(reply.body)["offsetTable"]) == {MessageQueue(TOPIC, "broker-a", 0): 2}
    # a stale commit piggy-backed on the pull must not undo the reset
    moved = pull(consumer, 5, sys_flag=PULL_SUBSCRIPTION | PULL_COMMIT, commit=5)
    assert (moved.code, moved.remark, moved.ext_fields["nextBeginOffset"]) == (
        ResponseCode.PULL_OFFSET_MOVED,
        "OFFSET_RESET",
        "2",
    )
    assert consumer.requests.empty() or all(
        r.code != RequestCode.RESET_CONSUMER_CLIENT_OFFSET for r in list(consumer.requests.queue)
    )


# ---------------------------------------------------------------------------------------------
# Robustness, ACL, TLS, shutdown


def test_unknown_code_and_oneway_requests(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    reply = broker.call(9999)
    assert (reply.code, reply.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported")
    oneway = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 0},
        oneway=True,
    )
    opaque = broker.send(oneway)
    assert broker.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == ResponseCode.SUCCESS
    with pytest.raises(AssertionError):
        broker.wait(opaque, timeout=0.3)  # no reply to a oneway request


def test_acl_rejects_unsigned_and_badly_signed_requests(serve: Serve, clients: Clients) -> None:
    server = serve(acl=("ak", "sk"))
    broker = clients(server.broker_addrs["broker-a"])
    mq = {"topic": TOPIC, "queueId": 0}
    assert broker.call(RequestCode.GET_MAX_OFFSET, mq).code == ResponseCode.NO_PERMISSION
    wrong = acl.sign(mq, None, "ak", "not-the-secret")
    assert broker.call(RequestCode.GET_MAX_OFFSET, wrong).code == ResponseCode.NO_PERMISSION
    other = acl.sign(mq, None, "someone", "sk")
    assert broker.call(RequestCode.GET_MAX_OFFSET, other).code == ResponseCode.NO_PERMISSION
    signed = acl.sign(mq, None, "ak", "sk")
    assert broker.call(RequestCode.GET_MAX_OFFSET, signed).code == ResponseCode.SUCCESS
    body = cpp_heartbeat("c1")
    assert broker.call(RequestCode.HEART_BEAT, acl.sign({}, body, "ak", "sk"), body).code == ResponseCode.SUCCESS
    tampered = acl.sign({}, body, "ak", "sk")
    assert broker.call(RequestCode.HEART_BEAT, tampered, body + b" ").code == ResponseCode.NO_PERMISSION
    ns = clients(server.namesrv_addr)
    assert ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).code == ResponseCode.SUCCESS


def test_oversize_and_garbage_frames_drop_only_that_connection(serve: Serve, clients: Clients) -> None:
    server = serve()
    addr = server.broker_addrs["broker-a"]
    healthy = clients(addr)
    huge = clients(addr)
    huge.sock.sendall(struct.pack(">i", 17 * 1024 * 1024) + b"\0" * 64)
    assert huge.eof.wait(REPLY_TIMEOUT_S)
    garbage = clients(addr)
    garbage.sock.sendall(struct.pack(">ii", 4 + 5, 5) + b"nope!")
    assert garbage.eof.wait(REPLY_TIMEOUT_S)
    assert healthy.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == ResponseCode.SUCCESS
    assert clients(addr).call(RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": 0}).code == 0


def test_handler_failure_is_a_reply_not_a_drop(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    assert broker.call(RequestCode.HEART_BEAT, body=b"{not json").code == ResponseCode.SYSTEM_ERROR
    assert broker.call(RequestCode.PULL_MESSAGE, {"topic": TOPIC}).code == ResponseCode.SYSTEM_ERROR
    assert broker.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == ResponseCode.SUCCESS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def test_tls_and_plaintext_on_the_same_port(serve: Serve, clients: Clients, certificate: tuple[str, str]) -> None:
    server = serve(tls=tls_context(*certificate))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    secure = clients(server.namesrv_addr, wrap=lambda s: context.wrap_socket(s, server_hostname="127.0.0.1"))
    route = secure.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    assert route.code == ResponseCode.SUCCESS and b"broker-a" in route.body
    key = "k" * 100_000  # request and reply span many TLS records
    big = secure.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": key})
    assert big.code == ResponseCode.QUERY_NOT_FOUND and (big.remark or "").endswith(key)
    plain = clients(server.namesrv_addr)
    assert plain.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS


def test_stop_flushes_offsets_and_closes_connections(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path / "store", "5.3.3")
    server = MockServer(cluster, namesrv_port=0).start()
    client = RawClient(server.broker_addrs["broker-a"])
    held: list[RemotingCommand] = []
    try:
        reply = client.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 1, "commitOffset": 42},
        )
        assert reply.code == ResponseCode.SUCCESS

        def hold() -> None:
            with contextlib.suppress(AssertionError):  # the server goes away without answering
                held.append(pull(client, 0, sys_flag=PULL_SUBSCRIPTION_SUSPEND, suspend_ms=15_000))

        threading.Thread(target=hold, daemon=True).start()
        _wait_until(lambda: server.long_polling.count == 1, "the pull to be held")
        t0 = time.monotonic()
        server.stop()
        assert time.monotonic() - t0 < 3, "stop must not wait out a held pull"
        assert client.eof.wait(REPLY_TIMEOUT_S)
        offsets = fastjson.loads((tmp_path / "store" / "broker-a" / "config" / "consumerOffset.json").read_text())
        assert offsets["offsetTable"][f"{TOPIC}@{GROUP}"] == {1: 42}
        assert cluster.brokers["broker-a"].addr == "mock://broker-a"  # the address is handed back
        assert not held
        server.stop()  # idempotent
    finally:
        client.close()
        cluster.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(server.namesrv_addr.rsplit(":", 1)[1])), timeout=1)


def test_periodic_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mqadmin.mock.server.core as server_module

    monkeypatch.setattr(server_module, "FLUSH_INTERVAL_S", 0.1)
    cluster = make_cluster(tmp_path / "store", "5.3.3")
    with MockServer(cluster, namesrv_port=0) as server:
        client = RawClient(server.broker_addrs["broker-b"])
        client.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 7},
        )
        path = tmp_path / "store" / "broker-b" / "config" / "consumerOffset.json"
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while time.monotonic() < deadline and not (path.exists() and "7" in path.read_text()):
            time.sleep(0.05)
        assert fastjson.loads(path.read_text())["offsetTable"][f"{TOPIC}@{GROUP}"] == {0: 7}
        client.close()
    cluster.close()


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    from mqadmin.errors import ConnectError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = make_cluster(tmp_path / "store", "5.3.3")
        try:
            with pytest.raises(ConnectError, match="cannot listen"):
                MockServer(cluster, namesrv_port=port).start()
        finally:
            cluster.close()


# ---------------------------------------------------------------------------------------------
# The mockBroker command and its helper


def test_serve_store_creates_serves_and_reports(tmp_path: Path) -> None:
    stop = threading.Event()
    ready: list[ServerReady] = []
    address = f"mock://{tmp_path}/new"
    result: list[Any] = []

    def run() -> None:
        result.append(serve_store(address, stop=stop, port=0, brokers=1, broker_version="4.9.8", on_ready=ready.append))

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while not ready and time.monotonic() < deadline:
        time.sleep(0.02)
    info = ready[0]
    assert info.created and list(info.brokers) == ["broker-a"] and info.broker_version == "4.9.8"
    client = RawClient(info.brokers["broker-a"])
    assert send_v2(client, "Fresh", 0, b"x").code == ResponseCode.SUCCESS
    client.close()
    stop.set()
    thread.join(REPLY_TIMEOUT_S)
    report = result[0]
    assert report.stats["messages_stored"] == 1 and report.topics == 1
    reopened = MockCluster(tmp_path / "new", writable=True)  # the lock was released
    assert reopened.brokers["broker-a"].max_offset("Fresh", 0) == 1
    reopened.close()


def test_mock_broker_command_serves_until_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", "mock-broker", "-n", "mock://cli", "--port", "0", "--brokers", "1", "--demo"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        namesrv = None
        lines = []
        deadline = time.monotonic() + 60
        while namesrv is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"namesrv (\S+)", line)
            namesrv = m.group(1) if m else None
        assert namesrv, "".join(lines)
        ns = RawClient(namesrv)
        route = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        assert route.code == ResponseCode.SUCCESS  # --demo seeded the store
        ns.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "namesrv" in out and "broker-a" in out and "flushed" in out
    assert (tmp_path / "home" / "mock" / "cli" / "cluster.json").exists()


# ---------------------------------------------------------------------------------------------
# Our own remoting backend against the served mock (the second door, end to end)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_remoting_admin_against_the_server(serve: Serve, clients: Clients, version: str) -> None:
    backend = pytest.importorskip("mqadmin.remoting.backend")
    server = serve(version)
    seed(server, 6, qid=0, broker="broker-a")
    seed(server, 4, qid=1, broker="broker-b")
    consumers = [clients(addr) for addr in server.broker_addrs.values()]
    for c in consumers:
        c.call(RequestCode.HEART_BEAT, body=cpp_heartbeat("cpp-1"), version=CPP_VERSION, language="CPP")
        for qid in range(QUEUES):
            c.call(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": GROUP, "topic": TOPIC, "queueId": qid, "commitOffset": 1},
            )
    admin = backend.RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        assert {b.version for b in admin.cluster_brokers()} == {version}
        assert len(admin.topic_route(TOPIC).message_queues()) == 2 * QUEUES
        assert TOPIC in admin.list_topics() and GROUP in admin.list_groups()
        mq = MessageQueue(TOPIC, "broker-a", 0)
        assert (admin.min_offset(mq), admin.max_offset(mq), admin.consumer_offset(GROUP, mq)) == (0, 6, 1)
        admin.update_consumer_offset(GROUP, mq, 4)
        stats = admin.consume_stats(GROUP, TOPIC)
        assert stats.offsets[mq].consumer_offset == 4 and stats.offsets[mq].broker_offset == 6
        connections = admin.consumer_connections(GROUP)
        assert [(c.client_id, c.language, c.version) for c in connections.connections] == [
            ("cpp-1", "CPP", CPP_VERSION)
        ]
        pulled = admin.pull(mq, 0, 3)
        assert pulled.status == "FOUND" and [m.queue_offset for m in pulled.messages] == [0, 1, 2]
        sent = admin.send(TOPIC, Message(topic=TOPIC, body=b"via backend"), MessageQueue(TOPIC, "broker-b", 0))
        assert sent.queue_offset == 0
        admin.send_back(GROUP, pulled.messages[0])
        table = admin.reset_offset_by_time(TOPIC, GROUP, 0, True, cplus=True)
        assert table[mq] == 0
        if version == "4.9.8":  # client push: every broker told the consumer, in the C++ form
            pushed: list[RemotingCommand] = []
            for c in consumers:
                while (r := c.requests.get(timeout=REPLY_TIMEOUT_S)).code != RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                    pass
                pushed.append(r)
            assert all(json.loads(r.body)["offsetTable"][0]["offset"] == 0 for r in pushed)
        else:  # server side: written at once
            assert admin.consumer_offset(GROUP, mq) == 0
    finally:
        admin.close()


def test_four_x_quirks_seen_on_a_real_4_9_8(serve: Serve, clients: Clients) -> None:
    """What a real 4.9.8 does differently (checked side by side): a name server that ignores
    unknown codes, no transactionId in send replies, CLUSTER added and WAIT dropped on store."""
    server = serve("4.9.8")
    ns = clients(server.namesrv_addr)
    with pytest.raises(AssertionError, match="no reply"):
        ns.call(9999, timeout=0.5)
    missing = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert (missing.remark or "").endswith("\nSee http://rocketmq.apache.org/docs/faq/ for further details.")
    broker = clients(server.broker_addrs["broker-a"])
    sent = send_v2(broker, TOPIC, 0, b"x", tags="TagA")
    assert sorted(sent.ext_fields) == ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"]
    (stored,) = iter_messages(pull(broker, 0).body)
    assert stored.properties == {"UNIQ_KEY": "KEY0" + b"x".hex(), "TAGS": "TagA", "CLUSTER": "DefaultCluster"}
    hb = broker.call(RequestCode.HEART_BEAT, body=cpp_heartbeat("c1"), version=CPP_VERSION, language="CPP")
    assert hb.ext_fields == {}


def test_five_x_stamps_and_heartbeat_v2_flags(serve: Serve, clients: Clients) -> None:
    server = serve("5.3.3")
    broker = clients(server.broker_addrs["broker-a"])
    send_v2(broker, TOPIC, 0, b"x", tags="TagA")
    (stored,) = iter_messages(pull(broker, 0).body)
    assert {k: stored.properties[k] for k in ("CLUSTER", "MSG_REGION", "TRACE_ON", "WAIT")} == {
        "CLUSTER": "DefaultCluster",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
        "WAIT": "true",
    }
    first = broker.call(RequestCode.HEART_BEAT, body=java_heartbeat("c1"))
    assert first.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}
    again = broker.call(RequestCode.HEART_BEAT, body=java_heartbeat("c1"))
    assert again.ext_fields["IS_SUB_CHANGE"] == "false"
    lite = json.dumps(
        {"clientID": "c2", "consumerDataSet": [{"groupName": GROUP, "subscriptionDataSet": []}], "withoutSub": True}
    )
    assert broker.call(RequestCode.HEART_BEAT, body=lite.encode()).ext_fields["IS_SUB_CHANGE"] == "true"


# ---------------------------------------------------------------------------------------------
# The official C++ client (rocketmq-client-python) against the served mock


@pytest.fixture(scope="module")
def official() -> Any:
    from tests.support import official_client

    official_client.ensure_all()
    return official_client


def _committed(server: MockServer, group: str, topic: str) -> dict[tuple[str, int], int]:
    with server.lock:
        return {
            (b.name, q): o
            for b in server.cluster.brokers.values()
            for q, o in b.offsets.get(f"{topic}@{group}", {}).items()
        }


@pytest.mark.interop
@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_official_client_produces_consumes_commits_and_is_reset(
    official: Any, tmp_path: Path, serve: Serve, version: str
) -> None:
    """C++ producer and push consumer end to end, then a reset while the consumer is online.

    5.x resets on the broker: the next pull answers OFFSET_MOVED and everything is redelivered.
    4.x pushes RESET_CONSUMER_CLIENT_OFFSET in the C++ form; the C++ client 2.1.0 applies and
    commits it but stops pulling those queues until it restarts (the same against a real 4.9.8).
    """
    count, group = 20, "PeerGroup"
    server = serve(version)
    sent = official.produce(server.namesrv_addr, TOPIC, count, workdir=tmp_path / "producer", tags=("TagA", "TagB"))
    assert {s["status"] for s in sent} == {"OK"}
    assert sorted(s["offset"] for s in sent) == sorted(
        o for b in server.cluster.brokers.values() for q in range(QUEUES) for o in range(b.max_offset(TOPIC, q))
    )
    with official.push_consumer(server.namesrv_addr, group, TOPIC, workdir=tmp_path / "consumer") as consumer:
        got = consumer.wait_for_messages(count, timeout=60)
        assert {m["msg_id"] for m in got} == {s["msg_id"] for s in sent}
        full = {(b.name, q): b.max_offset(TOPIC, q) for b in server.cluster.brokers.values() for q in range(QUEUES)}
        deadline = time.monotonic() + 30
        while _committed(server, group, TOPIC) != full and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _committed(server, group, TOPIC) == full, "the client commits every 5 s"

        admin = RawClient(server.broker_addrs["broker-a"])
        try:
            reset = admin.call(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                {"topic": TOPIC, "group": group, "timestamp": 0, "isForce": True, "queueId": -1, "offset": -1},
                language="CPP",  # so a client-push broker sends the body C++ consumers decode
            )
        finally:
            admin.close()
        assert reset.code == ResponseCode.SUCCESS, reset.remark
        if version == "5.3.3":
            again = consumer.wait_for_messages(count + sum(full[("broker-a", q)] for q in range(QUEUES)), 60)
            assert sorted(m["queue_offset"] for m in again[count:]) == sorted(
                o for q in range(QUEUES) for o in range(full[("broker-a", q)])
            )
        else:
            consumer.wait_for_log("ResetOffsetBody brokerName:broker-a", timeout=10, count=QUEUES)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if all(o == 0 for (b, _), o in _committed(server, group, TOPIC).items() if b == "broker-a"):
                    break
                time.sleep(0.2)
            assert all(o == 0 for (b, _), o in _committed(server, group, TOPIC).items() if b == "broker-a")
        consumer.stop()
    assert consumer.of("shutdown")
    assert "unregisterClient to:" in consumer.cpp_log()
