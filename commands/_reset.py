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
from mqadmin.output import Env, ResultBase, Table
from mqadmin.registry import Opt
from mqadmin.safety import OffsetBackup, default_backup_path

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context
    from mqadmin.localstore import OffsetsFile
    from mqadmin.model import ConsumerConnection

EXPORT = Opt(
    "export",
    ("--export",),
    "Write the plan to FILE.csv instead of applying it (group,topic,broker,queue,offset plus old_offset, "
    "min_offset, max_offset; edit it and apply with restoreOffset --from FILE.csv; mqadmin extension)",
    metavar="FILE",
)
#: the columns of an exported plan: kafka-consumer-groups' group,topic,partition,offset, where a
#: RocketMQ queue is named by its broker and queue id; the last three are for reading only
PLAN_COLUMNS = ("group", "topic", "broker", "queue", "offset", "old_offset", "min_offset", "max_offset")

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
    #: after an apply: what is true now (applied / unchanged / unknown ...), from a read-back
    outcome: str | None = None
    #: a time search landed on a message stored this many ms before the time (4.x nearest search)
    lands_before_ms: int | None = None
    #: --exact moved the queue from the nearest message to the first at or after the time
    exact_from: int | None = None
    #: where the time (or the command's target) lands, before -f false kept a queue where it was
    target: int | None = None
    #: the queue's topic ("": the result's one topic)
    topic: str = ""

    @property
    def mq_key(self) -> tuple[str, str, int]:
        return (self.topic, self.broker, self.queue_id)

    @property
    def delta(self) -> int:
        """Negative: messages consumed again; positive: messages skipped."""
        return 0 if self.old_offset is None else self.new_offset - self.old_offset

    @property
    def changes(self) -> bool:
        return self.old_offset is None or self.delta != 0

    def describe(self) -> str:
        if self.old_offset is None:
            text = "sets (had no offset)"
        elif self.delta < 0:
            text = f"re-delivers {-self.delta}"
        elif self.delta > 0:
            text = f"skips {self.delta}"
        else:
            text = "unchanged"
        if self.exact_from is not None:
            text += f" (--exact: not {self.exact_from})"
        elif self.lands_before_ms is not None:
            text += f" (lands {self.lands_before_ms} ms before the time)"
        return text


