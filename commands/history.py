"""history: the changes the journal recorded; one change in full; undo one; prune old backups."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from mqadmin.commands._options import DRY_RUN, GROUP, REASON, TOPIC, YES, parse_now
from mqadmin.commands._reset import FORCE_STALE, NO_WAIT
from mqadmin.commands.restore_offset import CLAMP, OTHER_CLUSTER

from mqadmin import errors, journal
from mqadmin.output import ResultBase, Table
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.timeparse import FORMATS_HELP, format_time

if TYPE_CHECKING:
    from datetime import tzinfo

    from mqadmin.commands._plan import ResetResult

    from mqadmin.context import Context

ACTIONS = ("list", "show", "undo", "prune")


@dataclass(frozen=True)
class HistoryParams:
    """history's options: which action, and the filters or limits it takes."""

    action: str
    id: str | None
    group: str | None
    topic: str | None
    since: str | None
    until: str | None
    last: int | None
    keep: int | None
    older_than: str | None
    clamp: bool
    other_cluster: bool
    no_wait: bool
    force_stale: bool
    dry_run: bool
    yes: bool

    def __post_init__(self) -> None:
        if self.action in ("show", "undo") and not self.id:
            raise errors.UsageError(f"history {self.action} needs the ID of a change (the first column of 'history')")
        if self.action in ("list", "prune") and self.id:
            raise errors.UsageError(f"history {self.action} takes no ID (did you mean 'history show {self.id}'?)")
        if self.action == "prune" and self.keep is None and self.older_than is None:
            raise errors.UsageError("history prune needs --keep N and/or --older-than AGE")
        if self.action != "prune" and (self.keep is not None or self.older_than is not None):
            raise errors.UsageError("--keep and --older-than go with 'history prune'")
        if self.keep is not None and self.keep < 1:
            raise errors.UsageError("--keep must be at least 1 (the newest change of each group keeps its backup)")
        if self.last is not None and self.last < 1:
            raise errors.UsageError("--last must be at least 1")
        if self.older_than is not None:
            parse_now(self, "age_ms")

    @cached_property
    def age_ms(self) -> int | None:
        from mqadmin.timeparse import parse_duration_ms

        return None if self.older_than is None else parse_duration_ms(self.older_than)


@register
class HistoryCommand(SubCommand):
    """List the changes mqadmin made (journal), show or undo one, prune old backups (mqadmin extension).

    Every resetOffsetByTime, restoreOffset, skipAccumulatedMessage, cloneGroupOffset and
    rangeReplay to a topic or group appends to $MQADMIN_HOME/journal.jsonl: who ran what
    (secrets removed), against which cluster, each queue's old -> planned -> read-back offset,
    the outcome, the backup and --reason. A change whose run was killed shows "may be partial".
    'history show ID' prints one change; 'history undo ID' puts its backup back exactly as
    'restoreOffset --from BACKUP' does (same checks, a new backup, a new journal entry);
    'history prune --keep N / --older-than AGE' deletes the backups of older changes (never the
    backup of a group's newest change, never a file outside $MQADMIN_HOME/backups).
    """

    name = "history"
    options = (
        Opt(
            "action",
            (),
            f"What to do: {', '.join(ACTIONS)} (default list)",
            default="list",
            metavar="ACTION",
            choices=ACTIONS,
        ),
        Opt("id", (), "The change (its id, or a unique prefix), for show and undo", metavar="ID"),
        GROUP,
        TOPIC,
        Opt("since", ("--since",), f"Only changes started at or after this time: {FORMATS_HELP}", metavar="TIME"),
        Opt("until", ("--until",), "Only changes started before this time", metavar="TIME"),
        Opt("last", ("--last",), "Only the newest N changes (after the other filters)", kind=int, metavar="N"),
        Opt(
            "keep",
            ("--keep",),
            "prune: keep the backups of the newest N changes of each group",
            kind=int,
            metavar="N",
        ),
        Opt(
            "older_than",
            ("--older-than",),
            "prune: remove backups of changes older than AGE (30d, 12h); with --keep, a backup goes only "
            "when both say so",
            metavar="AGE",
        ),
        CLAMP,
        OTHER_CLUSTER,
        NO_WAIT,
        FORCE_STALE,
        DRY_RUN,
        YES,
        REASON,
    )
    params_type = HistoryParams

    def execute(self, ctx: Context, params: HistoryParams) -> Any:
        found = journal.entries()
        if params.action == "show":
            return ChangeResult(_find(found, str(params.id)), ctx.tz)
        if params.action == "undo":
            return _undo(ctx, params, _find(found, str(params.id)), found)
        if params.action == "prune":
            return _prune(ctx, params, found)
        return HistoryResult(_filter(ctx, params, found), ctx.tz)


