"""Files the executors write themselves: Spark's layout and types, the local engine's bytes, and a
commit that only ever adds what the accepted task attempts wrote."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mqadmin.spark import files, jobs

from mqadmin.admin import connect
from mqadmin.errors import MqadminError, UsageError
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import Plan, plan_window
from mqadmin.replay.records import read_records
from mqadmin.replay.sinks import open_sink, parse_target
from mqadmin.replay.worker import MessageFilter

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from mqadmin.spark.engine import build_session

    session = build_session("local[2]", {"spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("files") / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "T", 800, T0, T0 + 40, queues_per_broker=2)
    cluster.close()
    return f"mock://{root}"


def make_plan(address: str, slice_size: int = 70) -> Plan:
    admin = connect(address, read_only=True)
    try:
        return plan_window(admin, admin.topic_route("T").message_queues(), T0 + 5, T0 + 33, slice_size=slice_size)
    finally:
        admin.close()


def local_output(store: str, plan: Plan, flt: MessageFilter, path: Path) -> Path:
    admin = connect(store, read_only=True)
    try:
        run_local(admin, plan, flt, open_sink(parse_target(f"{path.suffix[1:]}:{path}")))
    finally:
        admin.close()
    return path


def test_partition_folders_are_escaped_as_spark_escapes_them() -> None:
    assert files.partition_folder("broker-a", 3) == "broker=broker-a/queue_id=3"
    assert files.partition_folder("a:b/c=d%", 0) == "broker=a%3Ab%2Fc%3Dd%25/queue_id=0"


def test_spark_reads_the_executors_parquet_as_its_own_writers(spark: Any, store: str, tmp_path: Path) -> None:
    """The same replay through the executors' writer (a path) and Spark's (a file:// URI):
    Spark reads the same schema and rows from both; both hold the local engine's records."""
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end)
    own, theirs = tmp_path / "own", tmp_path / "theirs"
    notes: list[str] = []
    run_replay(plan, store, flt, parse_target(f"parquet:{own}"), spark=spark, note=notes.append)
    run_replay(plan, store, flt, parse_target(f"parquet:{theirs.as_uri()}"), spark=spark, note=notes.append)
    assert notes == []  # a URI always takes Spark's writer: nothing to say
    a, b = spark.read.parquet(str(own)), spark.read.parquet(str(theirs))
    assert a.schema == b.schema

    def rows(df: Any) -> list[tuple[Any, ...]]:
        return sorted(
            tuple(sorted(r.asDict()[k].items()) if k == "properties" else r[k] for k in df.columns)
            for r in df.collect()
        )

    assert rows(a) == rows(b) and len(rows(a)) == plan.total
    want = list(read_records(local_output(store, plan, flt, tmp_path / "l.parquet")))
    assert list(read_records(own)) == want
    assert sorted(p.name for p in own.iterdir()) == ["_SUCCESS", "broker=broker-a", "broker=broker-b"]
    assert all(f.name.endswith(".c000.snappy.parquet") for f in own.rglob("part-*"))


def test_overwrite_replaces_and_append_adds(spark: Any, store: str, tmp_path: Path) -> None:
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end)
    local = local_output(store, plan, flt, tmp_path / "l.jsonl")
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run\n")
    killed = out / "_temporary" / "a-job-whose-driver-was-killed" / "broker=broker-a" / "queue_id=0"
    killed.mkdir(parents=True)
    (killed / "part-00000-x.c000.txt").write_text("staged, never committed\n")
    with pytest.raises(UsageError, match="exists; pass --overwrite"):
        run_replay(plan, store, flt, parse_target(f"jsonl:{out}"), spark=spark)
    assert sorted(p.name for p in out.iterdir()) == ["_temporary", "stale.txt"]  # refused before anything changed
    run_replay(plan, store, flt, parse_target(f"jsonl:{out}"), spark=spark, overwrite=True)
    assert not (out / "stale.txt").exists() and not (out / "_temporary").exists()
    lines = sorted(ln for f in out.rglob("part-*") for ln in f.read_text().splitlines())
    assert lines == sorted(local.read_text().splitlines())
    written = jobs.context_of(spark)
    got = files.write(written, plan.slices[:2], jobs.ConnectSpec(store), flt, "jsonl", out, "append")
    assert got is not None and sorted(got) == [s.index for s in plan.slices[:2]]
    assert len(list(out.rglob("part-*"))) == len(plan.slices) + 2


