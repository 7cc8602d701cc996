"""Replay throughput: the local engine against Spark local[1] and local[2], plus Spark's start-up.

    .venv/bin/python benchmarks/bench_replay.py                   # 1 M messages of 1 KiB
    .venv/bin/python benchmarks/bench_replay.py --messages 200000 # a quicker run
    .venv/bin/python benchmarks/bench_replay.py --address HOST:PORT --topic T --begin MS --end MS

Without --address it builds (once, then reuses) an embedded mock store under --store. Every
engine replays the same plan to JSON lines; the table gives messages/s and MB/s of body bytes,
and the plan size where Spark starts to pay off: start-up / (1/local rate - 1/Spark rate).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from mqadmin.admin import connect
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import Plan, plan_window
from mqadmin.replay.sinks import open_sink, parse_target
from mqadmin.replay.worker import MessageFilter

T0 = 1_700_000_000_000
MIB = 1024 * 1024


@dataclass
class Row:
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


def build_store(root: Path, messages: int, body_size: int) -> str:
    """An embedded mock store of ``messages`` bodies of ``body_size`` bytes, 8 queues, 1 ms apart."""
    meta = root / "bench.json"
    want = {"messages": messages, "body_size": body_size}
    if meta.exists() and json.loads(meta.read_text()) == want:
        return f"mock://{root}"
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.seed import fill_topic

    shutil.rmtree(root, ignore_errors=True)
    t = time.monotonic()
    cluster = MockCluster.create(root)
    fill_topic(cluster, "Bench", messages, T0, T0 + messages, body_size=body_size)
    cluster.close()
    meta.write_text(json.dumps(want))
    print(f"built {messages} messages of {body_size} B in {time.monotonic() - t:.0f} s", file=sys.stderr)
    return f"mock://{root}"


def make_plan(address: str, topic: str, begin: int, end: int, slice_size: int) -> Plan:
    admin = connect(address, read_only=True)
    try:
        return plan_window(admin, admin.topic_route(topic).message_queues(), begin, end, slice_size=slice_size)
    finally:
        admin.close()


def bench_local(address: str, plan: Plan, out: Path, repeat: int) -> Row:
    flt = MessageFilter(plan.begin, plan.end)
    admin = connect(address, read_only=True)
    best = None
    try:
        for _ in range(repeat):
            t = time.monotonic()
            outcome = run_local(admin, plan, flt, open_sink(parse_target(f"jsonl:{out}")))
            seconds = time.monotonic() - t
            best = seconds if best is None else min(best, seconds)
            out.unlink()
    finally:
        admin.close()
    assert best is not None
    return Row("local (threads)", best, outcome.written, sum(s.bytes for s in outcome.stats.values()))


def bench_spark(address: str, plan: Plan, master: str, out: Path, repeat: int) -> tuple[Row, float]:
    """(the best full replay on a started session, the session's start-up plus a 100-message job).

    The first session of the process also launches the JVM: that start-up is what every CLI run
    with --engine spark pays."""
    from mqadmin.spark.engine import build_session, run_replay

    flt = MessageFilter(plan.begin, plan.end)
    t = time.monotonic()
    spark = build_session(master, {"spark.sql.shuffle.partitions": "2"})
    first = plan.slices[0]
    tiny = Plan(plan.topic, plan.begin, plan.end, plan.ranges, (replace(first, end=min(first.end, first.start + 100)),))
    run_replay(tiny, address, flt, parse_target(f"jsonl:{out}-warmup"), spark=spark)
    startup = time.monotonic() - t
    best = None
    try:
        for i in range(repeat):
            t = time.monotonic()
            outcome = run_replay(plan, address, flt, parse_target(f"jsonl:{out}-{i}"), spark=spark)
            seconds = time.monotonic() - t
            best = seconds if best is None else min(best, seconds)
            shutil.rmtree(f"{out}-{i}")
    finally:
        spark.stop()
    assert best is not None
    row = Row(f"spark {master}", best, outcome.written, sum(s.bytes for s in outcome.stats.values()))
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
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine; the best time counts (noisy hosts)")
    args = ap.parse_args()

    address = args.address or build_store(args.store, args.messages, args.body_size)
    end = args.end or (T0 + args.messages + 1)
    plan = make_plan(address, args.topic, args.begin, end, args.slice_size)
    print(f"plan: {plan.total} messages in {len(plan.slices)} slices from {address}", file=sys.stderr)
    rows: list[Row] = []
    startups: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mqadmin-bench-") as tmp:
        for engine in args.engines.split(","):
            out = Path(tmp) / engine.replace("[", "_").replace("]", "")
            if engine == "local":
                rows.append(bench_local(address, plan, out, args.repeat))
            else:
                row, startups[engine] = bench_spark(address, plan, engine, out, args.repeat)
                rows.append(row)
            print(f"  {rows[-1].engine}: {rows[-1].seconds:.1f} s", file=sys.stderr)

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
