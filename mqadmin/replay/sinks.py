"""Where replayed messages go: a JSONL or Parquet file, stdout, a topic, or one group.

File sinks write beside the target (``PATH.partial`` / ``PATH.parts/``) and move the result
into place only when the replay has finished, so an existing file is never half-replaced and
an interrupted run leaves exactly what its checkpoint says. ``sync()`` is the durable point:
the engine records a slice as finished in the checkpoint only after it returns.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TextIO, cast

from mqadmin.errors import MqadminError, UsageError
from mqadmin.model import Message, MessageQueue
from mqadmin.protocol.constants import DLQ_PREFIX, RETRY_PREFIX
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import Row, json_chunks, rows_to_table, to_row
from mqadmin.safety import fsync_dir

if TYPE_CHECKING:
    import pyarrow

    from mqadmin.admin import Admin

SCHEMES = ("jsonl", "parquet", "stdout", "topic", "group", "origin")
FILE_SCHEMES = ("jsonl", "parquet")
SEND_SCHEMES = ("topic", "group", "origin")
#: where the broker records a retried message's first topic (when it copies the message into
#: %RETRY%GROUP, and on into %DLQ%GROUP once retries run out), and the first message's id
#: (broker: AbstractSendMessageProcessor / SendMessageProcessor, consumerSendMsgBack)
RETRY_TOPIC = "RETRY_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"

#: properties a re-published copy records about the message it was copied from
ORIGIN_MSG_ID = "MQADMIN_ORIGIN_MSG_ID"
ORIGIN_UNIQ_KEY = "MQADMIN_ORIGIN_UNIQ_KEY"
ORIGIN_TOPIC = "MQADMIN_ORIGIN_TOPIC"
ORIGIN_BROKER = "MQADMIN_ORIGIN_BROKER"
ORIGIN_QUEUE_ID = "MQADMIN_ORIGIN_QUEUE_ID"
ORIGIN_QUEUE_OFFSET = "MQADMIN_ORIGIN_QUEUE_OFFSET"
ORIGIN_STORE_TIMESTAMP = "MQADMIN_ORIGIN_STORE_TIMESTAMP"

#: properties the broker or client runtime owns; a re-published copy must not inherit them
#: (a stale DELAY would delay it again, a stale UNIQ_KEY would make it look like the original)
SYSTEM_PROPERTIES = frozenset(
    {
        "UNIQ_KEY",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "CLUSTER",
        "INSTANCE_ID",
        "__transactionId__",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "__STARTDELIVERTIME",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "TIMER_OUT_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_DEL_UNIQKEY",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "__BORNHOST",
        "bname",
        "TRACE_CONTEXT",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "__CRC32#",
    }
)
#: send-back delay level for group re-delivery: level 1 is the broker's shortest delay (1 s);
#: 0 would let the broker pick 3 + reconsume times (10 s and up)
GROUP_DELAY_LEVEL = 1


@dataclass(frozen=True)
class Target:
    """A parsed ``--to``: the scheme and its argument (an absolute path for local files)."""

    scheme: str
    value: str = ""

    @property
    def is_file(self) -> bool:
        return self.scheme in FILE_SCHEMES

    @property
    def is_send(self) -> bool:
        return self.scheme in SEND_SCHEMES

    @property
    def is_remote_path(self) -> bool:
        """A URI (s3a://, hdfs://): only the Spark engine's writers can reach it."""
        return self.is_file and "://" in self.value

    def __str__(self) -> str:
        return f"{self.scheme}:{self.value}" if self.value else self.scheme


def parse_target(text: str) -> Target:
    """``jsonl:PATH``, ``parquet:PATH``, ``stdout``, ``topic:NAME``, ``group:GROUP`` or ``origin``."""
    scheme, sep, value = text.strip().partition(":")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise UsageError(
            f"unknown --to {text!r}: use jsonl:PATH, parquet:PATH, stdout, topic:NAME, group:GROUP or origin"
        )
    if scheme in ("stdout", "origin"):
        if value:
            raise UsageError(f"--to {scheme} takes no argument, got {text!r}")
        return Target(scheme)
    if not value.strip():
        raise UsageError(f"--to {scheme}: needs {'a path' if scheme in FILE_SCHEMES else 'a name'} after the colon")
    value = value.strip()
    if scheme in SEND_SCHEMES:
        from mqadmin import names

        problem = names.group_problem(value) if scheme == "group" else names.topic_problem(value)
        if problem:
            raise UsageError(f"--to {scheme}:{value}: {problem}")
    if scheme in FILE_SCHEMES and "://" not in value:
        value = str(Path(value).expanduser().absolute())
    return Target(scheme, value)


def staging_paths(target: Target) -> list[Path]:
    """Where a local file sink keeps its unfinished output (resume needs it, --overwrite clears it)."""
    if not target.is_file or target.is_remote_path:
        return []
    p = Path(target.value)
    return [p.with_name(p.name + ".partial"), p.with_name(p.name + ".parts")]


def remove_staging(target: Target) -> None:
    """Remove what a finished replay's sink left beside its output: a run killed while cleaning
    up after the output was put in place leaves part of it, which nothing would ever read."""
    for path in staging_paths(target):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if staging_paths(target):
        fsync_dir(Path(target.value).parent)


class Sink(Protocol):
    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        """Write (or send) a slice's kept messages in order; returns how many went out."""
        ...

    def sync(self) -> dict[str, Any]:
        """Make everything written so far durable; the state a resumed run restores."""
        ...

    def finish(self) -> None:
        """Put the output in place once every slice is written."""
        ...

    def abort(self, *, keep: bool) -> None:
        """Stop after a failure; ``keep`` the unfinished output when a checkpoint will resume it."""
        ...


class RowSink(Sink, Protocol):
    """A sink of replay rows (files, stdout): the engines decode messages in bulk for it, or
    have worker processes encode whole slices with its ``encoder()``."""

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int: ...

    def encoder(self) -> Callable[[Slice, Sequence[Row]], Any]:
        """A picklable function that a worker process runs on a slice's rows (encoding them,
        or writing a part file): its result goes to ``write_encoded``."""
        ...

    def write_encoded(self, slc: Slice, encoded: Any, count: int) -> int:
        """Write what ``encoder()`` made of a slice's ``count`` rows."""
        ...

    def batch_encoder(self) -> Callable[[Slice, Sequence[Row]], list[bytes]] | None:
        """An ``encoder()`` whose outputs for consecutive batches of a slice's rows, concatenated,
        are its output for the whole slice (JSON lines), or None (a Parquet part needs them all):
        slice workers then encode each pull's rows as they come, while they are in cache."""
        ...

    def table_encoder(self) -> Callable[[Slice, pyarrow.Table], Any] | None:
        """An ``encoder()`` that takes a slice's rows as an Arrow table decoded column-wise
        (``SliceScan.tables``): one table a slice, or consecutive pieces of it when the sink has a
        ``batch_encoder`` (their outputs concatenate), or None: slice workers then hand it rows."""
        ...


def encode_json(slc: Slice, rows: Sequence[Row]) -> list[bytes]:
    """The JSON-lines sinks' encoder (see ``json_chunks``)."""
    return json_chunks(rows)


def encode_json_table(slc: Slice, table: pyarrow.Table) -> list[Any]:
    """The JSON-lines file sink's table encoder: the same bytes as ``encode_json`` of its rows
    (see ``table_json_chunks``), as Arrow buffers."""
    from mqadmin.replay.jsonl import table_json_chunks

    return table_json_chunks(table)


def columns_available() -> bool:
    """Whether a slice can be decoded column-wise: ``replay.columns`` needs numpy and pyarrow
    (the ``spark`` extra). Without them the sinks take rows, as they always could."""
    import importlib.util

    return importlib.util.find_spec("numpy") is not None and importlib.util.find_spec("pyarrow") is not None


def as_row_sink(sink: Sink) -> RowSink | None:
    """The sink as a RowSink, or None when it needs ``Message`` objects (re-publishing sinks)."""
    return cast(RowSink, sink) if hasattr(sink, "write_rows") else None


class JsonlSink:
    """JSON lines appended to ``PATH.partial``; resume truncates to the last synced length."""

    def __init__(self, path: Path, *, resume: dict[str, Any] | None = None):
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f: BinaryIO
        if resume is not None:
            size = int(resume.get("bytes", 0))
            try:
                self._f = self.partial.open("r+b")
            except FileNotFoundError:
                raise UsageError(
                    f"cannot resume: {self.partial} is gone; delete the checkpoint to start over"
                ) from None
            if os.fstat(self._f.fileno()).st_size < size:
                self._f.close()
                raise UsageError(f"cannot resume: {self.partial} is shorter than the checkpoint says ({size} bytes)")
            self._f.truncate(size)
            self._f.seek(size)
        else:
            self._f = self.partial.open("wb")

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        return self.write_rows(slc, [to_row(m, slc.broker) for m in messages])

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int:
        return self.write_encoded(slc, json_chunks(rows), len(rows))

    def encoder(self) -> Callable[[Slice, Sequence[Row]], list[bytes]]:
        return encode_json

    def batch_encoder(self) -> Callable[[Slice, Sequence[Row]], list[bytes]]:
        return encode_json

    def table_encoder(self) -> Callable[[Slice, pyarrow.Table], list[Any]] | None:
        return encode_json_table if columns_available() else None

    def write_encoded(self, slc: Slice, encoded: list[bytes], count: int) -> int:
        self._f.writelines(encoded)
        return count

    def sync(self) -> dict[str, Any]:
        self._f.flush()
        os.fsync(self._f.fileno())
        return {"bytes": self._f.tell()}

    def finish(self) -> None:
        self.sync()
        self._f.close()
        os.replace(self.partial, self.path)
        fsync_dir(self.path.parent)

    def abort(self, *, keep: bool) -> None:
        self._f.close()
        if not keep:
            self.partial.unlink(missing_ok=True)


class ParquetSink:
    """One Parquet part per slice in ``PATH.parts/``, merged into ``PATH`` at the end.

    A Parquet file is unreadable until its footer is written, so it cannot be appended to after
    a crash; parts can: each is complete or absent.
    """

    def __init__(self, path: Path, *, resume: dict[str, Any] | None = None):
        from mqadmin.replay import require

        require("pyarrow.parquet", "--to parquet:")  # fail here, before any broker work

        self.path = path
        self.parts = path.with_name(path.name + ".parts")
        self._written: list[int] = []
        if resume is not None:
            self._written = sorted(int(i) for i in resume.get("parts", []))
            missing = [i for i in self._written if not self._part(i).exists()]
            if missing:
                raise UsageError(
                    f"cannot resume: part {self._part(missing[0])} is gone; delete the checkpoint to start over"
                )
            keep = {self._part(i).name for i in self._written}
            if self.parts.is_dir():
                for stale in self.parts.iterdir():
                    if stale.name not in keep:
                        stale.unlink()
        else:
            shutil.rmtree(self.parts, ignore_errors=True)
        self.parts.mkdir(parents=True, exist_ok=True)

    def _part(self, index: int) -> Path:
        return self.parts / f"{index:08d}.parquet"

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        return self.write_rows(slc, [to_row(m, slc.broker) for m in messages])

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int:
        return self.write_encoded(slc, self.encoder()(slc, rows), len(rows))

    def encoder(self) -> Callable[[Slice, Sequence[Row]], str | None]:
        return functools.partial(write_part, str(self.parts))

    def batch_encoder(self) -> None:
        return None

    def table_encoder(self) -> Callable[[Slice, pyarrow.Table], str | None] | None:
        if not columns_available():  # pyarrow alone: rows (the column-wise decoder needs numpy)
            return None
        return functools.partial(write_part, str(self.parts))

    def write_encoded(self, slc: Slice, encoded: str | None, count: int) -> int:
        """Move a part that ``write_part`` wrote (and synced) into place."""
        if encoded is None:
            return 0
        os.replace(encoded, self._part(slc.index))
        self._written.append(slc.index)
        return count

    def sync(self) -> dict[str, Any]:
        fsync_dir(self.parts)
        return {"parts": sorted(self._written)}

    def finish(self) -> None:
        import pyarrow.parquet as pq

        from mqadmin.replay.records import arrow_schema

        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with pq.ParquetWriter(tmp, arrow_schema()) as writer:
            for index in sorted(self._written):
                writer.write_table(pq.read_table(self._part(index), schema=arrow_schema()))
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        shutil.rmtree(self.parts, ignore_errors=True)

    def abort(self, *, keep: bool) -> None:
        if not keep:
            shutil.rmtree(self.parts, ignore_errors=True)


def write_part(parts: str, slc: Slice, rows: Sequence[Row] | pyarrow.Table) -> str | None:
    """Write a slice's rows (or their table) as a Parquet part beside its final name, synced;
    returns its path (None for no rows). Worker processes run this, so parts are written in
    parallel."""
    if not len(rows):
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = rows if isinstance(rows, pa.Table) else rows_to_table(rows)
    tmp = Path(parts) / f"{slc.index:08d}.parquet.{os.getpid()}.tmp"
    # parts are read back once, by finish(): uncompressed and plain they cost a fifth to read,
    # and nothing reads their statistics (the output file gets its own)
    pq.write_table(table, tmp, compression="none", use_dictionary=False, write_statistics=False)
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    return str(tmp)


def count_rows(slc: Slice, rows: Sequence[Row]) -> int:
    """CountSink's encoder: a slice's rows only count."""
    return len(rows)


class CountSink:
    """Writes nothing and counts: a dry run that reads to apply the filters (and --dedup)."""

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        return len(messages)

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int:
        return len(rows)

    def encoder(self) -> Callable[[Slice, Sequence[Row]], int]:
        return count_rows

    def batch_encoder(self) -> None:
        return None

    def table_encoder(self) -> None:
        return None

    def write_encoded(self, slc: Slice, encoded: int, count: int) -> int:
        return count

    def sync(self) -> dict[str, Any]:
        return {}

    def finish(self) -> None:
        pass

    def abort(self, *, keep: bool) -> None:
        pass


class StdoutSink:
    """JSON lines on stdout, for pipes (``| jq``); the summary then goes to stderr."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        return self.write_rows(slc, [to_row(m, slc.broker) for m in messages])

    def write_rows(self, slc: Slice, rows: Sequence[Row]) -> int:
        return self.write_encoded(slc, json_chunks(rows), len(rows))

    def encoder(self) -> Callable[[Slice, Sequence[Row]], list[bytes]]:
        return encode_json

    def batch_encoder(self) -> Callable[[Slice, Sequence[Row]], list[bytes]]:
        return encode_json

    def table_encoder(self) -> None:
        return None

    def write_encoded(self, slc: Slice, encoded: list[bytes], count: int) -> int:
        for chunk in encoded:
            self.stream.write(chunk.decode("utf-8"))
        return count

    def write_lines(self, lines: Sequence[str]) -> int:
        """Lines already encoded elsewhere (by Spark executors)."""
        if lines:
            self.stream.write("".join(line + "\n" for line in lines))
        return len(lines)

    def sync(self) -> dict[str, Any]:
        self.stream.flush()
        return {}

    def finish(self) -> None:
        self.stream.flush()

    def abort(self, *, keep: bool) -> None:
        try:
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass


def republished(msg: Message, topic: str, broker: str) -> Message:
    """A copy of ``msg`` for ``topic``: same body, flag, tags, keys and user properties, plus
    properties naming the original (msg id, uniq key, topic, broker, queue, offset, store time)."""
    props = {k: v for k, v in msg.properties.items() if k not in SYSTEM_PROPERTIES}
    props.update(
        {
            ORIGIN_MSG_ID: msg.msg_id,
            ORIGIN_TOPIC: msg.topic,
            ORIGIN_BROKER: broker,
            ORIGIN_QUEUE_ID: str(msg.queue_id),
            ORIGIN_QUEUE_OFFSET: str(msg.queue_offset),
            ORIGIN_STORE_TIMESTAMP: str(msg.store_timestamp),
        }
    )
    if msg.uniq_key:
        props[ORIGIN_UNIQ_KEY] = msg.uniq_key
    return Message(topic=topic, body=bytes(msg.body), properties=props, flag=msg.flag)


class TopicSink:
    """Re-publish to a topic. A message goes to the same broker and queue number when the target
    has them (so per-queue order survives, as ordered consumers need), else round-robin."""

    def __init__(self, admin: Admin, topic: str):
        self.admin = admin
        self.topic = topic
        route = admin.topic_route(topic)
        self._queues: dict[str, int] = {q.broker_name: q.write_queue_nums for q in route.queues if q.write_queue_nums}
        self._all = [MessageQueue(topic, b, i) for b, n in sorted(self._queues.items()) for i in range(n)]
        if not self._all:
            raise UsageError(f"topic {topic!r} has no writable queue")
        self._rr = 0

    def _queue_for(self, broker: str, queue_id: int) -> MessageQueue:
        n = self._queues.get(broker)
        if n:
            return MessageQueue(self.topic, broker, queue_id % n)
        self._rr += 1
        return self._all[self._rr % len(self._all)]

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        queue = self._queue_for(slc.broker, slc.queue_id)
        for msg in messages:
            self.admin.send(self.topic, republished(msg, self.topic, slc.broker), queue)
        return len(messages)

    def sync(self) -> dict[str, Any]:
        return {}

    def finish(self) -> None:
        pass

    def abort(self, *, keep: bool) -> None:
        pass


def origin_topic(msg: Message) -> str | None:
    """The topic a retried or dead-lettered message first came from (None: it was never retried)."""
    return msg.properties.get(RETRY_TOPIC) or None


def redelivered(msg: Message, group: str, broker: str) -> Message:
    """A dead letter's copy for ``%RETRY%GROUP``, as a consumer's own fallback send-back makes it:
    the group's consumers read it as a message of its first topic (``RETRY_TOPIC``), and its
    retry count starts again (a send-back of a dead letter would only dead-letter it again)."""
    copy = republished(msg, RETRY_PREFIX + group, broker)
    copy.properties[RETRY_TOPIC] = origin_topic(msg) or msg.topic
    copy.properties[ORIGIN_MESSAGE_ID] = msg.properties.get(ORIGIN_MESSAGE_ID) or msg.uniq_key or msg.msg_id
    return copy


class GroupSink:
    """Re-deliver to one group through the broker's send-back: the broker copies each message
    into ``%RETRY%GROUP``, which only that group consumes, so no other group sees it again.
    A dead letter (read from a ``%DLQ%`` topic) is sent into ``%RETRY%GROUP`` as a new message
    instead: the broker's send-back counts its retries as used up and dead-letters it again."""

    def __init__(self, admin: Admin, group: str, delay_level: int = GROUP_DELAY_LEVEL):
        self.admin = admin
        self.group = group
        self.delay_level = delay_level

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        for msg in messages:
            msg.broker_name = msg.broker_name or slc.broker
            if msg.topic.startswith(DLQ_PREFIX):
                self.admin.send(RETRY_PREFIX + self.group, redelivered(msg, self.group, slc.broker))
            else:
                self.admin.send_back(self.group, msg, self.delay_level)
        return len(messages)

    def sync(self) -> dict[str, Any]:
        return {}

    def finish(self) -> None:
        pass

    def abort(self, *, keep: bool) -> None:
        pass


class OriginSink:
    """Send each message back to the topic it first came from (``RETRY_TOPIC``): dead letters
    home. Copies as ``topic:`` makes them (keys, tags, user properties, ``MQADMIN_ORIGIN_*``); a
    message that was never retried has no first topic and stops the replay (nothing guessed)."""

    def __init__(self, admin: Admin):
        self.admin = admin
        self._sinks: dict[str, TopicSink] = {}

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        for msg in messages:
            topic = origin_topic(msg)
            if topic is None:
                raise MqadminError(
                    f"{msg.topic} queue {msg.queue_id} offset {msg.queue_offset} has no {RETRY_TOPIC} property: "
                    "it was never retried, so it has no topic to go back to; the replay stopped before it"
                )
            sink = self._sinks.get(topic)
            if sink is None:
                sink = self._sinks[topic] = TopicSink(self.admin, topic)
            sink.write(slc, [msg])
        return len(messages)

    def sync(self) -> dict[str, Any]:
        return {}

    def finish(self) -> None:
        pass

    def abort(self, *, keep: bool) -> None:
        pass


def send_sink(admin: Admin, scheme: str, target: str) -> Sink:
    """The sink of a send (``topic``, ``group`` or ``origin``), on either engine."""
    if scheme == "topic":
        return TopicSink(admin, target)
    if scheme == "origin":
        return OriginSink(admin)
    return GroupSink(admin, target)


def open_sink(
    target: Target,
    *,
    admin: Admin | None = None,
    stdout: TextIO | None = None,
    resume: dict[str, Any] | None = None,
) -> Sink:
    """The sink for ``target``; ``resume`` is the state a checkpoint saved from ``sync()``."""
    if target.is_remote_path:
        raise UsageError(f"{target.value} is not a local path; remote file systems need --engine spark")
    if target.scheme == "jsonl":
        return JsonlSink(Path(target.value), resume=resume)
    if target.scheme == "parquet":
        return ParquetSink(Path(target.value), resume=resume)
    if target.scheme == "stdout":
        assert stdout is not None
        return StdoutSink(stdout)
    assert admin is not None
    return send_sink(admin, target.scheme, target.value)
