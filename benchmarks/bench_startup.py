"""Start-up cost: `mqadmin --help` and a simple embedded query, against `python -c pass`.

Run: .venv/bin/python benchmarks/bench_startup.py [--runs 15] [--baseline REV]
All three are timed in the same run, interleaved, and reported as medians and ratios against
`python -c pass`, because the machine is shared and noisy: wall time, and the CPU time (user +
system) of each process, which depends less on other load. Targets: --help at most 3x
`python -c pass`, the query at most 5x. Bytecode is written on the first run (as an installed
package has it), whatever PYTHONDONTWRITEBYTECODE says. ``python -X importtime .venv/bin/mqadmin
...`` shows what is left on either path.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
QUERY = ["queryOffset", "-n", "mock://demo", "-t", "TopicTest", "-g", "demo_group", "--output", "json"]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one run of ``cmd``, from the mqadmin home (so that ``-c``
    does not import the package in the current folder)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        cmd, env=env, cwd=env["MQADMIN_HOME"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def baseline_tree(rev: str) -> Path:
    """The package of git revision ``rev`` laid out as installed (``commands`` and ``spark``
    inside ``mqadmin``), in a temporary folder to put on PYTHONPATH."""
    folder = Path(tempfile.mkdtemp(prefix="mqadmin-baseline-"))
    archive = subprocess.run(
        ["git", "archive", rev, "mqadmin", "commands", "spark"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    for part in ("commands", "spark"):
        (folder / part).rename(folder / "mqadmin" / part)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", metavar="REV", help="also time the query as git revision REV runs it")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="mqadmin-bench-")
    env = {**os.environ, "MQADMIN_HOME": home}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    mqadmin = str(BIN / "mqadmin")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "mqadmin --help": [mqadmin, "--help"],
        "queryOffset (mock://demo, json)": [mqadmin, *QUERY],
    }
    envs = dict.fromkeys(cases, env)
    if args.baseline:
        name = f"the query at {args.baseline}"
        cases[name] = [sys.executable, "-c", "import sys; from mqadmin.entry import main; sys.exit(main())", *QUERY]
        envs[name] = {**env, "PYTHONPATH": str(baseline_tree(args.baseline))}
    for name, cmd in cases.items():  # creates the demo store, writes the bytecode
        timed(cmd, envs[name])
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            wall, cpu = timed(cmd, envs[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    base_wall = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"medians of {args.runs} runs, interleaved")
    print(f"{'command':<34} {'wall ms':>8} {'x python':>9} {'CPU ms':>8} {'x python':>9}")
    for name in cases:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:<34} {wall:>8.1f} {wall / base_wall:>9.2f} {cpu:>8.1f} {cpu / base_cpu:>9.2f}")


if __name__ == "__main__":
    main()
