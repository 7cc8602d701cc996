"""queryOffset: per queue min/max offsets, a group's offset and lag, and where a time lands."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

from mqadmin.commands._common import fan_out, group_offsets, route_of, store_time_at, time_fields
from mqadmin.commands._options import GROUP, TIMESTAMP, TOPIC, required

from mqadmin.context import Context
from mqadmin.model import MessageQueue
from mqadmin.output import Table
from mqadmin.registry import SubCommand, register
from mqadmin.timeparse import format_time


@dataclass
class QueueOffsetRow:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    consumer_offset: int | None = None
    lag: int | None = None
    offset_at_time: int | None = None
    store_time_at_offset: int | None = None


@dataclass
class QueryOffsetResult:
    topic: str
    group: str | None
    timestamp: int | None
    queues: list[QueueOffsetRow] = field(default_factory=list)
    tz: tzinfo | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "group": self.group,
            **time_fields("timestamp", self.timestamp, self.tz),
            "queues": [
                {
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "min_offset": q.min_offset,
                    "max_offset": q.max_offset,
                    "consumer_offset": q.consumer_offset,
                    "lag": q.lag,
                    "offset_at_time": q.offset_at_time,
                    **time_fields("store_time_at_offset", q.store_time_at_offset, self.tz),
                }
                for q in self.queues
            ],
        }

    def table(self) -> Table:
        columns = ["Broker", "QID", "Min Offset", "Max Offset"]
        if self.group:
            columns += ["Consumer Offset", "Lag"]
        if self.timestamp is not None:
            columns += ["Offset At Time", "Store Time At Offset"]
        rows = []
        for q in self.queues:
            row: list[Any] = [q.broker, q.queue_id, q.min_offset, q.max_offset]
            if self.group:
                row += [q.consumer_offset, q.lag]
            if self.timestamp is not None:
                row += [q.offset_at_time, format_time(q.store_time_at_offset, self.tz)]
            rows.append(row)
        footer = []
        if self.group:
            footer.append(f"Total Lag: {sum(q.lag or 0 for q in self.queues)}")
        if self.timestamp is not None:
            footer.append(f"Time: {format_time(self.timestamp, self.tz)} ({self.timestamp})")
        title = f"Topic {self.topic}" + (f", group {self.group}" if self.group else "")
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
    )

    def execute(self, ctx: Context, **params: Any) -> QueryOffsetResult:
        topic: str = params["topic"]
        group: str | None = params.get("group")
        ts = ctx.time(params["timestamp"]) if params.get("timestamp") else None
        admin = ctx.admin()
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
