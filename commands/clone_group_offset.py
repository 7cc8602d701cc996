"""cloneGroupOffset: give a group the offsets another group has on a topic (blue/green deploys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqadmin.commands._broker_offsets import BrokerOffsets
from mqadmin.commands._common import group_offsets, refuse_offline_write, route_of
from mqadmin.commands._options import BACKUP, DRY_RUN, REASON, TOPIC, YES, required
from mqadmin.commands._plan import ResetResult
from mqadmin.commands._reset import EXPORT, FORCE_STALE, NO_WAIT, current_rows, run_plan
from mqadmin.commands._reset_path import PARTIAL

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.protocol.versions import checks_group_on_commit
from mqadmin.registry import Opt, SubCommand, register

WHILE_ONLINE = "--while-online"


@dataclass(frozen=True)
class CloneGroupOffsetParams:
    """cloneGroupOffset's options (the defaults are the Opt declarations')."""

    src_group: str
    dest_group: str
    topic: str
    offline: str | None
    while_online: bool
    no_wait: bool
    force_stale: bool
    partial: bool
    export: str | None
    dry_run: bool
    yes: bool
    backup: str | None

    def __post_init__(self) -> None:
        if self.src_group.strip() == self.dest_group.strip():
            raise errors.UsageError(f"-s and -d name the same group {self.src_group.strip()!r}: nothing to clone")


@register
class CloneGroupOffsetCommand(SubCommand):
    """Copy a group's offsets on a topic to another group (e.g. a blue/green consumer deploy).

    Options follow the Java mqadmin (-s source group, -d destination group, -t topic, -o). The
    Java tool reads -o ("the group or the topic is offline") but never uses it; mqadmin accepts
    it for the same command lines and ignores it too. Unlike the Java tool, which copies the
    source group's offsets of every topic on the brokers of -t, mqadmin copies -t's queues only.

    mqadmin adds the safety of resetOffsetByTime: the plan first (--dry-run shows only that), a
    confirmation on a terminal, a backup of the destination group's offsets (the Undo line puts
    them back; a queue where it had none is backed up at the queue's min offset), the apply per
    broker and a read-back of every queue. On 5.2+ brokers it writes through the broker-side
    reset, as resetOffsetByTime does: a plain offset commit, which the Java tool sends, is
    ignored there while an earlier reset is pending ("Offset has been previously reset"). It refuses when the destination group has consumers
    online, which would commit their own offsets over the copy, unless --while-online is given.
    """

    name = "cloneGroupOffset"
    extra_formats = ("java",)
    options = (
        Opt(
            "src_group",
            ("-s", "--srcGroup"),
            "Source consumer group (whose offsets are copied)",
            required=True,
            metavar="GROUP",
            names="group",
        ),
        Opt(
            "dest_group",
            ("-d", "--destGroup"),
            "Destination consumer group (whose offsets change)",
            required=True,
            metavar="GROUP",
            names="group",
        ),
        required(TOPIC),
        Opt(
            "offline",
            ("-o", "--offline"),
            "Accepted for the Java tool's command lines, which read it and ignore it; ignored",
            metavar="VALUE",
        ),
        Opt(
            "while_online",
            (WHILE_ONLINE,),
            "Copy even though the destination group has consumers online (they may commit their own offsets over "
            "the copy; the read-back after their commit interval says so; mqadmin extension)",
            kind=bool,
            default=False,
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

    params_type = CloneGroupOffsetParams

    def execute(self, ctx: Context, params: CloneGroupOffsetParams) -> ResetResult:
        src: str = params.src_group.strip()
        dest: str = params.dest_group.strip()
        topic: str = params.topic.strip()
        if not params.dry_run and not params.export:
            refuse_offline_write(ctx, self.name)
        admin = ctx.admin()
        known = set(route_of(admin, topic).message_queues())
        source = {mq: w.consumer_offset for mq, w in group_offsets(admin, src, topic).items() if mq in known}
        source = {mq: o for mq, o in source.items() if o >= 0}  # as the Java tool: no offset, nothing to copy
        if not source:
            raise errors.UsageError(f"group {src!r} has no offset on any queue of topic {topic!r}: nothing to clone")
        try:
            current = {mq: w.consumer_offset for mq, w in group_offsets(admin, dest, topic).items()}
        except errors.UsageError:
            current = {}  # a new group: nothing to keep but the backup of where it would start
            _require_subscription(admin, dest)
        rows = current_rows(admin, sorted(source), current)
        for r, mq in zip(rows, sorted(source), strict=True):
            if mq not in current:
                r.old_offset = r.min_offset
            r.target = r.new_offset = source[mq]
        if not params.dry_run and not params.export:
            _refuse_online(admin, dest, params.while_online, ctx)
        result = ResetResult(
            dest,
            topic,
            None,
            params.dry_run,
            rows,
            tz=ctx.tz,
            action=self.name,
            source_group=src,
        )
        brokers = BrokerOffsets(no_wait=params.no_wait, partial=params.partial)
        return run_plan(
            ctx, result, brokers, backup_path=params.backup, export=params.export, force_stale=params.force_stale
        )


def _require_subscription(admin: Any, group: str) -> None:
    """5.2+ brokers reset offsets themselves, which needs the group's subscription group (a
    group's first consumer start creates it; 5.3+ refuse plain offset commits without it too):
    say so before anything is written."""
    strict = sorted(
        b.broker_name for b in admin.cluster_brokers() if b.server_side_reset or checks_group_on_commit(b.version)
    )
    if strict and group not in admin.list_groups(subscribed=True):
        raise errors.UsageError(
            f"group {group!r} does not exist on {', '.join(strict)} (5.2+ brokers refuse offsets for a group "
            "without a subscription group): create it first (the Java tool's updateSubGroup), or start "
            "its consumer once; nothing was changed"
        )


def _refuse_online(admin: Any, group: str, allowed: bool, ctx: Context) -> None:
    """Online consumers of the destination keep committing their own offsets: refuse to race them."""
    try:
        online = admin.consumer_connections(group).connections
    except errors.MqadminError:
        return  # nobody online (or the brokers cannot say)
    if not online:
        return
    ids = ", ".join(sorted(c.client_id for c in online))
    message = f"group {group} has {len(online)} consumer(s) online ({ids})"
    if not allowed:
        raise errors.UsageError(
            f"{message}: they would commit their own offsets over the copy; stop them first, "
            f"or pass {WHILE_ONLINE}; nothing was changed"
        )
    ctx.env.warn(f"{message}: copying anyway ({WHILE_ONLINE})")
