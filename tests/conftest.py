"""Shared fixtures: a private MQADMIN_HOME, mock stores of either broker version, a CLI runner."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.output import Env

#: broker behaviours the mock implements: 4.x (client-push reset, nearest time search) and 5.x
BROKER_VERSIONS = ("4.9.8", "5.3.3")
HOUR_MS = 3_600_000


@pytest.fixture(autouse=True)
def mqadmin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("MQADMIN_HOME", str(home))
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    return home


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> object:
        import json

        return json.loads(self.stdout)


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """Run mqadmin in this process (fast); streams are StringIO, stdin is not a terminal."""

    def run(*args: str, stdin: str = "") -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO(stdin)))
        return CliResult(code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def cli_proc() -> Callable[..., CliResult]:
    """Run the installed console script in a subprocess: real exit codes and stream separation."""

    def run(*args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 60) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "mqadmin", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@dataclass
class Store:
    """A mock store on disk and the facts tests assert against."""

    path: Path
    version: str
    start_ms: int
    end_ms: int

    @property
    def address(self) -> str:
        return f"mock://{self.path}"

    def open(self, writable: bool = False) -> MockCluster:
        return MockCluster(self.path, writable=writable)


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[..., Store]]:
    """Build a store: ``topic`` with ``count`` messages over the last ``span_ms``, groups committed."""
    made = 0

    def make(
        version: str = "5.3.3",
        *,
        topic: str = "TopicTest",
        count: int = 800,
        span_ms: int = 2 * HOUR_MS,
        queues: int = 4,
        brokers: tuple[str, ...] = ("broker-a", "broker-b"),
        groups: dict[str, int | None] | None = None,
        now_ms: int | None = None,
    ) -> Store:
        nonlocal made
        made += 1
        import time

        now = int(time.time() * 1000) if now_ms is None else now_ms
        path = tmp_path / f"store{made}"
        cluster = MockCluster.create(path, brokers, version=version)
        start, end = now - span_ms, now - 1000
        if count:
            fill_topic(cluster, topic, count, start, end, queues_per_broker=queues)
        else:
            cluster.create_topic(topic, queues)
        for group, at in (groups or {}).items():
            for broker in cluster.brokers.values():
                commit_at_time(broker, group, topic, at)
        cluster.close()
        return Store(path, version, start, end)

    yield make