@dataclass
class ResetResult(ResultBase):
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
    #: the address the apply used (the undo line names it, so it works when pasted)
    address: str | None = None
    #: epoch ms when the apply finished (the broker's flush window starts there)
    applied_at: int | None = None
    #: the read-back after the apply: queues at their planned offsets, and how many were planned
    verified: int | None = None
    planned: int | None = None
    #: a note on durability (real brokers persist consumer offsets on their own schedule)
    durability: str | None = None
    #: the command that made the plan (the backup's reason, the title, the Java text)
    action: str = "resetOffsetByTime"
    #: -f as parsed, and -s as typed (the Java text echoes both)
    force: bool = True
    timestamp_text: str | None = None
    #: cloneGroupOffset: the group whose offsets are copied
    source_group: str | None = None
    #: broker name -> version, from the cluster (the Java text follows the broker's version)
    versions: dict[str, str] = field(default_factory=dict)
    #: lines about how the targets were chosen (e.g. offsets clamped to [min, max])
    notes: list[str] = field(default_factory=list)
    #: --export: the plan was written to this CSV file instead of being applied
    exported: str | None = None

    @property
    def multi_topic(self) -> bool:
        """The plan spans several topics (-t A,B, --all-topics): rows name their topic."""
        return len({q.topic for q in self.queues if q.topic}) > 1

    def where(self, q: PlanRow) -> str:
        """A row's topic as a prefix, when the plan has several (else nothing)."""
        return f"{q.topic} " if self.multi_topic else ""

    @property
    def undo(self) -> str | None:
        """The restore command, ready to paste."""
        if not self.backup:
            return None
        import shlex

        cmd = f"mqadmin restoreOffset --from {shlex.quote(self.backup)}"
        if self.local_path is not None:
            cmd += f" --local-store {shlex.quote(self.local_path)}"
        elif self.address:
            cmd += f" -n {shlex.quote(self.address)}"
        return cmd

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
                    **({"topic": q.topic} if self.multi_topic else {}),
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "old_offset": q.old_offset,
                    "new_offset": q.new_offset,
                    "delta": q.delta,
                    "min_offset": q.min_offset,
                    "max_offset": q.max_offset,
                    **({"outcome": q.outcome} if q.outcome is not None else {}),
                    **({"lands_before_ms": q.lands_before_ms} if q.lands_before_ms is not None else {}),
                    **({"exact_from": q.exact_from} if q.exact_from is not None else {}),
                }
                for q in self.queues
            ],
        }
        if self.applied_at is not None:
            doc.update(time_fields("applied_at", self.applied_at, self.tz))
            doc["verified"] = self.verified
            doc["planned"] = self.planned
            doc["durability"] = self.durability
        if self.backup:
            doc["undo"] = self.undo
        if self.local_files is not None:
            doc["local_store"] = [f.to_json() for f in self.local_files]
        if self.restored_from:
            doc["restored_from"] = self.restored_from
        if self.source_group is not None:
            doc["source_group"] = self.source_group
        if self.notes:
            doc["notes"] = self.notes
        if self.exported:
            doc["exported"] = self.exported
        if self.errors:
            doc["errors"] = self.errors
        return doc

    def java_text(self) -> str:
        """The Java tool's text for this command, column for column (its printf formats; the
        words differ between the 4.9 and 5.x tools, so they follow the brokers' version)."""
        if self.source_group is not None:
            # Java prints this without a line break; ours ends the line
            return (
                f"clone group offset success. srcGroup[{self.source_group}], destGroup=[{self.group}], "
                f"topic[{self.topic}]\n"
            )
        from mqadmin.model import version_tuple

        versions = [self.versions.get(q.broker, "") for q in self.queues] or list(self.versions.values())
        v4 = any(v and version_tuple(v) < (5,) for v in versions)
        skip = self.action == "skipAccumulatedMessage"
        ts_long = -1 if skip else (self.timestamp if self.timestamp is not None else 0)
        ts_text = self.timestamp_text if self.timestamp_text is not None else str(ts_long)
        force = "true" if self.force else "false"
        lines: list[str] = []
        if not skip and self.timestamp is None and len(self.queues) == 1:  # -b -q -o
            q = self.queues[0]
            lines.append(
                f"start reset consumer offset by specified, group[{self.group}], topic[{self.topic}], "
                f"queueId[{q.queue_id}], broker[{q.broker}], timestamp(string)[{ts_text}], timestamp(long)[{ts_long}]"
            )
            lines.append(f"reset consumer offset to {q.new_offset}")
            return "\n".join(lines) + "\n"
        if self.method:
            old_form = any(m.startswith("direct") for m in self.method.values())
        else:
            old_form = not versions or any(not v or version_tuple(v) < (5, 2) for v in versions)
        rows = sorted(self.queues, key=lambda q: (q.broker, q.queue_id))
        if old_form:
            if not skip:
                verb = "rollback" if v4 else "reset"
                lines.append(
                    f"{verb} consumer offset by specified consumerGroup[{self.group}], topic[{self.topic}], "
                    f"force[{force}], timestamp(string)[{ts_text}], timestamp(long)[{ts_long}]"
                )
            last = "#rollbackOffset" if v4 or skip else "#resetOffset"
            heads = ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", last)
            lines.append("  ".join(f"{h:<20}" for h in heads))
            for q in rows:
                old = q.old_offset if q.old_offset is not None else (q.min_offset or 0)
                target = q.target if q.target is not None else q.new_offset
                cells = (q.broker[:32], q.queue_id, q.max_offset or 0, old, target, q.new_offset)
                lines.append("  ".join(f"{c:<20}" for c in cells))
        else:
            if not skip:
                head = "rollback consumer offset" if v4 else "start reset consumer offset"
                lines.append(
                    f"{head} by specified{'' if v4 else ','} group[{self.group}], topic[{self.topic}], "
                    f"force[{force}], timestamp(string)[{ts_text}], timestamp(long)[{ts_long}]"
                )
            lines.append("  ".join(f"{h:<40}" for h in ("#brokerName", "#queueId", "#offset")))
            for q in rows:
                lines.append("  ".join(f"{c:<40}" for c in (q.broker[:32], q.queue_id, q.new_offset)))
        return "\n".join(lines) + "\n"

    def table(self) -> Table:
        local = self.local_files is not None
        outcomes = any(q.outcome is not None for q in self.queues)
        multi = self.multi_topic
        rows: list[list[Any]] = [
            ([q.client] if local else [])
            + ([q.topic] if multi else [])
            + [q.broker, q.queue_id, q.min_offset, q.max_offset, q.old_offset, q.new_offset, q.describe()]
            + ([q.outcome or "-"] if outcomes else [])
            for q in self.queues
        ]
        redeliver = sum(-q.delta for q in self.queues if q.delta < 0)
        skip = sum(q.delta for q in self.queues if q.delta > 0)
        footer = [f"Total: re-delivers {redeliver}, skips {skip}", *self.notes]
        if self.timestamp is not None:
            from mqadmin.timeparse import format_time

            footer.append(f"Time: {format_time(self.timestamp, self.tz)} ({self.timestamp})")
        early = [q for q in self.queues if q.lands_before_ms is not None]
        if early and not any(q.exact_from is not None for q in early):
            footer.append(
                f"{len(early)} queue(s) land on a message stored before the time (the broker searches for the "
                "nearest message, as 4.x does); --exact moves them to the first message at or after it"
            )
        elif early:
            footer.append(f"--exact: {len(early)} queue(s) moved to the first message at or after the time")
        if self.exported:
            import shlex

            footer.append(
                f"Plan written to {self.exported}; apply it with: mqadmin restoreOffset --from "
                f"{shlex.quote(self.exported)} -n {shlex.quote(self.address or '')}"
            )
        if self.dry_run:
            footer.append("Dry run: nothing was changed.")
            if self.timestamp is not None and self.local_files is None:
                # "-30m" means another time a minute later: the epoch applies exactly this plan
                footer.append(f"To apply exactly this plan, pass -s {self.timestamp}")
        for broker, how in sorted(self.method.items()):
            footer.append(f"{broker}: {how}")
        if self.verified is not None and self.planned is not None:
            if self.verified == self.planned:
                footer.append(f"Verified: {self.verified} queues read back at their planned offsets")
            else:
                wrong = [
                    f"{self.where(q)}{q.broker} queue {q.queue_id}: {q.outcome}" for q in self.queues if _not_applied(q)
                ]
                footer.append(
                    f"Verified: {self.verified} of {self.planned} queues read back at their planned offsets; "
                    f"not: {'; '.join(wrong)}"
                )
        if self.applied_at is not None:
            from mqadmin.timeparse import format_time

            footer.append(f"Applied at: {format_time(self.applied_at, self.tz)} ({self.applied_at})")
        if self.durability:
            footer.append(self.durability)
        if self.backup:
            footer.append(f"Backup: {self.backup}")
            footer.append(f"Undo: {self.undo}")
        for e in self.errors:
            where = f"{e['broker']} ({e['address']})" if e.get("address") else e["broker"]
            footer.append(f"FAILED {where}: {e['message']}")
        if self.source_group is not None:
            title = f"Clone plan for group {self.group} from group {self.source_group} on topic {self.topic}"
        elif self.action == "skipAccumulatedMessage":
            title = f"Skip plan for group {self.group} on topic {self.topic} (every queue to its max offset)"
        else:
            verb = "Restore" if self.restored_from else "Reset"
            title = f"{verb} plan for group {self.group} on topic{'s' if multi else ''} {self.topic}"
        if local:
            title += " (local offsets files)"
        columns = (
            (["Client"] if local else [])
            + (["Topic"] if multi else [])
            + ["Broker", "QID", "Min", "Max", "Old Offset", "New Offset", "Change"]
        )
        if outcomes:
            columns.append("Result")
        return Table(columns, rows, title, footer)


