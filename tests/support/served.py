"""A mock server in its own process, so a test can SIGKILL it and restart it on the same store.

Run as ``python -m tests.support.served STORE [--advertise broker-b=HOST:PORT] [--ports N,A,B]``:
it serves the store (creating a two-broker one if missing), makes the name server route a broker
to the advertised address (a fault proxy in front of it), prints one JSON line with the addresses
and serves until stdin closes or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


@dataclass
class Served:
    """A running served-mock process."""

    proc: subprocess.Popen[str]
    namesrv: str
    brokers: dict[str, str]
    store: Path
    ports: list[int] = field(default_factory=list)

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye, as a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._close_pipes()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def start(store: Path, *, advertise: dict[str, str] | None = None, ports: list[int] | None = None) -> Served:
    """Start a served mock on ``store``; ``ports``: [namesrv, broker ports...] to reuse after a kill."""
    args = [sys.executable, "-m", "tests.support.served", str(store)]
    for name, addr in (advertise or {}).items():
        args += ["--advertise", f"{name}={addr}"]
    if ports:
        args += ["--ports", ",".join(map(str, ports))]
    proc = subprocess.Popen(
        args,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not line or not line[0].strip():
        proc.kill()
        proc.wait(timeout=30)
        raise RuntimeError(f"served mock on {store} did not start (exit {proc.poll()})")
    doc = json.loads(line[0])
    return Served(proc, doc["namesrv"], doc["brokers"], store, doc["ports"])


def main(argv: list[str] | None = None) -> int:
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.server import MockServer

    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--advertise", action="append", default=[])
    parser.add_argument("--ports", default="")
    ns = parser.parse_args(argv)
    root = Path(ns.store)
    if (root / "cluster.json").exists():
        cluster = MockCluster(root, writable=True)
    else:
        cluster = MockCluster.create(root)
    ports = [int(p) for p in ns.ports.split(",")] if ns.ports else [0] * (1 + len(cluster.brokers))
    server = MockServer(cluster, namesrv_port=ports[0], broker_ports=ports[1:])
    server.start()
    real = dict(server.broker_addrs)  # before the name server routes a broker elsewhere
    with server.lock:
        for item in ns.advertise:
            name, addr = item.split("=", 1)
            cluster.brokers[name].addr = addr
    used = [int(server.namesrv_addr.rsplit(":", 1)[1])] + [int(a.rsplit(":", 1)[1]) for a in real.values()]
    print(json.dumps({"namesrv": server.namesrv_addr, "brokers": real, "ports": used}), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.wait(0.2):
        pass
    server.stop()
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
