"""What --sql and --dedup cost per message, on an embedded store, against the same replay without.

    .venv/bin/python benchmarks/bench_replay_filters.py                   # 150 k messages, 3 runs each
    .venv/bin/python benchmarks/bench_replay_filters.py --messages 50000 --repeat 5

Builds (once, then reuses) a mock store whose messages carry user properties (kind, retries,
region) and in which one message in twelve is stored twice with the same UNIQ_KEY. Each variant
replays the whole window with the local engine to JSON lines, alternating with the plain replay
so that load on the machine hits both alike; the figure is the median of ``--repeat`` runs of the
process CPU time (user + system) per message, and the cost is the variant minus the plain replay.
A second table times the SQL evaluation alone (compiled expression on a property map), without I/O.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mqadmin.admin import connect
from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import Plan, plan_window
from mqadmin.replay.sinks import open_sink, parse_target
from mqadmin.replay.sql92 import compile_sql
from mqadmin.replay.worker import MessageFilter

T0 = 1_700_000_000_000
SQLS = (
    "kind = 'sms'",
    "kind = 'sms' AND retries > 3 AND region IN ('cn', 'us') AND prio IS NULL",
)


def build_store(root: Path, messages: int) -> str:
    marker = root / f".built-{messages}"
    if marker.exists():
        return f"mock://{root}"
    shutil.rmtree(root, ignore_errors=True)
    cluster = MockCluster.create(root)
    cluster.create_topic("F", 4)
    rng = random.Random(3)
    targets = [(b, q) for b in cluster.brokers.values() for q in range(4)]
    body = b"x" * 256
    for i in range(messages):
        props = {
            "TAGS": rng.choice(("sms", "email", "push")),
            "KEYS": f"order-{i}",
            "UNIQ_KEY": new_uniq_key(),
            "kind": rng.choice(("sms", "email", "push")),
            "retries": str(rng.randrange(16)),
            "region": rng.choice(("cn", "us", "eu")),
        }
        broker, qid = targets[i % len(targets)]
        ts = T0 + i // 100
        broker.put_message(Message("F", body, props, queue_id=qid), store_timestamp=ts)
        if i % 12 == 5:  # a producer's retry
            broker, qid = targets[(i + 1) % len(targets)]
            broker.put_message(Message("F", body, dict(props), queue_id=qid), store_timestamp=ts)
    cluster.close()
    marker.touch()
    return f"mock://{root}"


def make_plan(address: str) -> Plan:
    admin = connect(address, read_only=True)
    try:
        return plan_window(admin, admin.topic_route("F").message_queues(), T0, T0 + 10**9, slice_size=8192)
    finally:
        admin.close()


def cpu() -> float:
    """CPU seconds of this process (the local engine runs threads here at this size)."""
    return time.process_time()


def replay(address: str, plan: Plan, flt: MessageFilter, dedup: bool, out: Path) -> tuple[float, int]:
    """CPU seconds of one replay to JSON lines, and how many messages it wrote."""
    admin = connect(address, read_only=True)
    try:
        out.unlink(missing_ok=True)
        t = cpu()
        outcome = run_local(admin, plan, flt, open_sink(parse_target(f"jsonl:{out}")), dedup=dedup)
        return cpu() - t, outcome.written
    finally:
        admin.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=150_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "mqadmin-bench-filters")
    args = ap.parse_args()
    address = build_store(args.store, args.messages)
    plan = make_plan(address)
    out = Path(tempfile.mkdtemp()) / "out.jsonl"
    base = MessageFilter(plan.begin, plan.end)
    variants = [(f"--sql {s!r}", MessageFilter(plan.begin, plan.end, sql=s), False) for s in SQLS]
    variants.append(("--dedup", base, True))
    print(f"{plan.total} messages in the window (one in 13 a duplicate); CPU per message, median of {args.repeat}")
    print(f"{'variant':<95} {'plain us':>9} {'with us':>9} {'cost us':>8} {'written':>8}")
    for name, flt, dedup in variants:
        plain, with_ = [], []
        written = 0
        for _ in range(args.repeat):
            plain.append(replay(address, plan, base, False, out)[0])
            seconds, written = replay(address, plan, flt, dedup, out)
            with_.append(seconds)
        p, w = statistics.median(plain) / plan.total * 1e6, statistics.median(with_) / plan.total * 1e6
        print(f"{name:<95} {p:9.2f} {w:9.2f} {w - p:8.2f} {written:8d}")
    props = {"TAGS": "sms", "kind": "sms", "retries": "7", "region": "us", "UNIQ_KEY": "X", "KEYS": "k"}
    print("\nSQL evaluation alone (compiled expression on one property map)")
    for s in SQLS:
        flt = compile_sql(s)
        n = 200_000
        t = time.perf_counter()
        for _ in range(n):
            flt.matches(props)
        print(f"{s!r:<95} {(time.perf_counter() - t) / n * 1e6:6.2f} us")
    shutil.rmtree(out.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
