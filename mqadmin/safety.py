"""Nothing a user had is lost: atomic file writes, and offset backups that restore."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqadmin.errors import StoreError, UsageError

BACKUP_FORMAT = "mqadmin-offset-backup/1"


def atomic_write(
    path: str | os.PathLike[str], data: bytes | str, *, keep_bak: bool = False, shared: bool = False
) -> None:
    """Write via a temp file + fsync + rename, so readers see the old or the new file, never half.

    With ``keep_bak`` the previous content is kept as ``<name>.bak`` first, as RocketMQ's
    config writer does (its readers fall back to the .bak when the main file is broken).
    The file is private (0600, as the temp file is made) unless ``shared``: then its mode is
    what the umask gives a new file, as for a file the shell creates (a file for other
    programs, e.g. node_exporter's textfile collector running as another user).
    """
    target = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if shared:
                os.fchmod(f.fileno(), 0o666 & ~_umask())
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        if keep_bak and target.exists():
            bak = target.with_name(target.name + ".bak")
            atomic_copy(target, bak)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.filename in (None, tmp):  # name the file asked for, not the temp
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def read_text_file(path: Path, what: str) -> str:
    """A file the user named (a backup, a plan) as UTF-8 text; a usage error that names it and
    says plainly what it is instead (missing, a directory, unreadable, binary)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path} is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path} is not text (not UTF-8 at byte {exc.start}): is it the right file?") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def atomic_copy(src: Path, dst: Path) -> None:
    atomic_write(dst, src.read_bytes())


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def json_int(value: Any, what: str) -> int:
    """A JSON integer and nothing that merely converts to one (``true``, ``12.5``, ``"100"``,
    ``1e3``): a value read back from a file moves queues, so a doubtful one is refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what} is {json.dumps(value)}, not an integer; nothing was changed")
    return value


@dataclass
class OffsetBackup:
    """The offsets of one group on one topic at one moment: what restoreOffset puts back."""

    group: str
    topic: str
    address: str
    taken_at: int
    reason: str
    offsets: list[dict[str, Any]]  # {"broker", "queue_id", "offset"} (+ "topic" when several)
    #: the cluster the offsets came from (names of the clusters, and broker name -> address),
    #: so a restore can tell "the same cluster through another name server" from another cluster
    clusters: list[str] | None = None
    brokers: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": BACKUP_FORMAT,
            "group": self.group,
            "topic": self.topic,
            "address": self.address,
            "taken_at": self.taken_at,
            "reason": self.reason,
        }
        if self.clusters is not None:
            doc["clusters"] = self.clusters
        if self.brokers is not None:
            doc["brokers"] = self.brokers
        doc["offsets"] = self.offsets
        return doc

    def write(self, path: Path) -> Path:
        if path.exists():
            raise UsageError(f"backup file {path} exists; refusing to overwrite it")
        atomic_write(path, json.dumps(self.to_json(), indent=2) + "\n")
        return path

    @staticmethod
    def read(path: str | os.PathLike[str]) -> OffsetBackup:
        p = Path(path)
        text = read_text_file(p, "backup file")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"backup file {p} is not readable JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None
        if not isinstance(doc, dict) or doc.get("format") != BACKUP_FORMAT:
            raise UsageError(f"{p} is not an mqadmin offset backup (no format {BACKUP_FORMAT!r})")
        try:
            if not isinstance(doc["offsets"], list) or not doc["offsets"]:
                raise ValueError("'offsets' (no rows)")
            offsets: list[dict[str, Any]] = [
                {
                    "broker": str(o["broker"]),
                    "queue_id": json_int(o["queue_id"], f"backup file {p}: {o['broker']} queue_id"),
                    "offset": json_int(o["offset"], f"backup file {p}: {o['broker']} queue {o['queue_id']}: offset"),
                }
                | ({"topic": str(o["topic"])} if o.get("topic") else {})  # a backup of several topics
                for o in doc["offsets"]
            ]
            clusters, brokers = doc.get("clusters"), doc.get("brokers")
            backup = OffsetBackup(
                group=str(doc["group"]),
                topic=str(doc["topic"]),
                address=str(doc.get("address", "")),
                taken_at=json_int(doc["taken_at"], f"backup file {p}: taken_at"),
                reason=str(doc.get("reason", "")),
                offsets=offsets,
                clusters=[str(c) for c in clusters] if isinstance(clusters, list) else None,
                brokers={str(k): str(v) for k, v in brokers.items()} if isinstance(brokers, dict) else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(f"backup file {p} is corrupt: missing or bad field {exc}") from None
        bad = [o for o in offsets if o["offset"] < 0 or o["queue_id"] < 0]
        if bad:
            o = bad[0]
            raise UsageError(
                f"backup file {p} holds a negative offset or queue id ({o['broker']} queue {o['queue_id']}: "
                f"offset {o['offset']}); nothing was changed"
            )
        seen: set[tuple[str, str, int]] = set()
        for o, raw in zip(offsets, doc["offsets"], strict=True):
            key = (o.get("topic", ""), o["broker"], o["queue_id"])
            if key in seen and not raw.get("client"):  # a local backup has one row per client and queue
                raise UsageError(f"backup file {p} names {o['broker']} queue {o['queue_id']} twice")
            seen.add(key)
        return backup


def backup_dir(home: str) -> Path:
    return Path(home) / "backups"


def default_backup_path(home: str, group: str, topic: str, now_ms: int) -> Path:
    import time

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ms / 1000)) + f"{now_ms % 1000:03d}Z"
    safe = "".join(c if c.isalnum() or c in "-_.%" else "_" for c in f"{group}@{topic}")
    return backup_dir(home) / f"{safe}-{stamp}.json"


def ensure_writable_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror}") from None
