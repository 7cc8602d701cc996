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
