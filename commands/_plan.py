"""A reset plan: one row per queue (where it is, where it goes, what happened), and how the
plan reads as a table, as JSON, as the Java tool's text and as an exported CSV."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._common import time_fields

from mqadmin import errors
from mqadmin.output import ResultBase, Table

if TYPE_CHECKING:
    from mqadmin.localstore import OffsetsFile

#: the columns of an exported plan: kafka-consumer-groups' group,topic,partition,offset, where a
#: RocketMQ queue is named by its broker and queue id; the last three are for reading only
PLAN_COLUMNS = ("group", "topic", "broker", "queue", "offset", "old_offset", "min_offset", "max_offset")


class Outcome(str, Enum):
    """What the read-back found a planned queue at: the stable code scripts match (JSON
    ``outcome``); the sentence a person reads is the row's ``detail``."""

    #: read back at the planned offset (or seen taking a pushed reset)
    APPLIED = "applied"
    #: read back at its old offset: the write did not land
    UNCHANGED = "unchanged"
    #: the write was acknowledged, but the broker did not answer the read-back
    ACKED = "acked"
    #: no write acknowledged and no read-back answer
    UNKNOWN = "unknown"
    #: Ctrl-C during the apply, and the queue did not answer the short read-back after it
    INTERRUPTED_UNKNOWN = "interrupted-unknown"
    #: at neither the planned nor the old offset, and no consumer of the group explains it
    OVERWRITTEN = "overwritten"
    #: at neither the planned nor the old offset, with consumers that may have moved it
    MOVED = "moved"
    #: applied, then a client committed its own offset over it (the second read-back)
    UNDONE = "undone"
    #: a local offsets file whose write or read-back failed (see the FAILED line)
    UNVERIFIED = "unverified"

    @property
    def word(self) -> str:
        """The word a failure line counts this outcome by ("2 unchanged, 1 at")."""
        return _WORDS.get(self, self.value)


_WORDS = {
    Outcome.ACKED: "acknowledged",
    Outcome.INTERRUPTED_UNKNOWN: "unknown",
    Outcome.MOVED: "at",
    Outcome.UNVERIFIED: "not",
}


@dataclass(frozen=True)
class RowOutcome:
    """A row's outcome: the code, the sentence, and the offset the read-back found (None: none)."""

    code: Outcome
    detail: str
    read_back: int | None = None

    @property
    def applied(self) -> bool:
        return self.code is Outcome.APPLIED


def outcome_applied(want: int) -> RowOutcome:
    return RowOutcome(Outcome.APPLIED, "applied", want)


def outcome_taken(got: int | None) -> RowOutcome:
    return RowOutcome(Outcome.APPLIED, f"applied (taken by the consumers, now at {got})", got)


def outcome_unchanged(old: int | None) -> RowOutcome:
    return RowOutcome(Outcome.UNCHANGED, "unchanged", old)


ACKED = RowOutcome(Outcome.ACKED, "acknowledged (not read back: broker unreachable)")
UNKNOWN = RowOutcome(Outcome.UNKNOWN, "unknown (broker unreachable)")
INTERRUPTED_UNKNOWN = RowOutcome(Outcome.INTERRUPTED_UNKNOWN, "unknown (interrupted; not read back)")
UNVERIFIED = RowOutcome(Outcome.UNVERIFIED, "not verified (see the FAILED line)")


def outcome_elsewhere(got: int | None, want: int, *, consumers: bool) -> RowOutcome:
    """At neither end: moved (consumers may explain it) or overwritten (nothing does)."""
    if consumers:
        return RowOutcome(Outcome.MOVED, f"at {got} (planned {want})", got)
    return RowOutcome(Outcome.OVERWRITTEN, f"overwritten by another change: at {got} (planned {want})", got)


def outcome_undone(got: int, who: str) -> RowOutcome:
    return RowOutcome(Outcome.UNDONE, f"undone: at {got} (committed by {who})", got)


class Method(str, Enum):
    """How a broker (or a client's offsets file) took the change: the stable code (JSON
    ``method_code``); the sentence is ``ApplyMethod.detail`` (JSON ``method``)."""

    #: useServerSideResetOffset: reset per queue on the broker, served to the consumers
    SERVER_SIDE = "server-side"
    #: a time pushed to the online consumers, which apply and commit it
    PUSHED = "pushed"
    #: UPDATE_CONSUMER_OFFSET per queue
    DIRECT = "direct"
    #: the broker's reply was lost; the read-back shows its queues applied
    REPLY_LOST = "reply-lost"
    #: a broadcast client's offsets file rewritten
    FILE = "file"


@dataclass(frozen=True)
class ApplyMethod:
    code: Method
    detail: str


