"""Lite groups (5.5) on the mock broker, through both doors: consumerProgress, queryOffset,
resetOffsetByTime and restoreOffset of a lite group print what the mock's store holds after."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_lite_topic
from tests.conftest import CliResult, store_address

PARENT, GROUP, PLAIN_TOPIC, PLAIN_GROUP = "LiteParent", "G_lite", "PlainTopic", "G_plain"
LMQ = f"%LMQ%${PARENT}$"
#: lite topic -> (messages sent, offset committed): lags of 0 to 4, more lite topics than the top 20
LITES = {f"lt{i:02d}": (i % 5 + 1, min(i % 3, i % 5 + 1)) for i in range(24)}
FIRST_HALF = sorted(LITES)[:12]
START = 1_790_000_000_000
STEP = 10


@pytest.fixture
def lite_store(tmp_path: Path, door: str) -> Iterator[tuple[str, Path, int]]:
    """A 5.5.1 store with LITES sent (the first half before the mark, the rest after it) and
    committed, and a plain group. Yields (address, store root, the mark)."""
    root = tmp_path / "lite"
    mark = _build(root)
    with store_address(root, door) as addr:
        yield addr, root, mark


def _build(root: Path, **conf: str) -> int:
    """The store of ``lite_store`` (``conf``: broker.conf settings); returns the mark."""
    cluster = MockCluster.create(root, ("broker-a",), version="5.5.1", broker_config=conf or None)
    broker = cluster.brokers["broker-a"]
    broker.create_lite_topic(PARENT, 2)  # two queues: a message's parent offset is not its LMQ offset
    t = fill_lite_topic(broker, PARENT, {n: LITES[n][0] for n in FIRST_HALF}, START, STEP)
    mark = t + STEP // 2
    fill_lite_topic(broker, PARENT, {n: LITES[n][0] for n in sorted(LITES)[12:]}, t + STEP, STEP)
    broker.ensure_lite_group(GROUP, PARENT)
    for name, (_, committed) in LITES.items():
        broker.update_consumer_offset(GROUP, LMQ + name, 0, committed)
    broker.create_topic(PLAIN_TOPIC, 2)
    broker.ensure_group(PLAIN_GROUP)
    for q in range(2):
        broker.update_consumer_offset(PLAIN_GROUP, PLAIN_TOPIC, q, 0)
    cluster.close()
    return mark


def _truth(root: Path) -> dict[str, tuple[int, int]]:
    """Each lite topic's (max offset, committed offset of GROUP), read from the store's files."""
    cluster = MockCluster(root)
    try:
        b = cluster.brokers["broker-a"]
        return {n: (b.max_offset(LMQ + n, 0), b.committed_offset(GROUP, LMQ + n, 0)) for n in LITES}
    finally:
        cluster.close()


def _plain(root: Path) -> dict[int, int]:
    cluster = MockCluster(root)
    try:
        return {q: cluster.brokers["broker-a"].committed_offset(PLAIN_GROUP, PLAIN_TOPIC, q) for q in range(2)}
    finally:
        cluster.close()


def _store_time(root: Path, lite_topic: str, offset: int) -> int | None:
    cluster = MockCluster(root)
    try:
        return cluster.brokers["broker-a"].store_time_at(LMQ + lite_topic, 0, offset)
    finally:
        cluster.close()


def _no_age(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "lag_time_ms"} for r in rows]


def _json(r: CliResult) -> Any:
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def test_consumer_progress_shows_the_top_20_by_lag_and_all_that_lag(
    cli: Callable[..., CliResult], lite_store: tuple[str, Path, int]
) -> None:
    addr, root, _ = lite_store
    truth = _truth(root)
    lags = {n: hi - c for n, (hi, c) in truth.items()}
    doc = _json(cli("consumerProgress", "-n", addr, "-g", GROUP, "--json"))
    assert doc["lite"] is True and doc["parent_topic"] == PARENT and doc["top_k"] == 20
    assert doc["diff_total"] == sum(lags.values()) == sum(s - c for s, c in LITES.values())
    shown = {r["lite_topic"]: r for r in doc["lite_topics"]}
    lagging = {n for n, lag in lags.items() if lag > 0}
    assert len(lagging) <= 20 and set(shown) == lagging  # the broker leaves lite topics without lag out
    for name, r in shown.items():
        assert (r["broker_offset"], r["consumer_offset"], r["diff"]) == (*truth[name], lags[name]), r
        assert r["queue"] == LMQ + name and r["broker"] == "broker-a"
        # the age of the oldest unconsumed message: the one at the committed offset
        assert abs(time.time() * 1000 - r["lag_time_ms"] - _store_time(root, name, truth[name][1])) < 60_000, r
    assert [r["diff"] for r in doc["lite_topics"]] == sorted(lags[n] for n in shown)[::-1]
    every = _json(cli("consumerProgress", "-n", addr, "-g", GROUP, "--all", "--json"))
    assert every["top_k"] is None and _no_age(every["lite_topics"]) == _no_age(doc["lite_topics"])
    one = _json(cli("consumerProgress", "-n", addr, "-g", GROUP, "-t", "lt03", "--json"))
    assert [(r["lite_topic"], r["consumer_offset"], r["diff"]) for r in one["lite_topics"]] == [
        ("lt03", truth["lt03"][1], lags["lt03"])
    ]
    text = cli("consumerProgress", "-n", addr, "-g", GROUP)
    assert text.code == 0 and "Lite Topic" in text.stdout and "%LMQ%" not in text.stdout, text.stderr
    assert "top 20 lite topics by lag" in text.stdout


def test_the_top_k_is_of_the_largest_lags(cli: Callable[..., CliResult], tmp_path: Path, door: str) -> None:
    """More lite topics lag than the top 20: the 20 largest are shown, the total counts all."""
    root = tmp_path / "many"
    cluster = MockCluster.create(root, ("broker-a",), version="5.5.1")
    broker = cluster.brokers["broker-a"]
    sent = {f"m{i:02d}": i + 1 for i in range(25)}
    fill_lite_topic(broker, PARENT, sent, START)
    broker.ensure_lite_group(GROUP, PARENT)
    for name in sent:
        broker.update_consumer_offset(GROUP, LMQ + name, 0, 0)
    cluster.close()
    with store_address(root, door) as addr:
        doc = _json(cli("consumerProgress", "-n", addr, "-g", GROUP, "--json"))
        assert [r["lite_topic"] for r in doc["lite_topics"]] == [f"m{i:02d}" for i in range(24, 4, -1)]
        assert doc["diff_total"] == sum(sent.values())
        every = _json(cli("consumerProgress", "-n", addr, "-g", GROUP, "--all", "--json"))
        assert len(every["lite_topics"]) == 25


def test_query_offset_shows_each_lite_topic_and_where_a_time_lands(
    cli: Callable[..., CliResult], lite_store: tuple[str, Path, int]
) -> None:
    addr, root, mark = lite_store
    truth = _truth(root)
    doc = _json(cli("queryOffset", "-n", addr, "-t", PARENT, "-g", GROUP, "-s", str(mark), "--json"))
    assert doc["lite"] is True and (doc["topic"], doc["group"]) == (PARENT, GROUP)
    rows = {r["lite_topic"]: r for r in doc["queues"]}
    assert set(rows) == set(LITES)
    for name, r in rows.items():
        hi, committed = truth[name]
        assert (r["broker"], r["queue_id"], r["min_offset"]) == ("broker-a", 0, 0), r
        assert (r["max_offset"], r["consumer_offset"], r["lag"]) == (hi, committed, hi - committed), r
        # the first message stored at or after the mark; none (the first half): the max offset
        assert r["offset_at_time"] == (hi if name in FIRST_HALF else 0), (name, r)
        if name not in FIRST_HALF:
            assert r["store_time_at_offset"] > mark, r
    text = cli("queryOffset", "-n", addr, "-t", PARENT, "-g", GROUP)
    assert text.code == 0 and "Lite Topic" in text.stdout and "%LMQ%" not in text.stdout, text.stderr
    wrong = cli("queryOffset", "-n", addr, "-t", PLAIN_TOPIC, "-g", GROUP)
    assert wrong.code == 2 and f"queryOffset -t {PARENT} -g {GROUP}" in wrong.stderr, wrong.stderr


def test_reset_by_time_is_planned_applied_read_back_and_restored(
    cli: Callable[..., CliResult], lite_store: tuple[str, Path, int]
) -> None:
    addr, root, mark = lite_store
    before, plain = _truth(root), _plain(root)
    doc = _json(cli("resetOffsetByTime", "-n", addr, "-t", PARENT, "-g", GROUP, "-s", str(mark), "--yes", "--json"))
    want = {n: (hi if n in FIRST_HALF else 0) for n, (hi, _) in before.items()}
    planned = {r["topic"]: (r["old_offset"], r["new_offset"]) for r in doc["queues"]}
    assert planned == {LMQ + n: (before[n][1], want[n]) for n in LITES}
    moved = [r for r in doc["queues"] if r["old_offset"] != r["new_offset"]]
    assert moved and all(r["outcome"] == "applied" for r in moved), doc["queues"]
    assert doc["verified"] == doc["planned"] == len(moved) and doc["backup"]
    assert {n: c for n, (_, c) in _truth(root).items()} == want
    assert _plain(root) == plain
    restored = _json(cli("restoreOffset", "-n", addr, "--from", doc["backup"], "--yes", "--json"))
    assert {r["topic"]: r["new_offset"] for r in restored["queues"]} == {LMQ + n: c for n, (_, c) in before.items()}
    assert _truth(root) == before and _plain(root) == plain


def test_reset_to_earliest_and_a_dry_run(cli: Callable[..., CliResult], lite_store: tuple[str, Path, int]) -> None:
    addr, root, _ = lite_store
    before = _truth(root)
    dry = _json(cli("resetOffsetByTime", "-n", addr, "-t", PARENT, "-g", GROUP, "--to-latest", "--dry-run", "--json"))
    assert {r["topic"]: r["new_offset"] for r in dry["queues"]} == {LMQ + n: hi for n, (hi, _) in before.items()}
    assert _truth(root) == before
    doc = _json(cli("resetOffsetByTime", "-n", addr, "-t", PARENT, "-g", GROUP, "--to-earliest", "--yes", "--json"))
    assert doc["verified"] == sum(r["old_offset"] != r["new_offset"] for r in doc["queues"]) > 0
    assert {n: c for n, (_, c) in _truth(root).items()} == dict.fromkeys(LITES, 0)
    shown = _json(cli("consumerProgress", "-n", addr, "-g", GROUP, "--all", "--json"))
    assert {r["lite_topic"]: r["diff"] for r in shown["lite_topics"]} == {n: hi for n, (hi, _) in before.items()}


def test_a_broker_without_server_side_reset_takes_direct_updates(
    cli: Callable[..., CliResult], tmp_path: Path, door: str
) -> None:
    """useServerSideResetOffset=false and nobody online: each lite topic's offset is written
    directly (UPDATE_CONSUMER_OFFSET on its LMQ), and read back."""
    root = tmp_path / "direct"
    _build(root, useServerSideResetOffset="false")
    with store_address(root, door) as addr:
        doc = _json(
            cli("resetOffsetByTime", "-n", addr, "-t", PARENT, "-g", GROUP, "--to-offset", "1", "--yes", "--json")
        )
        assert doc["method_code"] == {"broker-a": "direct"}
        assert {n: c for n, (_, c) in _truth(root).items()} == dict.fromkeys(LITES, 1)


def test_the_all_groups_view_lists_the_lite_group_with_its_total_lag(
    cli: Callable[..., CliResult], lite_store: tuple[str, Path, int]
) -> None:
    addr, root, _ = lite_store
    truth = _truth(root)
    rows = {g["group"]: g for g in _json(cli("consumerProgress", "-n", addr, "--json"))["groups"]}
    assert rows[GROUP]["diff_total"] == sum(hi - c for hi, c in truth.values())
    # the mock has no lite consumers, so no lag-time metrics: unknown, as on a broker without them
    assert rows[GROUP]["lag_time_ms"] is None and rows[GROUP]["version"] == "OFFLINE"
    java = cli("consumerProgress", "-n", addr, "--output", "java")
    assert java.code == 0 and GROUP not in java.stdout, java.stderr


def test_asking_after_an_unknown_group_does_not_create_it(
    cli: Callable[..., CliResult], lite_store: tuple[str, Path, int]
) -> None:
    """A 5.5 broker asked GET_LITE_GROUP_INFO about a group it lacks creates that group (with
    autoCreateSubscriptionGroup, its default): a mistyped -g must leave nothing behind."""
    addr, root, _ = lite_store
    for args in (
        ("consumerProgress", "-g", "G_typo"),
        ("queryOffset", "-t", PLAIN_TOPIC, "-g", "G_typo"),
        ("resetOffsetByTime", "-t", PLAIN_TOPIC, "-g", "G_typo", "--to-earliest", "--dry-run"),
    ):
        r = cli(args[0], "-n", addr, *args[1:])
        assert r.code != 0 or "G_typo" in r.stdout + r.stderr, r
    admin = connect(addr)  # through the door: a server keeps what it created in memory until it flushes
    try:
        assert "G_typo" not in admin.list_groups(subscribed=True)
    finally:
        admin.close()
    assert cli("consumerProgress", "-n", addr, "-g", GROUP, "--json").code == 0  # a lite group is still found
