"""rangeReplay: replay the messages stored in a time window, to files, stdout, a topic or one group."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import missing_brokers_failure, route_of, silent_brokers
from mqadmin.commands._engine import Engine, EngineParams, Work, choose_engine
from mqadmin.commands._options import (
    DRY_RUN,
    ENGINE,
    REASON,
    REPLAY_CONSUMER_GROUP,
    SLICE_SIZE,
    SPARK_CONF,
    SPARK_MASTER,
    TOPIC,
    YES,
    parse_now,
    required,
)
from mqadmin.commands._range_replay_result import RangeReplayResult, apply_stats, note_expired, plan_result

from mqadmin import errors, journal, seen
from mqadmin.context import Context
from mqadmin.protocol.constants import DLQ_PREFIX, RETRY_PREFIX
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.replay import STORE_TIME, TIME_FIELDS_HELP, TimeField
from mqadmin.timeparse import FORMATS_HELP, format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.replay.local import Checkpoint, ReplayOutcome
    from mqadmin.replay.planner import Plan
    from mqadmin.replay.sinks import Sink, Target
    from mqadmin.replay.worker import MessageFilter


#: --slack's default: a producer's send retries (3 attempts of 3 s by default) and a few
#: minutes of clock skew between producer and broker, with room to spare
DEFAULT_SLACK_MS = 5 * 60 * 1000


def _csv(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _queue_ids(text: str | None) -> list[int]:
    try:
        return [int(p) for p in _csv(text)]
    except ValueError:
        raise errors.UsageError(f"--queue takes queue ids like 0 or 0,3; got {text!r}") from None


@dataclass(frozen=True)
class RangeReplayParams(EngineParams):
    """rangeReplay's options; what it cannot run is a usage error here, before any broker is asked."""

    topic: str
    begin: str
    end: str
    queue: str | None
    broker: str | None
    tag: str | None
    key: str | None
    limit: int | None
    to: str
    dry_run: bool
    yes: bool
    overwrite: bool
    checkpoint: str | None
    partial: bool
    consumer_group: str | None
    sql: str | None
    dedup: bool
    rate: str | None
    max_inflight: int | None
    workers: int | None
    partition_by: str | None
    time_field: str
    slack: str | None

    def __post_init__(self) -> None:
        from mqadmin.replay.worker import parse_tag_expression, sql_filter

        parse_tag_expression(self.tag)
        if self.sql is not None:
            sql_filter(self.sql)  # an expression the broker would refuse is a usage error, with its column
        for flag, count in (
            ("--limit", self.limit),
            ("--max-inflight", self.max_inflight),
            ("--workers", self.workers),
        ):
            if count is not None and count < 1:
                raise errors.UsageError(f"{flag} must be at least 1")
        super().__post_init__()
        if self.engine == "spark":
            self._refuse_on_spark()
        self._check_target()
        if self.partial and self.checkpoint:
            raise errors.UsageError(
                "--partial cannot be used with --checkpoint: a resumed replay must cover the whole window"
            )
        if self.slack is not None and not self.field.scans:
            raise errors.UsageError(
                "--slack widens a --time-field born or property:NAME window; the store time needs none"
            )
        parse_now(self, "per_second", "queue_ids", "slack_ms")  # bad values: usage errors before any work

    def _refuse_on_spark(self) -> None:
        """The options only the local engine carries out."""
        local_only = (
            (self.limit is not None, "--limit runs on the local engine only (a limit never needs Spark)"),
            (self.partial, "--partial runs on the local engine only (--engine local or auto)"),
            (
                self.rate is not None and self.target.is_file,
                "--rate with --engine spark paces sends and stdout; files are written unpaced",
            ),
            (self.max_inflight is not None, "--max-inflight runs on the local engine only (--engine local or auto)"),
            (self.workers is not None, "--workers runs on the local engine only (--engine local or auto)"),
        )
        for given, why in local_only:
            if given:
                raise errors.UsageError(why)

    def _check_target(self) -> None:
        target = self.target
        if target.is_remote_path and self.engine == "local":
            raise errors.UsageError(f"{target.value} is not a local path; remote file systems need --engine spark")
        if target.scheme == "origin" and not self.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            raise errors.UsageError(
                f"--to origin sends retried messages back to their first topic: read a {DLQ_PREFIX}GROUP or "
                f"{RETRY_PREFIX}GROUP topic (got -t {self.topic})"
            )
        if self.partition_by is not None and not target.is_file:
            raise errors.UsageError("--partition-by writes a folder: use it with --to jsonl:PATH or parquet:PATH")
        if self.partition_by is not None and target.is_remote_path:
            raise errors.UsageError(f"--partition-by writes a local (or mounted) folder, not {target.value}")

    @cached_property
    def field(self) -> TimeField:
        return TimeField.parse(self.time_field)

    @cached_property
    def slack_ms(self) -> int:
        """How far the store-time window is widened on each side (0 for the store time itself)."""
        if not self.field.scans:
            return 0
        from mqadmin.timeparse import parse_duration_ms

        return parse_duration_ms(self.slack) if self.slack is not None else DEFAULT_SLACK_MS

    @cached_property
    def target(self) -> Target:
        from mqadmin.replay.sinks import parse_target

        return parse_target(self.to)

    @property
    def checkpoint_path(self) -> Path | None:
        return Path(self.checkpoint).expanduser().absolute() if self.checkpoint else None

    @cached_property
    def queue_ids(self) -> list[int]:
        return _queue_ids(self.queue)

    @cached_property
    def per_second(self) -> float | None:
        from mqadmin.replay.pace import parse_rate

        return parse_rate(self.rate) if self.rate is not None else None


