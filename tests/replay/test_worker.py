"""The slice worker: exact store-time filter, tag and key filters, odd pull answers."""

from __future__ import annotations

import threading

import pytest

from mqadmin.admin import connect
from mqadmin.errors import UsageError
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.model import Message, MessageQueue, PullResult
from mqadmin.replay.planner import Slice
from mqadmin.replay.worker import MessageFilter, PullError, SliceScan, parse_tag_expression, run_slice

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("w") / "store"
    cluster = MockCluster.create(root, ("broker-a",))
    fill_topic(cluster, "T", 1200, T0, T0 + 20, queues_per_broker=2)  # ~30 messages per ms per queue
    cluster.close()
    return f"mock://{root}"


def everything(address: str, qid: int) -> list[Message]:
    admin = connect(address, read_only=True)
    try:
        return admin.pull(MessageQueue("T", "broker-a", qid), 0, 10_000).messages
    finally:
        admin.close()


def test_tag_expressions() -> None:
    assert parse_tag_expression("TagA") == frozenset({"TagA"})
    assert parse_tag_expression(" TagA || TagB ||TagC") == frozenset({"TagA", "TagB", "TagC"})
    assert parse_tag_expression("*") is None and parse_tag_expression("") is None and parse_tag_expression(None) is None
    for bad in ("TagA | TagB", "TagA ||", "Tag A"):
        with pytest.raises(UsageError, match="bad tag expression"):
            parse_tag_expression(bad)


def test_filter_edges_tags_and_keys() -> None:
    f = MessageFilter(100, 200, frozenset({"A", "B"}), "k2")

    def msg(ts: int, tag: str | None = "A", keys: str | None = "k1 k2") -> Message:
        props = {k: v for k, v in (("TAGS", tag), ("KEYS", keys)) if v is not None}
        return Message("T", b"", props, store_timestamp=ts)

    assert f.matches(msg(100)) and f.matches(msg(199))
    assert not f.matches(msg(99)) and not f.matches(msg(200))
    assert not f.matches(msg(150, tag="C")) and not f.matches(msg(150, tag=None))
    assert not f.matches(msg(150, keys="k22")) and not f.matches(msg(150, keys=None))
    assert MessageFilter.from_json(f.to_json()) == f
    assert MessageFilter(0, 1).matches(Message("T", b"", {}, store_timestamp=0))


def test_slice_keeps_exactly_the_window(address: str) -> None:
    """The slice spans the whole queue; only [begin, end) by store time comes out, equal-ms edges too."""
    every = everything(address, 1)
    begin, end = T0 + 7, T0 + 12
    want = [m.queue_offset for m in every if begin <= m.store_timestamp < end]
    assert sum(1 for m in every if m.store_timestamp == begin) > 10  # many messages on the edge
    admin = connect(address, read_only=True)
    try:
        got, stats, complete = run_slice(admin, Slice(0, "T", "broker-a", 1, 0, len(every)), MessageFilter(begin, end))
    finally:
        admin.close()
    assert [m.queue_offset for m in got] == want and complete
    assert stats.scanned == len(every) and stats.matched == len(want)
    assert stats.bytes == sum(len(m.body) for m in got)
    assert all(m.broker_name == "broker-a" for m in got)


def test_slice_bounds_and_filters(address: str) -> None:
    every = everything(address, 0)
    flt = MessageFilter(T0, T0 + 100, frozenset({"TagB"}))
    admin = connect(address, read_only=True)
    try:
        got, _, _ = run_slice(admin, Slice(0, "T", "broker-a", 0, 100, 230), flt)
        key = every[150].keys
        assert key
        by_key, _, _ = run_slice(
            admin, Slice(0, "T", "broker-a", 0, 0, len(every)), MessageFilter(T0, T0 + 100, None, key)
        )
    finally:
        admin.close()
    assert [m.queue_offset for m in got] == [m.queue_offset for m in every[100:230] if m.tags == "TagB"]
    assert [m.queue_offset for m in by_key] == [150]


def test_stop_ends_between_pulls(address: str) -> None:
    stop = threading.Event()
    stop.set()
    admin = connect(address, read_only=True)
    try:
        got, stats, complete = run_slice(
            admin, Slice(0, "T", "broker-a", 0, 0, 500), MessageFilter(T0, T0 + 100), stop=stop
        )
    finally:
        admin.close()
    assert got == [] and not complete and stats.scanned == 0


class FakeAdmin:
    """Answers pulls from a script, for statuses a healthy mock never gives mid-range."""

    address = "fake"

    def __init__(self, answers: list[PullResult]):
        self.answers = answers
        self.groups: list[str | None] = []

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult:
        self.groups.append(group)
        return self.answers.pop(0)


def test_a_slice_is_read_as_its_group() -> None:
    """--consumer-group travels in the slice (to Spark executors too) and reaches every pull."""
    m = Message("T", b"x", {}, queue_offset=10, store_timestamp=5)
    admin = FakeAdmin([PullResult("FOUND", 11, 0, 50, [m]), PullResult("FOUND", 12, 0, 50, [])])
    slc = Slice.from_json(Slice(0, "T", "b", 0, 10, 12, "G").to_json())
    list(SliceScan(admin, slc, MessageFilter(0, 10)))  # type: ignore[arg-type]
    assert admin.groups == ["G", "G"]
    admin = FakeAdmin([PullResult("FOUND", 11, 0, 50, [m])])
    list(SliceScan(admin, Slice(0, "T", "b", 0, 10, 11), MessageFilter(0, 10)))  # type: ignore[arg-type]
    assert admin.groups == [None]  # TOOLS_CONSUMER


def test_retention_gap_is_counted_not_fatal() -> None:
    m = Message("T", b"x", {}, queue_offset=40, store_timestamp=5)
    admin = FakeAdmin([PullResult("OFFSET_TOO_SMALL", 40, 40, 50, []), PullResult("FOUND", 41, 40, 50, [m])])
    scan = SliceScan(admin, Slice(0, "T", "b", 0, 10, 41), MessageFilter(0, 10))  # type: ignore[arg-type]
    assert [x.queue_offset for x in scan] == [40]
    assert scan.stats.missing == 30 and scan.stats.scanned == 1 and scan.complete


def test_unexpected_answers_raise() -> None:
    stuck = FakeAdmin([PullResult("FOUND", 10, 0, 50, [])])
    with pytest.raises(PullError, match="did not advance"):
        list(SliceScan(stuck, Slice(0, "T", "b", 0, 10, 20), MessageFilter(0, 10)))  # type: ignore[arg-type]
    shrunk = FakeAdmin([PullResult("OFFSET_OVERFLOW_BADLY", 5, 0, 5, [])])
    with pytest.raises(PullError, match="OFFSET_OVERFLOW_BADLY"):
        list(SliceScan(shrunk, Slice(0, "T", "b", 0, 10, 20), MessageFilter(0, 10)))  # type: ignore[arg-type]
