"""Replay throughput over TCP: a mock broker server and a real RocketMQ 5.3.3, local engine vs Spark.

    .venv/bin/python benchmarks/bench_replay_server.py                        # 1 M x 1 KiB, 200 k from 5.3.3
    .venv/bin/python benchmarks/bench_replay_server.py --messages 300000      # about 5-8 minutes
    .venv/bin/python benchmarks/bench_replay_server.py --real-messages 0      # the mock server only
    .venv/bin/python benchmarks/bench_replay_server.py --workers 2 --messages 300000  # threads vs 2 processes

bench_replay.py measures the engines on an embedded store; a user's replay goes over the network,
so here every byte crosses the remoting protocol. The mock store is built once with ``fill_topic``
(8 queues, 1 ms apart) and reused from ``--store``; a ``MockServer`` serves it from a child
process, so the server does not share the measuring process's GIL. For the real broker our
backend produces ``--real-messages`` messages first (that rate is reported too: it is why the
real count is smaller). Each engine replays the same plan to JSON lines: the local engine
(threads) and Spark ``local[1]``/``local[2]``, all in this one run, each Spark run on a started
session. The fixed start-up cost of Spark is measured as a user meets it: the same 100-message
``rangeReplay`` as a fresh CLI process with ``--engine spark`` and with ``--engine local``. Spark
pays off from ``fixed / (1/local rate - 1/spark rate)`` messages. The machine has 2 cores, shared
by the server (or broker JVM), the engine and Spark's JVM, and is noisy: the load average is
printed with the figures.

The local engine replays each ``--formats`` output alternately with a baseline measured in the
same run (the Message-per-record path with the standard library's JSON encoder); the medians of
``--repeat`` runs, the ratio and the client's CPU time per message are printed.

Measured here (2 cores, load average about 1; medians of 3):

    source          local engine     baseline        ratio  client CPU us/msg  server CPU us/msg
    mock server 1M  156,761 msg/s    49,746 msg/s    3.2x   22.1 -> 6.1        1.9 -> 1.8
    real 5.3.3 200k 144,945 msg/s    46,342 msg/s    3.1x   21.4 -> 6.2        3.8 -> 2.7

``--workers N`` measures only the local engine from the mock server to JSON lines, in threads
(one process, one GIL) and in N worker processes with their own connections, runs interleaved.
Measured with the machine far over its two cores (load average 9-15: no core to spare), where
processes cannot run in parallel and pay their start and the hand-over of encoded bytes:

    300k x 1 KiB    threads 11,197 msg/s (18.9 us/msg client CPU)   2 processes 10,448 (26.5)   0.93x

Before bulk decoding and pipelined pulls: 16.4 k msg/s from the mock server, 11.9-15.9 k from
5.3.3. A real broker answers at most 32 messages a pull, so each message carries a 32nd of a
pull's client work (request, wake-up, reply header) and the broker's JVM takes 3-11 us of CPU a
message on the same two cores.

Spark, measured before bulk decoding (best of 1-2): from the mock server local[1] 13,008 and
local[2] 15,953 msgs/s; from 5.3.3 local[1] 7,550-9,805 and local[2] 17,291-22,637 msgs/s;
fixed cost 14-21 s (CLI, 100 messages, --engine spark minus --engine local). Producing with our
send reaches 2.5-5 k msgs/s of 1 KiB, which is why the real broker replays 200 k.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.realbroker is stdlib-only and importable as a script helper

# the same store the embedded benchmark builds (and reuses when it matches)
from bench_replay import T0, bench_formats, build_store, report_formats  # noqa: E402
from bench_replay import Row as FormatRow  # noqa: E402

from mqadmin import errors  # noqa: E402
from mqadmin.admin import connect  # noqa: E402
from mqadmin.model import Message, MessageQueue  # noqa: E402
from mqadmin.replay.planner import Plan, plan_window  # noqa: E402
from mqadmin.replay.sinks import parse_target  # noqa: E402
from mqadmin.replay.worker import MessageFilter  # noqa: E402

MIB = 1024 * 1024
TOPIC = "Bench"
REAL_QUEUES = 8
REAL_SENDERS = 16  # concurrent sends: the fastest of 4/16/64 threads here (2.5-3.4 k msgs/s)
TINY = 100  # messages in the window that measures fixed costs
SPARK_CONF = {"spark.sql.shuffle.partitions": "2"}


@dataclass
class Row:
    source: str
    engine: str
    seconds: float
    messages: int
    body_bytes: int

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_rate(self) -> float:
        return self.body_bytes / MIB / self.seconds


# ---- the mock server ------------------------------------------------------------------------


def _serve(root: str, conn: Connection) -> None:
    """Child process: serve the store until the parent says stop (or goes away)."""
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.server import MockServer

    cluster = MockCluster(Path(root), writable=True)
    server = MockServer(cluster, namesrv_port=0).start()
    try:
        conn.send(server.namesrv_addr)
        try:
            conn.recv()
        except EOFError:
            pass
    finally:
        server.stop()
        cluster.close()


#: pids of the server processes of the source being measured (the mock server, or the broker JVMs)
SERVER_PIDS: list[int] = []


def process_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used so far, from /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def java_children() -> list[int]:
    """This process's child JVMs: the name server and broker a RealCluster started."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, rest = stat.read_text().split(") ", 1)
        except (OSError, ValueError):
            continue
        if name.endswith("(java") and int(rest.split()[1]) == os.getpid():
            pids.append(int(stat.parent.name))
    return pids


