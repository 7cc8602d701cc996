"""--dedup: the UNIQ_KEYs a replay has written, on disk, so memory stays bounded for any window.

A producer that retries a send whose answer it lost stores the same message twice, with the same
UNIQ_KEY (the client's message id). The writer asks, slice by slice in plan order, which of a
slice's messages are first occurrences; the first in queue order wins. Keys live in SQLite
(stdlib) with a small page cache, each with the slice that wrote it: beside a checkpoint the set
is committed before the checkpoint records the slice, and a resumed run drops the keys of slices
the checkpoint does not record, so a kill at any moment keeps the answer exact.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

#: keys per query (SQLite's default limit on host parameters is 999 in older builds)
_CHUNK = 500
#: pages of SQLite cache (negative: KiB): what the set costs in memory, whatever the window
_CACHE_KIB = 16 * 1024


def dedup_path(checkpoint: Path) -> Path:
    """Where a checkpointed replay keeps its --dedup set."""
    return checkpoint.with_name(checkpoint.name + ".dedup")


def remove_dedup(checkpoint: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(dedup_path(checkpoint)) + suffix).unlink(missing_ok=True)


class DedupSet:
    """UNIQ_KEYs already written; ``path`` None keeps the file in a temporary folder."""

    def __init__(self, path: Path | None = None, *, keep_slices: Iterable[int] | None = None):
        self._tmp = Path(tempfile.mkdtemp(prefix="mqadmin-dedup-")) if path is None else None
        self.path = path if path is not None else self._tmp / "seen.db"  # type: ignore[operator]
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={'FULL' if path is not None else 'OFF'}")
        self._db.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        self._db.execute("CREATE TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY, slice INTEGER) WITHOUT ROWID")
        self._db.execute("BEGIN")
        if keep_slices is None:
            self._db.execute("DELETE FROM seen")
        else:  # what a killed run wrote after its last recorded slice was never recorded: forget it
            self._db.execute("CREATE TEMP TABLE keep (slice INTEGER PRIMARY KEY)")
            self._db.executemany("INSERT INTO keep VALUES (?)", [(i,) for i in keep_slices])
            self._db.execute("DELETE FROM seen WHERE slice NOT IN (SELECT slice FROM keep)")
            self._db.execute("DROP TABLE keep")
        self._db.execute("COMMIT")

    def first_seen(self, slice_index: int, keys: Sequence[str | None]) -> list[bool]:
        """For each of a slice's keys (in order), whether it is the first occurrence; records them.
        A message without a UNIQ_KEY is always kept (nothing says it is a copy)."""
        present = {k for k in keys if k}
        known: set[str] = set()
        todo = list(present)
        for i in range(0, len(todo), _CHUNK):
            chunk = todo[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            known.update(row[0] for row in self._db.execute(f"SELECT key FROM seen WHERE key IN ({marks})", chunk))
        out: list[bool] = []
        new: list[tuple[str, int]] = []
        for k in keys:
            if not k:
                out.append(True)
            elif k in known:
                out.append(False)
            else:
                known.add(k)
                new.append((k, slice_index))
                out.append(True)
        if new:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO seen VALUES (?, ?)", new)
            self._db.execute("COMMIT")  # durable (beside a checkpoint) before the slice is recorded
        return out

    def close(self, *, remove: bool) -> None:
        self._db.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        elif remove:
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
