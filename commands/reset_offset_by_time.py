"""resetOffsetByTime: move a group's offsets on a topic to a point in time (or to an offset)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from mqadmin.commands._broker_offsets import BrokerOffsets
from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    refuse_offline_write,
    route_of,
)
from mqadmin.commands._landing import check_landing, require_offline
from mqadmin.commands._lite import LiteGroupUnsupported, lite_offsets
from mqadmin.commands._local_offsets import LocalOffsets
from mqadmin.commands._options import (
    BACKUP,
    DRY_RUN,
    GROUP,
    LOCAL_STORE,
    REASON,
    TIMESTAMP,
    TOPIC,
    WHILE_RUNNING,
    YES,
    parse_bool,
    parse_now,
    required,
)
from mqadmin.commands._plan import PlanRow, ResetResult
from mqadmin.commands._reset import EXPORT, FORCE_STALE, NO_WAIT, current_rows, run_plan
from mqadmin.commands._reset_path import PARTIAL

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue, TopicRoute
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin


KAFKA_FLAGS = {"to_earliest": "--to-earliest", "to_latest": "--to-latest", "shift_by": "--shift-by"} | {
    "to_offset": "--to-offset"
}

#: -s values the Java tool passes to the broker as they are, which are no times to mqadmin
#: (ResetOffsetByTimeCommand: "now" and a number are sent as is; the broker reads -1 as the max
#: offset and searches any other number as a time, so 0 finds each queue's first message)
JAVA_TIMESTAMPS = {
    "0": "is the Java tool's way to say each queue's earliest message (the broker searches time 0): "
    "mqadmin says --to-earliest",
    "-1": "is the Java tool's way to say each queue's max offset (the broker reads -1 so): "
    "mqadmin says --to-latest (or -s now)",
}

#: options that take one topic only (a plan over several topics has no single queue or file)
ONE_TOPIC = (("offset", "-o"), ("local_store", "--local-store"), ("exact", "--exact"))


def _given(value: object) -> bool:
    """Whether an option was given: a flag that is set, or any value, 0 included (``0 in (None,
    False)`` is true in Python, which once made --to-offset 0 and --shift-by 0 vanish)."""
    return value is not None and value is not False


@dataclass(frozen=True)
class ResetOffsetByTimeParams:
    """resetOffsetByTime's options (the defaults are the Opt declarations'); the rules between
    them are checked here, before any broker is asked: which topics, which target, which queue."""

    group: str
    topic: str | None
    all_topics: bool
    include_retry: bool
    timestamp: str | None
    force: str
    broker: str | None
    queue: int | None
    offset: int | None
    cplus: bool
    exact: bool
    to_earliest: bool
    to_latest: bool
    shift_by: int | None
    to_offset: int | None
    no_wait: bool
    force_stale: bool
    partial: bool
    export: str | None
    dry_run: bool
    yes: bool
    backup: str | None
    local_store: str | None
    while_running: bool

    def __post_init__(self) -> None:
        parse_now(self, "named_topics", "forced")  # -t's and -f's rules
        self._check_target()
        if self.queue is not None and self.broker is None:
            raise errors.UsageError("-q/--queue needs -b/--broker")
        if self.offset is not None and self.queue is None:
            raise errors.UsageError("-o/--offset needs -b/--broker and -q/--queue")
        if not self.all_topics:
            self.check_one_topic(self.named_topics)
        if self.local_store and self.export:
            raise errors.UsageError("--export writes a broker plan: not with --local-store")
        java = JAVA_TIMESTAMPS.get((self.timestamp or "").strip())
        if java:
            raise errors.UsageError(f"-s {(self.timestamp or '').strip()} {java}")

    @cached_property
    def forced(self) -> bool:
        """-f as a boolean (true or false only)."""
        return parse_bool(self.force, "-f/--force")

    @cached_property
    def named_topics(self) -> list[str]:
        """-t's topics in order; empty with --all-topics (the brokers say which)."""
        given = self.topic
        if self.include_retry and not self.all_topics:
            raise errors.UsageError("--include-retry goes with --all-topics (or name the %RETRY% topic with -t)")
        if self.all_topics:
            if given:
                raise errors.UsageError("-t and --all-topics both choose the topics: give one")
            if self.local_store:
                raise errors.UsageError(
                    "--all-topics reads the group's topics from the brokers: not with --local-store"
                )
            return []
        if not given:
            raise errors.UsageError("missing -t/--topic (or --all-topics)")
        topics = [t.strip() for t in str(given).split(",")]
        if any(not t for t in topics) or len(set(topics)) != len(topics):
            raise errors.UsageError(f"-t {given!r}: topics are named once each, separated by commas")
        return topics

    def check_one_topic(self, topics: list[str]) -> None:
        """-o, --local-store and --exact take one topic (with --all-topics: once the brokers said which)."""
        if len(topics) > 1:
            for dest, flag in ONE_TOPIC:
                if _given(getattr(self, dest)):
                    raise errors.UsageError(f"{flag} takes one topic, not {len(topics)} ({','.join(topics)})")

    @property
    def kafka(self) -> tuple[str, int | None] | None:
        """The kafka-style target given (flag, N), None without one."""
        given = [(flag, getattr(self, dest)) for dest, flag in KAFKA_FLAGS.items() if _given(getattr(self, dest))]
        if not given:
            return None
        flag, value = given[0]
        return flag, (int(value) if isinstance(value, int) and not isinstance(value, bool) else None)

    def _check_target(self) -> None:
        """One target: -s, -b -q -o, or one kafka-style flag (never mixed with -s/-o)."""
        given = [flag for dest, flag in KAFKA_FLAGS.items() if _given(getattr(self, dest))]
        if len(given) > 1:
            raise errors.UsageError(f"{given[0]} and {given[1]} both choose the target: give one")
        if given:
            for dest, letter in (("timestamp", "-s"),) + ONE_TOPIC:
                if _given(getattr(self, dest)):
                    raise errors.UsageError(f"{given[0]} chooses the target itself: drop {letter}")
        elif self.timestamp is None and self.offset is None:
            raise errors.UsageError(
                "missing -s/--timestamp (or -b -q -o for one queue, or --to-earliest/--to-latest/--shift-by/--to-offset)"
            )


