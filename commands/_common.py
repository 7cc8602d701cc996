"""Look-ups several commands share, with the usage errors a user should see."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from mqadmin import errors
from mqadmin.model import MessageQueue, OffsetWrapper, TopicRoute
from mqadmin.timeparse import format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin

T = TypeVar("T")
R = TypeVar("R")

#: concurrent broker calls per command; the remoting client pipelines them on its connections
FAN_OUT = 32


def fan_out(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``fn`` over ``items`` concurrently, results in input order; the first error propagates."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(x) for x in todo]
    with ThreadPoolExecutor(max_workers=min(FAN_OUT, len(todo))) as pool:
        return list(pool.map(fn, todo))


def route_of(admin: Admin, topic: str) -> TopicRoute:
    try:
        return admin.topic_route(topic)
    except errors.TopicNotExist:
        raise errors.UsageError(f"unknown topic {topic!r}: no route on the name server {admin.address}") from None


def group_offsets(admin: Admin, group: str, topic: str | None = None) -> dict[MessageQueue, OffsetWrapper]:
    """The group's consume-stats rows (optionally of one topic); a usage error when the group has
    no offsets there and no client online — that is an unknown group."""
    try:
        stats = admin.consume_stats(group)
        rows = {mq: w for mq, w in stats.offsets.items() if topic is None or mq.topic == topic}
    except errors.TopicNotExist:
        rows = {}
    if not rows:
        where = f" for topic {topic!r}" if topic else ""
        raise errors.UsageError(f"unknown consumer group {group!r}: it has no offsets{where} on any broker")
    return rows


def store_time_at(admin: Admin, mq: MessageQueue, offset: int) -> int | None:
    """Store time of the message at ``offset`` (None past the end or when it is gone)."""
    result = admin.pull(mq, offset, 1)
    for msg in result.messages:
        if msg.queue_offset == offset:
            return msg.store_timestamp
    return None


def time_fields(prefix: str, ms: int | None, tz: object = None) -> dict[str, object]:
    """``{prefix: ms, prefix_iso: "..."}``: JSON carries times as epoch ms plus ISO-8601."""
    return {prefix: ms, f"{prefix}_iso": format_time(ms, tz)}  # type: ignore[arg-type]
