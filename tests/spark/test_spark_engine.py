"""The Spark engine runs the same plan as the local engine and produces the same output."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mqadmin.admin import Admin, connect
from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import Message
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.replay.local import Checkpoint, run_local
from mqadmin.replay.planner import Plan, plan_window, select_queues
from mqadmin.replay.records import read_records
from mqadmin.replay.sinks import Target, open_sink, parse_target
from mqadmin.replay.worker import MessageFilter

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One small session for the module: two cores, no UI, one shuffle partition."""
    from mqadmin.spark.engine import build_session

    session = build_session("local[2]", {"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("spark") / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "T", 1600, T0, T0 + 40, queues_per_broker=2)  # 10 messages per ms per queue
    broker = cluster.brokers["broker-a"]
    for i in range(6):  # bodies that are not UTF-8 take the body_base64 path
        broker.put_message(Message("T", b"\xff\x00" * i, {"TAGS": "TagA"}, queue_id=i % 2), store_timestamp=T0 + 20)
    for name in ("CopyLocal", "CopySpark", "CopyExec", "CopyRate", "CopyRateExec"):
        cluster.create_topic(name, 2)
    cluster.create_topic("D", 2)  # one message in seven stored twice (a producer's retry)
    brokers = list(cluster.brokers.values())
    for i in range(300):
        msg = Message("D", f"d{i}".encode(), {"TAGS": "TagA", "UNIQ_KEY": new_uniq_key()}, queue_id=i % 2)
        brokers[i % 2].put_message(msg, store_timestamp=T0 + i // 10)
        if i % 7 == 3:
            again = Message("D", msg.body, dict(msg.properties), queue_id=(i + 1) % 2)
            brokers[(i + 1) % 2].put_message(again, store_timestamp=T0 + i // 10)
    cluster.create_topic("Born", 2)  # born times out of store order; one in nine born 2 s early
    for i in range(300):
        born = T0 + i * 10 + (-2000 if i % 9 == 4 else (i * 37) % 301 - 150)
        msg = Message("Born", f"b{i}".encode(), {"TAGS": "TagA"}, queue_id=i % 2, born_timestamp=born)
        brokers[i % 2].put_message(msg, store_timestamp=T0 + i * 10)
    for b in cluster.brokers.values():
        commit_at_time(b, "sms", "T", None)
        commit_at_time(b, "billing", "T", None)
    cluster.close()
    return f"mock://{root}"


def make_plan(address: str, begin: int = T0 + 5, end: int = T0 + 33, slice_size: int = 60) -> Plan:
    admin = connect(address, read_only=True)
    try:
        return plan_window(admin, admin.topic_route("T").message_queues(), begin, end, slice_size=slice_size)
    finally:
        admin.close()


def run_both(store: str, tmp_path: Path, scheme: str, flt: MessageFilter, plan: Plan) -> tuple[Path, Path]:

    local, remote = tmp_path / f"local.{scheme}", tmp_path / f"spark.{scheme}"
    admin = connect(store, read_only=True)
    try:
        run_local(admin, plan, flt, open_sink(parse_target(f"{scheme}:{local}")))
    finally:
        admin.close()
    return local, remote


@pytest.mark.parametrize("scheme", ["jsonl", "parquet"])
def test_file_sinks_match_the_local_engine(spark: Any, store: str, tmp_path: Path, scheme: str) -> None:
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end, frozenset({"TagA", "TagB"}))
    local, remote = run_both(store, tmp_path, scheme, flt, plan)
    outcome = run_replay(plan, store, flt, parse_target(f"{scheme}:{remote}"), spark=spark)
    assert remote.is_dir() and (remote / "_SUCCESS").exists()
    assert any(p.name == "queue_id=1" for p in (remote / "broker=broker-b").iterdir())  # partitioned by queue
    want = list(read_records(local))
    assert list(read_records(remote)) == want and len(want) > 500
    assert outcome.written == len(want) and outcome.complete
    assert sum(s.scanned for s in outcome.stats.values()) == plan.total
    if scheme == "jsonl":  # the very same lines, only spread over per-queue files
        spark_lines = sorted(ln for f in remote.rglob("part-*") for ln in f.read_text().splitlines())
        assert spark_lines == sorted(local.read_text().splitlines())


def test_sql_filter_selects_the_same_on_spark(spark: Any, store: str, tmp_path: Path) -> None:
    """--sql travels to the executors as text and keeps exactly what the local engine keeps."""
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end, sql="TAGS IN ('TagA', 'TagC') AND KEYS ENDSWITH '7'")
    local, remote = run_both(store, tmp_path, "jsonl", flt, plan)
    outcome = run_replay(plan, store, flt, parse_target(f"jsonl:{remote}"), spark=spark)
    want = list(read_records(local))
    assert list(read_records(remote)) == want and outcome.written == len(want) > 20
    assert all(r["tags"] in ("TagA", "TagC") and r["keys"].endswith("7") for r in want)


def test_dedup_gives_the_local_engines_answer(spark: Any, store: str, tmp_path: Path) -> None:
    """Spark finds the later occurrences first (one more pass) and drops exactly those."""
    from mqadmin.spark.engine import run_replay

    admin = connect(store, read_only=True)
    try:
        plan = plan_window(admin, admin.topic_route("D").message_queues(), T0, T0 + 40, slice_size=25)
        local = tmp_path / "local.jsonl"
        mine = run_local(
            admin, plan, MessageFilter(plan.begin, plan.end), open_sink(parse_target(f"jsonl:{local}")), dedup=True
        )
    finally:
        admin.close()
    remote = tmp_path / "spark.jsonl"
    outcome = run_replay(
        plan, store, MessageFilter(plan.begin, plan.end), parse_target(f"jsonl:{remote}"), spark=spark, dedup=True
    )
    want = list(read_records(local))
    assert sorted(read_records(remote), key=lambda r: (r["broker"], r["queue_id"], r["queue_offset"])) == want
    assert len({r["uniq_key"] for r in want}) == len(want) == 300 and outcome.written == 300
    dropped = sum(s.duplicates for s in outcome.stats.values())
    assert dropped == sum(s.duplicates for s in mine.stats.values()) == 300 // 7 + (300 % 7 > 3)


def test_born_time_window_gives_the_local_engines_answer(spark: Any, store: str, tmp_path: Path) -> None:
    """--time-field born: the widened store-time plan, kept by born time, on the executors; the
    count of messages read with a born time beyond the slack is the same too."""
    from mqadmin.spark.engine import run_replay

    begin, end, slack = T0 + 1000, T0 + 2000, 300
    admin = connect(store, read_only=True)
    try:
        plan = plan_window(admin, admin.topic_route("Born").message_queues(), begin - slack, end + slack, slice_size=20)
    finally:
        admin.close()
    flt = MessageFilter(plan.begin, plan.end, time_field="born", field_begin=begin, field_end=end)
    local, remote = run_both(store, tmp_path, "jsonl", flt, plan)
    outcome = run_replay(plan, store, flt, parse_target(f"jsonl:{remote}"), spark=spark)
    want = list(read_records(local))
    got = sorted(read_records(remote), key=lambda r: (r["broker"], r["queue_id"], r["queue_offset"]))
    assert got == want and outcome.written == len(want) > 50
    assert all(begin <= r["born_timestamp"] < end for r in want)
    assert any(r["store_timestamp"] >= end for r in want) and any(r["store_timestamp"] < begin for r in want)
    stragglers = sum(s.outside for s in outcome.stats.values())
    assert stragglers == sum(1 for i in range(70, 230) if i % 9 == 4) > 0  # stored in the read window


def test_stdout_is_identical_and_in_order(spark: Any, store: str) -> None:
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store)
    flt = MessageFilter(plan.begin, plan.end, None, None)
    local, remote = io.StringIO(), io.StringIO()
    admin = connect(store, read_only=True)
    try:
        run_local(admin, plan, flt, open_sink(Target("stdout"), stdout=local))
    finally:
        admin.close()
    run_replay(plan, store, flt, Target("stdout"), spark=spark, stdout=remote)
    assert remote.getvalue() == local.getvalue() and local.getvalue().count("\n") == plan.total


def copies(admin: Admin, topic: str) -> list[tuple[str, str, bytes]]:
    out = []
    for mq in admin.topic_route(topic).message_queues():
        for m in admin.pull(mq, 0, 10_000).messages:
            out.append((m.properties["MQADMIN_ORIGIN_BROKER"], m.properties["MQADMIN_ORIGIN_QUEUE_OFFSET"], m.body))
    return sorted(out)


def test_topic_and_group_sinks_from_an_embedded_store(spark: Any, store: str) -> None:
    """Executors read the store read-only; the driver, which holds the writer, sends."""
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store, T0 + 10, T0 + 12)
    flt = MessageFilter(plan.begin, plan.end)
    admin = connect(store)
    try:
        run_local(admin, plan, flt, open_sink(Target("topic", "CopyLocal"), admin=admin))
        run_replay(plan, store, flt, Target("topic", "CopySpark"), spark=spark, admin=admin)
        assert copies(admin, "CopySpark") == copies(admin, "CopyLocal") and len(copies(admin, "CopyLocal")) == 80
        billing = admin.consume_stats("billing", "T").offsets
        run_replay(plan, store, flt, Target("group", "sms"), spark=spark, admin=admin)
        retry = [
            m
            for mq in admin.topic_route(RETRY_PREFIX + "sms").message_queues()
            for m in admin.pull(mq, 0, 999).messages
        ]
        assert len(retry) == 80 and admin.consume_stats("billing", "T").offsets == billing
    finally:
        admin.close()


