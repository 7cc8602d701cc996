"""consumerProgress: how far each group (or each queue of one group) is behind, as a check too."""

from __future__ import annotations

import gc
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    is_offline,
    missing_brokers_failure,
    store_time_at,
)
from mqadmin.commands._lite import TOP_K, LiteGroupProgress, is_lite_queue, lite_progress, unlisted_lite_groups
from mqadmin.commands._options import GROUP, LOCAL_STORE, TOPIC, parse_bool, parse_now
from mqadmin.commands._progress import (
    CONSUME_TYPES,
    AllGroupsProgress,
    GroupProgress,
    GroupsProgress,
    GroupSummary,
    ProgressExtra,
    ProgressRow,
    breaches_of,
    max_lag,
)
from mqadmin.commands._progress_local import LocalGroupProgress, LocalGroupsProgress, local_progress

from mqadmin import errors
from mqadmin.config import default_home
from mqadmin.context import Context
from mqadmin.fastjson import collector_paused
from mqadmin.health import (
    Clients,
    GroupHealth,
    MemoryState,
    Rules,
    Sample,
    StateFile,
    Status,
    Verdict,
    assess,
    assess_all,
    evaluate_group,
    fails,
    parse_level,
    queue_key,
    state_path,
    uncommitted,
    worst_queue,
)
from mqadmin.model import ConsumerConnection, ConsumeStats, MessageQueue, OffsetWrapper
from mqadmin.protocol.constants import DLQ_PREFIX
from mqadmin.protocol.versions import version_desc
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import parse_duration_ms


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
    health: bool
    fail_on: str
    health_samples: int
    health_max_age: str
    warn_lag_time: str | None
    all_lite: bool

    def __post_init__(self) -> None:
        parse_now(self, "max_lag_time_ms", "show_ip", "groups")
        if len(self.groups) > 1 and self.local_store:
            raise errors.UsageError("--local-store reads one group's offsets: give -g one name")
        if self.health:
            parse_now(self, "health_rules", "fail_level")
        else:
            given = [
                flag
                for flag, value, default in (
                    ("--fail-on", self.fail_on, "STALL"),
                    ("--health-samples", self.health_samples, 5),
                    ("--health-max-age", self.health_max_age, "1h"),
                    ("--warn-lag-time", self.warn_lag_time, None),
                )
                if value != default
            ]
            if given:
                raise errors.UsageError(f"{', '.join(given)}: options of --health; add --health")
        if self.max_lag is not None and self.max_lag < 0:
            raise errors.UsageError("--max-lag must be 0 or more")
        if self.partial and self.local_store:
            raise errors.UsageError(
                "--partial is about brokers that do not answer; --local-store reads no broker's offsets"
            )
        if self.no_clients and (self.group or self.local_store):
            where = "-g" if self.group else "--local-store"
            raise errors.UsageError(f"--no-clients is for the all-groups view of the brokers, not with {where}")

    @cached_property
    def groups(self) -> list[str]:
        """-g's groups in order (several: G1,G2, as -t takes topics elsewhere); empty without -g."""
        if not self.group:
            return []
        names = [g.strip() for g in self.group.split(",")]
        if any(not g for g in names) or len(set(names)) != len(names):
            raise errors.UsageError(f"-g {self.group!r}: groups are named once each, separated by commas")
        return names

    @cached_property
    def show_ip(self) -> bool:
        return parse_bool(self.show_client_ip, "-s/--showClientIP") if self.show_client_ip else False

    @cached_property
    def max_lag_time_ms(self) -> int | None:
        return parse_duration_ms(self.max_lag_time) if self.max_lag_time else None

    @cached_property
    def health_rules(self) -> Rules:
        if self.health_samples < 2:
            raise errors.UsageError("--health-samples must be 2 or more: a window needs two samples to compare")
        max_age = parse_duration_ms(self.health_max_age)
        if max_age <= 0:
            raise errors.UsageError("--health-max-age must be above 0")
        warn = parse_duration_ms(self.warn_lag_time) if self.warn_lag_time is not None else None
        return Rules(self.health_samples, max_age, warn)

    @cached_property
    def fail_level(self) -> Status:
        return parse_level(self.fail_on)


