"""rangeReplay: replay the messages stored in a time window, to files, stdout, a topic or one group."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import route_of, time_fields
from mqadmin.commands._engine import EngineParams
from mqadmin.commands._options import (
    DRY_RUN,
    ENGINE,
    SLICE_SIZE,
    SPARK_CONF,
    SPARK_MASTER,
    TOPIC,
    YES,
    require_spark,
    required,
    spark_unavailable,
)

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.output import ResultBase, Table
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import FORMATS_HELP, format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.replay.local import Checkpoint, ReplayOutcome
    from mqadmin.replay.planner import Plan
    from mqadmin.replay.sinks import Target
    from mqadmin.replay.worker import MessageFilter

#: plans below this many messages run locally under --engine auto. Measured with
#: benchmarks/bench_replay.py on a 2-core host: Spark local[2] replays ~1.2x faster than the
#: thread engine but pays ~13-19 s to start a JVM, so it overtakes from ~2.2 M messages
SPARK_AUTO_THRESHOLD = 2_000_000
#: a local master with fewer cores never overtakes the thread engine (local[1] was slower)
SPARK_MIN_LOCAL_CORES = 2


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

    @property
    def total(self) -> int:
        return sum(q.messages for q in self.queues)

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
        return {
            "topic": self.topic,
            **time_fields("begin", self.begin, self.tz),
            **time_fields("end", self.end, self.tz),
            "to": self.to,
            "engine": self.engine,
            "dry_run": self.dry_run,
            "tag": self.tag,
            "key": self.key,
            "limit": self.limit,
            "checkpoint": self.checkpoint,
            "slices": self.slices,
            "resumed_slices": self.resumed_slices,
            "complete": self.complete,
            "total_messages": self.total,
            "matched": self.matched,
            "written": self.written,
            "written_this_run": self.written_this_run,
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
                }
                for q in self.queues
            ],
        }

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
        footer = [
            f"Window: [{format_time(self.begin, self.tz)}, {format_time(self.end, self.tz)}) by store time "
            f"({self.begin} .. {self.end})",
            f"Plan: {self.total} message(s) in {self.slices} slice(s)" + (", dry run" if self.dry_run else ""),
        ]
        if not self.dry_run:
            verb = {"topic": "Sent", "group": "Re-delivered"}.get(self.to.split(":", 1)[0], "Wrote")
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
        return Table(columns, rows, title=f"Replay of topic {self.topic}", footer=footer)


def _csv(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _queue_ids(text: str | None) -> list[int]:
    try:
        return [int(p) for p in _csv(text)]
    except ValueError:
        raise errors.UsageError(f"--queue takes queue ids like 0 or 0,3; got {text!r}") from None


@dataclass(frozen=True)
class RangeReplayParams(EngineParams):
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

    def __post_init__(self) -> None:
        from mqadmin.replay.worker import parse_tag_expression

        target = self.target
        parse_tag_expression(self.tag)
        if self.limit is not None and self.limit < 1:
            raise errors.UsageError("--limit must be at least 1")
        super().__post_init__()
        if self.engine == "spark" and self.limit is not None:
            raise errors.UsageError("--limit runs on the local engine only (a limit never needs Spark)")
        if target.is_remote_path and self.engine == "local":
            raise errors.UsageError(f"{target.value} is not a local path; remote file systems need --engine spark")
        self.queue_ids  # noqa: B018 (a bad --queue is a usage error before anything runs)

    @property
    def target(self) -> Target:
        from mqadmin.replay.sinks import parse_target

        return parse_target(self.to)

    @property
    def queue_ids(self) -> list[int]:
        return _queue_ids(self.queue)


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
            f"Window start, included (store time): {FORMATS_HELP}",
            required=True,
            metavar="TIME",
        ),
        Opt("end", ("-e", "--end"), "Window end, excluded (store time; default now)", default="now", metavar="TIME"),
        Opt("queue", ("--queue",), "Only these queue ids (e.g. 0 or 0,3)", metavar="QIDS"),
        Opt("broker", ("--broker",), "Only queues on these brokers (comma-separated names)", metavar="NAMES"),
        Opt("tag", ("--tag",), "Tag expression: TagA or 'TagA || TagB' (* = all)", metavar="EXPR"),
        Opt("key", ("--key",), "Only messages with this key (one of the KEYS)", metavar="KEY"),
        Opt("limit", ("--limit",), "Stop after N messages (in queue, then offset order)", kind=int, metavar="N"),
        Opt(
            "to",
            ("--to",),
            "Where to: jsonl:PATH, parquet:PATH, stdout, topic:NAME (re-publish) or group:GROUP (that group only)",
            default="stdout",
            metavar="SINK",
        ),
        DRY_RUN,
        YES,
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
    )

    params_type = RangeReplayParams

    def execute(self, ctx: Context, params: RangeReplayParams) -> RangeReplayResult:
        from mqadmin.admin import resolve_address
        from mqadmin.replay.planner import plan_window, select_queues
        from mqadmin.replay.worker import MessageFilter, parse_tag_expression

        topic = params.topic
        begin, end = ctx.time(params.begin), ctx.time(params.end)
        if begin >= end:
            raise errors.UsageError(
                f"the window is empty: begin {format_time(begin, ctx.tz)} is not before end {format_time(end, ctx.tz)}"
            )
        target = params.target
        tag_expr, limit, slice_size, engine = params.tag, params.limit, params.slice_size, params.engine
        flt = MessageFilter(begin, end, parse_tag_expression(tag_expr), params.key or None)
        spark_conf = params.conf
        address = resolve_address(ctx.address)
        cp_path = Path(params.checkpoint).expanduser().absolute() if params.checkpoint else None
        dry_run = params.dry_run
        # what a checkpoint must match: the command line as typed (relative times included: the
        # plan, with its absolute window, is stored in the checkpoint and reused on resume)
        args = {
            "address": address,
            "topic": topic,
            "begin": params.begin,
            "end": params.end,
            "tz": str(ctx.tz) if ctx.tz else None,
            "queue": params.queue,
            "broker": params.broker,
            "tag": tag_expr,
            "key": params.key,
            "limit": limit,
            "to": str(target),
            "engine": engine,
            "slice_size": slice_size,
        }
        checkpoint: Checkpoint | None = None
        published_now = False
        if cp_path is not None and not dry_run:
            from mqadmin.replay.local import Checkpoint

            checkpoint = Checkpoint.load(cp_path, args)
            if checkpoint is not None and not checkpoint.complete:
                checkpoint, published_now = _settle_leftovers(ctx, checkpoint, target, params.overwrite)
        admin = ctx.admin(write=target.is_send and not dry_run)
        if checkpoint is not None:
            plan = checkpoint.plan
            engine = checkpoint.engine
            flt = MessageFilter(plan.begin, plan.end, flt.tags, flt.key)
            ctx.env.note(
                f"resuming from checkpoint {cp_path}: {len(checkpoint.done)} of {len(plan.slices)} slice(s) done"
            )
        else:
            queues = select_queues(route_of(admin, topic).message_queues(), _csv(params.broker), params.queue_ids)
            plan = plan_window(admin, queues, begin, end, slice_size=slice_size)
        result = _result(plan, target, engine, dry_run, tag_expr, flt.key, limit, cp_path, ctx.tz)
        if dry_run:
            if plan.total == 0:
                result.notes.append("No message is stored in this window on the selected queues.")
            return result
        if checkpoint is not None and checkpoint.complete:
            if published_now:
                result.notes.append(f"Finished: {target.value} was in place; checkpoint {cp_path} now records it.")
            else:
                result.notes.append(f"Nothing to do: checkpoint {cp_path} says this replay finished.")
            result.written_before = checkpoint.written
            result.matched_before = sum(s.matched for s in checkpoint.done.values())
            _apply(result, plan, checkpoint.done, None)
            result.complete = True
            return result
        if checkpoint is None:
            engine = _choose_engine(ctx, engine, plan, limit, target, address, params.spark_master)
            result.engine = engine
            _check_output(target, params.overwrite, engine)
        _check_send_target(admin, target)
        if plan.total == 0:
            result.notes.append("No message is stored in this window on the selected queues: nothing to replay.")
            ctx.env.note("no message is stored in this window on the selected queues")
        if target.is_send and plan.total and not _confirm(ctx, target, plan):
            raise errors.UsageError("cancelled; nothing was sent")
        if cp_path is not None and checkpoint is None:
            from mqadmin.replay.local import Checkpoint

            checkpoint = Checkpoint.create(cp_path, args, plan, engine)
        if checkpoint is not None and checkpoint.loaded:
            result.written_before = checkpoint.written
            result.matched_before = sum(s.matched for s in checkpoint.done.values())
        try:
            outcome = self._run(ctx, admin, plan, flt, target, engine, limit, checkpoint, params, spark_conf, address)
        except KeyboardInterrupt:
            ctx.env.note(_resume_hint(cp_path, checkpoint, "interrupted"))
            raise
        except errors.MqadminError:
            if checkpoint is not None:
                ctx.env.note(_resume_hint(cp_path, checkpoint, "stopped"))
            raise
        _apply(result, plan, outcome.stats, outcome)
        if outcome.limit_reached:
            result.notes.append(f"Stopped at --limit {limit}.")
        result.stdout_used = target.scheme == "stdout" and not result.dry_run
        return result

    def _run(
        self,
        ctx: Context,
        admin: Admin,
        plan: Plan,
        flt: MessageFilter,
        target: Target,
        engine: str,
        limit: int | None,
        checkpoint: Checkpoint | None,
        params: RangeReplayParams,
        spark_conf: dict[str, str],
        address: str,
    ) -> ReplayOutcome:
        if engine == "spark":
            from mqadmin.spark.engine import run_replay

            return run_replay(
                plan,
                address,
                flt,
                target,
                master=params.spark_master,
                conf=spark_conf,
                overwrite=params.overwrite,
                checkpoint=checkpoint,
                stdout=ctx.env.stdout,
                admin=admin,
                note=ctx.env.note,
            )
        from mqadmin.replay.local import run_local

        resume = checkpoint.sink_state if checkpoint is not None else None
        from mqadmin.replay.sinks import open_sink

        sink = open_sink(target, admin=admin, stdout=ctx.env.stdout, resume=resume)
        stream = ctx.env.stderr if ctx.env.stderr_tty else None
        return run_local(admin, plan, flt, sink, limit=limit, checkpoint=checkpoint, progress_stream=stream)


def _result(
    plan: Plan,
    target: Target,
    engine: str,
    dry_run: bool,
    tag: str | None,
    key: str | None,
    limit: int | None,
    cp_path: Path | None,
    tz: tzinfo | None,
) -> RangeReplayResult:
    rows = [ReplayQueueRow(r.broker, r.queue_id, r.start, r.end, r.count) for r in plan.ranges]
    return RangeReplayResult(
        topic=plan.topic,
        begin=plan.begin,
        end=plan.end,
        to=str(target),
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


def _apply(result: RangeReplayResult, plan: Plan, stats: dict[int, Any], outcome: ReplayOutcome | None) -> None:
    """Per-queue totals from per-slice stats."""
    rows = {(q.broker, q.queue_id): q for q in result.queues}
    for q in result.queues:
        q.matched, q.written = 0, 0
    total_bytes = 0
    for s in plan.slices:
        st = stats.get(s.index)
        if st is None:
            continue
        row = rows[(s.broker, s.queue_id)]
        row.matched = (row.matched or 0) + st.matched
        row.written = (row.written or 0) + st.written
        row.missing += st.missing
        total_bytes += st.bytes
    result.bytes = total_bytes
    missing = sum(q.missing for q in result.queues)
    if missing:
        result.notes.append(f"{missing} message(s) of the plan were deleted by retention before they were read.")
    if outcome is not None:
        result.complete = outcome.complete
        result.resumed_slices = outcome.resumed
        result.elapsed_ms = int(outcome.elapsed * 1000)


def _settle_leftovers(
    ctx: Context, checkpoint: Checkpoint, target: Target, overwrite: bool
) -> tuple[Checkpoint | None, bool]:
    """An unfinished file replay always makes progress: an output an earlier run published but
    did not record is recorded as finished (True); an unfinished output that is gone means
    starting over, which --overwrite asks for (None: plan afresh); anything else resumes."""
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
        missing = staging[0] if target.scheme == "jsonl" else staging[1]
        if not overwrite:
            raise errors.UsageError(
                f"cannot resume: the unfinished output ({missing}) is gone; pass --overwrite to start over"
            )
        ctx.env.note(f"the unfinished output of {checkpoint.path} is gone: starting over (--overwrite)")
        return None, False
    return checkpoint, False


def _check_output(target: Target, overwrite: bool, engine: str) -> None:
    """An existing output is replaced only with --overwrite (and only once the replay is done)."""
    if not target.is_file or target.is_remote_path:
        return
    path = Path(target.value)
    if path.exists() and not overwrite:
        raise errors.UsageError(f"{path} exists; pass --overwrite to replace it")
    if path.is_dir() and engine == "local":
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


def _choose_engine(
    ctx: Context, engine: str, plan: Plan, limit: int | None, target: Target, address: str, master: str
) -> str:
    """--engine spark must be able to run (else one line, exit 2); auto picks Spark only for big
    plans on enough cores, and says why it chose what it chose."""
    if engine == "local":
        return "local"
    if engine == "spark":
        require_spark(address, master)
        return "spark"
    reason = spark_unavailable()
    why: str | None = None
    if limit is not None:
        why = "--limit is set"
    elif plan.total < SPARK_AUTO_THRESHOLD:
        why = f"the plan ({plan.total} messages) is below the Spark threshold of {SPARK_AUTO_THRESHOLD}"
    elif reason:
        why = reason
    else:
        from mqadmin.spark import local_cores

        cores = local_cores(master)
        if cores is not None and cores < SPARK_MIN_LOCAL_CORES:
            why = f"Spark {master} has {cores} core(s); it beats the local engine only from {SPARK_MIN_LOCAL_CORES}"
    if why is not None:
        ctx.env.note(f"engine auto: local, because {why}")
        return "local"
    ctx.env.note(f"engine auto: spark ({master}), for a plan of {plan.total} messages")
    return "spark"


def _confirm(ctx: Context, target: Target, plan: Plan) -> bool:
    if target.scheme == "topic":
        question = f"Re-publish up to {plan.total} message(s) of {plan.topic} to topic {target.value}?"
    else:
        question = (
            f"Re-deliver up to {plan.total} message(s) of {plan.topic} to consumer group {target.value} "
            f"(through %RETRY%{target.value}; no other group sees them)?"
        )
    return ctx.confirm(question)


def _resume_hint(cp_path: Path | None, checkpoint: Checkpoint | None, what: str) -> str:
    if cp_path is None or checkpoint is None:
        return f"replay {what}; nothing is resumable without --checkpoint FILE, so a re-run starts over"
    done, total = len(checkpoint.done), len(checkpoint.plan.slices)
    return f"replay {what} after {done} of {total} slice(s); run the same command again to resume from {cp_path}"
