"""Request headers, declared once: the client builds ``extFields`` from them, the mock parses them.

Each class is one Java ``CommandCustomHeader`` (remoting: protocol/header/*.java): its attributes
are the field names on the wire and each carries its Java type. ``to_ext`` gives the map the
client sends (None fields left out, as Java leaves out nulls); ``parse`` reads a request as the
mock broker answers it: a missing field without a default is SYSTEM_ERROR "the custom field <name>
is null", an int or long outside its Java type is SYSTEM_ERROR too, and a value that is not a
number reads as absent. The wording is Java's header decoding's (remoting: RemotingCommand.java,
decodeCommandCustomHeader); current releases only log such a field and leave it unset, and the
processor then refuses the null or the value.

Fields are declared in the order the broker checks them, so the first problem is the one named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Final, TypeVar

from mqadmin import errors
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.constants import DEFAULT_TOPIC_QUEUE_NUMS, PERM_READ_WRITE

__all__ = [
    "BrokerConsumeStatsHeader",
    "ConsumeStatsHeader",
    "ConsumerGroupHeader",
    "ConsumerRunningInfoHeader",
    "ConsumerSendMsgBackHeader",
    "CreateTopicHeader",
    "Header",
    "KvConfigHeader",
    "LiteGroupInfoHeader",
    "MaxOffsetHeader",
    "PullMessageHeader",
    "QueryConsumerOffsetHeader",
    "QueueHeader",
    "ResetOffsetHeader",
    "RouteInfoHeader",
    "SearchOffsetHeader",
    "SendMessageHeader",
    "TopicHeader",
    "UnregisterClientHeader",
    "UpdateConsumerOffsetHeader",
    "ViewMessageHeader",
]

#: the range of each Java integer type a header field can have
JAVA_RANGES: Final[Mapping[str, tuple[int, int]]] = {
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}

_REQUIRED: Final = dataclasses.MISSING
_H = TypeVar("_H", bound="Header")


def _field(java: str, default: Any, v2: str | None) -> Any:
    meta = {"java": java, "v2": v2}
    if default is _REQUIRED:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def java_string(default: Any = _REQUIRED, *, v2: str | None = None) -> Any:
    """A ``String`` field; without a default it must be present (``@CFNotNull``)."""
    return _field("String", default, v2)


def java_int(default: Any = _REQUIRED, *, v2: str | None = None) -> Any:
    """An ``int``/``Integer`` field: 32-bit signed."""
    return _field("int", default, v2)


def java_long(default: Any = _REQUIRED, *, v2: str | None = None) -> Any:
    """A ``long``/``Long`` field: 64-bit signed."""
    return _field("long", default, v2)


def java_boolean(default: Any = _REQUIRED, *, v2: str | None = None) -> Any:
    """A ``boolean`` field: only "true" (any case) is true (``Boolean.parseBoolean``)."""
    return _field("boolean", default, v2)


def _null(name: str) -> errors.BrokerError:
    return errors.BrokerError.for_code(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Header:
    """One request's custom header; subclasses declare the fields and the request codes."""

    #: the request codes that carry this header (the first is what ``request`` sends)
    CODES: ClassVar[tuple[RequestCode, ...]] = ()

    def to_ext(self) -> dict[str, object]:
        """The extFields map: wire names to values (the codec writes them as Java strings)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def request(self, code: RequestCode | None = None, body: bytes = b"", **kw: Any) -> RemotingCommand:
        """A request carrying this header, of ``code`` or else the first of ``CODES``; ``kw`` as
        ``RemotingCommand.request``."""
        return RemotingCommand.request(code or self.CODES[0], self.to_ext(), body, **kw)

    @classmethod
    def parse(cls: type[_H], req: RemotingCommand, names: Mapping[str, str] | None = None) -> _H:
        """The header of ``req``, checked as the module docstring says.

        ``names`` maps wire names to field names where a request spells them differently.
        """
        ext = req.ext_fields if not names else {names.get(k, k): v for k, v in req.ext_fields.items()}
        probe = req if not names else RemotingCommand(code=req.code, ext_fields=ext)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            values[f.name] = _read(probe, f)
        return cls(**values)


def _read(req: RemotingCommand, f: dataclasses.Field[Any]) -> Any:
    java = f.metadata["java"]
    if java == "String":
        value: Any = req.ext_str(f.name)
    elif java == "boolean":
        value = req.ext_bool(f.name)
    else:
        value = req.ext_int(f.name)
    if value is None:
        if f.default is _REQUIRED:
            raise _null(f.name)
        return f.default
    if java in JAVA_RANGES:
        low, high = JAVA_RANGES[java]
        if not low <= value <= high:
            raise errors.BrokerError.for_code(
                ResponseCode.SYSTEM_ERROR, f"the custom field <{f.name}> is not a Java {java}: {value}"
            )
    return value


# -- name server ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class RouteInfoHeader(Header):
    """GetRouteInfoRequestHeader. The mock's name server answers an empty topic as unknown."""

    CODES = (RequestCode.GET_ROUTEINFO_BY_TOPIC,)
    topic: str = java_string("")
    #: from 4.9.4: ask for standard JSON (quoted broker ids); older servers ignore it
    acceptStandardJsonOnly: bool | None = java_boolean(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class KvConfigHeader(Header):
    """GetKVConfigRequestHeader / GetKVListByNamespaceRequestHeader."""

    CODES = (RequestCode.GET_KV_CONFIG, RequestCode.GET_KVLIST_BY_NAMESPACE)
    namespace: str | None = java_string(None)
    key: str | None = java_string(None)


# -- queues and topics ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class TopicHeader(Header):
    """A request about one topic (GetTopicStatsInfoRequestHeader, GetTopicConfigRequestHeader,
    QueryTopicConsumeByWhoRequestHeader)."""

    CODES = (RequestCode.GET_TOPIC_STATS_INFO, RequestCode.GET_TOPIC_CONFIG, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO)
    topic: str = java_string()


@dataclasses.dataclass(frozen=True, kw_only=True)
class QueueHeader(Header):
    """A request about one queue (GetMinOffsetRequestHeader, GetEarliestMsgStoretimeRequestHeader)."""

    CODES: ClassVar[tuple[RequestCode, ...]] = (RequestCode.GET_MIN_OFFSET, RequestCode.GET_EARLIEST_MSG_STORETIME)
    topic: str = java_string()
    queueId: int = java_int()


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaxOffsetHeader(QueueHeader):
    """GetMaxOffsetRequestHeader; ``committed`` (5.x) asks for what is replicated, 4.x ignores it."""

    CODES = (RequestCode.GET_MAX_OFFSET,)
    committed: bool | None = java_boolean(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchOffsetHeader(QueueHeader):
    """SearchOffsetRequestHeader; ``boundaryType`` (LOWER/UPPER) is read from 5.1.4."""

    CODES = (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,)
    timestamp: int = java_long()
    boundaryType: str | None = java_string(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CreateTopicHeader(Header):
    """CreateTopicRequestHeader (UPDATE_AND_CREATE_TOPIC); unset counts follow each other."""

    CODES = (RequestCode.UPDATE_AND_CREATE_TOPIC,)
    topic: str = java_string()
    readQueueNums: int = java_int(DEFAULT_TOPIC_QUEUE_NUMS)
    writeQueueNums: int | None = java_int(None)
    perm: int = java_int(PERM_READ_WRITE)


# -- consumer offsets and groups --------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class QueryConsumerOffsetHeader(Header):
    """QueryConsumerOffsetRequestHeader."""

    CODES = (RequestCode.QUERY_CONSUMER_OFFSET,)
    consumerGroup: str = java_string()
    topic: str = java_string()
    queueId: int = java_int()
    setZeroIfNotFound: bool | None = java_boolean(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpdateConsumerOffsetHeader(Header):
    """UpdateConsumerOffsetRequestHeader."""

    CODES = (RequestCode.UPDATE_CONSUMER_OFFSET,)
    consumerGroup: str = java_string()
    topic: str = java_string()
    queueId: int = java_int()
    commitOffset: int = java_long()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsumerGroupHeader(Header):
    """A request about one group (GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader)."""

    CODES = (RequestCode.GET_CONSUMER_CONNECTION_LIST, RequestCode.GET_CONSUMER_LIST_BY_GROUP)
    consumerGroup: str = java_string()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsumerRunningInfoHeader(Header):
    """GetConsumerRunningInfoRequestHeader: the broker forwards it, unchanged, to the client."""

    CODES = (RequestCode.GET_CONSUMER_RUNNING_INFO,)
    consumerGroup: str = java_string()
    clientId: str = java_string()
    jstackEnable: bool | None = java_boolean(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsumeStatsHeader(Header):
    """GetConsumeStatsRequestHeader: one topic, every topic (None), or several (``topicList``, a;b)."""

    CODES = (RequestCode.GET_CONSUME_STATS,)
    consumerGroup: str = java_string()
    topic: str | None = java_string(None)
    topicList: str | None = java_string(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LiteGroupInfoHeader(Header):
    """GetLiteGroupInfoRequestHeader (5.5): an empty ``liteTopic`` asks for the group's total lag
    and its ``topK`` lite topics by lag."""

    CODES = (RequestCode.GET_LITE_GROUP_INFO,)
    group: str = java_string()
    liteTopic: str = java_string()
    topK: int = java_int()


@dataclasses.dataclass(frozen=True, kw_only=True)
class BrokerConsumeStatsHeader(Header):
    """GetConsumeStatsInBrokerHeader (GET_BROKER_CONSUME_STATS)."""

    CODES = (RequestCode.GET_BROKER_CONSUME_STATS,)
    isOrder: bool = java_boolean()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResetOffsetHeader(Header):
    """ResetOffsetRequestHeader (INVOKE_BROKER_TO_RESET_OFFSET); ``queueId``/``offset`` are read
    from 5.x (one queue to an exact offset), 4.x ignores them."""

    CODES = (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,)
    topic: str = java_string()
    group: str = java_string()
    timestamp: int = java_long(-1)
    isForce: bool = java_boolean(False)
    queueId: int = java_int(-1)
    offset: int = java_long(-1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnregisterClientHeader(Header):
    """UnregisterClientRequestHeader."""

    CODES = (RequestCode.UNREGISTER_CLIENT,)
    clientID: str = java_string()
    producerGroup: str | None = java_string(None)
    consumerGroup: str | None = java_string(None)


# -- messages ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class PullMessageHeader(Header):
    """PullMessageRequestHeader; ``sysFlag`` holds the PULL_* bits of ``protocol.constants``."""

    CODES = (RequestCode.PULL_MESSAGE,)
    consumerGroup: str = java_string()
    topic: str = java_string()
    queueId: int = java_int()
    queueOffset: int = java_long()
    maxMsgNums: int = java_int(32)
    sysFlag: int = java_int(0)
    commitOffset: int = java_long(-1)
    suspendTimeoutMillis: int = java_long(0)
    subscription: str | None = java_string(None)
    subVersion: int = java_long(0)
    expressionType: str | None = java_string(None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SendMessageHeader(Header):
    """SendMessageRequestHeader, and its V2 form (SendMessageRequestHeaderV2) whose wire names
    are single letters (``v2`` of each field): SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE use those."""

    CODES = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE)
    topic: str = java_string(v2="b")
    queueId: int = java_int(-1, v2="e")
    sysFlag: int = java_int(0, v2="f")
    bornTimestamp: int = java_long(0, v2="g")
    reconsumeTimes: int = java_int(0, v2="j")
    defaultTopicQueueNums: int = java_int(DEFAULT_TOPIC_QUEUE_NUMS, v2="d")
    flag: int = java_int(0, v2="h")
    producerGroup: str | None = java_string(None, v2="a")
    defaultTopic: str | None = java_string(None, v2="c")
    properties: str | None = java_string(None, v2="i")
    unitMode: bool = java_boolean(False, v2="k")
    maxReconsumeTimes: int | None = java_int(None, v2="l")
    batch: bool = java_boolean(False, v2="m")
    brokerName: str | None = java_string(None, v2="n")

    def to_ext_v2(self) -> dict[str, object]:
        """The extFields of SEND_MESSAGE_V2: the same values under their one-letter names."""
        return {f.metadata["v2"]: getattr(self, f.name) for f in dataclasses.fields(self)}

    def request(self, code: RequestCode | None = None, body: bytes = b"", **kw: Any) -> RemotingCommand:
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) by letters; SEND_MESSAGE by long names."""
        code = code or RequestCode.SEND_MESSAGE_V2
        ext = self.to_ext() if code == RequestCode.SEND_MESSAGE else self.to_ext_v2()
        return RemotingCommand.request(code, ext, body, **kw)

    @classmethod
    def parse_any(cls, req: RemotingCommand) -> SendMessageHeader:
        """SEND_MESSAGE by its long names, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE by letters."""
        return cls.parse(req, None if req.code == RequestCode.SEND_MESSAGE else V2_NAMES)


#: SEND_MESSAGE_V2 one-letter wire names -> SendMessageHeader field names
V2_NAMES: Final[Mapping[str, str]] = {
    f.metadata["v2"]: f.name for f in dataclasses.fields(SendMessageHeader) if f.metadata["v2"]
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConsumerSendMsgBackHeader(Header):
    """ConsumerSendMsgBackRequestHeader; ``maxReconsumeTimes`` -1 means the group's own limit."""

    CODES = (RequestCode.CONSUMER_SEND_MSG_BACK,)
    group: str = java_string()
    offset: int = java_long()
    delayLevel: int = java_int(0)
    originMsgId: str | None = java_string(None)
    originTopic: str | None = java_string(None)
    unitMode: bool = java_boolean(False)
    maxReconsumeTimes: int = java_int(-1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ViewMessageHeader(Header):
    """ViewMessageRequestHeader (VIEW_MESSAGE_BY_ID): the message's commit-log offset."""

    CODES = (RequestCode.VIEW_MESSAGE_BY_ID,)
    offset: int = java_long()
