"""Lite topics on a real 5.5.1 broker (the shared cluster, which has enableLmq and
enableMultiDispatch on): consumerProgress -g of a lite group shows one row per lite topic, equal
to what was sent and committed; queryOffset shows them; resets of a lite group go through the
plan/backup/verify flow; the commands that do not take a lite group refuse it in one line.
Everything lives on broker-a, under names of this module's own."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.model import Message, MessageQueue
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb
from tests.support import schemas

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

#: the shared cluster this module runs on (the first line with lite topics)
VERSION = "5.5.1"
PARENT, GROUP, PLAIN_TOPIC, PLAIN_GROUP = "LiteRbParent", "G_lite_rb", "LiteRbPlain", "G_lite_rb_plain"
#: lite topic -> (messages sent, offset committed): more lite topics than the default top 20
LITES = {f"lt{i:02d}": (i % 4 + 2, i % 4) for i in range(24)}
LMQ = "%LMQ%$" + PARENT + "$"
#: the lite topics sent before MID_TIME (the fixture's time between the two halves of the sends)
FIRST_HALF = sorted(LITES)[:12]
MARKS: dict[str, int] = {}


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


@pytest.fixture(scope="module")
def lite(shared_cluster: Callable[[str], rb.RealCluster]) -> Iterator[tuple[rb.RealCluster, float]]:
    """The shared 5.5.1 cluster with this module's lite parent topic, lite group and plain topic
    (two queues) on broker-a; the lite topics' messages sent and offsets committed. Yields the
    cluster and the time just before the first send."""
    cluster = shared_cluster(VERSION)
    addr = cluster.broker_addrs[0]
    rb.create_topic(addr, PARENT, 1, attributes="+message.type=LITE")
    rb.create_group(addr, GROUP, attributes={"+lite.bind.topic": PARENT})
    rb.create_topic(addr, PLAIN_TOPIC, 2)
    rb.create_group(addr, PLAIN_GROUP)
    started = time.time() * 1000
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        for lite_topic, (sent, _) in LITES.items():
            if lite_topic == sorted(LITES)[len(FIRST_HALF)]:
                time.sleep(0.02)  # store times are in ms: the mark falls strictly between the halves
                MARKS["mid"] = int(time.time() * 1000)
                time.sleep(0.02)
            for i in range(sent):
                admin.send(PARENT, Message(PARENT, f"{lite_topic}-{i}".encode(), {"__LITE_TOPIC": lite_topic}))
        for mq in admin.topic_route(PLAIN_TOPIC).message_queues():
            admin.send(PLAIN_TOPIC, Message(PLAIN_TOPIC, b"p"), mq)
            admin.update_consumer_offset(PLAIN_GROUP, mq, 0)
    finally:
        admin.close()
    for lite_topic, (_, committed) in LITES.items():
        rb.commit_offset(addr, GROUP, LMQ + lite_topic, 0, committed)
    yield cluster, started


def _broker_truth(cluster: rb.RealCluster) -> dict[str, tuple[int, int | None]]:
    """Each lite topic's (max offset, committed offset of GROUP), asked of the broker queue by queue."""
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        queues = {n: MessageQueue(LMQ + n, "broker-a", 0) for n in LITES}
        return {n: (admin.max_offset(mq), admin.consumer_offset(GROUP, mq)) for n, mq in queues.items()}
    finally:
        admin.close()


def _valid(doc: Any) -> dict[str, Any]:
    assert isinstance(doc, dict) and schemas.problems(doc) == [], doc
    return doc


def test_every_lite_topic_as_a_row_equal_to_what_was_sent_and_committed(lite: tuple[rb.RealCluster, float]) -> None:
    cluster, started = lite
    code, doc, err = cli("consumerProgress", "-n", cluster.namesrv_addr, "-g", GROUP, "--all", "--json")
    assert code == 0, err
    doc = _valid(doc)
    assert doc["lite"] is True and doc["parent_topic"] == PARENT and doc["top_k"] is None
    rows = {r["lite_topic"]: r for r in doc["lite_topics"]}
    assert set(rows) == set(LITES)
    for name, r in rows.items():
        sent, committed = LITES[name]
        assert (r["broker_offset"], r["consumer_offset"], r["diff"]) == (sent, committed, sent - committed), r
        assert r["queue"] == LMQ + name and r["broker"] == "broker-a"
        # every lite topic lags: its oldest unconsumed message was stored after the fixture began
        assert r["lag_time_ms"] is not None and 0 < r["lag_time_ms"] <= time.time() * 1000 - started + 1000
    assert doc["diff_total"] == sum(s - c for s, c in LITES.values())
    diffs = [r["diff"] for r in doc["lite_topics"]]
    assert diffs == sorted(diffs, reverse=True)


