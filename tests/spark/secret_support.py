"""What the Spark credential tests share: the keys, the certificates, an ACL + TLS mock server
that counts TLS connections, a watcher of every process's command line and environment, and a
search of files for a secret. (Imported as ``tests.spark.secret_support`` everywhere, so every
module sees the same per-run secret.)"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.output import Env

T0 = 1_700_000_000_000
TOPIC, GROUP = "T", "sms"
ACCESS_KEY = "spark-ops"
#: unique per run, so finding it anywhere can only mean this run leaked it
SECRET = f"sk-{secrets.token_hex(12)}"
WRONG = f"wrong-{secrets.token_hex(12)}"
WATCH_EVERY_S = 0.1


@dataclass
class Tls:
    """The server's certificate (the client's CA) and a client certificate the server asks for."""

    ca: Path
    cert: Path
    key: Path
    server_key: Path

    def argv(self) -> list[str]:
        return ["--tls-ca", str(self.ca), "--tls-cert", str(self.cert), "--tls-key", str(self.key)]

    def key_marker(self) -> str:
        """A line of the client's private key: the TLS secret that must not leak either."""
        lines = [ln for ln in self.key.read_text().splitlines() if not ln.startswith("-----")]
        return lines[len(lines) // 2]


class CountingContext(ssl.SSLContext):
    """A server context that counts TLS connections, so a test can tell TLS from plaintext
    (the mock server also takes plaintext on its TLS ports, as Java's permissive mode)."""

    handshakes = 0
    _lock = threading.Lock()

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        with CountingContext._lock:
            CountingContext.handshakes += 1
        return super().wrap_bio(*args, **kwargs)


def self_signed(folder: Path, name: str, cn: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={cn}"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@dataclass
class Served:
    addr: str
    server: MockServer

    def connections(self) -> int:
        return self.server.stats().get("connections", 0)


@contextmanager
def serve(root: Path, tls: Tls) -> Iterator[Served]:
    """A mock store served in this process (so no command line carries its keys) with ACL on
    and TLS that asks for the client certificate."""
    cluster = MockCluster.create(root)
    fill_topic(cluster, TOPIC, 800, T0, T0 + 80_000, queues_per_broker=2)
    for broker in cluster.brokers.values():
        commit_at_time(broker, GROUP, TOPIC, T0 + 20_000)
    context = CountingContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls.ca), str(tls.server_key))
    context.verify_mode = ssl.CERT_REQUIRED  # only holders of the client certificate get in
    context.load_verify_locations(str(tls.cert))
    server = MockServer(cluster, namesrv_port=0, acl=(ACCESS_KEY, SECRET), tls=context).start()
    try:
        yield Served(server.namesrv_addr, server)
    finally:
        server.stop()
        cluster.close()


def make_tls(folder: Path) -> Tls:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl tool is needed to make test certificates")
    server_cert, server_key = self_signed(folder, "server", "127.0.0.1")
    client_cert, client_key = self_signed(folder, "client", "spark-executor")
    return Tls(server_cert, client_cert, client_key, server_key)


class Watcher:
    """Scans every process's command line (and every other process's environment) while a job
    runs; records what it saw, so a test can tell it watched the JVM and the Python workers."""

    def __init__(self, needles: list[str]) -> None:
        self.needles = [n.encode() for n in needles]
        self.leaks: list[str] = []
        self.seen: set[str] = set()
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            self.scan()
            if self._stop.wait(WATCH_EVERY_S):
                self.scan()
                return

    def scan(self) -> None:
        me = os.getpid()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            files = ["cmdline"] if int(entry.name) == me else ["cmdline", "environ"]
            command = ""
            for name in files:
                try:
                    data = Path(entry.path, name).read_bytes()
                except OSError:  # gone, or not ours to read
                    continue
                if name == "cmdline" and data:
                    command = data.replace(b"\0", b" ").decode(errors="replace")
                    self.seen.add(command)
                if any(needle in data for needle in self.needles):
                    self.leaks.append(f"/proc/{entry.name}/{name} ({command[:200]})")
        self.scans += 1

    def saw(self, word: str) -> bool:
        return any(word in cmd for cmd in self.seen)


def files_holding(needles: list[str], *roots: Path) -> list[str]:
    found = []
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
        for path in paths:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found += [f"{path}: {n}" for n in needles if n.encode() in data]
    return found


@dataclass
class Run:
    code: int
    out: str
    err: str


def cli(argv: list[str]) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    return Run(code, out.getvalue(), err.getvalue())
