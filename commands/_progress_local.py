"""consumerProgress --local-store: broadcast consumers' progress, from the clients' offsets files
(a broker, -n, adds how far each queue goes and lag as time)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import fan_out, store_time_at, time_fields
from mqadmin.commands._local_offsets import LocalOffsets
from mqadmin.commands._progress import breaches_of, health_line

from mqadmin import errors
from mqadmin.model import MessageQueue
from mqadmin.output import ResultBase, Table
from mqadmin.timeparse import format_duration, format_zoned

if TYPE_CHECKING:
    from mqadmin.context import Context
    from mqadmin.health import GroupHealth
    from mqadmin.localstore import OffsetsFile


@dataclass
class LocalRow:
    client: str
    topic: str
    broker: str
    queue_id: int
    broker_offset: int | None
    consumer_offset: int | None
    last_timestamp: int | None = None
    lag_time_ms: int | None = None

    @property
    def diff(self) -> int | None:
        if self.broker_offset is None or self.consumer_offset is None:
            return None
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass
class LocalGroupProgress(ResultBase):
    """One group's progress per client and queue, read from the clients' offsets files."""

    group: str
    queues: list[LocalRow]
    files: list[OffsetsFile]
    tz: tzinfo | None = None
    check_failure: str | None = None
    #: --health: each client's queues evaluated over the window
    health: GroupHealth | None = None

    @property
    def diff_total(self) -> int | None:
        diffs = [q.diff for q in self.queues if q.diff is not None]
        return sum(diffs) if diffs else None

    @property
    def lag_time_ms(self) -> int | None:
        lags = [q.lag_time_ms for q in self.queues if q.lag_time_ms is not None]
        return max(lags) if lags else None

    def _verdict(self, q: LocalRow) -> Any:
        from mqadmin.health import queue_key

        assert self.health is not None
        found = self.health.queues.get(queue_key(self.group, q.topic, q.broker, q.queue_id, q.client))
        return found

    def to_json(self) -> dict[str, Any]:
        doc = self._json()
        if self.health is not None:
            from mqadmin.health import verdict_json

            doc["health"] = verdict_json(self.health.verdict)
            for q, out in zip(self.queues, doc["queues"], strict=True):
                found = self._verdict(q)
                out["health"] = None if found is None else found.to_json()
        return doc

    def _json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "tps": None,
            "diff_total": self.diff_total,
            "lag_time_ms": self.lag_time_ms,
            "queues": [
                {
                    "client": q.client,
                    "topic": q.topic,
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "broker_offset": q.broker_offset,
                    "consumer_offset": q.consumer_offset,
                    "diff": q.diff,
                    **time_fields("last_timestamp", q.last_timestamp, self.tz),
                    "lag_time_ms": q.lag_time_ms,
                }
                for q in self.queues
            ],
            "local_store": [f.to_json() for f in self.files],
        }

    def table(self) -> Table:
        columns = ["Client", "Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff"]
        columns += ["LastTime", "Lag Time"] + (["Status"] if self.health is not None else [])
        rows = [
            [
                q.client,
                q.topic,
                q.broker,
                q.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.diff,
                format_zoned(q.last_timestamp, self.tz) if q.last_timestamp else "N/A",
                format_duration(q.lag_time_ms),
            ]
            + ([self._status(q)] if self.health is not None else [])
            for q in self.queues
        ]
        diff = "n/a (needs -n)" if self.diff_total is None else str(self.diff_total)
        footer = [
            "Consume TPS: n/a (local offsets)",
            f"Consume Diff Total: {diff}",
        ]
        if self.lag_time_ms is not None:
            footer.append(f"Lag Time: {format_duration(self.lag_time_ms)} (age of the oldest unconsumed message)")
        if self.health is not None:
            footer.append(health_line(self.health))
        footer += [f"{f.client}: {f.path} (read {f.read_from})" for f in self.files]
        return Table(columns, rows, title=f"Consumer group {self.group} (broadcast, local offsets)", footer=footer)

    def _status(self, q: LocalRow) -> str:
        from mqadmin.health import status_cell

        found = self._verdict(q)
        return "-" if found is None else status_cell(found.verdict)


@dataclass
class LocalSummary:
    group: str
    client: str
    queues: int
    source: str
    diff_total: int | None
    lag_time_ms: int | None


@dataclass
class LocalGroupsProgress(ResultBase):
    """One line per client and group found under the path."""

    groups: list[LocalSummary]
    check_failure: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "groups": [
                {
                    "group": g.group,
                    "client": g.client,
                    "queues": g.queues,
                    "source": g.source,
                    "diff_total": g.diff_total,
                    "lag_time_ms": g.lag_time_ms,
                }
                for g in self.groups
            ]
        }

    def table(self) -> Table:
        rows = [
            [
                g.group,
                g.client,
                g.queues,
                g.source,
                g.diff_total,
                None if g.lag_time_ms is None else format_duration(g.lag_time_ms),
            ]
            for g in self.groups
        ]
        columns = ["Group", "Client", "Queues", "Read From", "Diff Total", "Lag Time"]
        return Table(columns, rows, title="Broadcast consumer groups (local offsets)")


def local_progress(
    ctx: Context,
    path: Path,
    group: str | None,
    topic: str | None,
    max_lag: int | None,
    max_lag_time: int | None,
) -> LocalGroupProgress | LocalGroupsProgress:
    """One group per client and queue (``group`` given), else one line per client and group."""
    source = LocalOffsets.open(ctx, path, group)
    files, admin = source.files, source.admin
    if admin is None and (max_lag is not None or max_lag_time is not None):
        raise errors.UsageError("--max-lag and --max-lag-time need -n: the broker knows how far the queues go")
    rows_of = {id(f): _local_rows(ctx, source, f, topic) for f in files}
    if group is not None:
        rows = [r for f in files for r in rows_of[id(f)]]
        result = LocalGroupProgress(group, rows, files, ctx.tz)
        found = breaches_of(group, result.diff_total or 0, result.lag_time_ms or 0, max_lag, max_lag_time)
        result.check_failure = "; ".join(found) or None
        return result
    summaries = []
    for f in files:
        rows = rows_of[id(f)]
        diffs = [r.diff for r in rows if r.diff is not None]
        lags = [r.lag_time_ms for r in rows if r.lag_time_ms is not None]
        summaries.append(
            LocalSummary(
                f.group,
                f.client,
                len(rows),
                f.source,
                sum(diffs) if diffs else None,
                max(lags) if lags else None,
            )
        )
    breaches = [
        b
        for s in summaries
        for b in breaches_of(f"{s.group} ({s.client})", s.diff_total or 0, s.lag_time_ms or 0, max_lag, max_lag_time)
    ]
    return LocalGroupsProgress(summaries, "; ".join(breaches) or None)


def _local_rows(ctx: Context, source: LocalOffsets, f: OffsetsFile, topic: str | None) -> list[LocalRow]:
    """The file's queues (with -n, every queue of the file's topics, also those it has no offset for)."""
    admin = source.admin
    queues = {mq for mq in f.offsets if topic is None or mq.topic == topic}
    if admin is not None:
        for t in sorted({mq.topic for mq in queues} | ({topic} if topic else set())):
            try:
                queues.update(admin.topic_route(t).message_queues())
            except errors.TopicNotExist:
                pass

    def row(mq: MessageQueue) -> LocalRow:
        offset = f.offsets.get(mq)
        r = LocalRow(f.client, mq.topic, mq.broker_name, mq.queue_id, None, offset)
        if admin is None:
            return r
        try:
            r.broker_offset = admin.max_offset(mq)
        except errors.MqadminError:
            return r
        if offset is not None and offset > 0:
            r.last_timestamp = store_time_at(admin, mq, offset - 1)
        if offset is not None:
            r.lag_time_ms = source.lag_time_ms(ctx, mq, offset, r.broker_offset)
        return r

    return fan_out(row, sorted(queues))
