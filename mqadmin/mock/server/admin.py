"""Broker handlers for admin tools: topics, groups, stats and the broker's runtime info."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from mqadmin import fastjson, names
from mqadmin.mock import lite
from mqadmin.mock.lite import LITE_SINCE
from mqadmin.mock.server.broker import MAX_QUEUE_NUMS, data_version
from mqadmin.mock.server.role import bad
from mqadmin.model import MessageQueue, OffsetWrapper, QueueStats
from mqadmin.protocol import versions
from mqadmin.protocol.bodies import (
    ConsumeStatsBody,
    ConsumeStatsListBody,
    GroupList,
    KVTable,
    SubscriptionGroupWrapper,
    TopicStatsTable,
)
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode, version_name
from mqadmin.protocol.constants import PERM_READ_WRITE
from mqadmin.protocol.headers import (
    BrokerConsumeStatsHeader,
    ConsumeStatsHeader,
    CreateTopicHeader,
    LiteGroupInfoHeader,
    TopicHeader,
)

if TYPE_CHECKING:
    from mqadmin.mock.server.broker import BrokerRole
    from mqadmin.mock.server.connection import Connection

#: queues a per-queue request (topic stats) reads under the server lock before letting others in
LOCK_SLICE_QUEUES: Final = 64

_GROUP_DEFAULTS_V5: Final[Mapping[str, Any]] = {
    "attributes": {},
    "consumeMessageOrderly": False,
    "consumeTimeoutMinute": 15,
    "groupRetryPolicy": {"type": "CUSTOMIZED"},
    "groupSysFlag": 0,
}


# -- topics and groups -------------------------------------------------------------------------


def create_topic(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (what ``mqadmin updateTopic`` sends), so Java tools can set up tests."""
    header = CreateTopicHeader.parse(req)
    topic, read, perm = header.topic, header.readQueueNums, header.perm
    role.check_topic(topic)
    write = read if header.writeQueueNums is None else header.writeQueueNums
    for field_name, value in (("readQueueNums", read), ("writeQueueNums", write)):
        if not 0 <= value <= MAX_QUEUE_NUMS:
            raise bad(
                ResponseCode.INVALID_PARAMETER,
                f"{field_name} {value} is out of range: the mock broker allows 0..{MAX_QUEUE_NUMS} queues",
            )
    if not 0 <= perm <= PERM_READ_WRITE | 0x1:
        raise bad(ResponseCode.INVALID_PARAMETER, f"perm {perm} is not a permission (0..7)")
    attributes = lite.topic_attributes(req.ext_str("attributes")) if role.server.v5 else None
    with role.lock:
        role.broker.create_topic(topic, read, write, perm, attributes)
    role.persist_configs()
    return role.reply(req)