@register
class ResetOffsetByTimeCommand(SubCommand):
    """Reset a consumer group's offsets on a topic to a point in time.

    Options and meaning follow the Java mqadmin (-g -t -s, -f force, and the 5.x per-queue
    form -b -q -o). mqadmin adds: the plan shown first (--dry-run shows only that), a backup
    of the current offsets before anything moves (restore with restoreOffset), a read-back
    check after, and a confirmation on a terminal (--yes skips it; scripts are never asked;
    declining exits 4, nothing changed). It uses the broker-side reset when the broker can
    apply it and falls back to direct offset updates when no consumer is online, saying which
    per broker. After the apply (and after any failure part-way) every planned queue is read
    back and reported as applied, unchanged, or unknown when its broker cannot be reached.

    A dry run prints the absolute time; pass it to -s (epoch ms) to apply exactly that plan.
    Durability: a broker writes consumer offsets to disk every flushConsumerOffsetInterval
    (5 s by default), so a broker crash within that window after the apply (the result records
    when it finished) loses the change; the mock server persists them before acknowledging.
    """

    name = "resetOffsetByTime"
    extra_formats = ("java",)
    options = (
        required(GROUP),
        Opt(
            "topic",
            TOPIC.flags,
            "Topic; several as A,B (mqadmin extension: planned, backed up and undone together)",
            metavar="TOPIC",
            names="topic",
            several=True,
        ),
        Opt(
            "all_topics",
            ("--all-topics",),
            "Every topic the group has offsets for, instead of -t (%RETRY% topics only with --include-retry; "
            "mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "include_retry",
            ("--include-retry",),
            "With --all-topics, the group's %RETRY% topic too (mqadmin extension)",
            kind=bool,
            default=False,
        ),
        TIMESTAMP,
        Opt(
            "force",
            ("-f", "--force"),
            "true (default): move offsets either way; false: only move them back, on every broker version "
            "(the Java tool's -f false moves queues forward too on 5.2+ brokers, which ignore the flag); "
            "only true and false are accepted (the Java tool reads anything but true as false)",
            default="true",
            metavar="true|false",
        ),
        Opt("broker", ("-b", "--broker"), "Only this broker (name or address); with -q/-o one queue", metavar="BROKER"),
        Opt("queue", ("-q", "--queue"), "Queue id on the broker given with -b", kind=int, metavar="QID"),
        Opt("offset", ("-o", "--offset"), "Explicit offset for the queue given with -b and -q", kind=int),
        Opt(
            "cplus",
            ("-c", "--cplus"),
            "Send the reset as a C++ client would, so online C++ consumers can apply it (mqadmin does this "
            "by itself when it sees a C++ consumer online)",
            kind=bool,
            default=False,
        ),
        Opt(
            "exact",
            ("--exact",),
            "A 4.x (and 5.0-5.1.0) broker's time search picks the nearest message, which may be stored "
            "before the time; the plan marks such queues, and --exact moves them to the first message at or "
            "after the time (written directly, so the group's consumers must be offline; mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "to_earliest",
            ("--to-earliest",),
            "Every selected queue to its min offset (kafka-consumer-groups --to-earliest; mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "to_latest",
            ("--to-latest",),
            "Every selected queue to its max offset (kafka-consumer-groups --to-latest, the Java tool's "
            "skipAccumulatedMessage; mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "shift_by",
            ("--shift-by",),
            "Move every selected queue N messages from its current offset; negative rewinds; kept inside the "
            "queue's [min, max], and the plan says which queues were (kafka-consumer-groups --shift-by; mqadmin "
            "extension)",
            kind=int,
            metavar="N",
        ),
        Opt(
            "to_offset",
            ("--to-offset",),
            "Every selected queue to offset N, kept inside each queue's [min, max] (kafka-consumer-groups "
            "--to-offset; -b -q -o is the Java tool's one-queue form; mqadmin extension)",
            kind=int,
            metavar="N",
        ),
        NO_WAIT,
        FORCE_STALE,
        PARTIAL,
        EXPORT,
        DRY_RUN,
        YES,
        BACKUP,
        REASON,
        LOCAL_STORE,
        WHILE_RUNNING,
    )

    params_type = ResetOffsetByTimeParams

    def execute(self, ctx: Context, params: ResetOffsetByTimeParams) -> ResetResult:
        group: str = params.group
        topics = _topics(ctx, params, group)
        force = params.forced
        kafka = params.kafka
        if kafka is not None:
            return _kafka(ctx, params, group, topics, force, kafka)
        ts = ctx.time(params.timestamp) if params.timestamp is not None else None
        if ts is not None and ts > ctx.now:
            ctx.env.warn(f"{format_time(ts, ctx.tz)} is in the future: every queue lands on its max offset")
        if params.local_store:
            return _local(ctx, params, group, topics[0], ts, force)
        if not params.dry_run and not params.export:
            refuse_offline_write(ctx, "resetOffsetByTime")
        return _on_brokers(ctx, params, group, topics, ts, force)


