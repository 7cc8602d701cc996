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
    from mqadmin.localstore import OffsetsFile

#: how long to wait for online clients to commit a pushed reset (they commit every 5 s)
PUSH_VERIFY_TIMEOUT_S = 12.0


@dataclass
class PlanRow:
    broker: str
    queue_id: int
    min_offset: int | None  # None: not known (local offsets without -n)
    max_offset: int | None
    old_offset: int | None  # None: the client's file has no offset for the queue
    new_offset: int
    #: local offsets: the client whose file the row is in
    client: str | None = None

    @property
    def mq_key(self) -> tuple[str, int]:
        return (self.broker, self.queue_id)

    @property
    def delta(self) -> int:
        """Negative: messages consumed again; positive: messages skipped."""
        return 0 if self.old_offset is None else self.new_offset - self.old_offset

    @property
    def changes(self) -> bool:
        return self.old_offset is None or self.delta != 0

    def describe(self) -> str:
        if self.old_offset is None:
            return "sets (had no offset)"
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
    #: local offsets (--local-store): the clients' files the plan reads and writes
    local_files: list[OffsetsFile] | None = None
    #: the --local-store PATH, for the undo hint
    local_path: str | None = None

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
                    **({"client": q.client} if self.local_files is not None else {}),
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
        if self.local_files is not None:
            doc["local_store"] = [f.to_json() for f in self.local_files]
        if self.restored_from:
            doc["restored_from"] = self.restored_from
        if self.errors:
            doc["errors"] = self.errors
        return doc

    def table(self) -> Table:
        local = self.local_files is not None
        rows: list[list[Any]] = [
            ([q.client] if local else [])
            + [q.broker, q.queue_id, q.min_offset, q.max_offset, q.old_offset, q.new_offset, q.describe()]
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
            undo = f"mqadmin restoreOffset --from {self.backup}"
            if self.local_path is not None:
                undo += f" --local-store {self.local_path}"
            footer.append(f"Backup: {self.backup}  (undo: {undo})")
        for e in self.errors:
            footer.append(f"FAILED {e['broker']}: {e['message']}")
        verb = "Restore" if self.restored_from else "Reset"
        title = f"{verb} plan for group {self.group} on topic {self.topic}"
        if local:
            title += " (local offsets files)"
        columns = (["Client"] if local else []) + ["Broker", "QID", "Min", "Max", "Old Offset", "New Offset", "Change"]
        return Table(columns, rows, title, footer)


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
    cplus: bool | None = None,
) -> ResetResult:
    """Confirm, back up, apply per broker, read back. ``explicit``: offsets are exact targets
    (restore, -o), so no time-based broker reset is used. ``cplus``: ask brokers for the C++
    reset body (None: when a C++ consumer is online)."""
    changed = [q for q in result.queues if q.changes]
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
            how, table = _apply_broker(admin, infos.get(broker), result, broker, rows, reset_ts, force, explicit, cplus)
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
    cplus: bool | None = None,
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
            cpp = cplus if cplus is not None else _cpp_consumer_online(admin, group)
            table = admin.reset_offset_by_time(topic, group, reset_ts, force, broker_name=broker, cplus=cpp)
            return "broker-side reset (pushed to the online consumers)", table
        except errors.ConsumerNotOnline:
            how = "direct offset update (no consumer online)"
        except errors.SystemError_ as exc:
            # A client-push broker refuses when the group lacks an offset on one of its queues
            # ("THe consumer group <g> not exist"); the plan still has a target for every queue.
            if "consumer group" not in exc.remark.lower() or "not exist" not in exc.remark.lower():
                raise
            how = "direct offset update (the group had no offset on some queues of this broker)"
    else:
        how = "direct offset update"
    for q in rows:
        admin.update_consumer_offset(group, MessageQueue(topic, broker, q.queue_id), q.new_offset)
    return how, None


def _cpp_consumer_online(admin: Admin, group: str) -> bool:
    """C++ consumers decode only the array form of a pushed reset, which brokers send when the
    admin request says it comes from C++; so ask for it when one of them is online."""
    try:
        return any(c.language == "CPP" for c in admin.consumer_connections(group).connections)
    except errors.BrokerError:
        return False


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


def execute_local_plan(
    ctx: Context,
    result: ResetResult,
    *,
    backup_path: str | None,
    local_path: str,
) -> ResetResult:
    """The local-offsets flow: confirm, check the folders, back up every client's old offsets,
    rewrite each file the client's way, read it back. A file a client rewrote since the plan is
    left alone and reported; the others are still written (each file is its own outcome)."""
    from mqadmin.localstore import (
        FROM_FILE,
        FileChanged,
        check_writable,
        ensure_unchanged,
        read_offsets_file,
        write_offsets,
    )

    files = {f.client: f for f in result.local_files or []}
    result.local_path = local_path
    changed = [q for q in result.queues if q.changes]
    if result.dry_run or not changed:
        if not changed and not result.dry_run:
            ctx.env.note("nothing to change: every queue is already at its target offset")
        return result
    if ctx.env.stdin_tty and not ctx.assume_yes:
        show_plan(ctx.env, result)
        clients = len({q.client for q in changed})
        if not ctx.confirm(f"Rewrite the offsets files of {clients} client(s) of group {result.group}?"):
            raise errors.UsageError("cancelled; nothing was changed")
    by_client: dict[str, list[PlanRow]] = {}
    for q in changed:
        by_client.setdefault(q.client or "", []).append(q)
    check_writable(files[c] for c in by_client)
    for c in by_client:  # all or nothing when a client wrote meanwhile: refuse before the first write
        ensure_unchanged(files[c])
    path = (
        Path(backup_path) if backup_path else default_backup_path(default_home(), result.group, result.topic, ctx.now)
    )
    OffsetBackup(
        group=result.group,
        topic=result.topic,
        address=f"local:{local_path}",
        taken_at=int(time.time() * 1000),
        reason=("restoreOffset" if result.restored_from else "resetOffsetByTime") + " (local offsets files)",
        offsets=[
            {
                "broker": q.broker,
                "queue_id": q.queue_id,
                "offset": q.old_offset,
                "client": q.client,
                "file": str(files[q.client or ""].path),
            }
            for q in result.queues
            if q.old_offset is not None
        ],
    ).write(path)
    result.backup = str(path)
    ctx.env.note(f"backup of the current offsets: {path}")
    for client, rows in sorted(by_client.items()):
        f = files[client]
        new = dict(f.offsets)
        for q in rows:
            new[MessageQueue(result.topic, q.broker, q.queue_id)] = q.new_offset
        try:
            write_offsets(f, new)
        except (FileChanged, errors.MqadminError) as exc:
            result.errors.append({"broker": client, "message": str(exc), "code": None})
            continue
        back = read_offsets_file(f.path, f.group, f.client)
        wrong = [q for q in rows if back.offsets.get(MessageQueue(result.topic, q.broker, q.queue_id)) != q.new_offset]
        if back.source != FROM_FILE or wrong:
            result.errors.append({"broker": client, "message": f"read back of {f.path} does not match", "code": None})
            continue
        kept = f"previous content in {f.previous_copy.name}" if f.previous_copy else "previous offsets in the backup"
        result.method[client] = f"rewrote {f.path} ({f.style} form; {kept})"
    if result.errors:
        failed = ", ".join(sorted({e["broker"] for e in result.errors}))
        result.failure = (
            f"not written for {failed}; restore with: "
            f"mqadmin restoreOffset --from {result.backup} --local-store {local_path}"
        )
    return result