def create_group(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the group gets the broker's default config."""
    try:
        data = fastjson.loads(req.body)
        group = str(data["groupName"])
        attributes = {str(k): str(v) for k, v in (data.get("attributes") or {}).items()} if role.server.v5 else None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise bad(ResponseCode.SYSTEM_ERROR, "the request body is not a SubscriptionGroupConfig") from None
    problem = names.group_problem(group)
    if problem:  # AdminBrokerProcessor.updateAndCreateSubscriptionGroup (TopicValidator.validateGroup)
        raise bad(ResponseCode.INVALID_PARAMETER, problem)
    with role.lock:
        role.broker.ensure_group(group, retry_topic=False, attributes=attributes)
    role.persist_configs()
    return role.reply(req)


def broker_config(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """Properties text, ``key=value`` per line, as AdminBrokerProcessor.getBrokerConfig answers."""
    with role.lock:
        config = role.broker.broker_config()
    return role.reply(req, body="".join(f"{k}={v}\n" for k, v in sorted(config.items())).encode())


def subscription_groups(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    with role.lock:
        groups = {name: dict(cfg) for name, cfg in sorted(role.broker.groups.items())}
    if role.server.v5:
        for cfg in groups.values():
            for key, default in _GROUP_DEFAULTS_V5.items():
                cfg.setdefault(key, default)
    body = SubscriptionGroupWrapper(
        {name: dict(sorted(cfg.items())) for name, cfg in groups.items()},
        data_version=data_version(),
        forbidden_table={} if role.server.v5 else None,
    )
    ext = {"totalGroupNum": len(groups)} if versions.subscription_group_total(role.server.v) else None
    return role.reply(req, ext=ext, body=body.encode())


def topic_config(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """GET_TOPIC_CONFIG (5.x only): the topic's config, as the 5.x Java tool reads it."""
    if not role.server.v5:
        return role.reply(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
    topic = TopicHeader.parse(req).topic
    with role.lock:
        cfg = role.broker.topic_config(topic)
        if cfg is None:
            raise bad(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        doc = {
            "attributes": dict(cfg.get("attributes") or {}),
            **{k: v for k, v in sorted(cfg.items()) if k != "attributes"},
        }
    return role.reply(req, body=fastjson.dumps(dict(sorted(doc.items()))).encode())


def consume_by_who(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    topic = TopicHeader.parse(req).topic
    with role.lock:
        groups = {g for g, members in role.broker.clients.items() for c in members.values() if topic in c.subscriptions}
        groups |= {k.partition("@")[2] for k in role.broker.offsets if k.partition("@")[0] == topic}
    return role.reply(req, body=GroupList(sorted(groups)).encode())


# -- stats -------------------------------------------------------------------------------------


def topic_stats(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    topic = TopicHeader.parse(req).topic
    table: dict[MessageQueue, QueueStats] = {}
    with role.lock:
        cfg = role.broker.queue_config(topic)
        if cfg is None:
            raise bad(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        queues = int(cfg["writeQueueNums"])
    for first in range(0, queues, LOCK_SLICE_QUEUES):
        # A slice at a time: a wide topic must not keep a route request waiting for all of it.
        with role.lock:
            for qid in range(first, min(first + LOCK_SLICE_QUEUES, queues)):
                lo, hi = role.broker.min_offset(topic, qid), role.broker.max_offset(topic, qid)
                last = role.broker.store_time_at(topic, qid, hi - 1) if hi > 0 else None
                table[MessageQueue(topic, role.name, qid)] = QueueStats(max(lo, 0), max(hi, 0), last or 0)
    return role.reply(req, body=TopicStatsTable(table).encode())


def consume_stats(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = ConsumeStatsHeader.parse(req)
    group = header.consumerGroup
    topic_list = [t for t in (header.topicList or "").split(";") if t]
    topics: list[str | None] = list(topic_list) or [header.topic or None]
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    with role.lock:
        for topic in topics:
            stats = role.broker.consume_stats(group, topic)
            tps += stats.consume_tps
            table.update(stats.offsets)
    body = ConsumeStatsBody(dict(sorted(table.items())), tps, versions.consume_stats_pull_offset(role.server.v))
    return role.reply(req, body=body.encode())


def broker_consume_stats(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """GET_BROKER_CONSUME_STATS: a ConsumeStatsList of every subscription group.

    The body can hold tens of thousands of queues: ConsumeStatsListBody writes it piece by piece.
    """
    is_order = BrokerConsumeStatsHeader.parse(req).isOrder
    with_pull = versions.consume_stats_pull_offset(role.server.v)
    with role.lock:
        groups = role.broker.broker_consume_stats(is_order)
    total_diff = total_inflight = 0
    listed: list[tuple[str, list[ConsumeStatsBody]]] = []
    for group, per_topic in groups:
        for stats in per_topic:
            for w in stats.offsets.values():
                total_diff += w.broker_offset - w.consumer_offset
                total_inflight += (w.pull_offset if with_pull else 0) - w.consumer_offset
        listed.append((group, [ConsumeStatsBody(s.offsets, s.consume_tps, with_pull) for s in per_topic]))
    body = ConsumeStatsListBody(role.broker.addr, listed, total_diff, total_inflight)
    return role.reply(req, body=body.encode())


def lite_group_info(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """GET_LITE_GROUP_INFO (5.5+): a lite group's lag, overall or of one lite topic (see mock.lite)."""
    if role.server.v < LITE_SINCE:
        return role.reply(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
    lite_topic = req.ext_str("liteTopic")  # may be absent: the top list, and a body without it
    req.ext_fields.setdefault("liteTopic", "")
    header = LiteGroupInfoHeader.parse(req)
    with role.lock:
        body = role.broker.lite_group_info(header.group, lite_topic, header.topK)
    role.persist_configs()  # an unknown group asked about was created, as the broker does
    return role.reply(req, body=fastjson.dumps(body).encode())


# -- the broker --------------------------------------------------------------------------------


def runtime_info(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """A KVTable like the broker's; the remoting backend learns the version from it."""
    stats = role.server.stats()
    uptime_s = int(time.monotonic() - role.server.started_monotonic)
    days, rest = divmod(uptime_s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    with role.lock:
        commitlog_max = role.broker.store.commitlog.write_position()
        commitlog_min = role.broker.store.commitlog.min_offset
    table = {
        "bootTimestamp": str(role.server.started_ms),
        "brokerVersion": str(role.ordinal),
        "brokerVersionDesc": version_name(role.ordinal),
        "commitLogMaxOffset": str(commitlog_max),
        "commitLogMinOffset": str(commitlog_min),
        "msgGetTotalTodayNow": str(stats.get("pulls", 0)),
        "msgPutTotalTodayNow": str(stats.get("messages_stored", 0)),
        "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
    }
    return role.reply(req, body=KVTable(table).encode())
