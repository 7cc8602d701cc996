"""Fan-out: wall time and round trips of our admin commands, and the Java mqadmin beside ours.

Run: .venv/bin/python benchmarks/bench_fanout.py [--runs 5] [--groups 10000] [--no-baseline] [--skip-real]
[--health-only] [--against REV] [--instructions]

Three parts, all in one run (the machine is shared and noisy, so every figure is a median and
commands that are compared are interleaved run by run):

a) a MockServer on loopback over a store of ``--groups`` groups x 1 topic of 8 queues (2 brokers
   x 4): ``mqadmin consumerProgress`` without ``-g`` (every group) and with ``-g``; the server
   runs in this process, so it shares the machine's two cores with the client it measures;
b) the same server, a 256-queue topic: ``mqadmin queryOffset -t T -g G`` (and with ``-s``);
   a) and b) run twice, interleaved: as served, and with the server refusing the batch requests
   (GET_BROKER_CONSUME_STATS, GET_TOPIC_STATS_INFO) as an ACL would — the per-group and
   per-queue fallback, which is the path every command took before — as the baseline;
c) a real Apache RocketMQ 5.3.3 (namesrv + 2 brokers, tests/support/realbroker.py) with
   ``--real-groups`` groups: the Java mqadmin and ours for ``consumerProgress -g G``,
   ``consumerProgress`` (all groups) and ``resetOffsetByTime``, as ratios.

``consumerProgress --no-clients`` (all groups, no connection look-ups) is measured in a), interleaved
with the default all-groups command, and printed as a ratio against it; ``--no-clients --health``
(the same plus the state file: read, every queue evaluated, written back) against ``--no-clients``,
with the state file already holding a full window (as from cron, after the first minutes). ``--against
REV`` adds git revision REV's two, interleaved with them (its package extracted by ``git archive``,
its own state file), and compares ``--health`` now with REV's ``--no-clients``; ``--instructions``
counts the client's instructions in one run of each of those under valgrind, a figure other load
does not move. Every mock case also shows
the client's CPU time (user + sys of the child process), which the shared server does not blur.

Every command runs as a user runs it: a fresh process (``mqadmin`` console script, or a JVM for
the Java tool), output to a pipe. Round trips are counted on the mock server: every request
frame it receives, by request code, so nothing the client does can hide from the count.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.realbroker is stdlib-only and importable as a script helper

from bench_replay_hotpath import baseline_env, count_instructions, extract_baseline  # noqa: E402

from mqadmin.mock.cluster import MockCluster  # noqa: E402
from mqadmin.mock.seed import fill_topic  # noqa: E402
from mqadmin.mock.server import MockServer  # noqa: E402
from mqadmin.protocol.codes import RequestCode, ResponseCode  # noqa: E402

MQADMIN = str(Path(sys.executable).parent / "mqadmin")
TOPIC = "FanoutTopic"
WIDE_TOPIC = "WideTopic"
QUEUES_PER_BROKER = 4  # x 2 brokers = the 8 queues of the all-groups case
WIDE_QUEUES_PER_BROKER = 128  # x 2 brokers = 256 queues
MESSAGES_PER_QUEUE = 20
HOUR_MS = 3_600_000
WIDE_CASE = "queryOffset -t T -g G (256 queues)"
#: case -> its baseline case (the same command, the server refusing the batch requests)
BASELINES: dict[str, str] = {}
#: (case, the case it is compared with), both served as usual (e.g. --no-clients vs the default)
COMPARED: list[tuple[str, str]] = []


# ---------------------------------------------------------------------------------------------
# Measuring


class CountingServer(MockServer):
    """The mock server, counting each request frame it handles by (port role, request code).

    Counting where the frames arrive is what makes the figure honest: retries, route lookups
    and fan-out all show up, whatever the client thinks it sent.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.by_code: Counter[tuple[str, int]] = Counter()
        self._count_lock = threading.Lock()

    #: request codes answered NO_PERMISSION (as an ACL would): the client's per-broker fallback
    refused: frozenset[int] = frozenset()

    def _handle(self, conn: Any, req: Any) -> Any:
        if req.code in self.refused and conn.role.name != "namesrv":
            return conn.role.reply(req, ResponseCode.NO_PERMISSION, "refused for the benchmark's baseline")
        return super()._handle(conn, req)

    def _dispatch(self, conn: Any, req: Any) -> None:
        if not req.is_response:
            with self._count_lock:
                self.by_code["namesrv" if conn.role.name == "namesrv" else "broker", req.code] += 1
        super()._dispatch(conn, req)

    def take(self) -> Counter[tuple[str, int]]:
        """The counts since the last call (and start counting afresh)."""
        with self._count_lock:
            out, self.by_code = self.by_code, Counter()
        return out


