"""The journal: one JSON line per change in ``$MQADMIN_HOME/journal.jsonl``, so "what did
yesterday's reset do, and who ran it?" has an answer.

A change writes two lines with the same id: ``started`` right before the first offset moves
(fsynced, so a run killed mid-apply leaves a line saying the change may be partial) and
``finished`` after the read-back, with each queue's old -> planned -> read-back offset and the
outcome. Lines are appended with one ``write`` under an exclusive ``flock``; a line torn by a
kill or a full disk is cut off by the next writer, so every line a reader meets is whole.
The lines follow docs/schemas/journal.schema.json.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.config import default_home

if TYPE_CHECKING:
    from mqadmin.commands._plan import PlanRow, ResetResult
    from mqadmin.commands._range_replay_result import RangeReplayResult
    from mqadmin.context import Context
    from mqadmin.replay.planner import Plan
    from mqadmin.replay.sinks import Target

FORMAT = "mqadmin-journal/1"
STARTED, FINISHED = "started", "finished"
#: the outcome a started line carries: true until its finished line follows
IN_PROGRESS = "in progress (may be partial)"
#: what history says of a started change without a finished line
MAY_BE_PARTIAL = "may be partial (no finished line: the run was killed or crashed)"

#: options whose value is a secret (the value is replaced on the recorded command line)
SECRET_FLAGS = frozenset({"--secret-key", "-sk", "--secretKey", "--password", "--token"})
_SECRET_WORD = re.compile(r"secret|passw|token|credential|private", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^/:@\s]*:)[^/@\s]*@")
REDACTED = "***"


def journal_path() -> Path:
    return Path(default_home()) / "journal.jsonl"


# --- writing -------------------------------------------------------------------------------


def append(record: dict[str, Any], path: Path | None = None) -> None:
    """Append ``record`` as one line: one ``write`` with O_APPEND under an exclusive lock, then
    fsync. A torn last line (a writer killed mid-write, a full disk) is cut off first; a short
    write is undone, so the file only ever holds whole lines."""
    import fcntl

    target = path or journal_path()
    line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = _cut_torn_tail(fd, target)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(28, "No space left on device (short write)", str(target))
            os.fsync(fd)
        except OSError as exc:
            os.ftruncate(fd, size)  # never leave half a line behind
            if exc.filename is None:
                raise OSError(exc.errno, exc.strerror, str(target)) from exc
            raise
    finally:
        os.close(fd)  # releases the lock


def _cut_torn_tail(fd: int, path: Path) -> int:
    """The file's size once a last line without its newline is cut off (under the lock)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    cut = _last_newline(fd, size)
    os.ftruncate(fd, cut)
    return cut


def _last_newline(fd: int, before: int) -> int:
    """Offset just after the last newline before ``before`` (0: none), reading backwards."""
    while before > 0:
        start = max(0, before - (1 << 20))
        chunk = os.pread(fd, before - start, start)
        if b"\n" in chunk:
            return start + chunk.rfind(b"\n") + 1
        before = start
    return 0


