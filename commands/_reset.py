"""Moving a group's offsets safely: plan → confirm → back up → apply → read back, once.

resetOffsetByTime, restoreOffset, skipAccumulatedMessage and cloneGroupOffset differ only in
how they choose the target offsets; where the offsets live (the brokers, or broadcast clients'
offsets files) is an ``OffsetSource``, and ``run_plan`` runs the same steps over either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from mqadmin.commands._common import FAN_OUT, queue_bounds
from mqadmin.commands._plan import PlanRow, ResetResult, write_plan_csv

from mqadmin import errors, journal
from mqadmin.config import default_home
from mqadmin.registry import Opt
from mqadmin.safety import OffsetBackup, default_backup_path

T = TypeVar("T")
R = TypeVar("R")

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context
    from mqadmin.model import MessageQueue
    from mqadmin.output import Env

EXPORT = Opt(
    "export",
    ("--export",),
    "Write the plan to FILE.csv instead of applying it (group,topic,broker,queue,offset plus old_offset, "
    "min_offset, max_offset; edit it and apply with restoreOffset --from FILE.csv; mqadmin extension)",
    metavar="FILE",
)

#: how long to watch for online clients to take a pushed reset (a Java push consumer pauses
#: 10 s before it applies one, then commits it)
PUSH_VERIFY_TIMEOUT_S = 15.0
#: how often the committed offsets are read while watching: a consumer that took a reset and
#: re-consumed fast shows the planned offset only briefly
PUSH_POLL_S = 0.05
#: after an apply with clients online, read back again once their commit interval has passed
#: (persistConsumerOffsetInterval: 5 s by default), to catch clients that commit their own offsets
COMMIT_WAIT_S = 6.0
#: after Ctrl-C during an apply, how long the read-back of what is true may take (a second
#: Ctrl-C ends it sooner); queues that did not answer by then are reported unknown
INTERRUPT_READ_S = 3.0

NO_WAIT = Opt(
    "no_wait",
    ("--no-wait",),
    f"With consumers online or committing, do not wait {COMMIT_WAIT_S:.0f} s after the apply to read the offsets back "
    "again (clients that keep their own offsets commit them every 5 s and may undo the change; mqadmin extension)",
    kind=bool,
    default=False,
)

FORCE_STALE = Opt(
    "force_stale",
    ("--force-stale",),
    "Apply even when the offsets moved since the plan was read in a way no consumer of the group explains "
    "(another operator's change): without it such a change stops before writing anything (mqadmin extension)",
    kind=bool,
    default=False,
)


class OffsetSource(Protocol):
    """Where a group's committed offsets live, as the plan flow needs it: the brokers through
    the admin facade (``BrokerOffsets``), or broadcast clients' offsets files
    (``LocalOffsets``). Each step records what it did on the result (method, errors, outcomes)."""

    #: what an exported plan names to apply it against (the name server address)
    @property
    def address(self) -> str: ...

    def start(self, ctx: Context, result: ResetResult) -> None:
        """Before anything is decided: complete the result with what the source knows."""

    def check(self, ctx: Context, result: ResetResult) -> None:
        """Before the question: say what the user should know before answering."""

    def question(self, result: ResetResult, changed: list[PlanRow]) -> str:
        """The confirmation asked on a terminal."""
        ...

    def prepare(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """After the answer, before the backup: open for writing, refuse what cannot be written."""

    def moved(self, ctx: Context, result: ResetResult) -> list[tuple[PlanRow, int | None]]:
        """Right before the first write: read the planned queues again. Rows the group's consumers
        moved on meanwhile take the offset now as their old one; the rows something else moved
        (the plan is stale) are returned with the offset they have now."""
        ...

    def backup(self, result: ResetResult) -> OffsetBackup:
        """The record of the current offsets that restoreOffset puts back."""
        ...

    def apply(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Write the changed rows; a failure is recorded per broker (or client), not raised."""

    def verify(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Read back and set each written row's outcome (``result.verified`` counts the applied)."""

    def interrupt(self) -> None:
        """Ctrl-C during the apply: send no further writes (a write under way may still land)."""

    def settle(self, ctx: Context, result: ResetResult, changed: list[PlanRow], deadline: float) -> None:
        """After ``interrupt``: read back what answers before ``deadline`` (monotonic; a second
        Ctrl-C ends the wait) and set each changed row's outcome: applied, unchanged or unknown."""

    def failure_line(self, result: ResetResult) -> str:
        """One line saying what is true now and how to undo (only when errors remain)."""
        ...


def run_plan(
    ctx: Context,
    result: ResetResult,
    source: OffsetSource,
    *,
    backup_path: str | None,
    export: str | None = None,
    force_stale: bool = False,
) -> ResetResult:
    """Confirm, back up, apply, read back (``export``: write the plan to a CSV file instead,
    changing nothing). Nothing is written before the backup is; after the first write every
    planned queue is read back, whatever failed. The plan is checked against the offsets right
    before the first write (two operators on one group): a stale plan stops, unless
    ``force_stale``; either way the backup records the offsets the apply replaces."""
    source.start(ctx, result)
    changed = [q for q in result.queues if q.changes]
    if export:
        write_plan_csv(result, Path(export))
        result.exported, result.dry_run, result.address = export, True, source.address
        ctx.env.note(f"plan written to {export}; nothing was changed")
        return result
    if result.dry_run or not changed:
        if not changed and not result.dry_run:
            ctx.env.note("nothing to change: every queue is already at its target offset")
        return result
    source.check(ctx, result)
    if ctx.env.stdin_tty and not ctx.assume_yes:
        show_plan(ctx.env, result)
        try:
            yes = ctx.confirm(source.question(result, changed))
        except KeyboardInterrupt:
            ctx.env.stderr.write("\n")
            raise errors.InterruptedAtPrompt() from None
        if not yes:
            raise errors.Cancelled()
    source.prepare(ctx, result, changed)
    changed = _check_stale(ctx, result, source.moved(ctx, result), changed, force_stale)
    path = (
        Path(backup_path) if backup_path else default_backup_path(default_home(), result.group, result.topic, ctx.now)
    )
    source.backup(result).write(path)
    result.backup = str(path)
    ctx.env.note(f"backup of the current offsets: {path}")
    change = journal.started(ctx, result)

    def apply_and_verify() -> None:
        source.apply(ctx, result, changed)
        if not result.interrupted:
            result.applied_at = int(time.time() * 1000)
            source.verify(ctx, result, changed)

    if not _until_interrupted(apply_and_verify):
        _interrupted(ctx, result, source, changed)
    if result.errors or result.interrupted:
        result.failure = source.failure_line(result)
    journal.finished(ctx, change, result)
    return result


def daemon_map(fn: Callable[[T], R], items: list[T], *, deadline: float | None = None) -> dict[int, R]:
    """``fn`` over ``items`` (results by index) as ``fan_out``, but on daemon threads, so that
    calls left hanging by a Ctrl-C (a stopped broker) do not hold the process open. With
    ``deadline`` (monotonic): the results in by then, or when Ctrl-C ends the wait."""
    results: dict[int, R] = {}
    failed: list[BaseException] = []
    todo = iter(range(len(items)))
    lock = threading.Lock()

    def work() -> None:
        while not failed:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                value = fn(items[i])
            except BaseException as exc:  # raised in the waiting thread
                failed.append(exc)
                return
            with lock:
                results[i] = value

    threads = [threading.Thread(target=work, daemon=True) for _ in range(min(FAN_OUT, len(items)))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join(None if deadline is None else max(deadline - time.monotonic(), 0))
    except KeyboardInterrupt:
        if deadline is None:
            raise
    if failed:
        raise failed[0]
    with lock:
        return dict(results)


def _until_interrupted(fn: Callable[[], None]) -> bool:
    """Run ``fn`` in a daemon thread; False when Ctrl-C came first (the thread is left behind,
    and does not hold the process open). Its error, if any, is raised here."""
    done = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the waiting thread
            failed.append(exc)
        finally:
            done.set()

    try:
        threading.Thread(target=run, name="mqadmin-apply", daemon=True).start()
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        return False
    if failed:
        raise failed[0]
    return True


def _interrupted(ctx: Context, result: ResetResult, source: OffsetSource, changed: list[PlanRow]) -> None:
    """Ctrl-C after the backup: no further writes; what is true now, read back within a short
    bound, is the report (then exit 130)."""
    result.interrupted = True
    source.interrupt()
    ctx.env.warn(
        f"interrupted: no further offsets are written; reading back what is true now (up to "
        f"{INTERRUPT_READ_S:.0f} s; Ctrl-C again to stop waiting)"
    )
    result.errors = []
    result.applied_at = int(time.time() * 1000)
    source.settle(ctx, result, changed, time.monotonic() + INTERRUPT_READ_S)


def _check_stale(
    ctx: Context, result: ResetResult, moved: list[tuple[PlanRow, int | None]], changed: list[PlanRow], force: bool
) -> list[PlanRow]:
    """Stop when another change moved planned queues since the plan was read (nothing written yet);
    with ``force``, apply the plan over it, the backup recording where those queues are now."""
    if not moved:
        return changed
    what = "; ".join(f"{result.where(q)}{q.broker} queue {q.queue_id}: {q.old_offset} -> {now}" for q, now in moved)
    if not force:
        raise errors.MqadminError(
            f"the offsets moved since the plan was read ({what}), and no consumer of group {result.group} explains "
            "it: another change was made meanwhile (another operator, a restore, a client the broker does not list); "
            "nothing was changed: run the command again to plan from the offsets now, or pass --force-stale to apply "
            "this plan over that change"
        )
    ctx.env.warn(f"the offsets moved since the plan was read ({what}); applying the plan over them (--force-stale)")
    writes = {id(q) for q in changed}
    for q, now in moved:
        if id(q) not in writes and now is not None:
            q.new_offset = now  # not planned to move: it stays where the other change put it
        q.old_offset = now
    return [q for q in changed if q.changes]


def current_rows(admin: Admin, queues: list[MessageQueue], consumer: dict[MessageQueue, int]) -> list[PlanRow]:
    """One row per queue with its bounds (one topic-stats request per topic and broker) and the
    group's offset now (the queue's min when none)."""
    rows = []
    for mq, (lo, hi) in zip(queues, queue_bounds(admin, queues), strict=True):
        old = consumer.get(mq, lo)
        rows.append(PlanRow(mq.broker_name, mq.queue_id, lo, hi, old, old, topic=mq.topic))
    return rows


def show_plan(env: Env, result: ResetResult) -> None:
    """The plan on stderr before the question, so the user answers knowing what will move."""
    from mqadmin.output import render_table

    render_table(result.table(), env, env.stderr)
