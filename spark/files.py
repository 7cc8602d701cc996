"""Replay files written by the executors themselves, laid out as Spark's writers lay them out.

Spark's DataFrame writers cost a cold Spark SQL start in the driver (seconds) and send every
row from the Python workers through the JVM; here each task writes its slices' files with the
local engine's encoders (the same JSON-line bytes; Parquet through pyarrow) and the driver
commits them. The output is what Spark's writers make of the same rows: a folder per queue
(``broker=…/queue_id=…``), ``part-NNNNN-<job>.c000.txt`` or ``.c000.<codec>.parquet`` files
(no partition columns inside, as Spark drops them), ``_SUCCESS`` after each commit.

Commit protocol: every task attempt writes under its own folder in ``PATH/_temporary/<job>/``
and returns the files it wrote; the driver moves in only the files of the attempts Spark
accepted (one per partition), so a retried or failed attempt never adds a file, and a failed
job leaves the output as it was. Only paths every executor and the driver see (local or a
shared mount); URIs (``s3a://``, ``hdfs://``) go through Spark's writers.
"""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.errors import MqadminError, UsageError
from mqadmin.replay.folder import queue_folder, write_slice
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import Row, json_chunks
from mqadmin.replay.worker import SliceStats
from mqadmin.safety import fsync_dir

from . import jobs

if TYPE_CHECKING:
    import pyarrow
    from pyspark import SparkContext

    from mqadmin.replay.worker import MessageFilter

#: Spark's Parquet codecs (``spark.sql.parquet.compression.codec``) pyarrow writes too: name in
#: the file name, pyarrow's name; another codec (lzo) is left to Spark's writer
PARQUET_CODECS = {
    "snappy": ("snappy", "snappy"),
    "gzip": ("gz", "gzip"),
    "zstd": ("zstd", "zstd"),
    "lz4": ("lz4", "lz4"),
    "lz4_raw": ("lz4raw", "lz4"),
    "brotli": ("br", "brotli"),
    "none": ("", "none"),
    "uncompressed": ("", "none"),
}
#: rows per Parquet row group: a slice (8192 by default) is one; a bigger one is not all in memory
PARQUET_GROUP_ROWS = 65536
#: the partition columns: in the folder names, not in the files
PARTITION_COLUMNS = ("broker", "queue_id")
#: ``broker=…/queue_id=…`` with the value escaped as Spark (and Hive) escape it
partition_folder = queue_folder


@dataclass(frozen=True)
class FileJob:
    """What the tasks of one write need: the format, the staging folder, the job's id (in the
    file names) and, for Parquet, the codec and Spark's schema (kept in the file footer, as
    Spark keeps it, so Spark reads back exactly the types its own writer would give)."""

    scheme: str
    staging: str
    job: str
    codec: str = "snappy"
    spark_schema: str = ""
    #: --partition-by: the slices are written as the local engine writes them (``write_slice``:
    #: its folders, file names and bytes), partitioned by this key of ``field``'s time
    by: str | None = None
    field: str = "store"

    def file_name(self, partition: int) -> str:
        if self.scheme == "jsonl":
            return f"part-{partition:05d}-{self.job}.c000.txt"
        suffix = PARQUET_CODECS[self.codec][0]
        return f"part-{partition:05d}-{self.job}.c000{'.' + suffix if suffix else ''}.parquet"


#: per slice of a task: (slice index, stats, [(staged file, final file)], none for no rows);
#: None instead means this executor cannot write the format (no pyarrow for Parquet)
WrittenSlice = tuple[int, dict[str, int], list[tuple[str, str]]]


def files_partition(
    partition: int,
    slice_docs: Iterable[dict[str, Any]],
    *,
    spec: jobs.ConnectSpec,
    filter_doc: dict[str, Any],
    job: FileJob,
) -> Iterator[WrittenSlice | None]:
    """Executor side: write each slice's kept messages to a file of this attempt's own folder."""
    if job.scheme == "parquet":
        import importlib.util

        if importlib.util.find_spec("pyarrow") is None:
            yield None
            return
    attempt = os.path.join(job.staging, uuid.uuid4().hex)
    with jobs.executor_admin(spec, read_only=True) as admin:
        for scan in jobs.scans(admin, slice_docs, filter_doc):
            slc = scan.slice
            if job.by is not None:
                os.makedirs(attempt, exist_ok=True)
                rows = [row for batch in scan.rows() for row in batch]
                written = write_slice(attempt, job.scheme, job.by, slc, rows, field=job.field)
                yield (slc.index, jobs.finished(scan), [(staged, final) for staged, final, _ in written])
                continue
            final = f"{partition_folder(slc.broker, slc.queue_id)}/{job.file_name(partition)}"
            staged = os.path.join(attempt, final)
            write = _write_jsonl if job.scheme == "jsonl" else _write_parquet
            wrote = write(staged, scan.rows(), job)
            yield (slc.index, jobs.finished(scan), [(staged, final)] if wrote else [])


def _write_jsonl(path: str, batches: Iterable[Sequence[Row]], job: FileJob) -> bool:
    """The local engine's JSON lines; the file is created with the first kept message."""
    f = None
    try:
        for rows in batches:
            if f is None:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                f = open(path, "wb")  # closed below, after the last batch
            f.writelines(json_chunks(rows))
        if f is not None:
            f.flush()
            os.fsync(f.fileno())
    finally:
        if f is not None:
            f.close()
    return f is not None


