"""The slice worker: pull one slice, keep what the window and filters select.

Both engines run exactly this code (threads locally, one partition per slice on Spark), so
there is one implementation of pulling and filtering to get right. It takes a plain
``Slice`` and ``MessageFilter`` and any ``Admin``, never engine state.
"""

from __future__ import annotations

import functools
import gc
import operator
import os
import re
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqadmin.errors import MqadminError, UsageError
from mqadmin.message import iter_messages
from mqadmin.model import Message, MessageQueue, PullResult, RawPull
from mqadmin.replay import TimeField
from mqadmin.replay.planner import Slice
from mqadmin.replay.records import Row, decode_rows, row_time, rows_to_table, to_row

if TYPE_CHECKING:
    import pyarrow

    from mqadmin.admin import Admin, PendingPull
    from mqadmin.replay.sql92 import SqlFilter

#: messages asked for per pull. Brokers cap it themselves (a real one at 32 by default; the mock
#: at 4 MiB): the scan learns the cap from the first answer and asks for that much thereafter
PULL_BATCH = 1024
#: pulls kept in flight per slice: queue offsets are consecutive, so the next pulls are known
#: before the answers come back, and round trips overlap (the remoting client pipelines them)
PULL_DEPTH = 8
#: messages kept in flight per slice, at least: a broker that caps pulls at 32 messages (a real
#: one) gets 32 pulls in flight, since its throughput is round trips
IN_FLIGHT_MESSAGES = 1024
#: ... but no more pulls than this (a broker reading from disk answers 8 messages a pull)
MAX_PULL_DEPTH = 64
#: RocketMQ separates several keys in the KEYS property with a space
KEY_SEPARATOR = " "
#: a replay row's body (its last field)
_BODY = operator.itemgetter(-1)
_TAG = re.compile(r"^[^|\s]+$")


#: environment variable naming a fault point to die at (tests of crash windows, never set in use)
FAULT_ENV = "MQADMIN_FAULT_POINT"


def fault_point(name: str) -> None:
    """Die here by SIGKILL when ``$MQADMIN_FAULT_POINT`` names this point: a crash at an exact
    step, for tests of the windows a resume must survive (no timing races)."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


def pause_gc() -> Callable[[], None]:
    """Pause the cyclic garbage collector until the returned function is called (pauses nest,
    across threads). A replay allocates millions of acyclic objects (rows, buffers, lines) that
    the collector would scan over and over to free nothing: that was a third of its time."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    done = threading.Event()

    def resume() -> None:
        global _gc_pauses
        with _gc_lock:
            if done.is_set():
                return
            done.set()
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()

    return resume


class PullError(MqadminError):
    """A pull answered something a replay cannot continue from (the queue shrank, or looped)."""


def parse_tag_expression(expr: str | None) -> frozenset[str] | None:
    """``A || B`` → {A, B}; ``*`` or nothing → None (every tag), as RocketMQ subscriptions read."""
    if expr is None or expr.strip() in ("", "*"):
        return None
    tags = [t.strip() for t in expr.split("||")]
    bad = [t for t in tags if not _TAG.match(t)]
    if bad:
        raise UsageError(f"bad tag expression {expr!r}: use TAG or 'TagA || TagB' (tags have no spaces or '|')")
    return frozenset(tags)


@functools.lru_cache(maxsize=16)
def sql_filter(text: str) -> SqlFilter:
    """The compiled ``--sql`` expression (compiled once per process: filters travel as text)."""
    from mqadmin.replay.sql92 import compile_sql

    return compile_sql(text)


@functools.lru_cache(maxsize=16)
def time_field(text: str) -> TimeField:
    """The parsed ``--time-field`` (filters travel as text)."""
    return TimeField.parse(text)


