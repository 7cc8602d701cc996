"""queryOffset: per queue min/max offsets, a group's offset and lag, and where a time lands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    has_broker,
    local_notes,
    open_admin,
    queue_bounds,
    route_of,
    store_time_at,
    time_fields,
)
from mqadmin.commands._options import (
    ENGINE,
    GROUP,
    LOCAL_STORE,
    SLICE_SIZE,
    SPARK_CONF,
    SPARK_MASTER,
    TIMESTAMP,
    TOPIC,
    require_spark,
    spark_conf,
    spark_unavailable,
)

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue, OffsetWrapper
from mqadmin.output import Table
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.replay import DEFAULT_SLICE_SIZE, STORE_TIME, TIME_FIELDS_HELP
from mqadmin.timeparse import format_duration, format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.localstore import OffsetsFile
    from mqadmin.replay.search import TimeField

#: topics brokers make for themselves (RocketMQ's TopicValidator system set) and the prefixes of
#: per-group and system topics: --all-topics leaves them out unless they are named with -t
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
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
SYSTEM_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_", "SYNC_BROKER_MEMBER_")


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


@dataclass
class QueryOffsetResult:
    topic: str
    group: str | None
    timestamp: int | None
    queues: list[QueueOffsetRow] = field(default_factory=list)
    tz: tzinfo | None = None
    #: the local offsets files read (--local-store), None for the broker's offsets
    local_files: list[OffsetsFile] | None = None
    time_field: str = STORE_TIME
    engine: str = "local"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "topic": self.topic,
            "group": self.group,
            **time_fields("timestamp", self.timestamp, self.tz),
            "time_field": self.time_field,
            "engine": self.engine,
            "queues": [self._row_json(q) for q in self.queues],
        }
        if self.local_files is not None:
            doc["local_store"] = [f.to_json() for f in self.local_files]
        return doc

    def _row_json(self, q: QueueOffsetRow) -> dict[str, Any]:
        row: dict[str, Any] = {"client": q.client} if self.local_files is not None else {}
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
        return _time_field(self.time_field)

    def columns(self) -> list[str]:
        local = self.local_files is not None
        columns = (["Client"] if local else []) + ["Broker", "QID", "Min Offset", "Max Offset"]
        if self.group:
            columns += ["Consumer Offset", "Lag"] + (["Lag Time"] if local else [])
        if self.timestamp is not None:
            columns += ["Offset At Time", "Store Time At Offset"]
            if self._field.scans:
                columns.append(f"{self._field.label} At Offset")
        return columns

    def cells(self, q: QueueOffsetRow) -> list[Any]:
        local = self.local_files is not None
        row: list[Any] = ([q.client] if local else []) + [q.broker, q.queue_id, q.min_offset, q.max_offset]
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
        title = f"Topic {self.topic}" + (f", group {self.group}" if self.group else "")
        if local:
            title += " (local offsets)"
        return Table(self.columns(), [self.cells(q) for q in self.queues], title=title, footer=footer)


@dataclass
class BulkQueryOffsetResult:
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
            footer.append(_time_line(self.timestamp, _time_field(self.time_field), self.tz))
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


@dataclass(frozen=True)
class _Where:
    """Where the time lands on one queue: bounds, the offset, and the times of the message there."""

    min_offset: int | None = None
    max_offset: int | None = None
    offset: int | None = None
    store_time: int | None = None
    field_time: int | None = None


@dataclass(frozen=True)
class _Engine:
    """Where the searches run and with what; ``address`` is what Spark executors connect to."""

    name: str = "local"
    address: str = ""
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)


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
        LOCAL_STORE,
    )

    def execute(self, ctx: Context, **params: Any) -> QueryOffsetResult | BulkQueryOffsetResult:
        topics, groups = _names(params.get("topic")), _names(params.get("group"))
        all_topics = bool(params.get("all_topics"))
        if not topics and not all_topics:
            # the words click used while -t was required: scripts and tests know this line
            raise errors.UsageError("Missing option '-t' / '--topic' / '--topicName'.")
        ts = ctx.time(params["timestamp"]) if params.get("timestamp") else None
        time_field = _time_field(params.get("time_field") or STORE_TIME)
        if time_field.scans and ts is None:
            raise errors.UsageError(f"--time-field {time_field} needs -s: the time to compare it with")
        slice_size = int(params["slice_size"] if params.get("slice_size") is not None else DEFAULT_SLICE_SIZE)
        if slice_size < 1:
            raise errors.UsageError("--slice-size must be at least 1")
        engine: str = params.get("engine") or "local"
        conf = spark_conf(params.get("spark_conf"))
        bulk = all_topics or len(topics) > 1 or len(groups) > 1
        if engine == "spark" and ts is not None and not params.get("local_store"):
            from mqadmin.admin import resolve_address

            # before any broker work: without pyspark or Java this is one line and exit 2
            require_spark(resolve_address(ctx.address), params.get("spark_master") or "local[*]")
        if params.get("local_store"):
            if bulk:
                raise errors.UsageError("--local-store reads one topic's offsets: pass one -t and at most one -g")
            if engine == "spark":
                raise errors.UsageError("--local-store runs on the local engine only")
            group = groups[0] if groups else None
            return self._local(ctx, Path(params["local_store"]), topics[0], group, ts, time_field, slice_size)
        admin = open_admin(ctx)
        if not bulk:
            topic, group = topics[0], groups[0] if groups else None
            queues = route_of(admin, topic).message_queues()
            consumer = {group: group_offsets(admin, group, topic)} if group else {}
            pairs: list[tuple[str, str | None]] = [(topic, group)]
        else:
            selected = _select_topics(ctx, admin, topics, all_topics)
            found = fan_out(lambda t: _route_or_none(ctx, admin, t, t in topics), selected)
            routes = dict(zip(selected, found, strict=True))
            selected = [t for t in selected if routes[t] is not None]
            by_group = {g: _group_rows(admin, g, set(selected)) for g in groups}
            pairs = _pairs(ctx, selected, groups, by_group, set(topics))
            needed = list(dict.fromkeys(t for t, _ in pairs))
            queues = [mq for t in needed for mq in routes[t] or []]
            consumer = by_group
        bounds = queue_bounds(admin, queues)
        run = self._engine(ctx, engine, ts, time_field, queues, bounds, params, conf)
        where = _locate(admin, queues, bounds, ts, time_field, slice_size, run, ctx)
        results = [
            self._result(ctx, t, g, ts, time_field, run.name, queues, where, consumer.get(g, {}) if g else {})
            for t, g in pairs
        ]
        if not bulk:
            return results[0]
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
        where: dict[MessageQueue, _Where],
        consumer: dict[MessageQueue, OffsetWrapper],
    ) -> QueryOffsetResult:
        rows = []
        for mq in queues:
            if mq.topic != topic:
                continue
            w = where[mq]
            r = QueueOffsetRow(mq.broker_name, mq.queue_id, w.min_offset, w.max_offset)
            r.offset_at_time, r.store_time_at_offset, r.time_at_offset = w.offset, w.store_time, w.field_time
            wrapper = consumer.get(mq)
            if group and wrapper is not None and w.max_offset is not None:
                r.consumer_offset = wrapper.consumer_offset
                r.lag = max(w.max_offset - wrapper.consumer_offset, 0)
            rows.append(r)
        return QueryOffsetResult(topic, group, ts, rows, ctx.tz, time_field=str(time_field), engine=engine)

    def _engine(
        self,
        ctx: Context,
        engine: str,
        ts: int | None,
        time_field: TimeField,
        queues: Sequence[MessageQueue],
        bounds: Sequence[tuple[int, int]],
        params: dict[str, Any],
        conf: dict[str, str],
    ) -> _Engine:
        """--engine spark must be able to run (else one line, exit 2); auto picks Spark only for
        a scan big enough to pay for a JVM, and says why it chose what it chose."""
        from mqadmin.admin import resolve_address

        if engine == "local":
            return _Engine()
        master = params.get("spark_master") or "local[*]"
        address = resolve_address(ctx.address)
        if ts is None:
            ctx.env.note(f"engine {engine}: local, because without -s there is nothing to search")
            return _Engine()
        if engine == "spark":  # execute() checked that it can run
            return _Engine("spark", address, master, conf)
        from mqadmin.commands.range_replay import SPARK_AUTO_THRESHOLD, SPARK_MIN_LOCAL_CORES

        total = sum(max(hi - lo, 0) for lo, hi in bounds)
        why: str | None = None
        if not time_field.scans:
            why = "the broker answers a store-time search in one call per queue"
        elif total < SPARK_AUTO_THRESHOLD:
            why = f"the scan ({total} messages) is below the Spark threshold of {SPARK_AUTO_THRESHOLD}"
        elif reason := spark_unavailable():
            why = reason
        else:
            from mqadmin.spark import local_cores

            cores = local_cores(master)
            if cores is not None and cores < SPARK_MIN_LOCAL_CORES:
                why = f"Spark {master} has {cores} core(s); it beats the local engine only from {SPARK_MIN_LOCAL_CORES}"
        if why is not None:
            ctx.env.note(f"engine auto: local, because {why}")
            return _Engine()
        require_spark(address, master)
        ctx.env.note(f"engine auto: spark ({master}), for a scan of up to {total} messages in {len(queues)} queue(s)")
        return _Engine("spark", address, master, conf)

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
        from mqadmin.localstore import find_offset_files

        files = find_offset_files(path, group)
        groups = sorted({f.group for f in files})
        if group is None and len(groups) > 1:
            raise errors.UsageError(f"{path} holds offsets of several groups ({', '.join(groups)}): pass -g")
        group = groups[0]
        local_notes(ctx, files)
        admin: Admin | None = open_admin(ctx) if has_broker(ctx) else None
        if ts is not None and admin is None:
            raise errors.UsageError("-s needs -n: the time search comes from the broker (or store:///its/store)")
        where: dict[MessageQueue, _Where]
        if admin is not None:
            queues = route_of(admin, topic).message_queues()
            bounds = queue_bounds(admin, queues)
            where = _locate(admin, queues, bounds, ts, time_field, slice_size, _Engine(), ctx)
        else:
            queues = sorted({mq for f in files for mq in f.offsets if mq.topic == topic})
            where = {mq: _Where() for mq in queues}
        oldest: dict[tuple[MessageQueue, int], int | None] = {}

        def row(item: tuple[OffsetsFile, MessageQueue]) -> QueueOffsetRow:
            f, mq = item
            w = where[mq]
            lo, hi = w.min_offset, w.max_offset
            r = QueueOffsetRow(mq.broker_name, mq.queue_id, lo, hi, client=f.client)
            r.offset_at_time, r.store_time_at_offset, r.time_at_offset = w.offset, w.store_time, w.field_time
            r.consumer_offset = f.offsets.get(mq)
            if admin is not None and hi is not None and r.consumer_offset is not None:
                r.lag = max(hi - r.consumer_offset, 0)
                r.lag_time_ms = 0
                if r.lag:
                    key = (mq, max(r.consumer_offset, lo or 0))
                    if key not in oldest:
                        oldest[key] = store_time_at(admin, mq, key[1])
                    t = oldest[key]
                    r.lag_time_ms = max(ctx.now - t, 0) if t else None
            return r

        rows = [row((f, mq)) for f in files for mq in queues]
        return QueryOffsetResult(
            topic, group, ts, rows, ctx.tz, local_files=files, time_field=str(time_field), engine="local"
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


def _locate(
    admin: Admin,
    queues: Sequence[MessageQueue],
    bounds: Sequence[tuple[int, int]],
    ts: int | None,
    time_field: TimeField,
    slice_size: int,
    run: _Engine,
    ctx: Context,
) -> dict[MessageQueue, _Where]:
    """Where ``ts`` lands on every queue, by the broker's store-time search or by a scan, on the
    local threads or on Spark; both engines give the same answer."""
    if ts is None:
        return {mq: _Where(lo, hi) for mq, (lo, hi) in zip(queues, bounds, strict=True)}
    if not time_field.scans:
        if run.name == "spark":
            from mqadmin.spark.engine import search_offsets

            queries = [(mq.topic, mq.broker_name, mq.queue_id, ts) for mq in queues]
            offsets = search_offsets(run.address, queries, master=run.master, conf=run.conf, note=ctx.env.note)
        else:
            offsets = fan_out(lambda mq: admin.search_offset(mq, ts), queues)

        def at(item: tuple[MessageQueue, tuple[int, int], int]) -> _Where:
            mq, (lo, hi), offset = item
            st = store_time_at(admin, mq, offset) if lo <= offset < hi else None
            return _Where(lo, hi, offset, st, st)

        found = fan_out(at, list(zip(queues, bounds, offsets, strict=True)))
        return dict(zip(queues, found, strict=True))
    from mqadmin.replay.planner import Slice
    from mqadmin.replay.search import first_match_in_order, scan_slices

    slices = scan_slices([(mq, lo, hi) for mq, (lo, hi) in zip(queues, bounds, strict=True)], slice_size)
    if run.name == "spark":
        from mqadmin.spark.engine import scan_first_matches

        hits = scan_first_matches(
            run.address, slices, time_field, ts, master=run.master, conf=run.conf, note=ctx.env.note
        )
    else:
        of_queue: dict[MessageQueue, list[Slice]] = {}
        for s in slices:
            of_queue.setdefault(s.mq, []).append(s)
        scanned = fan_out(lambda mq: first_match_in_order(admin, of_queue.get(mq, []), time_field, ts), queues)
        hits = {mq: hit for mq, hit in zip(queues, scanned, strict=True) if hit is not None}
    out: dict[MessageQueue, _Where] = {}
    misses = []
    for mq, (lo, hi) in zip(queues, bounds, strict=True):
        hit = hits.get(mq)
        out[mq] = _Where(lo, hi, hi) if hit is None else _Where(lo, hi, hit.offset, hit.store_time, hit.time)
        if hit is None and hi > lo:
            misses.append((mq, lo, hi))
    if time_field.kind == "property":
        for line in fan_out(lambda miss: _no_property_line(admin, time_field, ts, *miss), misses):
            if line:
                ctx.env.warn(line)
    return out


def _no_property_line(admin: Admin, field: TimeField, ts: int, mq: MessageQueue, lo: int, hi: int) -> str | None:
    """A scanned queue where no message matched lands on its max offset. When its last message
    lacks the property too, the property is likely misspelt or never set: say so for that queue
    (when the last message has it, the time is simply after the queue's end, as with -s now)."""
    try:
        last = next((m for m in admin.pull(mq, hi - 1, 1).messages if m.queue_offset == hi - 1), None)
    except errors.MqadminError:
        last = None
    if last is not None and field.of(last) is not None:
        return None
    return (
        f"{mq.topic} {mq.broker_name}/{mq.queue_id}: none of its {hi - lo} messages has property {field.name} "
        f"(epoch ms) at or after {ts}, and its last message has none at all; Offset At Time is its max offset {hi}"
    )


def _time_field(text: str) -> TimeField:
    """The planner (and its worker) load only when a command needs them, not for --help."""
    from mqadmin.replay.search import TimeField

    return TimeField.parse(text)
