"""A replay written as a folder partitioned by hour, broker or queue (``--partition-by``).

The layout is Hive's and Spark's: ``key=value`` folders (``hour=…`` of the window's time field,
``broker=…``, ``broker=…/queue_id=…``; values escaped as Spark escapes them), one data file per
slice and partition (``write_slice``, which the Spark engine's executors run too, so both
engines write the same files), and, once everything is in
place, a ``_MANIFEST.json`` (counts per partition and in total, the window, the filters, the
engine, each file's rows, size and sha256) and the ``_SUCCESS`` marker, so a downstream job can
trust a folder that has both. Files start with ``part-``; names starting with ``_`` or ``.``
are skipped by Spark, Hive and pyarrow readers.

Work happens in ``PATH.parts/``: one file per slice and partition, complete or absent (written
beside its name and renamed), so a resumed run keeps exactly the files its checkpoint lists.
The finished folder is renamed into place; an existing output (``--overwrite``) is removed first.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mqadmin.errors import MqadminError, UsageError
from mqadmin.model import Message
from mqadmin.replay import STORE_TIME, TimeField
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import ROW_KEYS, Row, json_chunks, row_time, rows_to_table, to_row
from mqadmin.safety import fsync_dir

PARTITION_BY = ("hour", "broker", "queue")
MANIFEST = "_MANIFEST.json"
SUCCESS = "_SUCCESS"
#: the partition columns each choice takes out of Parquet files (in the folder names instead, as
#: Spark's writer does); JSON lines keep every field, as the Spark engine's text files do
DROPPED = {"hour": (), "broker": ("broker",), "queue": ("broker", "queue_id")}
#: characters Spark escapes in a partition folder name (ExternalCatalogUtils.escapePathName)
_ESCAPED = frozenset([chr(c) for c in range(1, 32)] + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f"])
_ESCAPED |= {"{", "[", "]", "^"}
_BROKER, _QUEUE_ID = ROW_KEYS.index("broker"), ROW_KEYS.index("queue_id")
#: the folder value of a missing partition value, as Hive and Spark name it
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def escape(value: str) -> str:
    """A partition value escaped as Spark (and Hive) escape it in a folder name."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def queue_folder(broker: str, queue_id: int) -> str:
    """``broker=…/queue_id=…``: the Spark engine's folder of a queue."""
    return f"broker={escape(broker)}/queue_id={queue_id}"