def _find(found: list[journal.Entry], wanted: str) -> journal.Entry:
    matches = [e for e in found if e.id == wanted] or [e for e in found if e.id.startswith(wanted.lower())]
    if not matches:
        raise errors.UsageError(f"no change {wanted!r} in the journal {journal.journal_path()}")
    if len(matches) > 1:
        raise errors.UsageError(f"{wanted!r} names {len(matches)} changes ({', '.join(e.id for e in matches)})")
    return matches[0]


def _filter(ctx: Context, params: HistoryParams, found: list[journal.Entry]) -> list[journal.Entry]:
    since = ctx.time(params.since) if params.since else None
    until = ctx.time(params.until) if params.until else None
    kept = [
        e
        for e in found
        if (params.group is None or params.group in (e.record.get("group"), e.record.get("source_group")))
        and (params.topic is None or params.topic in e.record.get("topics", []))
        and (since is None or e.started_at >= since)
        and (until is None or e.started_at < until)
    ]
    return kept[-params.last :] if params.last else kept


def _undo(ctx: Context, params: HistoryParams, entry: journal.Entry, found: list[journal.Entry]) -> ResetResult:
    """Put the change's backup back through restoreOffset itself (its checks, backup, journal);
    say first which later changes of the group the undo discards too."""
    from mqadmin.commands.restore_offset import RestoreOffsetCommand, RestoreOffsetParams

    backup = entry.record.get("backup")
    if not backup:
        raise errors.UsageError(
            f"change {entry.id} ({entry.record['command']}) has no backup to put back"
            + ("; messages a replay sent stay sent" if entry.record.get("replay") else "")
        )
    from pathlib import Path

    if not Path(backup).exists():
        raise errors.UsageError(f"the backup of change {entry.id} ({backup}) is gone (pruned or deleted)")
    group = entry.record.get("group")
    later = [
        e
        for e in found
        if e.started_at > entry.started_at and e.record.get("group") == group and not e.record.get("replay")
    ]
    if later:
        ctx.env.warn(
            f"change {entry.id} is not the newest change of group {group}: undoing it puts back the offsets from "
            f"before it, which also discards the later change(s) "
            + ", ".join(f"{e.id} ({e.record['command']}, {e.outcome})" for e in later)
        )
    ctx.reason = ctx.reason or f"undo of {entry.id}"
    restore = RestoreOffsetParams(
        from_=backup,
        group=entry.record.get("group"),
        topic=None,
        clamp=params.clamp,
        other_cluster=params.other_cluster,
        no_wait=params.no_wait,
        dry_run=params.dry_run,
        yes=params.yes,
        backup=None,
        local_store=entry.record.get("local_store"),
        while_running=False,
        force_stale=params.force_stale,
        partial=False,
    )
    return RestoreOffsetCommand().execute(ctx, restore)


def _prune(ctx: Context, params: HistoryParams, found: list[journal.Entry]) -> PruneResult:
    """Delete the backups of a group's older changes: beyond the newest --keep of the group and
    older than --older-than (each limit given must agree). A group's newest change always keeps
    its backup; files outside $MQADMIN_HOME/backups (a --backup PATH) are never touched."""
    import os

    from mqadmin.config import default_home
    from mqadmin.safety import backup_dir

    home = os.path.realpath(backup_dir(default_home()))
    cutoff = ctx.now - params.age_ms if params.age_ms is not None else None
    by_group: dict[str, list[journal.Entry]] = {}
    for e in found:
        if e.record.get("backup"):
            by_group.setdefault(str(e.record.get("group")), []).append(e)
    removed: list[journal.Entry] = []
    kept = 0
    for changes in by_group.values():
        changes.sort(key=lambda e: e.started_at, reverse=True)
        for rank, e in enumerate(changes):
            path = str(e.record["backup"])
            if not os.path.exists(path):
                continue
            beyond = params.keep is None or rank >= params.keep
            old = cutoff is None or e.started_at < cutoff
            inside = os.path.dirname(os.path.realpath(path)) == home
            if rank == 0 or not (beyond and old) or not inside:
                kept += 1
                continue
            if not params.dry_run:
                os.unlink(path)
            removed.append(e)
    removed.sort(key=lambda e: e.started_at)
    return PruneResult(removed, kept, params.dry_run, ctx.tz)


def _topics(record: dict[str, Any]) -> str:
    return ",".join(record.get("topics") or [])


def _where(record: dict[str, Any]) -> str:
    clusters = ",".join(record.get("clusters") or [])
    return f"{clusters} at {record.get('address')}" if clusters else str(record.get("address") or "-")


