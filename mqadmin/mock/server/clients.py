"""Broker handlers for clients: heartbeats, membership, queue locks, and pushes to consumers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from mqadmin import fastjson, names
from mqadmin.message import java_string_hash
from mqadmin.mock.model import ClientInfo
from mqadmin.mock.server.messages import parse_tags
from mqadmin.mock.server.role import bad
from mqadmin.model import ClientConnection, MessageQueue
from mqadmin.protocol import versions
from mqadmin.protocol.bodies import (
    BodyError,
    ConsumerConnectionBody,
    ConsumerIdList,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
)
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import MQVersion, RequestCode, ResponseCode, version_name
from mqadmin.protocol.constants import EXPRESSION_TAG, SUBSCRIBE_ALL
from mqadmin.protocol.headers import ConsumerGroupHeader, ConsumerRunningInfoHeader, UnregisterClientHeader
from mqadmin.timeparse import now_ms

if TYPE_CHECKING:
    from mqadmin.mock.server.broker import BrokerRole
    from mqadmin.mock.server.connection import Connection

log = logging.getLogger("mqadmin.mock.server")

#: orderly consumers' queue locks expire after this long without renewal (REBALANCE_LOCK_MAX_LIVE_TIME)
LOCK_LIVE_S: Final = 60.0

# Enum names by ordinal: Java heartbeats carry the names, the C++ client's the ordinals, in the
# same order (remoting: ConsumeType.java, MessageModel.java, ConsumeFromWhere.java).
CONSUME_TYPES: Final = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS: Final = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE: Final = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


# -- heartbeats and membership -----------------------------------------------------------------


def heartbeat(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    try:
        data = fastjson.loads(req.body)
        client_id = str(data["clientID"])
        consumers = list(data.get("consumerDataSet") or [])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise bad(ResponseCode.SYSTEM_ERROR, "the heartbeat body is not HeartbeatData") from None
    without_sub = bool(data.get("withoutSub"))
    changed: list[str] = []
    sub_changed = False
    with role.lock:
        for consumer in consumers:
            if not isinstance(consumer, Mapping) or not consumer.get("groupName"):
                continue
            group = str(consumer["groupName"])
            if names.group_problem(group):
                continue  # ClientManageProcessor skips a group findSubscriptionGroupConfig refuses
            subs = {
                str(s["topic"]): _subscription_json(s)
                for s in consumer.get("subscriptionDataSet") or []
                if isinstance(s, Mapping) and s.get("topic")
            }
            known_subs = role.subscriptions.get((group, client_id))
            if without_sub and not subs:  # a 5.x "lite" heartbeat: the subscription is unchanged
                subs = known_subs or {}
                sub_changed |= known_subs is None  # unknown to us: ask for a full heartbeat
            else:
                sub_changed |= known_subs is None or _sub_strings(known_subs) != _sub_strings(subs)
            if _register(role, conn, req, client_id, group, consumer, subs):
                changed.append(group)
    for group in changed:
        notify_ids_changed(role, group)
    ext = None
    if versions.heartbeat_v2(role.server.v):  # lite heartbeats keyed by a subscription fingerprint
        ext = {"IS_SUPPORT_HEART_BEAT_V2": True, "IS_SUB_CHANGE": sub_changed}
    return role.reply(req, ext=ext)


def _register(
    role: BrokerRole,
    conn: Connection,
    req: RemotingCommand,
    client_id: str,
    group: str,
    consumer: Mapping[str, Any],
    subs: dict[str, dict[str, Any]],
) -> bool:
    """Record one consumer of a heartbeat (under the lock); True when it is new to its group."""
    known = {c.client_id for c in role.broker.online_clients(group)}
    info = ClientInfo(
        client_id=client_id,
        group=group,
        addr=conn.peer,
        language=req.language,
        version=req.version,
        consume_type=_enum_name(consumer.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"),
        message_model=_enum_name(consumer.get("messageModel"), MESSAGE_MODELS, "CLUSTERING"),
        consume_from_where=_enum_name(consumer.get("consumeFromWhere"), CONSUME_FROM_WHERE, CONSUME_FROM_WHERE[0]),
        subscriptions={t: str(s["subString"]) for t, s in subs.items()},
        on_reset=_reset_pusher(role, conn, client_id, group, req.version),
    )
    role.broker.register_client(info)
    role.subscriptions[(group, client_id)] = subs
    role.server.bind_client(conn, role.name, group, client_id)
    return client_id not in known


def unregister_client(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = UnregisterClientHeader.parse(req)
    client_id, group = header.clientID, header.consumerGroup
    if group:
        forget_client(role, group, client_id)
    return role.reply(req, empty_ext=True)


def forget_client(role: BrokerRole, group: str, client_id: str, conn: Connection | None = None) -> None:
    """Drop a client (on UNREGISTER_CLIENT, or when ``conn``, its connection, closed)."""
    with role.lock:
        if not role.server.unbind_client(role.name, group, client_id, conn):
            return
        role.broker.unregister_client(group, client_id)
        role.subscriptions.pop((group, client_id), None)
        for key in [k for k, (holder, _) in role.locks.items() if k[0] == group and holder == client_id]:
            del role.locks[key]
    if not role.server.stopping:
        notify_ids_changed(role, group)


def notify_ids_changed(role: BrokerRole, group: str) -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED to every member, so C++ consumers rebalance at once."""
    with role.lock:
        members = [c.client_id for c in role.broker.online_clients(group)]
    for client_id in members:
        target = role.server.client_connection(role.name, group, client_id)
        if target is not None:
            target.send(role.server.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))