@register
class ConsumerProgressCommand(SubCommand):
    """Show consume progress: per queue for one group (-g), or one line per group.

    -g takes several groups, comma-separated (mqadmin extension): each group's queues, totals,
    checks and status, as one -g each; JSON {"results": [...]}, one -g document per group.

    Like the Java tool's consumerProgress, plus lag as time (age of the oldest unconsumed
    message), per queue and per group; unknown (null in JSON, - in tables) only when a queue is
    behind and no unconsumed message can be read (the broker refuses the pull). With --max-lag
    or --max-lag-time it is a check for cron and CI: exit 3 when a group is further behind than
    that, or its lag time is unknown (mqadmin extension).

    When a broker does not answer, the others' figures are still shown (the missing broker's
    queues, and its share of each total, left out; --output prometheus has no series for it),
    the broker is named on stderr and under missing_brokers in JSON, and the command exits 1
    (3 if a check fails as well); --partial accepts such an answer (mqadmin extension).

    With --health each queue and group gets a status over a window of samples, one per run, as
    Burrow's consumer lag evaluation (mqadmin extension): OK, WARN (the offset moves but the lag
    grows at every sample, or the lag time is above --warn-lag-time), STALL (messages wait, clients
    online, the offset has not moved over the window), STOP (messages wait, no client online, the
    offset not moving), REWIND (the offset went back), ERR (not readable); exit 3 at --fail-on or
    worse. Where it differs from Burrow: STOP comes from RocketMQ's online clients (heartbeats), not
    from commit times, since RocketMQ clients commit every 5 s whether or not they moved; WARN needs
    the lag to grow, not merely not to shrink (a steady lag keeps up); the lag time (age of the
    oldest unconsumed message) is a rule of its own; a REWIND names the client holding the queue;
    and the window lives in a state file, so the first runs say "collecting". A group with no
    committed offset has no window: STALL when clients are online and messages wait in their
    topics, OK when there is nothing to consume, WARN ("never consumed") when no client is online.
    """

    name = "consumerProgress"
    extra_formats = ("java", "prometheus")
    options = (
        Opt(
            "group",
            GROUP.flags,
            "Consumer group, or several: G1,G2 (each group's queues, totals, check and status; several groups "
            "are an mqadmin extension)",
            metavar="GROUP",
            names="group",
            several=True,
        ),
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
        Opt(
            "health",
            ("--health",),
            "Evaluate each queue and group over a window of samples, as Burrow does: OK, WARN (falling behind), "
            "STALL (clients online, offset not moving), STOP (no client online, offset not moving), REWIND "
            "(offset went back), ERR (not readable); each run adds a sample to a state file under "
            "$MQADMIN_HOME/state/ (--watch keeps them in memory). The README's 'Health checks' section has the "
            "rules and how they differ from Burrow's (mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "fail_on",
            ("--fail-on",),
            "With --health: exit 3 when a group's status is LEVEL or worse (OK < WARN < STALL < STOP < REWIND < ERR)",
            default="STALL",
            metavar="LEVEL",
            choices=("OK", "WARN", "STALL", "STOP", "REWIND", "ERR"),
        ),
        Opt(
            "health_samples",
            ("--health-samples",),
            "With --health: the window is the last N samples of each queue (one per run; until there are N, the "
            "status says 'collecting')",
            kind=int,
            default=5,
            metavar="N",
        ),
        Opt(
            "health_max_age",
            ("--health-max-age",),
            "With --health: samples older than this leave the window, and queues not seen for this long the "
            "state file; keep it above N times the interval between runs, or the window never fills",
            default="1h",
            metavar="DURATION",
        ),
        Opt(
            "all_lite",
            ("--all",),
            "A lite group (RocketMQ 5.5 lite topics): every lite topic with a lag, not only the top "
            f"{TOP_K} by lag of each broker as the Java tool's getLiteGroupInfo shows (the broker lists no lite "
            "topic without lag; mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "warn_lag_time",
            ("--warn-lag-time",),
            "With --health: WARN when a queue's oldest unconsumed message is older than this",
            metavar="DURATION",
        ),
    )

    params_type = ConsumerProgressParams

    def execute(
        self, ctx: Context, params: ConsumerProgressParams
    ) -> (
        GroupProgress
        | GroupsProgress
        | AllGroupsProgress
        | LocalGroupProgress
        | LocalGroupsProgress
        | LiteGroupProgress
    ):
        if params.local_store:
            return _local_store_view(ctx, params)
        if params.health and ctx.output == "java":
            raise errors.UsageError(
                "--output java prints the Java tool's text, which has no status; --health is not for it"
            )
        if params.group:
            return self._named_groups(ctx, params)
        return _all_groups(ctx, params)

    def _named_groups(
        self, ctx: Context, params: ConsumerProgressParams
    ) -> GroupProgress | GroupsProgress | LiteGroupProgress:
        """-g: one group, several (in the order named), or a 5.5 lite group."""
        found = self._groups(ctx, params.groups, params.topic, params.all_lite, params.health)
        lite = [r for r in found if isinstance(r, LiteGroupProgress)]
        if lite:
            return _lite_checked(ctx, params, lite, len(found))
        if params.all_lite:
            raise errors.UsageError(f"--all is for lite groups (RocketMQ 5.5); {params.group!r} is an ordinary group")
        results = [r for r in found if isinstance(r, GroupProgress)]
        breaches = []
        for result in results:
            if params.show_ip:
                _add_client_ips(ctx, result)
            if ctx.output in ("java", "prometheus"):
                result.extra = _extra(ctx, result.group)
            breaches += breaches_of(
                result.group, result.diff_total, result.lag_time_ms, params.max_lag, params.max_lag_time_ms
            )
        if params.health:
            breaches += _group_health(ctx, params, results)
        shown = results[0] if len(results) == 1 else GroupsProgress(results)
        _checked(ctx, shown, breaches, params.partial)
        return shown

    def _groups(
        self, ctx: Context, groups: list[str], topic: str | None, every: bool, health: bool
    ) -> list[GroupProgress | LiteGroupProgress]:
        """Each named group's progress, in order; groups that are unknown (or broadcast) are named
        together in one usage error, so nothing is printed for a list that is partly wrong."""
        results: list[GroupProgress | LiteGroupProgress] = []
        wrong: list[str] = []
        for group in groups:
            try:
                results.append(self._one_group(ctx, group, topic, every, health))
            except errors.UsageError as exc:
                if len(groups) == 1:
                    raise
                wrong.append(str(exc))
        if wrong:
            raise errors.UsageError(f"{len(wrong)} of {len(groups)} groups of -g: " + "; ".join(wrong))
        return results

    def _one_group(
        self, ctx: Context, group: str, topic: str | None, every: bool, health: bool
    ) -> GroupProgress | LiteGroupProgress:
        admin = ctx.admin()
        try:
            stats = admin.consume_stats(group, partial=True)
            all_offsets = stats.offsets
            offsets = {mq: w for mq, w in all_offsets.items() if topic is None or mq.topic == topic}
            tps, missing = stats.consume_tps, stats.missing_brokers
        except errors.TopicNotExist:
            all_offsets, offsets, tps, missing = {}, {}, 0.0, {}
        # a 5.5 lite group shows its lite topics' queues (%LMQ%$parent$lite), or nothing before a commit
        if not all_offsets or any(is_lite_queue(mq) for mq in all_offsets):
            lite = lite_progress(ctx, group, topic, every)
            if lite is not None:
                return lite
        if not offsets and not missing:
            _online_or_unknown(ctx, group, topic, health)
        rows = fan_out(lambda item: _row(ctx, item[0], item[1]), sorted(offsets.items()))
        result = GroupProgress(group, tps, rows, ctx.tz, offline=is_offline(admin), missing_brokers=missing)
        result.dlq_depth = dlq_depth(ctx, group)
        return result


