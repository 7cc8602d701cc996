from __future__ import annotations

import gc
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store
from mqadmin.commands._progress import max_lag
from mqadmin.commands.consumer_progress import _spans, groups_lag_ms, position_ages, queue_lag_ms

from mqadmin.context import Context
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.model import ClientInfo
from mqadmin.mock.seed import fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.model import MessageQueue, OffsetWrapper
from mqadmin.protocol.codes import MQVersion, RequestCode


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


def _by_group(result: CliResult) -> dict[str, dict[str, Any]]:
    assert result.code == 0, result.stderr
    doc: Any = result.json()
    return {g["group"]: g for g in doc["groups"]}


def test_all_groups_without_clients_equals_the_default(
    door: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """--no-clients shows every group's TPS, Diff Total and lag exactly as the default view and
    -g do; only the client columns are gone (not shown as 0 or OFFLINE)."""
    now = int(time.time() * 1000)
    store = make_store(count=80, span_ms=HOUR_MS, now_ms=now, groups={"a": None, "b": -1, "c": now - HOUR_MS // 2})
    if store.server is not None:  # over TCP a client can be online: the default view counts it
        client = ClientInfo("10.0.0.7@4242", "a", "10.0.0.7:50000", "JAVA", int(MQVersion.V5_3_3))
        with store.server.lock:
            store.server.cluster.brokers["broker-a"].register_client(client)
    full = _by_group(cli("consumerProgress", "-n", store.address, "--json"))
    lean = _by_group(cli("consumerProgress", "-n", store.address, "--json", "--no-clients"))
    assert list(lean) == list(full) == ["a", "b", "c"]
    assert full["a"]["count"] == (1 if door == "tcp" else 0)
    for name, g in lean.items():
        assert set(g) == {"group", "tps", "diff_total", "lag_time_ms"}, g
        assert (g["tps"], g["diff_total"]) == (full[name]["tps"], full[name]["diff_total"])
    assert lean["a"]["lag_time_ms"] == full["a"]["lag_time_ms"] == 0
    assert lean["b"]["diff_total"] == 80 and 0 < lean["c"]["diff_total"] < 80
    # the same store times read a moment apart: every lag moved by that moment, and only by it
    shifts = {lean[n]["lag_time_ms"] - full[n]["lag_time_ms"] for n in ("b", "c")}
    assert len(shifts) == 1 and 0 <= shifts.pop() < 60_000
    one: Any = cli("consumerProgress", "-n", store.address, "-g", "c", "--json").json()
    assert one["diff_total"] == lean["c"]["diff_total"]
    assert 0 <= one["lag_time_ms"] - lean["c"]["lag_time_ms"] < 60_000

    table = cli("consumerProgress", "-n", store.address, "--no-clients").stdout.splitlines()
    assert table[1].split() == ["Group", "TPS", "Diff", "Total", "Lag", "Time"]
    assert table[3].split()[:3] == ["b", "0", "80"]


def test_all_groups_rows_are_left_out_of_later_collections(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """Every group's rows live until the output is printed: the cyclic collector is off while they
    are made and they are frozen out of its later scans; it is as the caller had it afterwards."""
    store = make_store(count=80, groups={"a": None, "b": -1})
    try:
        for was_on in (True, False):
            gc.unfreeze()
            gc.enable() if was_on else gc.disable()
            r = cli("consumerProgress", "-n", store.address, "--json", "--no-clients")
            assert r.code == 0 and [g["group"] for g in r.json()["groups"]] == ["a", "b"]  # type: ignore[index]
            assert gc.isenabled() == was_on
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_no_clients_in_prometheus_leaves_the_client_count_out(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """Unknown is not offline: without --no-clients an offline group exports 0 online clients,
    with it no such series at all (an alert on 0 clients must not fire for every group)."""
    from prometheus_client.parser import text_string_to_metric_families

    store = make_store(count=80, groups={"a": None, "b": -1})
    names = {}
    for extra in ((), ("--no-clients",)):
        out = cli("consumerProgress", "-n", store.address, "--output", "prometheus", *extra)
        assert out.code == 0, out.stderr
        names[extra] = {
            (s.name, s.labels.get("group")): s.value
            for f in text_string_to_metric_families(out.stdout)
            for s in f.samples
        }
    lean, full = names[("--no-clients",)], names[()]
    assert full[("mqadmin_group_online_clients", "b")] == 0
    assert not any(name == "mqadmin_group_online_clients" for name, _ in lean)
    assert lean[("mqadmin_group_diff", "b")] == full[("mqadmin_group_diff", "b")] == 80
    assert lean[("mqadmin_group_lag_seconds", "a")] == 0


def test_no_clients_bad_combinations_exit_2_with_one_line(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=8, groups={"g": None})
    for args, message in [
        (("--output", "java"), "--output java prints the Java tool's Count/Version/Type/Model"),
        (("-g", "g"), "not with -g"),
        (("-g", "g", "-s", "true"), "not with -g"),
        (("--local-store", str(tmp_path)), "not with --local-store"),
    ]:
        r = cli("consumerProgress", "-n", store.address, "--no-clients", *args)
        assert r.code == 2 and r.stdout == "" and message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


class CountingServer(MockServer):
    """The mock server counting the request frames it receives, by request code: whatever the
    client does (retries, routes, fan-out) shows up here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.by_code: Counter[int] = Counter()
        self._count_lock = threading.Lock()

    def _dispatch(self, conn: Any, req: Any) -> None:
        if not req.is_response:
            with self._count_lock:
                self.by_code[req.code] += 1
        super()._dispatch(conn, req)

    def take(self) -> Counter[int]:
        with self._count_lock:
            out, self.by_code = self.by_code, Counter()
        return out


#: groups stand at one of these offsets on each queue (each queue holds 10 messages)
POSITIONS = 5


def _served_groups(root: Path, groups: int) -> tuple[CountingServer, MockCluster]:
    """``groups`` groups on an 8-queue topic over 2 brokers, each behind at one of POSITIONS."""
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version="5.3.3")
    now = int(time.time() * 1000)
    fill_topic(cluster, "TopicTest", 80, now - HOUR_MS, now - 1000)
    for i in range(groups):
        for broker in cluster.brokers.values():
            broker.ensure_group(f"g{i:04d}")
            for q in range(4):
                broker.update_consumer_offset(f"g{i:04d}", "TopicTest", q, (i + q) % POSITIONS)
    cluster.flush()
    return CountingServer(cluster, namesrv_port=0).start(), cluster


def test_no_clients_round_trips_do_not_grow_with_groups(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    """--no-clients costs a fixed number of requests per broker plus the lag-time pulls, one per
    run of close lagging offsets of a queue: 200 groups cost what 50 cost. The default view
    still asks each broker for each group's clients (RocketMQ has no request for all of them)."""
    counts: dict[int, Counter[int]] = {}
    default_lists: dict[int, int] = {}
    for groups in (50, 200):
        server, cluster = _served_groups(tmp_path / f"s{groups}", groups)
        try:
            lean = _by_group(cli("consumerProgress", "-n", server.namesrv_addr, "--json", "--no-clients"))
            counts[groups] = server.take()
            assert len(lean) == groups and all(g["lag_time_ms"] > 0 for g in lean.values())
            full = _by_group(cli("consumerProgress", "-n", server.namesrv_addr, "--json"))
            default_lists[groups] = server.take()[RequestCode.GET_CONSUMER_CONNECTION_LIST]
            assert [(g["diff_total"], g["tps"]) for g in lean.values()] == [
                (g["diff_total"], g["tps"]) for g in full.values()
            ]
        finally:
            server.stop()
            cluster.close()
    assert counts[200] == counts[50], counts
    assert counts[50][RequestCode.GET_BROKER_CONSUME_STATS] == 2
    # the lag time: each queue's POSITIONS close offsets are read with one pull
    assert counts[50][RequestCode.PULL_MESSAGE] == 8
    assert RequestCode.GET_CONSUMER_CONNECTION_LIST not in counts[50]
    assert sum(counts[200].values()) < 60
    assert default_lists == {50: 2 * 50, 200: 2 * 200}


def test_lag_times_of_many_groups_equal_one_read_per_queue(make_store: Callable[..., Store]) -> None:
    """Shared and batched lag-time reads give every group exactly the lag that reading each of
    its queues alone gives, for offsets close together, a span apart, and caught up."""
    store = make_store(count=800, span_ms=HOUR_MS, queues=4)  # 100 messages a queue
    at = [0, 1, 5, 31, 32, 33, 70, 99, 100]
    admin_ctx = Context(address=store.address, now=int(time.time() * 1000))
    try:
        admin = admin_ctx.admin()
        queues = admin.topic_route("TopicTest").message_queues()
        tables = {
            f"g{i}": {
                mq: OffsetWrapper(broker_offset=100, consumer_offset=at[(i + k) % len(at)], last_timestamp=0)
                for k, mq in enumerate(queues)
            }
            for i in range(len(at))
        }
        tables["idle"] = {}
        alone = {g: max_lag([queue_lag_ms(admin_ctx, mq, w) for mq, w in t.items()]) for g, t in tables.items()}
        shared = groups_lag_ms(admin_ctx, tables)
        assert shared == alone and alone["idle"] == 0
        # each group its own queue objects (as group-by-group reads give), equal to the others'
        apart = {
            g: {MessageQueue(q.topic, q.broker_name, q.queue_id): w for q, w in t.items()} for g, t in tables.items()
        }
        assert groups_lag_ms(admin_ctx, apart) == alone
        assert groups_lag_ms(admin_ctx, apart, position_ages(admin_ctx, tables)) == alone
        assert all(v is not None and v > 0 for g, v in shared.items() if g != "idle")
        assert _spans([0, 1, 5, 31, 32, 33, 70, 99]) == [[0, 1, 5, 31], [32, 33], [70, 99]]
    finally:
        admin_ctx.close()


def _without_clock(doc: dict[str, Any]) -> dict[str, Any]:
    """A -g document without the figures that depend on the instant of the read (and without
    its schema name, which a group's document inside several groups' does not repeat)."""
    return {
        **{k: v for k, v in doc.items() if k not in ("lag_time_ms", "schema")},
        "queues": [{k: v for k, v in q.items() if k != "lag_time_ms"} for q in doc["queues"]],
    }


def test_several_groups_are_each_group_alone_in_every_output(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80, span_ms=HOUR_MS, groups={"a": None, "b": -1})
    alone = {g: cli("consumerProgress", "-n", store.address, "-g", g, "--json").json() for g in ("a", "b")}
    both = cli("consumerProgress", "-n", store.address, "-g", "b,a", "--json")
    assert both.code == 0, both.stderr
    doc: Any = both.json()
    assert [r["group"] for r in doc["results"]] == ["b", "a"]  # in the order named
    assert [_without_clock(r) for r in doc["results"]] == [_without_clock(alone[g]) for g in ("b", "a")]

    table = cli("consumerProgress", "-n", store.address, "-g", "a,b")
    lines = table.stdout.splitlines()
    assert lines[0] == "2 consumer groups" and lines[1].split()[:3] == ["Group", "Topic", "Broker"]
    rows = [line.split() for line in lines if line.split()[:2] in (["a", "TopicTest"], ["b", "TopicTest"])]
    assert Counter(r[0] for r in rows) == {"a": 8, "b": 8}
    assert "a: Consume Diff Total: 0" in table.stdout and "b: Consume Diff Total: 80" in table.stdout

    java = cli("consumerProgress", "-n", store.address, "-g", "a,b", "--output", "java").stdout
    blocks = java.split("#Consumer Group: ")[1:]
    assert [b.splitlines()[0] for b in blocks] == ["a", "b"]
    assert "Consume Diff Total: 0" in blocks[0] and "Consume Diff Total: 80" in blocks[1]

    from prometheus_client.parser import text_string_to_metric_families

    prom = cli("consumerProgress", "-n", store.address, "-g", "a,b", "--output", "prometheus").stdout
    diffs = {
        s.labels["group"]: s.value
        for f in text_string_to_metric_families(prom)
        for s in f.samples
        if s.name == "mqadmin_group_diff"
    }
    assert diffs == {"a": 0, "b": 80}


def test_several_groups_in_check_mode(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"a": None, "b": -1, "c": -1})
    r = cli("consumerProgress", "-n", store.address, "-g", "a,b,c", "--max-lag", "10", "--json")
    assert r.code == 3
    assert r.stderr.strip().splitlines() == [
        "mqadmin: error: b: Diff Total 80 > --max-lag 10; c: Diff Total 80 > --max-lag 10"
    ]
    assert [g["diff_total"] for g in r.json()["results"]] == [0, 80, 80]  # type: ignore[index]
    assert cli("consumerProgress", "-n", store.address, "-g", "a,b", "--max-lag", "80").code == 0


def test_several_groups_with_an_unknown_one_exit_2_with_one_line(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=8, groups={"a": None, "b": -1})
    r = cli("consumerProgress", "-n", store.address, "-g", "a,nope,b,gone", "--json")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "mqadmin: error: 2 of 4 groups of -g: unknown consumer group 'nope': it has no offsets on any broker; "
        "unknown consumer group 'gone': it has no offsets on any broker"
    ]
    for args, message in [
        (("-g", "a,,b"), "-g 'a,,b': groups are named once each, separated by commas"),
        (("-g", "a,b,a"), "-g 'a,b,a': groups are named once each"),
        (("-g", "a,b", "--local-store", str(tmp_path)), "--local-store reads one group's offsets: give -g one name"),
        (("-g", "a,b c"), "-g 'b c'"),
    ]:
        r = cli("consumerProgress", "-n", store.address, *args)
        assert r.code == 2 and r.stdout == "" and message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
