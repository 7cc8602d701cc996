"""Broker handlers for messages: send (single, V2, batch), pull (with long polling), view, send back."""

from __future__ import annotations

import contextlib
import random
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mqadmin import errors
from mqadmin.message import encode_message, format_properties, new_uniq_key, parse_properties, tags_code
from mqadmin.mock import lite
from mqadmin.mock.model import PullOutcome
from mqadmin.mock.server.role import DEFAULT_TOPIC_QUEUES, bad
from mqadmin.mock.store import BatchItem, StoreWriteFailed
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import MQVersion, RequestCode, ResponseCode
from mqadmin.protocol.constants import (
    DEFAULT_MAX_RECONSUME_TIMES,
    EXPRESSION_SQL92,
    EXPRESSION_TAG,
    MASTER_ID,
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    SUBSCRIBE_ALL,
)
from mqadmin.protocol.headers import ConsumerSendMsgBackHeader, PullMessageHeader, SendMessageHeader, ViewMessageHeader

if TYPE_CHECKING:
    from mqadmin.mock.server.broker import BrokerRole
    from mqadmin.mock.server.connection import Connection

MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
#: message properties are written with a 2-byte length (the broker's PROPERTIES_SIZE_EXCEEDED)
MAX_PROPERTIES_SIZE: Final = 32767
#: clients wait 30 s for a pull they ask the broker to hold 15 s; never hold longer than that
MAX_SUSPEND_MS: Final = 15_000
TAG_SEPARATOR: Final = "||"

#: properties the broker stamps on stored messages (seen on real 4.9.8 and 5.3.3 brokers)
PROPERTY_CLUSTER: Final = "CLUSTER"
PROPERTY_WAIT: Final = "WAIT"
V5_STORED_PROPERTIES: Final[Mapping[str, str]] = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}

_BATCH_HEAD: Final = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_PROPS_LEN: Final = struct.Struct(">H")

#: (flag, body, properties) of one message to store
_Item = tuple[int, bytes, dict[str, str]]