def hour_of(ms: int) -> str:
    """The UTC hour of an epoch-ms time as a folder value: ``2026-11-28T05``."""
    return time.strftime("%Y-%m-%dT%H", time.gmtime(ms // 1000))


def partitioner(by: str, field: str = STORE_TIME) -> Callable[[Row], str]:
    """The relative folder of a row. ``hour`` is the hour of the window's time field (``field``,
    the --time-field text), so a window by born time or a property is bucketed by that time; a
    row without it (never kept by such a window) goes where Hive and Spark put a null value."""
    if by == "queue":
        return lambda r: queue_folder(r[_BROKER], r[_QUEUE_ID])
    if by == "broker":
        return lambda r: f"broker={escape(r[_BROKER])}"
    of = row_time(TimeField.parse(field))

    def hour(r: Row) -> str:
        t = of(r)
        return f"hour={NULL_PARTITION if t is None else hour_of(t)}"

    return hour


def count_partitions(by: str, rows: Sequence[Row], field: str = STORE_TIME) -> dict[str, int]:
    """Rows per partition folder (the dry run's answer, and the manifest's)."""
    key_of = partitioner(by, field)
    counts: dict[str, int] = {}
    for row in rows:
        key = key_of(row)
        counts[key] = counts.get(key, 0) + 1
    return counts


def count_slice(by: str, slc: Slice, rows: Sequence[Row], *, field: str = STORE_TIME) -> dict[str, int]:
    """PartitionCountSink's encoder (worker processes run it)."""
    return count_partitions(by, rows, field)


def write_slice(
    parts: str, scheme: str, by: str, slc: Slice, rows: Sequence[Row], *, field: str = STORE_TIME
) -> list[tuple[str, str, int]]:
    """Write a slice's rows into ``parts``, one file per partition, each synced beside its final
    name; returns (written file, final relative path, rows). The local engine's worker processes
    and the Spark engine's executors run this, so both engines write the same files."""
    key_of = partitioner(by, field)
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(key_of(row), []).append(row)
    out: list[tuple[str, str, int]] = []
    ext = "jsonl" if scheme == "jsonl" else "parquet"
    for folder, group in groups.items():
        final = f"{folder}/part-{slc.index:08d}.{ext}"
        tmp = Path(parts) / f".{slc.index:08d}.{len(out)}.{os.getpid()}.tmp"
        if scheme == "jsonl":
            with tmp.open("wb") as f:
                f.writelines(json_chunks(group))
                f.flush()
                os.fsync(f.fileno())
        else:
            import pyarrow.parquet as pq

            table = rows_to_table(group)
            pq.write_table(table.drop_columns(list(DROPPED[by])), tmp)
            with tmp.open("rb") as f:
                os.fsync(f.fileno())
        out.append((str(tmp), final, len(group)))
    return out


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest(folder: Path, files: dict[str, int], base: dict[str, Any]) -> dict[str, Any]:
    """The manifest of the files (relative path -> rows) under ``folder``."""
    partitions: dict[str, int] = {}
    entries = []
    for rel in sorted(files):
        part = rel.rsplit("/", 1)[0]
        partitions[part] = partitions.get(part, 0) + files[rel]
        path = folder / rel
        entries.append({"path": rel, "rows": files[rel], "bytes": path.stat().st_size, "sha256": sha256(path)})
    return {**base, "total": sum(files.values()), "partitions": partitions, "files": entries}


def parts_of(path: Path) -> Path:
    """Where a partitioned replay builds its folder until it is complete: ``PATH.parts``."""
    return path.with_name(path.name + ".parts")


def put_in_place(parts: Path, path: Path) -> None:
    """Rename a sealed folder to its name, replacing what is there (--overwrite: checked before the run)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    os.replace(parts, path)
    fsync_dir(path.parent)


def publish_written(path: Path, base: dict[str, Any], expected: int) -> dict[str, Any]:
    """Seal and put in place the folder another writer filled in ``PATH.parts`` (the Spark
    engine's executors, with ``write_slice``). Each file's rows are counted from the file itself
    (lines, or the Parquet footer); a folder that does not hold the ``expected`` rows the replay
    wrote is not sealed (a file lost or left over would otherwise pass for a complete output)."""
    parts = parts_of(path)
    files: dict[str, int] = {}
    for f in sorted(parts.rglob("*")):
        rel = f.relative_to(parts).as_posix()
        if not f.is_file() or any(p.startswith(("_", ".")) for p in rel.split("/")):
            continue
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            files[rel] = pq.read_metadata(f).num_rows
        else:
            files[rel] = _lines(f)
    if sum(files.values()) != expected:
        raise MqadminError(
            f"{parts} holds {sum(files.values())} message(s) but the replay wrote {expected}: not sealed; "
            "run again with --overwrite"
        )
    parts.mkdir(exist_ok=True)  # a replay that wrote nothing leaves no folder to seal
    doc = manifest(parts, files, base)
    seal(parts, doc)
    put_in_place(parts, path)
    return doc


def _lines(path: Path) -> int:
    n = 0
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
    return n


def seal(folder: Path, doc: dict[str, Any]) -> None:
    """Write the manifest (atomically), then ``_SUCCESS``: both last, so a reader that sees the
    marker sees a complete folder."""
    tmp = folder / f".{MANIFEST}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, folder / MANIFEST)
    with (folder / SUCCESS).open("wb") as f:
        os.fsync(f.fileno())
    fsync_dir(folder)


class FolderSink:
    """JSONL or Parquet files in partition folders; see the module docstring."""

    def __init__(
        self,
        path: Path,
        scheme: str,
        by: str,
        base: dict[str, Any],
        *,
        resume: dict[str, Any] | None = None,
        field: str = STORE_TIME,
    ):
        if scheme == "parquet":
            from mqadmin.replay import require

            require("pyarrow.parquet", "--to parquet:")
        self.path, self.scheme, self.by, self.base, self.field = path, scheme, by, base, field
        self.parts = parts_of(path)
        self._files: dict[str, int] = {}
        if resume is not None:
            self._files = {str(k): int(v) for k, v in (resume.get("files") or {}).items()}
            gone = [rel for rel in self._files if not (self.parts / rel).is_file()]
            if gone:
                raise UsageError(f"cannot resume: {self.parts / gone[0]} is gone; delete the checkpoint to start over")
            self._drop_unrecorded()
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
        self.parts.mkdir(parents=True, exist_ok=True)

    def _drop_unrecorded(self) -> None:
        """Remove what a killed run wrote after its last checkpoint record."""
        if not self.parts.is_dir():
            return
        for f in sorted(self.parts.rglob("*"), reverse=True):
            rel = f.relative_to(self.parts).as_posix()
            if f.is_file() and rel not in self._files:
                f.unlink()
            elif f.is_dir() and not any(f.iterdir()):
                f.rmdir()

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        return self.write_rows(slc, [to_row(m, slc.broker) for m in messages])

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int:
        return self.write_encoded(slc, self.encoder()(slc, rows), len(rows))

    def encoder(self) -> Callable[[Slice, Sequence[Row]], list[tuple[str, str, int]]]:
        return functools.partial(write_slice, str(self.parts), self.scheme, self.by, field=self.field)

    def batch_encoder(self) -> None:
        return None

    def table_encoder(self) -> None:
        return None

    def write_encoded(self, slc: Slice, encoded: list[tuple[str, str, int]], count: int) -> int:
        """Move the files ``write_slice`` wrote (and synced) to their partition folders."""
        folders = set()
        for tmp, rel, rows in encoded:
            dest = self.parts / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, dest)
            folders.add(dest.parent)
            self._files[rel] = rows
        for folder in folders:
            fsync_dir(folder)
        return count

    def sync(self) -> dict[str, Any]:
        fsync_dir(self.parts)
        return {"files": dict(self._files)}

    def finish(self) -> None:
        seal(self.parts, manifest(self.parts, self._files, self.base))
        put_in_place(self.parts, self.path)

    def abort(self, *, keep: bool) -> None:
        if not keep:
            shutil.rmtree(self.parts, ignore_errors=True)


def read_manifest(folder: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return doc


class PartitionCountSink:
    """Writes nothing and counts per partition: the dry run of a partitioned replay."""

    def __init__(self, by: str, field: str = STORE_TIME):
        self.by, self.field = by, field
        self.counts: dict[str, int] = {}

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        return self.write_rows(slc, [to_row(m, slc.broker) for m in messages])

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int:
        return self.write_encoded(slc, count_partitions(self.by, rows, self.field), len(rows))

    def encoder(self) -> Callable[[Slice, Sequence[Row]], dict[str, int]]:
        return functools.partial(count_slice, self.by, field=self.field)

    def batch_encoder(self) -> None:
        return None

    def table_encoder(self) -> None:
        return None

    def write_encoded(self, slc: Slice, encoded: dict[str, int], count: int) -> int:
        for key, n in encoded.items():
            self.counts[key] = self.counts.get(key, 0) + n
        return count

    def sync(self) -> dict[str, Any]:
        return {}

    def finish(self) -> None:
        pass

    def abort(self, *, keep: bool) -> None:
        pass
