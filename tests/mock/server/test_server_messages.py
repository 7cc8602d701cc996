"""Broker message handlers over TCP: send (single, V2, batch), pull and its statuses, long polling, view, send back.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

import json
import struct
import threading
import time

import pytest

from mqadmin.message import format_properties, iter_messages
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.constants import RETRY_PREFIX
from tests.mock.server import wire
from tests.mock.server.wire import (
    CPP_VERSION,
    GROUP,
    PULL_SUBSCRIPTION_SUSPEND,
    QUEUES,
    REPLY_TIMEOUT_S,
    TOPIC,
    Clients,
    Serve,
    held_watermarks,
    java_heartbeat,
    pull,
    seed,
    send_v2,
    wait_until,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


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
    wait_until(lambda: server.long_polling.count == 1, "the pull to be held")
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
    wait_until(lambda: held_watermarks(server) == [0], "the pull to be held")
    send_v2(producer, TOPIC, 0, b"skip", tags="TagB")
    # the long-polling thread looked at the unwanted message and holds on, waiting past it
    wait_until(lambda: held_watermarks(server) == [1], "the unwanted message to be looked at")
    assert not results
    send_v2(producer, TOPIC, 0, b"take", tags="TagA")
    waiter.join(REPLY_TIMEOUT_S)
    assert results[0].code == ResponseCode.SUCCESS
    assert [m.body for m in iter_messages(results[0].body)] == [b"take"]
    assert results[0].ext_fields["nextBeginOffset"] == "2"


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


def test_pull_uses_the_heartbeat_subscription_without_the_subscription_flag(serve: Serve, clients: Clients) -> None:
    server = serve()
    seed(server, 2, tags="TagB")
    seed(server, 1, tags="TagA")
    java = clients(server.broker_addrs["broker-a"])
    java.call(RequestCode.HEART_BEAT, body=java_heartbeat("c1"))  # subscribes TagA only
    reply = pull(java, 0, sys_flag=0)
    assert [m.tags for m in iter_messages(reply.body)] == ["TagA"]
