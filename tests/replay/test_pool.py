"""Worker processes for big replays, of a store on disk or over the network, write exactly what
threads write; a worker process that fails or dies fails the replay."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import store_address

from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.replay import pool
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import plan_window
from mqadmin.replay.sinks import open_sink, parse_target
from mqadmin.replay.worker import MessageFilter
from tests.conftest import CliResult

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("pool") / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "T", 3000, T0, T0 + 3000, body_size=300)
    cluster.close()
    return f"mock://{root}"


def replay(address: str, out: Path, kind: str, *, processes: bool, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(pool, "PROCESS_MIN_MESSAGES", 0 if processes else 10**12)
    monkeypatch.setattr(pool, "usable_cpus", lambda: 3)
    admin = connect(address, read_only=True)
    used: list[bool] = []
    real_init = pool.SlicePool.__init__

    def spy(self: pool.SlicePool, *args: object, **kw: object) -> None:
        real_init(self, *args, **kw)  # type: ignore[arg-type]
        used.append(self.processes)

    monkeypatch.setattr(pool.SlicePool, "__init__", spy)
    try:
        plan = plan_window(admin, admin.topic_route("T").message_queues(), T0 + 100, T0 + 2900, slice_size=500)
        outcome = run_local(admin, plan, MessageFilter(plan.begin, plan.end), open_sink(parse_target(f"{kind}:{out}")))
    finally:
        admin.close()
    assert outcome.complete and outcome.written == 2800
    return used[0]


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_processes_write_the_same_bytes_as_threads(
    address: str, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "parquet":
        pytest.importorskip("pyarrow")
    assert replay(address, tmp_path / f"p.{kind}", kind, processes=True, monkeypatch=monkeypatch)
    assert not replay(address, tmp_path / f"t.{kind}", kind, processes=False, monkeypatch=monkeypatch)
    if kind == "jsonl":
        assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "t.jsonl").read_bytes()
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(tmp_path / "p.parquet").equals(pq.read_table(tmp_path / "t.parquet"))


def test_only_stores_on_disk_and_file_sinks_use_processes() -> None:
    assert pool.is_on_disk("mock://demo") and pool.is_on_disk("store:/var/rmq") and pool.is_on_disk("mock")
    assert not pool.is_on_disk("127.0.0.1:9876")


def test_a_slice_failing_in_a_worker_process_fails_as_it_would_in_threads(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error of a slice that fails in a child is raised with its own class and message (here
    the broker's TopicNotExist), and the unfinished output is removed."""
    from dataclasses import replace

    from mqadmin import errors
    from mqadmin.replay.planner import Plan

    monkeypatch.setattr(pool, "PROCESS_MIN_MESSAGES", 0)
    monkeypatch.setattr(pool, "usable_cpus", lambda: 3)
    admin = connect(address, read_only=True)
    try:
        plan = plan_window(admin, admin.topic_route("T").message_queues(), T0, T0 + 3000, slice_size=500)
        bad = replace(plan.slices[3], topic="Gone")
        plan = Plan(plan.topic, plan.begin, plan.end, plan.ranges, (*plan.slices[:3], bad, *plan.slices[4:]))
        out = tmp_path / "o.jsonl"
        with pytest.raises(errors.TopicNotExist) as raised:
            run_local(admin, plan, MessageFilter(plan.begin, plan.end), open_sink(parse_target(f"jsonl:{out}")))
    finally:
        admin.close()
    assert str(raised.value).count("answered TOPIC_NOT_EXIST (17): topic[Gone] not exist") == 1
    assert not out.exists() and not out.with_name("o.jsonl.partial").exists()