def _lite_checked(
    ctx: Context, params: ConsumerProgressParams, lite: list[LiteGroupProgress], named: int
) -> LiteGroupProgress:
    """A lite group's view: alone, as a table or JSON, with --max-lag/--max-lag-time as checks."""
    group = lite[0].group
    if named > 1:
        raise errors.UsageError(f"{group!r} is a lite group (one offset per lite topic): give it alone to -g")
    refused = [
        flag
        for flag, given in (
            (f"--output {ctx.output}", ctx.output in ("java", "prometheus")),
            ("-s true", params.show_ip),
            ("--health", params.health),
        )
        if given
    ]
    if refused:
        raise errors.UsageError(f"{', '.join(refused)}: not for a lite group ({group!r}) yet")
    result = lite[0]
    breaches = breaches_of(group, result.diff_total, result.lag_time_ms, params.max_lag, params.max_lag_time_ms)
    _checked(ctx, result, breaches, params.partial)
    return result


def dlq_depth(ctx: Context, group: str) -> int | None:
    """Messages in the group's dead-letter topic: the sum of its queues' max - min offsets (0 when
    the broker never made one); None, with a note, when it cannot be read (the rest still shows)."""
    admin = ctx.admin()
    try:
        queues = admin.topic_route(DLQ_PREFIX + group).message_queues()
        return sum(s.max_offset - s.min_offset for s in admin.queue_stats(queues).values())
    except errors.TopicNotExist:
        return 0
    except errors.MqadminError as exc:
        ctx.env.note(f"the depth of {DLQ_PREFIX}{group} was not read: {exc}")
        return None


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
    ctx: Context,
    result: GroupProgress | GroupsProgress | AllGroupsProgress | LiteGroupProgress,
    breaches: list[str],
    partial: bool,
) -> None:
    """A breached check exits 3; brokers that did not answer are named, and fail the command
    (exit 1, or within the check's line) unless --partial."""
    failure = missing_brokers_failure(ctx, result.missing_brokers, partial)
    result.check_failure = "; ".join(breaches + ([failure] if failure and breaches else [])) or None
    result.failure = failure


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


