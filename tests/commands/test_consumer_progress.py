from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_one_group_per_queue(version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(version, count=800, span_ms=2 * HOUR_MS, groups={"g": None})
    store2 = make_store(version, count=800, span_ms=2 * HOUR_MS, groups={"g": -1})
    done: Any = cli("consumerProgress", "-n", store.address, "-g", "g", "--json").json()
    assert done["group"] == "g" and done["diff_total"] == 0 and done["lag_time_ms"] == 0
    rows = [q for q in done["queues"] if q["topic"] == "TopicTest"]
    assert len(rows) == 8 and all(q["broker_offset"] == 100 == q["consumer_offset"] for q in rows)
    assert all(q["last_timestamp"] > store.start_ms for q in rows)
    assert any(q["topic"] == "%RETRY%g" for q in done["queues"])
    # nothing consumed at all (committed at offset 0): every queue shows its whole backlog
    doc: Any = cli("consumerProgress", "-n", store2.address, "-g", "g", "-t", "TopicTest", "--json").json()
    assert doc["diff_total"] == 800
    assert len(doc["queues"]) == 8
    assert all(q["consumer_offset"] == 0 and q["diff"] == 100 == q["broker_offset"] for q in doc["queues"])
    assert all(q["last_timestamp"] is None for q in doc["queues"])  # nothing consumed: no last time
    assert {q["topic"] for q in doc["queues"]} == {"TopicTest"}
    # the oldest unconsumed message is about two hours old
    assert 2 * HOUR_MS - 60_000 < doc["lag_time_ms"] < 2 * HOUR_MS + 60_000


def test_java_like_table(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": None})
    out = cli("consumerProgress", "-n", store.address, "-g", "g").stdout
    assert "Broker Offset" in out and "Consume TPS: 0.00" in out and "Consume Diff Total: 0" in out


def test_all_groups(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"a": None, "b": -1})
    doc: Any = cli("consumerProgress", "-n", store.address, "--json").json()
    by_name = {g["group"]: g for g in doc["groups"]}
    assert set(by_name) == {"a", "b"}
    assert by_name["a"]["diff_total"] == 0 and by_name["b"]["diff_total"] == 80
    assert by_name["a"]["count"] == 0 and by_name["a"]["version"] == "OFFLINE"
    # lag as time for every group, not only under --max-lag-time: 0 caught up, else the oldest
    # unconsumed message's age (b committed nothing: the first message, about 2 hours old)
    assert by_name["a"]["lag_time_ms"] == 0
    one: Any = cli("consumerProgress", "-n", store.address, "-g", "b", "--json").json()
    assert abs(by_name["b"]["lag_time_ms"] - one["lag_time_ms"]) < 60_000
    assert 2 * HOUR_MS - 60_000 < by_name["b"]["lag_time_ms"] < 2 * HOUR_MS + 60_000
    table = cli("consumerProgress", "-n", store.address).stdout.splitlines()
    assert table[1].split()[-2:] == ["Lag", "Time"] and table[2].split()[-1] == "0s"
    assert table[3].split()[-1].startswith(("1h5", "2h0"))  # one format: 1h59m or 2h00m


def test_check_mode_exit_codes(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"a": None, "b": -1})
    assert cli("consumerProgress", "-n", store.address, "-g", "a", "--max-lag", "0").code == 0
    breached = cli("consumerProgress", "-n", store.address, "-g", "b", "--max-lag", "10", "--json")
    assert breached.code == 3 and "Diff Total 80 > --max-lag 10" in breached.stderr
    assert breached.json()["diff_total"] == 80  # the result is still printed
    assert cli("consumerProgress", "-n", store.address, "--max-lag-time", "5m").code == 3
    assert cli("consumerProgress", "-n", store.address, "-g", "a", "--max-lag-time", "5m").code == 0
    assert cli("consumerProgress", "-n", store.address, "-g", "b", "--max-lag-time", "5h").code == 0
