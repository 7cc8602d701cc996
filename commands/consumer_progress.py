"""consumerProgress: how far each group (or each queue of one group) is behind, as a check too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    is_offline,
    missing_brokers_failure,
    store_time_at,
)
from mqadmin.commands._options import GROUP, LOCAL_STORE, TOPIC, parse_bool
from mqadmin.commands._progress import (
    CONSUME_TYPES,
    AllGroupsProgress,
    GroupProgress,
    GroupSummary,
    ProgressExtra,
    ProgressRow,
    breaches_of,
    max_lag,
)
from mqadmin.commands._progress_local import LocalGroupProgress, LocalGroupsProgress, local_progress

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import ConsumerConnection, ConsumeStats, MessageQueue, OffsetWrapper
from mqadmin.protocol.versions import version_desc
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import now_ms, parse_duration_ms


@dataclass(frozen=True)
class ConsumerProgressParams:
    """consumerProgress's options (the defaults are the Opt declarations')."""

    group: str | None
    topic: str | None
    local_store: str | None
    max_lag: int | None
    max_lag_time: str | None
    show_client_ip: str | None
    partial: bool
    no_clients: bool

    def __post_init__(self) -> None:
        self.max_lag_time_ms  # noqa: B018 (a duration that cannot be read is a usage error here)
        if self.max_lag is not None and self.max_lag < 0:
            raise errors.UsageError("--max-lag must be 0 or more")
        self.show_ip  # noqa: B018 (-s takes true or false only: a usage error here)
        if self.partial and self.local_store:
            raise errors.UsageError(
                "--partial is about brokers that do not answer; --local-store reads no broker's offsets"
            )
        if self.no_clients and (self.group or self.local_store):
            where = "-g" if self.group else "--local-store"
            raise errors.UsageError(f"--no-clients is for the all-groups view of the brokers, not with {where}")

    @property
    def show_ip(self) -> bool:
        return parse_bool(self.show_client_ip, "-s/--showClientIP") if self.show_client_ip else False

    @property
    def max_lag_time_ms(self) -> int | None:
        return parse_duration_ms(self.max_lag_time) if self.max_lag_time else None


@register
class ConsumerProgressCommand(SubCommand):
    """Show consume progress: per queue for one group (-g), or one line per group.

    Like the Java tool's consumerProgress, plus lag as time (age of the oldest unconsumed
    message), per queue and per group; unknown (null in JSON, - in tables) only when a queue is
    behind and no unconsumed message can be read (the broker refuses the pull). With --max-lag
    or --max-lag-time it is a check for cron and CI: exit 3 when a group is further behind than
    that, or its lag time is unknown (mqadmin extension).

    When a broker does not answer, the others' figures are still shown (the missing broker's
    queues, and its share of each total, left out; --output prometheus has no series for it),
    the broker is named on stderr and under missing_brokers in JSON, and the command exits 1
    (3 if a check fails as well); --partial accepts such an answer (mqadmin extension).
    """

    name = "consumerProgress"
    extra_formats = ("java", "prometheus")
    options = (
        GROUP,
        TOPIC,
        LOCAL_STORE,
        Opt(
            "show_client_ip",
            ("-s", "--showClientIP"),
            "true: with -g, a Client IP column: which client holds each queue now, as the client itself "
            "reports (the broker asks each online client); N/A when none does. As the Java tool's -s, but only "
            "true and false are accepted and a client that cannot be asked is named on stderr instead of "
            "leaving every later client out",
            metavar="true|false",
        ),
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
        Opt(
            "partial",
            ("--partial",),
            "When a broker does not answer, the others' figures are still shown and the missing broker named "
            "(on stderr, and under missing_brokers in JSON), then exit 1; --partial accepts such an answer "
            "(exit 0, or 3 for a failed check) (mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "no_clients",
            ("--no-clients",),
            "All groups: read no group's clients, so the Count, Version, Type and Model columns are left out and "
            "the command costs a few requests per broker (plus the lag-time reads) instead of one per group and "
            "broker: RocketMQ has no request for every group's clients. Not with -g or --output java "
            "(mqadmin extension)",
            kind=bool,
            default=False,
        ),
    )

    params_type = ConsumerProgressParams

    def execute(
        self, ctx: Context, params: ConsumerProgressParams
    ) -> GroupProgress | AllGroupsProgress | LocalGroupProgress | LocalGroupsProgress:
        max_lag: int | None = params.max_lag
        max_lag_time = params.max_lag_time_ms
        group: str | None = params.group
        show_ip = params.show_ip
        if params.local_store:
            if ctx.output in ("java", "prometheus"):
                raise errors.UsageError(f"--output {ctx.output} shows a broker's view; it has no --local-store form")
            if show_ip:
                raise errors.UsageError("-s/--showClientIP asks the online clients; it has no --local-store form")
            return local_progress(ctx, Path(params.local_store), group, params.topic, max_lag, max_lag_time)
        admin = ctx.admin()
        if group:
            result = self._one_group(ctx, group, params.topic)
            if show_ip:
                _add_client_ips(ctx, result)
            if ctx.output in ("java", "prometheus"):
                result.extra = _extra(ctx, group)
            breaches = breaches_of(group, result.diff_total, result.lag_time_ms, max_lag, max_lag_time)
            return _checked(ctx, result, breaches, params.partial)
        if params.no_clients and ctx.output == "java":
            raise errors.UsageError(
                "--output java prints the Java tool's Count/Version/Type/Model; --no-clients reads none"
            )
        groups = admin.list_groups()
        # one request per broker where the broker allows; a broker that cannot be reached is asked once
        stats = admin.consume_stats_all(groups, partial=True)
        conns = None if params.no_clients else admin.consumer_connections_all(groups)
        lags = groups_lag_ms(ctx, {g: s.offsets for g, s in stats.items() if isinstance(s, ConsumeStats)})
        summaries = [_summary(g, None if conns is None else conns[g], stats[g], lags.get(g)) for g in groups]
        breaches = [
            b for s in summaries for b in breaches_of(s.group, s.diff_total, s.lag_time_ms, max_lag, max_lag_time)
        ]
        everything = AllGroupsProgress(summaries, read_at_ms=now_ms(), clients=not params.no_clients)
        for s in stats.values():
            if isinstance(s, ConsumeStats):
                everything.missing_brokers.update(s.missing_brokers)
        return _checked(ctx, everything, breaches, params.partial)

    def _one_group(self, ctx: Context, group: str, topic: str | None) -> GroupProgress:
        admin = ctx.admin()
        try:
            stats = admin.consume_stats(group, partial=True)
            offsets = {mq: w for mq, w in stats.offsets.items() if topic is None or mq.topic == topic}
            tps, missing = stats.consume_tps, stats.missing_brokers
        except errors.TopicNotExist:
            offsets, tps, missing = {}, 0.0, {}
        if not offsets and not missing:
            _online_or_unknown(ctx, group, topic)
        rows = fan_out(lambda item: _row(ctx, item[0], item[1]), sorted(offsets.items()))
        return GroupProgress(group, tps, rows, ctx.tz, offline=is_offline(admin), missing_brokers=missing)


def _summary(
    group: str,
    conn: ConsumerConnection | errors.MqadminError | None,
    stats: ConsumeStats | errors.MqadminError,
    lag: int | None,
) -> GroupSummary:
    """One group's line; ``conn`` None: its clients were not read (--no-clients)."""
    count, version, ctype, model = 0, "OFFLINE", "", ""
    try:
        if isinstance(conn, errors.MqadminError):
            raise conn
        if conn is not None:
            count = len(conn.connections)
            if conn.connections:
                version = version_desc(min(c.version for c in conn.connections))
            ctype = CONSUME_TYPES.get(conn.consume_type, conn.consume_type)
            model = conn.message_model if ctype == "PUSH" else ""
    except errors.ConnectError:
        pass  # a broker that did not answer (named once for all groups): the others know no client
    except errors.BrokerError as exc:
        if exc.permission_denied:  # a refusal is not an offline group
            raise
    tps, diff = 0.0, 0
    try:
        if isinstance(stats, errors.MqadminError):
            raise stats
        tps = stats.consume_tps
        diff = sum(w.broker_offset - w.consumer_offset for w in stats.offsets.values())
    except errors.BrokerError as exc:
        if exc.permission_denied:  # nor is it a group without lag
            raise
    return GroupSummary(group, count, version, ctype, model, tps, diff, lag)