def _on_brokers(
    ctx: Context, params: ResetOffsetByTimeParams, group: str, topics: list[str], ts: int | None, force: bool
) -> ResetResult:
    """-s (each queue where the time lands) or -b -q -o (one queue, one offset) on the brokers."""
    topic = ",".join(topics)
    offset_opt = params.offset
    admin = ctx.admin()
    rows = _current(admin, group, topics, params.broker, params.queue)
    if offset_opt is not None:
        row = rows[0]
        assert row.min_offset is not None and row.max_offset is not None  # rows from a broker have both
        if not row.min_offset <= offset_opt <= row.max_offset:
            raise errors.UsageError(
                f"-o {offset_opt} is outside queue {row.queue_id} of {row.broker}: [{row.min_offset}, {row.max_offset}]"
            )

    def target(r: PlanRow) -> int:
        if offset_opt is not None:
            return int(offset_opt)
        assert ts is not None
        if ts >= ctx.now and r.max_offset is not None:
            return r.max_offset
        return int(admin.search_offset(MessageQueue(r.topic, r.broker, r.queue_id), ts))

    targets = fan_out(target, rows)
    adjusted = False
    if ts is not None and offset_opt is None and ts < ctx.now:
        adjusted = check_landing(admin, topic, rows, targets, ts, params.exact, ctx.env.warn)
    for r, new in zip(rows, targets, strict=True):
        old = new if r.old_offset is None else r.old_offset
        r.target = new
        r.new_offset = new if force or new < old else old
    if adjusted and not params.dry_run and not params.export:
        require_offline(admin, group)
    # -o decides the offset: a time given beside it decides nothing, so it is not echoed.
    result = ResetResult(
        group,
        topic,
        ts if offset_opt is None else None,
        params.dry_run,
        rows,
        tz=ctx.tz,
        force=force,
        timestamp_text=params.timestamp,
    )
    # The broker reads -1 as "max offset"; "now" and future times mean exactly that.
    source = BrokerOffsets(
        reset_ts=None if ts is None else (-1 if ts >= ctx.now else ts),
        force=force,
        explicit=offset_opt is not None or adjusted,
        cplus=True if params.cplus else None,
        no_wait=params.no_wait,
        partial=params.partial,
    )
    return run_plan(
        ctx, result, source, backup_path=params.backup, export=params.export, force_stale=params.force_stale
    )


