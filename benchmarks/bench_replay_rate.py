"""How close --rate keeps a replay to its rate: a one-minute re-publish at N msg/s, achieved rate.

    .venv/bin/python benchmarks/bench_replay_rate.py                  # 200 msg/s for 60 s, 3 runs
    .venv/bin/python benchmarks/bench_replay_rate.py --rate 50 --seconds 60 --repeat 1
    .venv/bin/python benchmarks/bench_replay_rate.py --to jsonl       # a file sink instead of a topic

Builds an embedded mock store with rate x seconds messages and replays them all with the local
engine to a topic of the same store (``--to topic``, the sends a gateway or a live broker needs
paced) or to a JSON-lines file, with ``--rate``. The achieved rate is messages written / wall time
of the replay; the table gives each run and the median, and the error against the asked rate.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.replay.local import run_local
from mqadmin.replay.planner import plan_window
from mqadmin.replay.sinks import open_sink, parse_target
from mqadmin.replay.worker import MessageFilter

T0 = 1_700_000_000_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=200.0, help="messages per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each replay should take")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--to", choices=("topic", "jsonl"), default="topic")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mqadmin-bench-rate-"))
    count = int(args.rate * args.seconds)
    cluster = MockCluster.create(work / "store")
    fill_topic(cluster, "R", count, T0, T0 + count, queues_per_broker=2)
    cluster.create_topic("RCopy", 2)
    cluster.close()
    address = f"mock://{work / 'store'}"
    rates: list[float] = []
    try:
        for run in range(args.repeat):
            admin = connect(address)
            try:
                plan = plan_window(admin, admin.topic_route("R").message_queues(), T0, T0 + count, slice_size=1024)
                target = parse_target("topic:RCopy" if args.to == "topic" else f"jsonl:{work / f'{run}.jsonl'}")
                sink = open_sink(target, admin=admin)
                t = time.monotonic()
                outcome = run_local(admin, plan, MessageFilter(plan.begin, plan.end), sink, rate=args.rate)
                seconds = time.monotonic() - t
            finally:
                admin.close()
            rates.append(outcome.written / seconds)
            print(f"run {run + 1}: {outcome.written} messages in {seconds:.2f} s = {rates[-1]:.2f} msg/s")
        median = statistics.median(rates)
        error = (median - args.rate) / args.rate * 100
        print(f"asked {args.rate:g} msg/s to {args.to}; achieved median {median:.2f} msg/s ({error:+.2f} %)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
