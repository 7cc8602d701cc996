"""queryOffset: per queue min/max offsets, a group's offset and lag, and where a time lands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    missing_brokers_failure,
    queue_bounds,
    read_group,
    route_of,
    silent_brokers,
)
from mqadmin.commands._engine import Engine, EngineParams, Work, check_spark, choose_engine
from mqadmin.commands._lite import LiteGroupUnsupported, lite_offsets, lite_topic_of
from mqadmin.commands._local_offsets import LocalOffsets
from mqadmin.commands._offset_search import Where, locate
from mqadmin.commands._options import (
    CONSUMER_GROUP,
    ENGINE,
    GROUP,
    LOCAL_STORE,
    SLICE_SIZE,
    SPARK_CONF,
    SPARK_MASTER,
    TIMESTAMP,
    TOPIC,
)
from mqadmin.commands._query_offset_result import (
    BulkQueryOffsetResult,
    QueryOffsetResult,
    QueueOffsetRow,
    time_field_of,
)

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue, OffsetWrapper
from mqadmin.protocol.constants import DEFAULT_TOPIC, DLQ_PREFIX, RETRY_PREFIX
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.replay import STORE_TIME, TIME_FIELDS_HELP

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.localstore import OffsetsFile
    from mqadmin.replay.search import TimeField

#: topics brokers make for themselves (RocketMQ's TopicValidator system set) and the prefixes of
#: per-group and system topics: --all-topics leaves them out unless they are named with -t
SYSTEM_TOPICS = frozenset(
    {
        DEFAULT_TOPIC,
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
    }
)
SYSTEM_PREFIXES = (RETRY_PREFIX, DLQ_PREFIX, "rmq_sys_", "RMQ_SYS_", "SYNC_BROKER_MEMBER_")


@dataclass(frozen=True)
class QueryOffsetParams(EngineParams):
    """queryOffset's options; what it cannot run is a usage error here, before any broker is asked."""

    topic: str | None
    all_topics: bool
    group: str | None
    timestamp: str | None
    time_field: str
    local_store: str | None
    partial: bool
    consumer_group: str | None

    def __post_init__(self) -> None:
        if not self.topics and not self.all_topics:
            # the words click used while -t was required: scripts and tests know this line
            raise errors.UsageError("Missing option '-t' / '--topic' / '--topicName'.")
        if self.search_field.scans and not self.timestamp:
            raise errors.UsageError(f"--time-field {self.search_field} needs -s: the time to compare it with")
        super().__post_init__()
        if self.local_store:
            if self.bulk:
                raise errors.UsageError("--local-store reads one topic's offsets: pass one -t and at most one -g")
            if self.engine == "spark":
                raise errors.UsageError("--local-store runs on the local engine only")
        if self.partial and (self.bulk or self.local_store):
            raise errors.UsageError("--partial takes one topic and at most one group, read from the brokers")

    @property
    def topics(self) -> list[str]:
        return _names(self.topic)

    @property
    def groups(self) -> list[str]:
        return _names(self.group)

    @property
    def search_field(self) -> TimeField:
        return time_field_of(self.time_field)

    @property
    def bulk(self) -> bool:
        """Several topics or groups: the result is a list of documents."""
        return self.all_topics or len(self.topics) > 1 or len(self.groups) > 1


