"""The planner: exact window edges from a coarse broker search, slices, plain-data plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqadmin.admin import Admin, connect
from mqadmin.errors import UsageError
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.model import MessageQueue
from mqadmin.replay.planner import Plan, QueueRange, Slice, cut, first_at_or_after, plan_window, select_queues

T0 = 1_700_000_000_000
VERSIONS = ("4.9.8", "5.3.3")


def dense_store(root: Path, version: str, count: int = 2400, span_ms: int = 30) -> str:
    """``count`` messages over ``span_ms`` ms: dozens share each millisecond on every queue."""
    cluster = MockCluster.create(root, version=version)
    fill_topic(cluster, "T", count, T0, T0 + span_ms, queues_per_broker=2)
    cluster.close()
    return f"mock://{root}"


def brute_force(admin: Admin, mq: MessageQueue, begin: int, end: int) -> tuple[int, int]:
    """First offset stored at/after begin and at/after end, by reading every message."""
    times = [m.store_timestamp for m in admin.pull(mq, 0, 100_000).messages]
    first = next((i for i, t in enumerate(times) if t >= begin), len(times))
    last = next((i for i, t in enumerate(times) if t >= end), len(times))
    return first, last


@pytest.fixture(scope="module", params=VERSIONS)
def dense(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return dense_store(tmp_path_factory.mktemp("dense"), request.param)


def test_the_broker_search_alone_is_not_exact(dense: str) -> None:
    """What the planner corrects: on 4.x the search lands on any of a millisecond's messages."""
    admin = connect(dense, read_only=True)
    try:
        mq = admin.topic_route("T").message_queues()[0]
        off = [admin.search_offset(mq, T0 + ms) for ms in range(1, 30)]
        exact = [brute_force(admin, mq, T0 + ms, T0 + ms + 1)[0] for ms in range(1, 30)]
        if admin.cluster_brokers()[0].version.startswith("4."):
            assert off != exact
        else:
            assert off == exact
    finally:
        admin.close()


@pytest.mark.parametrize(("lo", "hi"), [(5, 6), (0, 30), (13, 17), (29, 31), (-5, 1), (30, 40)])
def test_edges_are_exact_with_many_messages_per_millisecond(dense: str, lo: int, hi: int) -> None:
    admin = connect(dense, read_only=True)
    try:
        queues = admin.topic_route("T").message_queues()
        plan = plan_window(admin, queues, T0 + lo, T0 + hi)
        for r in plan.ranges:
            mq = MessageQueue("T", r.broker, r.queue_id)
            assert (r.start, r.end) == brute_force(admin, mq, T0 + lo, T0 + hi), r
        assert plan.total == sum(r.end - r.start for r in plan.ranges)
    finally:
        admin.close()


def test_window_outside_the_data_is_empty(tmp_path: Path) -> None:
    admin = connect(dense_store(tmp_path / "s", "5.3.3"), read_only=True)
    try:
        queues = admin.topic_route("T").message_queues()
        assert plan_window(admin, queues, T0 - 100, T0).total == 0
        assert plan_window(admin, queues, T0 + 31, T0 + 100).total == 0
        assert plan_window(admin, queues, T0 - 100, T0).slices == ()
    finally:
        admin.close()


def test_begin_not_before_end_is_a_usage_error(tmp_path: Path) -> None:
    admin = connect(dense_store(tmp_path / "s", "5.3.3", count=10), read_only=True)
    try:
        with pytest.raises(UsageError, match="window is empty"):
            plan_window(admin, admin.topic_route("T").message_queues(), T0 + 5, T0 + 5)
    finally:
        admin.close()


def test_first_at_or_after_recovers_from_any_hint() -> None:
    times = [10] * 7 + [11] * 50 + [12] * 3 + [15] * 40
    probes: list[int] = []

    def store_time(o: int) -> int | None:
        probes.append(o)
        return times[o]

    for ts, want in ((11, 7), (12, 57), (13, 60), (9, 0), (16, 100), (15, 60)):
        for hint in (0, 3, 30, 57, 59, 99, 100, 500, -3):
            assert first_at_or_after(store_time, ts, hint, 0, len(times)) == want, (ts, hint)
    # deleted heads count as older than the search time
    gone = lambda o: None if o < 20 else times[o]  # noqa: E731
    assert first_at_or_after(gone, 11, 50, 0, len(times)) == 20
    # a good hint costs a couple of probes, not a scan
    probes.clear()
    first_at_or_after(store_time, 12, 57, 0, len(times))
    assert len(probes) <= 3