def test_a_failed_job_changes_nothing(spark: Any, tmp_path: Path) -> None:
    """Executors that cannot reach the broker: the job fails, no output folder is left."""
    from mqadmin.spark.engine import run_replay

    plan = make_plan_for_unreachable()
    out = tmp_path / "never"
    with pytest.raises(MqadminError, match="the Spark job failed"):
        run_replay(
            plan,
            jobs.ConnectSpec("127.0.0.1:1", timeout=1.0),
            MessageFilter(0, 1 << 62),
            parse_target(f"jsonl:{out}"),
            spark=spark,
        )
    assert not out.exists()


def make_plan_for_unreachable() -> Plan:
    from mqadmin.replay.planner import QueueRange, cut

    ranges = (QueueRange("broker-a", 0, 0, 10, 0, 10),)
    return Plan("T", 0, 1 << 62, ranges, cut("T", ranges, 5))


def test_a_folder_that_cannot_be_made_is_a_usage_error(spark: Any, store: str, tmp_path: Path) -> None:
    from mqadmin.spark.engine import run_replay

    (tmp_path / "file").write_text("x")
    plan = make_plan(store)
    with pytest.raises(UsageError, match="cannot write to .*Not a directory"):
        run_replay(
            plan, store, MessageFilter(0, 1 << 62), parse_target(f"jsonl:{tmp_path / 'file' / 'out'}"), spark=spark
        )


def test_only_the_accepted_attempt_is_committed(store: str, tmp_path: Path) -> None:
    """Two attempts of one task (a retry, a speculative copy) both write; the commit moves in the
    files of the one whose result Spark kept, and nothing else appears in the output."""
    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end)
    out = tmp_path / "out"
    files.prepare(out, "errorifexists")
    job = files.FileJob("jsonl", str(out / "_temporary" / "job"), "job")
    doc = plan.slices[1].to_json()
    attempts = [
        list(files.files_partition(1, [doc], spec=jobs.ConnectSpec(store), filter_doc=flt.to_json(), job=job))
        for _ in range(2)
    ]
    staged = [a[0] for a in attempts]
    assert all(s is not None and len(s[2]) == 1 for s in staged)
    kept = staged[1]
    assert kept is not None
    files.commit(out, kept[2], "errorifexists", out / "_temporary" / "job")
    parts = [p for p in out.rglob("part-*") if "_temporary" not in p.relative_to(out).parts]
    assert [p.relative_to(out).as_posix() for p in parts] == [kept[2][0][1]]
    assert kept[1]["written"] == plan.slices[1].count == len(parts[0].read_text().splitlines())
    assert (out / "_SUCCESS").exists()
    first = staged[0]
    assert first is not None and os.path.exists(first[2][0][0])  # left for the cleanup


def test_executors_without_pyarrow_leave_parquet_to_sparks_writer(
    spark: Any, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An executor without pyarrow says so instead of writing; the driver then uses Spark's writer."""
    import importlib.util

    from mqadmin.spark.engine import run_replay

    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end)
    job = files.FileJob("parquet", str(tmp_path / "staging"), "job")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    got = list(
        files.files_partition(
            0, [plan.slices[0].to_json()], spec=jobs.ConnectSpec(store), filter_doc=flt.to_json(), job=job
        )
    )
    assert got == [None] and not (tmp_path / "staging").exists()
    monkeypatch.undo()
    monkeypatch.setattr(files, "write", lambda *a, **k: None)
    notes: list[str] = []
    out = tmp_path / "out"
    outcome = run_replay(plan, store, flt, parse_target(f"parquet:{out}"), spark=spark, note=notes.append)
    assert notes and "executors have no pyarrow" in notes[0]
    want = list(read_records(local_output(store, plan, flt, tmp_path / "l.parquet")))
    assert list(read_records(out)) == want and outcome.written == len(want)
    assert json.dumps(sorted(p.name for p in out.iterdir() if not p.name.startswith("."))) == json.dumps(
        ["_SUCCESS", "broker=broker-a", "broker=broker-b"]
    )
