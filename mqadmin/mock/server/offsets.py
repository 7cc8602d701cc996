"""Broker handlers for offsets: consumer offsets (query, commit, all, reset) and queue bounds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqadmin.mock import lite
from mqadmin.mock.server.broker import data_version
from mqadmin.mock.server.role import bad
from mqadmin.model import MessageQueue
from mqadmin.protocol import versions
from mqadmin.protocol.bodies import ConsumerOffsetTable, ResetOffsetBody
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import LanguageCode, ResponseCode
from mqadmin.protocol.headers import (
    MaxOffsetHeader,
    QueryConsumerOffsetHeader,
    QueueHeader,
    ResetOffsetHeader,
    SearchOffsetHeader,
    UpdateConsumerOffsetHeader,
)

if TYPE_CHECKING:
    from mqadmin.mock.server.broker import BrokerRole
    from mqadmin.mock.server.connection import Connection


def query_consumer_offset(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = QueryConsumerOffsetHeader.parse(req)
    topic, qid = header.topic, header.queueId
    role.check_queue(topic, qid)
    with role.lock:
        offset = role.broker.query_consumer_offset(header.consumerGroup, topic, qid, header.setZeroIfNotFound)
    return role.reply(req, ext={"offset": offset})


def update_consumer_offset(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    if req.ext_str("consumerGroup") is not None and req.ext_str("topic") is not None:
        # the processor refuses the null numbers itself (broker: ConsumerManageProcessor.java)
        for name in ("queueId", "commitOffset"):
            if req.ext_int(name) is None:
                invalid = versions.invalid_parameter_for_names(role.server.v)
                code = ResponseCode.INVALID_PARAMETER if invalid else ResponseCode.SYSTEM_ERROR
                raise bad(code, f"the custom field <{name}> is null")
    header = UpdateConsumerOffsetHeader.parse(req)
    group, topic, qid, offset = header.consumerGroup, header.topic, header.queueId, header.commitOffset
    # ConsumerManageProcessor (5.3): a group or topic that cannot exist
    role.check_group(group, f"subscription group not exist, {group}")
    if lite.queue_name_problem(topic, role.broker.lite_on):
        raise bad(ResponseCode.TOPIC_NOT_EXIST, f"topic not exist, {topic}")
    role.check_queue_id(topic, qid)
    with role.lock:
        remark = role.broker.update_consumer_offset(group, topic, qid, offset)
        version = role.broker.offsets_version
    if not req.is_oneway:  # consumers' periodic commits are oneway: no ack to honour, the flush takes them
        role.persist_offsets(version)
    return role.reply(req, remark=remark or None, empty_ext=True)


def search_offset(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = SearchOffsetHeader.parse(req)
    topic, qid = header.topic, header.queueId
    role.check_queue(topic, qid)
    boundary = "LOWER"
    if versions.search_boundary_type(role.server.v):
        boundary = (header.boundaryType or "LOWER").upper()
    with role.lock:
        offset = role.broker.search_offset(topic, qid, header.timestamp, boundary)
    return role.reply(req, ext={"offset": offset})


def max_offset(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    topic, qid = role.check_queue_of(MaxOffsetHeader.parse(req))
    with role.lock:
        return role.reply(req, ext={"offset": role.broker.max_offset(topic, qid)})


def min_offset(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    topic, qid = role.check_queue_of(QueueHeader.parse(req))
    with role.lock:
        return role.reply(req, ext={"offset": role.broker.min_offset(topic, qid)})


def earliest_store_time(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    topic, qid = role.check_queue_of(QueueHeader.parse(req))
    with role.lock:
        return role.reply(req, ext={"timestamp": role.broker.earliest_store_time(topic, qid)})


def all_consumer_offsets(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """The consumer-offset manager's JSON, compact; 5.x adds dataVersion and groupTopicMap
    (broker: ConsumerOffsetManager.java). Java encodes even an empty table."""
    with role.lock:
        table = {k: dict(sorted(v.items())) for k, v in sorted(role.broker.offsets.items())}
    body = ConsumerOffsetTable(table)
    if role.server.v5:
        topics_by_group: dict[str, set[str]] = {}
        for key in table:
            topic, _, group = key.partition("@")
            topics_by_group.setdefault(group, set()).add(topic)
        body = ConsumerOffsetTable(table, data_version(), {g: sorted(t) for g, t in sorted(topics_by_group.items())})
    return role.reply(req, body=body.encode())


def reset_offset(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = ResetOffsetHeader.parse(req)
    topic, group, timestamp = header.topic, header.group, header.timestamp
    with role.lock:
        # The model pushes to online clients through their on_reset callbacks, synchronously
        # and under this lock; they read the request's timestamp from here.
        role.reset_request = (timestamp, req.language == LanguageCode.CPP.name)
        try:
            table = role.broker.reset_offset(topic, group, timestamp, header.isForce, header.queueId, header.offset)
        finally:
            role.reset_request = (-1, False)
        version = role.broker.offsets_version
    role.persist_offsets(version)
    body = ResetOffsetBody({MessageQueue(topic, role.name, q): o for q, o in sorted(table.items())})
    return role.reply(req, body=body.encode())
