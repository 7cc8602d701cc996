"""Reading brokers' and name servers' replies into the facade's value types.

Pure functions over a reply (no I/O): each raises :class:`MalformedReply`, naming the address,
when a body or header field is not what a Java server sends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

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
from mqadmin.protocol import bodies
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode, version_name
from mqadmin.protocol.constants import SUBSCRIBE_ALL

__all__ = [
    "PULL_STATUS",
    "SEND_STORED",
    "MalformedReply",
    "broker_config",
    "broker_consume_stats",
    "cluster_info",
    "consume_stats",
    "consumer_connection",
    "decoded",
    "ext_int",
    "merge_connections",
    "pull_status",
    "reset_table",
    "route",
    "running_queues",
    "runtime_version",
    "subscription_group_names",
    "topic_list",
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


_B = TypeVar("_B")


def decoded(addr: str, reply: RemotingCommand, decode: Callable[[bytes], _B]) -> _B:
    """The reply's body read by ``decode`` (a body class's, mqadmin.protocol.bodies)."""
    try:
        return decode(reply.body)
    except bodies.BodyError as exc:
        raise MalformedReply(f"cannot read the reply of {addr}: {exc}", addr) from None


def pull_status(reply: RemotingCommand) -> str | None:
    """The store status a pull reply names in its remark, else the PullStatus of its code;
    None for a code that is no pull outcome."""
    fallback = PULL_STATUS.get(reply.code)
    if fallback is None:
        return None
    remark = reply.remark or ""
    return remark if _STATUS_NAME_RE.fullmatch(remark) else fallback


# -- name server ------------------------------------------------------------------------------


def cluster_info(addr: str, reply: RemotingCommand) -> tuple[list[BrokerData], dict[str, list[str]]]:
    """GET_BROKER_CLUSTER_INFO: the broker sets by name, and the broker names by cluster."""
    info = decoded(addr, reply, bodies.ClusterInfo.decode)
    return sorted(info.broker_addr_table.values(), key=lambda b: b.broker_name), info.cluster_addr_table


def route(addr: str, reply: RemotingCommand) -> tuple[list[BrokerData], list[QueueData]]:
    """GET_ROUTEINFO_BY_TOPIC: the broker sets and queue datas, each by broker name."""
    data = decoded(addr, reply, bodies.TopicRouteData.decode)
    return (
        sorted(data.brokers, key=lambda b: b.broker_name),
        sorted(data.queues, key=lambda q: q.broker_name),
    )


# -- brokers ----------------------------------------------------------------------------------


def _java_version_text(desc: str) -> str:
    """``V5_3_3`` -> ``5.3.3``, ``V4_9_8_SNAPSHOT`` -> ``4.9.8-SNAPSHOT`` (what BrokerInfo carries)."""
    text = desc[1:] if desc[:1] in ("V", "v") else desc
    text = text.replace("_SNAPSHOT", "-SNAPSHOT")
    return text.replace("_", ".")


def runtime_version(addr: str, reply: RemotingCommand) -> str:
    """A broker's version from GET_BROKER_RUNTIME_INFO, else from the ordinal any reply carries."""
    table: Mapping[str, str] = {}
    if reply.code == ResponseCode.SUCCESS:
        try:
            table = bodies.KVTable.decode(reply.body).table
        except bodies.BodyError:
            pass
    desc = table.get("brokerVersionDesc")
    if isinstance(desc, str) and desc:
        return _java_version_text(desc)
    ordinal = table.get("brokerVersion")
    if ordinal is not None and ordinal.isdigit():
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
    return set(decoded(addr, reply, bodies.SubscriptionGroupWrapper.decode).subscription_group_table)


def topic_stats(addr: str, reply: RemotingCommand) -> dict[MessageQueue, QueueStats]:
    """GET_TOPIC_STATS_INFO: each queue's bounds and last update."""
    return decoded(addr, reply, bodies.TopicStatsTable.decode).offset_table


# -- groups -----------------------------------------------------------------------------------


def consume_stats(addr: str, reply: RemotingCommand) -> tuple[dict[MessageQueue, OffsetWrapper], float]:
    """GET_CONSUME_STATS: (rows, consume TPS)."""
    stats = decoded(addr, reply, bodies.ConsumeStatsBody.decode)
    return stats.offset_table, stats.consume_tps


def broker_consume_stats(
    addr: str, reply: RemotingCommand
) -> dict[str, tuple[dict[MessageQueue, OffsetWrapper], float]]:
    """ConsumeStatsList: group -> (rows, tps), summed over the group's topics. The broker leaves
    the rows' pullOffset unset: each is read as the committed offset."""
    out: dict[str, tuple[dict[MessageQueue, OffsetWrapper], float]] = {}
    # the collector stays paused while the many small acyclic objects are kept (as in decode)
    with fastjson.collector_paused():
        try:
            listed = bodies.ConsumeStatsListBody.decode(reply.body, trust_pull_offset=False)
        except bodies.BodyError as exc:
            raise MalformedReply(f"cannot read the broker consume stats from {addr}: {exc}", addr) from None
        for group, per_topic in listed.groups:
            if len(per_topic) == 1:  # the common case: the group's one topic, its rows as they are
                out[group] = (per_topic[0].offset_table, 0.0 + per_topic[0].consume_tps)
                continue
            rows: dict[MessageQueue, OffsetWrapper] = {}
            for stats in per_topic:
                rows.update(stats.offset_table)
            out[group] = (rows, sum((s.consume_tps for s in per_topic), 0.0))
    return out


def running_queues(addr: str, reply: RemotingCommand) -> frozenset[MessageQueue]:
    """GET_CONSUMER_RUNNING_INFO: the queues of the ConsumerRunningInfo's mqTable (client:
    ConsumerRunningInfo.java)."""
    return frozenset(decoded(addr, reply, bodies.ConsumerRunningInfoBody.decode).mq_table)


def consumer_connection(addr: str, reply: RemotingCommand) -> bodies.ConsumerConnectionBody:
    """GET_CONSUMER_CONNECTION_LIST's body."""
    return decoded(addr, reply, bodies.ConsumerConnectionBody.decode)


def reset_table(addr: str, reply: RemotingCommand) -> dict[MessageQueue, int]:
    """INVOKE_BROKER_TO_RESET_OFFSET's ResetOffsetBody; empty when the broker sent no body."""
    return decoded(addr, reply, bodies.ResetOffsetBody.decode).offset_table if reply.body else {}


def topic_list(addr: str, reply: RemotingCommand) -> list[str]:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: the names, sorted and without repeats."""
    return sorted(set(decoded(addr, reply, bodies.TopicList.decode).topic_list))


def merge_connections(answers: list[bodies.ConsumerConnectionBody]) -> ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST bodies of several brokers as one group's connections."""
    clients: dict[str, ClientConnection] = {}
    subs: dict[str, str] = {}
    for one in answers:
        for c in one.connections:
            clients.setdefault(c.client_id, c)
        subs.update(one.subscriptions(SUBSCRIBE_ALL))
    first = answers[0]
    return ConsumerConnection(
        connections=tuple(clients.values()),
        consume_type=first.consume_type,
        message_model=first.message_model,
        consume_from_where=first.consume_from_where,
        subscriptions=subs,
    )
