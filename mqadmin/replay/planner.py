"""Plan a replay: a store-time window → per-queue ``[start, end)`` offsets → slices.

The broker's time search is coarse (4.x lands on the *nearest* message, any of several with
the same millisecond; 5.x on the first at or after), so each edge is settled here: starting
from the broker's answer, probe store times outward with a doubling step until the boundary is
bracketed, then bisect. Under store times that never go backwards the plan is exact; the slice
worker still filters by exact store time, so a clock step back costs extra reads, not
correctness inside the plan.

The plan is plain data (JSON round trip, a fingerprint) because Spark executors and
checkpoints get it, never a live object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mqadmin.errors import UsageError
from mqadmin.model import MessageQueue
from mqadmin.replay import DEFAULT_SLICE_SIZE

if TYPE_CHECKING:
    from mqadmin.admin import Admin

PLAN_FORMAT = "mqadmin-replay-plan/1"
#: concurrent edge searches while planning (the remoting client pipelines them)
PLAN_FAN_OUT = 16


@dataclass(frozen=True)
class QueueRange:
    """One queue's part of the window: ``[start, end)`` offsets, and its bounds when planned."""

    broker: str
    queue_id: int
    start: int
    end: int
    min_offset: int
    max_offset: int

    @property
    def count(self) -> int:
        return max(self.end - self.start, 0)

    @property
    def expired_at_most(self) -> int:
        """How many messages retention deleted that the window may have held: all those below the
        min offset when the window starts at it (its begin is not after the oldest message left),
        else none. Their store times are gone with them, so this is a bound, not a count."""
        return self.min_offset if self.start == self.min_offset > 0 else 0


@dataclass(frozen=True)
class Slice:
    """A contiguous offset range of one queue; ``index`` is its place in the output order."""

    index: int
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int
    #: the consumer group the slice is read as (None: TOOLS_CONSUMER)
    group: str | None = None

    @property
    def count(self) -> int:
        return self.end - self.start

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        if self.group is None:  # plans written before the option read the same
            del doc["group"]
        return doc

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Slice:
        return Slice(
            int(doc["index"]),
            str(doc["topic"]),
            str(doc["broker"]),
            int(doc["queue_id"]),
            int(doc["start"]),
            int(doc["end"]),
            None if doc.get("group") is None else str(doc["group"]),
        )