def test_threads_encode_each_pull_as_it_comes_and_write_what_the_rows_encode(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON lines in threads, on the row path (no numpy, or a sink without a table encoder): slice
    workers encode each pull's rows as they arrive (here pulls of 64 messages, several per slice);
    the file is byte for byte the plan's rows encoded at once."""
    import functools

    from mqadmin.replay import sinks
    from mqadmin.replay.records import json_lines
    from mqadmin.replay.worker import SliceScan, run_slice_rows

    pulls: list[int] = []

    class SmallPulls(SliceScan):
        def rows(self):  # type: ignore[no-untyped-def]
            for batch in super().rows():
                pulls.append(len(batch))
                yield batch

    monkeypatch.setattr(pool, "SliceScan", functools.partial(SmallPulls, batch=64))
    monkeypatch.setattr(sinks.JsonlSink, "table_encoder", lambda self: None)
    out = tmp_path / "t.jsonl"
    assert not replay(address, out, "jsonl", processes=False, monkeypatch=monkeypatch)
    assert len(pulls) > 6 * 3 and max(pulls) <= 64  # every slice of 500 took several pulls
    admin = connect(address, read_only=True)
    try:
        plan = plan_window(admin, admin.topic_route("T").message_queues(), T0 + 100, T0 + 2900, slice_size=500)
        flt = MessageFilter(plan.begin, plan.end)
        want = b"".join(json_lines(run_slice_rows(admin, s, flt)[0]) for s in plan.slices)
    finally:
        admin.close()
    assert out.read_bytes() == want and want.count(b"\n") == 2800


def test_threads_write_parquet_parts_in_the_slice_workers(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parquet in threads: each slice worker writes its own part (pyarrow leaves the GIL while
    it does), and the file holds every row of the plan, lossless."""
    pytest.importorskip("pyarrow")
    import threading

    from mqadmin.replay import sinks
    from mqadmin.replay.records import normalize, read_records, to_row
    from mqadmin.replay.worker import run_slice

    writers: list[str] = []
    real_write_part = sinks.write_part

    def spy(*args: object) -> object:
        writers.append(threading.current_thread().name)
        return real_write_part(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sinks, "write_part", spy)
    out = tmp_path / "t.parquet"
    assert not replay(address, out, "parquet", processes=False, monkeypatch=monkeypatch)
    admin = connect(address, read_only=True)
    try:
        plan = plan_window(admin, admin.topic_route("T").message_queues(), T0 + 100, T0 + 2900, slice_size=500)
        flt = MessageFilter(plan.begin, plan.end)
        want = [to_row(m, s.broker) for s in plan.slices for m in run_slice(admin, s, flt)[0]]
    finally:
        admin.close()
    assert len(writers) == len(plan.slices) and all(name.startswith("replay") for name in writers)
    keys = ("topic", "broker", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "uniq_key", "tags", "keys")
    keys += ("born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times", "properties", "body")
    assert list(read_records(out)) == [normalize(dict(zip(keys, row, strict=True))) for row in want]


class CountingAdmin:
    """The admin with every pull counted while it is in flight (issued, result not yet taken)."""

    def __init__(self, admin: object):
        self._admin = admin
        self._lock = threading.Lock()
        self.in_flight = self.most = 0
        if hasattr(admin, "pull_raw_many"):  # the remoting client's batched pulls
            self.pull_raw_many = self._many

    def __getattr__(self, name: str) -> object:
        return getattr(self._admin, name)

    def _issued(self, pending: object) -> object:
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        counter = self

        class Counted:
            def result(self) -> object:
                try:
                    return pending.result()  # type: ignore[attr-defined]
                finally:
                    with counter._lock:
                        counter.in_flight -= 1

        return Counted()

    def pull_raw(self, *args: object, **kw: object) -> object:
        return self._issued(self._admin.pull_raw(*args, **kw))  # type: ignore[attr-defined]

    def _many(self, *args: object, **kw: object) -> list[object]:
        return [self._issued(p) for p in self._admin.pull_raw_many(*args, **kw)]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> str:
    """10,000 messages a queue: slices of several pulls each, so workers keep many in flight."""
    root = tmp_path_factory.mktemp("deep") / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "M", 20_000, T0, T0 + 20_000, queues_per_broker=1)
    cluster.close()
    return f"mock://{root}"


@pytest.mark.parametrize("cap", [None, 1, 5])
def test_max_inflight_bounds_the_pulls_of_the_whole_run(deep: str, tmp_path: Path, cap: int | None) -> None:
    admin = connect(deep, read_only=True)
    try:
        counting = CountingAdmin(admin)
        plan = plan_window(admin, admin.topic_route("M").message_queues(), T0, T0 + 20_000, slice_size=5000)
        out = tmp_path / "o.jsonl"
        flt = MessageFilter(plan.begin, plan.end)
        run_local(counting, plan, flt, open_sink(parse_target(f"jsonl:{out}")), workers=4, max_inflight=cap)  # type: ignore[arg-type]
    finally:
        admin.close()
    assert sum(1 for _ in out.open()) == plan.total > 19_000
    if cap is None:
        assert counting.most > 5  # the default keeps many in flight: the bound below is real
    else:
        assert 1 <= counting.most <= cap


# ---- over the network ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A mock store served over TCP (two brokers, four queues each): the remoting backend."""
    root = tmp_path_factory.mktemp("tcp") / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "T", 3000, T0, T0 + 3000, body_size=300)
    cluster.close()
    with store_address(root, "tcp") as address:
        yield address


def spy_processes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each SlicePool built from now on runs worker processes."""
    used: list[bool] = []
    real_init = pool.SlicePool.__init__

    def spy(self: pool.SlicePool, *args: object, **kw: object) -> None:
        real_init(self, *args, **kw)  # type: ignore[arg-type]
        used.append(self.processes)

    monkeypatch.setattr(pool.SlicePool, "__init__", spy)
    return used


WINDOW = ("-t", "T", "-b", str(T0 + 100), "-e", str(T0 + 2900), "--slice-size", "500")


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_processes_over_tcp_write_the_same_bytes_as_threads(
    tcp: str, tmp_path: Path, kind: str, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "parquet":
        pytest.importorskip("pyarrow")
    used = spy_processes(monkeypatch)
    for name, workers in (("p", "2"), ("t", "1")):
        r = cli("rangeReplay", "-n", tcp, *WINDOW, "--to", f"{kind}:{tmp_path / name}.{kind}", "--workers", workers)
        assert r.code == 0, r.stderr
    assert used == [True, False]
    processes, threads = (tmp_path / f"p.{kind}").read_bytes(), (tmp_path / f"t.{kind}").read_bytes()
    assert processes == threads
    if kind == "jsonl":
        assert threads.count(b"\n") == 2800


@pytest.mark.parametrize(("kind", "sink"), [("parquet", "ParquetSink"), ("jsonl", "JsonlSink")])
def test_slices_decoded_column_wise_write_what_rows_write(
    kind: str, sink: str, tcp: str, tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the network a Parquet or JSON-lines file replay decodes each slice's pulls column-wise
    into one table (and JSON lines are encoded from it column-wise); the file is byte for byte
    what decoding and encoding them row by row writes."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    from mqadmin.replay import columns, sinks

    taken: list[bool] = []
    real = columns._columns

    def spy(*args: object) -> object:
        got = real(*args)  # type: ignore[arg-type]
        taken.append(got is not None)
        return got

    monkeypatch.setattr(columns, "_columns", spy)
    run = ("rangeReplay", "-n", tcp, *WINDOW, "--workers", "1", "--to")
    assert cli(*run, f"{kind}:{tmp_path / 'columns'}.{kind}").code == 0
    assert len(taken) == 8 and all(taken)  # one decoding a slice (8 queues), each column-wise
    monkeypatch.setattr(getattr(sinks, sink), "table_encoder", lambda self: None)
    assert cli(*run, f"{kind}:{tmp_path / 'rows'}.{kind}").code == 0
    assert len(taken) == 8
    assert (tmp_path / f"columns.{kind}").read_bytes() == (tmp_path / f"rows.{kind}").read_bytes()


def test_json_lines_decode_a_slice_in_pieces_of_bounded_bytes(
    tcp: str, tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON-lines slice is decoded column-wise a few MiB of pulled records at a time (a slice of
    4 MiB messages is not held whole, as the row path never held it): here pieces of 4 KiB,
    several a slice, and the file the same bytes as the row path's; progress still adds up."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    import functools
    import json

    from mqadmin.replay import columns, sinks
    from mqadmin.replay.worker import SliceScan

    calls: list[int] = []
    real = columns._columns

    def spy(pulls: list[object], broker: str) -> object:
        calls.append(len(pulls))
        return real(pulls, broker)

    monkeypatch.setattr(columns, "_columns", spy)
    monkeypatch.setattr(pool, "TABLE_BYTES", 4096)
    monkeypatch.setattr(pool, "SliceScan", functools.partial(SliceScan, batch=64))  # pulls of 64 messages
    run = ("rangeReplay", "-n", tcp, *WINDOW, "--workers", "1", "--json", "--to")
    pieces = cli(*run, f"jsonl:{tmp_path / 'pieces.jsonl'}")
    assert pieces.code == 0, pieces.stderr
    assert len(calls) > 8 * 2, calls  # several pieces in each of the 8 slices
    monkeypatch.setattr(sinks.JsonlSink, "table_encoder", lambda self: None)
    rows = cli(*run, f"jsonl:{tmp_path / 'rows.jsonl'}")
    assert (tmp_path / "pieces.jsonl").read_bytes() == (tmp_path / "rows.jsonl").read_bytes()
    assert json.loads(pieces.stdout)["written"] == json.loads(rows.stdout)["written"] == 2800


def test_a_failed_parquet_replay_leaves_no_part_a_slice_worker_was_still_writing(
    tcp: str, tmp_path: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One slice fails while another worker is writing its part: the replay fails (exit 1) and
    leaves nothing, because the abort that removes the parts waits for the workers (a part
    written during the removal stayed behind, found by Ctrl-C in a terminal)."""
    pytest.importorskip("pyarrow")
    from mqadmin.replay import sinks

    writing, busy_at_abort = threading.Event(), []
    real_write, real_abort = sinks.write_part, sinks.ParquetSink.abort

    def write_part(parts: str, slc: Any, rows: Any) -> str | None:
        if slc.index == 0:  # fails once slice 1 is being written
            writing.wait(5)
            raise OSError("No space left on device")
        if slc.index == 1:
            writing.set()
            time.sleep(0.5)
            try:
                return real_write(parts, slc, rows)
            finally:
                writing.clear()
        return real_write(parts, slc, rows)

    def abort(self: Any, *, keep: bool) -> None:
        busy_at_abort.append(writing.is_set())
        real_abort(self, keep=keep)

    monkeypatch.setattr(sinks, "write_part", write_part)
    monkeypatch.setattr(sinks.ParquetSink, "abort", abort)
    folder = tmp_path / "out"
    folder.mkdir()
    res = cli("rangeReplay", "-n", tcp, *WINDOW, "--to", f"parquet:{folder / 'o.parquet'}")  # threads: a small replay
    assert res.code == 1 and "No space left on device" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert busy_at_abort == [False]
    assert list(folder.iterdir()) == []


def test_a_killed_worker_process_fails_the_replay_and_it_resumes(
    tcp: str, tmp_path: Path, cli: Callable[..., CliResult], cli_proc: Callable[..., CliResult]
) -> None:
    """SIGKILL of a worker process mid-run: exit 1 with one line, the output not put in place
    (only the checkpointed part kept for the resume), and the resumed run writes the same bytes."""
    out, checkpoint = tmp_path / "o.jsonl", tmp_path / "o.checkpoint"
    run = ("rangeReplay", "-n", tcp, *WINDOW, "--to", f"jsonl:{out}", "--workers", "2", "--checkpoint", str(checkpoint))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": "replay-worker-slice-3"})
    assert killed.code == 1, killed.stderr
    assert "a replay worker process died (killed, or out of memory?): slice " in killed.stderr
    assert "Traceback" not in killed.stderr and "run the same command again to resume" in killed.stderr
    assert not out.exists() and out.with_name("o.jsonl.partial").exists()
    assert not any('"complete"' in line for line in checkpoint.read_text().splitlines())
    resumed = cli(*run)
    assert resumed.code == 0, resumed.stderr
    assert cli("rangeReplay", "-n", tcp, *WINDOW, "--to", f"jsonl:{tmp_path / 't.jsonl'}", "--workers", "1").code == 0
    assert out.read_bytes() == (tmp_path / "t.jsonl").read_bytes()


def test_workers_connect_with_the_acl_keys_and_tls_and_leak_neither(
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Worker processes get the ACL keys and TLS settings in their job: every connection is TLS,
    the server's ACL lets them read, and no command line or child environment holds the secret
    (the keys are exported, as a user does)."""
    from tests.spark import secret_support as sec

    tls = sec.make_tls(tmp_path_factory.mktemp("certs"))
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", sec.ACCESS_KEY)
    monkeypatch.setenv("MQADMIN_SECRET_KEY", sec.SECRET)
    used = spy_processes(monkeypatch)
    with sec.serve(tmp_path_factory.mktemp("acl") / "store", tls) as served:
        window = ["-n", served.addr, "-t", sec.TOPIC, "-b", str(sec.T0 + 5_000), "-e", str(sec.T0 + 70_000)]
        window += ["--slice-size", "40", *tls.argv()]
        threads = sec.cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 't.jsonl'}", "--workers", "1"])
        assert threads.code == 0, threads.err
        conns, handshakes = served.connections(), sec.CountingContext.handshakes
        with sec.Watcher([sec.SECRET, tls.key_marker()]) as watcher:
            run = sec.cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'p.jsonl'}", "--workers", "2"])
        assert run.code == 0, run.err
        opened = served.connections() - conns
        assert opened >= 3 and sec.CountingContext.handshakes - handshakes == opened, "a plaintext connection"
        monkeypatch.setenv("MQADMIN_SECRET_KEY", sec.WRONG)
        refused = sec.cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'w.jsonl'}", "--workers", "2"])
    assert used[:2] == [False, True]
    assert refused.code == 1 and "permission denied" in refused.err and sec.WRONG not in refused.err
    assert watcher.saw("spawn_main") and not watcher.leaks, watcher.leaks
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "t.jsonl").read_bytes()
    assert (tmp_path / "t.jsonl").read_bytes().count(b"\n") > 500
    assert sec.SECRET not in run.out + run.err


def test_workers_must_be_positive_and_local(cli: Callable[..., CliResult]) -> None:
    r = cli("rangeReplay", "-n", "mock://x", *WINDOW, "--workers", "0")
    assert r.code == 2 and "--workers must be at least 1" in r.stderr
    r = cli("rangeReplay", "-n", "mock://x", *WINDOW, "--workers", "2", "--engine", "spark")
    assert r.code == 2 and "--workers runs on the local engine only" in r.stderr