def _entry_json(e: journal.Entry, tz: tzinfo | None) -> dict[str, Any]:
    doc = {k: v for k, v in e.record.items() if k != "format"}
    doc["started_at_iso"] = format_time(e.started_at, tz)
    doc["finished"] = e.finished
    doc["outcome"] = e.outcome
    return doc


@dataclass
class HistoryResult(ResultBase):
    entries: list[journal.Entry]
    tz: tzinfo | None = None

    def to_json(self) -> dict[str, Any]:
        return {"journal": str(journal.journal_path()), "changes": [_entry_json(e, self.tz) for e in self.entries]}

    def table(self) -> Table:
        rows = [
            [
                e.id,
                format_time(e.started_at, self.tz),
                e.record["command"],
                e.record.get("group") or "-",
                _topics(e.record),
                _where(e.record),
                f"{e.record.get('user')}@{e.record.get('host')}",
                len(e.record.get("queues") or []) or (e.record.get("replay") or {}).get("messages", 0),
                e.outcome,
                e.record.get("reason") or "-",
            ]
            for e in self.entries
        ]
        columns = ["ID", "Started", "Command", "Group", "Topics", "Cluster", "By", "Queues/Msgs", "Outcome", "Reason"]
        footer = [f"Journal: {journal.journal_path()}"]
        if not self.entries:
            footer.insert(0, "No change recorded (with these filters).")
        return Table(columns, rows, f"Changes ({len(self.entries)})", footer)


@dataclass
class ChangeResult(ResultBase):
    entry: journal.Entry
    tz: tzinfo | None = None
    #: its JSON document (docs/schemas/history-show.schema.json)
    schema_name = "history-show"

    def to_json(self) -> dict[str, Any]:
        return _entry_json(self.entry, self.tz)

    def table(self) -> Table:
        r = self.entry.record
        queues = r.get("queues") or []
        clients = any(q.get("client") for q in queues)  # broadcast clients' local offsets
        rows = [
            [q["topic"], q["broker"], q["queue_id"], *([q.get("client")] if clients else []), q["old"], q["planned"]]
            + [q.get("read_back"), q.get("outcome") or ("-" if self.entry.finished else self.entry.outcome)]
            for q in queues
        ]
        columns = ["Topic", "Broker", "QID", *(["Client"] if clients else []), "Old", "Planned", "Read Back", "Result"]
        footer = [
            f"Started: {format_time(self.entry.started_at, self.tz)}"
            + (f"; finished: {format_time(self.entry.time, self.tz)}" if self.entry.finished else ""),
            f"By: {r.get('user')}@{r.get('host')} (pid {r.get('pid')})",
            f"Command: {' '.join(r.get('command_line') or []) or '-'}",
            f"Cluster: {_where(r)}",
            f"Outcome: {self.entry.outcome}",
        ]
        if r.get("reason"):
            footer.append(f"Reason: {r['reason']}")
        if r.get("error"):
            footer.append(f"Error: {r['error']}")
        if r.get("replay"):
            rp = r["replay"]
            sent = f", sent {rp['sent']}" if "sent" in rp else ""
            footer.append(
                f"Replay to {rp['to']}: [{format_time(rp['begin'], self.tz)}, {format_time(rp['end'], self.tz)}), "
                f"{rp['messages']} message(s) planned{sent}"
            )
        if r.get("backup"):
            import os

            gone = "" if os.path.exists(r["backup"]) else " (gone: pruned or deleted)"
            footer.append(f"Backup: {r['backup']}{gone}")
            footer.append(f"Undo: mqadmin history undo {self.entry.id}")
        title = f"Change {self.entry.id}: {r['command']} of group {r.get('group') or '-'} on {_topics(r)}"
        return Table(columns, rows, title, footer)


@dataclass
class PruneResult(ResultBase):
    removed: list[journal.Entry]
    kept: int
    dry_run: bool
    tz: tzinfo | None = None
    #: its JSON document (docs/schemas/history-prune.schema.json)
    schema_name = "history-prune"

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": [
                {"id": e.id, "group": e.record.get("group"), "backup": e.record["backup"]} for e in self.removed
            ],
            "kept": self.kept,
        }

    def table(self) -> Table:
        rows = [
            [e.id, format_time(e.started_at, self.tz), e.record.get("group"), e.record["backup"]] for e in self.removed
        ]
        verb = "Would remove" if self.dry_run else "Removed"
        footer = [f"{verb} {len(self.removed)} backup(s); kept {self.kept}"]
        if self.dry_run:
            footer.append("Dry run: nothing was deleted.")
        title = "Backups to prune (dry run)" if self.dry_run else "Backups pruned"
        return Table(["ID", "Started", "Group", "Backup"], rows, title, footer)