def position_ages(
    ctx: Context, tables: Mapping[str, Mapping[MessageQueue, OffsetWrapper]]
) -> dict[tuple[MessageQueue, int], int | None]:
    """The age of the message at each lagging (queue, consumer offset) of many groups.

    The age of the message at a queue position does not depend on the group standing there, so
    each distinct lagging (queue, consumer offset) is read once, however many groups share it,
    and positions of a queue less than LAG_READ_SPAN apart share one pull; the reads run
    concurrently. A caught-up group costs no read."""
    # gathered by the queue objects' identities, which the groups of one reply share:
    # MessageQueue's hash runs in Python, once per row of every group
    by_id: dict[int, tuple[MessageQueue, set[int]]] = {}
    for table in tables.values():
        for mq, w in table.items():
            if w.broker_offset > w.consumer_offset:  # _behind, inlined
                found = by_id.get(id(mq))
                if found is None:
                    found = by_id[id(mq)] = (mq, set())
                found[1].add(w.consumer_offset)
    positions: dict[MessageQueue, set[int]] = {}
    for mq, offsets in by_id.values():  # equal queues of distinct objects come together here
        positions.setdefault(mq, set()).update(offsets)
    spans = [(mq, span) for mq, offsets in positions.items() for span in _spans(sorted(offsets))]
    ages: dict[tuple[MessageQueue, int], int | None] = {}
    for part in fan_out(lambda item: _span_ages(ctx, item[0], item[1]), spans):
        ages.update(part)
    return ages