@contextmanager
def mock_server(root: Path) -> Iterator[str]:
    """A MockServer over ``root`` in its own process; yields the name server address."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(str(root), child), daemon=True)
    proc.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the mock server did not start within 60 s")
        SERVER_PIDS[:] = [proc.pid] if proc.pid is not None else []
        yield str(parent.recv())
    finally:
        parent.send("stop")
        proc.join(30)
        if proc.is_alive():
            proc.kill()


# ---- measuring ------------------------------------------------------------------------------


def make_plan(address: str, begin: int, end: int, slice_size: int) -> tuple[Plan, float]:
    """The plan and how long planning took (every engine pays it once, on the driver)."""
    t = time.monotonic()
    admin = connect(address, timeout=10)
    try:
        plan = plan_window(admin, admin.topic_route(TOPIC).message_queues(), begin, end, slice_size=slice_size)
    finally:
        admin.close()
    return plan, time.monotonic() - t


def bench_spark(source: str, address: str, plan: Plan, master: str, out: Path, repeat: int) -> Row:
    """The best full replay on a session that has already run a tiny job (no start-up inside)."""
    from mqadmin.spark.engine import build_session, run_replay

    flt = MessageFilter(plan.begin, plan.end)
    spark = build_session(master, SPARK_CONF)
    best: Row | None = None
    try:
        first = plan.slices[0]
        tiny = Plan(plan.topic, plan.begin, plan.end, plan.ranges, (replace(first, end=first.start + TINY),))
        run_replay(tiny, address, flt, parse_target(f"jsonl:{out}-warmup"), spark=spark)
        for i in range(repeat):
            t = time.monotonic()
            outcome = run_replay(plan, address, flt, parse_target(f"jsonl:{out}-{i}"), spark=spark)
            seconds = time.monotonic() - t
            shutil.rmtree(f"{out}-{i}")
            stats = outcome.stats.values()
            row = Row(source, f"spark {master}", seconds, outcome.written, sum(s.bytes for s in stats))
            best = row if best is None or row.seconds < best.seconds else best
    finally:
        spark.stop()
    assert best is not None
    return best


def cli_seconds(address: str, begin: int, end: int, out: Path, *engine: str) -> float:
    """Wall time of one ``rangeReplay`` as a user runs it: a fresh process, JVM and all."""
    cmd = [sys.executable, "-m", "mqadmin", "rangeReplay", "-n", address, "-t", TOPIC, "-b", str(begin)]
    cmd += ["-e", str(end), "--to", f"jsonl:{out}", "--overwrite", *engine]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr}")
    if out.is_dir():
        shutil.rmtree(out)
    else:
        out.unlink(missing_ok=True)
    return seconds


def fixed_cost(address: str, begin: int, end: int, tmp: Path, master: str, repeat: int) -> tuple[float, float]:
    """(local CLI seconds, Spark CLI seconds) for a tiny window: the difference is Spark's fixed cost."""
    spark_args = ("--engine", "spark", "--spark-master", master, "--spark-conf", "spark.sql.shuffle.partitions=2")
    local = min(cli_seconds(address, begin, end, tmp / "tiny-local.jsonl") for _ in range(repeat))
    spark = min(cli_seconds(address, begin, end, tmp / "tiny-spark", *spark_args) for _ in range(repeat))
    return local, spark