def _topics(ctx: Context, params: ResetOffsetByTimeParams, group: str) -> list[str]:
    """-t's topics, or (--all-topics) the topics the group has offsets for."""
    if not params.all_topics:
        return params.named_topics
    admin = ctx.admin()
    found = sorted({mq.topic for mq in group_offsets(admin, group)})
    found = [t for t in found if params.include_retry or not t.startswith(RETRY_PREFIX)]
    if not found:
        raise errors.UsageError(f"group {group!r} has offsets only on its %RETRY% topic: --include-retry adds it")
    params.check_one_topic(found)
    return found


def _current(admin: Admin, group: str, topics: list[str], broker: str | None, queue: int | None) -> list[PlanRow]:
    """The selected queues of every topic with the group's offsets now (one plan for them all)."""
    queues = [mq for t in topics for mq in _select(route_of(admin, t), broker, queue)]
    try:
        current = {mq: w.consumer_offset for t in topics for mq, w in group_offsets(admin, group, t).items()}
    except LiteGroupUnsupported:
        # a 5.5 lite group, -t its parent: the plan is its lite topics' queues (%LMQ%$parent$lite)
        lite = lite_offsets(admin, group, topics[0]) if len(topics) == 1 else None
        if lite is None:
            raise
        if broker is not None:
            raise LiteGroupUnsupported(
                f"-b/-q pick a queue of topic {topics[0]}, but {group!r} is a lite group, whose queues are its lite "
                f"topics: drop them (resetOffsetByTime -t {topics[0]} -g {group} plans every lite topic); "
                "nothing was changed"
            ) from None
        queues, current = list(lite), {mq: w.consumer_offset for mq, w in lite.items()}
    return current_rows(admin, queues, current)


def _kafka(
    ctx: Context,
    params: ResetOffsetByTimeParams,
    group: str,
    topics: list[str],
    force: bool,
    kafka: tuple[str, int | None],
) -> ResetResult:
    """--to-earliest / --to-latest / --shift-by N / --to-offset N on every selected queue: exact
    targets, planned, backed up and applied like any reset (a restore's path: written per queue)."""
    flag, n = kafka
    if not params.dry_run and not params.export:
        refuse_offline_write(ctx, "resetOffsetByTime")
    admin = ctx.admin()
    rows = _current(admin, group, topics, params.broker, params.queue)
    clamped = []
    for r in rows:
        lo, hi, old = r.min_offset or 0, r.max_offset or 0, r.old_offset or 0
        want = {"--to-earliest": lo, "--to-latest": hi, "--shift-by": old + (n or 0), "--to-offset": n or 0}[flag]
        new = min(max(want, lo), hi)
        if new != want:
            where = f"{r.topic} " if len(topics) > 1 else ""
            clamped.append(f"{where}{r.broker} queue {r.queue_id}: {want} -> {new}")
        r.target = new
        r.new_offset = new if force or new < old else old
    shown = flag if n is None else f"{flag} {n}"
    result = ResetResult(
        group,
        ",".join(topics),
        None,
        params.dry_run,
        rows,
        tz=ctx.tz,
        force=force,
        notes=[f"Target: {shown}"],
    )
    if clamped:
        line = f"{len(clamped)} queue(s) kept inside their [min, max]: {'; '.join(clamped)}"
        result.notes.append(line)
        ctx.env.warn(line)
    source = BrokerOffsets(force=force, no_wait=params.no_wait, partial=params.partial)
    return run_plan(
        ctx, result, source, backup_path=params.backup, export=params.export, force_stale=params.force_stale
    )