@register
class QueryOffsetCommand(SubCommand):
    """Show each queue's min/max offset, a group's offset and lag, and where a time lands.

    Not in the Java mqadmin: it gathers what examineTopicStats, examineConsumeStats and
    searchOffset would tell separately, so you can see where a reset would land before you do it.

    Several topics (-t A,B,C, or --all-topics: every topic except %RETRY%, %DLQ% and system
    topics, which count only when named with -t) and several groups (-g G1,G2) are searched in
    one run. --all-topics with -g keeps, per group, the topics it has offsets on (and those named).

    --time-field says what -s is compared with:

    \b
      store          the broker's own time search (default): a 4.x broker
                     answers the message stored nearest the time, 5.x the
                     first stored at or after it
      born           the first message in queue order (from the min offset)
                     whose born time is >= the time; born times come from
                     producers' clocks and are not monotonic, so the queue is
                     read from its first message, not bisected
      property:NAME  the same with the user property NAME read as an integer
                     epoch ms; a message without it, or with a value that is
                     not an integer, never matches

    When no message matches, offset_at_time is the max offset; for property:NAME a warning names
    each queue whose last message lacks the property too (a misspelt or unset property). The local engine reads each queue
    in order and stops at the first match; --engine spark reads every slice of --slice-size
    messages at once (one partition each, each up to its own first match) and also distributes
    store-time searches; both engines give the same results.

    JSON with one topic and at most one group (and no --all-topics) is one document:

    \b
      {"topic", "group", "timestamp", "timestamp_iso", "time_field", "engine",
       "queues": [{"broker", "queue_id", "min_offset", "max_offset",
                   "consumer_offset", "lag", "offset_at_time",
                   "store_time_at_offset", "store_time_at_offset_iso",
                   "time_at_offset", "time_at_offset_iso"}]}

    time_at_offset is the --time-field's value at offset_at_time (for store, the store time).
    With several topics or groups, or --all-topics, the JSON is a list of exactly those documents, by topic (as named, then --all-topics
    sorted), then group (as named):

    \b
      {"timestamp", "timestamp_iso", "time_field", "engine", "results": [...]}
    """

    name = "queryOffset"
    options = (
        Opt("topic", TOPIC.flags, "Topic, or several: A,B,C", metavar="TOPIC", names="topic", several=True),
        Opt(
            "all_topics",
            ("--all-topics",),
            "Every topic but %RETRY%, %DLQ% and system topics (mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt("group", GROUP.flags, "Consumer group, or several: G1,G2", metavar="GROUP", names="group", several=True),
        TIMESTAMP,
        Opt(
            "time_field",
            ("--time-field",),
            f"What -s is compared with: {TIME_FIELDS_HELP} (see above; mqadmin extension)",
            default=STORE_TIME,
            metavar="FIELD",
        ),
        ENGINE,
        SPARK_MASTER,
        SPARK_CONF,
        SLICE_SIZE,
        CONSUMER_GROUP,
        LOCAL_STORE,
        Opt(
            "partial",
            ("--partial",),
            "When a broker of the topic does not answer, the others' queues are still shown and the missing "
            "broker named (on stderr, and under missing_brokers in JSON), then exit 1; --partial accepts such an "
            "answer (exit 0). One topic and at most one group (mqadmin extension)",
            kind=bool,
            default=False,
        ),
    )

    params_type = QueryOffsetParams

    def execute(self, ctx: Context, params: QueryOffsetParams) -> QueryOffsetResult | BulkQueryOffsetResult:
        topics, groups = params.topics, params.groups
        ts = ctx.time(params.timestamp) if params.timestamp else None
        time_field, slice_size, bulk = params.search_field, params.slice_size, params.bulk
        if params.engine == "spark" and ts is not None and not params.local_store:
            check_spark(ctx, params)
        if params.local_store:
            group = groups[0] if groups else None
            return self._local(ctx, Path(params.local_store), topics[0], group, ts, time_field, slice_size)
        admin = ctx.admin()
        missing: dict[str, str] = {}
        bounds: list[tuple[int, int]] | None = None
        is_lite = False
        if not bulk:
            topic, group = topics[0], groups[0] if groups else None
            queues = route_of(admin, topic).message_queues()
            try:
                try:
                    consumer = {group: group_offsets(admin, group, topic)} if group else {}
                except LiteGroupUnsupported:
                    # a 5.5 lite group: its lite topics' queues (%LMQ%$parent$lite) instead of the parent's
                    lite = lite_offsets(admin, group, topic) if group else None
                    if lite is None or group is None:
                        raise
                    queues, consumer, is_lite = list(lite), {group: lite}, True
                bounds = queue_bounds(admin, queues)
            except errors.ConnectError as exc:
                queues, consumer, bounds, missing = _live_brokers_only(admin, group, queues, exc)
            pairs: list[tuple[str, str | None]] = [(topic, group)]
        else:
            selected = _select_topics(ctx, admin, topics, params.all_topics)
            found = fan_out(lambda t: _route_or_none(ctx, admin, t, t in topics), selected)
            routes = dict(zip(selected, found, strict=True))
            selected = [t for t in selected if routes[t] is not None]
            by_group = {g: _group_rows(admin, g, set(selected)) for g in groups}
            pairs = _pairs(ctx, selected, groups, by_group, set(topics))
            needed = list(dict.fromkeys(t for t, _ in pairs))
            queues = [mq for t in needed for mq in routes[t] or []]
            consumer = by_group
        if bounds is None:
            bounds = queue_bounds(admin, queues)
        run = choose_engine(ctx, params, _work(ts, time_field, queues, bounds))
        inspected = pairs[0][1] if len(pairs) == 1 else None
        reader = read_group(admin, inspected, params.consumer_group, queues[0] if queues else None) if ts else None
        where = locate(admin, queues, bounds, ts, time_field, slice_size, run, ctx, reader)
        results = [
            self._result(ctx, t, g, ts, time_field, run.name, queues, where, consumer.get(g, {}) if g else {})
            for t, g in pairs
        ]
        if not bulk:
            results[0].lite = is_lite
            return _missing(ctx, results[0], missing, params.partial)
        return BulkQueryOffsetResult(ts, str(time_field), run.name, results, ctx.tz)

    def _result(
        self,
        ctx: Context,
        topic: str,
        group: str | None,
        ts: int | None,
        time_field: TimeField,
        engine: str,
        queues: Sequence[MessageQueue],
        where: dict[MessageQueue, Where],
        consumer: dict[MessageQueue, OffsetWrapper],
    ) -> QueryOffsetResult:
        rows = []
        for mq in queues:
            lite_topic = lite_topic_of(mq)
            if mq.topic != topic and lite_topic is None:
                continue
            w = where[mq]
            r = QueueOffsetRow(mq.broker_name, mq.queue_id, w.min_offset, w.max_offset, lite_topic=lite_topic)
            r.offset_at_time, r.store_time_at_offset, r.time_at_offset = w.offset, w.store_time, w.field_time
            wrapper = consumer.get(mq)
            if group and wrapper is not None and w.max_offset is not None:
                r.consumer_offset = wrapper.consumer_offset
                r.lag = max(w.max_offset - wrapper.consumer_offset, 0)
            rows.append(r)
        return QueryOffsetResult(topic, group, ts, rows, ctx.tz, time_field=str(time_field), engine=engine)

    def _local(
        self,
        ctx: Context,
        path: Path,
        topic: str,
        group: str | None,
        ts: int | None,
        time_field: TimeField,
        slice_size: int,
    ) -> QueryOffsetResult:
        """One row per client and queue, from the clients' offsets files; the broker (-n) adds
        min/max, lag, lag as time and where -s lands."""
        source = LocalOffsets.open(ctx, path, group, one_group=True)
        if ts is not None:
            source.need_broker("-s")
        admin, files = source.admin, source.files
        where: dict[MessageQueue, Where]
        if admin is not None:
            queues = route_of(admin, topic).message_queues()
            bounds = queue_bounds(admin, queues)
            where = locate(admin, queues, bounds, ts, time_field, slice_size, Engine(), ctx)
        else:
            queues = source.file_queues(topic)
            where = {mq: Where() for mq in queues}

        def row(f: OffsetsFile, mq: MessageQueue) -> QueueOffsetRow:
            w = where[mq]
            r = QueueOffsetRow(mq.broker_name, mq.queue_id, w.min_offset, w.max_offset, client=f.client)
            r.offset_at_time, r.store_time_at_offset, r.time_at_offset = w.offset, w.store_time, w.field_time
            r.consumer_offset = f.offsets.get(mq)
            if admin is not None and w.max_offset is not None and r.consumer_offset is not None:
                r.lag = max(w.max_offset - r.consumer_offset, 0)
                r.lag_time_ms = source.lag_time_ms(ctx, mq, r.consumer_offset, w.max_offset, w.min_offset)
            return r

        rows = [row(f, mq) for f in files for mq in queues]
        return QueryOffsetResult(
            topic, source.group, ts, rows, ctx.tz, local_files=files, time_field=str(time_field), engine="local"
        )


def _live_brokers_only(
    admin: Admin, group: str | None, queues: list[MessageQueue], cause: errors.ConnectError
) -> tuple[list[MessageQueue], dict[str, dict[MessageQueue, OffsetWrapper]], list[tuple[int, int]], dict[str, str]]:
    """After a broker did not answer: ask each broker of the topic once, and read the queues of
    those that answer one by one (their bounds, the group's offsets); (queues, the group's
    offsets, bounds, the brokers that did not answer -> why). When every broker answers, or none
    does, there is no partial answer to give: ``cause`` is raised."""
    missing = silent_brokers(admin, queues)
    if not missing or len(missing) == len({mq.broker_name for mq in queues}):
        raise cause
    live = [mq for mq in queues if mq.broker_name not in missing]
    bounds = queue_bounds(admin, live)
    consumer: dict[str, dict[MessageQueue, OffsetWrapper]] = {}
    if group:
        found = fan_out(lambda mq: admin.consumer_offset(group, mq), live)
        consumer[group] = {
            mq: OffsetWrapper(hi, off, 0)
            for mq, off, (_, hi) in zip(live, found, bounds, strict=True)
            if off is not None
        }
    return live, consumer, bounds, missing


def _missing(ctx: Context, result: QueryOffsetResult, missing: dict[str, str], partial: bool) -> QueryOffsetResult:
    """Name the brokers that did not answer: one line on stderr; exit 1 unless --partial."""
    result.missing_brokers = missing
    result.failure = missing_brokers_failure(ctx, missing, partial)
    return result


def _work(
    ts: int | None, time_field: TimeField, queues: Sequence[MessageQueue], bounds: Sequence[tuple[int, int]]
) -> Work:
    """The search as the engine choice weighs it: a scan reads up to every message of the queues;
    the broker answers a store-time search itself, so auto keeps that local."""
    total = sum(max(hi - lo, 0) for lo, hi in bounds)
    return Work(
        total,
        "scan",
        f"a scan of up to {total} messages in {len(queues)} queue(s)",
        nothing_to_run="without -s there is nothing to search" if ts is None else None,
        stays_local=None if time_field.scans else "the broker answers a store-time search in one call per queue",
    )


def _names(text: str | None) -> list[str]:
    """A comma-separated -t/-g value, in order, without blanks or repeats (names have no commas)."""
    return list(dict.fromkeys(p.strip() for p in (text or "").split(",") if p.strip()))


def is_system_topic(topic: str, broker_names: set[str]) -> bool:
    """Per-group and system topics, and the topics named after each cluster and broker that a
    4.x broker registers for itself."""
    return topic in SYSTEM_TOPICS or topic in broker_names or topic.startswith(SYSTEM_PREFIXES)


def _select_topics(ctx: Context, admin: Admin, named: list[str], all_topics: bool) -> list[str]:
    """The named topics in order, then (--all-topics) every other user topic, sorted."""
    if not all_topics:
        return named
    try:
        brokers = admin.cluster_brokers()
        own = {b.broker_name for b in brokers} | {b.cluster for b in brokers}
    except errors.MqadminError as exc:
        ctx.env.warn(f"could not read the cluster's broker names, so topics named after them are listed: {exc}")
        own = set()
    rest = sorted(t for t in admin.list_topics() if t not in named and not is_system_topic(t, own))
    return named + rest


def _route_or_none(ctx: Context, admin: Admin, topic: str, named: bool) -> list[MessageQueue] | None:
    """A named topic must exist; one the name server listed may be gone by now (skipped, said)."""
    if named:
        return route_of(admin, topic).message_queues()
    try:
        return admin.topic_route(topic).message_queues()
    except errors.TopicNotExist:
        ctx.env.warn(f"topic {topic} is listed by the name server but has no route: skipped")
        return None


def _group_rows(admin: Admin, group: str, topics: set[str]) -> dict[MessageQueue, OffsetWrapper]:
    """The group's offsets on the selected topics, from one consume-stats call; a group with none
    there is unknown (a usage error), as with one topic."""
    rows = group_offsets(admin, group)
    mine = {mq: w for mq, w in rows.items() if mq.topic in topics}
    if not mine:
        theirs = sorted({mq.topic for mq in rows})
        raise errors.UsageError(
            f"consumer group {group!r} has no offsets on the selected topics; it has offsets on: {', '.join(theirs)}"
        )
    return mine


def _pairs(
    ctx: Context,
    topics: list[str],
    groups: list[str],
    by_group: dict[str, dict[MessageQueue, OffsetWrapper]],
    named: set[str],
) -> list[tuple[str, str | None]]:
    """(topic, group) documents to print: each named topic with each group; under --all-topics
    the other topics only with the groups that have offsets on them."""
    if not groups:
        return [(t, None) for t in topics]
    out: list[tuple[str, str | None]] = []
    for t in topics:
        for g in groups:
            has = any(mq.topic == t for mq in by_group[g])
            if has or t in named:
                out.append((t, g))
            if not has and t in named:
                ctx.env.warn(f"group {g} has no offsets on topic {t}: its consumer offsets and lag are null")
    return out
