"""Lite topics (RocketMQ 5.5, RIP-83) in the mock: names, and what GET_LITE_GROUP_INFO answers.

A lite parent topic (attribute ``message.type=LITE``) takes messages with a ``__LITE_TOPIC``
property; the broker (enableLmq, enableMultiDispatch) stores each once in the commit log and
indexes it in the parent's queue and in the LMQ ``%LMQ%$parent$lite`` (queue 0), writing the
LMQ and its offset there into INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET (broker:
SendMessageProcessor, store: LmqDispatch, ConsumeQueue.multiDispatchLmqQueue). A lite group is
a subscription group with the attribute ``lite.bind.topic``; it commits one offset per lite
topic, keyed ``%LMQ%$parent$lite@group`` queue 0. An LMQ has no route and no topic config of
its own: the broker answers any LMQ name with a one-queue config (LmqTopicConfigManager).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from mqadmin import errors, names
from mqadmin.protocol.constants import LITE_PREFIX

if TYPE_CHECKING:
    from mqadmin.mock.model import MockBroker

#: the first broker line with lite topics and GET_LITE_GROUP_INFO
LITE_SINCE: Final = (5, 5)
#: message properties (common: MessageConst)
LITE_TOPIC: Final = "__LITE_TOPIC"
MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
#: topic and group attributes (common: TopicAttributes, SubscriptionGroupAttributes)
MESSAGE_TYPE: Final = "message.type"
BIND_TOPIC: Final = "lite.bind.topic"
#: broker.conf switches that lite topics need (both default to on in a 5.5+ mock store)
SWITCHES: Final = ("enableLmq", "enableMultiDispatch")


def lmq_name(parent: str, lite_topic: str) -> str:
    return f"{LITE_PREFIX}{parent}${lite_topic}"


def split(lmq: str) -> tuple[str, str] | None:
    """(parent, lite topic) of ``%LMQ%$parent$lite``; None for any other name (LiteUtil)."""
    if not lmq.startswith(LITE_PREFIX):
        return None
    parent, sep, lite = lmq[len(LITE_PREFIX) :].partition("$")
    if not sep or not parent or not lite or "$" in lite:
        return None
    return parent, lite


def queue_name_problem(topic: str, lite_on: bool) -> str | None:
    """``names.topic_problem``, except that a broker with lite topics also takes the name of a
    lite topic's queue (``$`` is no topic character, which is what keeps the two apart)."""
    parts = split(topic) if lite_on else None
    if parts is None:
        return names.topic_problem(topic)
    return names.topic_problem(parts[0]) or names.topic_problem(parts[1])


def altered(current: Mapping[str, str] | None, changes: Mapping[str, str]) -> dict[str, str]:
    """Attributes after an update's ``+key`` (set) and ``-key`` (remove) entries, as the broker
    applies them to a topic or group (AttributeUtil.alterCurrentAttributes; unknown keys kept)."""
    out = dict(current or {})
    for key, value in changes.items():
        if key.startswith("+"):
            out[key[1:]] = value
        elif key.startswith("-"):
            out.pop(key[1:], None)
    return dict(sorted(out.items()))


def topic_attributes(text: str | None) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC's ``attributes`` field, ``+message.type=LITE,-key``, as a map."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        key, _, value = part.strip().partition("=")
        if key:
            out[key] = value
    return out


def queue_config(lmq: str) -> dict[str, Any]:
    """The one-queue config a broker answers for any LMQ name."""
    return {"perm": 6, "readQueueNums": 1, "topicName": lmq, "writeQueueNums": 1}


def group_info(broker: MockBroker, group: str, lite_topic: str | None, top_k: int) -> dict[str, Any]:
    """GetLiteGroupInfoResponseBody as a 5.5.1 broker fills it (LiteManagerProcessor,
    LiteConsumerLagCalculator): no lite topic asked, the group's lite topics with a lag, the
    ``top_k`` largest, and the total lag; else that lite topic's offsets. The lag-time top list
    comes from lite consumers' pops, which the mock has none of: empty, time -1. Raises the
    broker's errors for an unknown or ordinary group (an unknown one is created first, as
    findSubscriptionGroupConfig does with autoCreateSubscriptionGroup)."""
    problem = names.group_problem(group)
    if problem is None and group not in broker.groups:
        broker.ensure_group(group, retry_topic=False)
    cfg = broker.groups.get(group)
    if cfg is None:
        raise errors.SubscriptionGroupNotExist(f"Group [{group}] not exist.", broker.addr)
    parent = (cfg.get("attributes") or {}).get(BIND_TOPIC)
    if not parent:
        raise errors.InvalidParameter(f"Group [{group}] is not a LITE group.", broker.addr)
    body: dict[str, Any] = {"earliestUnconsumedTimestamp": -1, "group": group}
    if not lite_topic:
        lags: list[tuple[int, str, int]] = []
        for key, table in broker.offsets.items():
            topic, _, owner = key.rpartition("@")
            parts = split(topic)
            if owner != group or parts is None or table.get(0) is None or table[0] < 0:
                continue
            diff = max(broker.max_offset(topic, 0) - table[0], 0)
            if diff > 0:
                lags.append((diff, parts[1], table[0]))
        # the largest lags; among equal ones the broker's pick follows its hash map, the mock's the name
        top = heapq.nsmallest(max(top_k, 0), lags, key=lambda x: (-x[0], x[1]))
        body["lagCountTopK"] = [
            {
                "earliestUnconsumedTimestamp": _store_time(broker, lmq_name(parent, lite), committed),
                "lagCount": diff,
                "liteTopic": lite,
            }
            for diff, lite, committed in top
        ]
        body["lagTimestampTopK"] = []
        body["totalLagCount"] = sum(d for d, _, _ in lags)
    else:
        lmq = lmq_name(parent, lite_topic)
        hi = broker.max_offset(lmq, 0) if split(lmq) else 0
        if hi > 0:
            committed = broker.committed_offset(group, lmq, 0)
            if committed >= 0:
                body["earliestUnconsumedTimestamp"] = _store_time(broker, lmq, committed)
                last = _store_time(broker, lmq, committed - 1) if committed > 0 else 0
                body["liteTopicOffsetWrapper"] = {
                    "brokerOffset": hi,
                    "consumerOffset": committed,
                    "lastTimestamp": max(last, 0),
                    "pullOffset": 0,
                }
                body["totalLagCount"] = hi - committed
            else:
                body["totalLagCount"] = 0
        else:
            body["totalLagCount"] = -1
    if lite_topic is not None:
        body["liteTopic"] = lite_topic
    body["parentTopic"] = parent
    return dict(sorted(body.items()))


def _store_time(broker: MockBroker, lmq: str, offset: int) -> int:
    """getMessageStoreTimeStamp: the store time at ``offset``, -1 when there is none."""
    t = broker.store_time_at(lmq, 0, offset) if offset >= 0 else None
    return -1 if t is None else t