def groups_lag_ms(
    ctx: Context,
    tables: Mapping[str, Mapping[MessageQueue, OffsetWrapper]],
    ages: Mapping[tuple[MessageQueue, int], int | None] | None = None,
) -> dict[str, int | None]:
    """Each group's lag time (the oldest unconsumed message over its queues), from ``position_ages``
    (read here unless given)."""
    return lag_times(tables, position_ages(ctx, tables) if ages is None else ages)[0]


def lag_times(
    tables: Mapping[str, Mapping[MessageQueue, OffsetWrapper]], ages: Mapping[tuple[MessageQueue, int], int | None]
) -> tuple[dict[str, int | None], dict[str, list[int | None]]]:
    """Each group's lag time (``groups_lag_ms``), and each of its queues' in its table's order (0
    for a queue caught up), which ``--health`` keeps in its windows: one pass for both."""
    # looked up by the queue objects' identities first, which the groups of one reply share
    # (MessageQueue's hash runs in Python, once per row of every group); an object only equal to
    # a key of ``ages``, by its value
    by_id = {(id(mq), offset): age for (mq, offset), age in ages.items()}
    groups: dict[str, int | None] = {}
    queues: dict[str, list[int | None]] = {}
    for group, table in tables.items():
        behind: list[int | None] = []
        lags: list[int | None] = []
        for mq, w in table.items():
            if w.broker_offset > w.consumer_offset:  # _behind, inlined
                key = (id(mq), w.consumer_offset)
                lag = by_id[key] if key in by_id else ages[mq, w.consumer_offset]
                behind.append(lag)
                lags.append(lag)
            else:
                lags.append(0)
        groups[group] = max_lag(behind)
        queues[group] = lags
    return groups, queues


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
    """Each queue's owner, as the Java tool shows it: the owner's IP is its client id up to the first @."""
    result.show_client_ip = True
    owners = _owners(ctx, result.group, "Client IP left out")
    for q in result.queues:
        owner = owners.get(MessageQueue(q.topic, q.broker, q.queue_id))
        q.client_ip = owner.split("@")[0] if owner else None


def _owners(ctx: Context, group: str, what: str) -> dict[MessageQueue, str]:
    """Which client (its id) holds each queue now, as the Java tool learns it: every online client
    reports the queues it holds (its running info's mqTable)."""
    admin = ctx.admin()
    try:
        clients = [c.client_id for c in admin.consumer_connections(group).connections]
    except errors.ConsumerNotOnline:
        return {}
    except errors.MqadminError as exc:  # a display column: the offsets are still worth showing
        ctx.env.warn(f"{what}: the group's clients could not be listed ({exc})")
        return {}

    def held(client_id: str) -> frozenset[MessageQueue]:
        try:
            return admin.consumer_running_queues(group, client_id)
        except errors.MqadminError as exc:
            ctx.env.warn(f"client {client_id}: its queues could not be read ({exc})")
            return frozenset()

    return {mq: cid for cid, mqs in zip(clients, fan_out(held, clients), strict=True) for mq in mqs}


def _online_or_unknown(ctx: Context, group: str, topic: str | None, health: bool) -> None:
    """No offsets: an online group (just started) shows an empty table, anything else is unknown;
    with --health a subscription group that was never started too (its status says so)."""
    try:
        conn = ctx.admin().consumer_connections(group)
    except errors.ConsumerNotOnline:
        try:
            group_offsets(ctx.admin(), group, topic)  # raises the "unknown consumer group" usage error
        except errors.UsageError:
            if not health or group not in ctx.admin().list_groups(subscribed=True):
                raise
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
        read_at_ms=ctx.now,
    )
    try:
        conn = admin.consumer_connections(group)
        extra.online, extra.model = len(conn.connections), conn.message_model or "CLUSTERING"
    except errors.MqadminError:
        pass  # offline: 0 clients, CLUSTERING, as the exporter assumes
    return extra


def _state(ctx: Context, params: ConsumerProgressParams, where: str) -> StateFile | MemoryState:
    rules = params.health_rules
    if ctx.watching:
        state = ctx.kept.setdefault("health", MemoryState(rules))  # a cron run's are in the state file
        assert isinstance(state, MemoryState)
        return state
    return StateFile(state_path(default_home(), where), rules, ctx.env.warn)