def _select(route: TopicRoute, broker: str | None, queue: int | None) -> list[MessageQueue]:
    queues = route.message_queues()
    if broker is None:
        return queues
    names = {b.broker_name for b in route.brokers if broker == b.broker_name or broker in b.addrs.values()}
    if not names:
        known = ", ".join(sorted(b.broker_name for b in route.brokers))
        raise errors.UsageError(f"broker {broker!r} does not serve topic {route.topic} (brokers: {known})")
    queues = [mq for mq in queues if mq.broker_name in names]
    if queue is not None:
        picked = [mq for mq in queues if mq.queue_id == queue]
        if not picked:
            ids = sorted({mq.queue_id for mq in queues})
            raise errors.UsageError(
                f"queue {queue} does not exist on {', '.join(sorted(names))} (queues {ids[0]}-{ids[-1]})"
            )
        queues = picked
    return queues


def _local(
    ctx: Context, params: ResetOffsetByTimeParams, group: str, topic: str, ts: int | None, force: bool
) -> ResetResult:
    """Reset the offsets in broadcast clients' files: the broker (-n) only answers min/max and
    the time search; each client's file is rewritten the client's way."""
    source = LocalOffsets.open(ctx, str(params.local_store), group)
    if ts is not None:
        source.need_broker("-s")
    broker_opt, queue_opt, offset_opt = params.broker, params.queue, params.offset
    if source.admin is not None:
        queues = _select(route_of(source.admin, topic), broker_opt, queue_opt)
    else:
        queues = source.file_queues(topic)
        if broker_opt is not None:
            queues = [mq for mq in queues if mq.broker_name == broker_opt]
            if queue_opt is not None:
                queues = [MessageQueue(topic, broker_opt, int(queue_opt))]
        if not queues:
            raise errors.UsageError(f"the offsets files under {source.path} have no queue of topic {topic!r}")
    if not params.dry_run:
        source.check_stopped(ctx, group, params.while_running)
        broken = [f for f in source.files if f.broken]
        if broken:
            ctx.env.warn(
                "rewriting files the client cannot load: " + ", ".join(f"{f.client} ({f.path})" for f in broken)
            )
    rows = _local_rows(ctx, source, queues, ts, offset_opt, force)
    result = ResetResult(group, topic, ts, params.dry_run, rows, tz=ctx.tz)
    return run_plan(ctx, result, source, backup_path=params.backup, force_stale=params.force_stale)


def _local_rows(
    ctx: Context, source: LocalOffsets, queues: list[MessageQueue], ts: int | None, offset: int | None, force: bool
) -> list[PlanRow]:
    """One row per client and queue: the queue's bounds and target from the broker (-n), the
    old offset from the client's file; without -n, -o is the target as given."""
    admin = source.admin

    def bounds(mq: MessageQueue) -> tuple[int | None, int | None, int | None]:
        if admin is None:
            return None, None, None
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        if offset is not None:
            if not lo <= offset <= hi:
                raise errors.UsageError(f"-o {offset} is outside queue {mq.queue_id} of {mq.broker_name}: [{lo}, {hi}]")
            return lo, hi, int(offset)
        assert ts is not None
        return lo, hi, (hi if ts >= ctx.now else int(admin.search_offset(mq, ts)))

    targets = dict(zip(queues, fan_out(bounds, queues), strict=True))
    rows = []
    for f in source.files:
        for mq in queues:
            lo, hi, new = targets[mq]
            if new is None:
                new = int(offset) if offset is not None else 0
            old = f.offsets.get(mq)
            if not force and old is not None and new > old:
                new = old
            rows.append(PlanRow(mq.broker_name, mq.queue_id, lo, hi, old, new, client=f.client))
    return rows
