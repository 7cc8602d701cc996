"""A 4.x broker's nearest-message search can land before the time: the plan says so, --exact fixes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import HOUR_MS, CliResult, Store


def store_times(store: Store, broker: str, qid: int) -> list[int]:
    cluster = store.open()
    try:
        b = cluster.brokers[broker]
        return [t for o in range(b.max_offset("TopicTest", qid)) if (t := b.store_time_at("TopicTest", qid, o))]
    finally:
        cluster.close()


def test_plan_marks_a_landing_before_the_time_and_exact_moves_it(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store("4.9.8", count=80, groups={"g": None})
    times = store_times(store, "broker-a", 0)
    k = 4
    ts = times[k] + 1  # 1 ms after message k, long before k+1: the nearest message is k
    assert times[k + 1] - ts > 1000
    base = ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", str(ts)]
    dry = cli(*base, "-b", "broker-a", "-q", "0", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    q: Any = dry.json()["queues"][0]  # type: ignore[index]
    assert q["new_offset"] == k and q["lands_before_ms"] == 1
    text = cli(*base, "-b", "broker-a", "-q", "0", "--dry-run")
    assert "(lands 1 ms before the time)" in text.stdout and "--exact moves them" in text.stdout

    done = cli(*base, "-b", "broker-a", "-q", "0", "--exact", "--yes", "--json")
    assert done.code == 0, done.stderr
    q = done.json()["queues"][0]  # type: ignore[index]
    assert q["new_offset"] == k + 1 and q["exact_from"] == k and q["outcome"] == "applied"
    assert times[q["new_offset"]] >= ts > times[q["new_offset"] - 1]


def test_five_x_lower_boundary_search_is_never_marked(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store("5.3.3", count=80, groups={"g": None})
    ts = store_times(store, "broker-a", 0)[4] + 1
    r = cli(
        "resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", str(ts), "--dry-run", "--json"
    )
    doc: Any = r.json()
    assert r.code == 0 and not any("lands_before_ms" in q for q in doc["queues"])
    assert next(q for q in doc["queues"] if q["broker"] == "broker-a" and q["queue_id"] == 0)["new_offset"] == 5


def test_force_false_only_moves_back_on_every_version(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """-f false never moves a queue forward, also on 5.2+ brokers that ignore the flag themselves."""
    import time

    for version in ("4.9.8", "5.3.3"):
        store = make_store(version, count=80, groups={"g": int(time.time() * 1000) - HOUR_MS})  # consumed to -1h
        args = ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-30m"]
        ahead: Any = cli(*args, "-f", "true", "--dry-run", "--json").json()
        assert any(q["new_offset"] > q["old_offset"] for q in ahead["queues"]), version  # -30m is forward
        r = cli(*args, "-f", "false", "--yes", "--json")
        assert r.code == 0, r.stderr
        doc: Any = r.json()
        assert all(q["new_offset"] == q["old_offset"] for q in doc["queues"]), version
        assert "nothing to change" in r.stderr
