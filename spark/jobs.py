"""The PySpark jobs: module-level functions over plain data (slices, a filter, a ConnectSpec).

Executors unpickle these functions by reference, open their own broker connection from the
ConnectSpec and run the same slice worker as the local engine; they never receive a live
session, facade or sink from the driver. pyspark is imported only inside functions.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqadmin.model import Message, MessageQueue
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import json_chunks
from mqadmin.replay.search import FirstMatch, TimeField, first_match
from mqadmin.replay.worker import MessageFilter, SliceScan, pause_gc

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from mqadmin.admin import Admin

    #: a running Spark: a context, or a session over one (what notebooks and tests hold)
    Spark = SparkSession | SparkContext

#: What each job's executors yield, one shape per job (checked by mypy at both ends):
#: (broker, queue id, JSON line) per kept message: the JSONL writer, partitioned by queue
LineItem = tuple[str, int, str]
#: a ROW_KEYS tuple with the body as bytes: the Parquet writer
SparkRow = tuple[Any, ...]
#: (slice index, JSON line or Message, None) per kept message, then (slice index, None, stats)
#: once per slice: the driver writes or sends them in plan order
StreamedLine = tuple[int, str, None] | tuple[int, None, dict[str, int]]
StreamedMessage = tuple[int, Message, None] | tuple[int, None, dict[str, int]]
#: (slice index, stats) once per slice: executors sent the messages themselves
SentSlice = tuple[int, dict[str, int]]


def context_of(spark: Spark) -> SparkContext:
    """The SparkContext of a session, or the context itself: RDD jobs need nothing more."""
    from pyspark.sql import SparkSession

    return spark.sparkContext if isinstance(spark, SparkSession) else spark


def session_of(spark: Spark) -> SparkSession:
    """A SparkSession over the running context (Spark's DataFrame writers need one; building it
    starts Spark SQL, which costs seconds the first time, so only those writers ask)."""
    from pyspark.sql import SparkSession

    if isinstance(spark, SparkSession):
        return spark
    return SparkSession.builder.getOrCreate()


class StatsParam:
    """Accumulator parameter for ``{slice index: stats}``. A retried task reports the same stats
    for the same slices, so merging by key (not adding) keeps the totals right."""

    def zero(self, value: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
        return {}

    def addInPlace(  # the name PySpark calls
        self, a: dict[int, dict[str, int]], b: dict[int, dict[str, int]]
    ) -> dict[int, dict[str, int]]:
        a.update(b)
        return a


#: connect() options naming files: executors get their contents, not the driver's paths
FILE_OPTIONS = ("tls_ca", "tls_cert", "tls_key")


@dataclass(frozen=True)
class ConnectSpec:
    """How executors connect: the driver's address and connect() options (ACL keys, TLS).

    It reaches executors inside the pickled task closure, held in memory by Spark: never in a
    Spark conf, environment variable, command line, job description or shipped file, all of
    which Spark shows in its UI, event log or ``ps``. TLS files travel as their contents, since
    executors need not share the driver's paths. The repr leaves the options out.
    """

    address: str
    timeout: float = 3.0
    #: connect() options other than files, e.g. access_key, secret_key, tls
    options: tuple[tuple[str, Any], ...] = field(default=(), repr=False)
    #: (option, file content) of each FILE_OPTIONS the driver was given
    files: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, address: str | ConnectSpec) -> ConnectSpec:
        return address if isinstance(address, ConnectSpec) else cls(address)

    @classmethod
    def from_options(cls, address: str, options: Mapping[str, Any], timeout: float = 3.0) -> ConnectSpec:
        """The driver's connect options, with each TLS file read here (a file the driver cannot
        read is a usage error before any job starts)."""
        from mqadmin.errors import UsageError

        files = []
        for key in FILE_OPTIONS:
            if options.get(key):
                try:
                    with open(options[key], "rb") as fh:
                        files.append((key, fh.read()))
                except OSError as exc:
                    raise UsageError(
                        f"cannot read {key.replace('_', '-')} file {options[key]}: {exc.strerror}"
                    ) from None
        rest = tuple(sorted((k, v) for k, v in options.items() if k not in FILE_OPTIONS))
        return cls(address, timeout, rest, tuple(files))

    @contextmanager
    def open(self, *, read_only: bool) -> Iterator[Admin]:
        """A connection as the driver's, TLS files written to a private folder (0700, files 0600)
        that is removed once the connection is closed."""
        from mqadmin.admin import connect

        folder = tempfile.mkdtemp(prefix="mqadmin-tls-") if self.files else None
        try:
            paths = {key: _private_file(folder, key, data) for key, data in self.files if folder}
            admin = connect(self.address, timeout=self.timeout, read_only=read_only, **dict(self.options), **paths)
            try:
                yield admin
            finally:
                admin.close()
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def _private_file(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


@contextmanager
def executor_admin(spec: ConnectSpec, *, read_only: bool) -> Iterator[Admin]:
    """An executor's own connection (a mock:// store opens read-only when the job only reads),
    with the garbage collector paused while it replays (see pause_gc)."""
    resume_gc = pause_gc()
    try:
        with spec.open(read_only=read_only) as admin:
            yield admin
    finally:
        resume_gc()


def scans(admin: Admin, slice_docs: Iterable[dict[str, Any]], filter_doc: dict[str, Any]) -> Iterator[SliceScan]:
    """A scan of each slice of the partition (one, normally) with the shared slice worker."""
    flt = MessageFilter.from_json(filter_doc)
    for doc in slice_docs:
        yield SliceScan(admin, Slice.from_json(doc), flt)


def _lines(scan: SliceScan) -> Iterator[str]:
    """The kept messages as JSON lines, by the local engine's bulk decoding and encoder, so both
    engines write the same bytes."""
    for rows in scan.rows():
        yield from b"".join(json_chunks(rows)).decode("utf-8").split("\n")[:-1]


def finished(scan: SliceScan) -> dict[str, int]:
    """The stats of a scanned slice whose every kept message went out."""
    scan.stats.written = scan.stats.matched - scan.stats.duplicates
    return scan.stats.to_json()


def lines_partition(
    slice_docs: Iterable[dict[str, Any]], *, spec: ConnectSpec, filter_doc: dict[str, Any], stats: Any = None
) -> Iterator[LineItem]:
    """Executor side of a JSONL write; each slice's stats go to the ``stats`` accumulator."""
    with executor_admin(spec, read_only=True) as admin:
        for scan in scans(admin, slice_docs, filter_doc):
            slc = scan.slice
            for line in _lines(scan):
                yield (slc.broker, slc.queue_id, line)
            if stats is not None:
                stats.add({slc.index: finished(scan)})