def _connection(ctx: Context, group: str) -> ConsumerConnection | errors.MqadminError:
    """The group's clients, or why not (``_clients_of`` counts them)."""
    try:
        return ctx.admin().consumer_connections(group)
    except errors.ConsumerNotOnline as exc:
        return exc
    except errors.MqadminError as exc:
        ctx.env.warn(f"health: the clients of {group} could not be read ({exc}); STOP cannot be told from STALL")
        return exc


def _incomplete(missing: Mapping[str, str], partial: bool) -> str | None:
    """A group whose brokers did not all answer is ERR, unless --partial accepts that."""
    if not missing or partial:
        return None
    return "; ".join(f"{b} did not answer ({e})" for b, e in sorted(missing.items())) + ": its queues are not evaluated"


def _failures(params: ConsumerProgressParams, healths: Mapping[str, GroupHealth]) -> list[str]:
    level = params.fail_level
    return [
        f"{g}: {h.verdict.status.name}: {h.verdict.reason}"
        for g, h in healths.items()
        if fails(h.verdict.status, level)
    ]


def _group_health(ctx: Context, params: ConsumerProgressParams, results: list[GroupProgress]) -> list[str]:
    """-g --health: each named group's queues evaluated over their windows, in one pass over the
    state file (one lock, one write); the breaches of --fail-on."""
    rules = params.health_rules
    conns = {r.group: _connection(ctx, r.group) for r in results}
    clients = {g: _clients_of(conn) for g, conn in conns.items()}
    with _state(ctx, params, ctx.address or "").open(ctx.now) as windows:
        for result in results:
            samples = [
                (_key(result.group, q), Sample(ctx.now, q.consumer_offset, q.broker_offset, q.lag_time_ms))
                for q in result.queues
            ]
            incomplete = _incomplete(result.missing_brokers, params.partial)
            result.health = assess(windows, rules, samples, clients[result.group], incomplete)
            if not samples and not result.missing_brokers:
                result.health = GroupHealth(_uncommitted(ctx, conns[result.group], params.topic))
    for result in results:
        if clients[result.group].online:
            _name_rewinders(ctx, result)
    return _failures(params, {r.group: r.health for r in results if r.health is not None})


def _name_rewinders(ctx: Context, result: GroupProgress) -> None:
    """A REWIND's reason names the client holding the queue, as the broker says."""
    health = result.health
    assert health is not None
    rewound = [q for q in result.queues if health.queues[_key(result.group, q)].verdict.status == Status.REWIND]
    if not rewound:
        return
    owners = _owners(ctx, result.group, "REWIND: the queues' holders left out")
    for q in rewound:
        owner = owners.get(MessageQueue(q.topic, q.broker, q.queue_id))
        if owner:
            qh = health.queues[_key(result.group, q)]
            qh.verdict = Verdict(qh.verdict.status, f"{qh.verdict.reason}; held by {owner}")
    verdicts = {k: q.verdict for k, q in health.queues.items()}
    health.worst = worst_queue(verdicts)
    health.verdict = evaluate_group(verdicts, health.worst)


def _key(group: str, q: ProgressRow) -> str:
    return queue_key(group, q.topic, q.broker, q.queue_id)


