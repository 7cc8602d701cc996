"""What persisting consumer offsets before the acknowledgement costs consumers that commit often.

Run: .venv/bin/python benchmarks/bench_offset_commits.py [--runs 5] [--clients 8] [--commits 200]

A MockServer on loopback (in this process); ``--clients`` consumers, each on its own connection,
send ``--commits`` UPDATE_CONSUMER_OFFSET requests back to back, every one moving its offset (the
worst case: a commit that moves nothing writes nothing). Measured four ways, interleaved run by
run: the server as it is (persist before the ack, concurrent commits share one write), persisting
each commit alone (no sharing), not persisting at all (the periodic flush only, as before), and
the server as it is with oneway commits, which is how consumers send their periodic commits (no
acknowledgement, so nothing to persist first: the periodic flush takes them).
Prints the median commits/s of each and the ratios to "not persisting".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run_once(root: Path, clients: int, commits: int, mode: str) -> float:
    from mqadmin.admin import connect
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.model import MockBroker
    from mqadmin.mock.seed import fill_topic
    from mqadmin.mock.server import MockServer
    from mqadmin.model import MessageQueue
    from mqadmin.protocol.codec import RemotingCommand
    from mqadmin.protocol.codes import RequestCode

    cluster = MockCluster.create(root)
    fill_topic(cluster, "T", 80, 1_700_000_000_000, 1_700_000_600_000)
    for broker in cluster.brokers.values():
        broker.ensure_group("g")
    cluster.flush()
    original = MockBroker.persist_offsets
    lock = threading.Lock()

    def alone(self: MockBroker, version: int | None = None, *, keep_bak: bool = False) -> bool:
        with lock:  # each commit waits for and pays its own write
            self._offsets_saved = 0
            return original(self, None, keep_bak=keep_bak)

    patches: dict[str, Callable[..., bool]] = {
        "none": lambda self, version=None, *, keep_bak=False: False,
        "alone": alone,
    }
    if mode in patches:
        MockBroker.persist_offsets = patches[mode]  # type: ignore[method-assign]
    try:
        with MockServer(cluster, namesrv_port=0) as server:
            admins = [connect(server.namesrv_addr, timeout=30) for _ in range(clients)]
            for i, a in enumerate(admins):  # connect and warm up outside the clock
                a.update_consumer_offset("g", MessageQueue("T", "broker-a", i % 4), 0)
            start = threading.Barrier(clients + 1)
            addr = server.broker_addrs["broker-a"]

            def work(i: int) -> None:
                mq = MessageQueue("T", "broker-a", i % 4)
                start.wait()
                for n in range(1, commits + 1):
                    if mode == "oneway":  # as Java consumers' periodic persistAll sends them
                        fields = {"consumerGroup": "g", "topic": "T", "queueId": mq.queue_id, "commitOffset": n}
                        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)
                        admins[i]._client.invoke_oneway(addr, request)  # type: ignore[attr-defined]
                    else:
                        admins[i].update_consumer_offset("g", mq, n * clients + i)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
            for t in threads:
                t.start()
            start.wait()
            t0 = time.perf_counter()
            for t in threads:
                t.join()
            if mode == "oneway":  # no replies: done when the server has taken the last commits
                broker = cluster.brokers["broker-a"]
                while any(broker.committed_offset("g", "T", q) != commits for q in range(min(clients, 4))):
                    time.sleep(0.001)
            elapsed = time.perf_counter() - t0
            for a in admins:
                a.close()
    finally:
        MockBroker.persist_offsets = original  # type: ignore[method-assign]
        cluster.close()
    return clients * commits / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--commits", type=int, default=200)
    ns = parser.parse_args()
    modes = ("none", "shared", "alone", "oneway")
    rates: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(ns.runs):
            for mode in modes:
                rates[mode].append(run_once(Path(tmp) / f"{mode}{run}", ns.clients, ns.commits, mode))
    base = statistics.median(rates["none"])
    print(f"{ns.clients} clients x {ns.commits} commits, median of {ns.runs} runs (commits/s):")
    for mode, label in (
        ("none", "no persist (periodic flush only)"),
        ("shared", "persist before ack, shared writes"),
        ("alone", "persist before ack, one write each"),
        ("oneway", "oneway commits (as consumers send them)"),
    ):
        med = statistics.median(rates[mode])
        print(f"  {label:38s} {med:9.0f}  ({med / base:.2f}x)")


if __name__ == "__main__":
    main()
