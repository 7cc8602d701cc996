"""The PySpark jobs: module-level functions over plain data (slices, a filter, an address).

Executors unpickle these functions by reference, open their own broker connection from the
address string and run the same slice worker as the local engine; they never receive a live
session, facade or sink from the driver. pyspark is imported only inside functions.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mqadmin.model import MessageQueue
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import json_chunks
from mqadmin.replay.search import FirstMatch, TimeField, first_match
from mqadmin.replay.worker import MessageFilter, SliceScan, pause_gc

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

#: what an executor yields per kept message
LINES = "lines"  # (broker, queue_id, json line): the JSONL writer, partitioned by queue
ROWS = "rows"  # a ROW_KEYS tuple: the Parquet writer
STREAM_LINES = "stream_lines"  # (slice index, json line, None) then (index, None, stats): to the driver
STREAM_MESSAGES = "stream_messages"  # (slice index, Message, None) then (index, None, stats)
SEND_TOPIC = "send_topic"  # executors re-publish; yield (index, stats) per slice
SEND_GROUP = "send_group"  # executors send back; yield (index, stats) per slice
MODES = (LINES, ROWS, STREAM_LINES, STREAM_MESSAGES, SEND_TOPIC, SEND_GROUP)


class StatsParam:
    """Accumulator parameter for ``{slice index: stats}``. A retried task reports the same stats
    for the same slices, so merging by key (not adding) keeps the totals right."""

    def zero(self, value: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
        return {}

    def addInPlace(  # noqa: N802  (the name PySpark calls)
        self, a: dict[int, dict[str, int]], b: dict[int, dict[str, int]]
    ) -> dict[int, dict[str, int]]:
        a.update(b)
        return a


def scan_partition(
    slice_docs: Iterable[dict[str, Any]],
    *,
    address: str,
    filter_doc: dict[str, Any],
    mode: str,
    target: str = "",
    stats: Any = None,
) -> Iterator[Any]:
    """Executor side: run the slices of this partition (one, normally) with the shared worker."""
    from mqadmin.admin import connect
    from mqadmin.replay.sinks import GroupSink, Sink, TopicSink

    flt = MessageFilter.from_json(filter_doc)
    resume_gc = pause_gc()  # see pause_gc: an executor's Python worker only replays
    sending = mode in (SEND_TOPIC, SEND_GROUP)
    # with a mock:// address this opens the store read-only: executors only read
    admin = connect(address, read_only=not sending)
    try:
        sink: Sink | None = None
        if mode == SEND_TOPIC:
            sink = TopicSink(admin, target)
        elif mode == SEND_GROUP:
            sink = GroupSink(admin, target)
        for doc in slice_docs:
            slc = Slice.from_json(doc)
            scan = SliceScan(admin, slc, flt)
            if sink is not None:
                scan.stats.written = sink.write(slc, list(scan))
                yield (slc.index, scan.stats.to_json())
                continue
            if mode == STREAM_MESSAGES:
                for msg in scan:
                    yield (slc.index, msg, None)
            else:
                # the local engine's bulk decoding and encoder, so both engines write the same bytes
                for rows in scan.rows():
                    if mode == ROWS:
                        for row in rows:
                            yield row[:-1] + (bytes(row[-1]),)  # bodies cross to the JVM as bytes
                        continue
                    lines = b"".join(json_chunks(rows)).decode("utf-8").split("\n")[:-1]
                    if mode == LINES:
                        for line in lines:
                            yield (slc.broker, slc.queue_id, line)
                    else:
                        for line in lines:
                            yield (slc.index, line, None)
            scan.stats.written = scan.stats.matched
            if mode in (STREAM_LINES, STREAM_MESSAGES):
                yield (slc.index, None, scan.stats.to_json())
            elif stats is not None:
                stats.add({slc.index: scan.stats.to_json()})
    finally:
        admin.close()
        resume_gc()


def slices_rdd(spark: SparkSession, slices: Sequence[Slice]) -> RDD[dict[str, Any]]:
    """One partition per slice, in plan order (so partition order is output order)."""
    docs = [s.to_json() for s in slices]
    return spark.sparkContext.parallelize(docs, numSlices=max(len(docs), 1))


def scan(
    spark: SparkSession,
    slices: Sequence[Slice],
    address: str,
    flt: MessageFilter,
    mode: str,
    *,
    target: str = "",
    stats: Any = None,
) -> RDD[Any]:
    """The RDD of what ``scan_partition`` yields for ``slices`` (lazy: nothing runs yet)."""
    if mode not in MODES:
        raise ValueError(f"unknown scan mode {mode!r}")
    job = functools.partial(
        scan_partition, address=address, filter_doc=flt.to_json(), mode=mode, target=target, stats=stats
    )
    if mode in (SEND_TOPIC, SEND_GROUP):
        # Copies must keep each queue's order, so a queue's slices run in one partition, in order.
        return queue_partitions_rdd(spark, slices).mapPartitions(job)
    return slices_rdd(spark, slices).mapPartitions(job)


def queue_partitions_rdd(spark: SparkSession, slices: Sequence[Slice]) -> RDD[dict[str, Any]]:
    """One partition per queue holding its slices in offset order (for the sending modes)."""
    by_queue: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in slices:
        by_queue.setdefault((s.broker, s.queue_id), []).append(s.to_json())
    groups = list(by_queue.values())
    return spark.sparkContext.parallelize(groups, numSlices=max(len(groups), 1)).flatMap(lambda docs: docs)


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


def write_jsonl(spark: SparkSession, lines: RDD[Any], path: str, mode: str) -> None:
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
    df = spark.createDataFrame(lines, schema, verifySchema=False)
    df.write.mode(mode).partitionBy("broker", "queue_id").option("compression", "none").text(path)


def write_parquet(spark: SparkSession, rows: RDD[Any], path: str, mode: str) -> None:
    """Parquet through Spark's writer, partitioned by queue (Hive-style folders)."""
    df = spark.createDataFrame(rows, row_schema(), verifySchema=False)
    df.write.mode(mode).partitionBy("broker", "queue_id").parquet(path)