@dataclass(frozen=True)
class MessageFilter:
    """Which messages of a slice are kept: store time in ``[begin, end)``, then tag, key and
    the SQL92 expression on the properties. With ``time_field`` (born or property:NAME) the
    store-time window is the read window, widened by --slack, and the field must also be in
    ``[field_begin, field_end)``: the window the user asked for."""

    begin: int
    end: int
    tags: frozenset[str] | None = None
    key: str | None = None
    sql: str | None = None
    #: positions (broker, queue id, queue offset) of duplicates to drop: --dedup on Spark, found
    #: by a first pass over the window (counted as matched, then as duplicates, as locally)
    exclude: frozenset[tuple[str, int, int]] | None = None
    #: --time-field other than store (TimeField text); None: the window is by store time
    time_field: str | None = None
    field_begin: int = 0
    field_end: int = 0

    @property
    def windows_only(self) -> bool:
        """Whether messages are kept by the window alone (store time; the slice's offsets), with
        no tag, key, SQL, --time-field or --dedup to apply: what a column-wise decoding applies."""
        return (
            self.tags is None
            and self.key is None
            and self.sql is None
            and self.exclude is None
            and self.time_field is None
        )

    def matches(self, msg: Message) -> bool:
        if not self.begin <= msg.store_timestamp < self.end:
            return False
        if self.time_field is not None:
            t = time_field(self.time_field).of(msg)
            if t is None or not self.field_begin <= t < self.field_end:
                return False
        if self.tags is not None and msg.tags not in self.tags:
            return False
        if self.key is not None and self.key not in (msg.keys or "").split(KEY_SEPARATOR):
            return False
        if self.sql is not None and not sql_filter(self.sql).matches(msg.properties):
            return False
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "begin": self.begin,
            "end": self.end,
            "tags": sorted(self.tags) if self.tags is not None else None,
            "key": self.key,
            "sql": self.sql,
            "exclude": sorted(self.exclude) if self.exclude is not None else None,
            "time_field": self.time_field,
            "field_begin": self.field_begin,
            "field_end": self.field_end,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> MessageFilter:
        tags = doc.get("tags")
        return MessageFilter(
            int(doc["begin"]),
            int(doc["end"]),
            frozenset(str(t) for t in tags) if tags is not None else None,
            str(doc["key"]) if doc.get("key") is not None else None,
            str(doc["sql"]) if doc.get("sql") is not None else None,
            frozenset((str(b), int(q), int(o)) for b, q, o in doc["exclude"])
            if doc.get("exclude") is not None
            else None,
            str(doc["time_field"]) if doc.get("time_field") is not None else None,
            int(doc.get("field_begin", 0)),
            int(doc.get("field_end", 0)),
        )

    def outside(self, t: int | None, store_time: int) -> bool:
        """Whether a message read has its field time further from its store time than the slack:
        a sign the slack is too small (a message of the window so far off may be stored beyond the
        widened window, and never read). Jitter within the slack never counts, even at the edges."""
        return t is not None and abs(t - store_time) > self.field_begin - self.begin


@dataclass
class SliceStats:
    """What one slice did: offsets read, messages kept, their body bytes, and offsets lost to
    retention (deleted before they could be read)."""

    index: int
    scanned: int = 0
    matched: int = 0
    bytes: int = 0
    missing: int = 0
    written: int = 0
    #: matched messages --dedup dropped (their UNIQ_KEY was written before)
    duplicates: int = 0
    #: --time-field: messages read whose field is further from their store time than the slack
    outside: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "index": self.index,
            "scanned": self.scanned,
            "matched": self.matched,
            "bytes": self.bytes,
            "missing": self.missing,
            "written": self.written,
            "duplicates": self.duplicates,
            "outside": self.outside,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> SliceStats:
        keys = ("index", "scanned", "matched", "bytes", "missing", "written", "duplicates", "outside")
        return SliceStats(**{k: int(doc.get(k, 0)) for k in keys})


