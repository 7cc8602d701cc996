"""The slice worker's pipelined pulls: several in flight, answers used strictly in offset order,
short answers and retention gaps re-aiming the pulls that follow -- the same rows as one pull at
a time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqadmin.admin import Admin, connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.model import MessageQueue, PullResult, RawPull
from mqadmin.replay.planner import Slice
from mqadmin.replay.worker import (
    IN_FLIGHT_MESSAGES,
    MAX_PULL_DEPTH,
    PULL_DEPTH,
    MessageFilter,
    PullError,
    SliceScan,
    run_slice,
    run_slice_rows,
)

T0 = 1_700_000_000_000
PER_QUEUE = 600


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admin]:
    root = tmp_path_factory.mktemp("pipe") / "store"
    cluster = MockCluster.create(root, ("broker-a",))
    fill_topic(cluster, "T", PER_QUEUE * 2, T0, T0 + 100, queues_per_broker=2)
    cluster.close()
    a = connect(f"mock://{root}", read_only=True)
    yield a
    a.close()


class CappedAdmin:
    """A broker that answers at most ``cap`` messages a pull (a real one: 32), counts the pulls
    in flight, and can answer some pulls short or as a retention gap."""

    def __init__(self, inner: Admin, cap: int, short_at: frozenset[int] = frozenset(), gone_below: int = 0):
        self.inner, self.cap, self.short_at, self.gone_below = inner, cap, short_at, gone_below
        self.address = inner.address
        self.in_flight = self.most_in_flight = self.pulls = 0
        self.asked: list[tuple[int, int]] = []

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult:
        return self.inner.pull(mq, offset, max_nums)

    def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> Pending:
        self.in_flight += 1
        self.pulls += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.asked.append((offset, max_nums))
        return Pending(self, mq, offset, max_nums)


class Pending:
    def __init__(self, admin: CappedAdmin, mq: MessageQueue, offset: int, max_nums: int):
        self.admin, self.mq, self.offset, self.max_nums = admin, mq, offset, max_nums

    def result(self) -> RawPull:
        a = self.admin
        a.in_flight -= 1
        if self.offset < a.gone_below:
            return RawPull("OFFSET_TOO_SMALL", a.gone_below, a.gone_below, PER_QUEUE, [])
        n = min(self.max_nums, a.cap, 5 if self.offset in a.short_at else a.cap)
        return a.inner.pull_raw(self.mq, self.offset, n).result()


def serial(admin: Admin, slc: Slice, flt: MessageFilter) -> list[tuple[object, ...]]:
    msgs, _, _ = run_slice(admin, slc, flt)
    return [(m.queue_offset, m.store_timestamp, m.body) for m in msgs]


def as_tuples(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [(r[3], r[10], bytes(r[-1])) for r in rows]  # type: ignore[call-overload]


def test_pipelined_rows_equal_serial_pulls(admin: Admin) -> None:
    slc = Slice(0, "T", "broker-a", 1, 17, 583)
    flt = MessageFilter(T0 + 10, T0 + 90)
    capped = CappedAdmin(admin, cap=32)
    rows, stats, complete = run_slice_rows(capped, slc, flt)  # type: ignore[arg-type]
    want = serial(admin, slc, flt)
    assert as_tuples(rows) == want and complete and want
    assert stats.scanned == 583 - 17 and stats.matched == len(want) and stats.missing == 0
    assert capped.most_in_flight > 1  # pulls overlapped
    assert capped.asked[0] == (17, 583 - 17) and all(n <= 32 for _, n in capped.asked[1:])  # learnt the cap
    # every offset was asked for exactly once: no pull was wasted on a known cap
    covered = sorted(o for start, n in capped.asked for o in range(start, start + min(n, 32)))
    assert covered == list(range(17, 583))


class BatchingAdmin(CappedAdmin):
    """A CappedAdmin that also takes a window of pulls in one call, as the remoting client does."""

    def __init__(self, inner: Admin, cap: int, **kw: object):
        super().__init__(inner, cap, **kw)  # type: ignore[arg-type]
        self.batches: list[int] = []

    def pull_raw_many(
        self, mq: MessageQueue, ranges: list[tuple[int, int]], *, group: str | None = None
    ) -> list[Pending]:
        self.batches.append(len(ranges))
        return [self.pull_raw(mq, offset, n) for offset, n in ranges]


def test_pulls_go_out_in_windows_sized_for_the_brokers_cap(admin: Admin) -> None:
    """A broker that caps pulls at 32 gets 1024 messages' worth (32 pulls) in flight, sent a
    half window at a time; the rows are what one pull at a time reads."""
    slc = Slice(0, "T", "broker-a", 0, 0, PER_QUEUE)
    flt = MessageFilter(T0 + 5, T0 + 95)
    capped = BatchingAdmin(admin, cap=32)
    rows, stats, complete = run_slice_rows(capped, slc, flt)  # type: ignore[arg-type]
    assert as_tuples(rows) == serial(admin, slc, flt) and complete and stats.scanned == PER_QUEUE
    assert capped.most_in_flight == min(IN_FLIGHT_MESSAGES // 32, (PER_QUEUE - 32) // 32 + 1)
    assert capped.batches and min(capped.batches) > 1  # never a write per pull after the probe
    assert sum(capped.batches) + 1 == capped.pulls  # the probe went alone
    # a broker that answers 200 a pull keeps the minimum depth
    wide = BatchingAdmin(admin, cap=200)
    run_slice_rows(wide, slc, flt)  # type: ignore[arg-type]
    assert wide.most_in_flight <= PULL_DEPTH
    # one that answers 4 (a broker reading from disk answers 8) gets no more than MAX_PULL_DEPTH
    narrow = BatchingAdmin(admin, cap=4)
    rows, _, _ = run_slice_rows(narrow, slc, flt)  # type: ignore[arg-type]
    assert narrow.most_in_flight == MAX_PULL_DEPTH and as_tuples(rows) == serial(admin, slc, flt)


def test_short_answers_are_filled_before_what_follows(admin: Admin) -> None:
    slc = Slice(0, "T", "broker-a", 0, 0, PER_QUEUE)
    flt = MessageFilter(T0, T0 + 1000)
    capped = CappedAdmin(admin, cap=32, short_at=frozenset({64, 160, 161}))
    rows, stats, complete = run_slice_rows(capped, slc, flt)  # type: ignore[arg-type]
    assert as_tuples(rows) == serial(admin, slc, flt) and complete
    assert [r[3] for r in rows] == list(range(PER_QUEUE)) and stats.scanned == PER_QUEUE


def test_retention_gap_mid_slice_re_aims_the_pipeline(admin: Admin) -> None:
    slc = Slice(0, "T", "broker-a", 0, 0, 300)
    flt = MessageFilter(T0, T0 + 1000)
    capped = CappedAdmin(admin, cap=32, gone_below=100)
    scan = SliceScan(capped, slc, flt)  # type: ignore[arg-type]
    rows = [r for batch in scan.rows() for r in batch]
    assert [r[3] for r in rows] == list(range(100, 300))
    assert scan.stats.missing == 100 and scan.stats.scanned == 200 and scan.complete
    # Message iteration over the same answers gives the same messages
    again = SliceScan(CappedAdmin(admin, cap=32, gone_below=100), slc, flt)  # type: ignore[arg-type]
    assert [m.queue_offset for m in again] == list(range(100, 300)) and again.stats == scan.stats


@pytest.mark.parametrize(
    "flt",
    [MessageFilter(T0 + 10, T0 + 90), MessageFilter(T0, T0 + 1000, tags=frozenset({"TagA"}))],
    ids=["window", "tags"],
)
def test_a_slice_as_one_table_holds_and_counts_what_its_rows_do(admin: Admin, flt: MessageFilter) -> None:
    """``table()`` decodes the whole slice at once (column-wise when the window alone selects,
    else from the rows): the rows and the counts of ``rows()``, over short answers and a gap."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    from mqadmin.replay.records import rows_to_table

    slc = Slice(0, "T", "broker-a", 1, 7, 590)
    scans = [SliceScan(CappedAdmin(admin, cap=32, short_at=frozenset({64}), gone_below=40), slc, flt) for _ in "ab"]  # type: ignore[arg-type]
    rows = [r for batch in scans[0].rows() for r in batch]
    table = scans[1].table()
    assert table.equals(rows_to_table(rows)) and len(rows) > 100
    assert scans[1].stats == scans[0].stats and scans[1].complete and scans[1].stats.missing == 33


def test_a_stuck_answer_still_raises(admin: Admin) -> None:
    class Stuck(CappedAdmin):
        def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> Pending:
            p = super().pull_raw(mq, offset, max_nums)
            p.result = lambda: RawPull("FOUND", offset, 0, PER_QUEUE, [])  # type: ignore[method-assign]
            return p

    with pytest.raises(PullError, match="did not advance"):
        run_slice_rows(Stuck(admin, cap=32), Slice(0, "T", "broker-a", 0, 5, 50), MessageFilter(T0, T0 + 1000))  # type: ignore[arg-type]
