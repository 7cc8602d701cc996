"""consumerProgress: how far each group (or each queue of one group) is behind, as a check too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    has_broker,
    is_offline,
    local_notes,
    open_admin,
    store_time_at,
    time_fields,
)
from mqadmin.commands._options import GROUP, LOCAL_STORE, TOPIC

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue, OffsetWrapper
from mqadmin.output import Table
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import format_duration, format_java, parse_duration_ms
from mqadmin.versions import version_desc

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.localstore import OffsetsFile

CONSUME_TYPES = {"CONSUME_PASSIVELY": "PUSH", "CONSUME_ACTIVELY": "PULL", "CONSUME_POP": "POP"}


@dataclass
class ProgressRow:
    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int
    lag_time_ms: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    @property
    def inflight(self) -> int:
        return max(self.pull_offset - self.consumer_offset, 0)


@dataclass
class GroupProgress:
    group: str
    tps: float
    queues: list[ProgressRow]
    tz: tzinfo | None = None
    check_failure: str | None = None
    #: read from a stopped broker's store: there is no consume rate to show
    offline: bool = False

    @property
    def diff_total(self) -> int:
        return sum(q.diff for q in self.queues)

    @property
    def lag_time_ms(self) -> int:
        return max((q.lag_time_ms for q in self.queues), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "tps": None if self.offline else round(self.tps, 2),
            "diff_total": self.diff_total,
            "lag_time_ms": self.lag_time_ms,
            "queues": [
                {
                    "topic": q.topic,
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "broker_offset": q.broker_offset,
                    "consumer_offset": q.consumer_offset,
                    "diff": q.diff,
                    "inflight": q.inflight,
                    **time_fields("last_timestamp", q.last_timestamp or None, self.tz),
                    "lag_time_ms": q.lag_time_ms,
                }
                for q in self.queues
            ],
        }

    def table(self) -> Table:
        columns = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "Inflight"]
        columns += ["LastTime", "Lag Time"]
        rows = [
            [
                q.topic,
                q.broker,
                q.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.diff,
                q.inflight,
                format_java(q.last_timestamp, self.tz) if q.last_timestamp else "N/A",
                format_duration(q.lag_time_ms) if q.diff > 0 else "0",
            ]
            for q in self.queues
        ]
        footer = [
            "Consume TPS: n/a (offline store)" if self.offline else f"Consume TPS: {self.tps:.2f}",
            f"Consume Diff Total: {self.diff_total}",
            f"Consume Inflight Total: {sum(q.inflight for q in self.queues)}",
            f"Lag Time: {format_duration(self.lag_time_ms)} (age of the oldest unconsumed message)",
        ]
        return Table(columns, rows, title=f"Consumer group {self.group}", footer=footer)


@dataclass
class GroupSummary:
    group: str
    count: int
    version: str
    type: str
    model: str
    tps: float
    diff_total: int
    lag_time_ms: int | None = None


@dataclass
class AllGroupsProgress:
    groups: list[GroupSummary] = field(default_factory=list)
    check_failure: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "groups": [
                {
                    "group": g.group,
                    "count": g.count,
                    "version": g.version,
                    "type": g.type,
                    "model": g.model,
                    "tps": round(g.tps, 2),
                    "diff_total": g.diff_total,
                    "lag_time_ms": g.lag_time_ms,
                }
                for g in self.groups
            ]
        }

    def table(self) -> Table:
        columns = ["Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total"]
        with_lag = any(g.lag_time_ms is not None for g in self.groups)
        if with_lag:
            columns.append("Lag Time")
        rows = []
        for g in self.groups:
            row: list[Any] = [g.group, g.count, g.version, g.type, g.model, int(g.tps), g.diff_total]
            if with_lag:
                row.append(format_duration(g.lag_time_ms))
            rows.append(row)
        return Table(columns, rows, title="Consumer groups")


@register
class ConsumerProgressCommand(SubCommand):
    """Show consume progress: per queue for one group (-g), or one line per group.

    Like the Java tool's consumerProgress, plus lag as time (age of the oldest unconsumed
    message). With --max-lag or --max-lag-time it is a check for cron and CI: exit 3 when a
    group is further behind than that (mqadmin extension).
    """

    name = "consumerProgress"
    options = (
        GROUP,
        TOPIC,
        LOCAL_STORE,
        Opt(
            "max_lag", ("--max-lag",), "Check: exit 3 if a group's Diff Total exceeds N messages", kind=int, metavar="N"
        ),
        Opt(
            "max_lag_time",
            ("--max-lag-time",),
            "Check: exit 3 if a group's oldest unconsumed message is older than this (e.g. 5m, 30s)",
            metavar="DURATION",
        ),
    )

    def execute(
        self, ctx: Context, **params: Any
    ) -> GroupProgress | AllGroupsProgress | LocalGroupProgress | LocalGroupsProgress:
        max_lag: int | None = params.get("max_lag")
        max_lag_time = parse_duration_ms(params["max_lag_time"]) if params.get("max_lag_time") else None
        if max_lag is not None and max_lag < 0:
            raise errors.UsageError("--max-lag must be 0 or more")
        group: str | None = params.get("group")
        if params.get("local_store"):
            return _local(ctx, Path(params["local_store"]), group, params.get("topic"), max_lag, max_lag_time)
        admin = open_admin(ctx)
        if group:
            result = self._one_group(ctx, group, params.get("topic"))
            breaches = _breaches(group, result.diff_total, result.lag_time_ms, max_lag, max_lag_time)
            result.check_failure = "; ".join(breaches) or None
            return result
        groups = admin.list_groups()
        summaries = fan_out(lambda g: self._summary(ctx, g, with_lag=max_lag_time is not None), groups)
        breaches = [
            b for s in summaries for b in _breaches(s.group, s.diff_total, s.lag_time_ms or 0, max_lag, max_lag_time)
        ]
        return AllGroupsProgress(summaries, "; ".join(breaches) or None)

    def _one_group(self, ctx: Context, group: str, topic: str | None) -> GroupProgress:
        admin = ctx.admin()
        try:
            stats = admin.consume_stats(group)
            offsets = {mq: w for mq, w in stats.offsets.items() if topic is None or mq.topic == topic}
            tps = stats.consume_tps
        except errors.TopicNotExist:
            offsets, tps = {}, 0.0
        if not offsets:
            _online_or_unknown(ctx, group, topic)
        rows = fan_out(lambda item: _row(ctx, item[0], item[1]), sorted(offsets.items()))
        return GroupProgress(group, tps, rows, ctx.tz, offline=is_offline(admin))

    def _summary(self, ctx: Context, group: str, *, with_lag: bool) -> GroupSummary:
        admin = ctx.admin()
        count, version, ctype, model = 0, "OFFLINE", "", ""
        try:
            conn = admin.consumer_connections(group)
            count = len(conn.connections)
            if conn.connections:
                version = version_desc(min(c.version for c in conn.connections))
            ctype = CONSUME_TYPES.get(conn.consume_type, conn.consume_type)
            model = conn.message_model if ctype == "PUSH" else ""
        except errors.BrokerError as exc:
            if exc.permission_denied:  # a refusal is not an offline group
                raise
        tps, diff, lag = 0.0, 0, None
        try:
            stats = admin.consume_stats(group)
            tps = stats.consume_tps
            diff = sum(w.broker_offset - w.consumer_offset for w in stats.offsets.values())
            if with_lag:
                lag = max((_row(ctx, mq, w).lag_time_ms for mq, w in stats.offsets.items()), default=0)
        except errors.BrokerError as exc:
            if exc.permission_denied:  # nor is it a group without lag
                raise
        return GroupSummary(group, count, version, ctype, model, tps, diff, lag)


def _row(ctx: Context, mq: MessageQueue, w: OffsetWrapper) -> ProgressRow:
    lag_ms = 0
    if w.broker_offset > w.consumer_offset:
        oldest = store_time_at(ctx.admin(), mq, w.consumer_offset)
        if oldest is None:  # retention deleted it: the oldest unconsumed message left is at the min offset
            oldest = store_time_at(ctx.admin(), mq, ctx.admin().min_offset(mq))
        lag_ms = max(ctx.now - oldest, 0) if oldest else 0
    return ProgressRow(
        mq.topic,
        mq.broker_name,
        mq.queue_id,
        w.broker_offset,
        w.consumer_offset,
        w.pull_offset,
        w.last_timestamp,
        lag_ms,
    )


def _online_or_unknown(ctx: Context, group: str, topic: str | None) -> None:
    """No offsets: an online group (just started) shows an empty table, anything else is unknown."""
    try:
        conn = ctx.admin().consumer_connections(group)
    except errors.ConsumerNotOnline:
        group_offsets(ctx.admin(), group, topic)  # raises the "unknown consumer group" usage error
        return
    if conn.message_model == "BROADCASTING":
        raise errors.UsageError(
            f"group {group!r} consumes in BROADCASTING mode: its offsets live on the clients, not the broker"
        )


def _breaches(group: str, diff: int, lag_ms: int, max_lag: int | None, max_lag_time: int | None) -> list[str]:
    out = []
    if max_lag is not None and diff > max_lag:
        out.append(f"{group}: Diff Total {diff} > --max-lag {max_lag}")
    if max_lag_time is not None and lag_ms > max_lag_time:
        out.append(f"{group}: lag {format_duration(lag_ms)} > --max-lag-time {format_duration(max_lag_time)}")
    return out


# ---------------------------------------------------------------------------------------------
# Broadcast consumers: offsets from the clients' local files (--local-store)


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
class LocalGroupProgress:
    """One group's progress per client and queue, read from the clients' offsets files."""

    group: str
    queues: list[LocalRow]
    files: list[OffsetsFile]
    tz: tzinfo | None = None
    check_failure: str | None = None

    @property
    def diff_total(self) -> int | None:
        diffs = [q.diff for q in self.queues if q.diff is not None]
        return sum(diffs) if diffs else None

    @property
    def lag_time_ms(self) -> int | None:
        lags = [q.lag_time_ms for q in self.queues if q.lag_time_ms is not None]
        return max(lags) if lags else None

    def to_json(self) -> dict[str, Any]:
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
        columns += ["LastTime", "Lag Time"]
        rows = [
            [
                q.client,
                q.topic,
                q.broker,
                q.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.diff,
                format_java(q.last_timestamp, self.tz) if q.last_timestamp else "N/A",
                None if q.lag_time_ms is None else (format_duration(q.lag_time_ms) if q.diff else "0"),
            ]
            for q in self.queues
        ]
        diff = "n/a (needs -n)" if self.diff_total is None else str(self.diff_total)
        footer = [
            "Consume TPS: n/a (local offsets)",
            f"Consume Diff Total: {diff}",
        ]
        if self.lag_time_ms is not None:
            footer.append(f"Lag Time: {format_duration(self.lag_time_ms)} (age of the oldest unconsumed message)")
        footer += [f"{f.client}: {f.path} (read {f.read_from})" for f in self.files]
        return Table(columns, rows, title=f"Consumer group {self.group} (broadcast, local offsets)", footer=footer)


@dataclass
class LocalSummary:
    group: str
    client: str
    queues: int
    source: str
    diff_total: int | None
    lag_time_ms: int | None


@dataclass
class LocalGroupsProgress:
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


def _local(
    ctx: Context,
    path: Path,
    group: str | None,
    topic: str | None,
    max_lag: int | None,
    max_lag_time: int | None,
) -> LocalGroupProgress | LocalGroupsProgress:
    from mqadmin.localstore import find_offset_files

    files = find_offset_files(path, group)
    local_notes(ctx, files)
    admin: Admin | None = open_admin(ctx) if has_broker(ctx) else None
    if admin is None and (max_lag is not None or max_lag_time is not None):
        raise errors.UsageError("--max-lag and --max-lag-time need -n: the broker knows how far the queues go")
    rows_of = {id(f): _local_rows(ctx, admin, f, topic) for f in files}
    if group is not None:
        rows = [r for f in files for r in rows_of[id(f)]]
        result = LocalGroupProgress(group, rows, files, ctx.tz)
        breaches = _breaches(group, result.diff_total or 0, result.lag_time_ms or 0, max_lag, max_lag_time)
        result.check_failure = "; ".join(breaches) or None
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
        for b in _breaches(f"{s.group} ({s.client})", s.diff_total or 0, s.lag_time_ms or 0, max_lag, max_lag_time)
    ]
    return LocalGroupsProgress(summaries, "; ".join(breaches) or None)


def _local_rows(ctx: Context, admin: Admin | None, f: OffsetsFile, topic: str | None) -> list[LocalRow]:
    """The file's queues (with -n, every queue of the file's topics, also those it has no offset for)."""
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
            r.lag_time_ms = 0
            if r.diff:
                oldest = store_time_at(admin, mq, max(offset, admin.min_offset(mq)))
                r.lag_time_ms = max(ctx.now - oldest, 0) if oldest else None
        return r

    return fan_out(row, sorted(queues))
