"""queryOffset: per queue min/max offsets, a group's offset and lag, and where a time lands."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    has_broker,
    local_notes,
    open_admin,
    route_of,
    store_time_at,
    time_fields,
)
from mqadmin.commands._options import GROUP, LOCAL_STORE, TIMESTAMP, TOPIC, required

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue
from mqadmin.output import Table
from mqadmin.registry import SubCommand, register
from mqadmin.timeparse import format_duration, format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.localstore import OffsetsFile


@dataclass
class QueueOffsetRow:
    broker: str
    queue_id: int
    min_offset: int | None
    max_offset: int | None
    consumer_offset: int | None = None
    lag: int | None = None
    offset_at_time: int | None = None
    store_time_at_offset: int | None = None
    #: local offsets only: whose file the row is from, and the age of its oldest unconsumed message
    client: str | None = None
    lag_time_ms: int | None = None


@dataclass
class QueryOffsetResult:
    topic: str
    group: str | None
    timestamp: int | None
    queues: list[QueueOffsetRow] = field(default_factory=list)
    tz: tzinfo | None = None
    #: the local offsets files read (--local-store), None for the broker's offsets
    local_files: list[OffsetsFile] | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "topic": self.topic,
            "group": self.group,
            **time_fields("timestamp", self.timestamp, self.tz),
            "queues": [self._row_json(q) for q in self.queues],
        }
        if self.local_files is not None:
            doc["local_store"] = [f.to_json() for f in self.local_files]
        return doc

    def _row_json(self, q: QueueOffsetRow) -> dict[str, Any]:
        row: dict[str, Any] = {"client": q.client} if self.local_files is not None else {}
        row |= {
            "broker": q.broker,
            "queue_id": q.queue_id,
            "min_offset": q.min_offset,
            "max_offset": q.max_offset,
            "consumer_offset": q.consumer_offset,
            "lag": q.lag,
        }
        if self.local_files is not None:
            row["lag_time_ms"] = q.lag_time_ms
        row["offset_at_time"] = q.offset_at_time
        row |= time_fields("store_time_at_offset", q.store_time_at_offset, self.tz)
        return row

    def table(self) -> Table:
        local = self.local_files is not None
        columns = (["Client"] if local else []) + ["Broker", "QID", "Min Offset", "Max Offset"]
        if self.group:
            columns += ["Consumer Offset", "Lag"] + (["Lag Time"] if local else [])
        if self.timestamp is not None:
            columns += ["Offset At Time", "Store Time At Offset"]
        rows = []
        for q in self.queues:
            row: list[Any] = ([q.client] if local else []) + [q.broker, q.queue_id, q.min_offset, q.max_offset]
            if self.group:
                row += [q.consumer_offset, q.lag]
                if local:
                    row.append(None if q.lag_time_ms is None else format_duration(q.lag_time_ms))
            if self.timestamp is not None:
                row += [q.offset_at_time, format_time(q.store_time_at_offset, self.tz)]
            rows.append(row)
        footer = []
        if self.group:
            footer.append(f"Total Lag: {sum(q.lag or 0 for q in self.queues)}")
        if self.timestamp is not None:
            footer.append(f"Time: {format_time(self.timestamp, self.tz)} ({self.timestamp})")
        for f in self.local_files or []:
            footer.append(f"{f.client}: {f.path} (read {f.read_from})")
        title = f"Topic {self.topic}" + (f", group {self.group}" if self.group else "")
        if local:
            title += " (local offsets)"
        return Table(columns, rows, title=title, footer=footer)


@register
class QueryOffsetCommand(SubCommand):
    """Show each queue's min/max offset, a group's offset and lag, and where a time lands.

    Not in the Java mqadmin: it gathers what examineTopicStats, examineConsumeStats and
    searchOffset would tell separately, so you can see where a reset would land before you do it.
    """

    name = "queryOffset"
    options = (
        required(TOPIC),
        GROUP,
        TIMESTAMP,
        LOCAL_STORE,
    )

    def execute(self, ctx: Context, **params: Any) -> QueryOffsetResult:
        topic: str = params["topic"]
        group: str | None = params.get("group")
        ts = ctx.time(params["timestamp"]) if params.get("timestamp") else None
        if params.get("local_store"):
            return self._local(ctx, Path(params["local_store"]), topic, group, ts)
        admin = open_admin(ctx)
        queues = route_of(admin, topic).message_queues()
        consumer = group_offsets(admin, group, topic) if group else {}

        def row(mq: MessageQueue) -> QueueOffsetRow:
            lo, hi = admin.min_offset(mq), admin.max_offset(mq)
            r = QueueOffsetRow(mq.broker_name, mq.queue_id, lo, hi)
            if group:
                wrapper = consumer.get(mq)
                if wrapper is not None:
                    r.consumer_offset = wrapper.consumer_offset
                    r.lag = max(hi - wrapper.consumer_offset, 0)
            if ts is not None:
                r.offset_at_time = admin.search_offset(mq, ts)
                if lo <= r.offset_at_time < hi:
                    r.store_time_at_offset = store_time_at(admin, mq, r.offset_at_time)
            return r

        return QueryOffsetResult(topic, group, ts, fan_out(row, queues), ctx.tz)

    def _local(self, ctx: Context, path: Path, topic: str, group: str | None, ts: int | None) -> QueryOffsetResult:
        """One row per client and queue, from the clients' offsets files; the broker (-n) adds
        min/max, lag, lag as time and where -s lands."""
        from mqadmin.localstore import find_offset_files

        files = find_offset_files(path, group)
        groups = sorted({f.group for f in files})
        if group is None and len(groups) > 1:
            raise errors.UsageError(f"{path} holds offsets of several groups ({', '.join(groups)}): pass -g")
        group = groups[0]
        local_notes(ctx, files)
        admin: Admin | None = open_admin(ctx) if has_broker(ctx) else None
        if ts is not None and admin is None:
            raise errors.UsageError("-s needs -n: the time search comes from the broker (or store:///its/store)")
        if admin is not None:
            queues = route_of(admin, topic).message_queues()
        else:
            queues = sorted({mq for f in files for mq in f.offsets if mq.topic == topic})
        bounds = dict(zip(queues, fan_out(lambda mq: _bounds(admin, mq, ts), queues), strict=True))
        oldest: dict[tuple[MessageQueue, int], int | None] = {}

        def row(item: tuple[OffsetsFile, MessageQueue]) -> QueueOffsetRow:
            f, mq = item
            lo, hi, at, at_time = bounds[mq]
            r = QueueOffsetRow(mq.broker_name, mq.queue_id, lo, hi, client=f.client)
            r.offset_at_time, r.store_time_at_offset = at, at_time
            r.consumer_offset = f.offsets.get(mq)
            if admin is not None and hi is not None and r.consumer_offset is not None:
                r.lag = max(hi - r.consumer_offset, 0)
                r.lag_time_ms = 0
                if r.lag:
                    key = (mq, max(r.consumer_offset, lo or 0))
                    if key not in oldest:
                        oldest[key] = store_time_at(admin, mq, key[1])
                    t = oldest[key]
                    r.lag_time_ms = max(ctx.now - t, 0) if t else None
            return r

        rows = [row((f, mq)) for f in files for mq in queues]
        return QueryOffsetResult(topic, group, ts, rows, ctx.tz, local_files=files)


def _bounds(
    admin: Admin | None, mq: MessageQueue, ts: int | None
) -> tuple[int | None, int | None, int | None, int | None]:
    """(min, max, offset at ts, store time there) of a queue; all None without a broker."""
    if admin is None:
        return None, None, None, None
    lo, hi = admin.min_offset(mq), admin.max_offset(mq)
    at = at_time = None
    if ts is not None:
        at = admin.search_offset(mq, ts)
        if lo <= at < hi:
            at_time = store_time_at(admin, mq, at)
    return lo, hi, at, at_time
