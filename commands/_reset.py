"""Moving a group's offsets safely: plan → confirm → back up → apply → read back, once.

resetOffsetByTime, restoreOffset, skipAccumulatedMessage and cloneGroupOffset differ only in
how they choose the target offsets; where the offsets live (the brokers, or broadcast clients'
offsets files) is an ``OffsetSource``, and ``run_plan`` runs the same steps over either.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mqadmin.commands._common import fan_out
from mqadmin.commands._plan import PlanRow, ResetResult, write_plan_csv

from mqadmin import errors
from mqadmin.config import default_home
from mqadmin.registry import Opt
from mqadmin.safety import OffsetBackup, default_backup_path

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

NO_WAIT = Opt(
    "no_wait",
    ("--no-wait",),
    f"With consumers online, do not wait {COMMIT_WAIT_S:.0f} s after the apply to read the offsets back again "
    "(clients that keep their own offsets commit them every 5 s and may undo the change; mqadmin extension)",
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

    def backup(self, result: ResetResult) -> OffsetBackup:
        """The record of the current offsets that restoreOffset puts back."""
        ...

    def apply(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Write the changed rows; a failure is recorded per broker (or client), not raised."""

    def verify(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Read back, set each row's outcome and ``result.verified``/``planned``."""

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
) -> ResetResult:
    """Confirm, back up, apply, read back (``export``: write the plan to a CSV file instead,
    changing nothing). Nothing is written before the backup is; after the first write every
    planned queue is read back, whatever failed."""
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
        if not ctx.confirm(source.question(result, changed)):
            raise errors.Cancelled()
    source.prepare(ctx, result, changed)
    path = (
        Path(backup_path) if backup_path else default_backup_path(default_home(), result.group, result.topic, ctx.now)
    )
    source.backup(result).write(path)
    result.backup = str(path)
    ctx.env.note(f"backup of the current offsets: {path}")
    source.apply(ctx, result, changed)
    result.applied_at = int(time.time() * 1000)
    source.verify(ctx, result, changed)
    if result.errors:
        result.failure = source.failure_line(result)
    return result


def current_rows(admin: Admin, queues: list[MessageQueue], consumer: dict[MessageQueue, int]) -> list[PlanRow]:
    """One row per queue with its bounds and the group's offset now (the queue's min when none)."""

    def row(mq: MessageQueue) -> PlanRow:
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        old = consumer.get(mq, lo)
        return PlanRow(mq.broker_name, mq.queue_id, lo, hi, old, old, topic=mq.topic)

    rows: list[PlanRow] = fan_out(row, queues)
    return rows


def show_plan(env: Env, result: ResetResult) -> None:
    """The plan on stderr before the question, so the user answers knowing what will move."""
    from mqadmin.output import render_table

    render_table(result.table(), env, env.stderr)
