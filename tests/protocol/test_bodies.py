"""Every reply body class: what the mock broker encodes is what the client decodes, and the
bodies brokers write decode and encode back to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mqadmin.model import BrokerData, ClientConnection, MessageQueue, OffsetWrapper, QueueData, QueueStats
from mqadmin.protocol import bodies
from mqadmin.protocol.bodies import (
    BODIES,
    BodyError,
    ClusterInfo,
    ConsumerConnectionBody,
    ConsumerIdList,
    ConsumerOffsetTable,
    ConsumerRunningInfoBody,
    ConsumeStatsBody,
    ConsumeStatsListBody,
    GroupList,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionGroupWrapper,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
)
from tests.remoting.test_backend import BROKER_STATS_A, BROKER_STATS_B_4X, CONNECTION_BODY
from tests.test_fastjson import (
    ALL_OFFSETS,
    CLUSTER,
    CONNECTION,
    CONSUME_STATS,
    RESET_BODY,
    RESET_BODY_FOR_C,
    ROUTE,
    SUB_GROUPS,
)

MQ0, MQ1, RETRY = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1), MessageQueue("%RETRY%g", "b", 3)
#: names as only a careful writer gets right: non-ASCII, quotes, backslashes, control characters
ODD = 'g-名"\\\x01'

#: at least one value of every body class, with the shapes of both 4.x and 5.x where they differ
SAMPLES: dict[type, list[Any]] = {
    ClusterInfo: [
        ClusterInfo(
            {"broker-a": BrokerData("broker-a", "C", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})},
            {"C": ["broker-a"]},
            acting_master=True,
        ),
        ClusterInfo({ODD: BrokerData(ODD, "", {0: "h:1"})}, {"": [ODD]}),
        ClusterInfo({}, {}),
    ],
    ConsumeStatsBody: [
        ConsumeStatsBody({MQ0: OffsetWrapper(10, 4, 1_700_000_000_004, 6), RETRY: OffsetWrapper(0, 0, 0, 0)}, 1.5),
        ConsumeStatsBody({MQ1: OffsetWrapper(2**62, -1, 0, -1)}, 1e-7, pull_offsets=False),
        ConsumeStatsBody({}, 0.0),
    ],
    ConsumeStatsListBody: [
        ConsumeStatsListBody(
            "10.0.0.1:10911",
            [
                (
                    ODD,
                    [
                        ConsumeStatsBody({MQ0: OffsetWrapper(10, 4, 5, 4)}, 2.25),
                        ConsumeStatsBody({RETRY: OffsetWrapper(1, 1, 0, 1), MQ0: OffsetWrapper(10, 4, 5, 4)}, 0.0),
                    ],
                ),
                ("empty", []),
                ("v4", [ConsumeStatsBody({MQ1: OffsetWrapper(3, 1, 0, 1)}, 12345678.0, pull_offsets=False)]),
            ],
            total_diff=8,
            total_inflight_diff=-3,
        ),
        ConsumeStatsListBody("", []),
    ],
    ConsumerConnectionBody: [
        ConsumerConnectionBody(
            [
                ClientConnection("10.0.0.9@1#DEFAULT", "10.0.0.9:53122", "CPP", 333),
                ClientConnection(ODD, "", "JAVA", 0),
            ],
            "CONSUME_FROM_LAST_OFFSET",
            "CONSUME_PASSIVELY",
            "CLUSTERING",
            {"T": {"classFilterMode": False, "subString": "a || b", "tagsSet": ["a", "b"], "topic": "T"}},
        ),
        ConsumerConnectionBody([]),
    ],
    ConsumerIdList: [ConsumerIdList(["a", ODD]), ConsumerIdList([])],
    ConsumerOffsetTable: [
        ConsumerOffsetTable({"T@g": {0: 12, 1: 2**40}, f"{ODD}@g": {}}),
        ConsumerOffsetTable(
            {"T@g": {3: 0}}, {"counter": 7, "stateVersion": 0, "timestamp": 1_700_000_000_000}, {"g": ["T"]}
        ),
    ],
    ConsumerRunningInfoBody: [
        ConsumerRunningInfoBody(
            {MQ0: {"cachedMsgCount": 0, "commitOffset": 4, "droped": False, "locked": True}},
            {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
            {"T": {"pullRT": 1.5}},
            [{"subString": "*", "topic": "T"}],
        ),
        ConsumerRunningInfoBody({}),
    ],
    GroupList: [GroupList(["g1", ODD]), GroupList([])],
    KVTable: [KVTable({"brokerVersionDesc": "V5_3_3", "brokerVersion": "475", "runtime": "[ 0 days ]", ODD: ""})],
    LockBatchRequestBody: [LockBatchRequestBody(ODD, "c1", [MQ0, RETRY], only_this_broker=True)],
    LockBatchResponseBody: [LockBatchResponseBody([MQ1, MQ0]), LockBatchResponseBody([])],
    ResetOffsetBody: [ResetOffsetBody({MQ0: 1180, RETRY: -1}), ResetOffsetBody({})],
    ResetOffsetBodyForC: [ResetOffsetBodyForC({MQ0: 1180, MessageQueue(ODD, ODD, 7): 2**63 - 1})],
    SubscriptionGroupWrapper: [
        SubscriptionGroupWrapper({"g": {"groupName": "g", "retryMaxTimes": 16}}),
        SubscriptionGroupWrapper({}, {"counter": 1, "stateVersion": 0, "timestamp": 5}, {}),
    ],
    TopicList: [TopicList(["T", "%RETRY%g", ODD]), TopicList([])],
    TopicRouteData: [
        TopicRouteData(
            [BrokerData("broker-a", "C", {0: "h:1", 1: "h:2"}), BrokerData(ODD, "", {})],
            [QueueData("broker-a", 4, 8, 6, 0), QueueData(ODD, 0, 0, 2, 1)],
            acting_master=True,
        ),
        TopicRouteData([], []),
    ],
    TopicStatsTable: [TopicStatsTable({MQ0: QueueStats(0, 10, 1_700_000_000_000), RETRY: QueueStats(5, 5)}, 0.5)],
}


def _cases() -> list[Any]:
    return [pytest.param(v, id=f"{cls.__name__}-{i}") for cls, values in SAMPLES.items() for i, v in enumerate(values)]


def test_every_body_class_has_samples_and_is_declared() -> None:
    exported = {getattr(bodies, n) for n in bodies.__all__}
    classes = {c for c in exported if isinstance(c, type) and hasattr(c, "decode")}
    assert classes == set(BODIES) == set(SAMPLES)


@pytest.mark.parametrize("value", _cases())
def test_round_trip(value: Any) -> None:
    data = value.encode()
    assert type(value).decode(data) == value
    assert type(value).decode(data.decode()).encode() == data  # text or bytes, same value


@pytest.mark.parametrize("cls", BODIES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("garbage", [b"", b"[]", b"{", b'{"a":1}x', b"\xff"], ids=repr)
def test_garbage_is_a_body_error(cls: Any, garbage: bytes) -> None:
    with pytest.raises(BodyError):
        cls.decode(garbage)


@pytest.mark.parametrize(
    ("cls", "text"),
    [
        (ConsumeStatsBody, '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":"x"}}}'),
        (ConsumeStatsBody, '{"offsetTable":{"not a queue":{}}}'),
        (TopicStatsTable, '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"minOffset":0}}}'),
        (ClusterInfo, '{"brokerAddrTable":{"a":{"brokerAddrs":{"x":"h:1"},"brokerName":"a"}}}'),
        (TopicRouteData, '{"queueDatas":[{"perm":6}]}'),
        (ConsumeStatsListBody, '{"consumeStatsList":[{"g":[{"offsetTable":{"T":1}}]}]}'),
        (SubscriptionGroupWrapper, '{"subscriptionGroupTable":["g"]}'),
        (KVTable, '{"table":[1]}'),
        (TopicList, '{"topicList":"T"}'),
        (ResetOffsetBodyForC, '{"offsetTable":[{"topic":"T"}]}'),
    ],
)
def test_wrong_shapes_are_body_errors(cls: Any, text: str) -> None:
    with pytest.raises(BodyError):
        cls.decode(text)


# -- bodies as brokers write them ---------------------------------------------------------------

GOLDEN = [
    pytest.param(ClusterInfo, CLUSTER, id="cluster-5x"),
    pytest.param(TopicRouteData, ROUTE, id="route-5x"),
    pytest.param(ConsumeStatsBody, CONSUME_STATS, id="consume-stats-5x"),
    pytest.param(ConsumeStatsListBody, BROKER_STATS_A, id="broker-consume-stats-5x"),
    pytest.param(ConsumeStatsListBody, BROKER_STATS_B_4X, id="broker-consume-stats-4x"),
    pytest.param(ResetOffsetBody, RESET_BODY, id="reset"),
    pytest.param(ResetOffsetBodyForC, RESET_BODY_FOR_C, id="reset-for-c"),
    pytest.param(ConsumerConnectionBody, CONNECTION, id="connection"),
    pytest.param(ConsumerConnectionBody, CONNECTION_BODY, id="connection-tags"),
    pytest.param(SubscriptionGroupWrapper, SUB_GROUPS, id="subscription-groups-5x"),
    pytest.param(ConsumerOffsetTable, ALL_OFFSETS, id="all-offsets"),
]


@pytest.mark.parametrize(("cls", "text"), GOLDEN)
def test_broker_bodies_encode_back_byte_identical(cls: Any, text: str) -> None:
    assert cls.decode(text.encode()).encode() == text.encode()


def test_golden_values() -> None:
    stats = ConsumeStatsBody.decode(CONSUME_STATS)
    assert stats.offset_table[MessageQueue("TopicTest", "broker-a", 0)] == OffsetWrapper(
        1250, 1200, 1700000000123, 1232
    )
    assert stats.pull_offsets and stats.consume_tps == 0.0
    v4 = ConsumeStatsListBody.decode(BROKER_STATS_B_4X)
    ((group, (one,)),) = v4.groups
    assert group == "g1" and not one.pull_offsets  # 4.x: no pullOffset, read as the committed offset
    assert one.offset_table == {MessageQueue("T", "broker-b", 0): OffsetWrapper(3, 1, 0, 1)}
    untrusted = ConsumeStatsListBody.decode(BROKER_STATS_A, trust_pull_offset=False)
    assert untrusted.groups[0][1][0].offset_table[MessageQueue("T", "broker-a", 0)].pull_offset == 4
    route = TopicRouteData.decode(ROUTE)
    assert route.brokers == [BrokerData("broker-a", "DefaultCluster", {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"})]
    assert route.queues == [QueueData("broker-a", 4, 4, 6, 0)] and route.acting_master
    assert ConsumerConnectionBody.decode(CONNECTION_BODY).subscriptions("*") == {"T": "a || b"}


def test_old_route_spelling_and_standard_json() -> None:
    old = '{"brokerDatas":[],"queueDatas":[{"brokerName":"b","perm":4,"readQueueNums":2,"topicSynFlag":3}]}'
    assert TopicRouteData.decode(old).queues == [QueueData("b", 2, 0, 4, 3)]
    route = SAMPLES[TopicRouteData][0]
    standard = route.encode(standard=True)
    assert b'"brokerAddrs":{"0":"h:1","1":"h:2"}' in standard and b"\\u540d" in standard
    assert TopicRouteData.decode(standard) == route


# -- bodies captured from real brokers ----------------------------------------------------------

#: version -> request -> the body a real broker (one broker-a, topic GoldenTopic with 2 queues and
#: 3 messages in each, group golden_group committed at 2 on queue 0) answered
REAL = json.loads((Path(__file__).parent / "real_broker_bodies.json").read_text(encoding="utf-8"))
REAL_KINDS: dict[str, Any] = {
    "all_consumer_offsets": ConsumerOffsetTable,
    "broker_consume_stats": ConsumeStatsListBody,
    "cluster_info": ClusterInfo,
    "consume_by_who": GroupList,
    "consume_stats": ConsumeStatsBody,
    "reset_offset": ResetOffsetBody,
    "route": TopicRouteData,
    "route_standard": TopicRouteData,
    "runtime_info": KVTable,
    "subscription_groups": SubscriptionGroupWrapper,
    "topic_list": TopicList,
    "topic_stats": TopicStatsTable,
}
GOLDEN_MQ0 = MessageQueue("GoldenTopic", "broker-a", 0)


@pytest.mark.parametrize("version", sorted(REAL))
@pytest.mark.parametrize("request_name", sorted(REAL_KINDS))
def test_real_broker_bodies_encode_back_byte_identical(version: str, request_name: str) -> None:
    text = REAL[version][request_name].encode()
    value = REAL_KINDS[request_name].decode(text)
    assert value.encode(**({"standard": True} if request_name == "route_standard" else {})) == text


@pytest.mark.parametrize("version", sorted(REAL))
def test_real_broker_values(version: str) -> None:
    real = REAL[version]
    stats = ConsumeStatsBody.decode(real["consume_stats"])
    assert stats.offset_table[GOLDEN_MQ0].consumer_offset == stats.offset_table[GOLDEN_MQ0].pull_offset == 2
    assert TopicStatsTable.decode(real["topic_stats"]).offset_table[GOLDEN_MQ0].max_offset == 3
    listed = dict(ConsumeStatsListBody.decode(real["broker_consume_stats"]).groups)
    (golden,) = listed["golden_group"]
    assert golden.offset_table[GOLDEN_MQ0].pull_offset == 0  # a broker's ConsumeStatsList leaves it unset
    assert ConsumerOffsetTable.decode(real["all_consumer_offsets"]).offset_table == {"GoldenTopic@golden_group": {0: 2}}
    assert KVTable.decode(real["runtime_info"]).table["brokerVersionDesc"] == "V" + version.replace(".", "_")
    assert TopicRouteData.decode(real["route_standard"]) == TopicRouteData.decode(real["route"])
    assert "golden_group" in SubscriptionGroupWrapper.decode(real["subscription_groups"]).subscription_group_table