def search_partition(queries: Iterable[tuple[str, str, int, int]], *, address: str) -> Iterator[tuple[Any, ...]]:
    """Executor side of a bulk time→offset search: (topic, broker, queue id, ts) → + offset."""
    from mqadmin.admin import connect

    admin = connect(address, read_only=True)
    try:
        for topic, broker, qid, ts in queries:
            yield (topic, broker, qid, ts, admin.search_offset(MessageQueue(topic, broker, qid), ts))
    finally:
        admin.close()


def bulk_search(
    spark: SparkSession, address: str, queries: Sequence[tuple[str, str, int, int]], partitions: int | None = None
) -> list[tuple[str, str, int, int, int]]:
    """Many (topic, broker, queue id, timestamp) searches spread over executors, in input order."""
    if not queries:
        return []
    n = partitions or min(len(queries), max(spark.sparkContext.defaultParallelism * 4, 1))
    rdd = spark.sparkContext.parallelize(list(queries), numSlices=n)
    out: list[tuple[str, str, int, int, int]] = rdd.mapPartitions(
        functools.partial(search_partition, address=address)
    ).collect()
    return out


def first_match_partition(
    slice_docs: Iterable[dict[str, Any]], *, address: str, field: str, ts: int
) -> Iterator[dict[str, int] | None]:
    """Executor side of a born-time or property search: per slice, its first message whose field
    is at or after ``ts`` (None when none is), read with the replay's slice worker."""
    from mqadmin.admin import connect

    time_field = TimeField.parse(field)
    # with a mock:// address this opens the store read-only: a search only reads
    admin = connect(address, read_only=True)
    try:
        for doc in slice_docs:
            hit = first_match(admin, Slice.from_json(doc), time_field, ts)
            yield None if hit is None else hit.to_json()
    finally:
        admin.close()


def first_matches(
    spark: SparkSession, address: str, slices: Sequence[Slice], field: TimeField, ts: int
) -> list[FirstMatch | None]:
    """Scan every slice at once, one partition per slice, each up to its own first match; the
    results come back in slice order (``earliest_per_queue`` turns them into per-queue answers)."""
    if not slices:
        return []
    job = functools.partial(first_match_partition, address=address, field=str(field), ts=ts)
    docs: list[dict[str, Any] | None] = slices_rdd(spark, slices).mapPartitions(job).collect()
    return [None if d is None else FirstMatch.from_json(d) for d in docs]