#: the local engine's figures per source: (baseline, local engine) per output format
FORMAT_PAIRS: dict[str, list[tuple[FormatRow, FormatRow]]] = {}


def run_engines(
    source: str, address: str, plan: Plan, engines: list[str], tmp: Path, repeat: int, formats: list[str]
) -> list[Row]:
    rows = []
    for engine in engines:
        out = tmp / f"{source}-{engine}".replace(" ", "_").replace("[", "_").replace("]", "")
        if engine == "local":
            pairs = FORMAT_PAIRS[source] = bench_formats(
                address, plan, tmp, formats, repeat, lambda: process_cpu(SERVER_PIDS)
            )
            new = pairs[0][1]
            rows.append(Row(source, "local (threads)", new.seconds, new.messages, new.body_bytes))
        else:
            rows.append(bench_spark(source, address, plan, engine, out, repeat))
        print(f"  {source} {rows[-1].engine}: {rows[-1].seconds:.1f} s", file=sys.stderr)
    return rows


def bench_workers(address: str, plan: Plan, tmp: Path, repeat: int, processes: int) -> list[FormatRow]:
    """The local engine to JSON lines in threads (one process: the GIL bounds it) and in
    ``processes`` worker processes with their own connections, runs interleaved; medians."""
    from bench_replay import median_row, replay_once

    from mqadmin.replay.sinks import open_sink

    runs: dict[str, list[FormatRow]] = {"threads": [], f"{processes} processes": []}
    for i in range(repeat):
        for label, count in (("threads", 1), (f"{processes} processes", processes)):
            path = tmp / f"workers-{i}.jsonl"
            sink = open_sink(parse_target(f"jsonl:{path}"))
            row = replay_once(address, plan, sink, path, label, lambda: process_cpu(SERVER_PIDS), count)
            runs[label].append(row)
            print(f"  {label}: {row.seconds:.1f} s, {row.rate:,.0f} msg/s", file=sys.stderr)
    return [median_row(rows) for rows in runs.values()]


def report_workers(rows: list[FormatRow], repeat: int) -> None:
    threads, processes = rows
    print(f"\nlocal engine over TCP to JSON lines, threads against worker processes (medians of {repeat}):")
    print(f"{'':<14}{'msgs/s':>10}{'client CPU us/msg':>19}{'server CPU us/msg':>19}")
    for r in rows:
        print(
            f"{r.engine:<14}{r.rate:>10,.0f}{r.cpu / r.messages * 1e6:>19.2f}{r.server_cpu / r.messages * 1e6:>19.2f}"
        )
    print(f"ratio {processes.engine} / threads: {processes.rate / threads.rate:.2f}x")


# ---- the real broker ------------------------------------------------------------------------


def produce(address: str, count: int, body_size: int) -> float:
    """``count`` messages of ``body_size`` bytes through our send, concurrently; returns msgs/s."""
    admin = connect(address, timeout=10)
    try:
        queues = admin.topic_route(TOPIC).message_queues()
        body = b"x" * body_size

        def one(i: int) -> None:
            msg = Message(TOPIC, body, {"TAGS": ("TagA", "TagB", "TagC")[i % 3], "KEYS": f"order-{i}"})
            admin.send(TOPIC, msg, queues[i % len(queues)])

        t = time.monotonic()
        with ThreadPoolExecutor(REAL_SENDERS) as pool:
            for _ in pool.map(one, range(count)):
                pass
        return count / (time.monotonic() - t)
    finally:
        admin.close()