def test_select_queues() -> None:
    qs = [MessageQueue("T", b, i) for b in ("broker-a", "broker-b") for i in range(4)]
    assert select_queues(qs) == sorted(qs)
    assert [str(q) for q in select_queues(qs, ["broker-b"], [1, 3])] == ["T@broker-b:1", "T@broker-b:3"]
    with pytest.raises(UsageError, match="unknown broker 'broker-x'"):
        select_queues(qs, ["broker-x"])
    with pytest.raises(UsageError, match=r"no queue 9 .* 0\.\.3"):
        select_queues(qs, [], [9])


def test_slices_cover_each_range_in_output_order() -> None:
    ranges = [QueueRange("b", 1, 10, 25, 0, 30), QueueRange("a", 0, 0, 0, 0, 0), QueueRange("a", 1, 3, 9, 0, 9)]
    slices = cut("T", ranges, 4)
    assert [(s.broker, s.queue_id, s.start, s.end) for s in slices] == [
        ("a", 1, 3, 7),
        ("a", 1, 7, 9),
        ("b", 1, 10, 14),
        ("b", 1, 14, 18),
        ("b", 1, 18, 22),
        ("b", 1, 22, 25),
    ]
    assert [s.index for s in slices] == list(range(6))


def test_plan_is_plain_data_with_a_fingerprint(tmp_path: Path) -> None:
    admin = connect(dense_store(tmp_path / "s", "5.3.3"), read_only=True)
    try:
        plan = plan_window(admin, admin.topic_route("T").message_queues(), T0 + 3, T0 + 20, slice_size=100)
    finally:
        admin.close()
    doc = json.loads(json.dumps(plan.to_json()))
    again = Plan.from_json(doc)
    assert again == plan and again.fingerprint() == plan.fingerprint()
    assert len(plan.slices) > len(plan.ranges)  # cut below the queue size
    assert Slice.from_json(plan.slices[2].to_json()) == plan.slices[2]
    other = Plan(plan.topic, plan.begin, plan.end + 1, plan.ranges, plan.slices)
    assert other.fingerprint() != plan.fingerprint()
    assert "group" not in plan.slices[0].to_json()  # plans and checkpoints written before --consumer-group
    with pytest.raises(UsageError, match="not a replay plan"):
        Plan.from_json({"format": "x"})


def test_a_plan_read_as_a_group(tmp_path: Path) -> None:
    """--consumer-group: the plan's slices carry the group (Spark executors read it from them);
    the fingerprint does not, so a checkpointed run may resume under another group."""
    admin = connect(dense_store(tmp_path / "s", "5.3.3"), read_only=True)
    try:
        queues = admin.topic_route("T").message_queues()
        plan = plan_window(admin, queues, T0 + 3, T0 + 20, slice_size=100, group="G")
        plain = plan_window(admin, queues, T0 + 3, T0 + 20, slice_size=100)
    finally:
        admin.close()
    assert {s.group for s in plan.slices} == {"G"} and {s.group for s in plain.slices} == {None}
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    assert plan.fingerprint() == plain.fingerprint()


def test_expired_at_most_is_the_min_offset_only_when_the_window_starts_at_it() -> None:
    """Retention deleted offsets [0, min): a window that starts at the min (its begin is not after
    the oldest message left) may have held any of them; one that starts later held none."""
    assert QueueRange("a", 0, 275, 300, 275, 300).expired_at_most == 275
    assert QueueRange("a", 0, 275, 275, 275, 275).expired_at_most == 275  # nothing left at all
    assert QueueRange("a", 0, 280, 300, 275, 300).expired_at_most == 0
    assert QueueRange("a", 0, 0, 10, 0, 10).expired_at_most == 0  # nothing deleted
