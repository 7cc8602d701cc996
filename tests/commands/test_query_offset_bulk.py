"""queryOffset over several topics and groups, and by born time or a user property (local engine)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, Store

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import Message

T0 = 1_700_000_000_000
#: one message per queue every STEP ms of store time
STEP = 10
PER_QUEUE = 30
PROP = "ORDER_TIME"
#: the searched time: past every store time of "Born", so the broker's search answers max offsets
TS = T0 + 500


def born_of(qid: int, i: int) -> int:
    """Born times that go backwards: on queue 0, message 5 comes from a producer whose clock is
    far ahead (born after TS) although everything is stored before TS."""
    store = T0 + i * STEP
    return T0 + 1000 if (qid, i) == (0, 5) else store - 3


def prop_of(qid: int, i: int) -> str | None:
    """ORDER_TIME: missing on even offsets, junk on offset 3, past TS from offset 11 on queue 1."""
    if i % 2 == 0:
        return None
    if i == 3:
        return "not-a-time"
    return str(TS + i if (qid == 1 and i >= 11) else T0 + i)


def build(path: Path) -> None:
    cluster = MockCluster.create(path, ("broker-a", "broker-b"))
    fill_topic(cluster, "Orders", 64, T0, T0 + 630, queues_per_broker=2)
    fill_topic(cluster, "Sms", 32, T0, T0 + 310, queues_per_broker=2)
    cluster.create_topic("Born", 2)
    for broker in cluster.brokers.values():
        for i in range(PER_QUEUE):
            for qid in (0, 1):
                props = {"TAGS": "TagA"}
                value = prop_of(qid, i)
                if value is not None:
                    props[PROP] = value
                msg = Message("Born", f"{qid}-{i}".encode(), props, queue_id=qid, born_timestamp=born_of(qid, i))
                broker.put_message(msg, store_timestamp=T0 + i * STEP)
    # system topics --all-topics leaves out: a broker's own, and one named after a broker
    cluster.create_topic("SCHEDULE_TOPIC_XXXX", 1)
    cluster.create_topic("broker-a", 1)
    cluster.create_topic("%DLQ%g1", 1)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g1", "Orders", T0 + 300)
        commit_at_time(broker, "g1", "Sms", None)
        commit_at_time(broker, "g2", "Orders", None)
    cluster.close()


@pytest.fixture
def store(tmp_path: Path, door: str) -> Iterator[Store]:
    path = tmp_path / "bulk"
    build(path)
    s = Store(path, "5.3.3", T0, T0 + 630)
    if door == "tcp":
        from mqadmin.mock.server import MockServer

        s.server = MockServer(MockCluster(path, writable=True), namesrv_port=0).start()
    yield s
    if s.server is not None:
        s.server.stop()


Q = Callable[..., Any]


@pytest.fixture
def query(store: Store, cli: Callable[..., CliResult]) -> Q:
    def run(*args: str) -> Any:
        r = cli("queryOffset", "-n", store.address, *args, "--json")
        assert r.code == 0, r.stderr
        return r.json()

    return run


def test_one_topic_keeps_the_single_document(query: Q) -> None:
    doc = query("-t", "Orders", "-g", "g1", "-s", str(T0 + 300))
    assert list(doc) == [
        "schema",
        "topic",
        "group",
        "timestamp",
        "timestamp_iso",
        "time_field",
        "engine",
        "queues",
    ]
    assert (doc["topic"], doc["group"], doc["time_field"], doc["engine"]) == ("Orders", "g1", "store", "local")
    assert list(doc["queues"][0]) == [
        "broker",
        "queue_id",
        "min_offset",
        "max_offset",
        "consumer_offset",
        "lag",
        "offset_at_time",
        "store_time_at_offset",
        "store_time_at_offset_iso",
        "time_at_offset",
        "time_at_offset_iso",
    ]
    for q in doc["queues"]:
        assert q["time_at_offset"] == q["store_time_at_offset"] >= T0 + 300
        assert q["lag"] == q["max_offset"] - q["consumer_offset"] > 0


def test_several_topics_and_groups_are_a_list_of_those_documents(query: Q) -> None:
    ts = str(T0 + 200)
    doc = query("-t", "Sms,Orders", "-g", "g1,g2", "-s", ts)
    assert list(doc) == ["schema", "timestamp", "timestamp_iso", "time_field", "engine", "results"]
    assert doc["timestamp"] == T0 + 200 and doc["time_field"] == "store"
    pairs = [(r["topic"], r["group"]) for r in doc["results"]]
    # g2 has no offsets on Sms, but Sms was named: it is reported, with null consumer offsets
    assert pairs == [("Sms", "g1"), ("Sms", "g2"), ("Orders", "g1"), ("Orders", "g2")]
    for r in doc["results"]:
        if (r["topic"], r["group"]) == ("Sms", "g2"):
            assert all(q["consumer_offset"] is None and q["lag"] is None for q in r["queues"])
            continue
        assert {"schema": doc["schema"], **r} == query("-t", r["topic"], "-g", r["group"], "-s", ts)


def test_one_topic_and_no_group_list_with_several_topics(query: Q) -> None:
    doc = query("-t", "Orders,Sms,Orders")
    assert [(r["topic"], r["group"]) for r in doc["results"]] == [("Orders", None), ("Sms", None)]
    assert {"schema": doc["schema"], **doc["results"][1]} == query("-t", "Sms")


def test_all_topics_leaves_out_system_topics_unless_named(query: Q) -> None:
    assert [r["topic"] for r in query("--all-topics")["results"]] == ["Born", "Orders", "Sms"]
    named = query("--all-topics", "-t", "%DLQ%g1,SCHEDULE_TOPIC_XXXX")
    assert [r["topic"] for r in named["results"]] == ["%DLQ%g1", "SCHEDULE_TOPIC_XXXX", "Born", "Orders", "Sms"]


def test_all_topics_with_groups_keeps_the_topics_each_group_consumes(query: Q) -> None:
    doc = query("--all-topics", "-g", "g2,g1")
    assert [(r["topic"], r["group"]) for r in doc["results"]] == [("Orders", "g2"), ("Orders", "g1"), ("Sms", "g1")]


def oracle(field: Callable[[int, int], int | None], ts: int) -> dict[tuple[str, int], int]:
    """The definition applied to what build() wrote: per queue, the first offset in order whose
    field is >= ts, else the max offset."""
    return {
        (broker, qid): next((i for i in range(PER_QUEUE) if (field(qid, i) or -1) >= ts), PER_QUEUE)
        for broker in ("broker-a", "broker-b")
        for qid in (0, 1)
    }


def test_born_time_is_the_first_message_in_queue_order(query: Q) -> None:
    doc = query("-t", "Born", "-s", str(TS), "--time-field", "born", "--slice-size", "7")
    assert doc["time_field"] == "born"
    got = {(q["broker"], q["queue_id"]): q["offset_at_time"] for q in doc["queues"]}
    assert got == oracle(born_of, TS)
    # the clock-ahead message is found although every store time is before TS
    assert got[("broker-a", 0)] == 5 and got[("broker-a", 1)] == PER_QUEUE
    q0 = doc["queues"][0]
    assert (q0["time_at_offset"], q0["store_time_at_offset"]) == (T0 + 1000, T0 + 5 * STEP)
    q1 = doc["queues"][1]  # nothing matched: the max offset, no times
    assert (q1["offset_at_time"], q1["time_at_offset"], q1["store_time_at_offset"]) == (PER_QUEUE, None, None)
    by_store = query("-t", "Born", "-s", str(TS))
    assert all(q["offset_at_time"] == PER_QUEUE for q in by_store["queues"])


def test_property_time_skips_missing_and_non_integer_values(query: Q) -> None:
    doc = query("-t", "Born", "-s", str(T0 + 3), "--time-field", f"property:{PROP}", "--slice-size", "4")
    assert doc["time_field"] == f"property:{PROP}"

    def prop(qid: int, i: int) -> int | None:
        value = prop_of(qid, i) or ""
        return int(value) if value.isdigit() else None

    got = {(q["broker"], q["queue_id"]): q["offset_at_time"] for q in doc["queues"]}
    assert got == oracle(prop, T0 + 3) and set(got.values()) == {5}  # 3 is junk, 4 has none
    late = query("-t", "Born", "-s", str(TS), "--time-field", f"property:{PROP}")
    assert [q["offset_at_time"] for q in late["queues"]] == [PER_QUEUE, 11] * 2
    assert late["queues"][1]["time_at_offset"] == TS + 11


def test_list_form_table_and_csv(store: Store, cli: Callable[..., CliResult]) -> None:
    args = ("queryOffset", "-n", store.address, "-t", "Orders,Sms", "-g", "g1", "-s", str(TS), "--time-field", "born")
    csv = cli(*args, "--output", "csv").stdout.splitlines()
    assert csv[0] == (
        "Topic,Group,Broker,QID,Min Offset,Max Offset,Consumer Offset,Lag,Offset At Time,"
        "Store Time At Offset,Born Time At Offset,Timestamp,Timestamp ISO"  # CSV has no footer: rows echo the time
    )
    assert len(csv) == 1 + 8 and csv[1].startswith("Orders,g1,broker-a,0,") and f",{TS}," in csv[1]
    table = cli(*args)
    assert table.code == 0 and "Total Lag of g1:" in table.stdout and "by born time" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Missing option '-t' / '--topic' / '--topicName'."),
        (("-t", "Orders", "--time-field", "bogus", "-s", str(TS)), "--time-field must be store, born or property:NAME"),
        (("-t", "Orders", "--time-field", "property:", "-s", str(TS)), "needs the property's name"),
        (("-t", "Orders", "--time-field", "born"), "--time-field born needs -s"),
        (
            ("-t", "Orders", "-s", str(TS), "--time-field", "born", "--slice-size", "0"),
            "--slice-size must be at least 1",
        ),
        (("-t", "Orders,Nope"), "unknown topic 'Nope'"),
        (("-t", "Orders,Sms", "-g", "nobody"), "unknown consumer group 'nobody'"),
        (("-t", "Sms", "-g", "g1,g2"), "consumer group 'g2' has no offsets on the selected topics"),
        (("-t", "Orders,Sms", "--local-store", "/nowhere"), "--local-store reads one topic's offsets"),
        (
            ("-t", "Orders", "-s", str(TS), "--engine", "spark", "--spark-conf", "novalue"),
            "--spark-conf takes KEY=VALUE",
        ),
    ],
)
def test_bad_input_is_one_line(
    store: Store, cli: Callable[..., CliResult], args: tuple[str, ...], message: str
) -> None:
    r = cli("queryOffset", "-n", store.address, *args)
    assert r.code == 2 and r.stdout == "", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_engine_spark_without_java_is_one_line(
    store: Store, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    r = cli(
        "queryOffset", "-n", store.address, "-t", "Born", "-s", str(TS), "--time-field", "born", "--engine", "spark"
    )
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--engine spark:" in r.stderr and "install" in r.stderr


def test_engine_auto_stays_local_for_small_work(store: Store, cli: Callable[..., CliResult]) -> None:
    r = cli("queryOffset", "-n", store.address, "-t", "Born", "-s", str(TS), "--engine", "auto", "--json")
    doc: Any = r.json()
    assert r.code == 0 and doc["engine"] == "local"
    assert "engine auto: local, because the broker answers a store-time search" in r.stderr
    r = cli("queryOffset", "-n", store.address, "-t", "Born", "-s", str(TS), "--time-field", "born", "--engine", "auto")
    assert r.code == 0 and "the scan (120 messages) is below the Spark threshold" in r.stderr