def test_executors_send_when_they_can_reach_the_broker(spark: Any, store: str) -> None:
    """The path a real cluster takes: each executor opens its own (writable) connection and sends."""
    from mqadmin.spark import jobs

    admin = connect(store, read_only=True)
    try:
        queues = select_queues(admin.topic_route("T").message_queues(), ["broker-a"], [0])
        plan = plan_window(admin, queues, T0 + 10, T0 + 12, slice_size=1000)
    finally:
        admin.close()
    flt = MessageFilter(plan.begin, plan.end)
    got = jobs.send(spark, plan.slices, jobs.ConnectSpec(store), flt, "topic", "CopyExec").collect()
    assert [(i, s["written"]) for i, s in got] == [(0, plan.total)]
    admin = connect(store, read_only=True)
    try:
        assert len(copies(admin, "CopyExec")) == plan.total == 20
    finally:
        admin.close()


def test_rate_paces_driver_and_executor_sends(spark: Any, store: str) -> None:
    """--rate on Spark: one schedule where the driver sends, a share per sending executor."""
    import time

    from mqadmin.spark import jobs
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store, T0 + 10, T0 + 13)  # about 120 messages on 4 queues
    admin = connect(store)
    try:
        t = time.monotonic()
        outcome = run_replay(
            plan, store, MessageFilter(plan.begin, plan.end), parse_target("topic:CopyRate"), spark=spark,
            admin=admin, rate=100,
        )  # fmt: skip
        elapsed = time.monotonic() - t
        assert outcome.written == plan.total == len(copies(admin, "CopyRate")) > 100
        assert elapsed >= (plan.total - 1) / 100
    finally:
        admin.close()
    admin = connect(store, read_only=True)
    try:  # one queue: one sending task (an embedded store takes one writer at a time)
        queues = select_queues(admin.topic_route("T").message_queues(), ["broker-a"], [1])
        exec_plan = plan_window(admin, queues, T0 + 10, T0 + 12, slice_size=1000)
    finally:
        admin.close()
    t = time.monotonic()
    sent = jobs.send(
        spark, exec_plan.slices, jobs.ConnectSpec(store), MessageFilter(exec_plan.begin, exec_plan.end), "topic",
        "CopyRateExec", rate=10,
    ).collect()  # fmt: skip
    assert sum(s["written"] for _, s in sent) == exec_plan.total == 20
    assert time.monotonic() - t >= (exec_plan.total - 1) / 10
    # tasks that send at once share the rate
    assert [jobs.rate_share(12, n, 4) for n in (1, 3, 8)] == [12, 4, 3] and jobs.rate_share(None, 2, 2) is None


