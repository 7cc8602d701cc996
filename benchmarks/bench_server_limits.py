"""What idle connections, one expensive request, clients that never read and slowloris peers cost
the mock broker server.

    .venv/bin/python benchmarks/bench_server_limits.py                       # 1,000 and 10,000 idle connections
    .venv/bin/python benchmarks/bench_server_limits.py --idle --cap 200      # only the bad peers, watched 200 s
    .venv/bin/python benchmarks/bench_server_limits.py --server-src /tmp/old  # an older tree's server, same client
    .venv/bin/python benchmarks/bench_server_limits.py --fuzz-inputs 1000000  # also a long codec fuzz run

The server runs in a child process (its own GIL; its threads and RSS read from /proc). Part 1
holds N idle connections and reports the server's threads and RSS, and the latency of a route
request on a fresh connection while they are held, against a baseline with none held. Part 2
creates the widest topic the server allows (--queues, default the server's MAX_QUEUE_NUMS) and
measures route-request latency on the name server while another client fetches that topic's
stats (GET_TOPIC_STATS_INFO) in a loop, against the same latency with no stats running. Part 3
has --unread (16) clients pipeline that topic's stats requests and never read a reply; it reports
the server's RSS before, at its peak and 2 s after they are closed, and when the server cut each
(watched up to --cap seconds). Part 4 opens --slowloris (200) connections that send 3 bytes of a
never-ending frame every 5 s and reports how long the server lets them live. The
soft file-descriptor limit is raised to the hard limit in both processes; N beyond what it
allows is skipped. Medians (and p99) of the requests of each part; ratios against the baseline
measured in the same run.

``--server-src DIR`` runs the server from another source tree (e.g. ``git archive`` of an older
commit), to compare before and after on the same machine in one sitting.

Measured here (2 shared cores, load average 5-6; medians of 3-4 runs; "before" is the
thread-per-connection server, run from its tree in the same sitting):

    idle connections held       0        1,000           10,000
    server threads, before      3        2,005           20,005
    server threads, after       12       12              12
    server RSS MB, before       24.3     61.9            400.9
    server RSS MB, after        27.0     30.7            65.7
    route latency, after        ~0.1 ms median with any of them held (x0.6-1.1 of none held)

    route while another client loops GET_TOPIC_STATS_INFO of the widest topic:
    before, 100,000 queues: stats 3.4 s each, route p99 755 ms
    after, 1,024 queues (the cap): stats 6-10 ms, route median 0.08-0.16 ms, p99 6-12 ms

Bad peers (load average 5-10; "before" is the server that cut only at 64 MiB per connection and
counted any byte as activity; after: default limits, 4 runs; before: 2-3 runs):

    16 clients that never read       server RSS peak            cut after
    before                           172 MB at 120 s, 488-728 MB at 200 s (growing)   none within 200 s
    after                            54-55 MB (29 MB with none) 75-85 s (reply timeout 60 s, after the
                                                                kernel's socket buffers filled)
    200 slowloris connections        closed after
    before                           none within 200 s
    after                            30.1-30.5 s (median and max alike: the 30 s frame timeout)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqadmin.protocol.codec import FrameDecoder, RemotingCommand, encode  # noqa: E402
from mqadmin.protocol.codes import RequestCode, ResponseCode  # noqa: E402

TOPIC = "TopicTest"
WIDE = "WideTopic"

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
cluster = MockCluster.create(Path(sys.argv[1]), ("broker-a",), version="5.3.3")
cluster.create_topic("TopicTest", 4)
server = MockServer(cluster, namesrv_port=0).start()
print(json.dumps({"namesrv": server.namesrv_addr, "broker": server.broker_addrs["broker-a"]}), flush=True)
sys.stdin.read()
server.stop()
cluster.close()
"""


class Client:
    """A blocking request/reply peer for one connection."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=120)
        self.decoder = FrameDecoder()
        self.opaque = 0

    def call(self, code: int, ext: dict[str, object] | None = None) -> RemotingCommand:
        self.opaque += 1
        self.sock.sendall(encode(RemotingCommand.request(code, ext, opaque=self.opaque)))
        while True:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("closed by the server")
            for cmd in self.decoder.feed(data):
                if cmd.opaque == self.opaque:
                    return cmd

    def close(self) -> None:
        self.sock.close()


def proc_status(pid: int) -> tuple[int, float]:
    """(threads, RSS MB) of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) / 1024


