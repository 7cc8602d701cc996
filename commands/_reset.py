"""Moving a group's offsets safely: the plan, the backup, the apply per broker, the read-back.

resetOffsetByTime and restoreOffset share all of it; they differ only in how the target
offsets are chosen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import fan_out, time_fields

from mqadmin import errors
from mqadmin.admin import BrokerInfo, default_home
from mqadmin.model import MessageQueue
from mqadmin.output import Env, Table
from mqadmin.safety import OffsetBackup, default_backup_path

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context

#: how long to wait for online clients to commit a pushed reset (they commit every 5 s)
PUSH_VERIFY_TIMEOUT_S = 12.0


@dataclass
class PlanRow:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    old_offset: int
    new_offset: int

    @property
    def mq_key(self) -> tuple[str, int]:
        return (self.broker, self.queue_id)

    @property
    def delta(self) -> int:
        """Negative: messages consumed again; positive: messages skipped."""
        return self.new_offset - self.old_offset

    def describe(self) -> str:
        if self.delta < 0:
            return f"re-delivers {-self.delta}"
        if self.delta > 0:
            return f"skips {self.delta}"
        return "unchanged"


@dataclass
class ResetResult:
    group: str
    topic: str
    timestamp: int | None
    dry_run: bool
    queues: list[PlanRow]
    method: dict[str, str] = field(default_factory=dict)
    backup: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    restored_from: str | None = None
    tz: tzinfo | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "group": self.group,
            "topic": self.topic,
            **time_fields("timestamp", self.timestamp, self.tz),
            "dry_run": self.dry_run,
            "method": self.method or None,
            "backup": self.backup,
            "queues": [
                {
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "old_offset": q.old_offset,
                    "new_offset": q.new_offset,
                    "delta": q.delta,
                    "min_offset": q.min_offset,
                    "max_offset": q.max_offset,
                }
                for q in self.queues
            ],
        }
        if self.restored_from:
            doc["restored_from"] = self.restored_from
        if self.errors:
            doc["errors"] = self.errors
        return doc

    def table(self) -> Table:
        rows = [
            [q.broker, q.queue_id, q.min_offset, q.max_offset, q.old_offset, q.new_offset, q.describe()]
            for q in self.queues
        ]
        redeliver = sum(-q.delta for q in self.queues if q.delta < 0)
        skip = sum(q.delta for q in self.queues if q.delta > 0)
        footer = [f"Total: re-delivers {redeliver}, skips {skip}"]
        if self.timestamp is not None:
            from mqadmin.timeparse import format_time

            footer.append(f"Time: {format_time(self.timestamp, self.tz)} ({self.timestamp})")
        if self.dry_run:
            footer.append("Dry run: nothing was changed.")
        for broker, how in sorted(self.method.items()):
            footer.append(f"{broker}: {how}")
        if self.backup:
            footer.append(f"Backup: {self.backup}  (undo: mqadmin restoreOffset --from {self.backup})")
        for e in self.errors:
            footer.append(f"FAILED {e['broker']}: {e['message']}")
        verb = "Restore" if self.restored_from else "Reset"
        title = f"{verb} plan for group {self.group} on topic {self.topic}"
        return Table(["Broker", "QID", "Min", "Max", "Old Offset", "New Offset", "Change"], rows, title, footer)


def current_rows(admin: Admin, queues: list[MessageQueue], consumer: dict[MessageQueue, int]) -> list[PlanRow]:
    def row(mq: MessageQueue) -> PlanRow:
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        old = consumer.get(mq, lo)
        return PlanRow(mq.broker_name, mq.queue_id, lo, hi, old, old)

    rows: list[PlanRow] = fan_out(row, queues)
    return rows


def show_plan(env: Env, result: ResetResult) -> None:
    """The plan on stderr before the question, so the user answers knowing what will move."""
    from mqadmin.output import _render_plain

    _render_plain(result.table(), env.stderr)


def execute_plan(
    ctx: Context,
    result: ResetResult,
    *,
    reset_ts: int | None,
    force: bool,
    backup_path: str | None,
    explicit: bool,
) -> ResetResult:
    """Confirm, back up, apply per broker, read back. ``explicit``: offsets are exact targets
    (restore, -o), so no time-based broker reset is used."""
    changed = [q for q in result.queues if q.delta != 0]
    if result.dry_run or not changed:
        if not changed and not result.dry_run:
            ctx.env.note("nothing to change: every queue is already at its target offset")
        return result
    if ctx.env.stdin_tty and not ctx.assume_yes:
        show_plan(ctx.env, result)
        if not ctx.confirm(f"Apply to {len(changed)} queue(s) of group {result.group}?"):
            raise errors.UsageError("cancelled; nothing was changed")
    admin = ctx.admin(write=True)
    path = (
        Path(backup_path) if backup_path else default_backup_path(default_home(), result.group, result.topic, ctx.now)
    )
    OffsetBackup(
        group=result.group,
        topic=result.topic,
        address=admin.address,
        taken_at=int(time.time() * 1000),
        reason="restoreOffset" if result.restored_from else "resetOffsetByTime",
        offsets=[{"broker": q.broker, "queue_id": q.queue_id, "offset": q.old_offset} for q in result.queues],
    ).write(path)
    result.backup = str(path)
    ctx.env.note(f"backup of the current offsets: {path}")

    infos = {b.broker_name: b for b in admin.cluster_brokers()}
    by_broker: dict[str, list[PlanRow]] = {}
    for q in changed:
        by_broker.setdefault(q.broker, []).append(q)
    expected: dict[tuple[str, int], int] = {q.mq_key: q.new_offset for q in changed}
    pushed: set[str] = set()

    def apply(item: tuple[str, list[PlanRow]]) -> None:
        broker, rows = item
        try:
            how, table = _apply_broker(admin, infos.get(broker), result, broker, rows, reset_ts, force, explicit)
            result.method[broker] = how
            if table is not None:
                pushed.add(broker)
                for mq, off in table.items():
                    if (broker, mq.queue_id) in expected:
                        expected[(broker, mq.queue_id)] = off
        except errors.MqadminError as exc:
            result.errors.append({"broker": broker, "message": str(exc), "code": getattr(exc, "code", None)})

    fan_out(apply, sorted(by_broker.items()))
    _verify(ctx, admin, result, expected, pushed)
    if result.errors:
        failed = ", ".join(sorted({e["broker"] for e in result.errors}))
        result.failure = f"not applied on {failed}; restore with: mqadmin restoreOffset --from {result.backup}"
    return result


def _apply_broker(
    admin: Admin,
    info: BrokerInfo | None,
    result: ResetResult,
    broker: str,
    rows: list[PlanRow],
    reset_ts: int | None,
    force: bool,
    explicit: bool,
) -> tuple[str, dict[MessageQueue, int] | None]:
    topic, group = result.topic, result.group
    if info is not None and info.server_side_reset:
        for q in rows:
            admin.reset_offset_by_time(
                topic,
                group,
                reset_ts if reset_ts is not None else 0,
                True,
                broker_name=broker,
                queue_id=q.queue_id,
                offset=q.new_offset,
            )
        return f"broker-side reset (server-side, broker {info.version})", None
    if not explicit and reset_ts is not None:
        try:
            table = admin.reset_offset_by_time(topic, group, reset_ts, force, broker_name=broker)
            return "broker-side reset (pushed to the online consumers)", table
        except errors.ConsumerNotOnline:
            pass
        how = "direct offset update (no consumer online)"
    else:
        how = "direct offset update"
    for q in rows:
        admin.update_consumer_offset(group, MessageQueue(topic, broker, q.queue_id), q.new_offset)
    return how, None


def _verify(
    ctx: Context, admin: Admin, result: ResetResult, expected: dict[tuple[str, int], int], pushed: set[str]
) -> None:
    failed_brokers = {e["broker"] for e in result.errors}
    todo = {k: v for k, v in expected.items() if k[0] not in failed_brokers}
    deadline = time.monotonic() + (PUSH_VERIFY_TIMEOUT_S if pushed else 0)
    while True:
        actual = dict(
            zip(
                todo,
                fan_out(lambda k: admin.consumer_offset(result.group, MessageQueue(result.topic, k[0], k[1])), todo),
                strict=True,
            )
        )
        wrong = {k: v for k, v in actual.items() if v != todo[k]}
        if not wrong or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    for (broker, qid), got in sorted(wrong.items()):
        result.errors.append(
            {"broker": broker, "message": f"queue {qid}: read back {got}, expected {todo[(broker, qid)]}", "code": None}
        )
    for q in result.queues:
        if q.mq_key in expected and q.mq_key not in wrong:
            q.new_offset = expected[q.mq_key]
