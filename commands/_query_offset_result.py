"""queryOffset's results: one (topic, group) document, or several of them, in every format."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import missing_brokers_json, time_fields

from mqadmin.output import ResultBase, Table
from mqadmin.replay import STORE_TIME
from mqadmin.timeparse import format_duration, format_time

if TYPE_CHECKING:
    from mqadmin.localstore import OffsetsFile
    from mqadmin.replay.search import TimeField


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
    #: the searched time field's value at offset_at_time (the store time for --time-field store)
    time_at_offset: int | None = None
    #: local offsets only: whose file the row is from, and the age of its oldest unconsumed message
    client: str | None = None
    lag_time_ms: int | None = None
    #: a lite group's row: the lite topic whose queue (%LMQ%$parent$lite, queue 0) it is
    lite_topic: str | None = None


@dataclass
class QueryOffsetResult(ResultBase):
    topic: str
    group: str | None
    timestamp: int | None
    queues: list[QueueOffsetRow] = field(default_factory=list)
    tz: tzinfo | None = None
    #: the local offsets files read (--local-store), None for the broker's offsets
    local_files: list[OffsetsFile] | None = None
    time_field: str = STORE_TIME
    engine: str = "local"
    #: brokers of the topic that did not answer (name -> why): the queues shown are the others'
    missing_brokers: dict[str, str] = field(default_factory=dict)
    #: a 5.5 lite group: one row per lite topic it committed an offset for, ``topic`` its parent
    lite: bool = False

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "topic": self.topic,
            "group": self.group,
            **time_fields("timestamp", self.timestamp, self.tz),
            "time_field": self.time_field,
            "engine": self.engine,
            "queues": [self._row_json(q) for q in self.queues],
        }
        if self.lite:
            doc["lite"] = True
        if self.local_files is not None:
            doc["local_store"] = [f.to_json() for f in self.local_files]
        if self.missing_brokers:
            doc["missing_brokers"] = missing_brokers_json(self.missing_brokers)
        return doc

    def _row_json(self, q: QueueOffsetRow) -> dict[str, Any]:
        row: dict[str, Any] = {"client": q.client} if self.local_files is not None else {}
        if q.lite_topic is not None:
            row["lite_topic"] = q.lite_topic
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
        row |= time_fields("time_at_offset", q.time_at_offset, self.tz)
        return row

    @property
    def _field(self) -> TimeField:
        return time_field_of(self.time_field)

    def columns(self) -> list[str]:
        local = self.local_files is not None
        columns = (["Client"] if local else []) + (["Lite Topic"] if self.lite else [])
        columns += ["Broker", "QID", "Min Offset", "Max Offset"]
        if self.group:
            columns += ["Consumer Offset", "Lag"] + (["Lag Time"] if local else [])
        if self.timestamp is not None:
            columns += ["Offset At Time", "Store Time At Offset"]
            if self._field.scans:
                columns.append(f"{self._field.label} At Offset")
        return columns

    def cells(self, q: QueueOffsetRow) -> list[Any]:
        local = self.local_files is not None
        row: list[Any] = ([q.client] if local else []) + ([q.lite_topic] if self.lite else [])
        row += [q.broker, q.queue_id, q.min_offset, q.max_offset]
        if self.group:
            row += [q.consumer_offset, q.lag]
            if local:
                row.append(None if q.lag_time_ms is None else format_duration(q.lag_time_ms))
        if self.timestamp is not None:
            row += [q.offset_at_time, format_time(q.store_time_at_offset, self.tz)]
            if self._field.scans:
                row.append(format_time(q.time_at_offset, self.tz))
        return row

    def table(self) -> Table:
        local = self.local_files is not None
        footer = []
        if self.group:
            footer.append(f"Total Lag: {sum(q.lag or 0 for q in self.queues)}")
        if self.timestamp is not None:
            footer.append(_time_line(self.timestamp, self._field, self.tz))
        for f in self.local_files or []:
            footer.append(f"{f.client}: {f.path} (read {f.read_from})")
        for b, e in sorted(self.missing_brokers.items()):
            footer.append(f"Missing: {b} did not answer ({e}); its queues are not shown")
        if self.lite:
            footer.append(f"Lite topics: those group {self.group} has committed an offset for")
        title = f"Topic {self.topic}" + (f", {'lite ' if self.lite else ''}group {self.group}" if self.group else "")
        if local:
            title += " (local offsets)"
        return Table(self.columns(), [self.cells(q) for q in self.queues], title=title, footer=footer)


@dataclass
class BulkQueryOffsetResult(ResultBase):
    """Several topics or groups: one queryOffset document per (topic, group) pair."""

    timestamp: int | None
    time_field: str
    engine: str
    results: list[QueryOffsetResult]
    tz: tzinfo | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **time_fields("timestamp", self.timestamp, self.tz),
            "time_field": self.time_field,
            "engine": self.engine,
            "results": [r.to_json() for r in self.results],
        }

    def table(self) -> Table:
        grouped = any(r.group for r in self.results)
        model = QueryOffsetResult("", "-" if grouped else None, self.timestamp, [], self.tz, time_field=self.time_field)
        rows = [[r.topic] + ([r.group] if grouped else []) + r.cells(q) for r in self.results for q in r.queues]
        footer: list[str] = []
        if grouped:
            lags: dict[str, int] = {}
            for r in self.results:
                if r.group:
                    lags[r.group] = lags.get(r.group, 0) + sum(q.lag or 0 for q in r.queues)
            footer += [f"Total Lag of {g}: {lag}" for g, lag in lags.items()]
        if self.timestamp is not None:
            footer.append(_time_line(self.timestamp, time_field_of(self.time_field), self.tz))
        if not self.results:
            footer.append("No topic matched.")
        title = f"{len({r.topic for r in self.results})} topic(s)" + (
            f", {len({r.group for r in self.results})} group(s)" if grouped else ""
        )
        columns = ["Topic"] + (["Group"] if grouped else []) + model.columns()
        return Table(columns, rows, title=title, footer=footer)


def _time_line(ts: int, time_field: TimeField, tz: tzinfo | None) -> str:
    by = "" if not time_field.scans else f", by {time_field.label.lower()} (first message at or after it)"
    return f"Time: {format_time(ts, tz)} ({ts}){by}"


def time_field_of(text: str) -> TimeField:
    """The planner (and its worker) load only when a search scans, not for --help or -t alone."""
    from mqadmin.replay import TimeField

    return TimeField.parse(text)
