"""Start-up cost: `mqadmin --help` and a simple embedded query, against `python -c pass`.

Run: .venv/bin/python benchmarks/bench_startup.py [--runs 15]
All three are timed in the same run, interleaved, and reported as medians and ratios, because
the machine is shared and noisy. Targets: --help at most 3x `python -c pass`, the query at most
200 ms. ``python -X importtime .venv/bin/mqadmin ...`` shows what is left on either path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="mqadmin-bench-")
    env = {**os.environ, "MQADMIN_HOME": home}
    mqadmin = str(BIN / "mqadmin")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "mqadmin --help": [mqadmin, "--help"],
        "queryOffset (mock://demo, json)": [
            mqadmin,
            "queryOffset",
            "-n",
            "mock://demo",
            "-t",
            "TopicTest",
            "-g",
            "demo_group",
            "--output",
            "json",
        ],
    }
    timed(cases["queryOffset (mock://demo, json)"], env)  # creates the demo store once
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():
            samples[name].append(timed(cmd, env))
    base = statistics.median(samples["python -c pass"])
    print(f"{'command':<34} {'median ms':>10} {'min ms':>8} {'x python':>9}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:<34} {med:>10.1f} {min(values):>8.1f} {med / base:>9.2f}")


if __name__ == "__main__":
    main()
