"""INVOKE_BROKER_TO_RESET_OFFSET's two paths, chosen by broker version.

Server side (5.2+, useServerSideResetOffset): the broker writes the offsets itself and keeps
them pending, so the next pull of each queue answers OFFSET_MOVED to the reset offset; isForce
is ignored and no consumer needs to be online. Client push (4.x, 5.0-5.1): the broker computes
the offsets (a non-force reset only rewinds), needs a consumer online and pushes them to every
one. Sources: broker AdminBrokerProcessor.java (resetOffset), Broker2Client.java (resetOffset).
Both run under the broker's lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqadmin import errors

if TYPE_CHECKING:
    from mqadmin.mock.model import MockBroker


def reset_server_side(
    broker: MockBroker, topic: str, group: str, timestamp: int, queue_id: int, offset: int
) -> dict[int, int]:
    cfg = broker.require_topic(topic)
    if group not in broker.groups:
        raise errors.SubscriptionGroupNotExist(f"subscription group does not exist. {group}", broker.addr)
    if queue_id >= 0:
        if offset != -1:
            lo, hi = broker.min_offset(topic, queue_id), broker.max_offset(topic, queue_id)
            if not lo <= offset <= hi + 1:
                raise errors.SystemError_(f"Target offset {offset} not in consume queue range [{lo}-{hi}]", broker.addr)
            target = {queue_id: offset}
        else:
            target = {queue_id: time_target(broker, topic, queue_id, timestamp)}
    else:
        target = {q: time_target(broker, topic, q, timestamp) for q in range(int(cfg["readQueueNums"]))}
    key = broker.key(topic, group)
    for q, o in target.items():
        broker.offsets.setdefault(key, {})[q] = o
        broker.pending_resets.setdefault(key, {})[q] = o
    broker.offsets_changed()
    return target


def time_target(broker: MockBroker, topic: str, queue_id: int, timestamp: int) -> int:
    """The offset a reset to ``timestamp`` moves a queue to (negative: the max offset)."""
    if timestamp < 0:
        return broker.max_offset(topic, queue_id)
    return max(broker.search_offset(topic, queue_id, timestamp), 0)


def reset_client_push(broker: MockBroker, topic: str, group: str, timestamp: int, is_force: bool) -> dict[int, int]:
    cfg = broker.queue_config(topic)
    if cfg is None:
        raise errors.SystemError_(
            f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}", broker.addr
        )
    table: dict[int, int] = {}
    for q in range(int(cfg["writeQueueNums"])):
        current = broker.committed_offset(group, topic, q)
        if current == -1:
            raise errors.SystemError_(f"THe consumer group <{group}> not exist", broker.addr)
        target = time_target(broker, topic, q, timestamp)
        table[q] = target if is_force or target < current else current
    clients = broker.online_clients(group)
    if not clients:
        raise errors.ConsumerNotOnline(
            f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}",
            broker.addr,
        )
    for client in clients:
        if client.on_reset is not None:
            client.on_reset(topic, dict(table))
    return table