def rows_partition(
    slice_docs: Iterable[dict[str, Any]], *, spec: ConnectSpec, filter_doc: dict[str, Any], stats: Any = None
) -> Iterator[SparkRow]:
    """Executor side of a Parquet write; each slice's stats go to the ``stats`` accumulator."""
    with executor_admin(spec, read_only=True) as admin:
        for scan in scans(admin, slice_docs, filter_doc):
            for rows in scan.rows():
                for row in rows:
                    yield row[:-1] + (bytes(row[-1]),)  # bodies cross to the JVM as bytes
            if stats is not None:
                stats.add({scan.slice.index: finished(scan)})


def stream_lines_partition(
    slice_docs: Iterable[dict[str, Any]], *, spec: ConnectSpec, filter_doc: dict[str, Any]
) -> Iterator[StreamedLine]:
    """Executor side of a replay to stdout: JSON lines for the driver to print in plan order."""
    with executor_admin(spec, read_only=True) as admin:
        for scan in scans(admin, slice_docs, filter_doc):
            index = scan.slice.index
            for line in _lines(scan):
                yield (index, line, None)
            yield (index, None, finished(scan))


def stream_messages_partition(
    slice_docs: Iterable[dict[str, Any]], *, spec: ConnectSpec, filter_doc: dict[str, Any]
) -> Iterator[StreamedMessage]:
    """Executor side of a send the driver makes (executors cannot write an embedded store)."""
    with executor_admin(spec, read_only=True) as admin:
        for scan in scans(admin, slice_docs, filter_doc):
            index = scan.slice.index
            for msg in scan:
                yield (index, msg, None)
            yield (index, None, finished(scan))


def send_partition(
    slice_docs: Iterable[dict[str, Any]],
    *,
    spec: ConnectSpec,
    filter_doc: dict[str, Any],
    scheme: str,
    target: str,
    rate: float | None = None,
) -> Iterator[SentSlice]:
    """Executor side of a send: re-publish to topic ``target``, send back to group ``target``, or
    send dead letters home (``scheme`` "topic", "group" or "origin") over the executor's own
    writable connection, at ``rate`` messages a second (this task's share of --rate)."""
    from mqadmin.replay.pace import RateLimiter, paced
    from mqadmin.replay.sinks import send_sink

    pace = RateLimiter(rate) if rate else None
    with executor_admin(spec, read_only=False) as admin:
        sink = send_sink(admin, scheme, target)
        for scan in scans(admin, slice_docs, filter_doc):
            slc = scan.slice
            scan.stats.written = paced(pace, list(scan), functools.partial(sink.write, slc))
            yield (scan.slice.index, scan.stats.to_json())