@dataclass
class PullParams:
    """A pull as the store reads it (kept while the pull is held)."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_nums: int
    sys_flag: int
    tags: set[str] | None


# -- send --------------------------------------------------------------------------------------


def send(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """SEND_MESSAGE by long field names, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE by letters."""
    header = SendMessageHeader.parse_any(req)
    topic = header.topic
    role.check_topic(topic)
    sent = _send_items(req, header)
    # a message with a lite topic (one send, not a batch) goes to its LMQ as well
    lmqs = role.broker.lite_dispatch(topic, sent[0][2]) if req.code != RequestCode.SEND_BATCH_MESSAGE else []
    items = [_stored(role, flag, body, props) for flag, body, props in sent]
    with role.lock:
        qid = _pick_queue(role, conn, header)
        try:
            first_offset, msg_ids = role.broker.put_batch(
                topic,
                qid,
                items,
                sys_flag=header.sysFlag,
                born_timestamp=header.bornTimestamp,
                born_host=conn.peer,
                reconsume_times=header.reconsumeTimes,
                lmqs=lmqs,
            )
        except StoreWriteFailed as exc:
            raise role.store_unavailable(exc) from None
    role.server.count("messages_stored", len(msg_ids))
    role.server.long_polling.message_arrived(role.name, topic, qid)
    for lmq in lmqs:
        role.server.long_polling.message_arrived(role.name, lmq, 0)
    ext: dict[str, object] = {
        "msgId": ",".join(msg_ids),
        "queueId": qid,
        "queueOffset": first_offset,
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    uniq = sent[0][2]["UNIQ_KEY"] if len(sent) == 1 else None
    if uniq and role.server.v5:  # 4.x leaves it out for plain messages
        ext["transactionId"] = uniq
    return role.reply(req, ext=ext)


def _send_items(req: RemotingCommand, header: SendMessageHeader) -> list[_Item]:
    """The messages of a send, each checked against the broker's size limits."""
    # Stored as Java stores them: UTF-8, a lone surrogate as "?"
    props = parse_properties((header.properties or "").encode("utf-8", "replace").decode("utf-8"))
    if req.code == RequestCode.SEND_BATCH_MESSAGE:
        items = [(flag, body, {**props, **own}) for flag, body, own in _split_batch(req.body)]
    else:
        items = [(header.flag, req.body, props)]
    if not items:
        raise bad(ResponseCode.MESSAGE_ILLEGAL, "the message batch is empty")
    for _, body, _ in items:
        if len(body) > MAX_MESSAGE_SIZE:
            raise bad(ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {MAX_MESSAGE_SIZE}")
    return items


def _pick_queue(role: BrokerRole, conn: Connection, header: SendMessageHeader) -> int:
    """The queue a send goes to (its queueId, or a random writable one); the topic is created
    if unknown. Under the lock."""
    topic, qid = header.topic, header.queueId
    cfg = role.broker.topic_config(topic)
    if cfg is None:
        # autoCreateTopicEnable: the topic takes the producer's default queue count
        wanted = header.defaultTopicQueueNums
        role.broker.create_topic(topic, min(max(wanted, 1), DEFAULT_TOPIC_QUEUES))
        cfg = role.existing_topic_config(topic)
    if not int(cfg.get("perm", PERM_READ_WRITE)) & PERM_WRITE:
        raise bad(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
    write_queues = int(cfg["writeQueueNums"])
    if qid >= max(write_queues, int(cfg["readQueueNums"])) or (qid < 0 and write_queues <= 0):
        # AbstractSendMessageProcessor.msgCheck
        raise bad(
            ResponseCode.INVALID_PARAMETER,
            f"request queueId[{qid}] is illegal, {_topic_config_text(cfg)} Producer: {conn.peer}",
        )
    return random.randrange(write_queues) if qid < 0 else qid


def _stored(role: BrokerRole, flag: int, body: bytes, props: dict[str, str]) -> BatchItem:
    """A message as the store takes it: the properties the broker stamps on it added (a
    UNIQ_KEY if the producer set none, as 5.x does), encoded once, and their size checked as
    the broker's encoder checks the final properties."""
    props.setdefault(PROPERTY_CLUSTER, role.broker.cluster)
    if role.server.v5:
        for key, value in V5_STORED_PROPERTIES.items():
            props.setdefault(key, value)
    else:
        props.pop(PROPERTY_WAIT, None)  # 4.x does not store it
    if "UNIQ_KEY" not in props:
        props["UNIQ_KEY"] = new_uniq_key()
    encoded = format_properties(props).encode()
    if len(encoded) > MAX_PROPERTIES_SIZE:
        # SendMessageProcessor.handlePutMessageResult, PROPERTIES_SIZE_EXCEEDED
        raise bad(
            ResponseCode.MESSAGE_ILLEGAL,
            "the message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {MAX_MESSAGE_SIZE}B, msg properties length limit 32KB.",
        )
    return flag, body, encoded, tags_code(props)


def _split_batch(data: bytes) -> list[_Item]:
    """SEND_BATCH_MESSAGE body: per message its size, magic, body CRC, flag, body length, body,
    then a 2-byte properties length and the properties (common: MessageDecoder.encodeMessages)."""
    out: list[_Item] = []
    pos = 0
    end = len(data)
    try:
        while pos < end:
            size, _, _, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
            body_end = pos + _BATCH_HEAD.size + body_len
            (props_len,) = _PROPS_LEN.unpack_from(data, body_end)
            if size < _BATCH_HEAD.size + 2 or body_len < 0 or body_end + 2 + props_len > end:
                raise ValueError("truncated")
            props = data[body_end + 2 : body_end + 2 + props_len].decode("utf-8", "replace")
            out.append((flag, data[pos + _BATCH_HEAD.size : body_end], parse_properties(props)))
            pos += size
    except (ValueError, struct.error):
        raise bad(ResponseCode.MESSAGE_ILLEGAL, "the batch body is not a list of encoded messages") from None
    return out


def _topic_config_text(cfg: Mapping[str, Any]) -> str:
    """TopicConfig.toString, as the broker puts it into refusals."""
    return (
        f"TopicConfig [topicName={cfg.get('topicName')}, readQueueNums={cfg.get('readQueueNums')}, "
        f"writeQueueNums={cfg.get('writeQueueNums')}, perm={cfg.get('perm')}, "
        f"topicFilterType={cfg.get('topicFilterType', 'SINGLE_TAG')}, topicSysFlag={cfg.get('topicSysFlag', 0)}, "
        f"order={str(cfg.get('order', False)).lower()}]"
    )


# -- pull --------------------------------------------------------------------------------------


def pull(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand | None:
    """PULL_MESSAGE, the store's status mapped to a reply code as the broker does; PULL_NOT_FOUND
    with SUSPEND is held (long polling) until a message arrives or the suspend time ends."""
    header = PullMessageHeader.parse(req)
    params = PullParams(
        group=header.consumerGroup,
        topic=header.topic,
        queue_id=header.queueId,
        offset=header.queueOffset,
        max_nums=max(header.maxMsgNums, 1),
        sys_flag=header.sysFlag,
        tags=None,
    )
    # PullMessageProcessor: a group that cannot exist, then a topic that cannot exist
    role.check_group(params.group, f"subscription group [{params.group}] does not exist,")
    if lite.queue_name_problem(params.topic, role.broker.lite_on):
        remark = f"topic[{params.topic}] not exist, apply first please!"
        raise bad(ResponseCode.TOPIC_NOT_EXIST, role.server.faq(remark))
    role.server.count("pulls")
    with role.lock:
        _check_readable(role, conn, params)
        params.tags = _pull_filter(role, header, params)
        if params.sys_flag & PULL_COMMIT_OFFSET:
            # Before the read, so a pending server-side reset wins over the client's stale offset.
            _commit_on_pull(role, params, header.commitOffset)
        outcome = _read(role, params)
    suspend_ms = min(header.suspendTimeoutMillis, MAX_SUSPEND_MS)
    if (
        pull_code(outcome.status, params.offset) == ResponseCode.PULL_NOT_FOUND
        and params.sys_flag & PULL_SUSPEND
        and suspend_ms > 0
    ):
        if role.server.long_polling.hold(conn, req, role, params, time.monotonic() + suspend_ms / 1000):
            return None
    return pull_reply(role, req, params, outcome)


def _check_readable(role: BrokerRole, conn: Connection, params: PullParams) -> None:
    cfg = role.existing_topic_config(params.topic)
    if not int(cfg.get("perm", PERM_READ_WRITE)) & PERM_READ:
        raise bad(ResponseCode.NO_PERMISSION, f"the topic[{params.topic}] pulling message is forbidden")
    read_queues = int(cfg["readQueueNums"])
    if not 0 <= params.queue_id < read_queues:
        code = ResponseCode.INVALID_PARAMETER if role.server.v5 else ResponseCode.SYSTEM_ERROR
        raise bad(
            code,
            f"queueId[{params.queue_id}] is illegal, topic:[{params.topic}] "
            f"topicConfig.readQueueNums:[{read_queues}] consumer:[/{conn.peer}]",
        )


def _commit_on_pull(role: BrokerRole, params: PullParams, commit: int) -> None:
    if commit < 0:
        return
    if params.group not in role.broker.groups:
        # Java's pull auto-creates the group config; commits here skip 5.3's group check.
        role.broker.ensure_group(params.group)
    with contextlib.suppress(errors.BrokerError):
        role.broker.update_consumer_offset(params.group, params.topic, params.queue_id, commit)


def _pull_filter(role: BrokerRole, header: PullMessageHeader, params: PullParams) -> set[str] | None:
    """Tags to keep (None = all), from the request or from the group's heartbeat."""
    if params.sys_flag & PULL_SUBSCRIPTION:
        expression_type = (header.expressionType or EXPRESSION_TAG).upper()
        if expression_type == EXPRESSION_SQL92:
            raise bad(ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
        return parse_tags(header.subscription or SUBSCRIBE_ALL)
    clients = role.broker.online_clients(params.group)
    if not clients:
        raise bad(ResponseCode.SUBSCRIPTION_NOT_EXIST, role.server.faq("the consumer's group info not exist"))
    expression = next((c.subscriptions[params.topic] for c in clients if params.topic in c.subscriptions), None)
    if expression is None:
        raise bad(ResponseCode.SUBSCRIPTION_NOT_EXIST, role.server.faq("the consumer's subscription not exist"))
    return parse_tags(expression)


def _read(role: BrokerRole, params: PullParams) -> PullOutcome:
    return role.broker.pull(params.group, params.topic, params.queue_id, params.offset, params.max_nums, params.tags)


def read_held(role: BrokerRole, params: PullParams) -> PullOutcome:
    with role.lock:
        return _read(role, params)


def pull_reply(role: BrokerRole, req: RemotingCommand, params: PullParams, outcome: PullOutcome) -> RemotingCommand:
    code = pull_code(outcome.status, params.offset)
    ext: dict[str, object] = {
        "nextBeginOffset": outcome.next_begin_offset,
        "minOffset": outcome.min_offset,
        "maxOffset": outcome.max_offset,
        "suggestWhichBrokerId": MASTER_ID,
    }
    if role.server.v5:
        ext["topicSysFlag"] = 0
        ext["groupSysFlag"] = 0
    body = b"".join(outcome.records) if code == ResponseCode.SUCCESS else b""
    return role.reply(req, code, outcome.status, ext, body)


def pull_code(status: str, request_offset: int) -> int:
    """Store status -> reply code (broker: PullMessageProcessor.java; the statuses come from
    DefaultMessageStore.getMessage). An empty queue is "not found" only for offset 0."""
    if status == "FOUND":
        return ResponseCode.SUCCESS
    if status == "NO_MATCHED_MESSAGE":
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in ("OFFSET_OVERFLOW_ONE", "OFFSET_FOUND_NULL"):
        return ResponseCode.PULL_NOT_FOUND
    if status == "NO_MESSAGE_IN_QUEUE":
        return ResponseCode.PULL_NOT_FOUND if request_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return ResponseCode.PULL_OFFSET_MOVED


def parse_tags(expression: str) -> set[str] | None:
    """``*`` / empty -> every message; ``a || b`` -> those tags."""
    tags = {t.strip() for t in expression.split(TAG_SEPARATOR)}
    tags.discard("")
    if not tags or SUBSCRIBE_ALL in tags:
        return None
    return tags


# -- view and send back ------------------------------------------------------------------------


def view_message(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    offset = ViewMessageHeader.parse(req).offset
    with role.lock:
        # what selectOneMessageByOffset's null becomes (QueryMessageProcessor); checked here, so
        # an offset far past the commit log never reaches the store's arithmetic
        if not 0 <= offset < role.broker.store.commitlog.write_position():
            raise bad(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        msg = role.broker.message_at(offset)
    return role.reply(req, body=encode_message(msg))


def send_back(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = ConsumerSendMsgBackHeader.parse(req)
    group, offset, delay = header.group, header.offset, header.delayLevel
    # AbstractSendMessageProcessor.consumerSendMsgBack: no group config, no retry topic
    role.check_group(group, f"subscription group not exist, {group} ")
    with role.lock:
        if not 0 <= offset < role.broker.store.commitlog.write_position():
            raise bad(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        role.broker.ensure_group(group)  # findSubscriptionGroupConfig auto-creates it
        max_times = header.maxReconsumeTimes
        if req.version < MQVersion.V3_4_9 or max_times < 0:
            max_times = int(role.broker.groups[group].get("retryMaxTimes", DEFAULT_MAX_RECONSUME_TIMES))
        try:
            copy = role.broker.send_back(group, offset, delay, max_times)
        except StoreWriteFailed as exc:
            raise role.store_unavailable(exc) from None
    role.server.count("messages_stored")
    role.server.long_polling.message_arrived(role.name, copy.topic, copy.queue_id)
    return role.reply(req)
