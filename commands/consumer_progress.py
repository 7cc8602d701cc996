"""consumerProgress: how far each group (or each queue of one group) is behind, as a check too."""

from __future__ import annotations

from collections.abc import Mapping
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
from mqadmin.model import ConsumerConnection, ConsumeStats, MessageQueue, OffsetWrapper
from mqadmin.output import ResultBase, Table
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import format_duration, format_java, now_ms, parse_duration_ms
from mqadmin.versions import version_desc

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.localstore import OffsetsFile

CONSUME_TYPES = {"CONSUME_PASSIVELY": "PUSH", "CONSUME_ACTIVELY": "PULL", "CONSUME_POP": "POP"}

#: the Java tool's printf layouts (ConsumerProgressSubCommand, tools 4.9.7 and 5.3.3), kept as its
#: format strings so --output java can be checked against them by eye
JAVA_GROUPS_HEAD = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s"
JAVA_GROUPS_ROW = "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d"


@dataclass
class ProgressRow:
    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int
    #: age of the oldest unconsumed message: 0 when caught up, None when it cannot be read
    lag_time_ms: int | None

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    @property
    def inflight(self) -> int:
        return max(self.pull_offset - self.consumer_offset, 0)


@dataclass
class GroupProgress(ResultBase):
    group: str
    tps: float
    queues: list[ProgressRow]
    tz: tzinfo | None = None
    check_failure: str | None = None
    #: read from a stopped broker's store: there is no consume rate to show
    offline: bool = False
    #: fetched only for --output java/prometheus: the Java tool's layout generation, clients, clusters
    extra: ProgressExtra | None = None
    #: --watch: each queue's Diff at the previous refresh
    previous: dict[tuple[str, str, int], int] | None = None

    @property
    def diff_total(self) -> int:
        return sum(q.diff for q in self.queues)

    def note_previous(self, before: GroupProgress) -> None:
        self.previous = {(q.topic, q.broker, q.queue_id): q.diff for q in before.queues}

    def _change(self, q: ProgressRow) -> int | None:
        if self.previous is None or (q.topic, q.broker, q.queue_id) not in self.previous:
            return None
        return q.diff - self.previous[(q.topic, q.broker, q.queue_id)]

    def java_text(self) -> str:
        """The Java tool's ``consumerProgress -g`` text (4.x layout on 4.x brokers, else 5.x)."""
        v5 = self.extra is None or self.extra.v5
        if v5:
            head = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s"
            row = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s"
            names: tuple[str, ...] = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset")
            names += ("#Diff", "#Inflight")
        else:
            head = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s"
            row = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s"
            names = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff")
        lines = [head % (*names, "#LastTime")]
        for q in self.queues:
            last = format_java(q.last_timestamp, self.tz) if q.last_timestamp else "N/A"
            values = (q.topic[:64], q.broker[:32], q.queue_id, q.broker_offset, q.consumer_offset, q.diff)
            lines.append(row % (*values, *((q.inflight,) if v5 else ()), last))
        lines += ["", f"Consume TPS: {self.tps:.2f}"]
        if v5:
            lines += [
                f"Consume Diff Total: {self.diff_total}",
                f"Consume Inflight Total: {sum(q.inflight for q in self.queues)}",
            ]
        else:
            lines.append(f"Diff Total: {self.diff_total}")
        return "\n".join(lines) + "\n"

    def prometheus_text(self) -> str:
        from mqadmin.prometheus import group_exposition

        extra = self.extra or ProgressExtra()
        return group_exposition(
            self.to_json(), online=extra.online, model=extra.model, clusters=extra.clusters, read_at_ms=extra.read_at_ms
        ).text()

    @property
    def lag_time_ms(self) -> int | None:
        return max_lag([q.lag_time_ms for q in self.queues])

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
                    **({"diff_change": self._change(q)} if self.previous is not None else {}),
                }
                for q in self.queues
            ],
        }

    def table(self) -> Table:
        columns = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "Inflight"]
        columns += ["LastTime", "Lag Time"] + (["Change"] if self.previous is not None else [])
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
                format_duration(q.lag_time_ms),
            ]
            + ([_signed(self._change(q))] if self.previous is not None else [])
            for q in self.queues
        ]
        footer = [
            "Consume TPS: n/a (offline store)" if self.offline else f"Consume TPS: {self.tps:.2f}",
            f"Consume Diff Total: {self.diff_total}",
            f"Consume Inflight Total: {sum(q.inflight for q in self.queues)}",
            lag_line(self.lag_time_ms),
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
class ProgressExtra:
    """What only --output java/prometheus show, read only when asked for."""

    v5: bool = True
    online: int = 0
    model: str = "CLUSTERING"
    clusters: dict[str, str] = field(default_factory=dict)
    read_at_ms: int = 0


@dataclass
class AllGroupsProgress(ResultBase):
    groups: list[GroupSummary] = field(default_factory=list)
    check_failure: str | None = None
    read_at_ms: int = 0
    #: --watch: each group's Diff Total at the previous refresh
    previous: dict[str, int] | None = None

    def note_previous(self, before: AllGroupsProgress) -> None:
        self.previous = {g.group: g.diff_total for g in before.groups}

    def _change(self, g: GroupSummary) -> int | None:
        if self.previous is None or g.group not in self.previous:
            return None
        return g.diff_total - self.previous[g.group]

    def java_text(self) -> str:
        """The Java tool's ``consumerProgress`` (all groups) text; TPS as a whole number, as it prints."""
        lines = [JAVA_GROUPS_HEAD % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")]
        for g in self.groups:
            values = (g.group[:64], g.count, g.version, g.type, g.model, int(g.tps), g.diff_total)
            lines.append(JAVA_GROUPS_ROW % values)
        return "\n".join(lines) + "\n"

    def prometheus_text(self) -> str:
        from mqadmin.prometheus import groups_exposition

        return groups_exposition(self.to_json()["groups"], read_at_ms=self.read_at_ms).text()

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
                    **({"diff_change": self._change(g)} if self.previous is not None else {}),
                }
                for g in self.groups
            ]
        }

    def table(self) -> Table:
        columns = ["Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total", "Lag Time"]
        columns += ["Change"] if self.previous is not None else []
        rows: list[list[Any]] = [
            [g.group, g.count, g.version, g.type, g.model, int(g.tps), g.diff_total, format_duration(g.lag_time_ms)]
            + ([_signed(self._change(g))] if self.previous is not None else [])
            for g in self.groups
        ]
        return Table(columns, rows, title="Consumer groups")


