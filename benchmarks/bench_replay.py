"""Replay throughput on an embedded store: the local engine to JSON lines and Parquet, Spark local[1]/[2].

    .venv/bin/python benchmarks/bench_replay.py --engines local            # 1 M messages of 1 KiB, JSONL + Parquet
    .venv/bin/python benchmarks/bench_replay.py --messages 200000 --repeat 3 # a quicker run
    .venv/bin/python benchmarks/bench_replay.py --address HOST:PORT --topic T --begin MS --end MS

Without --address it builds (once, then reuses) an embedded mock store under --store. The local
engine replays the plan to each ``--formats`` output, alternating with a baseline measured in the
same run: the Message-per-record path with the standard library's JSON encoder (and, for Parquet,
row-by-row Arrow conversion) that replays used before bulk decoding. Each figure is the median of
``--repeat`` runs; the ratio is figure / baseline; CPU is user+system time of the process and its
worker processes per message (less sensitive than wall time to other load on the machine). Spark
engines replay to JSON lines; the table gives where Spark starts to pay off: start-up / (1/local
rate - 1/Spark rate).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mqadmin.admin import connect
from mqadmin.model import Message
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import Plan, Slice, plan_window
from mqadmin.replay.records import ROW_KEYS, arrow_schema, to_record, to_row
from mqadmin.replay.sinks import Sink, open_sink, parse_target
from mqadmin.replay.worker import MessageFilter

T0 = 1_700_000_000_000
MIB = 1024 * 1024


@dataclass
class Row:
    engine: str
    seconds: float
    messages: int
    body_bytes: int
    cpu: float = 0.0  # CPU seconds (this process and its worker processes)
    server_cpu: float = 0.0  # CPU seconds of the server processes (mock server, broker JVM), if measured

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_rate(self) -> float:
        return self.body_bytes / MIB / self.seconds


def build_store(root: Path, messages: int, body_size: int) -> str:
    """An embedded mock store of ``messages`` bodies of ``body_size`` bytes, 8 queues, 1 ms apart.

    It is built in a sibling temporary folder and renamed into place when complete, so a run
    interrupted while building leaves no half-built store for the next run to trip over."""
    meta = root / "bench.json"
    want = {"messages": messages, "body_size": body_size}
    if meta.exists() and json.loads(meta.read_text()) == want:
        return f"mock://{root}"
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.seed import fill_topic

    root.parent.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    building = Path(tempfile.mkdtemp(prefix=f".{root.name}-building-", dir=root.parent))
    try:
        store = building / "store"
        cluster = MockCluster.create(store)
        fill_topic(cluster, "Bench", messages, T0, T0 + messages, body_size=body_size)
        cluster.close()
        (store / "bench.json").write_text(json.dumps(want))
        shutil.rmtree(root, ignore_errors=True)
        store.rename(root)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    print(f"built {messages} messages of {body_size} B in {time.monotonic() - t:.0f} s", file=sys.stderr)
    return f"mock://{root}"


def make_plan(address: str, topic: str, begin: int, end: int, slice_size: int) -> Plan:
    admin = connect(address, read_only=True)
    try:
        return plan_window(admin, admin.topic_route(topic).message_queues(), begin, end, slice_size=slice_size)
    finally:
        admin.close()


class BaselineJsonl:
    """JSON lines as replays wrote them before bulk decoding: a Message per record, then
    ``json.dumps`` of its record per line (the engine takes its Message path for this sink)."""

    def __init__(self, path: Path):
        self._f = path.open("wb")

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        lines = (json.dumps(to_record(m, slc.broker), ensure_ascii=False, separators=(",", ":")) for m in messages)
        self._f.write("".join(line + "\n" for line in lines).encode("utf-8"))
        return len(messages)

    def sync(self) -> dict[str, Any]:
        self._f.flush()
        os.fsync(self._f.fileno())
        return {}

    def finish(self) -> None:
        self._f.close()

    def abort(self, *, keep: bool) -> None:
        self._f.close()


class BaselineParquet:
    """Parquet as replays wrote it before: a Message per record, row tuples turned into Arrow
    columns value by value (maps as item lists), one row group per slice (no part merge, so
    this baseline is if anything faster than the old sink)."""

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self._writer = pq.ParquetWriter(path, arrow_schema())

    def write(self, slc: Slice, messages: Sequence[Message]) -> int:
        import pyarrow as pa

        schema = arrow_schema()
        columns: list[list[Any]] = [[] for _ in ROW_KEYS]
        for m in messages:
            for i, value in enumerate(to_row(m, slc.broker)):
                columns[i].append(list(value.items()) if ROW_KEYS[i] == "properties" else value)
        arrays = [pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
        return len(messages)

    def sync(self) -> dict[str, Any]:
        return {}

    def finish(self) -> None:
        self._writer.close()

    def abort(self, *, keep: bool) -> None:
        self._writer.close()


BASELINES: dict[str, Callable[[Path], Sink]] = {"jsonl": BaselineJsonl, "parquet": BaselineParquet}


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def replay_once(
    address: str,
    plan: Plan,
    sink: Sink,
    out: Path,
    label: str,
    server_cpu: Callable[[], float] | None = None,
    processes: int | None = None,
) -> Row:
    """One local-engine replay into ``sink`` (then removed): wall and CPU time (and the server's
    CPU time when ``server_cpu`` reads it); ``processes``: worker processes (1: threads), each
    connecting to ``address`` itself."""
    from mqadmin.replay.pool import WorkerConnect

    flt = MessageFilter(plan.begin, plan.end)
    admin = connect(address, read_only=True, timeout=10)
    server = server_cpu or (lambda: 0.0)
    try:
        c, sc, t = cpu_seconds(), server(), time.monotonic()
        outcome = run_local(admin, plan, flt, sink, processes=processes, connection=WorkerConnect(address, 10))
        seconds, cpu, scpu = time.monotonic() - t, cpu_seconds() - c, server() - sc
    finally:
        admin.close()
    if out.is_dir():
        shutil.rmtree(out)
    else:
        out.unlink(missing_ok=True)
    body_bytes = sum(s.bytes for s in outcome.stats.values())
    return Row(label, seconds, outcome.written, body_bytes, cpu, scpu)


def median_row(rows: list[Row]) -> Row:
    """The run with the median time (its CPU figure is the median too)."""
    pick = sorted(rows, key=lambda r: r.seconds)[len(rows) // 2]
    return replace(
        pick, cpu=statistics.median(r.cpu for r in rows), server_cpu=statistics.median(r.server_cpu for r in rows)
    )


def bench_formats(
    address: str, plan: Plan, tmp: Path, formats: list[str], repeat: int, server_cpu: Callable[[], float] | None = None
) -> list[tuple[Row, Row]]:
    """(baseline, local engine) per format, medians of ``repeat`` runs taken alternately."""
    out: list[tuple[Row, Row]] = []
    for fmt in formats:
        base: list[Row] = []
        new: list[Row] = []
        for i in range(repeat):
            path = tmp / f"{fmt}-{i}.{fmt}"
            base.append(replay_once(address, plan, BASELINES[fmt](path), path, f"{fmt} baseline", server_cpu))
            new.append(replay_once(address, plan, open_sink(parse_target(f"{fmt}:{path}")), path, fmt, server_cpu))
            print(f"  {fmt}: baseline {base[-1].seconds:.1f} s, local engine {new[-1].seconds:.1f} s", file=sys.stderr)
        out.append((median_row(base), median_row(new)))
    return out


def report_formats(pairs: list[tuple[Row, Row]], label: str) -> None:
    server = any(new.server_cpu for _, new in pairs)
    extra = f"{'server CPU us/msg':>19}" if server else ""
    print(f"{label:<22}{'baseline msgs/s':>16}{'local msgs/s':>14}{'ratio':>7}{'MB/s':>7}{'CPU us/msg':>18}{extra}")
    for base, new in pairs:
        cpu = f"{base.cpu / base.messages * 1e6:.1f} -> {new.cpu / new.messages * 1e6:.1f}"
        scpu = f"{base.server_cpu / base.messages * 1e6:.1f} -> {new.server_cpu / new.messages * 1e6:.1f}"
        print(
            f"{new.engine:<22}{base.rate:>16,.0f}{new.rate:>14,.0f}{new.rate / base.rate:>6.1f}x{new.mb_rate:>7.0f}{cpu:>18}"
            + (f"{scpu:>19}" if server else "")
        )


def bench_local(address: str, plan: Plan, out: Path, repeat: int) -> Row:
    """The local engine to JSON lines (the row compared with Spark's)."""
    rows = [replay_once(address, plan, open_sink(parse_target(f"jsonl:{out}")), out, "local") for _ in range(repeat)]
    return median_row(rows)


def process_cpu() -> dict[str, float]:
    """CPU seconds (user+system) so far of this process's descendants, by kind: the JVM, and the
    Python workers it started (Linux /proc; empty elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[str, float] = {}
    todo, seen = [os.getpid()], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        if pid != os.getpid():
            kind = "jvm" if b"java" in cmd.split(b"\0")[0] else "python workers" if b"pyspark" in cmd else "other"
            out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return out


def bench_spark(address: str, plan: Plan, master: str, out: Path, repeat: int) -> tuple[Row, float]:
    """(the best full replay on a started context, the context's start-up plus a 100-message job).

    The first context of the process also launches the JVM: that start-up is what every CLI run
    with --engine spark pays. The CPU of the best run is split between the JVM and the Python
    workers (on stderr): what bounds local[N] against local[1]."""
    from mqadmin.spark.engine import build_context, run_replay

    flt = MessageFilter(plan.begin, plan.end)
    t = time.monotonic()
    spark = build_context(master)
    first = plan.slices[0]
    tiny = Plan(plan.topic, plan.begin, plan.end, plan.ranges, (replace(first, end=min(first.end, first.start + 100)),))
    run_replay(tiny, address, flt, parse_target(f"jsonl:{out}-warmup"), spark=spark)
    startup = time.monotonic() - t
    best: tuple[float, float, dict[str, float]] | None = None
    try:
        for i in range(repeat):
            t, cpu0, split0 = time.monotonic(), time.process_time(), process_cpu()
            outcome = run_replay(plan, address, flt, parse_target(f"jsonl:{out}-{i}"), spark=spark)
            seconds = time.monotonic() - t
            split = {k: v - split0.get(k, 0.0) for k, v in process_cpu().items()}
            split["driver python"] = time.process_time() - cpu0
            if best is None or seconds < best[0]:
                best = (seconds, sum(split.values()), split)
            shutil.rmtree(f"{out}-{i}")
    finally:
        spark.stop()
    assert best is not None
    seconds, cpu, split = best
    parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(split.items()))
    print(
        f"  spark {master}: {seconds:.1f} s, CPU {cpu:.1f} s ({cpu / seconds:.2f} cores busy: {parts})", file=sys.stderr
    )
    row = Row(f"spark {master}", seconds, outcome.written, sum(s.bytes for s in outcome.stats.values()), cpu)
    return row, startup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "mqadmin-bench-store")
    ap.add_argument("--address", help="replay from this broker instead of a built mock store")
    ap.add_argument("--topic", default="Bench")
    ap.add_argument("--begin", type=int, default=T0)
    ap.add_argument("--end", type=int)
    ap.add_argument("--slice-size", type=int, default=8192)
    ap.add_argument("--engines", default="local,local[1],local[2]", help="local and Spark masters, comma-separated")
    ap.add_argument("--formats", default="jsonl,parquet", help="local engine outputs, each against its baseline")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the median counts (noisy hosts)")
    args = ap.parse_args()

    address = args.address or build_store(args.store, args.messages, args.body_size)
    end = args.end or (T0 + args.messages + 1)
    plan = make_plan(address, args.topic, args.begin, end, args.slice_size)
    print(f"plan: {plan.total} messages in {len(plan.slices)} slices from {address}", file=sys.stderr)
    rows: list[Row] = []
    startups: dict[str, float] = {}
    pairs: list[tuple[Row, Row]] = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mqadmin-bench-") as tmp:
        for engine in args.engines.split(","):
            out = Path(tmp) / engine.replace("[", "_").replace("]", "")
            if engine == "local":
                pairs = bench_formats(address, plan, Path(tmp), args.formats.split(","), args.repeat)
                rows += [new for base, new in pairs if new.engine == "jsonl"]
                if not rows:
                    rows.append(bench_local(address, plan, out.with_suffix(".jsonl"), args.repeat))
                rows[-1] = replace(rows[-1], engine="local (jsonl)")
            else:
                row, startups[engine] = bench_spark(address, plan, engine, out, args.repeat)
                rows.append(row)
            print(f"  {rows[-1].engine}: {rows[-1].seconds:.1f} s", file=sys.stderr)

    if pairs:
        print(f"\nlocal engine, {plan.total:,} messages ({args.body_size} B bodies), medians of {args.repeat}")
        report_formats(pairs, f"{os.cpu_count()} cores, load {load:.1f}")
    print(f"\nreplay of {plan.total:,} messages ({args.body_size} B bodies), JSON lines out\n")
    print(f"{'engine':<18}{'seconds':>9}{'msgs/s':>11}{'MB/s':>8}")
    for r in rows:
        print(f"{r.engine:<18}{r.seconds:>9.1f}{r.rate:>11,.0f}{r.mb_rate:>8.1f}")
    local = next((r for r in rows if r.engine.startswith("local")), None)
    cold = next(iter(startups.values()), None)
    for n, (master, startup) in enumerate(startups.items()):
        kind = "cold: JVM + session + a 100-message job" if n == 0 else "warm JVM: session + a 100-message job"
        print(f"\nspark {master} fixed start-up ({kind}): {startup:.1f} s")
        spark_row = next(r for r in rows if r.engine == f"spark {master}")
        if local is None or cold is None:
            continue
        gain = 1 / local.rate - 1 / spark_row.rate
        if gain <= 0:
            print(f"  never pays off here: {master} is not faster than the local engine")
        else:
            print(f"  a CLI run (cold start {cold:.1f} s) pays off above ~{cold / gain:,.0f} messages")


if __name__ == "__main__":
    main()