@dataclass(frozen=True)
class ApplyError:
    """A broker (or client file) the apply or read-back failed on."""

    broker: str
    message: str
    address: str | None = None
    code: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "address": self.address, "message": self.message, "code": self.code}

    def line(self) -> str:
        where = f"{self.broker} ({self.address})" if self.address else self.broker
        return f"FAILED {where}: {self.message}"


def not_applied(q: PlanRow) -> bool:
    return q.outcome is not None and not q.outcome.applied


def applied(q: PlanRow) -> bool:
    return q.outcome is not None and q.outcome.applied


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
    outcome: RowOutcome | None = None
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
    def detail(self) -> str | None:
        """The outcome as a person reads it (None: not applied yet)."""
        return None if self.outcome is None else self.outcome.detail

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
    method: dict[str, ApplyMethod] = field(default_factory=dict)
    backup: str | None = None
    errors: list[ApplyError] = field(default_factory=list)
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
    #: Ctrl-C after the first write: no further writes, outcomes from a short read-back (exit 130)
    interrupted: bool = False

    @property
    def planned(self) -> int | None:
        """After an apply: the queues it wrote (each has an outcome from the read-back)."""
        return None if self.applied_at is None else sum(1 for q in self.queues if q.outcome is not None)

    @property
    def verified(self) -> int | None:
        """After an apply: the queues read back at their planned offsets."""
        return None if self.applied_at is None else sum(1 for q in self.queues if applied(q))

    @property
    def schema_name(self) -> str:
        """The JSON document names the command that made the plan (history undo: restoreOffset)."""
        return self.action

    @property
    def multi_topic(self) -> bool:
        """The plan spans several topics (-t A,B, --all-topics), or its rows are queues of other
        topics than the one named (a lite group's lite topics of -t <parent>): rows name their topic."""
        topics = {q.topic for q in self.queues if q.topic}
        return len(topics) > 1 or bool(topics - {self.topic})

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
            "method": {b: m.detail for b, m in self.method.items()} or None,
            "method_code": {b: m.code.value for b, m in self.method.items()} or None,
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
                    **({"outcome": q.outcome.code.value, "detail": q.outcome.detail} if q.outcome is not None else {}),
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
            doc["errors"] = [e.to_json() for e in self.errors]
        if self.interrupted:
            doc["interrupted"] = True
        return doc

    def lost_report_lines(self) -> list[str]:
        """When the report cannot be written (stdout on a full disk): what the change did, in a
        few lines for stderr, with the backup and the undo line (nothing when nothing changed)."""
        if self.applied_at is None:
            return []
        head = "mqadmin: the report could not be written, but offsets were changed"
        if self.verified is not None and self.planned is not None:
            head += (
                f": {self.verified} of {self.planned} queue(s) of group {self.group} read back at their planned offsets"
            )
        lines = [head]
        lines += [f"  {self.where(q)}{q.broker} queue {q.queue_id}: {q.detail}" for q in self.queues if not_applied(q)]
        if self.backup:
            lines += [f"Backup: {self.backup}", f"Undo: {self.undo}"]
        return lines

    def java_text(self) -> str:
        """The Java tool's text for the command that made this plan (``JAVA_TEXT``)."""
        return JAVA_TEXT[self.action](self)

    def table(self) -> Table:
        local = self.local_files is not None
        outcomes = any(q.outcome is not None for q in self.queues)
        multi = self.multi_topic
        rows: list[list[Any]] = [
            ([q.client] if local else [])
            + ([q.topic] if multi else [])
            + [q.broker, q.queue_id, q.min_offset, q.max_offset, q.old_offset, q.new_offset, q.describe()]
            + ([q.detail or "-"] if outcomes else [])
            for q in self.queues
        ]
        columns = (
            (["Client"] if local else [])
            + (["Topic"] if multi else [])
            + ["Broker", "QID", "Min", "Max", "Old Offset", "New Offset", "Change"]
        )
        if outcomes:
            columns.append("Result")
        return Table(columns, rows, self._title(), self._plan_footer() + self._apply_footer())

    def _title(self) -> str:
        if self.source_group is not None:
            title = f"Clone plan for group {self.group} from group {self.source_group} on topic {self.topic}"
        elif self.action == "skipAccumulatedMessage":
            title = f"Skip plan for group {self.group} on topic {self.topic} (every queue to its max offset)"
        else:
            verb = "Restore" if self.restored_from else "Reset"
            title = f"{verb} plan for group {self.group} on topic{'s' if self.multi_topic else ''} {self.topic}"
        return title + (" (local offsets files)" if self.local_files is not None else "")

    def _plan_footer(self) -> list[str]:
        """What the plan does: totals, the time, how the targets were chosen, the dry run."""
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
        return footer

    def _apply_footer(self) -> list[str]:
        """What the apply did: per broker how, the read-back, when, the backup and undo, failures."""
        footer = [f"{broker}: {how.detail}" for broker, how in sorted(self.method.items())]
        if self.verified is not None and self.planned is not None:
            if self.verified == self.planned:
                footer.append(f"Verified: {self.verified} queues read back at their planned offsets")
            else:
                wrong = [
                    f"{self.where(q)}{q.broker} queue {q.queue_id}: {q.detail}" for q in self.queues if not_applied(q)
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
        footer += [e.line() for e in self.errors]
        return footer


def _java_v4(result: ResetResult) -> bool:
    """The Java tool's words follow the brokers' version (4.9 and 5.x tools differ)."""
    from mqadmin.protocol.versions import is_v5

    return any(v and not is_v5(v) for v in _java_versions(result))


def _java_versions(result: ResetResult) -> list[str]:
    return [result.versions.get(q.broker, "") for q in result.queues] or list(result.versions.values())


def _java_old_form(result: ResetResult) -> bool:
    """The table of a client-side (or direct) reset: 6 columns; else the broker-side reset's 3."""
    from mqadmin.protocol.versions import server_side_reset

    if result.method:
        return any(m.code is Method.DIRECT for m in result.method.values())
    versions = _java_versions(result)
    return not versions or any(not server_side_reset(v) for v in versions)


def _java_rows(result: ResetResult, *, v4_words: bool) -> list[str]:
    """The per-queue table, column for column (the Java tool's printf formats)."""
    rows = sorted(result.queues, key=lambda q: (q.broker, q.queue_id))
    if not _java_old_form(result):
        lines = ["  ".join(f"{h:<40}" for h in ("#brokerName", "#queueId", "#offset"))]
        return lines + ["  ".join(f"{c:<40}" for c in (q.broker[:32], q.queue_id, q.new_offset)) for q in rows]
    last = "#rollbackOffset" if v4_words else "#resetOffset"
    heads = ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", last)
    lines = ["  ".join(f"{h:<20}" for h in heads)]
    for q in rows:
        old = q.old_offset if q.old_offset is not None else (q.min_offset or 0)
        target = q.target if q.target is not None else q.new_offset
        cells = (q.broker[:32], q.queue_id, q.max_offset or 0, old, target, q.new_offset)
        lines.append("  ".join(f"{c:<20}" for c in cells))
    return lines


def java_reset(result: ResetResult) -> str:
    """resetOffsetByTime (and restoreOffset, which the Java tool lacks): the head line, then the table."""
    v4 = _java_v4(result)
    ts_long = result.timestamp if result.timestamp is not None else 0
    ts_text = result.timestamp_text if result.timestamp_text is not None else str(ts_long)
    force = "true" if result.force else "false"
    if result.timestamp is None and len(result.queues) == 1:  # -b -q -o
        q = result.queues[0]
        return (
            f"start reset consumer offset by specified, group[{result.group}], topic[{result.topic}], "
            f"queueId[{q.queue_id}], broker[{q.broker}], timestamp(string)[{ts_text}], timestamp(long)[{ts_long}]\n"
            f"reset consumer offset to {q.new_offset}\n"
        )
    if _java_old_form(result):
        head = f"{'rollback' if v4 else 'reset'} consumer offset by specified consumerGroup[{result.group}]"
    else:
        head = f"{'rollback consumer offset' if v4 else 'start reset consumer offset'} by specified"
        head += f"{'' if v4 else ','} group[{result.group}]"
    head += f", topic[{result.topic}], force[{force}], timestamp(string)[{ts_text}], timestamp(long)[{ts_long}]"
    return "\n".join([head, *_java_rows(result, v4_words=v4)]) + "\n"


def java_skip(result: ResetResult) -> str:
    """skipAccumulatedMessage: the table alone (the Java tool prints no head line)."""
    return "\n".join(_java_rows(result, v4_words=True)) + "\n"


def java_clone(result: ResetResult) -> str:
    """cloneGroupOffset: one line (Java prints it without a line break; ours ends the line)."""
    return (
        f"clone group offset success. srcGroup[{result.source_group}], destGroup=[{result.group}], "
        f"topic[{result.topic}]\n"
    )


#: the Java text of each command that makes a plan
JAVA_TEXT: dict[str, Callable[[ResetResult], str]] = {
    "resetOffsetByTime": java_reset,
    "restoreOffset": java_reset,
    "skipAccumulatedMessage": java_skip,
    "cloneGroupOffset": java_clone,
}


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
