"""Broker admin handlers over TCP: consume stats, topic stats, every group's stats.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from mqadmin import fastjson
from mqadmin.model import MessageQueue
from mqadmin.protocol.codes import MQVersion, RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import (
    GROUP,
    QUEUES,
    TOPIC,
    Clients,
    Serve,
    seed,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


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
    return f"\x00{mq.broker_name}\x00{mq.queue_id}\x00{mq.topic}"