#: PlanRow.outcome values
APPLIED = "applied"
UNCHANGED = "unchanged"
UNKNOWN = "unknown (broker unreachable)"
ACKED = "acknowledged (not read back: broker unreachable)"


def _not_applied(q: PlanRow) -> bool:
    return q.outcome is not None and not _applied(q)


def _applied(q: PlanRow) -> bool:
    return q.outcome is not None and q.outcome.startswith(APPLIED)


def current_rows(admin: Admin, queues: list[MessageQueue], consumer: dict[MessageQueue, int]) -> list[PlanRow]:
    def row(mq: MessageQueue) -> PlanRow:
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        old = consumer.get(mq, lo)
        return PlanRow(mq.broker_name, mq.queue_id, lo, hi, old, old, topic=mq.topic)

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
    no_wait: bool = False,
    export: str | None = None,
) -> ResetResult:
    """Confirm, back up, apply per broker, read back (``export``: write the plan to a CSV file
    instead, changing nothing). ``explicit``: offsets are exact targets
    (restore, -o), so no time-based broker reset is used. ``cplus``: ask brokers for the C++
    reset body (None: when a C++ consumer is online). ``no_wait``: skip the second read-back
    after the online clients' commit interval."""
    for q in result.queues:
        q.topic = q.topic or result.topic
    changed = [q for q in result.queues if q.changes]
    if not result.versions:
        result.versions = _versions(ctx.admin())
    if export:
        write_plan_csv(result, Path(export))
        result.exported, result.dry_run, result.address = export, True, ctx.admin().address
        ctx.env.note(f"plan written to {export}; nothing was changed")
        return result
    if result.dry_run or not changed:
        if not changed and not result.dry_run:
            ctx.env.note("nothing to change: every queue is already at its target offset")
        return result
    online = _online(ctx.admin(), result.group)
    if online is not None and online.consume_type == PULL:
        ctx.env.warn(
            f"group {result.group} has pull consumers online ({_ids(online)}): such clients (e.g. "
            "DefaultLitePullConsumer) keep their offsets themselves, ignore a pushed reset and commit their own "
            "offsets back, so they usually undo this change; stop them first"
        )
    if ctx.env.stdin_tty and not ctx.assume_yes:
        show_plan(ctx.env, result)
        if not ctx.confirm(f"Apply to {len(changed)} queue(s) of group {result.group}?"):
            raise errors.Cancelled()
    admin = ctx.admin(write=True)
    infos = {b.broker_name: b for b in admin.cluster_brokers()}
    result.versions = {name: b.version for name, b in infos.items()}
    path = (
        Path(backup_path) if backup_path else default_backup_path(default_home(), result.group, result.topic, ctx.now)
    )
    result.address = admin.address
    OffsetBackup(
        group=result.group,
        topic=result.topic,
        address=admin.address,
        taken_at=int(time.time() * 1000),
        reason="restoreOffset" if result.restored_from else result.action,
        offsets=[
            {**({"topic": q.topic} if result.multi_topic else {}), "broker": q.broker, "queue_id": q.queue_id}
            | {"offset": q.old_offset}
            for q in result.queues
        ],
        clusters=sorted({b.cluster for b in infos.values()}),
        brokers={name: b.addr for name, b in sorted(infos.items())},
    ).write(path)
    result.backup = str(path)
    ctx.env.note(f"backup of the current offsets: {path}")

    by_broker: dict[str, list[PlanRow]] = {}
    for q in changed:
        by_broker.setdefault(q.broker, []).append(q)
    expected: dict[tuple[str, str, int], int] = {q.mq_key: q.new_offset for q in changed}
    pushed: set[str] = set()
    acked: set[tuple[str, str, int]] = set()

    def apply(item: tuple[str, list[PlanRow]]) -> None:
        broker, rows = item
        try:
            how, table = _apply_broker(
                admin, infos.get(broker), result, broker, rows, reset_ts, force, explicit, cplus, acked
            )
            result.method[broker] = how
            if table is not None:
                pushed.add(broker)
                for mq, off in table.items():
                    if (mq.topic, broker, mq.queue_id) in expected:
                        expected[(mq.topic, broker, mq.queue_id)] = off
                        acked.add((mq.topic, broker, mq.queue_id))
        except errors.MqadminError as exc:
            result.errors.append(_error(broker, infos, str(exc), getattr(exc, "code", None)))

    fan_out(apply, sorted(by_broker.items()))
    result.applied_at = int(time.time() * 1000)
    if not admin.address.startswith("mock"):
        result.durability = (
            "Durability: the broker writes consumer offsets to disk every flushConsumerOffsetInterval "
            "(5 s by default) after the apply; a broker crash before then loses this change"
        )
    _verify(ctx, admin, result, expected, pushed, acked, infos)
    if online is not None and not no_wait and result.verified:
        _recheck(ctx, admin, result, online, infos)
    if result.errors and result.verified == result.planned:
        # A lost reply, a cut after the last write: the read-back shows everything in place.
        for e in result.errors:
            ctx.env.warn(f"{_where(e['broker'], infos)}: {e['message']}; the read-back shows its queues applied")
            result.method.setdefault(e["broker"], "applied (the broker's reply was lost; verified by read-back)")
        result.errors = []
    if result.errors:
        result.failure = _failure_line(result, infos)
    return result