def latencies_ms(addr: str, count: int, code: int = RequestCode.GET_ROUTEINFO_BY_TOPIC) -> list[float]:
    client = Client(addr)
    out = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            reply = client.call(code, {"topic": TOPIC})
            out.append((time.perf_counter() - start) * 1000)
            assert reply.code == ResponseCode.SUCCESS, reply
    finally:
        client.close()
    return out


def summary(values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"median {statistics.median(values):7.2f} ms  p99 {p99:7.2f} ms"


def fd_room() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def idle_part(pid: int, addrs: dict[str, str], counts: list[int], queries: int) -> None:
    print("\n== idle connections: server threads, RSS, route latency on a fresh connection ==")
    threads, rss = proc_status(pid)
    base = latencies_ms(addrs["namesrv"], queries)
    print(f"{'held':>7}  {'threads':>7}  {'RSS MB':>7}  latency (ratio to none held)")
    print(f"{0:>7}  {threads:>7}  {rss:7.1f}  {summary(base)}")
    room = fd_room()
    for n in counts:
        if n + 200 > room:
            print(f"{n:>7}  skipped: the fd limit ({room}) does not allow it")
            continue
        socks: list[socket.socket] = []
        try:
            host, port = addrs["namesrv"].rsplit(":", 1)
            started = time.monotonic()
            for _ in range(n):
                socks.append(socket.create_connection((host, int(port)), timeout=120))
            time.sleep(1.0)  # let the server accept the last ones
            held = latencies_ms(addrs["namesrv"], queries)
            threads, rss = proc_status(pid)
            ratio = statistics.median(held) / statistics.median(base)
            print(
                f"{n:>7}  {threads:>7}  {rss:7.1f}  {summary(held)}  (x{ratio:.2f}; connecting took "
                f"{time.monotonic() - started:.1f} s)"
            )
        except OSError as exc:
            print(f"{n:>7}  failed after {len(socks)} connections: {exc}")
        finally:
            for sock in socks:
                sock.close()
        time.sleep(2.0)


def stats_part(addrs: dict[str, str], queues: int, queries: int) -> None:
    print(f"\n== route latency while another client fetches stats of a {queues}-queue topic ==")
    admin = Client(addrs["broker"])
    created = admin.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": WIDE, "readQueueNums": queues, "writeQueueNums": queues}
    )
    if created.code != ResponseCode.SUCCESS:
        print(f"the server refused a {queues}-queue topic: {created.code} {created.remark}")
        return
    quiet = latencies_ms(addrs["namesrv"], queries)
    stop = threading.Event()
    stats_ms: list[float] = []

    def fetch_stats() -> None:
        client = Client(addrs["broker"])
        try:
            while not stop.is_set():
                start = time.perf_counter()
                reply = client.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": WIDE})
                stats_ms.append((time.perf_counter() - start) * 1000)
                assert reply.code == ResponseCode.SUCCESS
        finally:
            client.close()

    thread = threading.Thread(target=fetch_stats, daemon=True)
    thread.start()
    while not stats_ms:
        time.sleep(0.05)
    busy = latencies_ms(addrs["namesrv"], queries)
    stop.set()
    thread.join(600)
    admin.close()
    print(f"route, quiet        : {summary(quiet)}")
    print(f"route, during stats : {summary(busy)}  (x{statistics.median(busy) / statistics.median(quiet):.2f})")
    print(f"stats request itself: {summary(stats_ms)}  ({len(stats_ms)} fetched)")


class NonReader:
    """A client that pipelines wide stats requests and never reads a reply, until it is cut."""

    def __init__(self, addr: str, request: bytes, started: float) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.request = request
        self.started = started
        self.cut_after: float | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.sock.sendall(self.request * 50)
            except TimeoutError:
                continue
            except OSError:
                self.cut_after = time.monotonic() - self.started
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.sock.close()


def unread_part(pid: int, addrs: dict[str, str], clients: int, cap_s: float) -> None:
    print(f"\n== {clients} clients that never read their replies: server RSS, and when each is cut ==")
    _, rss_before = proc_status(pid)
    # Wide replies: with small ones (routes) loopback TCP stalls the sender long before much piles up.
    request = encode(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": WIDE}))
    peak = [rss_before]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.1):
            peak.append(proc_status(pid)[1])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    peers = [NonReader(addrs["broker"], request, started) for _ in range(clients)]
    while time.monotonic() - started < cap_s and any(p.cut_after is None for p in peers):
        time.sleep(0.2)
    _, rss_held = proc_status(pid)
    for peer in peers:
        peer.close()
    time.sleep(2.0)
    sampling.set()
    sampler.join()
    _, rss_after = proc_status(pid)
    cut = sorted(p.cut_after for p in peers if p.cut_after is not None)
    when = f"cut after {cut[0]:.0f}-{cut[-1]:.0f} s" if cut else "none cut"
    print(
        f"RSS {rss_before:.1f} MB before, peak {max(peak):.1f} MB, {rss_held:.1f} MB at the end of the watch, "
        f"{rss_after:.1f} MB 2 s after they were closed; {len(cut)}/{clients} {when} (watched up to {cap_s:.0f} s)"
    )