@register
class RangeReplayCommand(SubCommand):
    """Replay the messages stored in [begin, end) to a file, stdout, a topic, or one group only.

    Not in the Java mqadmin. It plans first (per queue: the exact offsets of the window, whose
    edges are exact to the millisecond even where the broker's time search is coarse), then reads
    the slices with several pulls in flight, filters by tag expression and key, and writes in
    queue-then-offset order. group:GROUP re-delivers through the broker's send-back, so only that
    group consumes the messages again. --checkpoint makes an interrupted replay resumable; a
    resumed run's summary counts what it wrote itself and what the earlier runs wrote. Piped into
    a reader that stops early (| head -1) it ends quietly with exit 141, as seq does.
    --engine spark runs the same plan as a PySpark job (pip install 'mqadmin[spark]', Java 17+).
    """

    name = "rangeReplay"
    options = (
        required(TOPIC),
        Opt(
            "begin",
            ("-b", "--begin"),
            f"Window start, included (store time, or --time-field): {FORMATS_HELP}",
            required=True,
            metavar="TIME",
        ),
        Opt(
            "end",
            ("-e", "--end"),
            "Window end, excluded (store time, or --time-field; default now)",
            default="now",
            metavar="TIME",
        ),
        Opt(
            "time_field",
            ("--time-field",),
            f"What -b/-e are compared with: {TIME_FIELDS_HELP} (epoch ms in a user property). Born "
            "times and properties are not in store order, so the window is read by store time widened "
            "by --slack on each side and each message kept by its field; a message without the property "
            "is not kept (both engines; mqadmin extension)",
            default=STORE_TIME,
            metavar="FIELD",
        ),
        Opt(
            "slack",
            ("--slack",),
            "With --time-field born or property:NAME: how far the field may be from the store time "
            "(default 5m: a producer's send retries, 3 tries of 3 s, and minutes of clock skew; delayed "
            "messages are stored at their delivery time and need their delay). The summary warns of "
            "messages read whose field is further than that from their store time: a sign it is too small "
            "(e.g. 30s, 10m, 2h; mqadmin extension)",
            metavar="DURATION",
        ),
        Opt("queue", ("--queue",), "Only these queue ids (e.g. 0 or 0,3)", metavar="QIDS"),
        Opt("broker", ("--broker",), "Only queues on these brokers (comma-separated names)", metavar="NAMES"),
        Opt("tag", ("--tag",), "Tag expression: TagA or 'TagA || TagB' (* = all)", metavar="EXPR"),
        Opt("key", ("--key",), "Only messages with this key (one of the KEYS)", metavar="KEY"),
        Opt(
            "sql",
            ("--sql",),
            "Only messages an SQL92 subscription would get, e.g. \"TAGS = 'sms' AND retries > 3\" (user "
            "properties and TAGS; evaluated here as the broker's enablePropertyFilter does, so any broker "
            "works; mqadmin extension)",
            metavar="EXPR",
        ),
        Opt(
            "dedup",
            ("--dedup",),
            "Drop a message whose UNIQ_KEY (the client's message id) an earlier one had: a producer's "
            "retry stores a message twice. The first in queue order is kept; memory stays bounded "
            "(Spark: one more pass over the window; mqadmin extension)",
            kind=bool,
            default=False,
        ),
        Opt(
            "rate",
            ("--rate",),
            "Send or write at most N messages a second (N, N/s) or a minute (N/min): for a gateway's "
            "limit, or a broker serving live traffic (Spark: sends and stdout, the rate divided among the "
            "executors that send; mqadmin extension)",
            metavar="N",
        ),
        Opt(
            "max_inflight",
            ("--max-inflight",),
            "At most N pulls in flight at once for the whole replay (default: up to 64 per worker), "
            "to spare a broker serving live traffic (local engine; mqadmin extension)",
            kind=int,
            metavar="N",
        ),
        Opt(
            "workers",
            ("--workers",),
            "Worker processes that read and encode slices for a file or stdout, each with its own "
            "connection (default: one per CPU but one, for a plan of 200,000 messages or more; 1: "
            "threads in this process, the default on 2 CPUs). Not with --limit, --dedup or --rate, which run in threads (local engine; "
            "mqadmin extension)",
            kind=int,
            metavar="N",
        ),
        Opt(
            "partition_by",
            ("--partition-by",),
            "Write a folder of Hive-style partitions: hour=YYYY-MM-DDTHH (UTC hour of the window's time "
            "field: the store time, or the born time or property with --time-field), broker=NAME, or "
            "broker=NAME/queue_id=N; sealed by _MANIFEST.json (counts, window, filters, sha256 per file) "
            "and _SUCCESS once complete. Both engines write the same files (mqadmin extension)",
            choices=("hour", "broker", "queue"),
            metavar="KEY",
        ),
        Opt("limit", ("--limit",), "Stop after N messages (in queue, then offset order)", kind=int, metavar="N"),
        Opt(
            "to",
            ("--to",),
            "Where to: jsonl:PATH, parquet:PATH, stdout, topic:NAME (re-publish), group:GROUP (that group "
            "only; dead letters too), or origin (retried or dead-lettered messages back to their first topic; "
            "mqadmin extension)",
            default="stdout",
            metavar="SINK",
        ),
        DRY_RUN,
        YES,
        REASON,
        Opt(
            "overwrite",
            ("--overwrite",),
            "Replace an existing output file; with --checkpoint whose unfinished output is gone, start over",
            kind=bool,
            default=False,
        ),
        Opt(
            "checkpoint",
            ("--checkpoint",),
            "Record finished slices in FILE; re-run the same command to resume (a run killed after its "
            "output was put in place is recorded as finished)",
            metavar="FILE",
        ),
        ENGINE,
        SPARK_MASTER,
        SPARK_CONF,
        SLICE_SIZE,
        Opt(
            "partial",
            ("--partial",),
            "When a broker of the topic does not answer while planning, the others' queues are still "
            "replayed and the missing broker named (on stderr, in the summary, under missing_brokers in "
            "JSON), then exit 1; --partial accepts that (exit 0). Not with --checkpoint (mqadmin extension)",
            kind=bool,
            default=False,
        ),
        REPLAY_CONSUMER_GROUP,
    )

    params_type = RangeReplayParams

    def execute(self, ctx: Context, params: RangeReplayParams) -> RangeReplayResult:
        from mqadmin.replay.worker import MessageFilter, parse_tag_expression

        begin, end = _window(ctx, params)
        target, cp_path, slack = params.target, params.checkpoint_path, params.slack_ms
        flt = MessageFilter(begin, end, parse_tag_expression(params.tag), params.key or None, params.sql)
        if params.field.scans:  # read by store time, widened; keep by the field
            field = str(params.field)
            flt = replace(flt, begin=begin - slack, end=end + slack, time_field=field, field_begin=begin, field_end=end)
        args = _identity(ctx, params)
        checkpoint, published_now = _open_checkpoint(ctx, params, args)
        admin = ctx.admin(write=target.is_send and not params.dry_run)
        if checkpoint is not None:
            plan, engine_name = checkpoint.plan, checkpoint.engine
            flt = replace(flt, begin=plan.begin, end=plan.end)
            if flt.time_field is not None:  # the slack is part of the checkpoint's command line
                flt = replace(flt, field_begin=plan.begin + slack, field_end=plan.end - slack)
            done = f"{len(checkpoint.done)} of {len(plan.slices)} slice(s) done"
            ctx.env.note(f"resuming from checkpoint {cp_path}: {done}")
            missing: dict[str, str] = {}
        else:
            (plan, missing), engine_name = _plan(admin, params, flt.begin, flt.end), params.engine
            for gone in seen.vanished(admin, ctx.now):  # routed recently, not now: its queues are not in the plan
                missing.setdefault(gone.name, f"missing from the route: {gone.where(ctx.now)}")
        result = plan_result(
            plan, str(target), engine_name, params.dry_run, params.tag, flt.key, params.limit, cp_path, ctx.tz
        )
        result.sql, result.dedup, result.partition_by = params.sql, params.dedup, params.partition_by
        if flt.time_field is not None:
            result.time_field, result.slack_ms = flt.time_field, slack
            result.begin, result.end = flt.field_begin, flt.field_end
        _note_missing(ctx, result, missing, params.partial)
        note_expired(result, admin)
        if params.dry_run:
            if plan.total == 0:
                result.notes.append("No message is stored in this window on the selected queues.")
            _count_dry_run(ctx, admin, result, plan, flt, params)
            return result
        if checkpoint is not None and checkpoint.complete:
            if params.partition_by is not None and checkpoint.engine == "spark":
                published_now = _publish_spark_folder(plan, params, checkpoint.written)
            _finished(result, plan, checkpoint, published_now, target)
            _read_partitions(result, params)
            return result
        if checkpoint is None:
            engine = choose_engine(ctx, params, _work(plan, params.limit))
            result.engine = engine.name
            _check_output(target, params.overwrite, engine.name, folder=params.partition_by is not None)
        else:
            engine = Engine.named(checkpoint.engine, ctx, params)
        _check_send_target(admin, target)
        if plan.total == 0:
            result.notes.append("No message is stored in this window on the selected queues: nothing to replay.")
            ctx.env.note("no message is stored in this window on the selected queues")
        if target.is_send and plan.total and not _confirm(ctx, target, plan, params.per_second):
            raise errors.Cancelled()
        if cp_path is not None and checkpoint is None:
            from mqadmin.replay.local import Checkpoint

            checkpoint = Checkpoint.create(cp_path, args, plan, engine.name)
        if checkpoint is not None and checkpoint.loaded:
            _count_earlier(result, checkpoint)
        change = journal.replay_started(ctx, target, plan) if target.is_send and plan.total else None
        outcome = _run(ctx, admin, plan, flt, engine, params, checkpoint)
        apply_stats(result, plan, outcome.stats, outcome)
        journal.replay_finished(ctx, change, result)
        if outcome.limit_reached:
            result.notes.append(f"Stopped at --limit {params.limit}.")
        _read_partitions(result, params)
        result.stdout_used = target.scheme == "stdout" and not result.dry_run
        return result