def store_window(address: str) -> tuple[int, int]:
    """[first store time, last store time + 1) over every queue of the topic."""
    admin = connect(address, timeout=10)
    try:
        firsts, lasts = [], []
        for mq in admin.topic_route(TOPIC).message_queues():
            hi = admin.max_offset(mq)
            if hi > 0:
                firsts.append(admin.earliest_store_time(mq))
                lasts.append(admin.pull(mq, hi - 1, 1).messages[0].store_timestamp)
        return min(firsts), max(lasts) + 1
    finally:
        admin.close()


def tiny_end(address: str, begin: int) -> int:
    """An end time that leaves about TINY messages after ``begin`` (the queues fill evenly)."""
    admin = connect(address, timeout=10)
    try:
        mq = MessageQueue(TOPIC, admin.topic_route(TOPIC).brokers[0].broker_name, 0)
        queues = len(admin.topic_route(TOPIC).message_queues())
        offset = admin.search_offset(mq, begin) + max(TINY // queues, 1)
        return admin.pull(mq, offset, 1).messages[0].store_timestamp
    finally:
        admin.close()


def wait_for_route(address: str, timeout: float = 30.0) -> None:
    """A new topic reaches the name server with the broker's next registration at worst."""
    admin = connect(address, timeout=10)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin.topic_route(TOPIC)
                return
            except errors.TopicNotExist:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()


@dataclass
class RealResult:
    """The real broker's part: replay rows, our produce rate, the plan and the CLI fixed costs."""

    version: str
    rows: list[Row]
    produce_rate: float
    plan: Plan
    plan_s: float
    fixed: tuple[float, float]


def bench_real(version: str, count: int, body_size: int, args: argparse.Namespace, tmp: Path) -> RealResult:
    from tests.support import realbroker as rb

    with rb.RealCluster(version, tmp / "rmq", brokers=1) as cluster:
        head, _ = rb.remoting_call(
            cluster.broker_addrs[0],
            17,  # UPDATE_AND_CREATE_TOPIC
            {
                "topic": TOPIC,
                "defaultTopic": "TBW102",
                "readQueueNums": REAL_QUEUES,
                "writeQueueNums": REAL_QUEUES,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
            },
        )
        if head.get("code") != 0:
            raise RuntimeError(f"cannot create {TOPIC}: {head}")
        address = cluster.namesrv_addr
        SERVER_PIDS[:] = java_children()
        wait_for_route(address)
        print(f"producing {count:,} messages to {version} ...", file=sys.stderr)
        produce_rate = produce(address, count, body_size)
        print(f"  produced at {produce_rate:,.0f} msgs/s", file=sys.stderr)
        begin, end = store_window(address)
        plan, plan_s = make_plan(address, begin, end, args.slice_size)
        rows = run_engines(f"real {version}", address, plan, args.engines.split(","), tmp, args.repeat, args.formats)
        spark_master = next((e for e in reversed(args.engines.split(",")) if e != "local"), "local[2]")
        fixed = (
            (0.0, 0.0)
            if args.no_fixed_cost
            else fixed_cost(address, begin, tiny_end(address, begin), tmp, spark_master, 1)
        )
    return RealResult(version, rows, produce_rate, plan, plan_s, fixed)


# ---- report ---------------------------------------------------------------------------------


def report_rows(rows: list[Row]) -> None:
    print(f"{'source':<14}{'engine':<18}{'seconds':>9}{'msgs/s':>11}{'MB/s':>8}")
    for r in rows:
        print(f"{r.source:<14}{r.engine:<18}{r.seconds:>9.1f}{r.rate:>11,.0f}{r.mb_rate:>8.1f}")


def payoff(rows: list[Row], fixed: tuple[float, float], master: str) -> str:
    """Where the Spark run with ``master`` overtakes the local engine, given the CLI fixed costs."""
    local = next((r for r in rows if r.engine.startswith("local")), None)
    spark = next((r for r in rows if r.engine == f"spark {master}"), None)
    extra = fixed[1] - fixed[0]
    if local is None or spark is None:
        return "(needs both the local engine and that Spark master in --engines)"
    gain = 1 / local.rate - 1 / spark.rate
    if gain <= 0:
        return f"never here: spark {master} is not faster than the local engine once started"
    return f"from ~{extra / gain:,.0f} messages (start-up {extra:.1f} s / {gain * 1e6:.1f} µs saved per message)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages in the mock store")
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "mqadmin-bench-server-store")
    ap.add_argument("--slice-size", type=int, default=8192)
    ap.add_argument("--engines", default="local,local[1],local[2]", help="local and Spark masters, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the local engine's median counts")
    ap.add_argument("--formats", default="jsonl", help="local engine outputs, each against its baseline")
    ap.add_argument("--no-fixed-cost", action="store_true", help="skip the CLI start-up (Spark fixed cost) runs")
    ap.add_argument("--real-messages", type=int, default=200_000, help="messages produced to the real broker; 0 skips")
    ap.add_argument("--real-version", default="5.3.3")
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="only compare threads with N worker processes from the mock server (JSON lines; 0: the other figures)",
    )
    args = ap.parse_args()
    args.formats = args.formats.split(",")
    if args.workers:
        workers_only(args)
        return

    started = time.monotonic()
    load_before = os.getloadavg()
    engines = args.engines.split(",")
    spark_master = next((e for e in reversed(engines) if e != "local"), "local[2]")
    build_store(args.store, args.messages, args.body_size)
    with tempfile.TemporaryDirectory(prefix="mqadmin-bench-server-") as name:
        tmp = Path(name)
        with mock_server(args.store) as address:
            plan, plan_s = make_plan(address, T0, T0 + args.messages + 1, args.slice_size)
            print(f"plan: {plan.total:,} messages in {len(plan.slices)} slices from {address}", file=sys.stderr)
            rows = run_engines("mock server", address, plan, engines, tmp, args.repeat, args.formats)
            fixed = (0.0, 0.0) if args.no_fixed_cost else fixed_cost(address, T0, T0 + TINY, tmp, spark_master, 1)
        real = (
            bench_real(args.real_version, args.real_messages, args.body_size, args, tmp) if args.real_messages else None
        )
    load_after = os.getloadavg()

    print(f"\nreplay over TCP, {args.body_size} B bodies, JSON lines out, slices of {args.slice_size}")
    print(f"mock server: {plan.total:,} messages (planned in {plan_s:.2f} s)")
    if real is not None:
        print(f"real {real.version}: {real.plan.total:,} messages (planned in {real.plan_s:.2f} s)")
    for source, pairs in FORMAT_PAIRS.items():
        print(f"\nlocal engine from the {source}: baseline = Message objects + stdlib json, medians of {args.repeat}")
        report_formats(pairs, source)
    print()
    report_rows(rows + (real.rows if real is not None else []))
    if not args.no_fixed_cost:
        print(f"\nfixed start-up, a {TINY}-message rangeReplay as a fresh CLI process (mock server):")
        print(f"  --engine local {fixed[0]:.1f} s, --engine spark {spark_master} {fixed[1]:.1f} s")
        print(f"  Spark's fixed cost: {fixed[1] - fixed[0]:.1f} s")
        for master in (e for e in engines if e != "local"):
            print(f"  spark {master} pays off (mock server) {payoff(rows, fixed, master)}")
    if real is not None:
        print(
            f"\nreal {real.version}: produced with our send at {real.produce_rate:,.0f} msgs/s ({REAL_SENDERS} threads;"
        )
        print(f"  1 M messages would take ~{1e6 / real.produce_rate:.0f} s)")
        if not args.no_fixed_cost:
            print(f"  Spark's fixed cost on the real broker: {real.fixed[1] - real.fixed[0]:.1f} s")
            for master in (e for e in engines if e != "local"):
                print(f"  spark {master} pays off (real broker) {payoff(real.rows, real.fixed, master)}")
    print(f"\nload average {load_before[0]:.1f} before, {load_after[0]:.1f} after; {time.monotonic() - started:.0f} s")


def workers_only(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()
    build_store(args.store, args.messages, args.body_size)
    with tempfile.TemporaryDirectory(prefix="mqadmin-bench-server-") as name, mock_server(args.store) as address:
        plan, _ = make_plan(address, T0, T0 + args.messages + 1, args.slice_size)
        print(f"plan: {plan.total:,} messages in {len(plan.slices)} slices from {address}", file=sys.stderr)
        rows = bench_workers(address, plan, Path(name), args.repeat, args.workers)
    report_workers(rows, args.repeat)
    print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