def write_plan_csv(result: ResetResult, path: Path) -> None:
    """The plan as CSV, written atomically: one row per queue, ``offset`` the planned one."""
    import csv
    import io

    from mqadmin.safety import atomic_write

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(PLAN_COLUMNS)
    for q in result.queues:
        row = [result.group, q.topic or result.topic, q.broker, q.queue_id, q.new_offset, q.old_offset]
        writer.writerow(["" if v is None else v for v in [*row, q.min_offset, q.max_offset]])
    try:
        atomic_write(path, buf.getvalue())
    except OSError as exc:
        raise errors.UsageError(f"--export {path}: {exc.strerror or exc}") from None


def _error(broker: str, infos: dict[str, BrokerInfo], message: str, code: int | None) -> dict[str, Any]:
    info = infos.get(broker)
    return {"broker": broker, "address": info.addr if info else None, "message": message, "code": code}


PULL = "CONSUME_ACTIVELY"


def _versions(admin: Admin) -> dict[str, str]:
    """Broker name -> version (empty when the cluster cannot say)."""
    try:
        return {b.broker_name: b.version for b in admin.cluster_brokers()}
    except errors.MqadminError:
        return {}


def _online(admin: Admin, group: str) -> ConsumerConnection | None:
    """The group's online clients, None when nobody is online (or it cannot be asked)."""
    try:
        conn = admin.consumer_connections(group)
    except errors.MqadminError:
        return None
    return conn if conn.connections else None