def _window(ctx: Context, params: RangeReplayParams) -> tuple[int, int]:
    """[begin, end) as epoch ms; an empty window is a usage error."""
    begin, end = ctx.time(params.begin), ctx.time(params.end)
    if begin >= end:
        raise errors.UsageError(
            f"the window is empty: begin {format_time(begin, ctx.tz)} is not before end {format_time(end, ctx.tz)}"
        )
    return begin, end


def _identity(ctx: Context, params: RangeReplayParams) -> dict[str, Any]:
    """What a checkpoint must match: the command line as typed (relative times included: the
    plan, with its absolute window, is stored in the checkpoint and reused on resume)."""
    from mqadmin.admin import resolve_address

    return {
        "address": resolve_address(ctx.address),
        "topic": params.topic,
        "begin": params.begin,
        "end": params.end,
        "tz": str(ctx.tz) if ctx.tz else None,
        "queue": params.queue,
        "broker": params.broker,
        "tag": params.tag,
        "key": params.key,
        "limit": params.limit,
        "to": str(params.target),
        "engine": params.engine,
        "slice_size": params.slice_size,
        # options newer than the checkpoint format: only when given, so older checkpoints still resume
        **({"time_field": params.time_field, "slack_ms": params.slack_ms} if params.field.scans else {}),
        **({"sql": params.sql} if params.sql is not None else {}),
        **({"dedup": True} if params.dedup else {}),
        **({"partition_by": params.partition_by} if params.partition_by else {}),
    }


