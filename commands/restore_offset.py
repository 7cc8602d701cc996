"""restoreOffset: put a group's offsets back from a backup that resetOffsetByTime wrote."""

from __future__ import annotations

from typing import Any

from mqadmin.commands._common import group_offsets, route_of
from mqadmin.commands._options import BACKUP, DRY_RUN, GROUP, TOPIC, YES
from mqadmin.commands._reset import ResetResult, current_rows, execute_plan

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.safety import OffsetBackup


@register
class RestoreOffsetCommand(SubCommand):
    """Put a group's offsets back from a backup file (mqadmin extension).

    Every resetOffsetByTime and restoreOffset writes one before it changes anything; this
    shows the plan (--dry-run shows only that), backs up the current offsets again, applies
    and reads back. -g/-t are optional checks that the backup is the one you mean.
    """

    name = "restoreOffset"
    options = (
        Opt("from_", ("--from",), "Backup file to restore", required=True, metavar="BACKUP"),
        GROUP,
        TOPIC,
        DRY_RUN,
        YES,
        BACKUP,
    )

    def execute(self, ctx: Context, **params: Any) -> ResetResult:
        backup = OffsetBackup.read(params["from_"])
        for opt, value, have in (("-g", params.get("group"), backup.group), ("-t", params.get("topic"), backup.topic)):
            if value is not None and value != have:
                raise errors.UsageError(
                    f"backup {params['from_']} is for group {backup.group!r} on topic {backup.topic!r}, not {opt} {value!r}"
                )
        admin = ctx.admin()
        route = route_of(admin, backup.topic)
        known = set(route.message_queues())
        wanted = {MessageQueue(backup.topic, o["broker"], o["queue_id"]): o["offset"] for o in backup.offsets}
        missing = sorted(set(wanted) - known)
        if missing:
            raise errors.UsageError(f"backup names queues the topic no longer has: {', '.join(map(str, missing))}")
        try:
            current = {mq: w.consumer_offset for mq, w in group_offsets(admin, backup.group, backup.topic).items()}
        except errors.UsageError:
            current = {}
        rows = current_rows(admin, sorted(wanted), current)
        for r in rows:
            r.new_offset = wanted[MessageQueue(backup.topic, r.broker, r.queue_id)]
            if r.new_offset < r.min_offset:
                ctx.env.warn(
                    f"{r.broker} queue {r.queue_id}: backup offset {r.new_offset} is below the min offset "
                    f"{r.min_offset} (messages expired); consumers will start at {r.min_offset}"
                )
        result = ResetResult(
            backup.group,
            backup.topic,
            None,
            bool(params.get("dry_run")),
            rows,
            restored_from=str(params["from_"]),
            tz=ctx.tz,
        )
        return execute_plan(ctx, result, reset_ts=None, force=True, backup_path=params.get("backup"), explicit=True)