@dataclass
class Sample:
    seconds: list[float] = field(default_factory=list)
    #: the command process's user + sys CPU seconds
    cpu: list[float] = field(default_factory=list)
    round_trips: list[int] = field(default_factory=list)
    by_code: Counter[tuple[str, int]] = field(default_factory=Counter)
    note: str = ""
    #: --instructions: the client's instructions in one run, counted by valgrind
    instructions: int | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def run(
    cmd: Sequence[str], env: dict[str, str], *, check_ok: Callable[[subprocess.CompletedProcess[str]], bool]
) -> float:
    """Wall time of one command, which must succeed (a failed run must not be timed as fast)."""
    return run_cpu(cmd, env, check_ok=check_ok)[0]


def run_cpu(
    cmd: Sequence[str],
    env: dict[str, str],
    *,
    check_ok: Callable[[subprocess.CompletedProcess[str]], bool],
    cwd: Path | None = None,
) -> tuple[float, float, int]:
    """(wall, CPU) seconds of one command and its exit code; CPU is the child's user + sys, so the
    server's work in this process is not counted."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        list(cmd), env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not check_ok(proc):
        raise RuntimeError(
            f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.returncode


def exit_zero(proc: subprocess.CompletedProcess[str]) -> bool:
    return proc.returncode == 0


def any_exit(proc: subprocess.CompletedProcess[str]) -> bool:
    return True


def code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


# ---------------------------------------------------------------------------------------------
# a) + b): the mock server


def build_store(root: Path, groups: int) -> tuple[MockCluster, list[str]]:
    """``groups`` groups with offsets on an 8-queue topic, and a 256-queue topic with one group.

    Built with model calls (no sends): what a real store holds after consumers came and went.
    """
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version="5.3.3")
    now = int(time.time() * 1000)
    fill_topic(cluster, TOPIC, MESSAGES_PER_QUEUE * 2 * QUEUES_PER_BROKER, now - HOUR_MS, now - 1000)
    fill_topic(
        cluster,
        WIDE_TOPIC,
        2 * 2 * WIDE_QUEUES_PER_BROKER,
        now - HOUR_MS,
        now - 1000,
        queues_per_broker=WIDE_QUEUES_PER_BROKER,
    )
    names = [f"fanout_group_{i:04d}" for i in range(groups)]
    for i, group in enumerate(names):
        for broker in cluster.brokers.values():
            broker.ensure_group(group)  # the subscription group and its %RETRY% topic
            for q in range(QUEUES_PER_BROKER):
                broker.update_consumer_offset(group, TOPIC, q, (i + 3 * q) % (MESSAGES_PER_QUEUE + 1))
    for broker in cluster.brokers.values():
        broker.ensure_group("wide_group")
        for q in range(WIDE_QUEUES_PER_BROKER):
            broker.update_consumer_offset("wide_group", WIDE_TOPIC, q, q % 3)
    cluster.flush()
    return cluster, names


def bench_mock(
    args: argparse.Namespace, env: dict[str, str], work: Path, against: tuple[str, Path] | None = None
) -> dict[str, Sample]:
    t0 = time.monotonic()
    cluster, groups = build_store(work / "mock-store", args.groups)
    print(f"# mock store: {args.groups} groups, built in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    server = CountingServer(cluster, namesrv_port=0)
    server.start()
    ns = server.namesrv_addr
    now = int(time.time() * 1000)
    all_groups = f"consumerProgress (all {args.groups} groups)"
    no_clients = f"{all_groups} --no-clients"
    health = f"{no_clients} --health"
    wide = [MQADMIN, "queryOffset", "-n", ns, "-t", WIDE_TOPIC, "-g", "wide_group", "--json"]
    cases = {
        "mqadmin --help (process start only)": [MQADMIN, "--help"],
        all_groups: [MQADMIN, "consumerProgress", "-n", ns, "--json"],
        no_clients: [MQADMIN, "consumerProgress", "-n", ns, "--json", "--no-clients"],
        health: [MQADMIN, "consumerProgress", "-n", ns, "--json", "--no-clients", "--health", "--fail-on", "ERR"],
        "consumerProgress -g G (8 queues)": [MQADMIN, "consumerProgress", "-n", ns, "-g", groups[0], "--json"],
        WIDE_CASE: wide,
        "queryOffset -t T -g G -s (256 queues)": [*wide, "-s", str(now - HOUR_MS // 2)],
    }
    if args.health_only:  # the cost of --health alone: the two cases it is compared by
        cases = {no_clients: cases[no_clients], health: cases[health]}
    # each case's environment and folder: --against REV's cases run that revision's package, with
    # a state file of their own (a revision's state file form may not be this one's)
    where: dict[str, tuple[dict[str, str], Path | None]] = dict.fromkeys(cases, (env, None))
    if against is not None:
        rev, tree = against
        rev_env = {**env, "PYTHONPATH": baseline_env(tree)["PYTHONPATH"], "MQADMIN_HOME": str(work / "home-rev")}
        for name in (no_clients, health):
            cases[f"{name} @{rev}"] = [sys.executable, "-m", "mqadmin", *cases[name][1:]]
            where[f"{name} @{rev}"] = (rev_env, tree)
    baseline_of = (
        {}
        if args.no_baseline or args.health_only
        else {all_groups: f"{all_groups} [per group]", WIDE_CASE: f"{WIDE_CASE} [per queue]"}
    )
    BASELINES.update(baseline_of)
    if all_groups in cases:
        COMPARED.append((no_clients, all_groups))
    COMPARED.append((health, no_clients))
    if against is not None:
        rev = against[0]
        COMPARED.append((f"{health} @{rev}", f"{no_clients} @{rev}"))
        # the all-groups budget was set for --no-clients: --health now against it as it was
        COMPARED.append((health, f"{no_clients} @{rev}"))
        COMPARED.append((no_clients, f"{no_clients} @{rev}"))
    batch_codes = frozenset({RequestCode.GET_BROKER_CONSUME_STATS, RequestCode.GET_TOPIC_STATS_INFO})
    samples = {name: Sample() for name in [*cases, *baseline_of.values()]}
    try:
        # one untimed run each: checks the output is complete, warms the page cache
        for name in (n for n in cases if n in (all_groups, no_clients) or n.startswith(f"{no_clients} @")):
            out = subprocess.run(cases[name], env=where[name][0], capture_output=True, text=True, cwd=where[name][1])
            listed = len(json.loads(out.stdout)["groups"])
            if listed != args.groups + 1:  # + wide_group
                raise RuntimeError(f"{name} listed {listed} groups, expected {args.groups + 1}: {out.stderr}")
        for name in [n for n in cases if n.startswith(health)]:
            if name != health and run_cpu(cases[name], where[name][0], check_ok=any_exit, cwd=where[name][1])[2] == 2:
                del cases[name], samples[name]  # a revision from before --health: its --no-clients alone
                print(f"# {name}: not in that revision", file=sys.stderr)
                continue
            for _ in range(5):  # the default window: the state file in its steady size
                run_cpu(cases[name], where[name][0], check_ok=exit_zero, cwd=where[name][1])
        for name, cmd in cases.items():
            if name not in (all_groups, no_clients, health):
                run_cpu(cmd, where[name][0], check_ok=exit_zero, cwd=where[name][1])
        server.take()
        for _ in range(args.runs):
            for name, cmd in cases.items():
                for refused, key in ((False, name), (True, baseline_of.get(name))):
                    if key is None:
                        continue
                    server.refused = batch_codes if refused else frozenset()
                    wall, cpu, _ = run_cpu(cmd, where[name][0], check_ok=exit_zero, cwd=where[name][1])
                    samples[key].seconds.append(wall)
                    samples[key].cpu.append(cpu)
                    counts = server.take()
                    samples[key].round_trips.append(sum(counts.values()))
                    samples[key].by_code = counts
            server.refused = frozenset()
        if args.instructions:  # one run each under valgrind, all started the same way
            for name in [n for n in cases if n.startswith(no_clients)]:
                cmd = cases[name] if cases[name][0] != MQADMIN else [sys.executable, "-m", "mqadmin", *cases[name][1:]]
                samples[name].instructions = count_instructions(cmd, where[name][0], where[name][1])
        if health in cases:
            size = sum(p.stat().st_size for p in (Path(env["MQADMIN_HOME"]) / "state").glob("health-*.json"))
            print(f"# health state file: {size / 1e6:.1f} MB, a full window", file=sys.stderr)
    finally:
        server.stop()
        cluster.close()
    return samples


# ---------------------------------------------------------------------------------------------
# c): a real 5.3.3 broker, Java mqadmin beside ours


def bench_real(args: argparse.Namespace, env: dict[str, str], work: Path) -> dict[str, tuple[Sample, Sample]]:
    from mqadmin.model import Message
    from mqadmin.protocol.codec import RemotingCommand
    from mqadmin.remoting.backend import RemotingAdmin
    from mqadmin.remoting.client import RemotingClient
    from tests.support import realbroker as rb

    version = "5.3.3"
    groups = [f"real_group_{i:03d}" for i in range(args.real_groups)]
    with rb.RealCluster(version, work / "rmq", brokers=2) as cluster:
        ns = cluster.namesrv_addr
        client = RemotingClient(ns, timeout=10)
        try:
            fields = {
                "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": QUEUES_PER_BROKER,
                "writeQueueNums": QUEUES_PER_BROKER, "perm": 6, "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0, "order": False,
            }  # fmt: skip
            for addr in cluster.broker_addrs:
                client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
            # One heartbeat per broker makes every group known (subscription group + %RETRY%
            # topic, which Java's consumerProgress needs); the groups are offline afterwards.
            consumers = [
                {
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                    "groupName": g, "messageModel": "CLUSTERING", "unitMode": False,
                    "subscriptionDataSet": [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                                             "subString": "*", "subVersion": 1, "tagsSet": [], "topic": TOPIC}],
                }
                for g in groups
            ]  # fmt: skip
            body = json.dumps({"clientID": "127.0.0.1@bench", "consumerDataSet": consumers, "producerDataSet": []})
            for addr in cluster.broker_addrs:
                client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body.encode()))
        finally:
            client.close()
        admin = RemotingAdmin(ns, timeout=10)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    queues = admin.topic_route(TOPIC).message_queues()
                    admin.topic_route("%RETRY%" + groups[-1])
                    if len(queues) == 2 * QUEUES_PER_BROKER:
                        break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.2)
            for i in range(10 * len(queues)):
                admin.send(
                    TOPIC, Message(TOPIC, f"bench-{i}".encode(), {"TAGS": "TagA"}), queue=queues[i % len(queues)]
                )
                time.sleep(0.003)
            times = [m.store_timestamp for m in admin.pull(queues[0], 0, 32).messages]
            for i, g in enumerate(groups):
                for q, mq in enumerate(queues):
                    admin.update_consumer_offset(g, mq, (i + q) % 11)
        finally:
            admin.close()
        # two mid-stream times: every reset run moves the offsets, for both tools alike
        stamps = [str(times[3]), str(times[6])]
        g0 = groups[0]

        def java(*argv: str) -> Callable[[], float]:
            """A timed Java mqadmin run through the harness (fresh JVM, as a user runs it)."""

            def timed() -> float:
                start = time.perf_counter()
                cluster.mqadmin(*argv)  # raises on a stack trace or a usage error
                return time.perf_counter() - start

            return timed

        def ours(*argv: str) -> Callable[[], float]:
            return lambda: run([MQADMIN, *argv, "-n", ns], env, check_ok=exit_zero)

        backups = work / "backups"
        cases: dict[str, Callable[[int], tuple[Callable[[], float], Callable[[], float]]]] = {
            "consumerProgress -g G": lambda _: (java("consumerProgress", "-g", g0), ours("consumerProgress", "-g", g0)),
            f"consumerProgress (all {len(groups)} groups)": lambda _: (java("consumerProgress"), ours("consumerProgress")),
            "resetOffsetByTime -g G -t T -s ms": lambda i: (
                java("resetOffsetByTime", "-g", groups[1], "-t", TOPIC, "-s", stamps[i % 2]),
                ours("resetOffsetByTime", "-g", groups[2], "-t", TOPIC, "-s", stamps[i % 2],
                     "--yes", "--backup", str(backups / f"b{i}.json")),
            ),
        }  # fmt: skip
        results = {name: (Sample(), Sample()) for name in cases}
        for make in cases.values():  # untimed: both work on this state (and the JVM's files are cached)
            for timed in make(0):
                timed()
        for i in range(1, args.real_runs + 1):
            for name, make in cases.items():
                java_run, ours_run = make(i)
                results[name][0].seconds.append(java_run())
                results[name][1].seconds.append(ours_run())
        print(f"# real {version} cluster start {cluster.timings.get('start', 0):.1f}s", file=sys.stderr)
    return results


# ---------------------------------------------------------------------------------------------
# Report


def report_mock(samples: dict[str, Sample], runs: int) -> None:
    print(f"\nMock server (2 brokers, loopback), median of {runs} runs, fresh process each:")
    head = f"{'command':<56} {'wall ms':>9} {'min ms':>8} {'cpu ms':>8} {'round trips':>12}"
    print(f"{head}  by request (namesrv/broker)")
    for name, s in samples.items():
        trips = s.round_trips[-1]
        same = "" if len(set(s.round_trips)) == 1 else f" (varied {min(s.round_trips)}-{max(s.round_trips)})"
        top = ", ".join(f"{where[0]}:{code_name(code)}={n}" for (where, code), n in s.by_code.most_common(6))
        cpu = statistics.median(s.cpu) * 1000
        print(f"{name:<56} {s.median * 1000:>9.0f} {min(s.seconds) * 1000:>8.0f} {cpu:>8.0f} {trips:>12}{same}  {top}")
    for name, base in BASELINES.items():
        if name in samples and base in samples:
            ratio = samples[base].median / samples[name].median
            print(f"{name}: {ratio:.1f}x the speed of its baseline (median {samples[base].median * 1000:.0f} ms)")
    for name, other in COMPARED:
        if name in samples and other in samples:
            a, b = samples[name], samples[other]
            # the runs are interleaved: run i of one beside run i of the other shares the machine's
            # load of that moment, so the median of the per-run ratios is the steadier figure
            per_run = statistics.median(x / y for x, y in zip(a.cpu, b.cpu, strict=True))
            print(
                f"{name}: {b.median / a.median:.2f}x the speed of {other} ({b.median * 1000:.0f} ms), "
                f"client CPU {statistics.median(a.cpu) * 1000:.0f} ms against {statistics.median(b.cpu) * 1000:.0f} ms "
                f"({statistics.median(a.cpu) / statistics.median(b.cpu):.2f}x; per run, median {per_run:.2f}x), "
                f"round trips {b.round_trips[-1]} -> {a.round_trips[-1]}"
            )
            if a.instructions and b.instructions:
                print(
                    f"  instructions (valgrind, one run each): {a.instructions / 1e9:.2f} G against "
                    f"{b.instructions / 1e9:.2f} G, {a.instructions / b.instructions:.3f}x"
                )


def report_real(results: dict[str, tuple[Sample, Sample]], runs: int) -> None:
    print(f"\nReal RocketMQ 5.3.3 (namesrv + 2 brokers), median of {runs} runs, interleaved:")
    print(f"{'command':<36} {'Java ms':>9} {'ours ms':>9} {'Java/ours':>10}")
    for name, (java, ours) in results.items():
        print(f"{name:<36} {java.median * 1000:>9.0f} {ours.median * 1000:>9.0f} {java.median / ours.median:>9.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per mock case (median)")
    parser.add_argument("--groups", type=int, default=10000, help="groups on the mock server")
    parser.add_argument("--real-groups", type=int, default=50, help="groups on the real broker")
    parser.add_argument("--real-runs", type=int, default=5, help="timed runs per real-broker case (median)")
    parser.add_argument("--skip-real", action="store_true", help="only the mock server parts (no JVM)")
    parser.add_argument(
        "--health-only",
        action="store_true",
        help="only consumerProgress --no-clients and --no-clients --health, interleaved (implies --skip-real)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the per-group/per-queue baseline (with 10,000 groups it takes minutes: the mock's "
        "per-group stats scan every offset of the broker)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the client's instructions in one run of each --no-clients case under valgrind (minutes)",
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="also run git revision REV's --no-clients and --no-clients --health, interleaved, and compare "
        "--health now with REV's --no-clients (the all-groups budget it was set by)",
    )
    args = parser.parse_args()
    against = extract_baseline(args.against) if args.against else None
    work = Path(tempfile.mkdtemp(prefix="mqadmin-bench-fanout-"))
    env = {**os.environ, "MQADMIN_HOME": str(work / "home"), "NO_COLOR": "1"}
    env.pop("NAMESRV_ADDR", None)
    # timed with bytecode, as an installed package has it: the untimed first runs write it (for an
    # --against tree too), whatever PYTHONDONTWRITEBYTECODE says
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        mock = bench_mock(args, env, work, against)
        report_mock(mock, args.runs)
        if not (args.skip_real or args.health_only):
            real = bench_real(args, env, work)
            report_real(real, args.real_runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if against is not None:
            shutil.rmtree(against[1], ignore_errors=True)


if __name__ == "__main__":
    main()