def test_a_mistyped_group_is_not_created_and_a_store_view_reads_the_lmq_offsets_file(
    lite: tuple[rb.RealCluster, float],
) -> None:
    """A 5.5 broker asked GET_LITE_GROUP_INFO about a group it lacks creates it: the commands
    ask only about groups the brokers hold. With enableLmq the broker persists every offset to
    config/lmqConsumerOffset.json, which a store:// view of its directory reads."""
    cluster, _ = lite
    typo = GROUP + "_typo"
    for args in (("consumerProgress", "-g", typo), ("queryOffset", "-t", PARENT, "-g", typo)):
        code, _, err = cli(args[0], "-n", cluster.namesrv_addr, *args[1:])
        assert code == 2 and f"unknown consumer group '{typo}'" in err, err
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        assert typo not in admin.list_groups(subscribed=True) and GROUP in admin.list_groups(subscribed=True)
    finally:
        admin.close()
    live = {mq.queue_id: offset for mq, offset in _plain_offsets(cluster).items() if mq.broker_name == "broker-a"}
    assert set(live.values()) == {0}
    saved = cluster.store_dirs[0] / "config" / "lmqConsumerOffset.json"
    deadline = time.monotonic() + 20  # persisted every flushConsumerOffsetInterval (5 s)
    while f"{PLAIN_TOPIC}@{PLAIN_GROUP}" not in (saved.read_text() if saved.exists() else ""):
        assert time.monotonic() < deadline, "the broker did not persist lmqConsumerOffset.json"
        time.sleep(0.5)
    store = f"store://{cluster.store_dirs[0]}"
    code, doc, err = cli("queryOffset", "-n", store, "-t", PLAIN_TOPIC, "-g", PLAIN_GROUP, "--json")
    assert code == 0, err
    assert {q["queue_id"]: q["consumer_offset"] for q in _valid(doc)["queues"]} == live
    assert "lmqConsumerOffset.json" in err


def test_the_default_is_the_top_20_by_lag_with_the_total_of_all(lite: tuple[rb.RealCluster, float]) -> None:
    cluster, _ = lite
    code, doc, err = cli("consumerProgress", "-n", cluster.namesrv_addr, "-g", GROUP, "--json")
    assert code == 0, err
    doc = _valid(doc)
    assert doc["top_k"] == 20 and len(doc["lite_topics"]) == 20
    assert doc["diff_total"] == sum(s - c for s, c in LITES.values())
    lags = sorted((s - c for s, c in LITES.values()), reverse=True)
    assert sorted((r["diff"] for r in doc["lite_topics"]), reverse=True) == lags[:20]
    code, text, err = cli("consumerProgress", "-n", cluster.namesrv_addr, "-g", GROUP)
    assert code == 0, err
    assert "Lite Topic" in text and "%LMQ%" not in text and "top 20 lite topics by lag" in text


def test_the_java_tools_get_lite_group_info_lists_the_same_lags(
    lite: tuple[rb.RealCluster, float], tmp_path: Path
) -> None:
    """The Java 5.5 tool's getLiteGroupInfo (top 30: every lite topic here) lists the lite topics,
    their lags and the total that consumerProgress -g --all shows."""
    cluster, _ = lite
    ns = cluster.namesrv_addr
    java = rb.check_java_mqadmin(
        "5.5.1", ns, "getLiteGroupInfo", "-p", PARENT, "-g", GROUP, "-k", "30", workdir=tmp_path
    ).stdout
    by_count = java.split("TopK by lag count")[1].split("TopK by lag time")[0]
    rows = (line.split() for line in by_count.splitlines())
    java_lags = {cols[1]: int(cols[2]) for cols in rows if len(cols) >= 3 and cols[0].isdigit()}
    code, doc, err = cli("consumerProgress", "-n", ns, "-g", GROUP, "--all", "--json")
    assert code == 0, err
    assert java_lags == {r["lite_topic"]: r["diff"] for r in doc["lite_topics"]} and len(java_lags) == len(LITES)
    assert f"Total Lag Count: {doc['diff_total']}" in java, java