def _open_checkpoint(ctx: Context, params: RangeReplayParams, args: dict[str, Any]) -> tuple[Checkpoint | None, bool]:
    """The checkpoint of an earlier run of this command line (None: plan afresh), and whether its
    output was found published just now."""
    cp_path = params.checkpoint_path
    if cp_path is None or params.dry_run:
        return None, False
    from mqadmin.replay.local import Checkpoint

    checkpoint = Checkpoint.load(cp_path, args)
    if checkpoint is None or checkpoint.complete:
        return checkpoint, False
    return _settle_leftovers(ctx, checkpoint, params.target, params.overwrite, folder=params.partition_by is not None)


def _plan(admin: Admin, params: RangeReplayParams, begin: int, end: int) -> tuple[Plan, dict[str, str]]:
    """The plan, and the brokers left out of it because they did not answer (name -> why).

    A broker is left out only when some other one answers, and never under --checkpoint or
    --engine spark (a checkpoint holds a whole plan, so a resume cannot pass a partial one off
    as whole): there the silent broker fails the command, as before."""
    from mqadmin.replay.planner import plan_window, select_queues

    queues = select_queues(route_of(admin, params.topic).message_queues(), _csv(params.broker), params.queue_ids)
    try:
        return plan_window(admin, queues, begin, end, slice_size=params.slice_size, group=params.consumer_group), {}
    except errors.ConnectError:
        if params.checkpoint or params.engine == "spark":
            raise
        missing = silent_brokers(admin, queues)
        if not missing or len(missing) == len({q.broker_name for q in queues}):
            raise
    live = [q for q in queues if q.broker_name not in missing]
    return plan_window(admin, live, begin, end, slice_size=params.slice_size, group=params.consumer_group), missing