def _ids(online: ConsumerConnection) -> str:
    return ", ".join(sorted(c.client_id for c in online.connections))


def _recheck(
    ctx: Context, admin: Admin, result: ResetResult, online: ConsumerConnection, infos: dict[str, BrokerInfo]
) -> None:
    """Read the applied queues again once the clients' commit interval has passed: a client
    that keeps its own offsets commits them back and undoes the change."""
    ctx.env.note(
        f"waiting {COMMIT_WAIT_S:.0f} s for the {len(online.connections)} online client(s) of group "
        f"{result.group} to commit (their interval is 5 s by default), then reading back again; --no-wait skips this"
    )
    time.sleep(COMMIT_WAIT_S)
    applied = [q for q in result.queues if _applied(q)]

    def read(q: PlanRow) -> int | None:
        try:
            return admin.consumer_offset(result.group, MessageQueue(q.topic, q.broker, q.queue_id))
        except errors.MqadminError:
            return None

    for q, got in zip(applied, fan_out(read, applied), strict=True):
        if got is None or got == q.new_offset:
            continue
        old = q.old_offset if q.old_offset is not None else q.new_offset
        if q.new_offset < old:
            # re-delivering: consumers that took the reset move forward from it, not past where they were
            undone = got < q.new_offset or (online.consume_type == PULL and got >= old)
        else:
            undone = got < q.new_offset
        if undone:
            q.outcome = f"undone: at {got} (committed by {_ids(online)})"
            result.errors.append(_error(q.broker, infos, f"{result.where(q)}queue {q.queue_id}: {q.outcome}", None))
    result.verified = sum(1 for q in result.queues if _applied(q))


def _where(broker: str, infos: dict[str, BrokerInfo]) -> str:
    """A broker's name with its address: operators know brokers by name, networks by address."""
    info = infos.get(broker)
    return f"{broker} ({info.addr})" if info is not None and info.addr else broker


def _failure_line(result: ResetResult, infos: dict[str, BrokerInfo]) -> str:
    """One line saying, per broker, what is true now, and how to undo."""
    counts: dict[str, dict[str, int]] = {}
    for q in result.queues:
        if q.outcome is not None:
            word = q.outcome.split(" ", 1)[0]
            per = counts.setdefault(q.broker, {})
            per[word] = per.get(word, 0) + 1
    applied = sum(1 for q in result.queues if _applied(q) or q.outcome == ACKED)
    parts = [
        f"{_where(b, infos)}: " + ", ".join(f"{n} {w}" for w, n in sorted(per.items()))
        for b, per in sorted(counts.items())
        if set(per) != {"applied"}
    ]
    head = "partly applied" if applied else "not applied"
    return f"{head} ({'; '.join(parts)}); restore with: {result.undo}"


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
    acked: set[tuple[str, str, int]] | None = None,
) -> tuple[str, dict[MessageQueue, int] | None]:
    """Apply one broker's rows (of one or more topics); ``acked`` collects every queue whose
    write the broker acknowledged."""
    group = result.group
    done = acked if acked is not None else set()
    if info is not None and info.server_side_reset:
        for q in rows:
            admin.reset_offset_by_time(
                q.topic,
                group,
                reset_ts if reset_ts is not None else 0,
                True,
                broker_name=broker,
                queue_id=q.queue_id,
                offset=q.new_offset,
            )
            done.add(q.mq_key)
        return f"broker-side reset (server-side, broker {info.version})", None
    if not explicit and reset_ts is not None:
        try:
            cpp = cplus if cplus is not None else _cpp_consumer_online(admin, group)
            table: dict[MessageQueue, int] = {}
            for topic in sorted({q.topic for q in rows}):  # a pushed reset names one topic
                table |= admin.reset_offset_by_time(topic, group, reset_ts, force, broker_name=broker, cplus=cpp)
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
        admin.update_consumer_offset(group, MessageQueue(q.topic, broker, q.queue_id), q.new_offset)
        done.add(q.mq_key)
    return how, None


