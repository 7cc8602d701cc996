"""Ingest into `mockBroker` over TCP: batch producers against the mock server, msg/s.

Run: .venv/bin/python benchmarks/bench_mock_ingest.py [--messages 30000] [--repeat 3] [--baseline REV]

The producer is the shape a Java batch producer has (4 threads, each sending SEND_BATCH_MESSAGE
of 64 × 1 KiB messages and waiting for the reply before the next), written on raw sockets so it
costs the client little CPU. Each run serves a fresh store in its own process; with
``--baseline REV`` (default: the merge base with ``main``) the same producer also runs against
the mock server of that git revision, interleaved, and the ratio is printed. ``--real 5.5.1``
also runs it against a real broker of that version (Java 17+, from Maven Central like the
suite's; its default flushDiskType=ASYNC_FLUSH), once per round, and prints the mock's rate as a
share of the broker's. ``--batch 1`` sends one SEND_MESSAGE_V2 per message instead. ``--java``
sends with the official Java client instead (``benchmarks/java-replayer``'s JavaBatchProducer: one
DefaultMQProducer, the same threads, batches and sizes, built with Maven against the client of
``--real``'s version, default 5.5.1), timed inside the JVM from its first send.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mqadmin.message import format_properties  # noqa: E402
from mqadmin.protocol.codec import RemotingCommand, encode  # noqa: E402
from mqadmin.protocol.codes import RequestCode, ResponseCode  # noqa: E402

TOPIC = "BenchIngest"
QUEUES = 8

SERVER = """
import json, sys
from pathlib import Path
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
cluster = MockCluster.create(Path(sys.argv[1]), ("broker-a",))
cluster.create_topic(sys.argv[2], int(sys.argv[3]))
server = MockServer(cluster, namesrv_port=0, broker_ports=[0])
server.start()
print(json.dumps([server.broker_addrs["broker-a"], server.namesrv_addr]), flush=True)
sys.stdin.read()
server.stop()
cluster.close()
"""


def batch_body(count: int, size: int, seq: int) -> bytes:
    """A SEND_BATCH_MESSAGE body as the Java client encodes it (MessageDecoder.encodeMessages)."""
    out = []
    for i in range(count):
        body = (b"%08d" % (seq + i)) * (size // 8)
        props = format_properties({"UNIQ_KEY": f"BENCH{seq + i:024X}", "WAIT": "true", "TAGS": "TagA"}).encode()
        total = 20 + len(body) + 2 + len(props)
        out.append(struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(props)) + props)
    return b"".join(out)


def header(qid: int, batch: bool) -> dict[str, object]:
    return {
        "a": "bench_producer",
        "b": TOPIC,
        "c": "TBW102",
        "d": QUEUES,
        "e": qid,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": "" if batch else format_properties({"WAIT": "true", "TAGS": "TagA"}),
        "j": 0,
        "k": False,
        "m": batch,
    }


def recv_frame(sock: socket.socket, buf: bytearray) -> bytes:
    while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    end = 4 + int.from_bytes(buf[:4], "big")
    frame = bytes(buf[4:end])
    del buf[:end]
    return frame


def reply_code(frame: bytes) -> int:
    head_len = int.from_bytes(frame[:4], "big") & 0xFFFFFF
    if frame[0] == 0:  # JSON header
        return int(json.loads(frame[4 : 4 + head_len])["code"])
    return int.from_bytes(frame[4:6], "big", signed=True)


def producer(addr: str, thread_no: int, requests: int, batch: int, size: int, errors: list[str]) -> None:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    code = RequestCode.SEND_BATCH_MESSAGE if batch > 1 else RequestCode.SEND_MESSAGE_V2
    # bodies built before the clock starts, as a producer's messages exist before it sends them
    bodies = [
        batch_body(batch, size, (thread_no * requests + r) * batch) if batch > 1 else b"x" * size
        for r in range(requests)
    ]
    barrier.wait()
    try:
        for r, body in enumerate(bodies):
            req = RemotingCommand.request(code, header((thread_no + r) % QUEUES, batch > 1), body, opaque=r + 1)
            sock.sendall(encode(req))
            got = reply_code(recv_frame(sock, buf))
            if got != ResponseCode.SUCCESS:
                errors.append(f"send answered code {got}")
                return
    finally:
        sock.close()


barrier: threading.Barrier


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of processes so far (Linux /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def produce(addr: str, pids: list[int], messages: int, threads: int, batch: int, size: int) -> tuple[float, float]:
    """msg/s of one producer run against the broker at ``addr``, and the CPU µs per message of
    the server's processes ``pids``."""
    global barrier
    per_thread = messages // threads // batch
    errors: list[str] = []
    barrier = threading.Barrier(threads + 1)
    workers = [
        threading.Thread(target=producer, args=(addr, t, per_thread, batch, size, errors)) for t in range(threads)
    ]
    for w in workers:
        w.start()
    barrier.wait()
    start, cpu = time.perf_counter(), cpu_seconds(pids)
    for w in workers:
        w.join()
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(pids) - cpu
    if errors:
        raise SystemExit(f"{addr}: {errors[0]}")
    sent = per_thread * batch * threads
    return sent / elapsed, cpu / sent * 1e6