def _note_missing(ctx: Context, result: RangeReplayResult, missing: dict[str, str], partial: bool) -> None:
    """Name the brokers left out of the plan: one line on stderr; exit 1 unless --partial."""
    result.missing_brokers = missing
    result.failure = missing_brokers_failure(ctx, missing, partial)


def _work(plan: Plan, limit: int | None) -> Work:
    """The replay as the engine choice weighs it: a --limit never needs Spark."""
    spark_for = f"a plan of {plan.total} messages"
    return Work(plan.total, "plan", spark_for, stays_local="--limit is set" if limit is not None else None)


def _count_earlier(result: RangeReplayResult, checkpoint: Checkpoint) -> None:
    """What the earlier runs of a resumed replay wrote and matched, so the summary can tell them apart."""
    result.written_before = checkpoint.written
    result.matched_before = sum(s.matched for s in checkpoint.done.values())


def _finished(
    result: RangeReplayResult, plan: Plan, checkpoint: Checkpoint, published_now: bool, target: Target
) -> RangeReplayResult:
    """A checkpoint that says the replay finished: nothing to run, its totals are the result
    (staging a run killed while cleaning up left behind is removed)."""
    from mqadmin.replay.dedup import remove_dedup
    from mqadmin.replay.sinks import remove_staging

    remove_staging(target)
    remove_dedup(checkpoint.path)
    if published_now:
        result.notes.append(f"Finished: {target.value} was in place; checkpoint {checkpoint.path} now records it.")
    else:
        result.notes.append(f"Nothing to do: checkpoint {checkpoint.path} says this replay finished.")
    _count_earlier(result, checkpoint)
    apply_stats(result, plan, checkpoint.done, None)
    result.complete = True
    return result