def redact(args: list[str]) -> list[str]:
    """The command line with secrets replaced: values of --secret-key and the like (as the next
    word or after '='), of options or KEY=VALUE settings whose name says secret/password/token,
    the secret half of --acl AK:SK, and passwords in URLs."""
    out: list[str] = []
    hide_next: str | None = None
    for arg in args:
        if hide_next is not None:
            out.append(_hide_acl(arg) if hide_next == "--acl" else REDACTED)
            hide_next = None
            continue
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and (flag in SECRET_FLAGS or flag == "--acl" or _SECRET_WORD.search(flag)):
            if eq:
                out.append(f"{flag}={_hide_acl(value) if flag == '--acl' else REDACTED}")
            else:
                out.append(arg)
                hide_next = flag
            continue
        if eq and not arg.startswith("-") and _SECRET_WORD.search(flag):  # --spark-conf fs.s3a.secret.key=...
            out.append(f"{flag}={REDACTED}")
            continue
        out.append(_URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", arg))
    return out


def _hide_acl(value: str) -> str:
    ak, sep, _sk = value.partition(":")
    return f"{ak}:{REDACTED}" if sep else REDACTED


def _who() -> dict[str, Any]:
    import socket

    try:
        import getpass

        user = getpass.getuser()
    except Exception:  # no passwd entry (a container with an arbitrary uid)
        user = str(os.getuid())
    return {"user": user, "host": socket.gethostname(), "pid": os.getpid()}


def _base(ctx: Context, command: str) -> dict[str, Any]:
    import secrets
    import time

    from mqadmin.timeparse import format_time

    now = int(time.time() * 1000)
    argv = ctx.env.argv
    return {
        "format": FORMAT,
        "id": secrets.token_hex(4),
        "event": STARTED,
        "time": now,
        "time_iso": format_time(now),
        "command": command,
        **_who(),
        "command_line": ["mqadmin", *redact(list(argv))] if argv is not None else None,
        "reason": ctx.reason,
    }


@dataclass
class Change:
    """One change being journaled: the started line's record, completed by ``finish``."""

    record: dict[str, Any]


def started(ctx: Context, result: ResetResult) -> Change:
    """Before the first offset write of a reset, restore, skip or clone: the plan, the cluster
    and the backup, outcome "in progress". Raises when the line cannot be written, so nothing
    moves that the journal does not know about."""
    command = "restoreOffset" if result.restored_from else result.action
    record = _base(ctx, command)
    backup = _backup_facts(result.backup)
    record |= {
        "address": result.address or backup.get("address") or None,
        "clusters": backup.get("clusters"),
        "group": result.group,
        "topics": sorted({q.topic or result.topic for q in result.queues}) or [result.topic],
        "source_group": result.source_group,
        "restored_from": result.restored_from,
        "backup": os.path.abspath(result.backup) if result.backup else None,
        "local_store": result.local_path,
        "queues": [_queue(result, q) for q in result.queues if q.changes],
        "replay": None,
        "outcome": IN_PROGRESS,
    }
    append(record)
    return Change(record)


def finished(ctx: Context, change: Change | None, result: ResetResult) -> None:
    """After the read-back: each queue's read-back offset and outcome, and the change's. A
    journal that cannot take the line is warned about; the change itself is done."""
    if change is None:
        return
    rows = {(q.topic or result.topic, q.broker, q.queue_id, q.client): q for q in result.queues}
    queues = []
    for entry in change.record["queues"]:
        q = rows.get((entry["topic"], entry["broker"], entry["queue_id"], entry.get("client")))
        queues.append(entry | ({"read_back": _read_back(q), "outcome": q.detail} if q is not None else {}))
    if result.errors or (result.planned is not None and result.verified != result.planned):
        outcome = "failed" if not result.verified else "partial"
    else:
        outcome = "applied"
    _finish(ctx, change, queues=queues, outcome=outcome, error=result.failure, verified=result.verified)


def replay_started(ctx: Context, target: Target, plan: Plan) -> Change:
    """Before a replay re-publishes to a topic or re-delivers to a group: what it will send."""
    record = _base(ctx, "rangeReplay")
    record |= {
        "address": ctx.admin().address,
        "clusters": None,
        "group": target.value if target.scheme == "group" else None,
        "topics": [plan.topic],
        "source_group": None,
        "restored_from": None,
        "backup": None,
        "local_store": None,
        "queues": [],
        "replay": {"to": str(target), "begin": plan.begin, "end": plan.end, "messages": plan.total},
        "outcome": IN_PROGRESS,
    }
    append(record)
    return Change(record)


def replay_finished(ctx: Context, change: Change | None, result: RangeReplayResult) -> None:
    """After a replay to a topic or group: how many messages it sent."""
    if change is None:
        return
    sent = sum(q.written or 0 for q in result.queues)
    replay = change.record["replay"] | {"sent": sent}
    _finish(ctx, change, queues=[], outcome="sent", error=result.failure, replay=replay)


def _finish(ctx: Context, change: Change, **facts: Any) -> None:
    import time

    from mqadmin.timeparse import format_time

    now = int(time.time() * 1000)
    record = change.record | {"event": FINISHED, "time": now, "time_iso": format_time(now)} | facts
    try:
        append(record)
    except OSError as exc:
        ctx.env.warn(f"the journal {journal_path()} could not record the end of change {record['id']}: {exc}")


def _queue(result: ResetResult, q: PlanRow) -> dict[str, Any]:
    return {
        "topic": q.topic or result.topic,
        "broker": q.broker,
        "queue_id": q.queue_id,
        **({"client": q.client} if q.client is not None else {}),
        "old": q.old_offset,
        "planned": q.new_offset,
    }


def _read_back(q: PlanRow) -> int | None:
    """Where the read-back found the queue (None: not read back)."""
    return None if q.outcome is None else q.outcome.read_back


def _backup_facts(path: str | None) -> dict[str, Any]:
    """The address and clusters the backup just written records."""
    if not path:
        return {}
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


# --- reading -------------------------------------------------------------------------------


@dataclass
class Entry:
    """One change as history shows it: its last line (finished, else started)."""

    record: dict[str, Any]
    finished: bool

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def time(self) -> int:
        return int(self.record["time"])

    @property
    def started_at(self) -> int:
        return int(self.record.get("started_at", self.record["time"]))

    @property
    def outcome(self) -> str:
        if self.finished:
            return str(self.record["outcome"])
        if self.record.get("host") == _who()["host"] and _alive(int(self.record.get("pid", 0)), self.started_at):
            return f"in progress (pid {self.record['pid']} is running)"
        return MAY_BE_PARTIAL


def _alive(pid: int, since: int) -> bool:
    """Whether the process that started a change may still be applying it (a pid is reused in
    time: a change started a day ago is not in progress)."""
    import time

    if pid <= 0 or pid == os.getpid() or time.time() * 1000 - since > 86_400_000:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_lines(path: Path | None = None) -> Iterator[dict[str, Any]]:
    """Every whole, parseable record, in file order (a torn last line is skipped)."""
    target = path or journal_path()
    try:
        f = target.open("rb")
    except FileNotFoundError:
        return
    with f:
        for raw in f:
            if not raw.endswith(b"\n"):
                return  # a writer is mid-line or was killed mid-line: not a record
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("id"), str):
                yield doc


def entries(path: Path | None = None) -> list[Entry]:
    """One entry per change, oldest first (by the time it started)."""
    by_id: dict[str, Entry] = {}
    order: list[str] = []
    for doc in read_lines(path):
        cid = doc["id"]
        if cid not in by_id:
            order.append(cid)
        if doc.get("event") == FINISHED:
            start = by_id.get(cid)
            began = start.record["time"] if start is not None else doc["time"]
            by_id[cid] = Entry(doc | {"started_at": began}, True)
        elif cid not in by_id:
            by_id[cid] = Entry(doc, False)
    return sorted((by_id[c] for c in order), key=lambda e: e.started_at)
