"""skipAccumulatedMessage: move a group to the end of every queue of a topic (skip the backlog)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from mqadmin.commands._broker_offsets import BrokerOffsets
from mqadmin.commands._common import group_offsets, refuse_offline_write, route_of
from mqadmin.commands._options import BACKUP, DRY_RUN, GROUP, REASON, TOPIC, YES, parse_bool, parse_now, required
from mqadmin.commands._plan import ResetResult
from mqadmin.commands._reset import EXPORT, FORCE_STALE, NO_WAIT, current_rows, run_plan
from mqadmin.commands._reset_path import PARTIAL

from mqadmin.context import Context
from mqadmin.registry import Opt, SubCommand, register


@dataclass(frozen=True)
class SkipAccumulatedMessageParams:
    """skipAccumulatedMessage's options (the defaults are the Opt declarations')."""

    group: str
    topic: str
    force: str
    no_wait: bool
    force_stale: bool
    partial: bool
    export: str | None
    dry_run: bool
    yes: bool
    backup: str | None

    def __post_init__(self) -> None:
        parse_now(self, "forced")

    @cached_property
    def forced(self) -> bool:
        """-f as a boolean (true or false only)."""
        return parse_bool(self.force, "-f/--force")


@register
class SkipAccumulatedMessageCommand(SubCommand):
    """Skip a group's backlog on a topic: move its offset to the max offset of every queue.

    Options and meaning follow the Java mqadmin (-g -t, -f force; the Java tool resets to time
    -1, which brokers read as each queue's max offset). As with resetOffsetByTime, mqadmin shows
    the plan first, with how many messages each queue skips (--dry-run shows only that), asks on a
    terminal, backs up the current offsets (the Undo line puts them back), applies per broker and
    reads every queue back. --output java prints the Java tool's table.
    """

    name = "skipAccumulatedMessage"
    extra_formats = ("java",)
    options = (
        required(GROUP),
        required(TOPIC),
        Opt(
            "force",
            ("-f", "--force"),
            "true (default): move every queue to its max offset; false: only queues whose offset is past the "
            "max (as the Java tool's old method does); only true and false are accepted",
            default="true",
            metavar="true|false",
        ),
        NO_WAIT,
        FORCE_STALE,
        PARTIAL,
        EXPORT,
        DRY_RUN,
        YES,
        BACKUP,
        REASON,
    )

    params_type = SkipAccumulatedMessageParams

    def execute(self, ctx: Context, params: SkipAccumulatedMessageParams) -> ResetResult:
        group: str = params.group
        topic: str = params.topic
        force = params.forced
        if not params.dry_run and not params.export:
            refuse_offline_write(ctx, self.name)
        admin = ctx.admin()
        queues = route_of(admin, topic).message_queues()
        current = {mq: w.consumer_offset for mq, w in group_offsets(admin, group, topic).items()}
        rows = current_rows(admin, queues, current)
        for r in rows:
            assert r.max_offset is not None and r.old_offset is not None
            r.target = r.max_offset
            r.new_offset = r.max_offset if force or r.max_offset <= r.old_offset else r.old_offset
        result = ResetResult(
            group,
            topic,
            None,
            params.dry_run,
            rows,
            tz=ctx.tz,
            action=self.name,
            force=force,
        )
        # -1: the broker's "max offset" (what the Java tool sends); online consumers get it pushed
        source = BrokerOffsets(reset_ts=-1, force=force, explicit=False, no_wait=params.no_wait, partial=params.partial)
        return run_plan(
            ctx, result, source, backup_path=params.backup, export=params.export, force_stale=params.force_stale
        )