def _checked(
    ctx: Context, result: GroupProgress | AllGroupsProgress, breaches: list[str], partial: bool
) -> GroupProgress | AllGroupsProgress:
    """A breached check exits 3; brokers that did not answer are named, and fail the command
    (exit 1, or within the check's line) unless --partial."""
    failure = missing_brokers_failure(ctx, result.missing_brokers, partial)
    result.check_failure = "; ".join(breaches + ([failure] if failure and breaches else [])) or None
    result.failure = failure
    return result


def queue_lag_ms(ctx: Context, mq: MessageQueue, w: OffsetWrapper) -> int | None:
    """Age of the oldest unconsumed message of one queue: 0 when caught up; None when the queue
    is behind but no store time can be read (the broker refused the pull, or every unconsumed
    message is gone)."""
    return _age_at(ctx, mq, w.consumer_offset) if _behind(w) else 0


def _age_at(ctx: Context, mq: MessageQueue, offset: int) -> int | None:
    """Age of the message at ``offset``, the oldest one a consumer standing there has not
    consumed. An offset below the queue's min offset means retention deleted the messages it had
    not consumed: the oldest unconsumed one left is the first message kept."""
    admin = ctx.admin()
    try:
        oldest = store_time_at(admin, mq, offset)
        if oldest is None:
            low = admin.min_offset(mq)
            if low > offset:
                oldest = store_time_at(admin, mq, low)
    except errors.MqadminError as exc:
        if isinstance(exc, errors.BrokerError) and exc.permission_denied:
            ctx.warn_once(f"lag time left out: reading a message was refused ({exc})")
        return None
    return None if oldest is None else max(ctx.now - oldest, 0)


