"""Spark's fixed cost: from ``mqadmin rangeReplay --engine spark`` starting to its first task.

Run: .venv/bin/python benchmarks/bench_spark_startup.py [--runs 3] [--skip-standalone]

Every run is a fresh ``mqadmin`` process, as a user runs it, replaying a small plan (8 slices of
a few hundred messages) to JSON lines; the local engine on the same plan, measured in the same
run, is the baseline. Spark's event log (written uncompressed to a temporary folder) says when
the application started and when the first task was launched and finished, so the report splits
the start-up into: process start -> SparkContext up (JVM launch, context), -> first task launched
(session, DataFrame planning, job submission), -> first task done (Python worker start), -> end.

Two masters: ``local[2]``, and a standalone master + worker started on loopback with the pyspark
package's own ``bin/spark-class`` (its executors read the store through a MockServer, since an
embedded store is a folder only a local master may read). For each, the same replay to a
``file://`` URI is measured in the same run, interleaved: a URI goes through Spark's own
DataFrame writer (Spark SQL), the path every local-path replay took before the executors wrote
their files themselves; the ratio of the medians to the first task is the gain.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MQADMIN = str(Path(sys.executable).parent / "mqadmin")
TOPIC = "SparkStart"
MESSAGES = 4000
T0 = 1_700_000_000_000


@dataclass
class Run:
    wall: float
    phases: dict[str, float] = field(default_factory=dict)


def build_store(root: Path) -> None:
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.seed import fill_topic

    cluster = MockCluster.create(root)
    fill_topic(cluster, TOPIC, MESSAGES, T0, T0 + MESSAGES, body_size=1024)
    cluster.close()


#: extra --spark-conf k=v for every Spark run (--conf): to try a setting against this run's figures
EXTRA_CONF: list[str] = []


def replay(
    address: str, out: Path, env: dict[str, str], engine: list[str], events: Path | None, uri: bool = False
) -> Run:
    conf: list[str] = [x for kv in EXTRA_CONF for x in ("--spark-conf", kv)] if engine else []
    if events is not None:
        shutil.rmtree(events, ignore_errors=True)
        events.mkdir(parents=True)
        for k, v in {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.compress": "false",
            "spark.eventLog.dir": events.as_uri(),
        }.items():
            conf += ["--spark-conf", f"{k}={v}"]
    cmd = [MQADMIN, "rangeReplay", "-n", address, "-t", TOPIC, "-b", str(T0), "-e", str(T0 + MESSAGES + 1)]
    to = f"jsonl:{out.as_uri()}" if uri else f"jsonl:{out}"
    cmd += ["--to", to, "--yes", *engine, *conf]
    shutil.rmtree(out, ignore_errors=True)
    if out.exists():
        out.unlink()
    start = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    wall = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    run = Run(wall)
    if events is not None:
        run.phases = phases(events, start, start + wall)
    return run


def phases(events: Path, start: float, end: float) -> dict[str, float]:
    """Seconds from the process start to: the context up, an executor registered (cluster
    masters), the first job submitted, the first task launched and done, the process end."""
    app = launched = finished = executor = job = None
    for path in events.rglob("*"):
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            if not line.startswith("{"):  # Spark 4 keeps an empty appstatus marker beside the events
                continue
            e = json.loads(line)
            kind = e.get("Event")
            if kind == "SparkListenerApplicationStart":
                app = e["Timestamp"] / 1000
            elif kind == "SparkListenerExecutorAdded" and e.get("Executor ID") != "driver":
                executor = min(executor or 1e18, e["Timestamp"] / 1000)
            elif kind == "SparkListenerJobStart":
                job = min(job or 1e18, e["Submission Time"] / 1000)
            elif kind == "SparkListenerTaskEnd":
                info = e["Task Info"]
                launched = min(launched or 1e18, info["Launch Time"] / 1000)
                finished = min(finished or 1e18, info["Finish Time"] / 1000)
    if app is None or launched is None or finished is None or job is None:
        raise RuntimeError(f"no application, job or task in the event log under {events}")
    out = {"context up": app - start}
    if executor is not None:  # local masters run their tasks in the driver
        out["executor registered"] = executor - start
    return out | {
        "job submitted": job - start,
        "first task launched": launched - start,
        "first task done": finished - start,
        "process end": end - start,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Standalone:
    """A Spark standalone master and one 2-core worker on loopback, from pyspark's spark-class."""

    def __init__(self, work: Path) -> None:
        import pyspark

        self.home = Path(next(iter(pyspark.__path__)))
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1"}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        spark_class = str(self.home / "bin" / "spark-class")
        logs = work / "standalone"
        logs.mkdir(parents=True, exist_ok=True)
        self.procs = [
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port)]
                + ["--webui-port", str(free_port())],
                env=env,
                stdout=(logs / "master.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        ]
        self._wait_port(self.port)
        self.procs.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--cores", "2", "--memory", "2g"]
                + ["--host", "127.0.0.1", "--webui-port", str(free_port()), "--work-dir", str(logs / "work")],
                env=env,
                stdout=(logs / "worker.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        self._wait_worker(logs / "worker.log")

    @staticmethod
    def _wait_port(port: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the standalone master did not open port {port}")

    @staticmethod
    def _wait_worker(log: Path) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if "Successfully registered with master" in log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the standalone worker did not register: see {log}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


#: the phase a figure is read at: "command start to the first task"
FIRST_TASK = "first task launched"


def median_phase(runs: list[Run], phase: str) -> float:
    return statistics.median(r.phases[phase] for r in runs)


def report(name: str, runs: list[Run], base: float) -> None:
    wall = statistics.median(r.wall for r in runs)
    print(f"\n{name}: median {wall:.1f} s over {len(runs)} runs ({wall / base:.0f}x the local engine's {base:.2f} s)")
    for phase in runs[0].phases:
        values = [r.phases[phase] for r in runs]
        print(f"  {phase:<22} {statistics.median(values):6.1f} s   (runs: {', '.join(f'{v:.1f}' for v in values)})")
    print(f"  median to the first task: {median_phase(runs, FIRST_TASK):.1f} s")


def compare(master: str, runs: dict[str, list[Run]]) -> None:
    """The two writers side by side (same run, interleaved): medians per phase and the ratio."""
    direct, sql = runs["direct"], runs["sql"]
    print(f"\n{master}: executors' own writer against Spark's writer (file:// URI), medians, same run")
    print(f"  {'phase':<22} {'own':>7} {'Spark':>7} {'ratio':>6}")
    for phase in direct[0].phases:
        if phase in sql[0].phases:
            a, b = median_phase(direct, phase), median_phase(sql, phase)
            print(f"  {phase:<22} {a:6.1f}s {b:6.1f}s {b / a:5.2f}x")
    a, b = median_phase(direct, FIRST_TASK), median_phase(sql, FIRST_TASK)
    print(
        f"  to the first task: {a:.1f} s against {b:.1f} s ({b / a:.2f}x); target <= 8 s: {'met' if a <= 8 else 'NOT met'}"
    )


def measure(
    name: str, master: str, address: str, work: Path, env: dict[str, str], runs: int, base: float, both: bool
) -> None:
    """``runs`` replays on ``master`` (and, interleaved, the same to a file:// URI)."""
    engine = ["--engine", "spark", "--spark-master", master]
    out: dict[str, list[Run]] = {"direct": [], "sql": []}
    for _ in range(runs):
        out["direct"].append(replay(address, work / "o", env, engine, work / "ev"))
        if both:
            out["sql"].append(replay(address, work / "o", env, engine, work / "ev", uri=True))
    report(name, out["direct"], base)
    if both:
        report(f"{name}, Spark's writer (file:// URI)", out["sql"], base)
        compare(name, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-standalone", action="store_true")
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument(
        "--skip-spark-writer", action="store_true", help="do not measure the same replay through Spark's writer"
    )
    parser.add_argument("--conf", action="append", default=[], help="k=v added to every Spark run (to try a setting)")
    args = parser.parse_args()
    EXTRA_CONF.extend(args.conf)
    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="mqadmin-bench-spark-"))
    env = {**os.environ, "MQADMIN_HOME": str(work / "home"), "NO_COLOR": "1"}
    env.pop("NAMESRV_ADDR", None)
    try:
        build_store(work / "store")
        embedded = f"mock://{work / 'store'}"
        local = [replay(embedded, work / "out-local.jsonl", env, [], None) for _ in range(args.runs)]
        base = statistics.median(r.wall for r in local)
        print(f"plan: {MESSAGES} messages of 1 KiB in 8 queues; baseline, the local engine: {base:.2f} s (median)")
        both = not args.skip_spark_writer
        if not args.skip_local:
            measure("spark local[2]", "local[2]", embedded, work, env, args.runs, base, both)
        if not args.skip_standalone:
            from mqadmin.mock.cluster import MockCluster
            from mqadmin.mock.server import MockServer

            cluster = MockCluster(work / "store", writable=True)
            server = MockServer(cluster, namesrv_port=0).start()
            standalone = Standalone(work)
            try:
                name = f"spark standalone ({standalone.url}, 1 worker x 2 cores)"
                measure(name, standalone.url, server.namesrv_addr, work, env, args.runs, base, both)
            finally:
                standalone.stop()
                server.stop()
                cluster.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