def slowloris_part(addrs: dict[str, str], connections: int, interval_s: float, cap_s: float) -> None:
    print(f"\n== slowloris: {connections} connections sending 3 bytes of an endless frame every {interval_s:g} s ==")
    host, port = addrs["namesrv"].rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), timeout=5) for _ in range(connections)]
    started = time.monotonic()
    lived: dict[socket.socket, float] = {}
    next_send = started
    try:
        while time.monotonic() - started < cap_s and len(lived) < connections:
            now = time.monotonic()
            open_socks = [sock for sock in socks if sock not in lived]
            if now >= next_send:
                chunk = b"\x00\x00\x10" if next_send == started else b"\x00\x00\x00"
                next_send += interval_s
                for sock in open_socks:
                    try:  # the frame's length word says 4 KiB; 3 zero bytes at a time never get there
                        sock.sendall(chunk)
                    except OSError:
                        lived[sock] = time.monotonic() - started
            readable, _, _ = select.select([s for s in open_socks if s not in lived], [], [], 0.1)
            for sock in readable:  # the server closed it: EOF (or a reset)
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    lived[sock] = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    if lived:
        values = sorted(lived.values())
        print(
            f"{len(lived)}/{connections} closed by the server: median {statistics.median(values):.1f} s, "
            f"max {values[-1]:.1f} s; {connections - len(lived)} still open after {cap_s:.0f} s"
        )
    else:
        print(f"0/{connections} closed by the server: all still open after {cap_s:.0f} s")


def fuzz_part(inputs: int) -> None:
    from mqadmin.protocol.codec import BadFrame
    from tests.support.fuzz import codec_inputs

    print(f"\n== codec fuzz: {inputs:,} seeded inputs ==")
    started = time.monotonic()
    escaped: dict[str, int] = {}
    bad = 0
    for data in codec_inputs(random.randrange(1 << 30), inputs):
        try:
            FrameDecoder().feed(data)
        except BadFrame:
            bad += 1
        except BaseException as exc:  # what the run looks for
            escaped[type(exc).__name__] = escaped.get(type(exc).__name__, 0) + 1
    print(f"{time.monotonic() - started:.0f} s, {bad:,} BadFrame, other exceptions: {escaped or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, nargs="*", default=[1000, 10000], help="idle connection counts")
    parser.add_argument("--queries", type=int, default=200, help="route requests per measurement")
    parser.add_argument("--queues", type=int, default=0, help="queues of the wide topic (0: MAX_QUEUE_NUMS)")
    parser.add_argument("--server-src", type=Path, help="run the server from this source tree")
    parser.add_argument("--no-unread", action="store_true", help="skip the never-reading clients")
    parser.add_argument("--unread", type=int, default=16, help="clients that never read their replies")
    parser.add_argument("--slowloris", type=int, default=200, help="slowloris connections (0: skip)")
    parser.add_argument("--slowloris-interval", type=float, default=5.0, help="seconds between their bytes")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds to watch the unread and slowloris peers")
    parser.add_argument("--fuzz-inputs", type=int, default=0, help="also run this many codec fuzz inputs")
    args = parser.parse_args()
    queues = args.queues
    if not queues:
        from mqadmin.mock.server import MAX_QUEUE_NUMS

        queues = MAX_QUEUE_NUMS
    fd_room()
    src = args.server_src or REPO
    with tempfile.TemporaryDirectory() as tmp:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(Path(tmp) / "store")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(src)},
            cwd=tmp,
        )
        try:
            assert child.stdout is not None
            addrs = json.loads(child.stdout.readline())
            print(f"server from {src}, load average {os.getloadavg()[0]:.1f}")
            idle_part(child.pid, addrs, args.idle, args.queries)
            stats_part(addrs, queues, args.queries)
            if not args.no_unread:
                unread_part(child.pid, addrs, args.unread, args.cap)
            if args.slowloris:
                slowloris_part(addrs, args.slowloris, args.slowloris_interval, args.cap)
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(120)
    if args.fuzz_inputs:
        fuzz_part(args.fuzz_inputs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