def produce_java(
    java: list[str], namesrv: str, pids: list[int], messages: int, threads: int, batch: int, size: int
) -> tuple[float, float]:
    """``produce`` with the Java batch producer (``java``: its command up to the main class)."""
    cpu = cpu_seconds(pids)
    cmd = [*java, namesrv, TOPIC, str(messages), str(threads), str(batch), str(size)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    cpu = cpu_seconds(pids) - cpu  # the JVM's start-up sends nothing: the server idles through it
    if proc.returncode != 0:
        raise SystemExit(f"the Java producer failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    return got["sent"] / got["seconds"], cpu / got["sent"] * 1e6


def java_producer(version: str, workdir: Path) -> list[str]:
    """The command that runs JavaBatchProducer on ``version``'s client jars (built with Maven)."""
    from bench_replay_vs_java import build_replayer

    from tests.support import realbroker as rb

    # the client's own release: a 5.5.0 client on 5.5.1's remoting jar (the broker's lib dir of
    # a split release) opens a connection to the name server and never sends on it
    lib = rb.ensure_dist(rb.module_version(version, "rocketmq-client"))
    classes = build_replayer(version, lib)
    return [
        rb.java_binary(),
        f"-Duser.home={workdir / 'java-home'}",
        f"-Drocketmq.client.logRoot={workdir / 'java-logs'}",
        "-cp",
        f"{classes}{os.pathsep}{lib / '*'}",
        "bench.JavaBatchProducer",
    ]


def run_once(
    tree: Path, messages: int, threads: int, batch: int, size: int, java: list[str] | None = None
) -> tuple[float, float]:
    """msg/s of one producer run against a fresh store served from the source ``tree``, and
    the server's CPU µs per message."""
    store = Path(tempfile.mkdtemp(prefix="mqadmin-ingest-")) / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(store), TOPIC, str(QUEUES)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
    )
    try:
        assert proc.stdout is not None
        addr, namesrv = json.loads(proc.stdout.readline())
        if java is not None:
            return produce_java(java, namesrv, [proc.pid], messages, threads, batch, size)
        return produce(addr, [proc.pid], messages, threads, batch, size)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=60)
        subprocess.run(["rm", "-rf", str(store.parent)], check=False)


@contextlib.contextmanager
def real_broker(version: str) -> Iterator[tuple[str, str, list[int]]]:
    """A one-broker real cluster with the topic: (broker address, name server, its JVMs' pids)."""
    from tests.support import realbroker as rb

    with tempfile.TemporaryDirectory(prefix="mqadmin-ingest-real-") as tmp, rb.RealCluster(version, tmp) as cluster:
        addr = cluster.broker_addrs[0]
        ext = {
            "topic": TOPIC,
            "defaultTopic": "TBW102",
            "readQueueNums": QUEUES,
            "writeQueueNums": QUEUES,
            "perm": 6,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": False,
        }
        head, _ = rb.remoting_call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {k: str(v) for k, v in ext.items()})
        if head.get("code") != 0:
            raise SystemExit(f"cannot create {TOPIC} on the real broker: {head}")
        yield addr, cluster.namesrv_addr, java_children()


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


def baseline_tree(rev: str) -> Path:
    """The ``mqadmin`` package of git revision ``rev``, extracted into a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="mqadmin-baseline-"))
    archive = subprocess.run(["git", "archive", rev, "mqadmin"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="git revision to compare with (default: merge base with main)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--real", metavar="VERSION", help="also a real broker of this version, e.g. 5.5.1")
    parser.add_argument("--java", action="store_true", help="send with the official Java client's batch producer")
    args = parser.parse_args()
    java = (
        java_producer(args.real or "5.5.1", Path(tempfile.mkdtemp(prefix="mqadmin-ingest-java-")))
        if args.java
        else None
    )
    trees = {"now": REPO}
    if not args.no_baseline:
        rev = args.baseline
        if rev is None:
            rev = subprocess.run(
                ["git", "merge-base", "HEAD", "main"], cwd=REPO, capture_output=True, text=True, check=True
            ).stdout.strip()
        trees[f"baseline {rev[:10]}"] = baseline_tree(rev)
    rates: dict[str, list[float]] = {name: [] for name in trees}
    cpus: dict[str, list[float]] = {name: [] for name in trees}
    with contextlib.ExitStack() as stack:
        real = stack.enter_context(real_broker(args.real)) if args.real else None
        if real is not None:
            rates[f"real {args.real}"], cpus[f"real {args.real}"] = [], []
        for _ in range(args.repeat):
            for name, tree in trees.items():
                rate, cpu = run_once(tree, args.messages, args.threads, args.batch, args.size, java)
                rates[name].append(rate)
                cpus[name].append(cpu)
            if real is not None:
                if java is not None:
                    rate, cpu = produce_java(java, real[1], real[2], args.messages, args.threads, args.batch, args.size)
                else:
                    rate, cpu = produce(real[0], real[2], args.messages, args.threads, args.batch, args.size)
                rates[f"real {args.real}"].append(rate)
                cpus[f"real {args.real}"].append(cpu)
    what = f"{args.threads} threads × {args.batch} × {args.size} B" if args.batch > 1 else "SEND_MESSAGE_V2"
    what += ", the Java client's producer" if java else ", a raw-socket producer"
    print(f"mock ingest, {args.messages} messages, {what}, medians of {args.repeat}")
    now = statistics.median(rates["now"])
    for name, values in rates.items():
        med = statistics.median(values)
        runs = ", ".join(f"{v:,.0f}" for v in values)
        cpu = statistics.median(cpus[name])
        print(f"{name:<22} {med:>10,.0f} msg/s  ({runs})  now/this {now / med:.2f}  server CPU {cpu:.1f} µs/msg")


if __name__ == "__main__":
    main()
