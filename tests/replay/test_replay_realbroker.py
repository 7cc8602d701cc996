"""rangeReplay against real Apache RocketMQ (4.9.7, 5.3.3) and against the mock over TCP.

The embedded-mock tests (test_range_replay_cli.py) prove the logic; these prove it holds where
the broker is not ours: the real time search is coarse (4.x lands on the *nearest* message),
store times come from the broker's clock with many messages per millisecond, and send-back goes
through the broker's delay queue. One cluster (two brokers) per version, shared with other
modules (the topics and groups here are this module's own); the same tests run against a
``MockServer`` so the two can be compared side by side.

The data is made once per side: bursts of concurrent sends through our backend, so that several
messages share a store millisecond on one queue, with a quiet gap between bursts (the mock is
seeded with the same messages at the same density, see ``seed_mock``). Expected sets are always
computed here, by pulling everything back and filtering by store time.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import CliResult

from mqadmin import errors
from mqadmin.admin import Admin, connect
from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import Message, MessageQueue
from mqadmin.replay.records import read_records
from mqadmin.replay.sinks import (
    GROUP_DELAY_LEVEL,
    ORIGIN_BROKER,
    ORIGIN_MSG_ID,
    ORIGIN_QUEUE_ID,
    ORIGIN_QUEUE_OFFSET,
    ORIGIN_STORE_TIMESTAMP,
    ORIGIN_TOPIC,
    ORIGIN_UNIQ_KEY,
)
from tests.support import realbroker as rb

Run = Callable[..., CliResult]
T = TypeVar("T")

TOPIC, COPY_TOPIC, SPARK_COPY_TOPIC = "ReplayTopic", "ReplayCopy", "ReplaySparkCopy"
SMS, BILLING = "replay_sms", "replay_billing"
BROKERS = ("broker-a", "broker-b")
QUEUES = 2  # per broker, on every topic here
BURSTS, BURST = 6, 400
SENDERS = 8  # concurrent senders in a burst: enough for several messages per queue and millisecond
GAP_S = 0.05  # quiet time between bursts: windows can start where no message is stored
TAGS = ("TagA", "TagB", "TagC")
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RETRY_PREFIX = "%RETRY%"
#: user properties every produced message carries; a re-published copy must keep them
USER_PROPS = ("seq", "burst", "note")
CLI_TIMEOUT, SPARK_TIMEOUT = 120.0, 600.0
#: the broker builds consume queues from the commit log asynchronously: counts settle shortly after a send
SETTLE_S = 10.0

#: the mock side runs without Java; real sides need the Maven jars and a JDK
SIDES = [pytest.param(f"mock-{v}", marks=pytest.mark.integration) for v in rb.VERSIONS] + [
    pytest.param(v, marks=pytest.mark.realbroker) for v in rb.VERSIONS
]


@dataclass
class Side:
    """One broker set-up and what it stores: every test's expectation is computed from this."""

    name: str
    namesrv: str
    broker_addrs: dict[str, str]
    stored: list[Message] = field(default_factory=list)  # TOPIC, in (broker, queue, offset) order
    bursts: list[tuple[int, int]] = field(default_factory=list)  # first and last store ms of each burst

    @property
    def real(self) -> bool:
        return not self.name.startswith("mock-")

    def admin(self) -> Admin:
        return connect(self.namesrv, timeout=10)

    def window(self, name: str) -> tuple[int, int]:
        """Named [begin, end) windows whose edges sit where an off-by-one would show."""
        dense = dense_millis(self.stored)
        if name == "mid":  # both edges on milliseconds that hold several messages of one queue
            return dense[len(dense) // 4], dense[3 * len(dense) // 4]
        if name == "one-ms":  # the busiest millisecond alone
            busiest = Counter(m.store_timestamp for m in self.stored).most_common(1)[0][0]
            return busiest, busiest + 1
        if name == "gap":  # from inside the quiet gap after burst 0 to the first message of burst 3
            return self.bursts[0][1] + 1, self.bursts[3][0]
        if name == "burst":  # exactly burst 1
            return self.bursts[1][0], self.bursts[1][1] + 1
        if name == "burst-4":  # exactly burst 4 (left untouched by other tests' sinks)
            return self.bursts[4][0], self.bursts[4][1] + 1
        if name == "all":
            return self.stored_times()[0], self.stored_times()[-1] + 1
        raise ValueError(name)

    def stored_times(self) -> list[int]:
        return sorted(m.store_timestamp for m in self.stored)

    def expected(self, begin: int, end: int, tags: tuple[str, ...] | None = None) -> list[Message]:
        return [m for m in self.stored if begin <= m.store_timestamp < end and (tags is None or m.tags in tags)]


def dense_millis(messages: list[Message]) -> list[int]:
    """Store milliseconds at which one queue holds two or more messages, ascending."""
    per_queue = Counter((m.broker_name, m.queue_id, m.store_timestamp) for m in messages)
    return sorted({ts for (_, _, ts), n in per_queue.items() if n >= 2})


def most_on_one_queue(messages: list[Message], ts: int) -> int:
    """The most messages any one queue stored at millisecond ``ts``."""
    return max(Counter((m.broker_name, m.queue_id) for m in messages if m.store_timestamp == ts).values(), default=0)


def ident(m: Message) -> tuple[str, int, int]:
    return (m.broker_name, m.queue_id, m.queue_offset)


def pull_range(admin: Admin, mq: MessageQueue, offset: int, end: int) -> list[Message]:
    """Messages of one queue in [offset, end), through our pull (brokers cap a pull at 32)."""
    out: list[Message] = []
    while offset < end:
        result = admin.pull(mq, offset, 32)
        out += [m for m in result.messages if m.queue_offset < end]
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
    return out


def pull_all(admin: Admin, topic: str) -> list[Message]:
    """Every message of ``topic`` in (broker, queue, offset) order."""
    out: list[Message] = []
    for mq in admin.topic_route(topic).message_queues():
        out += pull_range(admin, mq, admin.min_offset(mq), admin.max_offset(mq))
    return sorted(out, key=ident)


def poll(probe: Callable[[], T], done: Callable[[T], bool], timeout: float, interval: float = 0.1) -> T:
    """``probe()`` until ``done`` holds for its answer or ``timeout`` s have passed; the last
    answer either way (the caller asserts on it, so a timeout fails with what was seen)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = probe()
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(interval)


def settled(admin: Admin, topic: str, count: int) -> list[Message]:
    """Every message of ``topic`` once there are ``count`` (the consume queues lag the commit log)."""
    return poll(lambda: topic_messages(admin, topic), lambda found: len(found) >= count, SETTLE_S)


def topic_messages(admin: Admin, topic: str) -> list[Message]:
    """Like pull_all, but a topic the broker never created reads as empty."""
    try:
        return pull_all(admin, topic)
    except errors.TopicNotExist:
        return []


# ---- set-up --------------------------------------------------------------------------------


def wait_for_route(admin: Admin, topic: str, timeout: float = 30.0) -> None:
    """A new topic reaches the name server with the broker's next registration at worst."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if len(admin.topic_route(topic).message_queues()) == QUEUES * len(BROKERS):
                return
        except errors.TopicNotExist:
            pass
        assert time.monotonic() < deadline, f"no full route for {topic} after {timeout} s"
        time.sleep(0.3)


def message(i: int, burst: int, rng: random.Random) -> Message:
    """Tags, keys and user properties vary; one body in ten is not UTF-8 (body_base64 path)."""
    body = f"sms {i} to +86{rng.randrange(10**9):09d}".encode()
    if i % 10 == 7:
        body = b"\xff\xfe\x00" + rng.randbytes(40)
    props = {"TAGS": TAGS[rng.randrange(3)], "KEYS": f"k-{i} order-{i % 97}", "seq": str(i), "burst": str(burst)}
    props["note"] = "re-sent ✓" if i % 5 == 0 else "plain"
    return Message(TOPIC, body, props, flag=i % 3)


def produce(admin: Admin) -> None:
    """Bursts of concurrent sends round-robin over every queue, with a quiet gap between them."""
    rng = random.Random(4)
    queues = admin.topic_route(TOPIC).message_queues()
    batches = [[(i, message(i, b, rng)) for i in range(b * BURST, (b + 1) * BURST)] for b in range(BURSTS)]
    with ThreadPoolExecutor(SENDERS) as pool:
        for batch in batches:
            list(pool.map(lambda item: admin.send(TOPIC, item[1], queues[item[0] % len(queues)]), batch))
            time.sleep(GAP_S)


def seed_mock(cluster: MockCluster) -> None:
    """The same messages stored straight into the mock, with store times as dense as a real
    broker's (about 10 per millisecond). Sent over TCP, the in-process mock stores about one
    per millisecond (its server shares the GIL with the senders), so no edge would be shared."""
    rng = random.Random(4)
    for topic in (TOPIC, COPY_TOPIC, SPARK_COPY_TOPIC):
        cluster.create_topic(topic, QUEUES)
    for broker in cluster.brokers.values():
        for group in (SMS, BILLING):
            broker.ensure_group(group)
    queues = [(b, q) for b in cluster.brokers.values() for q in range(QUEUES)]
    clock = int(time.time() * 1000) - 600_000
    for b in range(BURSTS):
        for i in range(b * BURST, (b + 1) * BURST):
            msg = message(i, b, rng)
            msg.properties["UNIQ_KEY"] = new_uniq_key()
            broker, msg.queue_id = queues[i % len(queues)]
            broker.put_message(msg, store_timestamp=clock + (i - b * BURST) // 10)
        clock += BURST // 10 + int(GAP_S * 1000)


def bursts_of(stored: list[Message]) -> list[tuple[int, int]]:
    """First and last store ms of each burst, told apart by the produced ``burst`` property."""
    times: dict[int, list[int]] = {}
    for m in stored:
        times.setdefault(int(m.properties["burst"]), []).append(m.store_timestamp)
    spans = [(min(t), max(t)) for _, t in sorted(times.items())]
    # the gap makes bursts disjoint in store time, which the "gap" window relies on
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    return spans


def prepare(side: Side) -> None:
    """Topics, groups and messages (sent to real brokers; the mock is seeded before it serves),
    then the expectations' source: everything pulled back, and both groups committed at the end."""
    if side.real:
        for addr in side.broker_addrs.values():
            for topic in (TOPIC, COPY_TOPIC, SPARK_COPY_TOPIC):
                rb.create_topic(addr, topic, QUEUES)
            for group in (SMS, BILLING):
                rb.create_group(addr, group)
    admin = side.admin()
    try:
        for topic in (TOPIC, COPY_TOPIC, SPARK_COPY_TOPIC):
            wait_for_route(admin, topic)
        if side.real:
            produce(admin)
        side.stored = settled(admin, TOPIC, BURSTS * BURST)
        assert len(side.stored) == BURSTS * BURST
        side.bursts = bursts_of(side.stored)
        # both groups have consumed everything: any lag or retry message later is the replay's
        for mq in admin.topic_route(TOPIC).message_queues():
            for group in (SMS, BILLING):
                admin.update_consumer_offset(group, mq, admin.max_offset(mq))
    finally:
        admin.close()
    per_ms = Counter((m.broker_name, m.queue_id, m.store_timestamp) for m in side.stored)
    assert max(per_ms.values()) >= 3, "the sends were too slow to share store milliseconds"


@pytest.fixture(scope="module", params=SIDES)
def side(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shared_cluster: Callable[[str], rb.RealCluster],
) -> Iterator[Side]:
    name: str = request.param
    work = tmp_path_factory.mktemp(f"replay-{name}")
    if name.startswith("mock-"):
        cluster = MockCluster.create(work / "store", BROKERS, version=name.removeprefix("mock-"))
        seed_mock(cluster)
        server = MockServer(cluster, namesrv_port=0).start()
        try:
            s = Side(name, server.namesrv_addr, dict(server.broker_addrs))
            prepare(s)
            yield s
        finally:
            server.stop()
            cluster.close()
        return
    real = shared_cluster(name)
    assert real.broker_names == list(BROKERS)
    s = Side(name, real.namesrv_addr, dict(real.brokers))
    prepare(s)
    yield s


def replay(cli_proc: Run, side: Side, *args: str, timeout: float = CLI_TIMEOUT) -> dict[str, Any]:
    """rangeReplay through the console script; returns its JSON summary (stderr for stdout sinks)."""
    r = cli_proc("rangeReplay", "-n", side.namesrv, "-t", TOPIC, *args, "--json", timeout=timeout)
    assert r.code == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def window_args(side: Side, name: str) -> tuple[int, int, list[str]]:
    begin, end = side.window(name)
    return begin, end, ["-b", str(begin), "-e", str(end)]


# ---- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mid", "one-ms", "gap", "all"])
def test_exact_window_edges(side: Side, tmp_path: Path, cli_proc: Run, name: str) -> None:
    """[begin, end) by store time, exact at both edges, on data with several messages per ms."""
    begin, end, args = window_args(side, name)
    want = side.expected(begin, end)
    out = tmp_path / "w.jsonl"
    doc = replay(cli_proc, side, *args, "--to", f"jsonl:{out}", "--slice-size", "37")
    got = list(read_records(out))
    assert [(r["broker"], r["queue_id"], r["queue_offset"]) for r in got] == [ident(m) for m in want]
    assert [(r["msg_id"], r["body"]) for r in got] == [(m.msg_id, m.body) for m in want]
    # the plan itself is exact (not only the worker's filter): no offset outside the window
    assert doc["total_messages"] == doc["written"] == len(want)
    times = {r["store_timestamp"] for r in got}
    if name == "mid":  # begin included, end excluded, and one queue holds several messages at each
        assert begin in times and end not in times
        assert most_on_one_queue(side.stored, begin) >= 2 and most_on_one_queue(side.stored, end) >= 2
    if name == "one-ms":
        assert times == {begin} and len(want) >= 3
    if name == "gap":  # the broker's search starts in a stretch with no message at all
        assert not any(m.store_timestamp == begin for m in side.stored)
        assert {int(r["properties"]["burst"]) for r in got} == {1, 2}


def test_tag_and_key_filters(side: Side, tmp_path: Path, cli_proc: Run) -> None:
    begin, end, args = window_args(side, "mid")
    out = tmp_path / "t.jsonl"
    doc = replay(cli_proc, side, *args, "--tag", "TagA || TagC", "--to", f"jsonl:{out}", "--slice-size", "50")
    want = side.expected(begin, end, ("TagA", "TagC"))
    assert [(r["broker"], r["queue_id"], r["queue_offset"]) for r in read_records(out)] == [ident(m) for m in want]
    assert 0 < doc["matched"] == len(want) < doc["total_messages"]
    # one key of a message whose KEYS holds two: exactly the messages carrying it
    key = (want[len(want) // 2].keys or "").split()[1]  # order-N: a key about 1 in 97 messages carry
    r = cli_proc("rangeReplay", "-n", side.namesrv, "-t", TOPIC, *args, "--key", key, timeout=CLI_TIMEOUT)
    assert r.code == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    carriers = [m for m in side.expected(begin, end) if key in (m.keys or "").split()]
    assert [(rec["queue_id"], rec["queue_offset"], rec["keys"]) for rec in lines] == [
        (m.queue_id, m.queue_offset, m.keys) for m in carriers
    ]
    assert len(carriers) >= 1


def check_copies(copies: list[Message], want: list[Message]) -> None:
    """Copies keep body, flag, tags, keys and user properties, name their origin, and land on
    the same broker and queue number in the original offset order (the Spark engine sends each
    queue's slices from one partition, in order, even when a queue has several)."""
    by_origin = {m.uniq_key: m for m in want}
    assert sorted(c.properties[ORIGIN_UNIQ_KEY] for c in copies) == sorted(by_origin)
    for c in copies:
        o = by_origin[c.properties[ORIGIN_UNIQ_KEY]]
        assert (c.body, c.flag, c.tags, c.keys) == (o.body, o.flag, o.tags, o.keys)
        assert {k: c.properties[k] for k in USER_PROPS} == {k: o.properties[k] for k in USER_PROPS}
        assert c.properties[ORIGIN_MSG_ID] == o.msg_id and c.properties[ORIGIN_TOPIC] == TOPIC
        origin = (c.properties[ORIGIN_BROKER], int(c.properties[ORIGIN_QUEUE_ID]))
        assert origin == (o.broker_name, o.queue_id) == (c.broker_name, c.queue_id)
        assert int(c.properties[ORIGIN_QUEUE_OFFSET]) == o.queue_offset
        assert int(c.properties[ORIGIN_STORE_TIMESTAMP]) == o.store_timestamp
        assert c.uniq_key and c.uniq_key != o.uniq_key  # a new message, not a duplicate of the old
        assert "DELAY" not in c.properties and "RETRY_TOPIC" not in c.properties
    order = [(c.broker_name, c.queue_id, int(c.properties[ORIGIN_QUEUE_OFFSET])) for c in copies]
    assert order == sorted(order)  # per-queue order survives (copies are in queue-offset order)


def test_topic_sink_republishes_the_window(side: Side, cli_proc: Run) -> None:
    begin, end, args = window_args(side, "burst")
    want = side.expected(begin, end)
    admin = side.admin()
    try:
        assert topic_messages(admin, COPY_TOPIC) == []
        doc = replay(cli_proc, side, *args, "--to", f"topic:{COPY_TOPIC}", "--yes", "--slice-size", "64")
        assert doc["written"] == len(want) == BURST
        check_copies(settled(admin, COPY_TOPIC, len(want)), want)
    finally:
        admin.close()


def stats_rows(admin: Admin, group: str, topic: str | None = None) -> dict[MessageQueue, tuple[int, int]]:
    return {mq: (w.broker_offset, w.consumer_offset) for mq, w in admin.consume_stats(group, topic).offsets.items()}


def schedule_ends(admin: Admin) -> dict[str, int]:
    """Per broker, the end of the delay queue that send-back with our delay level goes through."""
    return {b: admin.max_offset(MessageQueue(SCHEDULE_TOPIC, b, GROUP_DELAY_LEVEL - 1)) for b in BROKERS}


def parked_send_backs(admin: Admin, want: list[Message], before: dict[str, int]) -> dict[str | None, Message]:
    """Real brokers park a send-back in the delay queue of its level first (level 1: 1 s): wait
    until each broker's holds its share of the window, and give those messages by unique key."""
    share = {b: sum(m.broker_name == b for m in want) for b in BROKERS}
    after = poll(
        lambda: schedule_ends(admin), lambda ends: {b: ends[b] - before[b] for b in BROKERS} == share, SETTLE_S
    )
    assert {b: after[b] - before[b] for b in BROKERS} == share
    delay_queues = {b: MessageQueue(SCHEDULE_TOPIC, b, GROUP_DELAY_LEVEL - 1) for b in BROKERS}
    parked = {m.uniq_key: m for b in BROKERS for m in pull_range(admin, delay_queues[b], before[b], after[b])}
    assert {m.properties["REAL_TOPIC"] for m in parked.values()} == {RETRY_PREFIX + SMS}
    return parked


def test_group_only_replay(side: Side, cli_proc: Run) -> None:
    """Only the named group gets the window again (in its retry topic); the other group on the
    same topic sees no new lag and no retry message, and neither group's offsets move.

    Real brokers (4.9.7 and 5.3.3 alike) do not write a send-back to the retry topic: it is parked
    in SCHEDULE_TOPIC_XXXX, queue ``level - 1``, with REAL_TOPIC=%RETRY%GROUP, and the schedule
    service moves it there once the level's delay (1 s for level 1) has run out. The mock stores
    it in the retry topic at once, marked DELAY=level.
    """
    begin, end, args = window_args(side, "gap")
    want = side.expected(begin, end)
    admin = side.admin()
    try:
        billing_before = stats_rows(admin, BILLING)
        sms_before = stats_rows(admin, SMS, TOPIC)
        assert all(b == c for b, c in billing_before.values())  # billing had consumed everything
        delay_before = schedule_ends(admin) if side.real else {}
        t0 = time.monotonic()
        doc = replay(cli_proc, side, *args, "--to", f"group:{SMS}", "--yes", "--slice-size", "100")
        assert doc["written"] == len(want) == 2 * BURST

        parked = parked_send_backs(admin, want, delay_before) if side.real else {}
        retry = poll(lambda: topic_messages(admin, RETRY_PREFIX + SMS), lambda r: len(r) >= len(want), 60, 0.25)
        delivered_after = time.monotonic() - t0
        assert len(retry) == len(want), f"{len(retry)} of {len(want)} in the retry topic after {delivered_after:.1f} s"
        by_uniq = {m.uniq_key: m for m in want}
        assert sorted(r.uniq_key or "" for r in retry) == sorted(by_uniq)  # exactly the window, once each
        for r in retry:
            o = by_uniq[r.uniq_key]
            assert (r.body, r.tags, r.keys, r.reconsume_times) == (o.body, o.tags, o.keys, 1)
            assert r.properties["RETRY_TOPIC"] == TOPIC and r.properties["ORIGIN_MESSAGE_ID"] == o.msg_id
            assert r.properties["DELAY"] == str(GROUP_DELAY_LEVEL)
            assert r.broker_name == o.broker_name  # send-back stays on the message's broker
            if side.real:
                # delivered by the broker's schedule service once the level's delay ran out
                assert r.store_timestamp - parked[r.uniq_key].store_timestamp >= 1000 * GROUP_DELAY_LEVEL - 5

        assert stats_rows(admin, BILLING) == billing_before  # no new lag anywhere for billing
        assert topic_messages(admin, RETRY_PREFIX + BILLING) == []
        assert stats_rows(admin, SMS, TOPIC) == sms_before  # not a reset: sms's offsets stay put
    finally:
        admin.close()


@pytest.mark.spark
def test_spark_engine_matches_the_local_engine(side: Side, tmp_path: Path, cli_proc: Run) -> None:
    """--engine spark: executors open their own connections to the brokers over TCP."""
    pytest.importorskip("pyspark")
    if not side.real:
        pytest.skip("the Spark engine over TCP is proven against the real brokers")
    begin, end, args = window_args(side, "mid")
    local = tmp_path / "local.jsonl"
    replay(cli_proc, side, *args, "--tag", "TagB || TagC", "--to", f"jsonl:{local}", "--slice-size", "150")
    spark_args = ("--engine", "spark", "--spark-master", "local[2]", "--spark-conf", "spark.sql.shuffle.partitions=2")
    out = tmp_path / "spark"
    doc = replay(
        cli_proc,
        side,
        *args,
        "--tag",
        "TagB || TagC",
        "--to",
        f"jsonl:{out}",
        "--slice-size",
        "150",
        *spark_args,
        timeout=SPARK_TIMEOUT,
    )
    assert doc["engine"] == "spark" and doc["slices"] > 2
    want = side.expected(begin, end, ("TagB", "TagC"))
    got = list(read_records(out))
    assert got == list(read_records(local))
    assert [(r["broker"], r["queue_id"], r["queue_offset"]) for r in got] == [ident(m) for m in want]

    # executors also send: re-publish another burst from the executors' own connections
    begin, end, args = window_args(side, "burst-4")
    # several slices per queue: a queue's copies must still come out in its order
    doc = replay(
        cli_proc,
        side,
        *args,
        "--to",
        f"topic:{SPARK_COPY_TOPIC}",
        "--yes",
        "--slice-size",
        "20",
        *spark_args,
        timeout=SPARK_TIMEOUT,
    )
    want = side.expected(begin, end)
    assert doc["written"] == len(want) == BURST
    admin = side.admin()
    try:
        check_copies(settled(admin, SPARK_COPY_TOPIC, len(want)), want)
    finally:
        admin.close()
