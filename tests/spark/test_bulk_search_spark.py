"""queryOffset --engine spark: the same answers as the local engine, for store, born and property times."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mqadmin.admin import connect
from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.replay.search import (
    TimeField,
    earliest_per_queue,
    first_match_in_order,
    scan_slices,
)

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
PER_QUEUE = 40
TS = T0 + 200
PROP = "ORDER_TIME"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One small session for the module, as in test_spark_engine: two cores, no UI, one shuffle
    partition. The in-process CLI finds it running and uses it instead of starting a JVM."""
    from mqadmin.spark.engine import build_session

    session = build_session("local[2]", {"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "2"})
    yield session
    session.stop()


def born(qid: int, i: int) -> int:
    """Producers' clocks disagree: every 7th message was born 'late', so born times go backwards."""
    return T0 + i * 10 + (300 if (i + qid) % 7 == 3 else -2)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("bulk") / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "Orders", 160, T0, T0 + 400, queues_per_broker=2)
    cluster.create_topic("Born", 2)
    for broker in cluster.brokers.values():
        for i in range(PER_QUEUE):
            for qid in (0, 1):
                props = {PROP: str(T0 + 5 * i + 50 * qid)} if i % 3 else {}
                msg = Message("Born", b"x", props, queue_id=qid, born_timestamp=born(qid, i))
                broker.put_message(msg, store_timestamp=T0 + i * 10)
    for b in cluster.brokers.values():
        commit_at_time(b, "g1", "Orders", T0 + 100)
        commit_at_time(b, "g1", "Born", None)
        commit_at_time(b, "g2", "Born", T0 + 250)
    cluster.close()
    return f"mock://{root}"


def query(*args: str) -> tuple[dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["queryOffset", *args, "--json"], env=Env(stdout=out, stderr=err, stdin=io.StringIO()))
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue()), err.getvalue()


def without_engine(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "engine": None, "results": [{**r, "engine": None} for r in doc["results"]]}


def test_the_command_in_its_own_process(store: str) -> None:
    """What a user runs: no session yet, so the command builds one (local[1]) and stops it. First in
    the module, so that its JVM does not share the two cores with the module's session."""
    import subprocess
    import sys

    args = ["-n", store, "-t", "Born,Orders", "-s", str(TS), "--time-field", f"property:{PROP}"]
    cmd = [sys.executable, "-m", "mqadmin", "queryOffset", *args, "--json", "--engine", "spark"]
    proc = subprocess.run([*cmd, "--spark-master", "local[1]"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    local, _ = query(*args)
    assert without_engine(json.loads(proc.stdout)) == without_engine(local)


@pytest.mark.parametrize("field", ["store", "born", f"property:{PROP}"])
def test_cli_spark_matches_local(spark: Any, store: str, field: str) -> None:
    args = ["-n", store, "--all-topics", "-g", "g1,g2", "-s", str(TS), "--time-field", field, "--slice-size", "9"]
    local, _ = query(*args)
    remote, err = query(*args, "--engine", "spark")
    assert local["engine"] == "local" and remote["engine"] == "spark"
    assert "using the Spark session already running" in err
    assert without_engine(remote) == without_engine(local)
    assert [(r["topic"], r["group"]) for r in local["results"]] == [("Born", "g1"), ("Born", "g2"), ("Orders", "g1")]
    offsets = [q["offset_at_time"] for r in local["results"] for q in r["queues"]]
    assert 0 < min(offsets) and any(o < PER_QUEUE for o in offsets)  # not trivially min or max


def test_cli_spark_over_tcp(spark: Any, store: str, tmp_path: Path) -> None:
    """Executors open their own remoting connections to the (loopback) mock server."""
    from mqadmin.mock.server import MockServer

    copy = tmp_path / "served"
    shutil.copytree(store.removeprefix("mock://"), copy)
    server = MockServer(MockCluster(copy, writable=True), namesrv_port=0).start()
    try:
        args = ["-n", server.namesrv_addr, "-t", "Born", "-s", str(TS), "--time-field", "born", "--slice-size", "16"]
        local, _ = query(*args)
        remote, _ = query(*args, "--engine", "spark")
        assert {**remote, "engine": "local"} == local and remote["engine"] == "spark"
        embedded, _ = query("-n", store, *args[2:])
        assert embedded["queues"] == local["queues"]
    finally:
        server.stop()


def test_each_slice_stops_at_its_own_first_match(spark: Any, store: str) -> None:
    """Spark scans every slice; the earliest hit per queue is what a scan in order finds first."""
    from mqadmin.spark import jobs

    field = TimeField.parse("born")
    admin = connect(store, read_only=True)
    try:
        queues = admin.topic_route("Born").message_queues()
        slices = scan_slices([(mq, admin.min_offset(mq), admin.max_offset(mq)) for mq in queues], 5)
        hits = jobs.first_matches(spark, jobs.ConnectSpec(store), slices, field, TS)
        assert len(hits) == len(slices) == 4 * PER_QUEUE // 5
        want = {mq: first_match_in_order(admin, [s for s in slices if s.mq == mq], field, TS) for mq in queues}
    finally:
        admin.close()
    assert sum(h is not None for h in hits) > len(queues)  # later slices match too; only the first counts
    assert earliest_per_queue(slices, hits) == want
