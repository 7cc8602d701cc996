"""A reset plan: one row per queue (where it is, where it goes, what happened), and how the
plan reads as a table, as JSON, as the Java tool's text and as an exported CSV."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
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

#: PlanRow.outcome values
APPLIED = "applied"
UNCHANGED = "unchanged"
UNKNOWN = "unknown (broker unreachable)"
ACKED = "acknowledged (not read back: broker unreachable)"
#: read back at neither the planned nor the old offset, and no consumer of the group explains it
OVERWRITTEN = "overwritten by another change"
#: Ctrl-C during the apply, and the queue did not answer the short read-back after it
INTERRUPTED_UNKNOWN = "unknown (interrupted; not read back)"


def not_applied(q: PlanRow) -> bool:
    return q.outcome is not None and not applied(q)


def applied(q: PlanRow) -> bool:
    return q.outcome is not None and q.outcome.startswith(APPLIED)


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
    #: Ctrl-C after the first write: no further writes, outcomes from a short read-back (exit 130)
    interrupted: bool = False

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
        lines += [f"  {self.where(q)}{q.broker} queue {q.queue_id}: {q.outcome}" for q in self.queues if not_applied(q)]
        if self.backup:
            lines += [f"Backup: {self.backup}", f"Undo: {self.undo}"]
        return lines

    def java_text(self) -> str:
        """The Java tool's text for this command, column for column (its printf formats; the
        words differ between the 4.9 and 5.x tools, so they follow the brokers' version)."""
        if self.source_group is not None:
            # Java prints this without a line break; ours ends the line
            return (
                f"clone group offset success. srcGroup[{self.source_group}], destGroup=[{self.group}], "
                f"topic[{self.topic}]\n"
            )
        from mqadmin.protocol.versions import is_v5, server_side_reset

        versions = [self.versions.get(q.broker, "") for q in self.queues] or list(self.versions.values())
        v4 = any(v and not is_v5(v) for v in versions)
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
            old_form = not versions or any(not server_side_reset(v) for v in versions)
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
        footer = [f"{broker}: {how}" for broker, how in sorted(self.method.items())]
        if self.verified is not None and self.planned is not None:
            if self.verified == self.planned:
                footer.append(f"Verified: {self.verified} queues read back at their planned offsets")
            else:
                wrong = [
                    f"{self.where(q)}{q.broker} queue {q.queue_id}: {q.outcome}" for q in self.queues if not_applied(q)
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
        return footer


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
