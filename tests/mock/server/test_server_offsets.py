"""Broker offset handlers over TCP: commits (on pull and direct), queue bounds, and both reset paths.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

import json

import pytest

from mqadmin import fastjson
from mqadmin.model import MessageQueue
from mqadmin.protocol.codec import FLAG_ONEWAY, RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import (
    CPP_VERSION,
    GROUP,
    PULL_COMMIT,
    PULL_SUBSCRIPTION,
    QUEUES,
    REPLY_TIMEOUT_S,
    TOPIC,
    Clients,
    RawClient,
    Serve,
    cpp_heartbeat,
    java_heartbeat,
    pull,
    seed,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


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