def consumer_list(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    group = ConsumerGroupHeader.parse(req).consumerGroup
    with role.lock:
        ids = sorted(c.client_id for c in role.broker.online_clients(group))
    if not ids:
        raise bad(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
    return role.reply(req, body=ConsumerIdList(ids).encode())


def consumer_connections(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    group = ConsumerGroupHeader.parse(req).consumerGroup
    with role.lock:
        clients = sorted(role.broker.online_clients(group), key=lambda c: c.client_id)
        subs: dict[str, dict[str, Any]] = {}
        for c in clients:
            subs.update(role.subscriptions.get((group, c.client_id), {}))
    if not clients:
        raise bad(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
    last = clients[-1]
    body = ConsumerConnectionBody(
        [ClientConnection(c.client_id, c.addr, c.language, c.version) for c in clients],
        consume_from_where=last.consume_from_where,
        consume_type=last.consume_type,
        message_model=last.message_model,
        subscription_table=dict(sorted(subs.items())),
    )
    return role.reply(req, body=body.encode())


# -- queue locks (orderly consumers) -----------------------------------------------------------


def lock_batch(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    client_id, group, mqs = _lock_body(req.body)
    now = time.monotonic()
    locked: list[MessageQueue] = []
    with role.lock:
        for mq in mqs:
            holder = role.locks.get((group, mq))
            if holder is None or holder[0] == client_id or now - holder[1] > LOCK_LIVE_S:
                role.locks[(group, mq)] = (client_id, now)
                locked.append(mq)
    return role.reply(req, body=LockBatchResponseBody(sorted(locked)).encode())


def unlock_batch(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    client_id, group, mqs = _lock_body(req.body)
    with role.lock:
        for mq in mqs:
            holder = role.locks.get((group, mq))
            if holder is not None and holder[0] == client_id:
                del role.locks[(group, mq)]
    return role.reply(req)


def _lock_body(body: bytes) -> tuple[str, str, list[MessageQueue]]:
    try:
        request = LockBatchRequestBody.decode(body)
    except BodyError:
        raise bad(ResponseCode.SYSTEM_ERROR, "the request body is not a LockBatchRequestBody") from None
    return request.client_id, request.consumer_group, request.mq_set


# -- pushes to consumers -----------------------------------------------------------------------


def _reset_pusher(
    role: BrokerRole, conn: Connection, client_id: str, group: str, version: int
) -> Callable[[str, dict[int, int]], None]:
    """The ClientInfo.on_reset for one client: RESET_CONSUMER_CLIENT_OFFSET (220), sent oneway
    (broker: Broker2Client.java, resetOffset).

    As a real broker, the body form follows the *admin request's* language: the ForC array
    when it said CPP (the Java tool's -c), else the MQ-keyed map, which C++ consumers cannot
    decode. mqadmin's resetOffsetByTime asks for CPP when a C++ consumer is online.
    """

    def push(topic: str, table: dict[int, int]) -> None:
        if version < MQVersion.V3_0_7_SNAPSHOT:
            raise bad(
                ResponseCode.SYSTEM_ERROR,
                f"the client does not support this feature. version={version_name(version)}",
            )
        timestamp, cpp_body = role.reset_request
        offsets = {MessageQueue(topic, role.name, q): o for q, o in sorted(table.items())}
        body = (ResetOffsetBodyForC(offsets) if cpp_body else ResetOffsetBody(offsets)).encode()
        ext: dict[str, object] = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": False}
        if role.server.v5:
            ext["queueId"] = -1
        conn.send(role.server.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body))
        role.server.count("resets_pushed")
        log.info("pushed a reset of %s/%s to %s", topic, group, client_id)

    return push


def running_info(role: BrokerRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO: forwarded to the client over its own connection, its answer
    relayed as it is (broker: AdminBrokerProcessor.java, callConsumer)."""
    header = ConsumerRunningInfoHeader.parse(req)
    group, client_id = header.consumerGroup, header.clientId
    with role.lock:
        client = next((c for c in role.broker.online_clients(group) if c.client_id == client_id), None)
    target = role.server.client_connection(role.name, group, client_id)
    if client is None or target is None:
        raise bad(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    if client.version < MQVersion.V3_1_8_SNAPSHOT:
        raise bad(
            ResponseCode.SYSTEM_ERROR,
            f"The Consumer <{client_id}> Version <{version_name(client.version)}> too low to finish, "
            "please upgrade it to V3_1_8_SNAPSHOT",
        )
    try:
        answer = role.server.call_client(target, req.code, req.ext_fields, req.body)
    except TimeoutError as exc:
        raise bad(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}") from None
    except ConnectionError as exc:
        raise bad(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}") from None
    relayed = req.reply(answer.code, answer.remark, answer.ext_fields, answer.body, version=answer.version)
    relayed.language = answer.language
    return relayed


# -- heartbeat bodies --------------------------------------------------------------------------


def _enum_name(value: Any, names: tuple[str, ...], default: str) -> str:
    """Java sends enum names, the C++ client ordinals (remoting: ConsumerData.java)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    return default


def _subscription_json(raw: Mapping[str, Any]) -> dict[str, Any]:
    """SubscriptionData as Java writes it, whatever dialect the heartbeat used."""
    sub_string = str(raw.get("subString") or SUBSCRIBE_ALL)
    tags = sorted(parse_tags(sub_string) or ())
    version = raw.get("subVersion")
    try:
        sub_version = int(version) if version is not None else now_ms()
    except (TypeError, ValueError):
        sub_version = now_ms()
    return {
        "classFilterMode": bool(raw.get("classFilterMode", False)),
        "codeSet": [java_string_hash(t) for t in tags],
        "expressionType": str(raw.get("expressionType") or EXPRESSION_TAG),
        "subString": sub_string,
        "subVersion": sub_version,
        "tagsSet": tags,
        "topic": str(raw["topic"]),
    }


def _sub_strings(subs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {topic: str(sub.get("subString")) for topic, sub in subs.items()}
