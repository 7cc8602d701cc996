"""Lite topics in the mock broker (5.5): a lite message stored once and indexed in its parent's
queue and its LMQ with the broker's dispatch properties, GET_LITE_GROUP_INFO in the shapes a
5.5.1 broker writes (tests/remoting/test_lite_replies.py holds bodies captured from one), the
LMQ answered by the ordinary queue requests, and both doors agreeing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin import errors
from mqadmin.mock.backend import MockAdmin
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_lite_topic
from mqadmin.mock.server import MockServer
from mqadmin.model import LiteGroupInfo, Message, MessageQueue
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.remoting.backend import RemotingAdmin
from tests.mock.server.wire import RawClient
from tests.remoting.test_lite_replies import NONE, ONE, TOP

PARENT, GROUP, PLAIN = "LP", "LG", "G_plain"
LMQ = f"%LMQ%${PARENT}$"
START = 1_790_000_000_000


def _store(root: Path, version: str = "5.5.1", **conf: str) -> MockCluster:
    """One broker: lite topics a (3 messages), b (2), c (1) over a two-queue parent; LG committed
    a at 1, b at 2 (no lag), nothing for c; an ordinary group."""
    cluster = MockCluster.create(root, ("broker-a",), version=version, broker_config=conf or None)
    broker = cluster.brokers["broker-a"]
    broker.create_lite_topic(PARENT, 2)
    fill_lite_topic(broker, PARENT, {"a": 3, "b": 2, "c": 1}, START, 10)
    broker.ensure_lite_group(GROUP, PARENT)
    broker.ensure_group(PLAIN)
    if broker.lite_on:
        broker.update_consumer_offset(GROUP, LMQ + "a", 0, 1)
        broker.update_consumer_offset(GROUP, LMQ + "b", 0, 2)
    return cluster


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[MockServer, MockCluster]]:
    cluster = _store(tmp_path / "s")
    server = MockServer(cluster, namesrv_port=0).start()
    try:
        yield server, cluster
    finally:
        server.stop()
        cluster.close()


def test_a_lite_message_is_stored_once_and_indexed_in_its_parent_queue_and_its_lmq(tmp_path: Path) -> None:
    cluster = _store(tmp_path / "s")
    try:
        b = cluster.brokers["broker-a"]
        assert [b.max_offset(LMQ + n, 0) for n in "abc"] == [3, 2, 1]
        assert b.max_offset(PARENT, 0) + b.max_offset(PARENT, 1) == 6
        parent = {e.commitlog_offset for q in (0, 1) for e in map(b.store.queue(PARENT, q).entry, range(3))}
        lmq = {
            b.store.queue(LMQ + n, 0).entry(i).commitlog_offset
            for n, k in {"a": 3, "b": 2, "c": 1}.items()
            for i in range(k)
        }
        assert parent == lmq and len(lmq) == 6  # one record, two entries pointing at it
        admin = MockAdmin(cluster, "mock://s")
        got = admin.pull(MessageQueue(LMQ + "a", "broker-a", 0), 0, 8).messages
        assert [m.properties["INNER_MULTI_QUEUE_OFFSET"] for m in got] == ["0", "1", "2"]
        assert {m.properties["INNER_MULTI_DISPATCH"] for m in got} == {LMQ + "a"}
        assert [m.queue_offset for m in got] == [0, 0, 1] and [m.queue_id for m in got] == [0, 1, 0]
        assert [m.body for m in got] == [b"a-0", b"a-1", b"a-2"]
    finally:
        cluster.close()


@pytest.mark.parametrize(("version", "conf"), [("5.3.3", {}), ("5.5.1", {"enableLmq": "false"})])
def test_without_lite_topics_a_message_stays_in_its_parent(tmp_path: Path, version: str, conf: dict[str, str]) -> None:
    cluster = _store(tmp_path / "s", version, **conf)
    try:
        b = cluster.brokers["broker-a"]
        assert b.store.topics_on_disk() == [PARENT]
        answers = MockAdmin(cluster, "mock://s").lite_group_info(GROUP, None, 20)
        if version == "5.3.3":
            assert isinstance(answers["broker-a"], errors.RequestCodeNotSupported)
        else:  # the group is still a lite group; it has no lite topic with an offset
            assert answers["broker-a"] == LiteGroupInfo(GROUP, PARENT, 0, None, (), None)
    finally:
        cluster.close()


def _raw(server: MockServer, group: str, lite_topic: str | None, top_k: int = 20) -> tuple[int, str | None, bytes]:
    client = RawClient(server.broker_addrs["broker-a"])
    try:
        ext: dict[str, object] = {"group": group, "topK": top_k}
        if lite_topic is not None:
            ext["liteTopic"] = lite_topic
        reply = client.call(RequestCode.GET_LITE_GROUP_INFO, ext)
        return reply.code, reply.remark, reply.body
    finally:
        client.close()


def test_lite_group_info_has_the_shapes_a_551_broker_writes(served: tuple[MockServer, MockCluster]) -> None:
    server, _ = served
    for golden, lite_topic in ((TOP, ""), (ONE, "a"), (NONE, "zz")):
        code, _, body = _raw(server, GROUP, lite_topic)
        assert code == ResponseCode.SUCCESS
        doc, want = json.loads(body), json.loads(golden)
        assert list(doc) == list(want), (lite_topic, body)  # the same fields, in the broker's order
        if lite_topic == "":
            assert list(doc["lagCountTopK"][0]) == list(want["lagCountTopK"][0])
        if lite_topic == "a":
            assert list(doc["liteTopicOffsetWrapper"]) == list(want["liteTopicOffsetWrapper"])
    code, _, body = _raw(server, GROUP, None)  # the lite topic is optional: then the body names none
    doc = json.loads(_raw(server, GROUP, "")[2])
    assert code == ResponseCode.SUCCESS and json.loads(body) == {k: v for k, v in doc.items() if k != "liteTopic"}
    # b has no lag: the broker's top list leaves it out; c has no offset: not counted
    assert [(t["liteTopic"], t["lagCount"]) for t in doc["lagCountTopK"]] == [("a", 2)]
    assert doc["totalLagCount"] == 2 and doc["lagTimestampTopK"] == [] and doc["earliestUnconsumedTimestamp"] == -1
    assert doc["lagCountTopK"][0]["earliestUnconsumedTimestamp"] == START + 10  # a-1, the first unconsumed
    doc = json.loads(_raw(server, GROUP, "a")[2])
    assert doc["liteTopicOffsetWrapper"] == {
        "brokerOffset": 3,
        "consumerOffset": 1,
        "lastTimestamp": START,
        "pullOffset": 0,
    }
    assert (doc["totalLagCount"], doc["earliestUnconsumedTimestamp"]) == (2, START + 10)
    doc = json.loads(_raw(server, GROUP, "c")[2])  # messages, no committed offset
    assert (doc["totalLagCount"], doc["earliestUnconsumedTimestamp"]) == (0, -1) and "liteTopicOffsetWrapper" not in doc


def test_lite_group_info_refuses_other_groups_as_the_broker_does(served: tuple[MockServer, MockCluster]) -> None:
    server, cluster = served
    assert _raw(server, PLAIN, "")[:2] == (ResponseCode.INVALID_PARAMETER, f"Group [{PLAIN}] is not a LITE group.")
    # an unknown group is created (autoCreateSubscriptionGroup), then it is no lite group
    assert _raw(server, "G_new", "")[:2] == (ResponseCode.INVALID_PARAMETER, "Group [G_new] is not a LITE group.")
    assert "G_new" in cluster.brokers["broker-a"].groups
    assert _raw(server, "bad group", "")[:2] == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "Group [bad group] not exist.",
    )


def test_both_doors_answer_the_same_and_the_lmq_is_an_ordinary_queue(served: tuple[MockServer, MockCluster]) -> None:
    server, cluster = served
    remote = RemotingAdmin(server.namesrv_addr, timeout=5)
    embedded = MockAdmin(cluster, "mock://s")
    try:
        for lite_topic, k in ((None, 20), ("a", 1), ("c", 1), ("zz", 1)):
            assert remote.lite_group_info(GROUP, lite_topic, k) == embedded.lite_group_info(GROUP, lite_topic, k)
        mq = MessageQueue(LMQ + "a", "broker-a", 0)
        for admin in (remote, embedded):
            assert (admin.min_offset(mq), admin.max_offset(mq)) == (0, 3)
            assert admin.search_offset(mq, START + 15) == 2
            assert admin.consumer_offset(GROUP, mq) == 1
            assert admin.queue_stats([mq])[mq].max_offset == 3
            stats = admin.consume_stats(GROUP).offsets
            assert {q.topic: w.consumer_offset for q, w in stats.items()} == {LMQ + "a": 1, LMQ + "b": 2}
        remote.update_consumer_offset(GROUP, mq, 3)
        assert embedded.consumer_offset(GROUP, mq) == 3
        assert remote.reset_offset_by_time(mq.topic, GROUP, 0, broker_name="broker-a", queue_id=0, offset=0) == {mq: 0}
        assert cluster.brokers["broker-a"].committed_offset(GROUP, mq.topic, 0) == 0
        # a producer's send with a lite topic, over the wire: dispatched as the broker does
        sent = remote.send(PARENT, Message(PARENT, b"a-3", {"__LITE_TOPIC": "a"}))
        got = remote.pull(mq, 3, 4).messages
        assert [(m.body, m.properties["INNER_MULTI_QUEUE_OFFSET"], m.queue_offset) for m in got] == [
            (b"a-3", "3", sent.queue_offset)
        ]
        with pytest.raises(errors.TopicNotExist):  # an LMQ has no route of its own
            remote.topic_route(mq.topic)
    finally:
        remote.close()


def test_a_lite_topic_and_group_made_over_the_wire_as_the_java_tool_makes_them(
    served: tuple[MockServer, MockCluster],
) -> None:
    """updateTopic with +message.type=LITE and updateSubGroup with +lite.bind.topic (the requests
    the real-broker lite tests send): the attributes are kept, and the group is a lite group."""
    server, cluster = served
    client = RawClient(server.broker_addrs["broker-a"])
    remote = RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        ext = {"topic": "LP2", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
        reply = client.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**ext, "attributes": "+message.type=LITE"})
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        group = {"groupName": "LG2", "consumeEnable": True, "attributes": {"+lite.bind.topic": "LP2"}}
        reply = client.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group).encode())
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        b = cluster.brokers["broker-a"]
        assert b.topics["LP2"]["attributes"] == {"message.type": "LITE"}
        assert b.groups["LG2"]["attributes"] == {"lite.bind.topic": "LP2"}
        assert "%RETRY%LG2" not in b.topics  # updateSubGroup makes no retry topic
        for i in range(3):
            remote.send("LP2", Message("LP2", b"x", {"__LITE_TOPIC": f"t{i}"}))
        remote.update_consumer_offset("LG2", MessageQueue("%LMQ%$LP2$t1", "broker-a", 0), 0)
        info = remote.lite_group_info("LG2", None, 20)["broker-a"]
        assert isinstance(info, LiteGroupInfo) and (info.parent_topic, info.total_lag) == ("LP2", 1)
        assert [(t.lite_topic, t.lag) for t in info.top] == [("t1", 1)]
    finally:
        remote.close()
        client.close()


def test_a_lite_topic_name_that_cannot_be_a_folder_is_refused_and_nothing_is_stored(
    served: tuple[MockServer, MockCluster],
) -> None:
    server, cluster = served
    b = cluster.brokers["broker-a"]
    before = [b.max_offset(PARENT, q) for q in (0, 1)], b.store.topics_on_disk()
    remote = RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        for bad in ("../x", "a$b", "a/b"):
            with pytest.raises(errors.InvalidParameter):
                remote.send(PARENT, Message(PARENT, b"x", {"__LITE_TOPIC": bad}))
    finally:
        remote.close()
    assert ([b.max_offset(PARENT, q) for q in (0, 1)], b.store.topics_on_disk()) == before


def test_a_broker_before_55_does_not_know_the_request(tmp_path: Path) -> None:
    cluster = _store(tmp_path / "s", "5.3.3")
    server = MockServer(cluster, namesrv_port=0).start()
    try:
        code, _, _ = _raw(server, GROUP, "")
        assert code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        server.stop()
        cluster.close()