@dataclass(frozen=True)
class ConsumerProgressParams:
    """consumerProgress's options (the defaults are the Opt declarations')."""

    group: str | None
    topic: str | None
    local_store: str | None
    max_lag: int | None
    max_lag_time: str | None


@register
class ConsumerProgressCommand(SubCommand):
    """Show consume progress: per queue for one group (-g), or one line per group.

    Like the Java tool's consumerProgress, plus lag as time (age of the oldest unconsumed
    message), per queue and per group; unknown (null in JSON, - in tables) only when a queue is
    behind and no unconsumed message can be read (the broker refuses the pull). With --max-lag
    or --max-lag-time it is a check for cron and CI: exit 3 when a group is further behind than
    that, or its lag time is unknown (mqadmin extension).
    """

    name = "consumerProgress"
    extra_formats = ("java", "prometheus")
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
        Opt(
            "watch",
            ("--watch",),
            "Refresh every SECONDS until Ctrl-C (exit 130): a live table with each Diff's change on a terminal, "
            "one JSON document per refresh when piped (mqadmin extension)",
            kind=float,
            metavar="SECONDS",
        ),
        Opt(
            "output_file",
            ("--output-file",),
            "Write the result to FILE, replaced atomically (temp file + rename), e.g. --output prometheus for "
            "node_exporter's textfile collector (mqadmin extension)",
            metavar="FILE",
        ),
    )

    params_type = ConsumerProgressParams

    def execute(
        self, ctx: Context, params: ConsumerProgressParams
    ) -> GroupProgress | AllGroupsProgress | LocalGroupProgress | LocalGroupsProgress:
        max_lag: int | None = params.max_lag
        max_lag_time = parse_duration_ms(params.max_lag_time) if params.max_lag_time else None
        if max_lag is not None and max_lag < 0:
            raise errors.UsageError("--max-lag must be 0 or more")
        group: str | None = params.group
        if params.local_store:
            if ctx.output in ("java", "prometheus"):
                raise errors.UsageError(f"--output {ctx.output} shows a broker's view; it has no --local-store form")
            return _local(ctx, Path(params.local_store), group, params.topic, max_lag, max_lag_time)
        admin = open_admin(ctx)
        if group:
            result = self._one_group(ctx, group, params.topic)
            if ctx.output in ("java", "prometheus"):
                result.extra = _extra(ctx, group)
            breaches = _breaches(group, result.diff_total, result.lag_time_ms, max_lag, max_lag_time)
            result.check_failure = "; ".join(breaches) or None
            return result
        groups = admin.list_groups()
        stats = admin.consume_stats_all(groups)  # one request per broker where the broker allows
        conns = admin.consumer_connections_all(groups)
        summaries = fan_out(lambda g: self._summary(ctx, g, conns[g], stats[g]), groups)
        breaches = [
            b for s in summaries for b in _breaches(s.group, s.diff_total, s.lag_time_ms, max_lag, max_lag_time)
        ]
        return AllGroupsProgress(summaries, "; ".join(breaches) or None, read_at_ms=now_ms())

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

    def _summary(
        self,
        ctx: Context,
        group: str,
        conn: ConsumerConnection | errors.MqadminError,
        stats: ConsumeStats | errors.MqadminError,
    ) -> GroupSummary:
        count, version, ctype, model = 0, "OFFLINE", "", ""
        try:
            if isinstance(conn, errors.MqadminError):
                raise conn
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
            if isinstance(stats, errors.MqadminError):
                raise stats
            tps = stats.consume_tps
            diff = sum(w.broker_offset - w.consumer_offset for w in stats.offsets.values())
            lag = group_lag_ms(ctx, stats.offsets)
        except errors.BrokerError as exc:
            if exc.permission_denied:  # nor is it a group without lag
                raise
        return GroupSummary(group, count, version, ctype, model, tps, diff, lag)


