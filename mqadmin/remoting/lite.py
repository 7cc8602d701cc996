"""Lite topics (RocketMQ 5.5, RIP-83): reading GET_LITE_GROUP_INFO's reply.

A lite group is bound to one lite parent topic; each lite topic keeps its messages in an LMQ
(``%LMQ%$parent$lite``, one queue) on the broker that received them, so a group's lag is asked
of every broker (broker: LiteManagerProcessor.java, GetLiteGroupInfoResponseBody.java).
"""

from __future__ import annotations

from typing import Any

from mqadmin import fastjson
from mqadmin.model import LiteGroupInfo, LiteLag, OffsetWrapper
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.remoting.replies import MalformedReply


def _time(value: Any) -> int | None:
    """The broker writes -1 (or 0) when no message waits."""
    return value if isinstance(value, int) and value > 0 else None


def _int(doc: dict[str, Any], key: str, addr: str) -> int:
    value = doc.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedReply(f"cannot read the lite group info from {addr}: {key} is {value!r}", addr)
    return value


def lite_group_info(addr: str, reply: RemotingCommand) -> LiteGroupInfo:
    """GET_LITE_GROUP_INFO's body: the top list (no lite topic asked) or one lite topic's offsets."""
    try:
        doc = fastjson.loads(reply.body)
    except ValueError as exc:
        raise MalformedReply(f"cannot read the lite group info from {addr}: {exc}", addr) from None
    if not isinstance(doc, dict):
        raise MalformedReply(f"cannot read the lite group info from {addr}: not an object", addr)
    top = []
    for item in doc.get("lagCountTopK") or []:
        if not isinstance(item, dict) or not isinstance(item.get("liteTopic"), str):
            raise MalformedReply(f"cannot read the lite group info from {addr}: a top-K entry is {item!r}", addr)
        top.append(
            LiteLag(
                item["liteTopic"],
                _int(item, "lagCount", addr),
                _int(item, "consumerOffset", addr) if "consumerOffset" in item else None,
                _time(item.get("earliestUnconsumedTimestamp")),
            )
        )
    wrapper = doc.get("liteTopicOffsetWrapper")
    offsets = None
    if isinstance(wrapper, dict):
        offsets = OffsetWrapper(
            _int(wrapper, "brokerOffset", addr),
            _int(wrapper, "consumerOffset", addr),
            _int(wrapper, "lastTimestamp", addr),
            _int(wrapper, "pullOffset", addr),
        )
    return LiteGroupInfo(
        str(doc.get("group") or ""),
        str(doc.get("parentTopic") or ""),
        _int(doc, "totalLagCount", addr),
        _time(doc.get("earliestUnconsumedTimestamp")),
        tuple(top),
        offsets,
    )