def test_checkpointed_waves_resume_without_duplicates(spark: Any, store: str, tmp_path: Path) -> None:
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store, slice_size=40)
    flt = MessageFilter(plan.begin, plan.end)
    local, remote = run_both(store, tmp_path, "jsonl", flt, plan)
    args = {"test": "waves"}
    cp = Checkpoint.create(tmp_path / "cp", args, plan, "spark")

    def stop_after_first(done: int, total: int) -> None:
        raise KeyboardInterrupt

    target = parse_target(f"jsonl:{remote}")
    with pytest.raises(KeyboardInterrupt):
        run_replay(plan, store, flt, target, spark=spark, checkpoint=cp, wave_size=5, on_wave=stop_after_first)
    loaded = Checkpoint.load(tmp_path / "cp", args)
    assert loaded is not None and len(loaded.done) == 5 and not loaded.complete
    outcome = run_replay(plan, store, flt, target, spark=spark, checkpoint=loaded, wave_size=5)
    assert outcome.resumed == 5 and outcome.complete
    assert list(read_records(remote)) == list(read_records(local))


@pytest.mark.parametrize("recorded", [0, 2], ids=["none-recorded", "part-recorded"])
def test_a_wave_committed_but_not_fully_recorded_is_not_written_twice(
    spark: Any, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: int
) -> None:
    """Killed after a wave's files are in place but before all its slices are in the checkpoint:
    the resumed run must not add those messages a second time."""
    from mqadmin.spark.engine import run_replay

    plan = make_plan(store, slice_size=40)
    flt = MessageFilter(plan.begin, plan.end)
    local, remote = run_both(store, tmp_path, "jsonl", flt, plan)
    args = {"test": f"torn-{recorded}"}
    cp = Checkpoint.create(tmp_path / "cp", args, plan, "spark")
    real_append = Checkpoint._append
    slices: list[int] = []

    def killed_mid_record(self: Checkpoint, *entries: dict[str, Any]) -> None:
        for entry in entries:  # line by line, as a crash would leave them
            if "slice" in entry:
                if len(slices) == 5 + recorded:  # the second wave: committed, then killed recording it
                    raise KeyboardInterrupt
                slices.append(entry["slice"]["index"])
            real_append(self, entry)

    target = parse_target(f"jsonl:{remote}")
    monkeypatch.setattr(Checkpoint, "_append", killed_mid_record)
    with pytest.raises(KeyboardInterrupt):
        run_replay(plan, store, flt, target, spark=spark, checkpoint=cp, wave_size=5)
    monkeypatch.setattr(Checkpoint, "_append", real_append)
    loaded = Checkpoint.load(tmp_path / "cp", args)
    assert loaded is not None and len(loaded.done) == 5 + recorded
    outcome = run_replay(plan, store, flt, target, spark=spark, checkpoint=loaded, wave_size=5)
    assert outcome.complete
    assert list(read_records(remote)) == list(read_records(local))