def keys_partition(
    slice_docs: Iterable[dict[str, Any]], *, spec: ConnectSpec, filter_doc: dict[str, Any]
) -> Iterator[tuple[str, tuple[int, int, str, int]]]:
    """Executor side of --dedup's first pass: (UNIQ_KEY, (slice index, offset, broker, queue id))
    of every kept message that has one; plan order is (slice index, offset)."""
    with executor_admin(spec, read_only=True) as admin:
        for scan in scans(admin, slice_docs, filter_doc):
            index, broker = scan.slice.index, scan.slice.broker
            for rows in scan.rows():
                for r in rows:
                    if r[6]:  # ROW_KEYS: uniq_key
                        yield r[6], (index, r[3], broker, r[2])


def later_occurrences(item: tuple[str, Iterable[tuple[int, int, str, int]]]) -> list[tuple[str, int, int]]:
    """A key's positions after its first in plan order, as (broker, queue id, offset)."""
    return [(b, q, o) for _, o, b, q in sorted(item[1])[1:]]


def duplicate_positions(
    spark: Spark, slices: Sequence[Slice], spec: ConnectSpec, flt: MessageFilter
) -> list[tuple[str, int, int]]:
    """Where the messages --dedup drops are: every occurrence of a UNIQ_KEY but its first in plan
    order (the local engine's answer), found by one pass over the window before the replay."""
    job = functools.partial(keys_partition, spec=spec, filter_doc=flt.to_json())
    pairs = slices_rdd(spark, slices).mapPartitions(job)
    return [tuple(p) for p in pairs.groupByKey().flatMap(later_occurrences).collect()]  # type: ignore[misc]


def slices_rdd(spark: Spark, slices: Sequence[Slice]) -> RDD[dict[str, Any]]:
    """One partition per slice, in plan order (so partition order is output order)."""
    docs = [s.to_json() for s in slices]
    return context_of(spark).parallelize(docs, numSlices=max(len(docs), 1))


def scan_lines(
    spark: Spark, slices: Sequence[Slice], spec: ConnectSpec, flt: MessageFilter, stats: Any
) -> RDD[LineItem]:
    """The RDD of JSONL lines for ``slices`` (lazy: nothing runs yet)."""
    job = functools.partial(lines_partition, spec=spec, filter_doc=flt.to_json(), stats=stats)
    return slices_rdd(spark, slices).mapPartitions(job)


def scan_rows(
    spark: Spark, slices: Sequence[Slice], spec: ConnectSpec, flt: MessageFilter, stats: Any
) -> RDD[SparkRow]:
    """The RDD of Parquet rows for ``slices`` (lazy)."""
    job = functools.partial(rows_partition, spec=spec, filter_doc=flt.to_json(), stats=stats)
    return slices_rdd(spark, slices).mapPartitions(job)


def stream_lines(spark: Spark, slices: Sequence[Slice], spec: ConnectSpec, flt: MessageFilter) -> RDD[StreamedLine]:
    """The RDD of lines and per-slice stats markers for the driver to print (lazy)."""
    job = functools.partial(stream_lines_partition, spec=spec, filter_doc=flt.to_json())
    return slices_rdd(spark, slices).mapPartitions(job)


def stream_messages(
    spark: Spark, slices: Sequence[Slice], spec: ConnectSpec, flt: MessageFilter
) -> RDD[StreamedMessage]:
    """The RDD of messages and per-slice stats markers for the driver to send (lazy)."""
    job = functools.partial(stream_messages_partition, spec=spec, filter_doc=flt.to_json())
    return slices_rdd(spark, slices).mapPartitions(job)


def rate_share(rate: float | None, partitions: int, parallelism: int) -> float | None:
    """Each sending task's part of --rate: the tasks that run at once share it, so the sum of
    their rates is the rate (a task with fewer messages than its share leaves some unused)."""
    return rate / max(1, min(partitions, parallelism)) if rate else None


def send(
    spark: Spark,
    slices: Sequence[Slice],
    spec: ConnectSpec,
    flt: MessageFilter,
    scheme: str,
    target: str,
    rate: float | None = None,
) -> RDD[SentSlice]:
    """The RDD of a send by the executors (lazy). Copies must keep each queue's order, so a
    queue's slices run in one partition, in order. ``rate`` (--rate) is divided among the
    partitions that run at once, so the total never exceeds it."""
    if scheme not in ("topic", "group", "origin"):
        raise ValueError(f"unknown send scheme {scheme!r}")
    rdd = queue_partitions_rdd(spark, slices)
    share = rate_share(rate, rdd.getNumPartitions(), context_of(spark).defaultParallelism)
    job = functools.partial(
        send_partition, spec=spec, filter_doc=flt.to_json(), scheme=scheme, target=target, rate=share
    )
    return rdd.mapPartitions(job)


