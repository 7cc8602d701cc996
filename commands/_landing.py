"""resetOffsetByTime -s on brokers that search for the nearest message (4.x, 5.0-5.1.0): which
queues land on a message stored before the time, and --exact's move to the first one at or after."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mqadmin.commands._common import fan_out
from mqadmin.commands._plan import PlanRow

from mqadmin import errors
from mqadmin.model import MessageQueue

if TYPE_CHECKING:
    from mqadmin.admin import Admin


#: --exact reads forward from the nearest message at most this many messages
EXACT_SCAN_LIMIT = 256


def check_landing(
    admin: Admin,
    topic: str,
    rows: list[PlanRow],
    targets: list[int],
    ts: int,
    exact: bool,
    warn: Callable[[str], None],
) -> bool:
    """Mark queues whose time search landed on a message stored before ``ts`` (brokers that search
    for the nearest message: 4.x, 5.0-5.1.0); with ``exact`` move them to the first message at or
    after ``ts`` (updating ``targets``). Returns whether any target moved. An account that may not
    read messages (ACL) gets the plan without the marks and one line saying so; --exact needs them."""
    from mqadmin.protocol.versions import lower_boundary_search

    nearest = {b.broker_name for b in admin.cluster_brokers() if not lower_boundary_search(b.version)}

    refused: list[str] = []

    def check(i: int) -> int | None:
        if rows[i].broker not in nearest:
            return None
        try:
            return _landing(admin, rows[i], targets[i], ts, exact)
        except errors.BrokerError as exc:
            if exact or not exc.permission_denied:
                raise
            refused.append(str(exc))
            return None

    moved = False
    news = fan_out(check, list(range(len(rows))))
    if refused:
        warn(
            f"cannot read the messages at the planned offsets ({refused[0]}): queues whose time search landed before the time are not marked"
        )
    for i, new in enumerate(news):
        if new is not None and new != targets[i]:
            rows[i].exact_from, targets[i] = targets[i], new
            moved = True
    return moved


def _landing(admin: Admin, r: PlanRow, t: int, ts: int, exact: bool) -> int | None:
    """Read forward from the queue's target ``t``: mark the row when the message there was stored
    before ``ts``; with ``exact``, the offset of the first message at or after ``ts`` (None: keep ``t``)."""
    if r.max_offset is None or not (r.min_offset or 0) <= t < r.max_offset:
        return None
    mq = MessageQueue(r.topic, r.broker, r.queue_id)
    offset, seen = t, 0
    while offset < r.max_offset and seen < EXACT_SCAN_LIMIT:
        got = [m for m in admin.pull(mq, offset, 32).messages if m.queue_offset >= offset]
        if not got:
            break
        for m in got:
            if m.queue_offset == t and m.store_timestamp >= ts:
                return None  # lands at or after the time: nothing to say
            if m.queue_offset == t:
                r.lands_before_ms = ts - m.store_timestamp
                if not exact:
                    return None
            if m.store_timestamp >= ts:
                return m.queue_offset
        seen += len(got)
        offset = got[-1].queue_offset + 1
    return r.max_offset if exact and offset >= r.max_offset else None


def require_offline(admin: Admin, group: str) -> None:
    """--exact offsets are written directly: a 4.x broker's pushed reset carries only a time,
    and online consumers would commit their own offsets over a direct write."""
    try:
        online = admin.consumer_connections(group).connections
    except errors.BrokerError:
        return
    if online:
        raise errors.UsageError(
            f"--exact writes offsets directly, and group {group} has {len(online)} consumer(s) online that would "
            "commit over them (a 4.x broker's pushed reset carries only a time): stop them first, or drop --exact"
        )
