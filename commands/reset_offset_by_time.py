"""resetOffsetByTime: move a group's offsets on a topic to a point in time (or to an offset)."""

from __future__ import annotations

from typing import Any

from mqadmin.commands._common import fan_out, group_offsets, route_of
from mqadmin.commands._options import BACKUP, DRY_RUN, GROUP, TIMESTAMP, TOPIC, YES, required
from mqadmin.commands._reset import PlanRow, ResetResult, current_rows, execute_plan

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.model import MessageQueue, TopicRoute
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import format_time


def parse_bool(text: str, flag: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise errors.UsageError(f"{flag} takes true or false, not {text!r}")


@register
class ResetOffsetByTimeCommand(SubCommand):
    """Reset a consumer group's offsets on a topic to a point in time.

    Options and meaning follow the Java mqadmin (-g -t -s, -f force, and the 5.x per-queue
    form -b -q -o). mqadmin adds: the plan shown first (--dry-run shows only that), a backup
    of the current offsets before anything moves (restore with restoreOffset), a read-back
    check after, and a confirmation on a terminal (--yes skips it; scripts are never asked).
    It uses the broker-side reset when the broker can apply it and falls back to direct offset
    updates when no consumer is online, saying which per broker.
    """

    name = "resetOffsetByTime"
    options = (
        required(GROUP),
        required(TOPIC),
        TIMESTAMP,
        Opt(
            "force",
            ("-f", "--force"),
            "true (default): move offsets either way; false: only move them back, as the Java tool",
            default="true",
            metavar="true|false",
        ),
        Opt("broker", ("-b", "--broker"), "Only this broker (name or address); with -q/-o one queue", metavar="BROKER"),
        Opt("queue", ("-q", "--queue"), "Queue id on the broker given with -b", kind=int, metavar="QID"),
        Opt("offset", ("-o", "--offset"), "Explicit offset for the queue given with -b and -q", kind=int),
        Opt(
            "cplus",
            ("-c", "--cplus"),
            "Accepted for compatibility with the Java tool; ignored",
            kind=bool,
            default=False,
        ),
        DRY_RUN,
        YES,
        BACKUP,
    )

    def execute(self, ctx: Context, **params: Any) -> ResetResult:
        group: str = params["group"]
        topic: str = params["topic"]
        force = parse_bool(params.get("force") or "true", "-f/--force")
        broker_opt, queue_opt, offset_opt = params.get("broker"), params.get("queue"), params.get("offset")
        if params.get("timestamp") is None and offset_opt is None:
            raise errors.UsageError("missing -s/--timestamp (or -b -q -o for one queue)")
        if queue_opt is not None and broker_opt is None:
            raise errors.UsageError("-q/--queue needs -b/--broker")
        if offset_opt is not None and queue_opt is None:
            raise errors.UsageError("-o/--offset needs -b/--broker and -q/--queue")
        ts = ctx.time(params["timestamp"]) if params.get("timestamp") is not None else None
        if ts is not None and ts > ctx.now:
            ctx.env.warn(f"{format_time(ts, ctx.tz)} is in the future: every queue lands on its max offset")

        admin = ctx.admin()
        route = route_of(admin, topic)
        queues = _select(route, broker_opt, queue_opt)
        current = {mq: w.consumer_offset for mq, w in group_offsets(admin, group, topic).items()}
        rows = current_rows(admin, queues, current)
        if offset_opt is not None:
            row = rows[0]
            if not row.min_offset <= offset_opt <= row.max_offset:
                raise errors.UsageError(
                    f"-o {offset_opt} is outside queue {row.queue_id} of {row.broker}: "
                    f"[{row.min_offset}, {row.max_offset}]"
                )

        def target(r: PlanRow) -> int:
            if offset_opt is not None:
                return int(offset_opt)
            assert ts is not None
            if ts >= ctx.now:
                return r.max_offset
            return int(admin.search_offset(MessageQueue(topic, r.broker, r.queue_id), ts))

        for r, new in zip(rows, fan_out(target, rows), strict=True):
            r.new_offset = new if force or new < r.old_offset else r.old_offset
        result = ResetResult(group, topic, ts, bool(params.get("dry_run")), rows, tz=ctx.tz)
        # The broker reads -1 as "max offset"; "now" and future times mean exactly that.
        reset_ts = None if ts is None else (-1 if ts >= ctx.now else ts)
        return execute_plan(
            ctx,
            result,
            reset_ts=reset_ts,
            force=force,
            backup_path=params.get("backup"),
            explicit=offset_opt is not None,
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
