"""Time→offset searches by a field the broker cannot search (born time, a user property).

The broker's index answers store time only, so these read messages: each queue's whole range is
cut into slices and read with the replay's slice worker, stopping at the first message whose
field is at or after the time. The local engine reads a queue's slices in order; Spark reads them
all at once and keeps the earliest hit per queue (``earliest_per_queue``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mqadmin.errors import UsageError
from mqadmin.model import MessageQueue
from mqadmin.replay import TimeField as TimeField  # its home is light: parsing -s needs no planner
from mqadmin.replay.planner import Slice
from mqadmin.replay.worker import MessageFilter, SliceScan

if TYPE_CHECKING:
    from mqadmin.admin import Admin

#: a store-time window that keeps every message: scans filter by their own field, not store time
_ANY_STORE_TIME = (0, 2**63 - 1)


@dataclass(frozen=True)
class FirstMatch:
    """The first message of a slice, in offset order, whose time field is at or after the time."""

    index: int
    offset: int
    time: int
    store_time: int

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @staticmethod
    def from_json(doc: dict[str, Any]) -> FirstMatch:
        return FirstMatch(int(doc["index"]), int(doc["offset"]), int(doc["time"]), int(doc["store_time"]))


def scan_slices(
    queues: Sequence[tuple[MessageQueue, int, int]], slice_size: int, group: str | None = None
) -> tuple[Slice, ...]:
    """Each queue's whole ``[min, max)`` cut into slices, numbered across every queue (and topic)
    in the order given: what a scan reads, one Spark partition per slice."""
    if slice_size < 1:
        raise UsageError("--slice-size must be at least 1")
    out: list[Slice] = []
    for mq, lo, hi in queues:
        for s in range(lo, hi, slice_size):
            out.append(Slice(len(out), mq.topic, mq.broker_name, mq.queue_id, s, min(s + slice_size, hi), group))
    return tuple(out)


def first_match(admin: Admin, slc: Slice, field: TimeField, ts: int) -> FirstMatch | None:
    """Read ``slc`` with the replay's slice worker and stop at the first message whose ``field``
    is at or after ``ts``: the one scan both engines run for born-time and property searches."""
    for msg in SliceScan(admin, slc, MessageFilter(*_ANY_STORE_TIME)):
        t = field.of(msg)
        if t is not None and t >= ts:
            return FirstMatch(slc.index, msg.queue_offset, t, msg.store_timestamp)
    return None


def first_match_in_order(admin: Admin, slices: Sequence[Slice], field: TimeField, ts: int) -> FirstMatch | None:
    """The local engine's scan of one queue: its slices in offset order, stopping at the first hit."""
    for slc in sorted(slices, key=lambda s: s.start):
        hit = first_match(admin, slc, field, ts)
        if hit is not None:
            return hit
    return None


def earliest_per_queue(slices: Sequence[Slice], hits: Iterable[FirstMatch | None]) -> dict[MessageQueue, FirstMatch]:
    """Per queue, the hit with the lowest offset among its slices' hits (Spark scans them all at
    once): the same answer as reading the queue in order and stopping at the first hit."""
    by_index = {s.index: s for s in slices}
    out: dict[MessageQueue, FirstMatch] = {}
    for hit in hits:
        if hit is None:
            continue
        mq = by_index[hit.index].mq
        if mq not in out or hit.offset < out[mq].offset:
            out[mq] = hit
    return out