def _read_partitions(result: RangeReplayResult, params: RangeReplayParams) -> None:
    """A finished partitioned folder's counts, from the manifest it was sealed with."""
    if params.partition_by is None or not result.complete:
        return
    from mqadmin.replay.folder import MANIFEST, read_manifest

    folder = Path(params.target.value)
    if (folder / MANIFEST).is_file():
        result.partitions = read_manifest(folder)["partitions"]


def _run(
    ctx: Context,
    admin: Admin,
    plan: Plan,
    flt: MessageFilter,
    engine: Engine,
    params: RangeReplayParams,
    checkpoint: Checkpoint | None,
) -> ReplayOutcome:
    """The replay on its engine; stopped part-way, it says how to resume."""
    try:
        return _run_on(ctx, admin, plan, flt, engine, params, checkpoint)
    except KeyboardInterrupt:
        ctx.env.note(_resume_hint(params.checkpoint_path, checkpoint, "interrupted"))
        raise
    except errors.MqadminError:
        if checkpoint is not None:
            ctx.env.note(_resume_hint(params.checkpoint_path, checkpoint, "stopped"))
        raise


def _run_on(
    ctx: Context,
    admin: Admin,
    plan: Plan,
    flt: MessageFilter,
    engine: Engine,
    params: RangeReplayParams,
    checkpoint: Checkpoint | None,
) -> ReplayOutcome:
    target = params.target
    if engine.name == "spark":
        from mqadmin.spark.engine import run_replay

        from mqadmin.replay.folder import parts_of

        outcome = run_replay(
            plan,
            engine.executors(ctx),
            flt,
            target if params.partition_by is None else replace(target, value=str(parts_of(Path(target.value)))),
            master=engine.master,
            conf=engine.conf,
            overwrite=params.overwrite,
            checkpoint=checkpoint,
            stdout=ctx.env.stdout,
            admin=admin,
            note=ctx.env.note,
            dedup=params.dedup,
            rate=params.per_second,
            partition_by=params.partition_by,
        )
        if params.partition_by is not None:
            _publish_spark_folder(plan, params, sum(s.written for s in outcome.stats.values()))
        return outcome
    from mqadmin.admin import resolve_address
    from mqadmin.replay.local import run_local
    from mqadmin.replay.pool import WorkerConnect
    from mqadmin.replay.sinks import open_sink

    resume = checkpoint.sink_state if checkpoint is not None else None
    if params.partition_by is not None:
        from mqadmin.replay.folder import FolderSink

        base = _manifest_base(plan, params, "local")
        by, field = params.partition_by, flt.time_field or "store"
        sink: Sink = FolderSink(Path(target.value), target.scheme, by, base, resume=resume, field=field)
    else:
        sink = open_sink(target, admin=admin, stdout=ctx.env.stdout, resume=resume)
    stream = ctx.env.stderr if ctx.env.stderr_tty else None
    return run_local(
        admin,
        plan,
        flt,
        sink,
        limit=params.limit,
        checkpoint=checkpoint,
        progress_stream=stream,
        dedup=params.dedup,
        rate=params.per_second,
        max_inflight=params.max_inflight,
        processes=params.workers,
        connection=WorkerConnect.of(resolve_address(ctx.address), ctx.timeout, ctx.connect_options),
    )


def _publish_spark_folder(plan: Plan, params: RangeReplayParams, written: int) -> bool:
    """Seal the folder the Spark executors filled (``PATH.parts``) with the local engine's
    manifest and put it in place; False when an earlier run already did."""
    from mqadmin.replay.folder import SUCCESS, parts_of, publish_written

    path = Path(params.target.value)
    if not parts_of(path).is_dir() and (path / SUCCESS).is_file():
        return False
    publish_written(path, _manifest_base(plan, params, "spark"), written)
    return True


