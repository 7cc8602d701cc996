"""rangeReplay's result: the plan per queue and what the replay read and wrote, in every format."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import missing_brokers_json, time_fields

from mqadmin import errors
from mqadmin.model import MessageQueue
from mqadmin.output import ResultBase, Table
from mqadmin.timeparse import format_duration, format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.replay.local import ReplayOutcome
    from mqadmin.replay.planner import Plan


@dataclass
class ReplayQueueRow:
    broker: str
    queue_id: int
    start_offset: int
    end_offset: int
    messages: int
    matched: int | None = None
    written: int | None = None
    missing: int = 0
    #: messages retention deleted that the window may have held (a bound: their times are gone)
    expired_at_most: int = 0
    #: store time of the oldest message left on the queue, when the window starts before it
    oldest_left: int | None = None


@dataclass
class RangeReplayResult(ResultBase):
    topic: str
    begin: int
    end: int
    to: str
    engine: str
    dry_run: bool
    queues: list[ReplayQueueRow]
    slices: int
    tag: str | None = None
    key: str | None = None
    sql: str | None = None
    dedup: bool = False
    #: --dedup: matched messages dropped because an earlier one had their UNIQ_KEY
    duplicates: int | None = None
    #: a dry run: what a real run would write (read when a filter or --dedup needs the messages)
    would_write: int | None = None
    #: --partition-by: the key, and messages per partition folder (would be written, or written)
    partition_by: str | None = None
    partitions: dict[str, int] | None = None
    limit: int | None = None
    checkpoint: str | None = None
    resumed_slices: int = 0
    #: written and matched by earlier runs of a resumed replay (already in the file, or already
    #: on an earlier run's stdout / sent), so the summary can say what this run did
    written_before: int = 0
    matched_before: int = 0
    complete: bool = False
    elapsed_ms: int | None = None
    bytes: int | None = None
    notes: list[str] = field(default_factory=list)
    tz: tzinfo | None = None
    #: the records went to stdout, so the CLI prints this summary on stderr
    stdout_used: bool = False
    #: brokers of the topic that did not answer while planning (name -> why): not in the plan
    missing_brokers: dict[str, str] = field(default_factory=dict)
    #: --time-field: [begin, end) is of this field; the plan reads by store time widened by slack_ms
    time_field: str = "store"
    slack_ms: int | None = None
    #: messages read whose field was further from their store time than the slack: it may be too small
    outside_slack: int | None = None

    @property
    def total(self) -> int:
        return sum(q.messages for q in self.queues)

    @property
    def expired_at_most(self) -> int:
        return sum(q.expired_at_most for q in self.queues)

    @property
    def written(self) -> int | None:
        return None if self.dry_run else sum(q.written or 0 for q in self.queues)

    @property
    def matched(self) -> int | None:
        return None if self.dry_run else sum(q.matched or 0 for q in self.queues)

    @property
    def written_this_run(self) -> int | None:
        return None if self.dry_run else (self.written or 0) - self.written_before

    def _rate(self, amount: int | None) -> float | None:
        if amount is None or not self.elapsed_ms:
            return None
        return round(amount / (self.elapsed_ms / 1000), 1)

    def to_json(self) -> dict[str, Any]:
        doc = {
            "topic": self.topic,
            **time_fields("begin", self.begin, self.tz),
            **time_fields("end", self.end, self.tz),
            "time_field": self.time_field,
            "slack_ms": self.slack_ms,
            "outside_slack": self.outside_slack,
            "to": self.to,
            "engine": self.engine,
            "dry_run": self.dry_run,
            "tag": self.tag,
            "key": self.key,
            "sql": self.sql,
            "dedup": self.dedup,
            "limit": self.limit,
            "checkpoint": self.checkpoint,
            "slices": self.slices,
            "resumed_slices": self.resumed_slices,
            "complete": self.complete,
            "total_messages": self.total,
            "expired_at_most": self.expired_at_most,
            "matched": self.matched,
            "written": self.written,
            "written_this_run": self.written_this_run,
            "would_write": self.would_write,
            "duplicates_dropped": self.duplicates,
            "partition_by": self.partition_by,
            "partitions": self.partitions,
            "bytes": self.bytes,
            "elapsed_ms": self.elapsed_ms,
            "msgs_per_s": self._rate(None if self.matched is None else self.matched - self.matched_before),
            "bytes_per_s": self._rate(self.bytes),
            "notes": self.notes,
            "queues": [
                {
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "start_offset": q.start_offset,
                    "end_offset": q.end_offset,
                    "messages": q.messages,
                    "matched": q.matched,
                    "written": q.written,
                    "missing": q.missing,
                    "expired_at_most": q.expired_at_most,
                    **time_fields("oldest_left", q.oldest_left, self.tz),
                }
                for q in self.queues
            ],
        }
        if self.missing_brokers:
            doc["missing_brokers"] = missing_brokers_json(self.missing_brokers)
        return doc

    @property
    def _field_name(self) -> str:
        return "born time" if self.time_field == "born" else self.time_field.replace("property:", "property ")

    def _field_lines(self) -> list[str]:
        """--time-field: what was read and kept, and the warning that the slack may be too small."""
        if self.slack_ms is None:
            return []
        slack = format_duration(self.slack_ms)
        kept = self.would_write if self.dry_run else self.matched
        lines = [
            f"Read {self.total} message(s) stored within --slack {slack} of the window; "
            + (f"{kept} kept by {self._field_name} and the filters" if kept is not None else "none read yet")
        ]
        if self.outside_slack:
            lines.append(
                f"Warning: {self.outside_slack} message(s) read have a {self._field_name} more than --slack "
                f"{slack} from their store time: messages of the window may be stored beyond the widened "
                "window and were not read; a larger --slack reads them"
            )
        return lines

    def table(self) -> Table:
        columns = ["Broker", "QID", "Start Offset", "End Offset", "Messages"]
        if not self.dry_run:
            columns += ["Matched", "Written"]
        rows: list[list[Any]] = []
        for q in self.queues:
            row: list[Any] = [q.broker, q.queue_id, q.start_offset, q.end_offset, q.messages]
            if not self.dry_run:
                row += [q.matched, q.written]
            rows.append(row)
        by = "store time" if self.slack_ms is None else self._field_name
        footer = [
            f"Window: [{format_time(self.begin, self.tz)}, {format_time(self.end, self.tz)}) by {by} "
            f"({self.begin} .. {self.end})",
            f"Plan: {self.total} message(s) in {self.slices} slice(s)" + (", dry run" if self.dry_run else ""),
        ]
        footer += self._field_lines()
        if self.sql is not None:
            footer.append(f"SQL92 filter: {self.sql}")
        if self.would_write is not None:
            footer.append(f"A real run would write {self.would_write} message(s)")
        if self.partitions is not None:
            each = ", ".join(f"{k}: {n}" for k, n in self.partitions.items())
            footer.append(f"Partitions by {self.partition_by}: {len(self.partitions)} ({each or 'none'})")
        if self.duplicates is not None:
            footer.append(f"Dropped {self.duplicates} duplicate(s) by UNIQ_KEY (the first in queue order kept)")
        if not self.dry_run:
            verb = {"topic": "Sent", "group": "Re-delivered", "origin": "Sent back"}.get(
                self.to.split(":", 1)[0], "Wrote"
            )
            line = f"{verb} {self.written_this_run} message(s) to {self.to} with the {self.engine} engine"
            if self.elapsed_ms is not None:
                rate = self._rate((self.matched or 0) - self.matched_before)
                line += f" in {self.elapsed_ms / 1000:.1f} s" + (f" ({rate:,.0f} msg/s)" if rate else "")
            if self.written_before:
                line += f"; {self.written_before} more by the earlier run(s)"
                if self.to.split(":", 1)[0] in ("jsonl", "parquet"):
                    line += f" (the file holds all {self.written})"
            footer.append(line)
        footer += self.notes
        for b, e in sorted(self.missing_brokers.items()):
            footer.append(f"Missing: {b} did not answer ({e}); the window is incomplete: its queues were not replayed")
        return Table(columns, rows, title=f"Replay of topic {self.topic}", footer=footer)


def plan_result(
    plan: Plan,
    target: str,
    engine: str,
    dry_run: bool,
    tag: str | None,
    key: str | None,
    limit: int | None,
    cp_path: Path | None,
    tz: tzinfo | None,
) -> RangeReplayResult:
    """The result of a planned replay, before anything is read: one row per planned queue."""
    rows = [
        ReplayQueueRow(r.broker, r.queue_id, r.start, r.end, r.count, expired_at_most=r.expired_at_most)
        for r in plan.ranges
    ]
    return RangeReplayResult(
        topic=plan.topic,
        begin=plan.begin,
        end=plan.end,
        to=target,
        engine=engine,
        dry_run=dry_run,
        queues=rows,
        slices=len(plan.slices),
        tag=tag,
        key=key,
        limit=limit,
        checkpoint=str(cp_path) if cp_path else None,
        tz=tz,
    )


def note_expired(result: RangeReplayResult, admin: Admin) -> None:
    """Say, per queue whose window starts before the oldest message left, how many messages retention
    may have taken from the window: those below the min offset, a bound (their store times are gone)."""
    for q in result.queues:
        if not q.expired_at_most:
            continue
        try:
            oldest = admin.earliest_store_time(MessageQueue(result.topic, q.broker, q.queue_id))
        except errors.MqadminError:  # an empty queue has no oldest message
            oldest = -1
        q.oldest_left = oldest if oldest > 0 else None
        where = f"{q.broker} queue {q.queue_id}"
        if q.oldest_left is None:
            start = "no message is left on it"
        else:
            at = "before" if result.begin < q.oldest_left else "at"
            start = f"the window starts {at} the oldest message left ({format_time(q.oldest_left, result.tz)})"
        result.notes.append(
            f"{where}: {start}; up to {q.expired_at_most} message(s) before offset {q.expired_at_most} "
            "are gone (messages expired)"
        )


def apply_stats(result: RangeReplayResult, plan: Plan, stats: dict[int, Any], outcome: ReplayOutcome | None) -> None:
    """Per-queue totals from per-slice stats."""
    rows = {(q.broker, q.queue_id): q for q in result.queues}
    for q in result.queues:
        q.matched, q.written = 0, 0
    total_bytes = duplicates = outside = 0
    for s in plan.slices:
        st = stats.get(s.index)
        if st is None:
            continue
        row = rows[(s.broker, s.queue_id)]
        row.matched = (row.matched or 0) + st.matched
        row.written = (row.written or 0) + st.written
        row.missing += st.missing
        total_bytes += st.bytes
        duplicates += st.duplicates
        outside += st.outside
    result.bytes = total_bytes
    if result.slack_ms is not None:
        result.outside_slack = outside
    if result.dedup:
        result.duplicates = duplicates
    missing = sum(q.missing for q in result.queues)
    if missing:
        result.notes.append(f"{missing} message(s) of the plan were deleted by retention before they were read.")
    if outcome is not None:
        result.complete = outcome.complete
        result.resumed_slices = outcome.resumed
        result.elapsed_ms = int(outcome.elapsed * 1000)