#: how far apart two consumer offsets of a queue may be to share one lag-time read: a broker
#: answers a pull with at most 32 messages
LAG_READ_SPAN = 32


def groups_lag_ms(ctx: Context, tables: Mapping[str, Mapping[MessageQueue, OffsetWrapper]]) -> dict[str, int | None]:
    """Each group's lag time (the oldest unconsumed message over its queues), for many groups.

    The age of the message at a queue position does not depend on the group standing there, so
    each distinct lagging (queue, consumer offset) is read once, however many groups share it,
    and positions of a queue less than LAG_READ_SPAN apart share one pull; the reads run
    concurrently. A caught-up group costs no read."""
    positions: dict[MessageQueue, set[int]] = {}
    for table in tables.values():
        for mq, w in table.items():
            if _behind(w):
                positions.setdefault(mq, set()).add(w.consumer_offset)
    spans = [(mq, span) for mq, offsets in positions.items() for span in _spans(sorted(offsets))]
    ages: dict[tuple[MessageQueue, int], int | None] = {}
    for part in fan_out(lambda item: _span_ages(ctx, item[0], item[1]), spans):
        ages.update(part)
    return {
        group: max_lag([ages[mq, w.consumer_offset] for mq, w in table.items() if _behind(w)])
        for group, table in tables.items()
    }


def _spans(offsets: list[int]) -> list[list[int]]:
    """Sorted offsets cut into runs that one pull of LAG_READ_SPAN messages can cover."""
    out: list[list[int]] = []
    for offset in offsets:
        if out and offset - out[-1][0] < LAG_READ_SPAN:
            out[-1].append(offset)
        else:
            out.append([offset])
    return out


def _span_ages(ctx: Context, mq: MessageQueue, offsets: list[int]) -> dict[tuple[MessageQueue, int], int | None]:
    """The ages at several close offsets of a queue from one pull; an offset whose message the
    answer does not hold (gone, refused, past a broker's transfer limit) is read alone, as
    ``queue_lag_ms`` reads it, so the figures are the same as one read per offset."""
    times: dict[int, int] = {}
    if len(offsets) > 1:
        try:
            pulled = ctx.admin().pull(mq, offsets[0], offsets[-1] - offsets[0] + 1)
            times = {m.queue_offset: m.store_timestamp for m in pulled.messages}
        except errors.MqadminError:
            pass  # read alone below, which says once why a read is refused
    return {(mq, o): max(ctx.now - times[o], 0) if o in times else _age_at(ctx, mq, o) for o in offsets}


def _behind(w: OffsetWrapper) -> bool:
    return w.broker_offset > w.consumer_offset


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


def _add_client_ips(ctx: Context, result: GroupProgress) -> None:
    """Each queue's owner, as the Java tool learns it: every online client reports the queues it
    holds (its running info's mqTable); the owner's IP is its client id up to the first @."""
    result.show_client_ip = True
    admin = ctx.admin()
    try:
        clients = [c.client_id for c in admin.consumer_connections(result.group).connections]
    except errors.ConsumerNotOnline:
        return
    except errors.MqadminError as exc:  # a display column: the offsets are still worth showing
        ctx.env.warn(f"Client IP left out: the group's clients could not be listed ({exc})")
        return

    def held(client_id: str) -> frozenset[MessageQueue]:
        try:
            return admin.consumer_running_queues(result.group, client_id)
        except errors.MqadminError as exc:
            ctx.env.warn(f"client {client_id}: its queues could not be read ({exc})")
            return frozenset()

    owners = {mq: cid.split("@")[0] for cid, mqs in zip(clients, fan_out(held, clients), strict=True) for mq in mqs}
    for q in result.queues:
        q.client_ip = owners.get(MessageQueue(q.topic, q.broker, q.queue_id))


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
