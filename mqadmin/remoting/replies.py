"""Reading brokers' and name servers' replies into the facade's value types.

Pure functions over a reply (no I/O): each raises :class:`MalformedReply`, naming the address,
when a body or header field is not what a Java server sends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from mqadmin import errors, fastjson
from mqadmin.model import (
    BrokerData,
    ClientConnection,
    ConsumerConnection,
    MessageQueue,
    OffsetWrapper,
    QueueData,
    QueueStats,
)
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode, version_name
from mqadmin.protocol.constants import PERM_READ_WRITE, SUBSCRIBE_ALL

__all__ = [
    "PULL_STATUS",
    "SEND_STORED",
    "MalformedReply",
    "body",
    "broker_consume_stats",
    "broker_data",
    "consume_stats",
    "ext_int",
    "merge_connections",
    "pull_status",
    "queue_datas",
    "runtime_version",
    "topic_stats",
]

#: pull reply code -> the Java client's PullStatus, used only when the broker's remark names no
#: store status (brokers put GetMessageStatus there: FOUND, OFFSET_TOO_SMALL, OFFSET_OVERFLOW_ONE...)
PULL_STATUS: Final[Mapping[int, str]] = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}
_STATUS_NAME_RE: Final = re.compile(r"[A-Z][A-Z_]*")
#: send replies that still mean "stored" (the broker only missed a flush or a slave)
SEND_STORED: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)


class MalformedReply(errors.ConnectError):
    """A reply we cannot read (missing header field, unparsable body): the peer is not what we expect."""

    def __init__(self, message: str, addr: str) -> None:
        super().__init__(message)
        self.addr = addr


def _response_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"


def ext_int(addr: str, reply: RemotingCommand, name: str) -> int:
    """A numeric header field the reply must carry."""
    value = reply.ext_int(name)
    if value is None:
        raise MalformedReply(
            f"{addr} answered {_response_name(reply.code)} without a numeric {name!r} header field", addr
        )
    return value


def body(addr: str, reply: RemotingCommand, what: str) -> Any:
    """The reply's JSON body (fastjson's dialect)."""
    try:
        return fastjson.loads(reply.body)
    except ValueError as exc:
        raise MalformedReply(f"cannot read the {what} from {addr}: {exc}", addr) from None


def pull_status(reply: RemotingCommand) -> str | None:
    """The store status a pull reply names in its remark, else the PullStatus of its code;
    None for a code that is no pull outcome."""
    fallback = PULL_STATUS.get(reply.code)
    if fallback is None:
        return None
    remark = reply.remark or ""
    return remark if _STATUS_NAME_RE.fullmatch(remark) else fallback


# -- name server ------------------------------------------------------------------------------


def broker_data(raw: Mapping[str, Any]) -> BrokerData:
    addrs = {int(k): str(v) for k, v in (raw.get("brokerAddrs") or {}).items()}
    return BrokerData(str(raw["brokerName"]), str(raw.get("cluster") or ""), addrs)


def queue_datas(data: Mapping[str, Any]) -> list[QueueData]:
    """A route's queueDatas, by broker name."""
    return sorted(
        (
            QueueData(
                str(q["brokerName"]),
                int(q.get("readQueueNums", 0)),
                int(q.get("writeQueueNums", 0)),
                int(q.get("perm", PERM_READ_WRITE)),
                # spelled topicSynFlag up to 4.8
                int(q.get("topicSysFlag", q.get("topicSynFlag", 0))),
            )
            for q in data.get("queueDatas") or []
        ),
        key=lambda q: q.broker_name,
    )


# -- brokers ----------------------------------------------------------------------------------


def _java_version_text(desc: str) -> str:
    """``V5_3_3`` -> ``5.3.3``, ``V4_9_8_SNAPSHOT`` -> ``4.9.8-SNAPSHOT`` (what BrokerInfo carries)."""
    text = desc[1:] if desc[:1] in ("V", "v") else desc
    text = text.replace("_SNAPSHOT", "-SNAPSHOT")
    return text.replace("_", ".")


def runtime_version(addr: str, reply: RemotingCommand) -> str:
    """A broker's version from GET_BROKER_RUNTIME_INFO, else from the ordinal any reply carries."""
    table: Mapping[str, Any] = {}
    if reply.code == ResponseCode.SUCCESS:
        try:
            table = body(addr, reply, "runtime info").get("table") or {}
        except (MalformedReply, AttributeError):
            pass
    desc = table.get("brokerVersionDesc")
    if isinstance(desc, str) and desc:
        return _java_version_text(desc)
    ordinal = table.get("brokerVersion")
    if isinstance(ordinal, str) and ordinal.isdigit():
        return _java_version_text(version_name(int(ordinal)))
    return _java_version_text(version_name(reply.version)) if reply.version > 0 else ""


def broker_config(reply: RemotingCommand) -> dict[str, str] | None:
    """GET_BROKER_CONFIG's properties text (``key=value`` lines), or None when refused or empty
    (broker: AdminBrokerProcessor.java)."""
    if reply.code != ResponseCode.SUCCESS or not reply.body:
        return None
    config: dict[str, str] = {}
    for line in reply.body.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            config[key.strip()] = value.strip()
    return config or None


