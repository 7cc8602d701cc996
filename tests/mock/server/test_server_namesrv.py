"""The name-server role over TCP: routes (standard JSON or not), implicit routes, cluster info, topic list, KV.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

import json

import pytest

from mqadmin import fastjson
from mqadmin.protocol.codec import FLAG_RESPONSE
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.constants import RETRY_PREFIX
from tests.mock.server import wire
from tests.mock.server.wire import (
    CPP_VERSION,
    GROUP,
    QUEUES,
    TOPIC,
    Clients,
    Serve,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


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
