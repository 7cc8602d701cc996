"""rangeReplay against the Java replayer the RocketMQ community documents, on a real broker.

    .venv/bin/python benchmarks/bench_replay_vs_java.py                      # 5.5.1, 200 k x 1 KiB, cap 32
    .venv/bin/python benchmarks/bench_replay_vs_java.py --pull-cap 256       # a broker that serves 256 a pull
    .venv/bin/python benchmarks/bench_replay_vs_java.py --messages 1000000 --repeat 5
    .venv/bin/python benchmarks/bench_replay_vs_java.py --version 5.3.3
    .venv/bin/python benchmarks/bench_replay_vs_java.py --baseline REV --formats jsonl,parquet

The Java side is ``benchmarks/java-replayer`` (a ``DefaultMQPullConsumer``: for each queue
``searchOffset(begin)`` and ``searchOffset(end)``, then pull the queue from one to the other),
built here with Maven against the ``rocketmq-client`` the broker version's lib dir holds (the
same jars the suite's real brokers run from, ``MQADMIN_RMQ_CACHE``), and run on that lib dir.

One broker (tests/support/realbroker.py, Java 17) with an 8-queue topic is filled with
``--messages`` x ``--size`` messages by a raw-socket batch producer; the window is the time the
producer ran. Each round runs, in an order rotated per round: ``mqadmin rangeReplay`` to JSON
lines as a user runs it (a fresh CLI process; default workers and ``--workers 1``), and the Java
replayer with ``pull(..., 32)`` and ``pull(..., 256)``. Every run's file must hold exactly the
produced messages, the same set by (broker, queue, offset, store time, body). Printed: per run
kind the medians of wall time (process start to exit, JVM and interpreter start included), msg/s,
client CPU us per message and broker CPU us per message, then mqadmin's rate over Java's, each
pair taken from the same round: by wall time, and against the Java pull loop alone (the replayer
reports how long its consumer took to start, to replay and to shut down). A broker serves at most ``maxTransferCountOnMessageInMemory``
messages a pull (32 by default) and ``maxTransferBytesOnMessageInMemory`` bytes (and the
``...InDisk`` pair for messages no longer in the page cache); ``--pull-cap N`` raises all four
(bytes to N x 4 KiB), so a 256-message pull really returns 256. The machine's load average is
printed beside the figures: on a shared machine the ratios, not the rates, are what carry over.

``--formats jsonl,parquet`` adds mqadmin runs to Parquet (``--to parquet:PATH``, one file; its
rows are checked against the same set). ``--baseline REV`` adds, per format, a run of git
revision REV's CLI (extracted with ``git archive``, run by the same interpreter with its default
options), named ``mqadmin@REV``; then printed per format: client CPU per message of the baseline
and of now (default workers), now over baseline as the median of the per-round ratios and as
the ratio of the medians, the broker's CPU per message of both, and the load average before and
after the rounds. The Java replayer always writes JSON lines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_mock_ingest import QUEUES, TOPIC, cpu_seconds, java_children  # noqa: E402
from bench_mock_ingest import produce as produce_batches  # noqa: E402
from bench_replay_hotpath import baseline_env, extract_baseline  # noqa: E402

from mqadmin.replay.records import record_body  # noqa: E402
from tests.support import realbroker as rb  # noqa: E402

JAVA_PROJECT = Path(__file__).resolve().parent / "java-replayer"
JAVA_MAIN = "bench.JavaReplayer"
PRODUCER_THREADS = 4
PRODUCER_BATCH = 64
PRODUCE_CHUNK = 400 * PRODUCER_THREADS * PRODUCER_BATCH  # bodies of one chunk are built in memory first


@dataclass
class Kind:
    """One way of replaying the window, and its measurements round by round."""

    name: str
    seconds: list[float] = field(default_factory=list)
    client_cpu_us: list[float] = field(default_factory=list)
    broker_cpu_us: list[float] = field(default_factory=list)
    pulls: list[int] = field(default_factory=list)
    inner_seconds: list[float] = field(default_factory=list)


def build_replayer(version: str, lib: Path) -> Path:
    """Compile the Java replayer against ``version``'s rocketmq-client; returns its classes dir."""
    mvn = os.environ.get("MQADMIN_RMQ_MVN") or shutil.which("mvn")
    if not mvn:
        raise SystemExit("mvn not found on PATH; it builds benchmarks/java-replayer")
    client = rb.module_version(version, "rocketmq-client")
    if not (lib / f"org.apache.rocketmq.rocketmq-client-{client}.jar").is_file():
        raise SystemExit(f"{lib} holds no rocketmq-client {client}")
    build = rb.cache_root() / f"java-replayer-{client}"
    cmd = [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(JAVA_PROJECT / "pom.xml")]
    cmd += [f"-Drocketmq.client.version={client}", f"-Dbuild.dir={build}", "compile"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise SystemExit(f"Maven could not build the Java replayer (exit {proc.returncode}):\n{tail}")
    return build / "classes"


@contextlib.contextmanager
def broker(version: str, pull_cap: int | None, workdir: Path) -> Iterator[rb.RealCluster]:
    conf: dict[str, object] = {}
    if pull_cap:
        for where in ("Memory", "Disk"):
            conf[f"maxTransferCountOnMessageIn{where}"] = pull_cap
            conf[f"maxTransferBytesOnMessageIn{where}"] = pull_cap * 4096
    with rb.RealCluster(version, workdir, extra_broker_conf=conf) as cluster:
        cluster.create_topic(TOPIC, QUEUES)
        yield cluster


def fill(addr: str, pids: list[int], messages: int, size: int) -> tuple[int, int, int, float]:
    """Produce about ``messages`` (a multiple of one request round); (count, begin, end, msg/s)."""
    per_round = PRODUCER_THREADS * PRODUCER_BATCH
    count = 0
    begin = int(time.time() * 1000) - 1
    t0 = time.perf_counter()
    while count + per_round <= messages:
        chunk = min(PRODUCE_CHUNK, (messages - count) // per_round * per_round)
        produce_batches(addr, pids, chunk, PRODUCER_THREADS, PRODUCER_BATCH, size)
        count += chunk
    rate = count / (time.perf_counter() - t0)
    time.sleep(0.01)
    return count, begin, int(time.time() * 1000) + 1, rate


def timed(
    cmd: list[str], env: dict[str, str] | None, broker_pids: list[int], cwd: Path | None = None
) -> tuple[float, float, float, str]:
    """Run ``cmd`` to its end: (wall s, its CPU s, the broker's CPU s, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    broker_cpu = cpu_seconds(broker_pids)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    broker_cpu = cpu_seconds(broker_pids) - broker_cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed (exit {proc.returncode}):\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, broker_cpu, proc.stdout


def message_set(path: Path) -> frozenset[tuple[object, ...]]:
    """What identifies each written message (JSON lines or Parquet), to compare runs (bodies as
    bytes, by hash, to save memory)."""
    out = set()
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        keys = ["broker", "queue_id", "queue_offset", "store_timestamp", "body"]
        for batch in pq.ParquetFile(path).iter_batches(columns=keys):
            for broker_name, qid, offset, stored, body in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                out.add((broker_name, qid, offset, stored, hash(body)))
        return frozenset(out)
    with path.open("rb") as fh:
        for line in fh:
            rec = json.loads(line)
            body = record_body(rec)
            out.add((rec["broker"], rec["queue_id"], rec["queue_offset"], rec["store_timestamp"], hash(body)))
    return frozenset(out)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="5.5.1", help="RocketMQ broker version (e.g. 5.3.3)")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians over them")
    ap.add_argument("--pull-cap", type=int, default=None, help="broker's max messages a pull (default: its own, 32)")
    ap.add_argument("--pull-sizes", default="32,256", help="the Java replayer's pull sizes")
    ap.add_argument("--workers", default="default,1", help="mqadmin --workers values ('default': none given)")
    ap.add_argument("--formats", default="jsonl", help="mqadmin's outputs: jsonl, parquet or both (jsonl,parquet)")
    ap.add_argument("--baseline", default=None, metavar="REV", help="also run git revision REV's CLI, per format")
    args = ap.parse_args()
    formats = [f.strip() for f in args.formats.split(",")]
    if not formats or set(formats) - {"jsonl", "parquet"}:
        raise SystemExit(f"--formats {args.formats}: give jsonl, parquet or both")
    baseline = extract_baseline(args.baseline) if args.baseline else None
    try:
        run_all(args, formats, baseline)
    finally:
        if baseline:
            shutil.rmtree(baseline[1], ignore_errors=True)


def mqadmin_name(fmt: str, workers: str = "default", rev: str | None = None) -> str:
    name = "mqadmin" + (f"@{rev}" if rev else "") + ("" if fmt == "jsonl" else f" {fmt}")
    return name + ("" if workers == "default" else f" --workers {workers}")


def run_all(args: argparse.Namespace, formats: list[str], baseline: tuple[str, Path] | None) -> None:
    os.environ.setdefault("MQADMIN_RMQ_CACHE", str(rb.cache_root()))
    lib = rb.ensure_dist(args.version)
    print(f"building the Java replayer against {args.version}'s rocketmq-client ...", flush=True)
    classes = build_replayer(args.version, lib)
    java = rb.java_binary()
    pull_sizes = [int(s) for s in args.pull_sizes.split(",")]
    worker_opts = [w.strip() for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="mqadmin-bench-vs-java-") as tmp_name:
        tmp = Path(tmp_name)
        with broker(args.version, args.pull_cap, tmp / "cluster") as cluster:
            addr = cluster.broker_addrs[0]
            pids = java_children()
            count, begin, end, produce_rate = fill(addr, pids, args.messages, args.size)
            print(f"produced {count:,} x {args.size} B into {TOPIC} ({QUEUES} queues) at {produce_rate:,.0f} msg/s")
            java_env = rb._child_env()
            replay = [sys.executable, "-m", "mqadmin", "rangeReplay", "-n", cluster.namesrv_addr]
            replay += ["-t", TOPIC, "-b", str(begin), "-e", str(end)]
            # name -> (command, environment, working directory, output file suffix)
            runs: dict[str, tuple[list[str], dict[str, str] | None, Path | None, str]] = {}
            for fmt in formats:
                if baseline:
                    rev, tree = baseline
                    runs[mqadmin_name(fmt, rev=rev)] = (
                        [*replay, "--to", f"{fmt}:{{out}}"],
                        baseline_env(tree),
                        tree,
                        fmt,
                    )
                for w in worker_opts:
                    extra = [] if w == "default" else ["--workers", w]
                    runs[mqadmin_name(fmt, w)] = ([*replay, *extra, "--to", f"{fmt}:{{out}}"], None, None, fmt)
            for size in pull_sizes:
                java_cmd = [
                    java,
                    f"-Duser.home={tmp / 'java-home'}",
                    f"-Drocketmq.client.logRoot={tmp / 'java-logs'}",
                    "-cp",
                    f"{classes}{os.pathsep}{lib / '*'}",
                    JAVA_MAIN,
                    cluster.namesrv_addr,
                    TOPIC,
                    str(begin),
                    str(end),
                    str(size),
                    "{out}",
                ]
                runs[f"java pull {size}"] = (java_cmd, java_env, None, "jsonl")
            kinds = {name: Kind(name) for name in runs}
            reference: frozenset[tuple[object, ...]] | None = None
            loads: list[float] = []
            load_edges = [os.getloadavg()[0]]
            names = list(runs)
            for round_no in range(args.repeat):
                order = names[round_no % len(names) :] + names[: round_no % len(names)]
                for name in order:
                    template, env, cwd, suffix = runs[name]
                    out = tmp / f"out.{suffix}"
                    out.unlink(missing_ok=True)
                    cmd = [part.replace("{out}", str(out)) for part in template]
                    wall, cpu, broker_cpu, stdout = timed(cmd, env, pids, cwd)
                    got = message_set(out)
                    if len(got) != count:
                        raise SystemExit(f"{name}: wrote {len(got):,} distinct messages, {count:,} were produced")
                    if reference is None:
                        reference = got
                    elif got != reference:
                        raise SystemExit(
                            f"{name}: not the same message set as the first run ({len(got ^ reference)} differ)"
                        )
                    kind = kinds[name]
                    kind.seconds.append(wall)
                    kind.client_cpu_us.append(cpu / count * 1e6)
                    kind.broker_cpu_us.append(broker_cpu / count * 1e6)
                    note = ""
                    if name.startswith("java"):
                        inner = json.loads(stdout.strip().splitlines()[-1])
                        kind.pulls.append(int(inner["pulls"]))
                        kind.inner_seconds.append(float(inner["replay_seconds"]))
                        note = "  (consumer start {start_seconds:.2f} s, replay {replay_seconds:.2f} s, shutdown {shutdown_seconds:.2f} s)"
                        note = note.format(**inner)
                    loads.append(os.getloadavg()[0])
                    line = f"  round {round_no + 1} {name:<24} {wall:7.2f} s  {count / wall:>10,.0f} msg/s{note}"
                    print(line, flush=True)
            load_edges.append(os.getloadavg()[0])
    report(args, count, kinds, loads)
    if baseline:
        report_baseline(formats, baseline[0], kinds, load_edges)


def report_baseline(formats: list[str], rev: str, kinds: dict[str, Kind], load_edges: list[float]) -> None:
    """Now over the baseline per format, each ratio from the same round."""
    print(f"\nnow against {rev}, mqadmin's default workers, pairs from the same round (< 1: now uses less CPU)")
    for fmt in formats:
        base, now = kinds[mqadmin_name(fmt, rev=rev)], kinds[mqadmin_name(fmt)]
        b, n = median(base.client_cpu_us), median(now.client_cpu_us)
        ratios = [y / x for x, y in zip(base.client_cpu_us, now.client_cpu_us, strict=True)]
        print(
            f"  {fmt:<8} client CPU per message: baseline {b:.2f} us, now {n:.2f} us, ratio now/baseline"
            f" {median(ratios):.3f} (median of rounds; of medians {n / b:.3f});"
            f" broker CPU us/msg baseline {median(base.broker_cpu_us):.2f}, now {median(now.broker_cpu_us):.2f}"
        )
    print(f"  load average (1 min) {load_edges[0]:.1f} before, {load_edges[-1]:.1f} after")


def report(args: argparse.Namespace, count: int, kinds: dict[str, Kind], loads: list[float]) -> None:
    cap = args.pull_cap or "broker default (32)"
    print(f"\nRocketMQ {args.version}, {count:,} x {args.size} B, pull cap {cap}, medians of {args.repeat} round(s),")
    print(f"load average (1 min) during the runs {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs\n")
    print(f"{'run':<24}{'wall s':>9}{'msg/s':>12}{'client CPU us/msg':>19}{'broker CPU us/msg':>19}{'msgs/pull':>11}")
    for kind in kinds.values():
        wall = median(kind.seconds)
        per_pull = f"{count / median([float(p) for p in kind.pulls]):.1f}" if kind.pulls else "-"
        print(
            f"{kind.name:<24}{wall:>9.2f}{count / wall:>12,.0f}{median(kind.client_cpu_us):>19.1f}"
            f"{median(kind.broker_cpu_us):>19.1f}{per_pull:>11}"
        )
    print("\nmqadmin's rate over Java's, each pair from the same round (> 1: mqadmin faster); by wall time,")
    print("and against the Java pull loop alone (its JVM and consumer start and shutdown left out, mqadmin's not)")
    for ours in (k for k in kinds.values() if k.name.startswith("mqadmin")):
        for theirs in (k for k in kinds.values() if k.name.startswith("java")):
            wall = [j / m for m, j in zip(ours.seconds, theirs.seconds, strict=True)]
            loop = [j / m for m, j in zip(ours.seconds, theirs.inner_seconds, strict=True)]
            print(
                f"  {ours.name:<24} / {theirs.name:<14} wall {median(wall):5.2f}x   loop alone {median(loop):5.2f}x"
                f"   (rounds: {', '.join(f'{w:.2f}/{lo:.2f}' for w, lo in zip(wall, loop, strict=True))})"
            )


if __name__ == "__main__":
    main()
