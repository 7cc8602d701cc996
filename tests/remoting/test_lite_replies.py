"""GET_LITE_GROUP_INFO replies as a 5.5.1 broker writes them (bodies captured from one)."""

from __future__ import annotations

import pytest

from mqadmin.model import LiteGroupInfo, LiteLag, OffsetWrapper
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.remoting.lite import lite_group_info
from mqadmin.remoting.replies import MalformedReply

#: no lite topic asked: the top K by lag (no consumerOffset in the entries), the group's total lag
TOP = (
    b'{"earliestUnconsumedTimestamp":-1,"group":"LG","lagCountTopK":[{"earliestUnconsumedTimestamp":1795855997855,'
    b'"lagCount":3,"liteTopic":"b"},{"earliestUnconsumedTimestamp":1795855997739,"lagCount":3,"liteTopic":"a"}],'
    b'"lagTimestampTopK":[],"liteTopic":"","parentTopic":"LP","totalLagCount":6}'
)
#: one lite topic with a committed offset
ONE = (
    b'{"earliestUnconsumedTimestamp":1795855997739,"group":"LG","liteTopic":"a","liteTopicOffsetWrapper":'
    b'{"brokerOffset":5,"consumerOffset":2,"lastTimestamp":1795855997714,"pullOffset":0},"parentTopic":"LP",'
    b'"totalLagCount":3}'
)
#: one lite topic the group never committed
NONE = b'{"earliestUnconsumedTimestamp":-1,"group":"LG","liteTopic":"c","parentTopic":"LP","totalLagCount":-1}'


def _reply(body: bytes) -> RemotingCommand:
    return RemotingCommand(code=0, body=body)


def test_the_top_list_and_the_total() -> None:
    info = lite_group_info("b:1", _reply(TOP))
    assert info == LiteGroupInfo(
        "LG",
        "LP",
        6,
        None,
        (LiteLag("b", 3, None, 1795855997855), LiteLag("a", 3, None, 1795855997739)),
        None,
    )


def test_one_lite_topic_and_one_never_committed() -> None:
    info = lite_group_info("b:1", _reply(ONE))
    assert info.offsets == OffsetWrapper(5, 2, 1795855997714, 0) and info.earliest_unconsumed_ms == 1795855997739
    none = lite_group_info("b:1", _reply(NONE))
    assert none.offsets is None and none.top == () and none.earliest_unconsumed_ms is None


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"{",
        b'{"totalLagCount":"x"}',
        b'{"lagCountTopK":[{"lagCount":1}]}',
        b'{"liteTopicOffsetWrapper":{"brokerOffset":true}}',
    ],
)
def test_a_malformed_reply_is_named(body: bytes) -> None:
    with pytest.raises(MalformedReply, match="lite group info from b:1"):
        lite_group_info("b:1", _reply(body))