def _groups_health(
    ctx: Context,
    params: ConsumerProgressParams,
    result: AllGroupsProgress,
    stats: Mapping[str, ConsumeStats | errors.MqadminError],
    conns: Mapping[str, ConsumerConnection | errors.MqadminError] | None,
    queue_lags: Mapping[str, list[int | None]],
) -> list[str]:
    """Every group's health in one pass over the state file (one lock, one write); ``queue_lags``:
    each group's queues' lag times (``lag_times``)."""
    rules, now = params.health_rules, ctx.now
    healths: dict[str, GroupHealth] = {}
    # the samples as columns over every group's queues, each part by one comprehension
    keys: list[str] = []
    consumers: list[int] = []
    brokers: list[int] = []
    lags: list[int | None] = []
    groups: list[tuple[str, int, Clients, str | None]] = []
    with _state(ctx, params, ctx.address or "").open(now) as windows:
        for g in result.groups:
            group = g.group
            st = stats[group]
            if isinstance(st, errors.MqadminError):
                healths[group] = GroupHealth(Verdict(Status.ERR, f"its offsets could not be read ({st})"))
                continue
            offsets = st.offsets
            if not offsets and not st.missing_brokers:
                healths[group] = GroupHealth(_uncommitted(ctx, None if conns is None else conns[group], None))
                continue
            keys += [f"{group} {mq.topic} {mq.broker_name} {mq.queue_id}" for mq in offsets]  # as queue_key
            cs = [w.consumer_offset for w in offsets.values()]
            bs = [w.broker_offset for w in offsets.values()]
            consumers += cs
            brokers += bs
            lags += queue_lags[group]
            clients = NOT_READ if conns is None else _clients_of(conns[group])
            groups.append((group, len(cs), clients, _incomplete(st.missing_brokers, params.partial)))
        healths.update(assess_all(windows, rules, now, keys, consumers, brokers, lags, groups))
    healths = {g.group: healths[g.group] for g in result.groups}  # in the groups' order
    result.health = healths
    return _failures(params, healths)


#: --no-clients: no group's clients were read (one value for 10,000 groups)
NOT_READ = Clients(None)


def _clients_of(conn: ConsumerConnection | errors.MqadminError) -> Clients:
    if isinstance(conn, ConsumerConnection):
        return Clients(len(conn.connections))
    return Clients(0) if isinstance(conn, errors.ConsumerNotOnline) else Clients(None)


def _uncommitted(ctx: Context, conn: ConsumerConnection | errors.MqadminError | None, topic: str | None) -> Verdict:
    """The status of a group without a committed offset on any queue (of ``topic``, if given):
    ``uncommitted`` over its clients (``conn`` None: not read) and the messages in the topics they
    subscribe to. A broadcast group's offsets live on its clients: not evaluated here."""
    if not isinstance(conn, ConsumerConnection):
        return uncommitted(_clients_of(conn).online if conn is not None else None, {})
    if conn.message_model == "BROADCASTING":
        return Verdict(Status.OK, "BROADCASTING: its offsets live on the clients (--local-store), not evaluated")
    admin = ctx.admin()
    waiting: dict[str, int] = {}
    try:
        for t in sorted(conn.subscriptions):
            if topic is not None and t != topic:
                continue
            try:
                queues = admin.topic_route(t).message_queues()
            except errors.TopicNotExist:
                queues = []
            waiting[t] = sum(s.max_offset - s.min_offset for s in admin.queue_stats(queues).values()) if queues else 0
    except errors.MqadminError as exc:
        online = len(conn.connections)
        return Verdict(Status.ERR, f"{online} client(s) online, no offset committed, topics not read ({exc})")
    return uncommitted(len(conn.connections), waiting)


def _local_health(ctx: Context, params: ConsumerProgressParams, result: LocalGroupProgress) -> None:
    """--local-store -g --health: each client's queues (broadcast: every client has its own offsets)."""
    samples = [
        (
            queue_key(result.group, r.topic, r.broker, r.queue_id, r.client),
            Sample(ctx.now, r.consumer_offset, r.broker_offset, r.lag_time_ms),
        )
        for r in result.queues
        if r.broker_offset is not None and r.consumer_offset is not None
    ]
    if not samples and result.queues:
        raise errors.UsageError("--health with --local-store needs -n: the broker knows how far the queues go")
    where = f"{ctx.address or ''} local:{Path(params.local_store or '').resolve()}"
    with _state(ctx, params, where).open(ctx.now) as windows:
        health = assess(windows, params.health_rules, samples, Clients(None))
    result.health = health
    found = _failures(params, {result.group: health})
    if found:
        result.check_failure = "; ".join(([result.check_failure] if result.check_failure else []) + found)


