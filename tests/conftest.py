"""Shared fixtures: a private MQADMIN_HOME, mock stores of either broker version, a CLI runner."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.output import Env

#: real clusters shared across modules: the fixture, and the hooks that stop each after its last user
pytest_plugins = ["tests.support.shared_clusters"]

# A suite started in the background (`make test &`, `nohup`, some CI runners) inherits SIGINT
# ignored, which Python then leaves ignored, and so do the commands it runs: the Ctrl-C tests
# would press a key that does nothing. Handle it as a terminal's foreground process does.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


@pytest.fixture(autouse=True)
def json_follows_its_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every JSON document a command prints in this process (either door, a real broker, --watch
    lines, --output-file) is checked against its schema in docs/schemas as printed; a break
    fails the test that printed it."""
    import json

    from mqadmin import output, watch
    from tests.support import schemas

    broken: list[str] = []
    real = output.json_document

    def checked(result: Any, command: str) -> dict[str, Any]:
        doc = real(result, command)
        broken.extend(schemas.problems(json.loads(json.dumps(doc, ensure_ascii=False))) if command else [])
        return doc

    monkeypatch.setattr(output, "json_document", checked)
    monkeypatch.setattr(watch, "json_document", checked)
    yield
    assert not broken, "a JSON output breaks its schema:\n  " + "\n  ".join(broken[:20])


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
        from tests.support import schemas

        schemas.check_printed(proc.stdout)  # in-process runs are checked as they print
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@dataclass
class Store:
    """A mock store on disk and the facts tests assert against; with ``server`` set, commands
    reach it over TCP through the remoting backend instead of the embedded one."""

    path: Path
    version: str
    start_ms: int
    end_ms: int
    server: Any = None

    @property
    def address(self) -> str:
        return self.server.namesrv_addr if self.server is not None else f"mock://{self.path}"

    def open(self, writable: bool = False) -> MockCluster:
        """Open the files (read-only unless asked); a running server flushes its state first."""
        if self.server is not None:
            if writable:
                raise RuntimeError("the server holds the store; stop it first")
            with self.server.lock:
                self.server.cluster.flush()
        return MockCluster(self.path, writable=writable)


@pytest.fixture
def door(request: pytest.FixtureRequest) -> str:
    """How commands reach a test store: "embedded", or "tcp" through the mock server."""
    return str(getattr(request, "param", "embedded"))


@contextlib.contextmanager
def store_address(root: Path, door: str) -> Iterator[str]:
    """The address of the store at ``root`` through ``door``: ``mock://ROOT`` embedded, or the
    name server of a mock server over it ("tcp"), stopped on exit."""
    if door == "embedded":
        yield f"mock://{root}"
        return
    from mqadmin.mock.server import MockServer

    cluster = MockCluster(root, writable=True)
    server = MockServer(cluster, namesrv_port=0).start()
    try:
        yield server.namesrv_addr
    finally:
        server.stop()
        cluster.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The command tests run twice, embedded and through the TCP server with the remoting
    backend: a command must not be able to tell the difference."""
    if "door" in metafunc.fixturenames and metafunc.definition.path.parent.name == "commands":
        metafunc.parametrize("door", ["embedded", "tcp"], indirect=True)


@pytest.fixture
def make_store(tmp_path: Path, door: str) -> Iterator[Callable[..., Store]]:
    """Build a store: ``topic`` with ``count`` messages over the last ``span_ms``, groups committed."""
    made = 0
    servers: list[Any] = []

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
        store = Store(path, version, start, end)
        if door == "tcp":
            from mqadmin.mock.server import MockServer

            store.server = MockServer(MockCluster(path, writable=True), namesrv_port=0).start()
            servers.append(store.server)
        return store

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, shared by the TLS tests."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl tool is needed to make a test certificate")
    from tests.support.realbroker import make_tls_files

    return make_tls_files(tmp_path_factory.mktemp("tls"))