def test_bulk_search_matches_the_broker(spark: Any, store: str) -> None:
    from mqadmin.spark import jobs

    admin = connect(store, read_only=True)
    try:
        queries = [
            (q.topic, q.broker_name, q.queue_id, T0 + ms)
            for q in admin.topic_route("T").message_queues()
            for ms in (-1, 7, 21, 50)
        ]
        want = [admin.search_offset(connect_mq(q), q[3]) for q in queries]
    finally:
        admin.close()
    got = jobs.bulk_search(spark, jobs.ConnectSpec(store), queries)
    assert [g[:4] for g in got] == queries and [g[4] for g in got] == want


def connect_mq(q: tuple[str, str, int, int]) -> Any:
    from mqadmin.model import MessageQueue

    return MessageQueue(q[0], q[1], q[2])


def test_job_errors_become_one_line() -> None:
    from mqadmin.spark.engine import job_error

    text = "An error occurred\n  File x\nmqadmin.errors.StoreError: mock store /x is in use\n\tat org.apache..."
    assert job_error(RuntimeError(text)) == "mqadmin.errors.StoreError: mock store /x is in use"


def test_code_zip_imports_without_an_install(tmp_path: Path) -> None:
    """What executors get on a cluster where mqadmin is not installed."""
    from mqadmin.spark.engine import code_zip

    zipped = code_zip(tmp_path / "code.zip")
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import mqadmin.spark.jobs, mqadmin.replay.worker, mqadmin.admin;"
        "print(mqadmin.spark.jobs.__file__)"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(zipped)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(zipped))


def test_the_code_zip_is_built_once_per_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster session ships the same archive until a module changes (no rebuild per run)."""
    import zipfile

    from mqadmin.spark import engine

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("A = 1\n")
    monkeypatch.setattr(engine, "_code_files", lambda: [("mqadmin/a.py", src / "a.py")])
    first = engine.cached_code_zip(tmp_path / "cache")
    stamp = first.stat().st_mtime_ns
    again = engine.cached_code_zip(tmp_path / "cache")
    assert again == first and again.stat().st_mtime_ns == stamp
    (src / "a.py").write_text("A = 2\n")
    changed = engine.cached_code_zip(tmp_path / "cache")
    assert changed != first and changed.exists() and first.exists()
    with zipfile.ZipFile(changed) as zf:
        assert zf.read("mqadmin/a.py") == b"A = 2\n"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([first.name, changed.name])


def test_cli_spark_engine_matches_local(store: str, tmp_path: Path) -> None:
    """The whole command with --engine spark in its own process (its own JVM), against local."""
    args = ["rangeReplay", "-n", store, "-t", "T", "-b", str(T0 + 3), "-e", str(T0 + 30), "--tag", "TagC"]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "mqadmin", *args, *extra, "--json"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=240)

    local = run("--to", f"jsonl:{tmp_path / 'l.jsonl'}")
    remote = run(
        "--to",
        f"parquet:{tmp_path / 's'}",
        "--engine",
        "spark",
        "--spark-master",
        "local[1]",
        "--spark-conf",
        "spark.sql.shuffle.partitions=1",
    )
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    assert json.loads(remote.stdout)["engine"] == "spark"
    assert json.loads(remote.stdout)["written"] == json.loads(local.stdout)["written"] > 0
    assert list(read_records(tmp_path / "s")) == list(read_records(tmp_path / "l.jsonl"))