def _manifest_base(plan: Plan, params: RangeReplayParams, engine: str) -> dict[str, Any]:
    """What a partitioned folder's manifest says about the run besides its files."""
    return {
        "format": params.target.scheme,
        "engine": engine,
        "partition_by": params.partition_by,
        **({"hour_of": str(params.field)} if params.partition_by == "hour" else {}),
        "topic": plan.topic,
        "window": {"begin": plan.begin, "end": plan.end},
        "filters": {
            "queue": params.queue,
            "broker": params.broker,
            "tag": params.tag,
            "key": params.key,
            "sql": params.sql,
            "dedup": params.dedup,
            "limit": params.limit,
            **({"time_field": str(params.field), "slack_ms": params.slack_ms} if params.field.scans else {}),
        },
    }


def _count_dry_run(
    ctx: Context, admin: Admin, result: RangeReplayResult, plan: Plan, flt: MessageFilter, params: RangeReplayParams
) -> None:
    """What a real run would write. Filters and --dedup need the messages, so the dry run reads
    the window (locally, writing nothing); without them the plan is the answer."""
    if params.partition_by is not None:
        _count_partitions(ctx, admin, result, plan, flt, params)
        return
    if not (params.tag or params.key or params.sql is not None or params.dedup or flt.time_field) or plan.total == 0:
        result.would_write = min(plan.total, params.limit) if params.limit is not None else plan.total
        _note_duration(result, params.per_second)
        return
    from mqadmin.replay.local import run_local
    from mqadmin.replay.sinks import CountSink

    stream = ctx.env.stderr if ctx.env.stderr_tty else None
    outcome = run_local(admin, plan, flt, CountSink(), limit=params.limit, progress_stream=stream, dedup=params.dedup)
    result.would_write = outcome.written
    if params.dedup:
        result.duplicates = sum(s.duplicates for s in outcome.stats.values())
    if flt.time_field is not None:
        result.outside_slack = sum(s.outside for s in outcome.stats.values())
    result.notes.append("The dry run read the window to apply the filters; it wrote and sent nothing.")
    _note_duration(result, params.per_second)


def _count_partitions(
    ctx: Context, admin: Admin, result: RangeReplayResult, plan: Plan, flt: MessageFilter, params: RangeReplayParams
) -> None:
    """A partitioned dry run reads the window: an hour's count needs each message's time."""
    from mqadmin.replay.folder import PartitionCountSink
    from mqadmin.replay.local import run_local

    assert params.partition_by is not None
    sink = PartitionCountSink(params.partition_by, flt.time_field or "store")
    stream = ctx.env.stderr if ctx.env.stderr_tty else None
    outcome = run_local(admin, plan, flt, sink, limit=params.limit, progress_stream=stream, dedup=params.dedup)
    result.would_write = outcome.written
    result.partitions = dict(sorted(sink.counts.items()))
    if params.dedup:
        result.duplicates = sum(s.duplicates for s in outcome.stats.values())
    if flt.time_field is not None:
        result.outside_slack = sum(s.outside for s in outcome.stats.values())
    result.notes.append("The dry run read the window to count each partition; it wrote nothing.")
    _note_duration(result, params.per_second)


def _note_duration(result: RangeReplayResult, per_second: float | None) -> None:
    if per_second is not None and result.would_write:
        result.notes.append(
            f"At --rate {per_second:,.4g} msg/s that takes {_duration(result.would_write / per_second)}."
        )