def queue_partitions_rdd(spark: Spark, slices: Sequence[Slice]) -> RDD[dict[str, Any]]:
    """One partition per queue holding its slices in offset order (for the sending modes)."""
    by_queue: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in slices:
        by_queue.setdefault((s.broker, s.queue_id), []).append(s.to_json())
    groups = list(by_queue.values())
    return context_of(spark).parallelize(groups, numSlices=max(len(groups), 1)).flatMap(lambda docs: docs)


def row_schema() -> StructType:
    """The Spark schema of a replay row (ROW_KEYS), matching the local engine's Arrow schema."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    def f(name: str, kind: Any, nullable: bool = False) -> StructField:
        return StructField(name, kind, nullable)

    return StructType(
        [
            f("topic", StringType()),
            f("broker", StringType()),
            f("queue_id", IntegerType()),
            f("queue_offset", LongType()),
            f("commitlog_offset", LongType()),
            f("msg_id", StringType()),
            f("uniq_key", StringType(), True),
            f("tags", StringType(), True),
            f("keys", StringType(), True),
            f("born_timestamp", LongType()),
            f("store_timestamp", LongType()),
            f("born_host", StringType()),
            f("store_host", StringType()),
            f("reconsume_times", IntegerType()),
            f("properties", MapType(StringType(), StringType(), False)),
            f("body", BinaryType()),
        ]
    )


def write_jsonl(spark: Spark, lines: RDD[LineItem], path: str, mode: str) -> None:
    """JSON lines through Spark's text writer, one folder per queue (``broker=…/queue_id=…``).

    The lines are the local engine's bytes exactly (records keep broker and queue_id too), which
    Spark's JSON writer would not give (it drops null fields and reorders maps)."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("broker", StringType(), False),
            StructField("queue_id", IntegerType(), False),
            StructField("value", StringType(), False),
        ]
    )
    df = session_of(spark).createDataFrame(lines, schema, verifySchema=False)
    df.write.mode(mode).partitionBy("broker", "queue_id").option("compression", "none").text(path)


def write_parquet(spark: Spark, rows: RDD[SparkRow], path: str, mode: str) -> None:
    """Parquet through Spark's writer, partitioned by queue (Hive-style folders)."""
    df = session_of(spark).createDataFrame(rows, row_schema(), verifySchema=False)
    df.write.mode(mode).partitionBy("broker", "queue_id").parquet(path)


def search_partition(queries: Iterable[tuple[str, str, int, int]], *, spec: ConnectSpec) -> Iterator[tuple[Any, ...]]:
    """Executor side of a bulk time→offset search: (topic, broker, queue id, ts) → + offset."""
    with spec.open(read_only=True) as admin:
        for topic, broker, qid, ts in queries:
            yield (topic, broker, qid, ts, admin.search_offset(MessageQueue(topic, broker, qid), ts))


def bulk_search(
    spark: Spark, spec: ConnectSpec, queries: Sequence[tuple[str, str, int, int]], partitions: int | None = None
) -> list[tuple[str, str, int, int, int]]:
    """Many (topic, broker, queue id, timestamp) searches spread over executors, in input order."""
    if not queries:
        return []
    n = partitions or min(len(queries), max(context_of(spark).defaultParallelism * 4, 1))
    rdd = context_of(spark).parallelize(list(queries), numSlices=n)
    out: list[tuple[str, str, int, int, int]] = rdd.mapPartitions(
        functools.partial(search_partition, spec=spec)
    ).collect()
    return out


def first_match_partition(
    slice_docs: Iterable[dict[str, Any]], *, spec: ConnectSpec, field: str, ts: int
) -> Iterator[dict[str, int] | None]:
    """Executor side of a born-time or property search: per slice, its first message whose field
    is at or after ``ts`` (None when none is), read with the replay's slice worker."""
    time_field = TimeField.parse(field)
    # with a mock:// address this opens the store read-only: a search only reads
    with spec.open(read_only=True) as admin:
        for doc in slice_docs:
            hit = first_match(admin, Slice.from_json(doc), time_field, ts)
            yield None if hit is None else hit.to_json()


def first_matches(
    spark: Spark, spec: ConnectSpec, slices: Sequence[Slice], field: TimeField, ts: int
) -> list[FirstMatch | None]:
    """Scan every slice at once, one partition per slice, each up to its own first match; the
    results come back in slice order (``earliest_per_queue`` turns them into per-queue answers)."""
    if not slices:
        return []
    job = functools.partial(first_match_partition, spec=spec, field=str(field), ts=ts)
    docs: list[dict[str, Any] | None] = slices_rdd(spark, slices).mapPartitions(job).collect()
    return [None if d is None else FirstMatch.from_json(d) for d in docs]