def queue_lag_ms(ctx: Context, mq: MessageQueue, w: OffsetWrapper) -> int | None:
    """Age of the oldest unconsumed message of one queue: 0 when caught up; None when the queue
    is behind but no store time can be read (the broker refused the pull, or every unconsumed
    message is gone). A consumer offset below the queue's min offset means retention deleted the
    messages it had not consumed: the oldest unconsumed one left is the first message kept."""
    if w.broker_offset <= w.consumer_offset:
        return 0
    admin = ctx.admin()
    try:
        oldest = store_time_at(admin, mq, w.consumer_offset)
        if oldest is None:
            low = admin.min_offset(mq)
            if low > w.consumer_offset:
                oldest = store_time_at(admin, mq, low)
    except errors.MqadminError as exc:
        if isinstance(exc, errors.BrokerError) and exc.permission_denied:
            ctx.warn_once(f"lag time left out: reading a message was refused ({exc})")
        return None
    return None if oldest is None else max(ctx.now - oldest, 0)


def group_lag_ms(ctx: Context, offsets: Mapping[MessageQueue, OffsetWrapper]) -> int | None:
    """A group's lag time (the oldest unconsumed message over its queues); reads only the queues
    that are behind, so a caught-up group costs no pull. The one place every view of a group's
    lag comes from; sequential, as the caller fans out over groups already."""
    return max_lag([queue_lag_ms(ctx, mq, w) for mq, w in offsets.items() if w.broker_offset > w.consumer_offset])


def max_lag(lags: list[int | None]) -> int | None:
    """The largest known lag; None only when some queue is behind and none could be read."""
    known = [x for x in lags if x is not None]
    if known:
        return max(known)
    return None if lags else 0


def _row(ctx: Context, mq: MessageQueue, w: OffsetWrapper) -> ProgressRow:
    return ProgressRow(
        mq.topic,
        mq.broker_name,
        mq.queue_id,
        w.broker_offset,
        w.consumer_offset,
        w.pull_offset,
        w.last_timestamp,
        queue_lag_ms(ctx, mq, w),
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


def _extra(ctx: Context, group: str) -> ProgressExtra:
    """The Java layout generation (the brokers' major version), the group's clients, the clusters."""
    admin = ctx.admin()
    brokers = admin.cluster_brokers()
    extra = ProgressExtra(
        v5=not brokers or any(int(b.version.split(".")[0]) >= 5 for b in brokers),
        clusters={b.broker_name: b.cluster for b in brokers},
        read_at_ms=now_ms(),
    )
    try:
        conn = admin.consumer_connections(group)
        extra.online, extra.model = len(conn.connections), conn.message_model or "CLUSTERING"
    except errors.MqadminError:
        pass  # offline: 0 clients, CLUSTERING, as the exporter assumes
    return extra


def _signed(change: int | None) -> str:
    return "-" if change is None else f"{change:+d}" if change else "0"


def lag_line(lag_ms: int | None) -> str:
    if lag_ms is None:
        return "Lag Time: unknown (no store time could be read for the unconsumed messages)"
    return f"Lag Time: {format_duration(lag_ms)} (age of the oldest unconsumed message)"


def _breaches(group: str, diff: int, lag_ms: int | None, max_lag: int | None, max_lag_time: int | None) -> list[str]:
    """A lag time that cannot be read fails --max-lag-time: a check must not pass unverified."""
    out = []
    if max_lag is not None and diff > max_lag:
        out.append(f"{group}: Diff Total {diff} > --max-lag {max_lag}")
    if max_lag_time is not None and lag_ms is None:
        out.append(f"{group}: lag time unknown (no store time readable), so --max-lag-time cannot pass")
    elif max_lag_time is not None and lag_ms is not None and lag_ms > max_lag_time:
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
class LocalGroupProgress(ResultBase):
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
                format_duration(q.lag_time_ms),
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