def _cpp_consumer_online(admin: Admin, group: str) -> bool:
    """C++ consumers decode only the array form of a pushed reset, which brokers send when the
    admin request says it comes from C++; so ask for it when one of them is online."""
    try:
        return any(c.language == "CPP" for c in admin.consumer_connections(group).connections)
    except errors.BrokerError:
        return False


def _verify(
    ctx: Context,
    admin: Admin,
    result: ResetResult,
    expected: dict[tuple[str, str, int], int],
    pushed: set[str],
    acked: set[tuple[str, str, int]],
    infos: dict[str, BrokerInfo],
) -> None:
    """Read back every planned queue, on every broker (a failed apply may still have moved some),
    and record per queue what is true now. Pushed resets get time for the clients to commit."""
    old = {q.mq_key: q.old_offset for q in result.queues}

    def read(k: tuple[str, str, int]) -> int | None:
        try:
            return admin.consumer_offset(result.group, MessageQueue(*k))
        except errors.MqadminError:
            return None  # unreachable, or it answered with an error: we cannot know

    def taken(k: tuple[str, str, int], v: int | None) -> bool:
        """A pushed reset is taken when the committed offset went to the target: seen at it, or
        (re-delivering) between it and where the consumers were, on their way forward again."""
        want, was = expected[k], old.get(k)
        if v is None:
            return False
        if v == want:
            return True
        if was is not None and want < was:
            return want <= v < was
        return v >= want

    deadline = time.monotonic() + (PUSH_VERIFY_TIMEOUT_S if pushed else 0)
    keys = list(expected)
    seen: set[tuple[str, str, int]] = set()
    actual = dict(zip(keys, fan_out(read, keys), strict=True))
    seen |= {k for k, v in actual.items() if k[1] in pushed and taken(k, v)}
    waiting = [k for k in keys if k[1] in pushed and k not in seen]
    if waiting:
        while waiting and time.monotonic() < deadline:  # watch only the queues not seen taken yet
            time.sleep(PUSH_POLL_S)
            for k, v in zip(waiting, fan_out(read, waiting), strict=True):
                if taken(k, v):
                    seen.add(k)
            waiting = [k for k in waiting if k not in seen]
        actual = dict(zip(keys, fan_out(read, keys), strict=True))  # where everything is now
    failed_brokers = {e["broker"] for e in result.errors}
    verified = 0
    for q in result.queues:
        k = q.mq_key
        if k not in expected:
            continue
        got, want = actual[k], expected[k]
        if k in seen and got != want:
            q.outcome = f"{APPLIED} (taken by the consumers, now at {got})"
            q.new_offset = want
            verified += 1
            continue
        if got == want:
            q.outcome = APPLIED
            q.new_offset = want
            verified += 1
        elif got is None:
            q.outcome = ACKED if k in acked else UNKNOWN
        elif got == old.get(k):
            q.outcome = UNCHANGED
        else:
            q.outcome = f"at {got} (planned {want})"
        if not _applied(q) and q.broker not in failed_brokers:
            result.errors.append(_error(q.broker, infos, f"{result.where(q)}queue {q.queue_id}: {q.outcome}", None))
    result.verified, result.planned = verified, len(expected)


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
            raise errors.Cancelled()
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
        for q in rows:
            q.outcome = APPLIED
    for q in changed:
        if q.outcome is None:
            q.outcome = "not verified (see the FAILED line)"
    result.applied_at = int(time.time() * 1000)
    result.planned = len(changed)
    result.verified = sum(1 for q in changed if _applied(q))
    if result.errors:
        failed = ", ".join(sorted({e["broker"] for e in result.errors}))
        result.failure = (
            f"not written for {failed}; restore with: "
            f"mqadmin restoreOffset --from {result.backup} --local-store {local_path}"
        )
    return result
