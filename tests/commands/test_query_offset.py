from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_min_max_group_lag_and_time(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"g": None})
    mid = store.start_ms + HOUR_MS
    r = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "-g", "g", "-s", str(mid), "--output", "json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert doc["topic"] == "TopicTest" and doc["group"] == "g" and doc["timestamp"] == mid
    assert doc["timestamp_iso"]
    assert len(doc["queues"]) == 8
    for q in doc["queues"]:
        assert (q["min_offset"], q["max_offset"], q["consumer_offset"], q["lag"]) == (0, 100, 100, 0)
        # messages are spread evenly: the middle of the window lands near the middle of each queue
        assert 45 <= q["offset_at_time"] <= 55
        gap = 2 * HOUR_MS // 100  # one message per queue every 72 s
        if version == "4.9.8":  # the nearest message
            assert abs(q["store_time_at_offset"] - mid) <= gap // 2 + 1
        else:  # the first message at or after the time
            assert mid <= q["store_time_at_offset"] < mid + gap
    assert [(q["broker"], q["queue_id"]) for q in doc["queues"]] == sorted(
        (q["broker"], q["queue_id"]) for q in doc["queues"]
    )


def test_without_group_or_time_those_parts_are_null(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80)
    doc: Any = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "--json").json()
    assert doc["group"] is None and doc["timestamp"] is None
    assert doc["queues"][0]["consumer_offset"] is None and doc["queues"][0]["offset_at_time"] is None


def test_lagging_group(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=800, groups={"g": None})
    half = store.start_ms + HOUR_MS
    store2 = make_store(count=800, groups={"g": half})
    doc: Any = cli("queryOffset", "-n", store2.address, "-t", "TopicTest", "-g", "g", "--output", "json").json()
    assert all(40 <= q["lag"] <= 60 for q in doc["queues"])
    assert store.address != store2.address


def test_table_and_csv(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": None})
    table = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "-g", "g")
    assert table.code == 0 and "Min Offset" in table.stdout and "broker-b" in table.stdout
    csv = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "-g", "g", "--output", "csv").stdout.splitlines()
    assert csv[0] == "Broker,QID,Min Offset,Max Offset,Consumer Offset,Lag" and len(csv) == 9


def test_csv_echoes_the_resolved_time(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": None})
    mid = store.start_ms + HOUR_MS
    rows = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "-s", str(mid), "--output", "csv").stdout
    header, first = rows.splitlines()[:2]
    assert header.endswith(",Timestamp,Timestamp ISO")
    doc: Any = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "-s", str(mid), "--json").json()
    assert first.endswith(f",{mid},{doc['timestamp_iso']}")


def test_property_no_message_has_is_said_per_queue(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80)
    args = ("queryOffset", "-n", store.address, "-t", "TopicTest", "-s", str(store.start_ms), "--json")
    r = cli(*args, "--time-field", "property:biz_ts")
    assert r.code == 0
    doc: Any = r.json()
    assert all(q["offset_at_time"] == q["max_offset"] == 10 for q in doc["queues"])
    warnings = r.stderr.strip().splitlines()
    assert len(warnings) == 8 and "TopicTest broker-a/0: none of its 10 messages has property biz_ts" in warnings[0]
    assert all("its last message has none at all; Offset At Time is its max offset 10" in w for w in warnings)
    # a field every message has, searched after the end: an ordinary answer, nothing to say
    late = cli(*args[:-2], str(store.end_ms + 60_000), "--json", "--time-field", "born")
    assert late.code == 0 and late.stderr == ""


def test_a_time_query_on_4x_leaves_the_groups_consume_tps_alone(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], door: str
) -> None:
    """The messages a time query reads are read as TOOLS_CONSUMER: read as the group, the broker
    counts them in its consume TPS for a minute, which dashboards show for a stopped group and a
    following reset takes for consumers at work."""
    if door == "embedded":
        pytest.skip("an embedded store keeps no consume statistics from one run to the next")
    store = make_store("4.9.8", count=800, groups={"g": None})
    r = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "-g", "g", "-s", str(store.start_ms + HOUR_MS))
    assert r.code == 0, r.stderr
    doc: Any = cli("consumerProgress", "-n", store.address, "-g", "g", "--json").json()
    assert doc["tps"] == 0.0