@dataclass
class SliceScan:
    """Iterate the kept messages of one slice, counting as it goes.

    ``on_progress(offsets, body_bytes)`` is called after each pull (the progress bar); ``stop``
    ends the scan early between pulls (Ctrl-C), leaving ``complete`` False. Iterating gives
    ``Message`` objects; ``rows()`` gives the same messages as replay rows, decoded in bulk.
    """

    admin: Admin
    slice: Slice
    filter: MessageFilter
    batch: int = PULL_BATCH
    stop: threading.Event | None = None
    on_progress: Callable[[int, int], None] | None = None
    depth: int = PULL_DEPTH
    #: --max-inflight's share: never more pulls in flight than this, whatever the broker's cap
    max_depth: int = MAX_PULL_DEPTH
    stats: SliceStats = field(init=False)
    complete: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.stats = SliceStats(self.slice.index)

    def __iter__(self) -> Iterator[Message]:
        s = self.slice
        for offset, answer in self._answers():
            messages = answer.messages if isinstance(answer, PullResult) else _decode_messages(answer)
            matched = body_bytes = 0
            exclude, field = self.filter.exclude, self.filter.time_field
            for msg in messages:
                if not offset <= msg.queue_offset < s.end:
                    continue
                msg.broker_name = msg.broker_name or s.broker
                if field is not None and self.filter.begin <= msg.store_timestamp < self.filter.end:
                    self.stats.outside += self.filter.outside(time_field(field).of(msg), msg.store_timestamp)
                if self.filter.matches(msg):
                    matched += 1
                    if exclude is not None and (s.broker, msg.queue_id, msg.queue_offset) in exclude:
                        self.stats.duplicates += 1
                        continue
                    body_bytes += len(msg.body)
                    yield msg
            self._advance(offset, answer, matched, body_bytes)

    def rows(self) -> Iterator[list[Row]]:
        """The kept messages as lists of replay rows (ROW_KEYS order), one list per pull."""
        s, flt = self.slice, self.filter
        begin, end, tags, key = flt.begin, flt.end, flt.tags, flt.key
        sql = sql_filter(flt.sql).matches if flt.sql is not None else None
        for offset, answer in self._answers():
            if isinstance(answer, PullResult):
                decoded = [to_row(m, s.broker) for m in answer.messages]
                kept = [r for r in decoded if offset <= r[3] < s.end and begin <= r[10] < end]
            else:
                kept = decode_rows(answer.records, s.broker, (offset, s.end, begin, end))
            if flt.time_field is not None:
                of_row = row_time(time_field(flt.time_field))
                times = [of_row(r) for r in kept]
                self.stats.outside += sum(flt.outside(t, r[10]) for r, t in zip(kept, times, strict=True))
                lo, hi = flt.field_begin, flt.field_end
                kept = [r for r, t in zip(kept, times, strict=True) if t is not None and lo <= t < hi]
            if tags is not None:
                kept = [r for r in kept if r[7] in tags]
            if key is not None:
                kept = [r for r in kept if key in (r[8] or "").split(KEY_SEPARATOR)]
            if sql is not None:
                kept = [r for r in kept if sql(r[14])]
            matched = len(kept)
            if flt.exclude is not None:
                kept = [r for r in kept if (s.broker, r[2], r[3]) not in flt.exclude]
                self.stats.duplicates += matched - len(kept)
            body_bytes = sum(map(len, map(_BODY, kept)))
            if kept:
                yield kept
            self._advance(offset, answer, matched, body_bytes)

    @property
    def columnar(self) -> bool:
        """Whether ``tables()`` decodes column-wise: the window alone selects, and the admin
        answers pulls with raw records."""
        return self.filter.windows_only and getattr(self.admin, "pull_raw", None) is not None

    def table(self) -> pyarrow.Table:
        """The kept messages as one Arrow table: ``rows_to_table`` of everything ``rows()`` gives
        (see ``tables``)."""
        if not self.columnar:
            return rows_to_table([r for batch in self.rows() for r in batch])
        return next(self.tables(None))

    def tables(self, max_bytes: int | None) -> Iterator[pyarrow.Table]:
        """The kept messages as Arrow tables of consecutive pulls, each decoded column-wise from
        at most about ``max_bytes`` of pulled records (all of the slice's in one when None):
        without a Python object per message, and without holding a slice of big messages whole
        when the sink can take it in pieces (JSON lines). Progress is reported as each table is
        decoded rather than pull by pull. Only when ``columnar``."""
        assert self.columnar
        from mqadmin.replay.columns import decode_pulls

        s, flt = self.slice, self.filter
        answers: list[tuple[int, RawPull]] = []
        size = 0

        def decoded() -> pyarrow.Table:
            pulls = [(a.records, (offset, s.end, flt.begin, flt.end)) for offset, a in answers]
            got = decode_pulls(pulls, s.broker)
            for (offset, answer), matched, body_bytes in zip(answers, got.counts, got.body_bytes, strict=True):
                self._advance(offset, answer, matched, body_bytes)
            answers.clear()
            return got.table

        for offset, answer in self._answers():
            assert isinstance(answer, RawPull)  # bulk pulls answer raw records
            answers.append((offset, answer))
            size += sum(map(len, answer.records))
            if max_bytes is not None and size >= max_bytes:
                yield decoded()
                size = 0
        if answers or max_bytes is None:
            yield decoded()

    def _advance(self, offset: int, answer: PullResult | RawPull, matched: int, body_bytes: int) -> None:
        """Count one answer after its messages went out (a retention gap counts as missing)."""
        self.stats.matched += matched
        self.stats.bytes += body_bytes
        if answer.status == "OFFSET_TOO_SMALL":
            return
        nxt = min(answer.next_begin_offset, self.slice.end)
        self.stats.scanned += nxt - offset
        if self.on_progress is not None:
            self.on_progress(nxt - offset, body_bytes)

    def _answers(self) -> Iterator[tuple[int, PullResult | RawPull]]:
        """Every pull answer of the slice in offset order, as (offset pulled, answer), with up to
        ``depth`` pulls in flight. Each answer is checked and its offsets counted in order, as
        one pull at a time would; an answer that does not end where the next pull in flight
        begins (a short answer, a retention gap) re-aims the pulls that follow."""
        s, mq, stats = self.slice, self.slice.mq, self.stats
        bulk = getattr(self.admin, "pull_raw", None)
        if bulk is None:  # an Admin without bulk pulls: one Message pull at a time
            pull_raw: Callable[[MessageQueue, int, int], PendingPull | _MessagePull] = functools.partial(
                _MessagePull, self.admin, group=s.group
            )
        else:
            pull_raw = functools.partial(bulk, group=s.group)
        many = getattr(self.admin, "pull_raw_many", None) if bulk is not None else None
        step = self.batch
        probing = True  # until a first answer shows the broker's cap, one pull at a time
        in_flight: deque[tuple[int, int, PendingPull | _MessagePull]] = deque()
        depth = max(1, min(self.depth, self.max_depth))
        offset = ahead = s.start
        while offset < s.end:
            if self.stop is not None and self.stop.is_set():
                return
            # refill when half the window has come back, all in one write (not a write per answer)
            if ahead < s.end and (not in_flight or (not probing and len(in_flight) <= depth // 2)):
                room = 1 if probing else depth - len(in_flight)
                ranges: list[tuple[int, int]] = []
                while ahead < s.end and len(ranges) < room:
                    n = min(step, s.end - ahead)
                    ranges.append((ahead, n))
                    ahead += n
                if many is not None and len(ranges) > 1:
                    pulls: list[PendingPull | _MessagePull] = list(many(mq, ranges, group=s.group))
                else:
                    pulls = [pull_raw(mq, start, n) for start, n in ranges]
                in_flight.extend((start, n, p) for (start, n), p in zip(ranges, pulls, strict=True))
            start, asked, pending = in_flight.popleft()
            answer = pending.result()
            nxt = answer.next_begin_offset
            if answer.status == "OFFSET_TOO_SMALL":
                # retention deleted the head of the range: nothing to read there any more
                nxt = min(max(nxt, offset + 1), s.end)
                stats.missing += nxt - offset
                yield offset, _skipped(answer, nxt)
            else:
                if answer.status not in ("FOUND", "NO_MATCHED_MESSAGE"):
                    raise PullError(
                        f"{mq}: pull at offset {offset} answered {answer.status} "
                        f"(queue now [{answer.min_offset}, {answer.max_offset})); the slice ends at {s.end}"
                    )
                if nxt <= offset:
                    raise PullError(f"{mq}: pull at offset {offset} did not advance (next {nxt})")
                probing = False
                if answer.status == "FOUND" and nxt < min(start + asked, s.end):
                    step = min(step, nxt - offset)  # the broker's cap per pull
                    depth = max(1, min(max(self.depth, IN_FLIGHT_MESSAGES // step), MAX_PULL_DEPTH, self.max_depth))
                yield offset, answer
                nxt = min(nxt, s.end)
            offset = nxt
            if in_flight and in_flight[0][0] < offset:  # skipped past pulls in flight: re-aim
                in_flight.clear()
            if not in_flight:
                ahead = offset
            elif in_flight[0][0] > offset:  # a short answer: read the rest before what follows
                gap = in_flight[0][0] - offset
                in_flight.appendleft((offset, gap, pull_raw(mq, offset, gap)))
        self.complete = True


def _skipped(answer: RawPull | PullResult, nxt: int) -> RawPull:
    """An OFFSET_TOO_SMALL answer as one without messages that ends at ``nxt``."""
    return RawPull(answer.status, nxt, answer.min_offset, answer.max_offset, [])


def _decode_messages(answer: RawPull) -> list[Message]:
    return [m for buf in answer.records for m in iter_messages(bytes(buf))]


class _MessagePull:
    """``Admin.pull`` behind the bulk-pull interface, run when its result is asked for."""

    def __init__(self, admin: Admin, mq: MessageQueue, offset: int, max_nums: int, *, group: str | None = None):
        self._args = (admin, mq, offset, max_nums)
        self._group = group

    def result(self) -> PullResult:
        admin, mq, offset, max_nums = self._args
        return admin.pull(mq, offset, max_nums, group=self._group)


def run_slice(
    admin: Admin,
    slc: Slice,
    flt: MessageFilter,
    *,
    stop: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    max_depth: int = MAX_PULL_DEPTH,
) -> tuple[list[Message], SliceStats, bool]:
    """All kept messages of a slice in offset order, its stats, and whether it ran to the end."""
    scan = SliceScan(admin, slc, flt, stop=stop, on_progress=on_progress, max_depth=max_depth)
    messages = list(scan)
    return messages, scan.stats, scan.complete


def run_slice_rows(
    admin: Admin,
    slc: Slice,
    flt: MessageFilter,
    *,
    stop: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    max_depth: int = MAX_PULL_DEPTH,
) -> tuple[list[Row], SliceStats, bool]:
    """``run_slice`` as replay rows: what the file and stdout sinks write."""
    scan = SliceScan(admin, slc, flt, stop=stop, on_progress=on_progress, max_depth=max_depth)
    rows = [r for batch in scan.rows() for r in batch]
    return rows, scan.stats, scan.complete