@dataclass(frozen=True)
class Plan:
    """What a replay will read: the window, each queue's range, and the slices in output order."""

    topic: str
    begin: int
    end: int
    ranges: tuple[QueueRange, ...]
    slices: tuple[Slice, ...]

    @property
    def total(self) -> int:
        """Messages in the plan's offset ranges (before tag/key filters)."""
        return sum(r.count for r in self.ranges)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "topic": self.topic,
            "begin": self.begin,
            "end": self.end,
            "ranges": [asdict(r) for r in self.ranges],
            "slices": [s.to_json() for s in self.slices],
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> Plan:
        if doc.get("format") != PLAN_FORMAT:
            raise UsageError(f"not a replay plan (format {doc.get('format')!r}, expected {PLAN_FORMAT!r})")
        try:
            return Plan(
                topic=str(doc["topic"]),
                begin=int(doc["begin"]),
                end=int(doc["end"]),
                ranges=tuple(
                    QueueRange(
                        str(r["broker"]),
                        int(r["queue_id"]),
                        int(r["start"]),
                        int(r["end"]),
                        int(r["min_offset"]),
                        int(r["max_offset"]),
                    )
                    for r in doc["ranges"]
                ),
                slices=tuple(Slice.from_json(s) for s in doc["slices"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"corrupt replay plan: missing or bad field {exc}") from None

    def fingerprint(self) -> str:
        """A digest of the plan's content: a checkpoint belongs to exactly one plan (whichever
        group reads it: a resume may read as another)."""
        doc = self.to_json()
        for s in doc["slices"]:
            s.pop("group", None)
        return digest(doc)


def digest(doc: object) -> str:
    """sha256 of canonical JSON (sorted keys, compact): equal documents, equal digests."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def select_queues(
    queues: Sequence[MessageQueue], brokers: Sequence[str] = (), queue_ids: Sequence[int] = ()
) -> list[MessageQueue]:
    """The queues a --broker/--queue selection names; unknown names are usage errors."""
    known_brokers = sorted({q.broker_name for q in queues})
    for b in brokers:
        if b not in known_brokers:
            raise UsageError(f"unknown broker {b!r} for this topic; it is on: {', '.join(known_brokers)}")
    chosen = [q for q in queues if not brokers or q.broker_name in brokers]
    known_ids = sorted({q.queue_id for q in chosen})
    for qid in queue_ids:
        if qid not in known_ids:
            raise UsageError(f"no queue {qid} on the selected broker(s); queue ids are {_spans(known_ids)}")
    return sorted(q for q in chosen if not queue_ids or q.queue_id in queue_ids)


def _spans(ids: list[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]}..{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) else ", ".join(map(str, ids))


def plan_window(
    admin: Admin,
    queues: Sequence[MessageQueue],
    begin: int,
    end: int,
    *,
    slice_size: int = DEFAULT_SLICE_SIZE,
    group: str | None = None,
) -> Plan:
    """The exact offset range of ``[begin, end)`` (store time) on each queue, cut into slices
    read as ``group`` (None: TOOLS_CONSUMER)."""
    if begin >= end:
        raise UsageError(f"the window is empty: begin ({begin}) must be before end ({end})")
    if slice_size < 1:
        raise UsageError("--slice-size must be at least 1")
    topics = {q.topic for q in queues}
    if len(topics) > 1:
        raise ValueError(f"a plan covers one topic, got {sorted(topics)}")

    def one(mq: MessageQueue) -> QueueRange:
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        if hi <= lo:
            return QueueRange(mq.broker_name, mq.queue_id, lo, lo, lo, hi)
        probe = _StoreTimes(admin, mq, group)
        start = first_at_or_after(probe, begin, admin.search_offset(mq, begin), lo, hi)
        stop = first_at_or_after(probe, end, admin.search_offset(mq, end), max(start, lo), hi)
        return QueueRange(mq.broker_name, mq.queue_id, start, max(stop, start), lo, hi)

    ordered = sorted(queues)
    if len(ordered) <= 1:
        ranges = [one(q) for q in ordered]
    else:
        with ThreadPoolExecutor(max_workers=min(PLAN_FAN_OUT, len(ordered))) as pool:
            ranges = list(pool.map(one, ordered))
    topic = ordered[0].topic if ordered else ""
    return Plan(topic, begin, end, tuple(ranges), cut(topic, ranges, slice_size, group))


def cut(topic: str, ranges: Sequence[QueueRange], slice_size: int, group: str | None = None) -> tuple[Slice, ...]:
    """Slices of at most ``slice_size`` offsets, in output order: by queue, then offset."""
    out: list[Slice] = []
    for r in sorted(ranges, key=lambda r: (r.broker, r.queue_id)):
        for s in range(r.start, r.end, slice_size):
            out.append(Slice(len(out), topic, r.broker, r.queue_id, s, min(s + slice_size, r.end), group))
    return tuple(out)


class _StoreTimes:
    """Store time at an offset, by pulling one message; memoised, since bisection re-asks."""

    def __init__(self, admin: Admin, mq: MessageQueue, group: str | None = None):
        self._admin = admin
        self._mq = mq
        self._group = group
        self._seen: dict[int, int | None] = {}

    def __call__(self, offset: int) -> int | None:
        if offset not in self._seen:
            result = self._admin.pull(self._mq, offset, 1, group=self._group)
            hit = next((m for m in result.messages if m.queue_offset == offset), None)
            self._seen[offset] = None if hit is None else hit.store_timestamp
        return self._seen[offset]


def first_at_or_after(store_time: Callable[[int], int | None], ts: int, hint: int, lo: int, hi: int) -> int:
    """The first offset in ``[lo, hi]`` whose message is stored at or after ``ts`` (``hi`` if none).

    ``hint`` is the broker's answer; the boundary is bracketed by probing outward from it with a
    doubling step (cheap when the hint is good, as it nearly always is), then bisected. An offset
    whose message is gone (retention) counts as older than ``ts``.
    """

    def at_or_after(offset: int) -> bool:
        if offset >= hi:
            return True
        if offset < lo:
            return False
        t = store_time(offset)
        return t is not None and t >= ts

    h = min(max(hint, lo), hi)
    step = 1
    if at_or_after(h):
        right, left = h, h - 1
        while left >= lo and at_or_after(left):
            right, step = left, step * 2
            left = right - step
        left = max(left, lo - 1)
    else:
        left, right = h, h + 1
        while right < hi and not at_or_after(right):
            left, step = right, step * 2
            right = left + step
        right = min(right, hi)
    # invariant: left is before the boundary (or lo - 1), right is at or after it (or hi)
    while right - left > 1:
        mid = (left + right) // 2
        if at_or_after(mid):
            right = mid
        else:
            left = mid
    return right
