"""fastjson dialect: parse what brokers send, write what brokers write."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest

from mqadmin.fastjson import (
    FrozenObject,
    collector_paused,
    dumps,
    dumps_pretty,
    loads,
    loads_queue_keyed,
    mq_table,
    to_message_queue,
)
from mqadmin.model import MessageQueue

# Bodies as a broker's default fastjson writes them: bare numeric and MessageQueue-object keys
# (TopicRouteData, ClusterInfo, ConsumeStats... under remoting/.../protocol/; docs/protocol.md "JSON bodies").
ROUTE = (
    '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"},"brokerName":"broker-a",'
    '"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":'
    '[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
CLUSTER = (
    '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911"},"brokerName":"broker-a",'
    '"cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)
CONSUME_STATS = (
    '{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:'
    '{"brokerOffset":1250,"consumerOffset":1200,"lastTimestamp":1700000000123,"pullOffset":1232},'
    '{"brokerName":"broker-a","queueId":0,"topic":"%RETRY%g1"}:{"brokerOffset":0,"consumerOffset":0,'
    '"lastTimestamp":0,"pullOffset":0}}}'
)
RESET_BODY = (
    '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:1180,'
    '{"brokerName":"broker-a","queueId":1,"topic":"T"}:1175}}'
)
RESET_BODY_FOR_C = '{"offsetTable":[{"brokerName":"broker-a","offset":1180,"queueId":0,"topic":"T"}]}'
CONNECTION = (
    '{"connectionSet":[{"clientAddr":"10.0.0.9:53122","clientId":"10.0.0.9@4242#DEFAULT","language":"CPP",'
    '"version":333}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
    '"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],'
    '"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"T"}}}'
)
HEARTBEAT = (
    '{"clientID":"10.0.0.9@12345#98765","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    '"consumeType":"CONSUME_PASSIVELY","groupName":"g1","messageModel":"CLUSTERING","subscriptionDataSet":'
    '[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000000,'
    '"tagsSet":[],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":'
    '[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}'
)
SUB_GROUPS = (
    '{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000000},"forbiddenTable":{},'
    '"subscriptionGroupTable":{"g1":{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,'
    '"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,'
    '"groupName":"g1","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
    '"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}'
)
ALL_OFFSETS = '{"groupTopicMap":{"g1":["T"]},"offsetTable":{"T@g1":{0:1200,1:1188}}}'

ALL_SAMPLES = [
    ROUTE,
    CLUSTER,
    CONSUME_STATS,
    RESET_BODY,
    RESET_BODY_FOR_C,
    CONNECTION,
    HEARTBEAT,
    SUB_GROUPS,
    ALL_OFFSETS,
]


def test_route_numeric_keys() -> None:
    route = loads(ROUTE)
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"}
    assert route["queueDatas"][0]["readQueueNums"] == 4
    assert route["filterServerTable"] == {}


def test_cluster_info() -> None:
    info = loads(CLUSTER)
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {0: "10.0.0.5:10911"}
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}


def test_consume_stats_object_keys() -> None:
    stats = loads(CONSUME_STATS)
    assert stats["consumeTps"] == 0.0 and isinstance(stats["consumeTps"], float)
    table = mq_table(stats["offsetTable"])
    mq = MessageQueue("TopicTest", "broker-a", 0)
    assert table[mq]["consumerOffset"] == 1200
    assert table[MessageQueue("%RETRY%g1", "broker-a", 0)]["pullOffset"] == 0
    assert list(table) == [mq, MessageQueue("%RETRY%g1", "broker-a", 0)]  # text order kept


def test_reset_bodies() -> None:
    assert mq_table(loads(RESET_BODY)["offsetTable"]) == {
        MessageQueue("T", "broker-a", 0): 1180,
        MessageQueue("T", "broker-a", 1): 1175,
    }
    assert loads(RESET_BODY_FOR_C)["offsetTable"][0]["offset"] == 1180


@pytest.mark.parametrize("text", [CONNECTION, HEARTBEAT, SUB_GROUPS], ids=["connection", "heartbeat", "subgroups"])
def test_standard_samples_match_json(text: str) -> None:
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ALL_SAMPLES)
def test_samples_write_back_byte_identical(text: str) -> None:
    # The samples are in fastjson's own order, so re-emitting them must reproduce the text.
    parsed = loads(text)
    assert dumps(parsed) == text
    assert loads(dumps_pretty(parsed)) == parsed


STANDARD = [
    "0",
    "-0",
    "-12",
    "1.5",
    "-1.25e-3",
    "1E400",
    "2e5",
    '"plain"',
    r'"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \ud800 x"',
    '"ünïcödé ✓"',
    "true",
    "false",
    "null",
    "[]",
    "{}",
    ' { "a" : [ 1 , 2.0 , { "b" : null } ] , "a" : 3 } ',
    '[[[]],{"": ""}]',
    "12345678901234567890123",
    "NaN",
    "[Infinity,-Infinity]",
]


@pytest.mark.parametrize("text", STANDARD)
def test_standard_json_parses_like_json_loads(text: str) -> None:
    ours, theirs = loads(text), json.loads(text)
    if isinstance(theirs, float) and math.isnan(theirs):
        assert math.isnan(ours)
    else:
        assert ours == theirs
        assert type(ours) is type(theirs)


def test_number_types() -> None:
    assert loads("[1, 1.0, 1e2, -3]") == [1, 1.0, 100.0, -3]
    assert [type(v) for v in loads("[1, 1.0, 1e2, -3]")] == [int, float, float, int]


def test_bytes_input() -> None:
    assert loads(b'{0:"\xc3\xa9"}') == {0: "é"}
    assert loads(b"\xef\xbb\xbf[1]") == [1]


@pytest.mark.parametrize(
    ("text", "pos"),
    [
        ("", 0),
        ("{", 1),
        ('{"a" 1}', 5),
        ('{"a":1,,}', 7),
        ("[1 2]", 3),
        ('"abc', 0),
        ("[1]x", 3),
        ('"\\x"', 1),
        ('"\\u12G4"', 1),
        ("tru", 0),
        ("{1:}", 3),
        ("-", 0),
        ('"\\ud800\\u12G4"', 7),
    ],
)
def test_garbage_raises_value_error_with_position(text: str, pos: int) -> None:
    with pytest.raises(ValueError) as info:
        loads(text)
    assert isinstance(info.value, json.JSONDecodeError)
    assert info.value.pos == pos
    assert "char" in str(info.value)


def test_unhashable_key_is_impossible() -> None:
    # Array and object keys are frozen, so even odd keys parse.
    parsed = loads('{[1,{"a":[2]}]:3}')
    ((key, val),) = parsed.items()
    assert key == (1, FrozenObject({"a": (2,)})) and val == 3


def test_frozen_object() -> None:
    a = FrozenObject([("x", 1), ("y", 2)])
    b = FrozenObject([("y", 2), ("x", 1)])
    assert a == b and hash(a) == hash(b)
    assert a == {"x": 1, "y": 2}
    assert list(a) == ["x", "y"] and len(a) == 2 and a["y"] == 2
    assert {a: 1}[b] == 1
    assert "FrozenObject" in repr(a)


def test_to_message_queue_forms() -> None:
    mq = MessageQueue("T", "b", 3)
    assert to_message_queue(FrozenObject([("brokerName", "b"), ("queueId", 3), ("topic", "T")])) == mq
    assert to_message_queue({"topic": "T", "brokerName": "b", "queueId": 3}) == mq
    # The C++ client's local offset store keys its map by the MQ's styled JSON text.
    cpp_key = '{\n   "brokerName" : "b",\n   "queueId" : 3,\n   "topic" : "T"\n}\n'
    assert to_message_queue(cpp_key) == mq
    assert to_message_queue('[topic="T", brokerName="b", queueId="3"]') == mq
    assert to_message_queue(mq) is mq


@pytest.mark.parametrize("bad", ["T@g", {"topic": "T"}, 5, '{"topic":"T","brokerName":"b","queueId":"x"}', "{"])
def test_to_message_queue_rejects(bad: Any) -> None:
    with pytest.raises(ValueError):
        to_message_queue(bad)


def test_dumps_keys_and_values() -> None:
    mq = MessageQueue("T", "b", 0)
    assert dumps({0: 1}) == "{0:1}"
    assert dumps({"a": 1, 2: "x"}) == '{"a":1,2:"x"}'
    assert dumps({mq: 5}) == '{{"brokerName":"b","queueId":0,"topic":"T"}:5}'
    assert dumps({"mq": mq}) == '{"mq":{"brokerName":"b","queueId":0,"topic":"T"}}'
    assert dumps([True, False, None, 0.0, 2.5, -1]) == "[true,false,null,0.0,2.5,-1]"
    assert dumps({"b": 1, "a": 2}) == '{"b":1,"a":2}'  # insertion order, not sorted
    assert dumps('tab\there "q" \x01 é') == '"tab\\there \\"q\\" \\u0001 é"'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.5, "0.5"),
        (1e7, "1.0E7"),
        (1.5e10, "1.5E10"),
        (1e-4, "1.0E-4"),
        (0.001, "0.001"),
        (1234567.5, "1234567.5"),
        (float("nan"), "null"),
    ],
)
def test_doubles_like_java(value: float, text: str) -> None:
    assert dumps(value) == text


def test_dumps_enums() -> None:
    class Model(enum.Enum):
        CLUSTERING = 1

    class Kind(enum.IntEnum):
        PUSH = 1

    assert dumps({"m": Model.CLUSTERING, "k": Kind.PUSH, Kind.PUSH: 0}) == '{"m":"CLUSTERING","k":1,1:0}'


def test_dumps_rejects_unknown_types() -> None:
    with pytest.raises(TypeError):
        dumps({"x": object()})


ROUND_TRIP: list[Any] = [
    {"offsetTable": {"T@g": {0: 1, 1: 2}}},
    {"a": [1, 2.5, "x", None, True, {"b": {}}], "c": []},
    {-1: "neg", 7: [{"k": 0.0}]},
    [],
    "s",
    123,
]


@pytest.mark.parametrize("value", ROUND_TRIP)
def test_round_trip(value: Any) -> None:
    assert loads(dumps(value)) == value
    assert loads(dumps_pretty(value)) == value


def test_round_trip_mq_keys() -> None:
    table = {MessageQueue("T", "b", i): i * 10 for i in range(3)}
    assert mq_table(loads(dumps({"offsetTable": table}))["offsetTable"]) == table
    assert mq_table(loads(dumps_pretty({"offsetTable": table}))["offsetTable"]) == table


def test_pretty_consumer_offset_file_layout() -> None:
    # consumerOffset.json as the broker pretty-prints it (ConsumerOffsetManager.java, fastjson): string-keyed
    # maps break lines, queue-id maps stay on one line, tabs indent (docs/protocol.md "Broker config files").
    table = {"offsetTable": {"%RETRY%g1@g1": {0: 0}, "TopicTest@g1": {0: 250, 1: 250, 2: 250, 3: 250}}}
    expected = (
        "{\n"
        '\t"offsetTable":{\n'
        '\t\t"%RETRY%g1@g1":{0:0\n'
        "\t\t},\n"
        '\t\t"TopicTest@g1":{0:250,1:250,2:250,3:250\n'
        "\t\t}\n"
        "\t}\n"
        "}"
    )
    assert dumps_pretty(table) == expected


def test_pretty_offsets_json_with_mq_keys() -> None:
    # The Java local store (offsets.json): MQ keys written as pretty beans across lines.
    body = {"offsetTable": {MessageQueue("T", "b", 0): 12, MessageQueue("T", "b", 1): 7}}
    expected = (
        "{\n"
        '\t"offsetTable":{{\n'
        '\t\t\t"brokerName":"b",\n'
        '\t\t\t"queueId":0,\n'
        '\t\t\t"topic":"T"\n'
        "\t\t}:12,{\n"
        '\t\t\t"brokerName":"b",\n'
        '\t\t\t"queueId":1,\n'
        '\t\t\t"topic":"T"\n'
        "\t\t}:7\n"
        "\t}\n"
        "}"
    )
    assert dumps_pretty(body) == expected


def test_pretty_lists_and_sets() -> None:
    # Lists of two or more break lines; one-element lists and sets stay inline; empties are {} / [].
    value = {"many": [1, 2], "one": ["x"], "set": {"b", "a"}, "none": [], "empty": {}}
    expected = '{\n\t"many":[\n\t\t1,\n\t\t2\n\t],\n\t"one":["x"],\n\t"set":["a","b"],\n\t"none":[],\n\t"empty":{}\n}'
    assert dumps_pretty(value) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:{"x":1}},"tps":1.5}',
        # a key-like text inside a string value is data, not a key
        '{"a":"{\\"brokerName\\":\\"b\\",\\"queueId\\":1,\\"topic\\":\\"T\\"}:","t":{}}',
        # names with escapes, fields in another order, bare numeric keys: the general parser's job
        '{"t":{{"brokerName":"b\\u0041","queueId":0,"topic":"T"}:1}}',
        '{"t":{{"topic":"T","brokerName":"b","queueId":0}:1},"n":{0:2}}',
        "[]",
        # many keys, each field of each its own: a key's fields must not move to another key or field
        '{"a":{{"brokerName":"b1","queueId":17,"topic":"T1"}:{"x":1},{"brokerName":"b2","queueId":0,"topic":"T2"}:2},'
        '"s":"}:","b":[{"g":{{"brokerName":"b3","queueId":-1,"topic":"T3"}:{}}},{"h":{}}],'
        '"c":{{"brokerName":"","queueId":2147483647,"topic":""}:[]}}',
        # the whole body a table: a key first, a key last
        '{{"brokerName":"b","queueId":1,"topic":"T"}:1,{"brokerName":"c","queueId":2,"topic":"U"}:{}}',
    ],
)
def test_queue_keyed_fast_path_reads_what_loads_reads(text: str) -> None:
    """The fast path (queue keys rewritten, C json) must give the same queues and values."""
    fast, slow = loads_queue_keyed(text), loads(text)

    def norm(v: Any) -> Any:
        if isinstance(v, dict):
            return {
                (mq_table({k: 0}).popitem()[0] if not isinstance(k, (int, float)) and _is_mq(k) else k): norm(x)
                for k, x in v.items()
            }
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    assert norm(fast) == norm(slow)


def _is_mq(key: Any) -> bool:
    try:
        mq_table({key: 0})
    except ValueError:
        return False
    return True


def test_collector_paused_restores_the_collector_even_on_error() -> None:
    import gc

    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        assert not gc.isenabled()
        raise ValueError("a reply that cannot be read")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