def _write_parquet(path: str, batches: Iterable[Sequence[Row]], job: FileJob) -> bool:
    """Row groups of the replay's Arrow columns without the partition columns, typed as Spark's
    writer types them (map values required) and with Spark's schema in the footer."""
    import pyarrow.parquet as pq

    from mqadmin.replay.records import rows_to_table

    writer = None
    schema = None
    pending: list[Row] = []

    def flush() -> None:
        nonlocal writer, schema
        table = rows_to_table(pending).drop_columns(list(PARTITION_COLUMNS))
        if schema is None:
            schema = _spark_layout(table.schema, job.spark_schema)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            writer = pq.ParquetWriter(path, schema, compression=PARQUET_CODECS[job.codec][1])
        assert writer is not None
        writer.write_table(table.cast(schema), row_group_size=len(pending))
        pending.clear()

    try:
        for rows in batches:
            pending.extend(rows)
            if len(pending) >= PARQUET_GROUP_ROWS:
                flush()
        if pending:
            flush()
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        return False
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    return True


def _spark_layout(schema: pyarrow.Schema, spark_schema: str) -> pyarrow.Schema:
    import pyarrow as pa

    i = schema.get_field_index("properties")
    values = pa.field("value", pa.string(), nullable=False)
    schema = schema.set(i, pa.field("properties", pa.map_(pa.string(), values), nullable=False))
    return schema.with_metadata({SPARK_ROW_METADATA: spark_schema}) if spark_schema else schema


#: the footer key where Spark keeps a file's Spark schema (ParquetReadSupport reads it back)
SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"


def spark_data_schema() -> str:
    """The JSON of the Spark schema of a replay row without the partition columns."""
    from pyspark.sql.types import StructType

    full = jobs.row_schema()
    return StructType([f for f in full.fields if f.name not in PARTITION_COLUMNS]).json()


def parquet_codec(sc: SparkContext) -> str:
    """The codec Spark's writer would use: its setting, snappy by default."""
    return str(sc.getConf().get("spark.sql.parquet.compression.codec", "snappy")).lower()


def unsupported(sc: SparkContext, scheme: str) -> str | None:
    """Why the executors cannot write this output themselves (Spark's writer must), or None."""
    if scheme == "parquet" and parquet_codec(sc) not in PARQUET_CODECS:
        return f"Parquet codec {parquet_codec(sc)}"
    return None


def prepare(path: Path, mode: str) -> None:
    """Before any task runs: an existing output is an error unless the mode replaces or adds to
    it; a folder that cannot be written is a usage error here rather than a task failure."""
    if mode == "errorifexists" and path.exists():
        raise UsageError(f"{path} exists; pass --overwrite to replace it")
    if mode == "overwrite" and path.exists() and not path.is_dir():
        path.unlink()  # a file where the folder goes: Spark's writer deletes it too
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / "_temporary").mkdir(exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write to {path}: {exc.strerror}") from None


def write(
    sc: SparkContext,
    slices: Sequence[Slice],
    spec: jobs.ConnectSpec,
    flt: MessageFilter,
    scheme: str,
    path: Path,
    mode: str,
    *,
    by: str | None = None,
    field: str = "store",
) -> dict[int, SliceStats] | None:
    """Run one job that writes ``slices`` under ``path`` (mode ``errorifexists``, ``overwrite``
    or ``append``) and commit it; the stats of the written slices, or None when the executors
    cannot write the format (then nothing has changed). With ``by`` (--partition-by) the files
    are the local engine's, and no ``_SUCCESS`` is written: the folder is sealed once complete."""
    partitioned = by is not None
    codec = parquet_codec(sc) if scheme == "parquet" and not partitioned else "snappy"
    created = not path.exists()
    prepare(path, mode)
    job_id = str(uuid.uuid4())
    staging = path / "_temporary" / job_id
    schema = spark_data_schema() if scheme == "parquet" and not partitioned else ""
    job = FileJob(scheme, str(staging), job_id, codec, schema, by, field)
    try:
        results: list[WrittenSlice | None] = []
        if slices:
            task = functools.partial(files_partition, spec=spec, filter_doc=flt.to_json(), job=job)
            results = jobs.slices_rdd(sc, slices).mapPartitionsWithIndex(task).collect()
        if any(r is None for r in results):
            if partitioned:
                raise MqadminError("--partition-by with parquet: the Spark executors need pyarrow")
            return None
        written = [r for r in results if r is not None]
        commit(path, [f for w in written for f in w[2]], mode, staging, mark=not partitioned)
        return {index: SliceStats.from_json(stats) for index, stats, _ in written}
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        _remove_if_empty(path / "_temporary")
        if created and path.is_dir() and not (path / "_SUCCESS").exists():
            _remove_if_empty(path)


def commit(path: Path, files: Sequence[tuple[str, str]], mode: str, staging: Path, *, mark: bool = True) -> None:
    """Move the accepted attempts' files into place (after removing what an overwrite replaces,
    the staging of jobs whose driver was killed included), then mark the output complete with
    ``_SUCCESS`` (unless ``mark`` is false: a partitioned folder is marked when sealed)."""
    if mode == "overwrite":
        for old in [*path.iterdir(), *(path / "_temporary").iterdir()]:
            if old in (path / "_temporary", staging):
                continue
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
    folders = set()
    for staged, final in files:
        dest = path / final
        if dest.parent not in folders:
            dest.parent.mkdir(parents=True, exist_ok=True)
            folders.add(dest.parent)
        os.replace(staged, dest)
    for folder in folders:
        fsync_dir(folder)
    if mark:
        (path / "_SUCCESS").touch()
    fsync_dir(path)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