def test_one_lite_topic_and_the_checks(lite: tuple[rb.RealCluster, float]) -> None:
    cluster, _ = lite
    ns = cluster.namesrv_addr
    code, doc, err = cli("consumerProgress", "-n", ns, "-g", GROUP, "-t", "lt03", "--json")
    assert code == 0, err
    doc = _valid(doc)
    sent, committed = LITES["lt03"]
    assert [(r["lite_topic"], r["consumer_offset"]) for r in doc["lite_topics"]] == [("lt03", committed)]
    assert doc["diff_total"] == sent - committed
    assert doc["lite_topics"][0]["last_timestamp"] is not None  # the last consumed message's store time
    code, _, err = cli("consumerProgress", "-n", ns, "-g", GROUP, "--max-lag", "1")
    assert code == 3 and GROUP in err and "Traceback" not in err, err
    code, _, err = cli("consumerProgress", "-n", ns, "-g", GROUP, "-t", "nosuch")
    assert code == 2 and "no offset for lite topic 'nosuch'" in err, err
    for extra in (("--output", "java"), ("--health",), ("-s", "true")):
        code, _, err = cli("consumerProgress", "-n", ns, "-g", GROUP, *extra)
        assert code == 2 and "not for a lite group" in err and len(err.strip().splitlines()) == 1, err


def test_an_ordinary_group_is_unchanged_and_all_is_refused_for_it(lite: tuple[rb.RealCluster, float]) -> None:
    cluster, _ = lite
    ns = cluster.namesrv_addr
    code, doc, err = cli("consumerProgress", "-n", ns, "-g", PLAIN_GROUP, "--json")
    assert code == 0, err
    assert "lite" not in _valid(doc) and {q["topic"] for q in doc["queues"]} == {PLAIN_TOPIC}
    code, _, err = cli("consumerProgress", "-n", ns, "-g", PLAIN_GROUP, "--all")
    assert code == 2 and "--all is for lite groups" in err, err


def test_the_all_groups_view_lists_a_lite_group_with_its_total_lag(lite: tuple[rb.RealCluster, float]) -> None:
    """A lite group has no %RETRY% topic until it retries, so the Java tool's way of finding groups
    misses it: the view asks the 5.5 brokers' subscription groups, and shows the brokers' total lag
    over every lite topic; --output java stays the Java tool's list."""
    cluster, started = lite
    ns = cluster.namesrv_addr
    code, doc, err = cli("consumerProgress", "-n", ns, "--json")
    assert code == 0, err
    rows = {g["group"]: g for g in _valid(doc)["groups"]}
    assert rows[GROUP]["diff_total"] == sum(s - c for s, c in LITES.values()), rows[GROUP]
    # the group's oldest unconsumed time comes from the broker's lag-time metrics, which it may not
    # have gathered yet (then unknown, not a guess from the top lite topic by count)
    lag_ms = rows[GROUP]["lag_time_ms"]
    assert lag_ms is None or 0 < lag_ms <= time.time() * 1000 - started + 1000, rows[GROUP]
    assert (rows[GROUP]["count"], rows[GROUP]["version"], rows[GROUP]["tps"]) == (0, "OFFLINE", 0), rows[GROUP]
    assert [g["group"] for g in doc["groups"]] == sorted(rows)
    code, text, err = cli("consumerProgress", "-n", ns, "--output", "java")
    assert code == 0 and "#Diff Total" in text and GROUP not in text, err