def subscription_group_names(addr: str, reply: RemotingCommand) -> set[str]:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the names in its subscriptionGroupTable."""
    table = body(addr, reply, "subscription groups").get("subscriptionGroupTable") or {}
    if not isinstance(table, Mapping):
        raise MalformedReply(f"unexpected subscription groups from {addr}: {type(table).__name__}", addr)
    return {str(name) for name in table}


def topic_stats(addr: str, reply: RemotingCommand) -> dict[MessageQueue, QueueStats]:
    """GET_TOPIC_STATS_INFO: each queue's bounds and last update."""
    try:
        data = fastjson.loads_queue_keyed(reply.body)
        return {
            mq: QueueStats(int(row.get("minOffset", 0)), int(row["maxOffset"]), int(row.get("lastUpdateTimestamp", 0)))
            for mq, row in fastjson.mq_table(data.get("offsetTable") or {}).items()
        }
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedReply(f"unexpected topic stats from {addr}: {exc!r}", addr) from None


# -- groups -----------------------------------------------------------------------------------


def consume_stats(addr: str, reply: RemotingCommand) -> tuple[dict[MessageQueue, OffsetWrapper], float]:
    """GET_CONSUME_STATS: (rows, consume TPS)."""
    data = body(addr, reply, "consume stats")
    try:
        rows: dict[MessageQueue, OffsetWrapper] = {}
        for mq, w in fastjson.mq_table(data.get("offsetTable") or {}).items():
            consumer = int(w.get("consumerOffset", 0))
            rows[mq] = OffsetWrapper(
                broker_offset=int(w.get("brokerOffset", 0)),
                consumer_offset=consumer,
                last_timestamp=int(w.get("lastTimestamp", 0)),
                # 4.x has no pullOffset: nothing is known in flight beyond the committed offset
                pull_offset=int(w.get("pullOffset", consumer)),
            )
        return rows, float(data.get("consumeTps", 0.0))
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedReply(f"unexpected consume stats from {addr}: {exc!r}", addr) from None


def broker_consume_stats(
    addr: str, reply: RemotingCommand
) -> dict[str, tuple[dict[MessageQueue, OffsetWrapper], float]]:
    """ConsumeStatsList: ``[{group: [ConsumeStats per topic]}]`` -> group -> (rows, tps).

    The body of a broker with 10,000 groups is megabytes of small objects, all acyclic: the
    cyclic collector is paused while they are built (it walked them several times, a third of
    the parse), and each queue key, repeated by every group on the queue, is read once."""
    queues: dict[Any, MessageQueue] = {}
    try:
        with fastjson.collector_paused():
            data = fastjson.loads_queue_keyed(reply.body)
            out: dict[str, tuple[dict[MessageQueue, OffsetWrapper], float]] = {}
            for entry in data.get("consumeStatsList") or []:
                for group, per_topic in entry.items():
                    rows: dict[MessageQueue, OffsetWrapper] = {}
                    group_tps = 0.0
                    for stats in per_topic or []:
                        for key, w in (stats.get("offsetTable") or {}).items():
                            mq = queues.get(key) if isinstance(key, str) else None
                            if mq is None:
                                mq = fastjson.to_message_queue(key)
                                if isinstance(key, str):
                                    queues[key] = mq
                            consumer = int(w.get("consumerOffset", 0))
                            rows[mq] = OffsetWrapper(
                                broker_offset=int(w.get("brokerOffset", 0)),
                                consumer_offset=consumer,
                                last_timestamp=int(w.get("lastTimestamp", 0)),
                                pull_offset=consumer,  # the broker leaves it unset here
                            )
                        group_tps += float(stats.get("consumeTps", 0.0))
                    out[str(group)] = (rows, group_tps)
        return out
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedReply(f"unexpected broker consume stats from {addr}: {exc!r}", addr) from None


def running_queues(addr: str, reply: RemotingCommand) -> frozenset[MessageQueue]:
    """GET_CONSUMER_RUNNING_INFO: the queues of the ConsumerRunningInfo's mqTable (keyed by queue
    objects; client: ConsumerRunningInfo.java)."""
    try:
        data = fastjson.loads_queue_keyed(reply.body)
        return frozenset(fastjson.mq_table(data.get("mqTable") or {}))
    except (AttributeError, TypeError, ValueError) as exc:
        raise MalformedReply(f"unexpected consumer running info from {addr}: {exc!r}", addr) from None


def merge_connections(bodies: list[dict[str, Any]]) -> ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST bodies of several brokers as one group's connections."""
    clients: dict[str, ClientConnection] = {}
    subs: dict[str, str] = {}
    for one in bodies:
        for c in one.get("connectionSet") or []:
            cid = str(c.get("clientId", ""))
            clients.setdefault(
                cid,
                ClientConnection(
                    cid, str(c.get("clientAddr", "")), str(c.get("language", "")), int(c.get("version", 0))
                ),
            )
        for t, sub in (one.get("subscriptionTable") or {}).items():
            subs[str(t)] = str(sub.get("subString", SUBSCRIBE_ALL)) if isinstance(sub, Mapping) else str(sub)
    first = bodies[0]
    return ConsumerConnection(
        connections=tuple(clients.values()),
        consume_type=str(first.get("consumeType", "")),
        message_model=str(first.get("messageModel", "")),
        consume_from_where=str(first.get("consumeFromWhere", "")),
        subscriptions=subs,
    )
