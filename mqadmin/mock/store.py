"""One broker's store in RocketMQ's own on-disk layout.

``commitlog/<20-digit start offset>`` files of encoded message records (never spanning a
file; a BLANK record fills a file's tail), ``consumequeue/<topic>/<queueId>/<20-digit start
byte>`` files of 20-byte entries (commit-log offset, size, tags hash), and ``config/*.json``
(topics, subscription groups, consumer offsets with ``topic@group`` keys). The same reader
opens a stopped real broker's store (files preallocated with zeros are handled); with
``offline=True`` it also bounds each queue as a broker does when it loads a store: entries
whose commit-log file has expired are skipped, and a tail pointing past the end of the commit
log (a broker killed before its flush) is dropped. The commit log's files are read and
written by ``mqadmin.mock.commitlog``; this module holds the consume queues, the config files
and the broker's store over both.
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqadmin import fastjson, names
from mqadmin.errors import StoreError
from mqadmin.message import (
    MAGIC_V1,
    MAGIC_V2,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    encode_message,
    encode_record,
    pack_host,
    tags_code,
)
from mqadmin.mock.commitlog import (
    BLANK_HEAD,
    DEFAULT_COMMITLOG_FILE_SIZE,
    CommitLog,
    StoreWriteFailed,
    append_file,
    file_name,
    numbered_files,
)
from mqadmin.mock.lite import MULTI_QUEUE_OFFSET
from mqadmin.model import Message
from mqadmin.safety import atomic_write

CQ_UNIT = 20
_CQ_ENTRY = struct.Struct(">qiq")
DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_UNIT  # RocketMQ's default mappedFileSizeConsumeQueue
#: a record's bytes besides body, properties and topic, at most (IPv6 hosts, a v2 topic length)
_RECORD_MAX_FIXED = 48 + 20 + 8 + 20 + 4 + 8 + 4 + 2 + 2

__all__ = [
    "CQ_UNIT",
    "DEFAULT_COMMITLOG_FILE_SIZE",
    "DEFAULT_CQ_FILE_SIZE",
    "BatchFields",
    "BatchItem",
    "BrokerStore",
    "ConsumeQueue",
    "CqEntry",
    "StoreWriteFailed",
]


def _used_length(data: bytes) -> int:
    """Bytes holding entries in a consume-queue file that may be preallocated with zeros."""
    used = len(data.rstrip(b"\0"))
    return -(-used // CQ_UNIT) * CQ_UNIT


#: one message of a batch: flag, body, encoded properties, tags code
BatchItem = tuple[int, bytes, bytes, int]


@dataclass(frozen=True)
class BatchFields:
    """What the messages of one send share."""

    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int = 0


@dataclass(frozen=True)
class CqEntry:
    commitlog_offset: int
    size: int
    tags_code: int


class ConsumeQueue:
    """Entries of one queue; the cached bytes are refreshed when the files grow."""

    def __init__(self, folder: Path, file_size: int):
        self.folder = folder
        self.file_size = file_size
        self._files: list[tuple[int, Path]] = []
        self._data: dict[int, bytes] = {}
        self._count = 0
        self._first = 0
        self._skip = 0  # leading entries whose commit-log bytes are gone (offline bounds)
        self._trim = 0  # trailing entries pointing past the commit log's end (offline bounds)
        self._stamp: tuple[int, int] | None = None
        self.reload()

    def reload(self) -> bool:
        """Re-read the files if they changed; True when they did (bounds must be re-applied)."""
        files = numbered_files(self.folder)
        stamp = (len(files), files[-1][1].stat().st_size if files else 0)
        if stamp == self._stamp and files and files[-1][0] in self._data:
            return False
        self._skip = self._trim = 0
        self._files = files
        self._data = {}
        if files:
            self._first = files[0][0] // CQ_UNIT
            last_start, last_path = files[-1]
            last = last_path.read_bytes()
            self._data[last_start] = last[: _used_length(last)]
            self._count = (last_start + len(self._data[last_start])) // CQ_UNIT - self._first
        else:
            self._first, self._count = 0, 0
        self._stamp = stamp
        return True

    @property
    def min_offset(self) -> int:
        return self._first + self._skip

    @property
    def max_offset(self) -> int:
        """Next offset to be written (RocketMQ's max offset)."""
        return self._first + self._count - self._trim

    def apply_bounds(self, min_commitlog_offset: int, record_ok: Callable[[CqEntry], bool]) -> None:
        """Bound the queue as a broker loading this store would (read-only views only).

        Leading entries below the commit log's first file are skipped (the broker's
        correctMinOffset); trailing entries whose record is not in the commit log are dropped
        (recovery truncates them). Entries are in commit-log order, so both ends are bisected.
        """
        self._skip = self._trim = 0
        lo, hi = self.min_offset, self.max_offset
        if hi <= lo:
            return
        if self.entry(lo).commitlog_offset < min_commitlog_offset:
            left, right = lo, hi
            while left < right:
                mid = (left + right) // 2
                if self.entry(mid).commitlog_offset < min_commitlog_offset:
                    left = mid + 1
                else:
                    right = mid
            lo = left
        if lo < hi and not record_ok(self.entry(hi - 1)):
            left, right = lo, hi - 1  # the first entry whose record is missing lies in [left, right]
            while left < right:
                mid = (left + right) // 2
                if record_ok(self.entry(mid)):
                    left = mid + 1
                else:
                    right = mid
            hi = left
        self._skip = lo - self._first
        self._trim = self._first + self._count - max(hi, lo)

    def entry(self, offset: int) -> CqEntry:
        pos = offset * CQ_UNIT
        starts = [s for s, _ in self._files]
        i = bisect.bisect_right(starts, pos) - 1
        if i < 0 or not (self.min_offset <= offset < self.max_offset):
            raise IndexError(offset)
        start, path = self._files[i]
        data = self._data.get(start)
        if data is None:
            raw = path.read_bytes()
            data = self._data[start] = raw[: _used_length(raw)]
        return CqEntry(*_CQ_ENTRY.unpack_from(data, pos - start))

    def entries(self, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """(commit-log offset, size, tags code) of the entries ``[lo, hi)`` (within the queue's
        bounds), unpacked in bulk from the cached files."""
        lo, hi = max(lo, self.min_offset), min(hi, self.max_offset)
        out: list[tuple[int, int, int]] = []
        for i, (start, path) in enumerate(self._files):
            first = start // CQ_UNIT
            last = self._files[i + 1][0] // CQ_UNIT if i + 1 < len(self._files) else hi
            if last <= lo or first >= hi:
                continue
            data = self._data.get(start)
            if data is None:
                raw = path.read_bytes()
                data = self._data[start] = raw[: _used_length(raw)]
            a, b = (max(lo, first) - first) * CQ_UNIT, (min(hi, last) - first) * CQ_UNIT
            b = min(b, len(data) - len(data) % CQ_UNIT)
            out.extend(_CQ_ENTRY.iter_unpack(memoryview(data)[a:b]))
        return out

    def file_bounds(self) -> list[tuple[int, int]]:
        """[first, end) logical offsets of each file, for per-file searches as the broker does."""
        out = []
        for i, (start, _) in enumerate(self._files):
            end = self._files[i + 1][0] if i + 1 < len(self._files) else self.max_offset * CQ_UNIT
            out.append((max(start // CQ_UNIT, self.min_offset), end // CQ_UNIT))
        return out

    def append(self, entry: CqEntry) -> int:
        return self.append_packed(_CQ_ENTRY.pack(entry.commitlog_offset, entry.size, entry.tags_code))

    def append_packed(self, packed: bytes) -> int:
        """Append whole 20-byte entries in one write (a batch's, all in one file when they fit);
        returns the offset of the first."""
        offset = self.max_offset
        pos = offset * CQ_UNIT
        while packed:
            start = pos - pos % self.file_size
            part, packed = packed[: start + self.file_size - pos], packed[start + self.file_size - pos :]
            if not self._files or self._files[-1][0] != start:
                self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / file_name(start)
            append_file(path, pos - start, part, "consume queue")
            if not self._files or self._files[-1][0] != start:
                self._files.append((start, path))
                self._data[start] = b""
                if len(self._files) == 1:
                    self._first = start // CQ_UNIT
            self._data[start] = self._data.get(start, b"") + part
            self._count += len(part) // CQ_UNIT
            self._stamp = (len(self._files), len(self._data[start]))
            pos += len(part)
        return offset


class BrokerStore:
    """Files of one broker. Writers are serialised by the caller (the cluster's lock)."""

    def __init__(
        self,
        root: Path,
        *,
        writable: bool = False,
        commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE,
        cq_file_size: int = DEFAULT_CQ_FILE_SIZE,
        offline: bool = False,
    ):
        if offline and writable:
            raise ValueError("an offline store view is read-only")
        self.root = root
        self.writable = writable
        #: a stopped (or dead) broker's files: bound queues as the broker's recovery would
        self.offline = offline
        self.commitlog = CommitLog(root / "commitlog", commitlog_file_size)
        self.cq_file_size = cq_file_size
        #: which file each config was read from (None: neither it nor its .bak was usable)
        self.config_sources: dict[str, Path | None] = {}
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.RLock()
        if writable:
            self.commitlog.recover()

    # ---- consume queues and messages ----
    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            cq = self._queues[key] = ConsumeQueue(self._queue_folder(topic, queue_id), self.cq_file_size)
            changed = True
        elif not self.writable:
            changed = cq.reload()
        else:
            changed = False
        if changed and self.offline:
            cq.apply_bounds(self.commitlog.min_offset, self.record_ok)
        return cq

    def _queue_folder(self, topic: str, queue_id: int) -> Path:
        """The queue's folder; a name that is not a legal topic never reaches a path (callers check
        names with the broker's answer first; this is the last line of defence)."""
        try:
            # a lite topic's LMQ (%LMQ%$parent$lite) has a folder of that name, as on a broker
            for part in topic.split("$") if topic.startswith("%LMQ%$") else [topic]:
                names.safe_path_part(part)
        except ValueError as exc:
            raise StoreError(str(exc)) from None
        if queue_id < 0:
            raise StoreError(f"queue id {queue_id} cannot be a store folder name")
        return self.root / "consumequeue" / topic / str(queue_id)

    def record_ok(self, entry: CqEntry) -> bool:
        """Whether the commit log holds the record a consume-queue entry points at."""
        try:
            size, magic = BLANK_HEAD.unpack(self.commitlog.read(entry.commitlog_offset, BLANK_HEAD.size))
        except StoreError:
            return False
        return size == entry.size and magic in (MAGIC_V1, MAGIC_V2)

    def queue_ids_on_disk(self, topic: str) -> list[int]:
        folder = self.root / "consumequeue" / topic
        if not folder.is_dir():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    def topics_on_disk(self) -> list[str]:
        folder = self.root / "consumequeue"
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def put(self, msg: Message, lmqs: Sequence[str] = ()) -> Message:
        """Store ``msg`` (queue and times already set); fills in its offsets and returns it.
        ``lmqs``: the LMQs it is dispatched to as well (queue 0 each), their offsets written
        into its INNER_MULTI_QUEUE_OFFSET, in the same order (store: LmqDispatch)."""
        self._check_writable()
        with self._lock:
            cq = self.queue(msg.topic, msg.queue_id)
            msg.queue_offset = cq.max_offset
            lmq_cqs = [self.queue(name, 0) for name in lmqs]
            if lmq_cqs:
                msg.properties[MULTI_QUEUE_OFFSET] = ",".join(str(q.max_offset) for q in lmq_cqs)

            def record_for(pos: int) -> bytes:
                msg.commitlog_offset = pos
                return encode_message(msg)

            pos, record = self.commitlog.append(record_for)
            entry = CqEntry(pos, len(record), tags_code(msg.properties))
            try:
                cq.append(entry)
            except StoreWriteFailed:
                self.commitlog.truncate(pos)  # never a record no queue points at, nor a torn one
                raise
            for lmq_cq in lmq_cqs:  # after the parent's entry, as the broker's dispatch writes them
                lmq_cq.append(entry)
            return msg

    def put_batch(
        self, topic: str, queue_id: int, items: Sequence[BatchItem], fields: BatchFields, lmqs: Sequence[str] = ()
    ) -> tuple[int, list[int]]:
        """Store a producer's batch in one queue, all or nothing: the records are encoded into
        one buffer and appended with one commit-log write and one consume-queue write (the
        broker's putMessages; a batch never spans two commit-log files). No ``Message`` per
        record. Returns the first queue offset and each record's commit-log offset. ``lmqs``: as
        ``put`` (a single message, whose encoded properties get INNER_MULTI_QUEUE_OFFSET)."""
        self._check_writable()
        if lmqs and len(items) != 1:
            raise ValueError("only a single message is dispatched to LMQs")
        most = sum(len(body) + len(props) for _, body, props, _ in items) + len(items) * (
            _RECORD_MAX_FIXED + len(topic)
        )
        if len(items) > 1 and most + BLANK_HEAD.size > self.commitlog.file_size:
            # larger than a commit-log file (only tiny test files): half by half
            half = len(items) // 2
            first, offsets = self.put_batch(topic, queue_id, items[:half], fields)
            return first, offsets + self.put_batch(topic, queue_id, items[half:], fields)[1]
        with self._lock:
            cq = self.queue(topic, queue_id)
            first_qoff = cq.max_offset
            lmq_cqs = [self.queue(name, 0) for name in lmqs]
            if lmq_cqs:
                flag, body, props, tags = items[0]
                lmq_offsets = ",".join(str(q.max_offset) for q in lmq_cqs)
                items = [(flag, body, props + f"{MULTI_QUEUE_OFFSET}\x01{lmq_offsets}\x02".encode(), tags)]
            born, born_v6 = pack_host(fields.born_host)
            store, store_v6 = pack_host(fields.store_host)
            sys_flag = fields.sys_flag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
            sys_flag |= (SYSFLAG_BORNHOST_V6 if born_v6 else 0) | (SYSFLAG_STOREHOST_V6 if store_v6 else 0)
            topic_bytes = topic.encode()
            entries = bytearray()
            positions: list[int] = []

            def records_at(pos: int) -> bytes:
                del entries[:], positions[:]
                records = []
                for i, (flag, body, props, tags) in enumerate(items):
                    record = encode_record(
                        topic_bytes,
                        props,
                        body,
                        queue_id,
                        flag,
                        first_qoff + i,
                        pos,
                        sys_flag,
                        fields.born_timestamp,
                        born,
                        fields.store_timestamp,
                        store,
                        fields.reconsume_times,
                    )
                    entries.extend(_CQ_ENTRY.pack(pos, len(record), tags))
                    records.append(record)
                    positions.append(pos)
                    pos += len(record)
                return b"".join(records)

            pos, _ = self.commitlog.append(records_at)
            try:
                cq.append_packed(bytes(entries))
            except StoreWriteFailed:
                self.commitlog.truncate(pos)  # never a record no queue points at, nor a torn one
                raise
            for lmq_cq in lmq_cqs:
                lmq_cq.append_packed(bytes(entries))
            return first_qoff, positions

    def read_record(self, entry: CqEntry) -> bytes:
        return self.commitlog.read(entry.commitlog_offset, entry.size)

    def store_time(self, entry: CqEntry) -> int:
        return self.commitlog.store_timestamp(entry.commitlog_offset, entry.size)

    # ---- config files ----
    def config_path(self, name: str) -> Path:
        return self.root / "config" / name

    def load_config(self, name: str) -> dict[str, Any]:
        """Parse a config JSON, falling back to ``.bak`` when the file is missing, empty or broken."""
        path = self.config_path(name)
        for candidate in (path, path.with_name(path.name + ".bak")):
            try:
                text = candidate.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"cannot read {candidate}: {exc.strerror}") from None
            if not text.strip():
                continue
            try:
                doc = fastjson.loads(text)
            except ValueError:
                continue
            if isinstance(doc, dict):
                self.config_sources[name] = candidate
                return doc
        self.config_sources[name] = None
        return {}

    def save_config(self, name: str, doc: dict[str, Any], *, keep_bak: bool = True) -> None:
        self._check_writable()
        atomic_write(self.config_path(name), fastjson.dumps_pretty(doc), keep_bak=keep_bak)

    def _check_writable(self) -> None:
        if not self.writable:
            raise StoreError(f"store {self.root} is open read-only")

    def close(self) -> None:
        self.commitlog.close()
