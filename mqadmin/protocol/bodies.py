"""Reply and request bodies, declared once: the mock broker encodes them, the client decodes them.

Each class is one Java body (remoting: protocol/body/*.java, protocol/route/*.java, admin/*.java)
as fastjson writes it: bean fields in alphabetical order, numbers as bare map keys, queues as
object keys (mqadmin.fastjson). ``encode`` gives the bytes a broker sends for the value; ``decode``
reads what a broker (of any version we support) sends, taking Java's defaults for fields an older
release leaves out, and raises :class:`BodyError` (a ValueError) for anything else.

Map orders are the caller's: ``encode`` keeps the order it is given, as fastjson keeps a map's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mqadmin import fastjson
from mqadmin.model import BrokerData, ClientConnection, MessageQueue, OffsetWrapper, QueueData, QueueStats
from mqadmin.protocol.constants import PERM_READ_WRITE

__all__ = [
    "BODIES",
    "BodyError",
    "ClusterInfo",
    "ConsumeStatsBody",
    "ConsumeStatsListBody",
    "ConsumerConnectionBody",
    "ConsumerIdList",
    "ConsumerOffsetTable",
    "ConsumerRunningInfoBody",
    "GroupList",
    "KVTable",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionGroupWrapper",
    "TopicList",
    "TopicRouteData",
    "TopicStatsTable",
]


class BodyError(ValueError):
    """A body that is not the Java class it should be; the message says what was wrong."""


def _load(data: bytes | str, what: str, *, queue_keyed: bool = False) -> Mapping[str, Any]:
    try:
        doc = fastjson.loads_queue_keyed(data) if queue_keyed else fastjson.loads(data)
    except ValueError as exc:
        raise BodyError(f"not a {what}: {exc}") from None
    if not isinstance(doc, Mapping):
        raise BodyError(f"not a {what}: a JSON {type(doc).__name__}")
    return doc


def _wrap(what: str, exc: Exception) -> BodyError:
    return BodyError(f"unexpected {what}: {exc!r}")


# -- offsets and stats ------------------------------------------------------------------------

#: OffsetWrapper's fields (admin/OffsetWrapper.java); pullOffset is 5.x's
_BROKER_OFFSET, _CONSUMER_OFFSET, _LAST_TIMESTAMP, _PULL_OFFSET = (
    "brokerOffset",
    "consumerOffset",
    "lastTimestamp",
    "pullOffset",
)


def _wrapper_json(w: OffsetWrapper, pull_offset: bool) -> str:
    pull = f',"{_PULL_OFFSET}":{w.pull_offset}' if pull_offset else ""
    return (
        f'{{"{_BROKER_OFFSET}":{w.broker_offset},"{_CONSUMER_OFFSET}":{w.consumer_offset},'
        f'"{_LAST_TIMESTAMP}":{w.last_timestamp}{pull}}}'
    )


def _wrapper(row: Mapping[str, Any]) -> OffsetWrapper:
    consumer = int(row.get(_CONSUMER_OFFSET, 0))
    return OffsetWrapper(
        broker_offset=int(row.get(_BROKER_OFFSET, 0)),
        consumer_offset=consumer,
        last_timestamp=int(row.get(_LAST_TIMESTAMP, 0)),
        # 4.x has no pullOffset: nothing is known in flight beyond the committed offset
        pull_offset=int(row.get(_PULL_OFFSET, consumer)),
    )


def _consume_stats_json(
    offsets: Mapping[MessageQueue, OffsetWrapper], tps: float, pull: bool, keys: dict[MessageQueue, str]
) -> str:
    rows = []
    for mq, w in offsets.items():
        key = keys.get(mq)
        if key is None:
            key = keys[mq] = fastjson.dumps(mq)
        rows.append(f"{key}:{_wrapper_json(w, pull)}")
    return f'{{"consumeTps":{fastjson.java_double(tps)},"offsetTable":{{{",".join(rows)}}}}}'


@dataclass(frozen=True)
class ConsumeStatsBody:
    """GET_CONSUME_STATS' ConsumeStats: each queue's offsets and the group's consume TPS."""

    offset_table: dict[MessageQueue, OffsetWrapper]
    consume_tps: float = 0.0
    #: whether the rows carry pullOffset (5.x brokers write it, 4.x have no such field)
    pull_offsets: bool = True

    def encode(self) -> bytes:
        return _consume_stats_json(self.offset_table, self.consume_tps, self.pull_offsets, {}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumeStatsBody:
        doc = _load(data, "ConsumeStats", queue_keyed=True)
        try:
            table = fastjson.mq_table(doc.get("offsetTable") or {})
            rows = {mq: _wrapper(w) for mq, w in table.items()}
            pull = any(_PULL_OFFSET in w for w in table.values()) if table else True
            return cls(rows, float(doc.get("consumeTps", 0.0)), pull)
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("consume stats", exc) from None


@dataclass(frozen=True)
class ConsumeStatsListBody:
    """GET_BROKER_CONSUME_STATS' ConsumeStatsList: every group's ConsumeStats, one per topic.

    Bodies of brokers with 10,000 groups are megabytes: both directions work piece by piece
    (no document in between), each queue key written and read once however many groups share it.
    """

    broker_addr: str
    #: (group, its ConsumeStats per topic), in the broker's order
    groups: Sequence[tuple[str, Sequence[ConsumeStatsBody]]]
    total_diff: int = 0
    total_inflight_diff: int = 0

    def encode(self) -> bytes:
        keys: dict[MessageQueue, str] = {}
        parts = []
        for group, per_topic in self.groups:
            stats = ",".join(
                _consume_stats_json(s.offset_table, s.consume_tps, s.pull_offsets, keys) for s in per_topic
            )
            parts.append(f"{{{fastjson.dumps(group)}:[{stats}]}}")
        return (
            f'{{"brokerAddr":{fastjson.dumps(self.broker_addr)},"consumeStatsList":[{",".join(parts)}],'
            f'"totalDiff":{self.total_diff},"totalInflightDiff":{self.total_inflight_diff}}}'
        ).encode()

    @classmethod
    def decode(cls, data: bytes | str, *, trust_pull_offset: bool = True) -> ConsumeStatsListBody:
        """``trust_pull_offset=False`` reads each row's pull offset as its committed one: brokers
        build these rows without setting it (broker: AdminBrokerProcessor.java)."""
        queues: dict[Any, MessageQueue] = {}
        try:
            # the cyclic collector walked the many small acyclic objects several times: paused
            with fastjson.collector_paused():
                doc = _load(data, "ConsumeStatsList", queue_keyed=True)
                groups: list[tuple[str, list[ConsumeStatsBody]]] = []
                for entry in doc.get("consumeStatsList") or []:
                    for group, per_topic in entry.items():
                        stats = []
                        for one in per_topic or []:
                            rows: dict[MessageQueue, OffsetWrapper] = {}
                            w: Mapping[str, Any] = {_PULL_OFFSET: 0}  # no rows: as 5.x
                            for key, w in (one.get("offsetTable") or {}).items():
                                mq = queues.get(key) if isinstance(key, str) else None
                                if mq is None:
                                    mq = fastjson.to_message_queue(key)
                                    if isinstance(key, str):
                                        queues[key] = mq
                                # _wrapper, inlined: this loop runs once per queue of every group
                                consumer = int(w.get(_CONSUMER_OFFSET, 0))
                                rows[mq] = OffsetWrapper(
                                    int(w.get(_BROKER_OFFSET, 0)),
                                    consumer,
                                    int(w.get(_LAST_TIMESTAMP, 0)),
                                    int(w.get(_PULL_OFFSET, consumer)) if trust_pull_offset else consumer,
                                )
                            # a broker writes every row of a list alike: the last says for all
                            tps = float(one.get("consumeTps", 0.0))
                            stats.append(ConsumeStatsBody(rows, tps, _PULL_OFFSET in w))
                        groups.append((str(group), stats))
            return cls(
                str(doc.get("brokerAddr") or ""),
                groups,
                int(doc.get("totalDiff", 0)),
                int(doc.get("totalInflightDiff", 0)),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("broker consume stats", exc) from None


#: TopicOffset's fields (admin/TopicOffset.java)
_LAST_UPDATE, _MAX_OFFSET, _MIN_OFFSET = "lastUpdateTimestamp", "maxOffset", "minOffset"


@dataclass(frozen=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO's TopicStatsTable: each queue's bounds and last store time."""

    offset_table: dict[MessageQueue, QueueStats]
    topic_put_tps: float = 0.0

    def encode(self) -> bytes:
        table = {
            mq: {_LAST_UPDATE: s.last_update_timestamp, _MAX_OFFSET: s.max_offset, _MIN_OFFSET: s.min_offset}
            for mq, s in self.offset_table.items()
        }
        return fastjson.dumps({"offsetTable": table, "topicPutTps": self.topic_put_tps}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> TopicStatsTable:
        doc = _load(data, "TopicStatsTable", queue_keyed=True)
        try:
            rows = {
                mq: QueueStats(int(row.get(_MIN_OFFSET, 0)), int(row[_MAX_OFFSET]), int(row.get(_LAST_UPDATE, 0)))
                for mq, row in fastjson.mq_table(doc.get("offsetTable") or {}).items()
            }
            return cls(rows, float(doc.get("topicPutTps", 0.0)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _wrap("topic stats", exc) from None


@dataclass(frozen=True)
class ResetOffsetBody:
    """INVOKE_BROKER_TO_RESET_OFFSET's answer and the reset pushed to Java clients: queue -> offset."""

    offset_table: dict[MessageQueue, int]

    def encode(self) -> bytes:
        return fastjson.dumps({"offsetTable": self.offset_table}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ResetOffsetBody:
        doc = _load(data, "ResetOffsetBody")
        try:
            return cls({mq: int(o) for mq, o in fastjson.mq_table(doc.get("offsetTable") or {}).items()})
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("reset result", exc) from None


@dataclass(frozen=True)
class ResetOffsetBodyForC:
    """The reset a broker pushes when the admin request said CPP: a list, as C++ clients read it."""

    offset_table: dict[MessageQueue, int]

    def encode(self) -> bytes:
        rows = [
            {"brokerName": mq.broker_name, "offset": o, "queueId": mq.queue_id, "topic": mq.topic}
            for mq, o in self.offset_table.items()
        ]
        return fastjson.dumps({"offsetTable": rows}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ResetOffsetBodyForC:
        doc = _load(data, "ResetOffsetBodyForC")
        try:
            return cls(
                {
                    MessageQueue(str(r["topic"]), str(r["brokerName"]), int(r["queueId"])): int(r["offset"])
                    for r in doc.get("offsetTable") or []
                }
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _wrap("reset body for C", exc) from None


@dataclass(frozen=True)
class ConsumerOffsetTable:
    """GET_ALL_CONSUMER_OFFSET's ConsumerOffsetManager: ``topic@group`` -> queue id -> offset.

    5.x adds the dataVersion and groupTopicMap (broker: ConsumerOffsetManager.java)."""

    offset_table: dict[str, dict[int, int]]
    data_version: dict[str, int] | None = None
    group_topic_map: dict[str, list[str]] | None = None

    def encode(self) -> bytes:
        doc: dict[str, Any] = {}
        if self.data_version is not None:
            doc["dataVersion"] = self.data_version
        if self.group_topic_map is not None:
            doc["groupTopicMap"] = self.group_topic_map
        doc["offsetTable"] = self.offset_table
        return fastjson.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerOffsetTable:
        doc = _load(data, "ConsumerOffsetManager")
        try:
            table = {str(k): {int(q): int(o) for q, o in v.items()} for k, v in (doc.get("offsetTable") or {}).items()}
            version = doc.get("dataVersion")
            topics = doc.get("groupTopicMap")
            return cls(
                table,
                None if version is None else {str(k): int(v) for k, v in version.items()},
                None if topics is None else {str(g): [str(t) for t in ts] for g, ts in topics.items()},
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("consumer offsets", exc) from None


# -- name server --------------------------------------------------------------------------------


def _broker_data_doc(b: BrokerData, acting_master: bool) -> dict[str, Any]:
    """BrokerData (route/BrokerData.java); 5.x writes enableActingMaster too."""
    doc: dict[str, Any] = {"brokerAddrs": b.addrs, "brokerName": b.broker_name, "cluster": b.cluster}
    if acting_master:
        doc["enableActingMaster"] = False
    return doc


def _broker_data(raw: Mapping[str, Any]) -> BrokerData:
    addrs = {int(k): str(v) for k, v in (raw.get("brokerAddrs") or {}).items()}
    return BrokerData(str(raw["brokerName"]), str(raw.get("cluster") or ""), addrs)


@dataclass(frozen=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO's ClusterInfo: broker sets by name, broker names by cluster.

    Never standard JSON, whatever the client asks (namesrv: DefaultRequestProcessor.java)."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]
    #: whether the BrokerData carry enableActingMaster (5.x)
    acting_master: bool = False

    def encode(self) -> bytes:
        table = {name: _broker_data_doc(b, self.acting_master) for name, b in self.broker_addr_table.items()}
        return fastjson.dumps({"brokerAddrTable": table, "clusterAddrTable": self.cluster_addr_table}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ClusterInfo:
        doc = _load(data, "ClusterInfo")
        try:
            raw = doc.get("brokerAddrTable") or {}
            brokers = {str(k): _broker_data(v) for k, v in raw.items()}
            clusters = {str(k): [str(n) for n in v] for k, v in (doc.get("clusterAddrTable") or {}).items()}
            acting = any("enableActingMaster" in v for v in raw.values())
            return cls(brokers, clusters, acting)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _wrap("cluster info", exc) from None


@dataclass(frozen=True)
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC's TopicRouteData: the topic's broker sets and queue counts."""

    brokers: Sequence[BrokerData]
    queues: Sequence[QueueData]
    acting_master: bool = False

    def encode(self, *, standard: bool = False) -> bytes:
        """``standard``: the JSON a 4.9.4+ name server sends a client that accepts only that:
        quoted broker ids, sorted keys, non-ASCII escaped (fastjson's BrowserCompatible and
        MapSortField, namesrv: DefaultRequestProcessor.java)."""
        brokers = [_broker_data_doc(b, self.acting_master) for b in self.brokers]
        queues = [
            {
                "brokerName": q.broker_name,
                "perm": q.perm,
                "readQueueNums": q.read_queue_nums,
                "topicSysFlag": q.topic_sys_flag,
                "writeQueueNums": q.write_queue_nums,
            }
            for q in self.queues
        ]
        doc: dict[str, Any] = {"brokerDatas": brokers, "filterServerTable": {}, "queueDatas": queues}
        if standard:
            for b in brokers:
                b["brokerAddrs"] = {str(k): v for k, v in b["brokerAddrs"].items()}
            return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
        return fastjson.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> TopicRouteData:
        doc = _load(data, "TopicRouteData")
        try:
            raw = doc.get("brokerDatas") or []
            brokers = [_broker_data(b) for b in raw]
            queues = [
                QueueData(
                    str(q["brokerName"]),
                    int(q.get("readQueueNums", 0)),
                    int(q.get("writeQueueNums", 0)),
                    int(q.get("perm", PERM_READ_WRITE)),
                    # spelled topicSynFlag up to 4.8
                    int(q.get("topicSysFlag", q.get("topicSynFlag", 0))),
                )
                for q in doc.get("queueDatas") or []
            ]
            return cls(brokers, queues, any("enableActingMaster" in b for b in raw))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _wrap("route data", exc) from None


def _names(data: bytes | str, what: str, key: str) -> list[str]:
    doc = _load(data, what)
    names = doc.get(key) or []
    if not isinstance(names, list):
        raise BodyError(f"unexpected {what}: {key} is a {type(names).__name__}")
    return [str(n) for n in names]


@dataclass(frozen=True)
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER's TopicList (a set in Java; the order is the sender's)."""

    topic_list: list[str]

    def encode(self) -> bytes:
        return fastjson.dumps({"topicList": self.topic_list}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> TopicList:
        return cls(_names(data, "TopicList", "topicList"))


# -- groups and clients -------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO's GroupList."""

    group_list: list[str]

    def encode(self) -> bytes:
        return fastjson.dumps({"groupList": self.group_list}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> GroupList:
        return cls(_names(data, "GroupList", "groupList"))


@dataclass(frozen=True)
class ConsumerIdList:
    """GET_CONSUMER_LIST_BY_GROUP's answer: the client ids of a group's online members."""

    consumer_id_list: list[str]

    def encode(self) -> bytes:
        return fastjson.dumps({"consumerIdList": self.consumer_id_list}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerIdList:
        return cls(_names(data, "consumer id list", "consumerIdList"))


@dataclass(frozen=True)
class ConsumerConnectionBody:
    """GET_CONSUMER_CONNECTION_LIST's ConsumerConnection: the members and their subscriptions.

    ``subscription_table`` holds each topic's SubscriptionData as sent (its fields vary by
    client and version); :meth:`subscriptions` reads the expressions from it."""

    connections: list[ClientConnection]
    consume_from_where: str = ""
    consume_type: str = ""
    message_model: str = ""
    subscription_table: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc = {
            "connectionSet": [
                {"clientAddr": c.client_addr, "clientId": c.client_id, "language": c.language, "version": c.version}
                for c in self.connections
            ],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": self.subscription_table,
        }
        return fastjson.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerConnectionBody:
        doc = _load(data, "ConsumerConnection")
        try:
            connections = [
                ClientConnection(
                    str(c.get("clientId", "")),
                    str(c.get("clientAddr", "")),
                    str(c.get("language", "")),
                    int(c.get("version", 0)),
                )
                for c in doc.get("connectionSet") or []
            ]
            subs = {str(t): s for t, s in (doc.get("subscriptionTable") or {}).items()}
            return cls(
                connections,
                str(doc.get("consumeFromWhere", "")),
                str(doc.get("consumeType", "")),
                str(doc.get("messageModel", "")),
                subs,
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("consumer connections", exc) from None

    def subscriptions(self, default: str) -> dict[str, str]:
        """topic -> subscription expression (``default`` where a SubscriptionData names none)."""
        return {
            t: str(s.get("subString", default)) if isinstance(s, Mapping) else str(s)
            for t, s in self.subscription_table.items()
        }


@dataclass(frozen=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's request: an orderly consumer's queues to (un)lock."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue]
    only_this_broker: bool = False

    def encode(self) -> bytes:
        doc = {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": self.mq_set,
            "onlyThisBroker": self.only_this_broker,
        }
        return fastjson.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> LockBatchRequestBody:
        doc = _load(data, "LockBatchRequestBody")
        try:
            mqs = [fastjson.to_message_queue(m) for m in doc.get("mqSet") or []]
            return cls(str(doc["consumerGroup"]), str(doc["clientId"]), mqs, bool(doc.get("onlyThisBroker", False)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise _wrap("lock request", exc) from None


@dataclass(frozen=True)
class LockBatchResponseBody:
    """LOCK_BATCH_MQ's answer: the queues the client holds now."""

    lock_ok_mq_set: list[MessageQueue]

    def encode(self) -> bytes:
        return fastjson.dumps({"lockOKMQSet": self.lock_ok_mq_set}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> LockBatchResponseBody:
        doc = _load(data, "LockBatchResponseBody")
        try:
            return cls([fastjson.to_message_queue(m) for m in doc.get("lockOKMQSet") or []])
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("lock answer", exc) from None


@dataclass(frozen=True)
class ConsumerRunningInfoBody:
    """GET_CONSUMER_RUNNING_INFO's ConsumerRunningInfo, as far as mqadmin reads it: the queues
    the client holds (mqTable, keyed by queue objects) and what it says of itself."""

    mq_table: dict[MessageQueue, dict[str, Any]]
    properties: dict[str, str] = field(default_factory=dict)
    status_table: dict[str, Any] = field(default_factory=dict)
    subscription_set: list[dict[str, Any]] = field(default_factory=list)

    def encode(self) -> bytes:
        doc = {
            "mqTable": self.mq_table,
            "properties": self.properties,
            "statusTable": self.status_table,
            "subscriptionSet": self.subscription_set,
        }
        return fastjson.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerRunningInfoBody:
        doc = _load(data, "ConsumerRunningInfo", queue_keyed=True)
        try:
            return cls(
                {mq: dict(v) for mq, v in fastjson.mq_table(doc.get("mqTable") or {}).items()},
                {str(k): str(v) for k, v in (doc.get("properties") or {}).items()},
                dict(doc.get("statusTable") or {}),
                list(doc.get("subscriptionSet") or []),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("consumer running info", exc) from None


@dataclass(frozen=True)
class SubscriptionGroupWrapper:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's SubscriptionGroupWrapper: each group's config as the
    broker holds it (its fields vary by version, so kept as sent); 5.x adds forbiddenTable."""

    subscription_group_table: dict[str, dict[str, Any]]
    data_version: dict[str, int] | None = None
    forbidden_table: dict[str, Any] | None = None

    def encode(self) -> bytes:
        doc: dict[str, Any] = {}
        if self.data_version is not None:
            doc["dataVersion"] = self.data_version
        if self.forbidden_table is not None:
            doc["forbiddenTable"] = self.forbidden_table
        doc["subscriptionGroupTable"] = self.subscription_group_table
        return fastjson.dumps(doc).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> SubscriptionGroupWrapper:
        doc = _load(data, "SubscriptionGroupWrapper")
        table = doc.get("subscriptionGroupTable") or {}
        if not isinstance(table, Mapping):
            raise BodyError(f"unexpected subscription groups: {type(table).__name__}")
        try:
            version = doc.get("dataVersion")
            forbidden = doc.get("forbiddenTable")
            return cls(
                {str(name): dict(cfg) for name, cfg in table.items()},
                None if version is None else {str(k): int(v) for k, v in version.items()},
                None if forbidden is None else dict(forbidden),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise _wrap("subscription groups", exc) from None


# -- the broker -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class KVTable:
    """GET_BROKER_RUNTIME_INFO's KVTable: the broker's runtime facts, every value a string."""

    table: dict[str, str]

    def encode(self) -> bytes:
        return fastjson.dumps({"table": self.table}).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> KVTable:
        doc = _load(data, "KVTable")
        table = doc.get("table") or {}
        if not isinstance(table, Mapping):
            raise BodyError(f"unexpected runtime info: table is a {type(table).__name__}")
        return cls({str(k): str(v) for k, v in table.items()})


#: every body class, for the conformance tests
BODIES: Final[tuple[type, ...]] = (
    ClusterInfo,
    ConsumeStatsBody,
    ConsumeStatsListBody,
    ConsumerConnectionBody,
    ConsumerIdList,
    ConsumerOffsetTable,
    ConsumerRunningInfoBody,
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