def test_offset_commands_refuse_a_lite_group_in_one_line_and_change_nothing(
    lite: tuple[rb.RealCluster, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = lite
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    ns = cluster.namesrv_addr
    for args in (
        ("resetOffsetByTime", "-g", GROUP, "--all-topics", "--to-earliest", "--yes"),
        ("skipAccumulatedMessage", "-t", PARENT, "-g", GROUP, "--yes"),
    ):
        code, out, err = cli(*args, "-n", ns)
        assert code == 2, (args, out, err)
        assert err.strip().count("\n") == 0 and "not supported by this command yet" in err, err
        assert f"lite group of parent topic {PARENT!r}" in err and "unknown consumer group" not in err
        assert f"resetOffsetByTime -t {PARENT} -g {GROUP}" in err, err
    code, doc, err = cli("consumerProgress", "-n", ns, "-g", GROUP, "--all", "--json")
    assert code == 0, err
    assert {r["lite_topic"]: r["consumer_offset"] for r in doc["lite_topics"]} == {n: c for n, (_, c) in LITES.items()}
    code, _, err = cli("consumerConnection", "-n", ns, "-g", GROUP)
    assert code == 1 and "no client of consumer group" in err, err


def test_query_offset_shows_each_lite_topic_and_where_a_time_lands(lite: tuple[rb.RealCluster, float]) -> None:
    """queryOffset -t <parent> -g <lite group>: one row per lite topic with a committed offset, its
    bounds, the group's offset and lag as the broker holds them, and where -s lands in it."""
    cluster, _ = lite
    ns = cluster.namesrv_addr
    code, doc, err = cli("queryOffset", "-n", ns, "-t", PARENT, "-g", GROUP, "-s", str(MARKS["mid"]), "--json")
    assert code == 0, err
    doc = _valid(doc)
    assert doc["lite"] is True and (doc["topic"], doc["group"]) == (PARENT, GROUP)
    rows = {r["lite_topic"]: r for r in doc["queues"]}
    assert set(rows) == set(LITES)
    truth = _broker_truth(cluster)
    for name, r in rows.items():
        sent, commit = LITES[name]
        assert (r["broker"], r["queue_id"], r["min_offset"]) == ("broker-a", 0, 0), r
        assert (r["max_offset"], r["consumer_offset"], r["lag"]) == (sent, commit, sent - commit), r
        assert (r["max_offset"], r["consumer_offset"]) == truth[name], r
        # 5.x: the first message stored at or after the time; none (the first half) -> the max offset
        assert r["offset_at_time"] == (sent if name in FIRST_HALF else 0), (name, r)
        if name not in FIRST_HALF:
            assert r["store_time_at_offset"] >= MARKS["mid"], r
    code, text, err = cli("queryOffset", "-n", ns, "-t", PARENT, "-g", GROUP)
    assert code == 0, err
    assert "Lite Topic" in text and "lt05" in text and "%LMQ%" not in text, text
    assert f"Total Lag: {sum(s - c for n, (s, c) in LITES.items() if n in rows)}" in text, text
    code, _, err = cli("queryOffset", "-n", ns, "-t", PLAIN_TOPIC, "-g", GROUP)
    assert code == 2 and f"queryOffset -t {PARENT} -g {GROUP}" in err and len(err.strip().splitlines()) == 1, err
    code, doc, err = cli("queryOffset", "-n", ns, "-t", PLAIN_TOPIC, "-g", PLAIN_GROUP, "--json")
    assert code == 0 and "lite" not in _valid(doc) and len(doc["queues"]) == 2, err


def test_a_lite_group_is_reset_by_time_backed_up_and_restored_lite_topic_by_lite_topic(
    lite: tuple[rb.RealCluster, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resetOffsetByTime -t <parent> -g <lite group>: a plan of its lite topics' queues, applied by
    the broker's per-queue reset (5.5 takes an LMQ by name), each read back; restoreOffset of the
    backup puts every lite topic back; nothing else of the broker moves."""
    cluster, _ = lite
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    ns, mid = cluster.namesrv_addr, MARKS["mid"]
    before = _broker_truth(cluster)
    assert {n: off for n, (_, off) in before.items()} == {n: c for n, (_, c) in LITES.items()}
    plain = _plain_offsets(cluster)
    code, doc, err = cli("resetOffsetByTime", "-n", ns, "-t", PARENT, "-g", GROUP, "-s", str(mid), "--yes", "--json")
    assert code == 0, err
    doc = _valid(doc)
    want = {n: (sent if n in FIRST_HALF else 0) for n, (sent, _) in LITES.items()}
    planned = {r["topic"]: (r["old_offset"], r["new_offset"]) for r in doc["queues"]}
    assert planned == {LMQ + n: (LITES[n][1], want[n]) for n in LITES}, planned
    moved = [r for r in doc["queues"] if r["old_offset"] != r["new_offset"]]
    assert moved and all(r["outcome"] == "applied" for r in moved), doc["queues"]
    assert doc["verified"] == doc["planned"] == len(moved) and doc["backup"], doc
    assert {n: off for n, (_, off) in _broker_truth(cluster).items()} == want
    assert _plain_offsets(cluster) == plain
    # the lag the group shows now is the reset's: the lite topics after the time wait again in full,
    # those before it are caught up (the broker's top-K by lag leaves lite topics without lag out)
    code, shown, err = cli("consumerProgress", "-n", ns, "-g", GROUP, "--all", "--json")
    assert code == 0, err
    lagging = {n: off for n, off in want.items() if off < LITES[n][0]}
    assert {r["lite_topic"]: r["consumer_offset"] for r in shown["lite_topics"]} == lagging

    code, doc, err = cli("restoreOffset", "-n", ns, "--from", doc["backup"], "--yes", "--json")
    assert code == 0, err
    doc = _valid(doc)
    assert {r["topic"]: r["new_offset"] for r in doc["queues"]} == {LMQ + n: c for n, (_, c) in LITES.items()}
    assert _broker_truth(cluster) == before and _plain_offsets(cluster) == plain


def test_a_lite_group_to_earliest_and_latest_and_its_checks(
    lite: tuple[rb.RealCluster, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _ = lite
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    ns = cluster.namesrv_addr
    before = _broker_truth(cluster)
    code, doc, err = cli("resetOffsetByTime", "-n", ns, "-t", PARENT, "-g", GROUP, "--to-latest", "--dry-run", "--json")
    assert code == 0 and _valid(doc)["dry_run"] is True, err
    assert {r["topic"]: r["new_offset"] for r in doc["queues"]} == {LMQ + n: s for n, (s, _) in LITES.items()}
    assert _broker_truth(cluster) == before  # a dry run changes nothing
    for flag, want in (
        ("--to-latest", {n: s for n, (s, _) in LITES.items()}),
        ("--to-earliest", dict.fromkeys(LITES, 0)),
    ):
        code, doc, err = cli("resetOffsetByTime", "-n", ns, "-t", PARENT, "-g", GROUP, flag, "--yes", "--json")
        assert code == 0 and _valid(doc)["verified"] == sum(
            r["old_offset"] != r["new_offset"] for r in doc["queues"]
        ), err
        assert {n: off for n, (_, off) in _broker_truth(cluster).items()} == want, flag
    # a broker with useServerSideResetOffset=false (nobody online): direct offset updates of the LMQs
    addr = cluster.broker_addrs[0]
    rb.update_broker_config(addr, {"useServerSideResetOffset": False})
    try:
        code, doc, err = cli(
            "resetOffsetByTime", "-n", ns, "-t", PARENT, "-g", GROUP, "--shift-by", "1", "--yes", "--json"
        )
        assert code == 0 and _valid(doc)["method_code"] == {"broker-a": "direct"}, err
        assert {n: off for n, (_, off) in _broker_truth(cluster).items()} == dict.fromkeys(LITES, 1)
    finally:
        rb.update_broker_config(addr, {"useServerSideResetOffset": True})
    code, _, err = cli("resetOffsetByTime", "-n", ns, "-t", PARENT, "-g", GROUP, "-b", "broker-a", "-q", "0", "-o", "1")
    assert code == 2 and "-b/-q pick a queue of topic" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = cli("resetOffsetByTime", "-n", ns, "-t", PLAIN_TOPIC, "-g", GROUP, "--to-latest", "--yes")
    assert code == 2 and f"lite group of parent topic {PARENT!r}" in err and len(err.strip().splitlines()) == 1, err
    code, doc, err = cli("restoreOffset", "-n", ns, "--from", _first_backup(tmp_path), "--yes", "--json")
    assert code == 0, err
    assert _broker_truth(cluster) == before


def _first_backup(tmp_path: Path) -> str:
    """The oldest backup under MQADMIN_HOME: the offsets before this test's first reset."""
    found = sorted((tmp_path / "home").rglob("*.json"), key=lambda p: p.stat().st_mtime)
    assert found, "no backup written"
    return str(found[0])


def _plain_offsets(cluster: rb.RealCluster) -> dict[MessageQueue, int | None]:
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        return {mq: admin.consumer_offset(PLAIN_GROUP, mq) for mq in admin.topic_route(PLAIN_TOPIC).message_queues()}
    finally:
        admin.close()
