"""rangeReplay end to end against the embedded mock: windows, filters, sinks, resume, bad input."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult

from mqadmin.admin import connect
from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.replay.records import read_records

T0 = 1_700_000_000_000
Run = Callable[..., CliResult]


def make_store(root: Path, count: int, span_ms: int, version: str = "5.3.3", groups: tuple[str, ...] = ()) -> str:
    cluster = MockCluster.create(root, version=version)
    fill_topic(cluster, "T", count, T0, T0 + span_ms, queues_per_broker=2)
    cluster.create_topic("Copy", 2)
    for broker in cluster.brokers.values():
        for g in groups:
            commit_at_time(broker, g, "T", None)
    cluster.close()
    return f"mock://{root}"


@pytest.fixture(scope="module", params=("4.9.8", "5.3.3"))
def dense(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """2000 messages over 20 ms: about 25 per millisecond on each of 4 queues."""
    return make_store(tmp_path_factory.mktemp("dense") / "s", 2000, 20, request.param)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return make_store(tmp_path / "store", 400, 40, groups=("sms", "billing"))


def stored(address: str, topic: str = "T") -> list[Message]:
    admin = connect(address, read_only=True)
    try:
        out: list[Message] = []
        for mq in admin.topic_route(topic).message_queues():
            out += admin.pull(mq, 0, 100_000).messages
        return sorted(out, key=lambda m: (m.broker_name, m.queue_id, m.queue_offset))
    finally:
        admin.close()


def window(address: str, begin: int, end: int) -> list[tuple[str, int, int]]:
    return [(m.broker_name, m.queue_id, m.queue_offset) for m in stored(address) if begin <= m.store_timestamp < end]


def keys(path: Path) -> list[tuple[str, int, int]]:
    return [(r["broker"], r["queue_id"], r["queue_offset"]) for r in read_records(path)]


@pytest.mark.parametrize(("lo", "hi"), [(5, 12), (0, 1), (19, 21)])
def test_window_is_exact_at_both_edges(dense: str, tmp_path: Path, cli_proc: Run, lo: int, hi: int) -> None:
    out = tmp_path / "w.jsonl"
    r = cli_proc("rangeReplay", "-n", dense, "-t", "T", "-b", str(T0 + lo), "-e", str(T0 + hi), "--to", f"jsonl:{out}")
    assert r.code == 0, r.stderr
    want = window(dense, T0 + lo, T0 + hi)
    assert keys(out) == want and len(want) > 50
    times = [rec["store_timestamp"] for rec in read_records(out)]
    assert T0 + lo in times and T0 + hi not in times  # begin included, end excluded
    assert f"Wrote {len(want)} message(s)" in r.stdout


def test_dry_run_prints_the_plan_only(dense: str, tmp_path: Path, cli: Run) -> None:
    out = tmp_path / "never.jsonl"
    r = cli(
        "rangeReplay",
        "-n",
        dense,
        "-t",
        "T",
        "-b",
        str(T0 + 3),
        "-e",
        str(T0 + 9),
        "--to",
        f"jsonl:{out}",
        "--dry-run",
        "--json",
    )
    assert r.code == 0
    doc = json.loads(r.stdout)
    assert doc["dry_run"] is True and doc["written"] is None and not out.exists()
    assert doc["total_messages"] == len(window(dense, T0 + 3, T0 + 9))
    assert sum(q["end_offset"] - q["start_offset"] for q in doc["queues"]) == doc["total_messages"]
    assert (doc["begin"], doc["end"]) == (T0 + 3, T0 + 9) and doc["begin_iso"].startswith("2023-11-")


def test_tag_and_key_filters(store: str, tmp_path: Path, cli: Run) -> None:
    out = tmp_path / "t.jsonl"
    r = cli(
        "rangeReplay",
        "-n",
        store,
        "-t",
        "T",
        "-b",
        str(T0),
        "-e",
        str(T0 + 40),
        "--tag",
        "TagA || TagC",
        "--to",
        f"jsonl:{out}",
    )
    assert r.code == 0, r.stderr
    every = stored(store)
    want = [
        (m.broker_name, m.queue_id, m.queue_offset)
        for m in every
        if m.tags in ("TagA", "TagC") and m.store_timestamp < T0 + 40
    ]
    assert keys(out) == want and 0 < len(want) < len(every)
    r = cli("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 41), "--key", "order-17", "--json")
    assert r.code == 0
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [rec["keys"] for rec in lines] == ["order-17"]
    assert json.loads(r.stderr[r.stderr.index("{") :])["matched"] == 1  # the summary went to stderr


def test_stdout_sink_keeps_stdout_for_records(store: str, cli_proc: Run) -> None:
    r = cli_proc(
        "rangeReplay",
        "-n",
        store,
        "-t",
        "T",
        "-b",
        str(T0 + 10),
        "-e",
        str(T0 + 20),
        "--queue",
        "1",
        "--broker",
        "broker-b",
    )
    assert r.code == 0, r.stderr
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["broker"], x["queue_id"], x["queue_offset"]) for x in recs] == [
        k for k in window(store, T0 + 10, T0 + 20) if k[:2] == ("broker-b", 1)
    ]
    assert "Wrote" in r.stderr and "Replay of topic T" in r.stderr


def test_limit_takes_the_first_messages_in_queue_order(store: str, tmp_path: Path, cli: Run) -> None:
    out = tmp_path / "l.jsonl"
    r = cli(
        "rangeReplay",
        "-n",
        store,
        "-t",
        "T",
        "-b",
        str(T0),
        "-e",
        str(T0 + 40),
        "--limit",
        "30",
        "--slice-size",
        "7",
        "--to",
        f"jsonl:{out}",
    )
    assert r.code == 0 and "Stopped at --limit 30" in r.stdout
    assert keys(out) == window(store, T0, T0 + 40)[:30]


def test_parquet_sink_matches_jsonl(store: str, tmp_path: Path, cli: Run) -> None:
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0 + 5), "-e", str(T0 + 25))
    assert cli(*args, "--to", f"jsonl:{tmp_path / 'a.jsonl'}").code == 0
    assert cli(*args, "--to", f"parquet:{tmp_path / 'a.parquet'}").code == 0
    assert list(read_records(tmp_path / "a.jsonl")) == list(read_records(tmp_path / "a.parquet"))


def test_topic_sink_republishes_and_says_what_it_sent(store: str, cli_proc: Run) -> None:
    r = cli_proc(
        "rangeReplay",
        "-n",
        store,
        "-t",
        "T",
        "-b",
        str(T0 + 5),
        "-e",
        str(T0 + 10),
        "--to",
        "topic:Copy",
        "--yes",
        "--json",
    )
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    copies = stored(store, "Copy")
    assert doc["written"] == len(copies) == len(window(store, T0 + 5, T0 + 10))
    assert sorted(c.body for c in copies) == sorted(
        m.body for m in stored(store) if T0 + 5 <= m.store_timestamp < T0 + 10
    )
    assert {c.properties["MQADMIN_ORIGIN_TOPIC"] for c in copies} == {"T"}


def test_group_only_replay_leaves_other_groups_alone(store: str, cli_proc: Run) -> None:
    admin = connect(store, read_only=True)
    try:
        billing = admin.consume_stats("billing", "T").offsets
    finally:
        admin.close()
    r = cli_proc("rangeReplay", "-n", store, "-t", "T", "-b", str(T0 + 5), "-e", str(T0 + 10), "--to", "group:sms")
    assert r.code == 0, r.stderr
    assert "Re-delivered" in r.stdout
    retry = stored(store, RETRY_PREFIX + "sms")
    assert len(retry) == len(window(store, T0 + 5, T0 + 10)) > 0
    admin = connect(store, read_only=True)
    try:
        assert admin.consume_stats("billing", "T").offsets == billing  # no lag appeared for billing
        assert stored(store, RETRY_PREFIX + "billing") == []
    finally:
        admin.close()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("to", ["group:sms", "topic:Copy"])
def test_declined_prompt_is_cancelled_with_exit_4(store: str, to: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    args = ["rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--to", to]
    code = main(args, env=Env(stdout=out, stderr=err, stdin=_Tty("n\n")))
    assert code == 4, err.getvalue()
    assert err.getvalue().endswith("[y/N] mqadmin: cancelled, nothing changed\n") and "error" not in err.getvalue()
    assert "unthrottled (as fast as the broker takes them; --rate N limits it)?" in err.getvalue()
    assert stored(store, RETRY_PREFIX + "sms") == [] and stored(store, "Copy") == []


def test_unknown_group_and_topic_targets(store: str, cli: Run) -> None:
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5))
    r = cli(*args, "--to", "group:nobody")
    assert r.code == 2 and "unknown consumer group 'nobody'" in r.stderr
    r = cli(*args, "--to", "topic:Nowhere")
    assert r.code == 2 and "unknown topic 'Nowhere'" in r.stderr


# ---- resume ----


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_store(tmp_path_factory.mktemp("big") / "s", 16_000, 1000)


def interrupt_mid_run(address: str, out: Path, cp: Path, sig: int) -> subprocess.CompletedProcess[str]:
    """Start a checkpointed replay and send ``sig`` once a few slices are recorded."""
    cmd = [
        sys.executable,
        "-m",
        "mqadmin",
        "rangeReplay",
        "-n",
        address,
        "-t",
        "T",
        "-b",
        str(T0),
        "-e",
        str(T0 + 2000),
        "--to",
        f"jsonl:{out}",
        "--checkpoint",
        str(cp),
        "--slice-size",
        "40",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if cp.exists() and cp.read_text().count('"slice"') >= 5:
            break
        time.sleep(0.005)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    lines = cp.read_text().count('"slice"')
    assert 5 <= lines < 400, f"the run was not interrupted mid-way ({lines} slices recorded)"
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_resume_after_interruption_has_no_duplicate_and_no_gap(
    big: str, tmp_path: Path, sig: int, cli: Run, cli_proc: Run
) -> None:
    out, cp = tmp_path / "r.jsonl", tmp_path / "cp"
    killed = interrupt_mid_run(big, out, cp, sig)
    if sig == signal.SIGINT:
        assert killed.returncode == 130
        assert "run the same command again to resume" in killed.stderr and "Traceback" not in killed.stderr
    assert not out.exists()  # only the .partial is there until the replay finishes
    args = ("rangeReplay", "-n", big, "-t", "T", "-b", str(T0), "-e", str(T0 + 2000))
    r = cli_proc(*args, "--to", f"jsonl:{out}", "--checkpoint", str(cp), "--slice-size", "40", "--json")
    assert r.code == 0, r.stderr
    assert "resuming from checkpoint" in r.stderr and json.loads(r.stdout)["resumed_slices"] >= 5
    clean = tmp_path / "clean.jsonl"
    assert cli(*args, "--to", f"jsonl:{clean}").code == 0
    assert out.read_bytes() == clean.read_bytes()  # byte for byte: no duplicate, no gap, same order
    again = cli(*args, "--to", f"jsonl:{out}", "--checkpoint", str(cp), "--slice-size", "40")
    assert again.code == 0 and "Nothing to do" in again.stdout


@pytest.mark.parametrize(("sink", "flags"), [("jsonl", ()), ("jsonl", ("--overwrite",)), ("parquet", ())])
def test_killed_between_publish_and_checkpoint_resumes_to_the_exact_output(
    store: str, tmp_path: Path, cli: Run, cli_proc: Run, sink: str, flags: tuple[str, ...]
) -> None:
    """The window where the output is in place but the checkpoint does not say so yet: the
    process dies there (SIGKILL at a fault point), and every later run finishes, exactly."""
    if sink == "parquet":
        pytest.importorskip("pyarrow")
    out, cp, clean = tmp_path / f"r.{sink}", tmp_path / "cp", tmp_path / f"clean.{sink}"
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 30), "--slice-size", "40")
    assert cli(*args, "--to", f"{sink}:{clean}").code == 0
    run = (*args, "--to", f"{sink}:{out}", "--checkpoint", str(cp))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": "replay-published"})
    assert killed.code == -signal.SIGKILL
    assert out.read_bytes() == clean.read_bytes() or sink == "parquet"  # published...
    assert '"complete"' not in cp.read_text()  # ...and not recorded
    if sink == "parquet":  # killed while removing the parts, after the merged file was in place
        (tmp_path / f"r.{sink}.parts").mkdir()
    again = cli(*run, *flags, "--json")
    assert again.code == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["complete"] and doc["written"] == len(window(store, T0, T0 + 30)) and doc["written_this_run"] == 0
    assert "already in place" in again.stderr and "Finished" in " ".join(doc["notes"])
    assert keys(out) == keys(clean)
    assert not any(p.exists() for p in (tmp_path / f"r.{sink}.parts", tmp_path / f"r.{sink}.partial"))
    third = cli(*run)  # and from then on it is a finished replay
    assert third.code == 0 and "Nothing to do" in third.stdout
    with_overwrite = cli(*run, "--overwrite")
    assert with_overwrite.code == 0 and keys(out) == keys(clean)


def test_resume_whose_unfinished_output_is_gone_starts_over_when_told(store: str, tmp_path: Path, cli: Run) -> None:
    out, cp = tmp_path / "r.jsonl", tmp_path / "cp"
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 30), "--slice-size", "40")
    run = (*args, "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    assert cli(*run).code == 0
    lines = cp.read_text().splitlines()
    cp.write_text("\n".join(lines[:3]) + "\n")  # two slices recorded, then a crash...
    out.unlink()  # ...and no unfinished output left (r.jsonl.partial was removed by hand)
    refused = cli(*run)
    assert refused.code == 2 and "r.jsonl.partial) is gone; pass --overwrite to start over" in refused.stderr
    assert refused.stderr.count("\n") == 1
    over = cli(*run, "--overwrite", "--json")
    assert over.code == 0 and "starting over" in over.stderr, over.stderr
    assert json.loads(over.stdout)["resumed_slices"] == 0
    assert keys(out) == window(store, T0, T0 + 30)


def test_resumed_stdout_replay_reports_what_this_run_wrote(store: str, tmp_path: Path, cli: Run) -> None:
    cp = tmp_path / "cp"
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 30), "--slice-size", "40")
    first = cli(*args, "--checkpoint", str(cp))
    total = len(window(store, T0, T0 + 30))
    assert first.code == 0 and first.stdout.count("\n") == total
    lines = cp.read_text().splitlines()
    recorded = [json.loads(x) for x in lines[1:3]]
    earlier = sum(x["slice"]["written"] for x in recorded)
    cp.write_text("\n".join(lines[:3]) + "\n")  # stopped after two slices
    resumed = cli(*args, "--checkpoint", str(cp))
    assert resumed.code == 0
    assert resumed.stdout.count("\n") == total - earlier
    assert f"Wrote {total - earlier} message(s) to stdout" in resumed.stderr
    assert f"{earlier} more by the earlier run(s)" in resumed.stderr


def test_checkpoint_from_another_command_line_is_refused(store: str, tmp_path: Path, cli: Run) -> None:
    cp = tmp_path / "cp"
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--checkpoint", str(cp))
    assert cli(*args, "--to", f"jsonl:{tmp_path / 'a.jsonl'}").code == 0
    r = cli(*args, "--to", f"jsonl:{tmp_path / 'b.jsonl'}")
    assert r.code == 2 and "belongs to a different command line (differs in: to)" in r.stderr
    (tmp_path / "junk").write_text("hello\n")
    r = cli(*args[:-1], str(tmp_path / "junk"), "--to", f"jsonl:{tmp_path / 'c.jsonl'}")
    assert r.code == 2 and "not an mqadmin replay checkpoint" in r.stderr


# ---- bad input ----


def test_bad_windows(store: str, cli_proc: Run, cli: Run) -> None:
    base = ("rangeReplay", "-n", store, "-t", "T")
    r = cli_proc(*base, "-b", str(T0 + 10), "-e", str(T0 + 10))
    assert r.code == 2 and "the window is empty" in r.stderr and r.stdout == ""
    r = cli(*base, "-b", "1700000000", "-e", "now")
    assert r.code == 2 and "seconds" in r.stderr
    for b, e in ((T0 - 5000, T0), (T0 + 41, T0 + 5000)):
        r = cli(*base, "-b", str(b), "-e", str(e), "--json")
        assert r.code == 0 and r.stdout == ""
        assert "no message is stored in this window" in r.stderr


def test_unknown_topic_and_sink(store: str, cli_proc: Run, tmp_path: Path) -> None:
    r = cli_proc("rangeReplay", "-n", store, "-t", "Nope", "-b", str(T0), "-e", str(T0 + 5))
    assert r.code == 2 and "unknown topic 'Nope'" in r.stderr
    r = cli_proc("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--to", "kafka:x")
    assert r.code == 2 and "unknown --to 'kafka:x'" in r.stderr


def test_existing_output_needs_overwrite(store: str, tmp_path: Path, cli: Run) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text("precious\n")
    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--to", f"jsonl:{out}")
    r = cli(*args)
    assert r.code == 2 and "exists; pass --overwrite" in r.stderr and out.read_text() == "precious\n"
    assert cli(*args, "--overwrite").code == 0
    assert keys(out) == window(store, T0, T0 + 5)


def test_spark_engine_without_pyspark(store: str, cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # find_spec answers "not installed"
    r = cli("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--engine", "spark")
    assert r.code == 2 and "pip install 'mqadmin[spark]'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--engine", "auto")
    assert r.code == 0 and "engine auto: local" in r.stderr


def test_spark_engine_without_java(store: str, cli_proc: Run) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/nonexistent"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mqadmin",
            "rangeReplay",
            "-n",
            store,
            "-t",
            "T",
            "-b",
            str(T0),
            "-e",
            str(T0 + 5),
            "--engine",
            "spark",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and "Java 17+" in proc.stderr and "Traceback" not in proc.stderr


def test_spark_engine_refuses_limit(store: str, cli: Run) -> None:
    r = cli(
        "rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--engine", "spark", "--limit", "3"
    )
    assert r.code == 2 and "--limit runs on the local engine only" in r.stderr


def test_auto_engine_explains_its_choice(store: str, cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import mqadmin.commands._engine as command

    args = ("rangeReplay", "-n", store, "-t", "T", "-b", str(T0), "-e", str(T0 + 5), "--engine", "auto")
    r = cli(*args)
    assert r.code == 0 and "engine auto: local, because the plan (50 messages) is below the Spark threshold" in r.stderr
    monkeypatch.setattr(command, "SPARK_AUTO_THRESHOLD", 1)
    r = cli(*args, "--spark-master", "local[1]", "--json")
    assert r.code == 0 and "engine auto: local, because" in r.stderr  # one core (or no Spark at all)
    assert json.loads(r.stderr[r.stderr.index("{") :])["engine"] == "local"


def test_local_engine_will_not_write_over_a_folder(store: str, tmp_path: Path, cli: Run) -> None:
    (tmp_path / "out").mkdir()
    args = (
        "rangeReplay",
        "-n",
        store,
        "-t",
        "T",
        "-b",
        str(T0),
        "-e",
        str(T0 + 5),
        "--to",
        f"jsonl:{tmp_path / 'out'}",
    )
    r = cli(*args, "--overwrite")
    assert r.code == 2 and "is a directory" in r.stderr


@pytest.fixture
def expired(tmp_path: Path) -> tuple[str, dict[int, tuple[int, int, int]]]:
    """A stopped broker's store whose two oldest commit-log files retention deleted: each queue's
    min offset is above 0. Returns its address and, per queue id, (min, max, oldest store time)."""
    root = tmp_path / "s"
    cluster = MockCluster.create(root, ("broker-a",), commitlog_file_size=8192)
    fill_topic(cluster, "T", 200, T0, T0 + 200_000, queues_per_broker=2)
    cluster.close()
    for f in sorted((root / "broker-a" / "commitlog").iterdir())[:2]:
        f.unlink()
    address = f"store://{root}"
    admin = connect(address)
    try:
        queues = admin.topic_route("T").message_queues()
        bounds = {
            mq.queue_id: (admin.min_offset(mq), admin.max_offset(mq), admin.earliest_store_time(mq)) for mq in queues
        }
    finally:
        admin.close()
    assert all(0 < lo < hi for lo, hi, _ in bounds.values())
    return address, bounds


def test_window_before_retention_says_how_many_messages_may_be_gone(
    expired: tuple[str, dict[int, tuple[int, int, int]]], tmp_path: Path, cli: Run
) -> None:
    address, bounds = expired
    out = tmp_path / "r.jsonl"
    r = cli("rangeReplay", "-n", address, "-t", "T", "-b", str(T0 - 1000), "--to", f"jsonl:{out}", "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["written"] == sum(hi - lo for lo, hi, _ in bounds.values())  # what is left is replayed
    assert doc["expired_at_most"] == sum(lo for lo, _, _ in bounds.values())
    for q in doc["queues"]:
        lo, _, oldest = bounds[q["queue_id"]]
        assert (q["start_offset"], q["expired_at_most"], q["oldest_left"]) == (lo, lo, oldest)
        assert f"broker-a queue {q['queue_id']}: the window starts before the oldest message left (" in "\n".join(
            doc["notes"]
        )
        assert f"up to {lo} message(s) before offset {lo} are gone (messages expired)" in "\n".join(doc["notes"])
    # the summary of a replay to stdout goes to stderr, with the same lines
    r = cli("rangeReplay", "-n", address, "-t", "T", "-b", str(T0 - 1000), "--to", "stdout")
    assert r.code == 0, r.stderr
    lo0 = bounds[0][0]
    assert "broker-a queue 0: the window starts before the oldest message left" in r.stderr
    assert f"up to {lo0} message(s) before offset {lo0} are gone (messages expired)" in r.stderr
    assert "messages expired" not in r.stdout


def test_window_from_the_oldest_message_left_on_says_what_may_be_gone(
    expired: tuple[str, dict[int, tuple[int, int, int]]], cli: Run
) -> None:
    address, bounds = expired
    begin = max(oldest for _, _, oldest in bounds.values()) + 1
    r = cli("rangeReplay", "-n", address, "-t", "T", "-b", str(begin), "--dry-run", "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["expired_at_most"] == 0
    assert all(q["expired_at_most"] == 0 and q["oldest_left"] is None for q in doc["queues"])
    assert not any("expired" in n for n in doc["notes"])
    # a window that starts in the oldest message's millisecond may hold deleted ones of that millisecond
    (lo0, _, oldest0), oldest1 = bounds[0], bounds[1][2]
    assert oldest0 < oldest1
    r = cli("rangeReplay", "-n", address, "-t", "T", "-b", str(oldest0), "--dry-run", "--json")
    assert r.code == 0, r.stderr
    notes = "\n".join(json.loads(r.stdout)["notes"])
    assert "broker-a queue 0: the window starts at the oldest message left" in notes
    assert "broker-a queue 1: the window starts before the oldest message left" in notes
    assert f"up to {lo0} message(s) before offset {lo0} are gone" in notes