def _local_store_view(ctx: Context, params: ConsumerProgressParams) -> LocalGroupProgress | LocalGroupsProgress:
    """--local-store: broadcast clients' offsets files against the brokers' max offsets."""
    assert params.local_store is not None
    if ctx.output in ("java", "prometheus"):
        raise errors.UsageError(f"--output {ctx.output} shows a broker's view; it has no --local-store form")
    if params.show_ip:
        raise errors.UsageError("-s/--showClientIP asks the online clients; it has no --local-store form")
    if params.health and not params.group:
        raise errors.UsageError("--health with --local-store evaluates one group: give -g")
    local = local_progress(
        ctx, Path(params.local_store), params.group, params.topic, params.max_lag, params.max_lag_time_ms
    )
    if params.health and isinstance(local, LocalGroupProgress):
        _local_health(ctx, params, local)
    return local


def _lite_summaries(ctx: Context, listed: list[str], no_clients: bool) -> list[GroupSummary]:
    """5.5 lite groups without a %RETRY% topic, with the brokers' total lag over their lite topics."""
    found = unlisted_lite_groups(ctx, listed)
    conns = ctx.admin().consumer_connections_all(sorted(found)) if found and not no_clients else None
    out = []
    for group, (lag, lag_ms) in sorted(found.items()):
        summary = _summary(group, None if conns is None else conns[group], ConsumeStats({}, 0.0), lag_ms)
        summary.diff_total = lag
        out.append(summary)
    return out


def _all_groups(ctx: Context, params: ConsumerProgressParams) -> AllGroupsProgress:
    """No -g: every group of the cluster, one consume-stats request per broker where it allows.

    10,000 groups make a million small objects kept to the end, none in a cycle: the cyclic
    collector, which would scan them again and again as they are made (a tenth of the run), stays
    off while they are, and they are frozen out of its later scans (the printing) once made."""
    with collector_paused():
        everything = _read_all_groups(ctx, params)
    if not ctx.watching:  # a watch runs on: its refreshes' garbage, cycles too, must stay collectable
        gc.freeze()
    return everything


def _read_all_groups(ctx: Context, params: ConsumerProgressParams) -> AllGroupsProgress:
    if params.no_clients and ctx.output == "java":
        raise errors.UsageError(
            "--output java prints the Java tool's Count/Version/Type/Model; --no-clients reads none"
        )
    admin = ctx.admin()
    groups = admin.list_groups()
    # one request per broker where the broker allows; a broker that cannot be reached is asked once
    stats = admin.consume_stats_all(groups, partial=True)
    conns = None if params.no_clients else admin.consumer_connections_all(groups)
    tables = {g: s.offsets for g, s in stats.items() if isinstance(s, ConsumeStats)}
    lags, queue_lags = lag_times(tables, position_ages(ctx, tables))
    summaries = [_summary(g, None if conns is None else conns[g], stats[g], lags.get(g)) for g in groups]
    # 5.5 lite groups: not in the Java tool's list, nor in --health's windows; looked for only when
    # every broker answered (the view names a missing one, and the look would warn about it again)
    answered = all(isinstance(s, ConsumeStats) and not s.missing_brokers for s in stats.values())
    if ctx.output != "java" and not params.health and answered:
        summaries = sorted(summaries + _lite_summaries(ctx, groups, params.no_clients), key=lambda s: s.group)
    breaches = [
        b
        for s in summaries
        for b in breaches_of(s.group, s.diff_total, s.lag_time_ms, params.max_lag, params.max_lag_time_ms)
    ]
    everything = AllGroupsProgress(summaries, read_at_ms=ctx.now, clients=not params.no_clients)
    for s in stats.values():
        if isinstance(s, ConsumeStats):
            everything.missing_brokers.update(s.missing_brokers)
    if params.health:
        breaches += _groups_health(ctx, params, everything, stats, conns, queue_lags)
    _checked(ctx, everything, breaches, params.partial)
    return everything
