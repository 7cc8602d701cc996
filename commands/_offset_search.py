"""Where a time lands on each queue (queryOffset -s): the broker's store-time search, or a scan
by born time or a user property; on the local threads or on Spark, with the same answers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqadmin.commands._common import fan_out, store_time_at
from mqadmin.commands._engine import Engine

from mqadmin import errors
from mqadmin.model import MessageQueue

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context
    from mqadmin.replay.search import TimeField


@dataclass(frozen=True)
class Where:
    """Where the time lands on one queue: bounds, the offset, and the times of the message there."""

    min_offset: int | None = None
    max_offset: int | None = None
    offset: int | None = None
    store_time: int | None = None
    field_time: int | None = None


def locate(
    admin: Admin,
    queues: Sequence[MessageQueue],
    bounds: Sequence[tuple[int, int]],
    ts: int | None,
    time_field: TimeField,
    slice_size: int,
    run: Engine,
    ctx: Context,
    group: str | None = None,
) -> dict[MessageQueue, Where]:
    """Where ``ts`` lands on every queue (only the bounds without ``ts``); messages are read as
    ``group`` (None: TOOLS_CONSUMER)."""
    if ts is None:
        return {mq: Where(lo, hi) for mq, (lo, hi) in zip(queues, bounds, strict=True)}
    if not time_field.scans:
        return _search_store_time(admin, queues, bounds, ts, run, ctx, group)
    return _scan(admin, queues, bounds, ts, time_field, slice_size, run, ctx, group)


def _search_store_time(
    admin: Admin,
    queues: Sequence[MessageQueue],
    bounds: Sequence[tuple[int, int]],
    ts: int,
    run: Engine,
    ctx: Context,
    group: str | None,
) -> dict[MessageQueue, Where]:
    """The broker's own time search, one call per queue, and the store time of the message there."""
    if run.name == "spark":
        from mqadmin.spark.engine import search_offsets

        queries = [(mq.topic, mq.broker_name, mq.queue_id, ts) for mq in queues]
        offsets = search_offsets(run.executors(ctx), queries, master=run.master, conf=run.conf, note=ctx.env.note)
    else:
        offsets = fan_out(lambda mq: admin.search_offset(mq, ts), queues)

    def at(item: tuple[MessageQueue, tuple[int, int], int]) -> Where:
        mq, (lo, hi), offset = item
        st = store_time_at(admin, mq, offset, group) if lo <= offset < hi else None
        return Where(lo, hi, offset, st, st)

    found = fan_out(at, list(zip(queues, bounds, offsets, strict=True)))
    return dict(zip(queues, found, strict=True))


def _scan(
    admin: Admin,
    queues: Sequence[MessageQueue],
    bounds: Sequence[tuple[int, int]],
    ts: int,
    time_field: TimeField,
    slice_size: int,
    run: Engine,
    ctx: Context,
    group: str | None,
) -> dict[MessageQueue, Where]:
    """The first message in queue order whose field is at or after ``ts``, read in slices of
    ``slice_size``; a queue without one lands on its max offset."""
    from mqadmin.replay.planner import Slice
    from mqadmin.replay.search import first_match_in_order, scan_slices

    slices = scan_slices([(mq, lo, hi) for mq, (lo, hi) in zip(queues, bounds, strict=True)], slice_size, group)
    if run.name == "spark":
        from mqadmin.spark.engine import scan_first_matches

        hits = scan_first_matches(
            run.executors(ctx), slices, time_field, ts, master=run.master, conf=run.conf, note=ctx.env.note
        )
    else:
        of_queue: dict[MessageQueue, list[Slice]] = {}
        for s in slices:
            of_queue.setdefault(s.mq, []).append(s)
        scanned = fan_out(lambda mq: first_match_in_order(admin, of_queue.get(mq, []), time_field, ts), queues)
        hits = {mq: hit for mq, hit in zip(queues, scanned, strict=True) if hit is not None}
    out: dict[MessageQueue, Where] = {}
    misses = []
    for mq, (lo, hi) in zip(queues, bounds, strict=True):
        hit = hits.get(mq)
        out[mq] = Where(lo, hi, hi) if hit is None else Where(lo, hi, hit.offset, hit.store_time, hit.time)
        if hit is None and hi > lo:
            misses.append((mq, lo, hi))
    if time_field.kind == "property":
        for line in fan_out(lambda miss: _no_property_line(admin, time_field, ts, *miss, group), misses):
            if line:
                ctx.env.warn(line)
    return out


def _no_property_line(
    admin: Admin, field: TimeField, ts: int, mq: MessageQueue, lo: int, hi: int, group: str | None
) -> str | None:
    """A scanned queue where no message matched lands on its max offset. When its last message
    lacks the property too, the property is likely misspelt or never set: say so for that queue
    (when the last message has it, the time is simply after the queue's end, as with -s now)."""
    try:
        last = next((m for m in admin.pull(mq, hi - 1, 1, group=group).messages if m.queue_offset == hi - 1), None)
    except errors.MqadminError:
        last = None
    if last is not None and field.of(last) is not None:
        return None
    return (
        f"{mq.topic} {mq.broker_name}/{mq.queue_id}: none of its {hi - lo} messages has property {field.name} "
        f"(epoch ms) at or after {ts}, and its last message has none at all; Offset At Time is its max offset {hi}"
    )
