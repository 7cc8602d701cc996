"""Broker client handlers over TCP: heartbeats, membership and connections, queue locks.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

import json
import time

import pytest

from mqadmin import fastjson
from mqadmin.protocol.codec import FLAG_ONEWAY, RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import (
    CPP_VERSION,
    GROUP,
    REPLY_TIMEOUT_S,
    TOPIC,
    Clients,
    Serve,
    cpp_heartbeat,
    java_heartbeat,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


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
