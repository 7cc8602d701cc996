"""SEARCH_OFFSET_BY_TIMESTAMP over one consume queue, as each broker version answers it.

4.x, 5.0 and 5.1.0 settle on the nearer neighbour in time (after the last message: max - 1);
5.1.1+ answer LOWER (the first entry stored at or after the time; after the last message: max)
or, when asked, UPPER (the last entry stored at or before it). Sources: store ConsumeQueue.java
(binarySearchInQueueByTime, and 4.9's getOffsetInQueueByTime), common BoundaryType.java.
"""

from __future__ import annotations

import bisect

from mqadmin.mock.store import BrokerStore, ConsumeQueue


def search_offset(store: BrokerStore, cq: ConsumeQueue, ts: int, boundary: str, *, lower_boundary: bool) -> int:
    """The queue offset for ``ts``; ``lower_boundary`` selects the 5.1.1+ search."""
    lo, hi = cq.min_offset, cq.max_offset
    if hi <= 0 or hi <= lo:
        return 0
    if not lower_boundary:
        return _search_nearest(store, cq, ts)
    times = _TimeView(store, cq)
    if boundary.upper() == "UPPER":
        return max(lo, bisect.bisect_right(times, ts, lo, hi) - 1)
    return bisect.bisect_left(times, ts, lo, hi)


def _search_nearest(store: BrokerStore, cq: ConsumeQueue, ts: int) -> int:
    """4.x (and 5.0–5.1.0): a binary search in one file that settles on the nearer neighbour.

    The file is the first whose newest message is not older than ``ts`` (the broker uses the
    file's modification time), else the last one.
    """
    bounds = cq.file_bounds()
    chosen = bounds[-1]
    for first, end in bounds:
        if end > first and store.store_time(cq.entry(end - 1)) >= ts:
            chosen = (first, end)
            break
    low, high = chosen[0], chosen[1] - 1
    left = right = -1
    left_t = right_t = -1
    while high >= low:
        mid = (low + high) // 2
        t = store.store_time(cq.entry(mid))
        if t == ts:
            return mid
        if t > ts:
            high, right, right_t = mid - 1, mid, t
        else:
            low, left, left_t = mid + 1, mid, t
    if left_t == -1:
        return right
    if right_t == -1:
        return left
    return right if abs(ts - left_t) > abs(ts - right_t) else left


class _TimeView:
    """Store times of a queue as a lazy sequence, so bisect reads only the probes it needs."""

    def __init__(self, store: BrokerStore, cq: ConsumeQueue):
        self._store = store
        self._cq = cq

    def __len__(self) -> int:
        return self._cq.max_offset

    def __getitem__(self, offset: int) -> int:
        return self._store.store_time(self._cq.entry(offset))