def _duration(seconds: float) -> str:
    """1 h 02 min, 3 min 20 s, 12 s."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{max(seconds, 0):.0f} s" if seconds >= 1 else f"{seconds:.1f} s"


def _settle_leftovers(
    ctx: Context, checkpoint: Checkpoint, target: Target, overwrite: bool, *, folder: bool = False
) -> tuple[Checkpoint | None, bool]:
    """An unfinished file replay always makes progress: an output an earlier run published but
    did not record is recorded as finished (True); an unfinished output that is gone means
    starting over, which --overwrite asks for (None: plan afresh); anything else resumes."""
    if folder and checkpoint.engine == "spark" and checkpoint.written:
        from mqadmin.replay.folder import parts_of

        if not parts_of(Path(target.value)).is_dir():  # the earlier waves' files are gone
            return _start_over(ctx, checkpoint, parts_of(Path(target.value)), overwrite)
    if not target.is_file or target.is_remote_path or checkpoint.engine != "local":
        return checkpoint, False
    from mqadmin.replay.local import resume_status
    from mqadmin.replay.sinks import staging_paths

    staging = staging_paths(target)
    status = resume_status(checkpoint, staging, Path(target.value))
    if status == "published":
        checkpoint.finish()
        ctx.env.note(f"{target.value} was already in place (the earlier run was stopped before recording that)")
        return checkpoint, True
    if status == "gone":
        return _start_over(
            ctx, checkpoint, staging[0] if target.scheme == "jsonl" and not folder else staging[1], overwrite
        )
    return checkpoint, False


def _start_over(ctx: Context, checkpoint: Checkpoint, missing: Path, overwrite: bool) -> tuple[None, bool]:
    """The unfinished output is gone: starting over is what --overwrite asks for."""
    if not overwrite:
        raise errors.UsageError(
            f"cannot resume: the unfinished output ({missing}) is gone; pass --overwrite to start over"
        )
    ctx.env.note(f"the unfinished output of {checkpoint.path} is gone: starting over (--overwrite)")
    return None, False


def _check_output(target: Target, overwrite: bool, engine: str, *, folder: bool = False) -> None:
    """An existing output is replaced only with --overwrite (and only once the replay is done)."""
    if not target.is_file or target.is_remote_path:
        return
    path = Path(target.value)
    if path.exists() and not overwrite:
        raise errors.UsageError(f"{path} exists; pass --overwrite to replace it")
    if path.is_dir() and engine == "local" and not folder:
        raise errors.UsageError(f"{path} is a directory (a Spark output?); the local engine writes one file")
    from mqadmin.replay.sinks import staging_paths

    for stale in staging_paths(target):
        if stale.exists() and not overwrite:
            raise errors.UsageError(
                f"{stale} is left from an unfinished replay; resume it with its --checkpoint, "
                "or pass --overwrite to start over"
            )


def _check_send_target(admin: Admin, target: Target) -> None:
    """Unknown target topics and groups are usage errors before anything is sent."""
    if target.scheme == "topic":
        route_of(admin, target.value)
    elif target.scheme == "group":
        try:
            admin.consume_stats(target.value)
        except errors.TopicNotExist:
            raise errors.UsageError(
                f"unknown consumer group {target.value!r}: it has no retry topic on any broker"
            ) from None


def _confirm(ctx: Context, target: Target, plan: Plan, per_second: float | None) -> bool:
    pace = (
        f"at {per_second:,.4g} msg/s (about {_duration(plan.total / per_second)})"
        if per_second is not None
        else "unthrottled (as fast as the broker takes them; --rate N limits it)"
    )
    if target.scheme == "topic":
        question = f"Re-publish up to {plan.total} message(s) of {plan.topic} to topic {target.value}, {pace}?"
    elif target.scheme == "origin":
        question = (
            f"Send up to {plan.total} message(s) of {plan.topic} back to the topics they first came from "
            f"(their RETRY_TOPIC property; every group subscribed there gets them again), {pace}?"
        )
    else:
        question = (
            f"Re-deliver up to {plan.total} message(s) of {plan.topic} to consumer group {target.value} "
            f"(through %RETRY%{target.value}; no other group sees them), {pace}?"
        )
    return ctx.confirm(question)


def _resume_hint(cp_path: Path | None, checkpoint: Checkpoint | None, what: str) -> str:
    if cp_path is None or checkpoint is None:
        return f"replay {what}; nothing is resumable without --checkpoint FILE, so a re-run starts over"
    done, total = len(checkpoint.done), len(checkpoint.plan.slices)
    return f"replay {what} after {done} of {total} slice(s); run the same command again to resume from {cp_path}"
