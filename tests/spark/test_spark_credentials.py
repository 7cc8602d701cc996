"""Spark executors connect with the driver's ACL keys and TLS settings, and the secret shows up
nowhere Spark shows things: command lines and environments of every process during the job,
Spark's event log (what its UI shows, environment page included), its logs, the executors'
scratch folders, the command's output, output files and checkpoint.

One mock server for the module (in this process, so no command line carries its keys) with ACL
on and TLS that asks for a client certificate; one local[2] session with an event log and an
INFO log to files; a standalone master + worker whose executors run a Python without mqadmin.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mqadmin import errors  # noqa: E402
from mqadmin.cli import main  # noqa: E402
from mqadmin.mock.cluster import MockCluster  # noqa: E402
from mqadmin.mock.seed import commit_at_time, fill_topic  # noqa: E402
from mqadmin.mock.server import MockServer  # noqa: E402
from mqadmin.output import Env  # noqa: E402
from mqadmin.replay.records import read_records  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

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


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl tool is needed to make test certificates")
    folder = tmp_path_factory.mktemp("certs")
    server_cert, server_key = self_signed(folder, "server", "127.0.0.1")
    client_cert, client_key = self_signed(folder, "client", "spark-executor")
    return Tls(server_cert, client_cert, client_key, server_key)


@dataclass
class Served:
    addr: str
    server: MockServer

    def connections(self) -> int:
        return self.server.stats().get("connections", 0)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[Served]:
    cluster = MockCluster.create(tmp_path_factory.mktemp("acl") / "store")
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


@dataclass
class Traces:
    """Everywhere the local[2] session leaves traces: its event log, its INFO log, its scratch
    folders (spark.local.dir) and the executors' temporary folder."""

    root: Path
    events: Path = field(init=False)
    log: Path = field(init=False)
    local: Path = field(init=False)
    worker_tmp: Path = field(init=False)

    def __post_init__(self) -> None:
        self.events, self.log = self.root / "events", self.root / "spark.log"
        self.local, self.worker_tmp = self.root / "local", self.root / "worker-tmp"
        for folder in (self.events, self.local, self.worker_tmp):
            folder.mkdir(parents=True)


LOG4J2 = """\
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c{{1}}: %m%n
"""


def fresh_jvm() -> None:
    """Stop the JVM an earlier test module of this process left running: a new session would
    reuse it, with its log settings and environment, which the checks here depend on."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or SparkContext._active_spark_context is not None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        proc.stdin.close()  # the gateway JVM exits when its stdin closes
        proc.wait(60)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Traces]]:
    """One local[2] session in a JVM of its own, started while the secret is in this process's
    environment (as when a user exports MQADMIN_SECRET_KEY), logging at INFO to a file."""
    from mqadmin.spark.engine import build_session

    fresh_jvm()
    traces = Traces(tmp_path_factory.mktemp("traces"))
    log_config = traces.root / "log4j2.properties"
    log_config.write_text(LOG4J2.format(path=traces.log))
    conf = {
        "spark.default.parallelism": "2",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.dir": traces.events.as_uri(),
        "spark.local.dir": str(traces.local),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log_config}",
    }
    saved = {k: os.environ.get(k) for k in ("MQADMIN_SECRET_KEY", "TMPDIR")}
    os.environ.update(MQADMIN_SECRET_KEY=SECRET, TMPDIR=str(traces.worker_tmp))
    try:
        session = build_session("local[2]", conf)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    session.sparkContext.setLogLevel("INFO")
    yield session, traces
    session.stop()


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


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys as a user exports them (never on a command line)."""
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("MQADMIN_SECRET_KEY", SECRET)


def on_spark(
    spark: tuple[Any, Traces], served: Served, tls: Tls, argv: list[str], capfd: pytest.CaptureFixture[str]
) -> tuple[Run, list[str]]:
    """Run the CLI on Spark under a watcher; (the run, everywhere a secret was found). Every
    connection opened during the job must have been TLS, and executors must have opened some."""
    conns, handshakes = served.connections(), CountingContext.handshakes
    run, leaks = watched(spark, argv, [SECRET, tls.key_marker()], capfd)
    opened = served.connections() - conns
    assert opened >= 2 and CountingContext.handshakes - handshakes == opened, "a plaintext connection"
    return run, leaks


def watched(
    spark: tuple[Any, Traces], argv: list[str], needles: list[str], capfd: pytest.CaptureFixture[str]
) -> tuple[Run, list[str]]:
    """Run the CLI on the module's session under a watcher; (the run, where a needle was found)."""
    _, traces = spark
    with Watcher(needles) as watcher:
        run = cli(argv)
    assert watcher.scans >= 2 and watcher.saw("SparkSubmit") and watcher.saw("pyspark"), [
        c[:200] for c in sorted(watcher.seen)
    ]
    captured = capfd.readouterr()
    leaks = list(watcher.leaks)
    for text, where in ((run.out, "stdout"), (run.err, "stderr"), (captured.out + captured.err, "JVM output")):
        leaks += [f"{where}: {n}" for n in needles if n in text]
    leaks += files_holding(needles, traces.events, traces.log, traces.local, traces.worker_tmp)
    assert not list(traces.worker_tmp.glob("mqadmin-tls-*")), "an executor left its TLS files behind"
    return run, leaks


def test_the_trace_files_are_real(spark: tuple[Any, Traces], served: Served, tls: Tls, keys: None) -> None:
    """The places the other tests search hold what they should, so finding nothing there means
    something: the event log has the environment (the UI's page) and jobs; the log has INFO."""
    _, traces = spark
    cli(["queryOffset", "-n", served.addr, "-t", TOPIC, "-s", str(T0 + 30_000), "--engine", "spark", *tls.argv()])
    events = "".join(p.read_text() for p in traces.events.rglob("*") if p.is_file())
    assert "SparkListenerEnvironmentUpdate" in events and "SparkListenerJobStart" in events
    assert "spark.eventLog.dir" in events and "sun.java.command" in events
    assert " INFO " in traces.log.read_text()


def test_range_replay_on_spark_matches_local(
    spark: tuple[Any, Traces], served: Served, tls: Tls, keys: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    window = ["-n", served.addr, "-t", TOPIC, "-b", str(T0 + 5_000), "-e", str(T0 + 70_000), "--slice-size", "40"]
    local = cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'local.jsonl'}", *tls.argv()])
    assert local.code == 0, local.err
    out, checkpoint = tmp_path / "spark", tmp_path / "replay.checkpoint"
    argv = ["rangeReplay", *window, "--to", f"jsonl:{out}", "--engine", "spark", "--spark-master", "local[2]"]
    run, leaks = on_spark(spark, served, tls, [*argv, "--checkpoint", str(checkpoint), *tls.argv()], capfd)
    assert run.code == 0, run.err
    want = list(read_records(tmp_path / "local.jsonl"))
    assert len(want) > 500 and list(read_records(out)) == want
    assert checkpoint.exists()
    leaks += files_holding([SECRET, tls.key_marker()], out, checkpoint)
    assert not leaks, leaks


@pytest.mark.parametrize("time_field", ["born", "store"])
def test_query_offset_on_spark_matches_local(
    spark: tuple[Any, Traces],
    served: Served,
    tls: Tls,
    keys: None,
    capfd: pytest.CaptureFixture[str],
    time_field: str,
) -> None:
    argv = ["queryOffset", "-n", served.addr, "-t", TOPIC, "-g", GROUP, "-s", str(T0 + 30_000)]
    argv += ["--time-field", time_field, "--slice-size", "50", "--json", *tls.argv()]
    local = cli([*argv, "--engine", "local"])
    assert local.code == 0, local.err
    run, leaks = on_spark(spark, served, tls, [*argv, "--engine", "spark", "--spark-master", "local[2]"], capfd)
    assert run.code == 0, run.err
    want, got = json.loads(local.out), json.loads(run.out)
    assert (want.pop("engine"), got.pop("engine")) == ("local", "spark") and got == want
    assert len(want["queues"]) == 4 and all(q["offset_at_time"] > q["min_offset"] for q in want["queues"])
    assert not leaks, leaks


@pytest.mark.parametrize(
    "command",
    [
        ["rangeReplay", "-b", str(T0), "-e", str(T0 + 80_000), "--to", "stdout"],
        ["queryOffset", "-s", str(T0 + 30_000), "--time-field", "born"],
    ],
)
def test_a_wrong_secret_is_permission_denied_in_one_line(
    spark: tuple[Any, Traces], served: Served, tls: Tls, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("MQADMIN_SECRET_KEY", WRONG)
    run = cli(
        [*command, "-n", served.addr, "-t", TOPIC, "--engine", "spark", "--spark-master", "local[2]", *tls.argv()]
    )
    assert run.code == 1 and run.out == ""
    assert len(run.err.strip().splitlines()) == 1 and "permission denied" in run.err, run.err
    assert WRONG not in run.err and SECRET not in run.err


def test_executors_refused_by_the_broker_fail_in_one_line(
    spark: tuple[Any, Traces], served: Served, tls: Tls, capfd: pytest.CaptureFixture[str]
) -> None:
    """A secret that is wrong only on the executors (say, rotated mid-run): the job fails with
    the broker's refusal in one line and exit 1, and the wrong secret is not in Spark's logs."""
    from mqadmin.spark.engine import search_offsets
    from mqadmin.spark.jobs import ConnectSpec

    options = {"access_key": ACCESS_KEY, "secret_key": WRONG, "tls_ca": str(tls.ca)}
    spec = ConnectSpec.from_options(served.addr, {**options, "tls_cert": str(tls.cert), "tls_key": str(tls.key)})
    with pytest.raises(errors.MqadminError) as info:
        search_offsets(spec, [(TOPIC, "broker-a", 0, T0 + 30_000)], spark=spark[0])
    message = str(info.value)
    assert info.value.exit_code == 1 and "\n" not in message and "permission denied" in message.lower(), message
    captured = capfd.readouterr()
    _, traces = spark
    assert WRONG not in message + captured.out + captured.err
    assert not files_holding([WRONG], traces.events, traces.log, traces.local)


def test_executors_get_the_tls_files_contents_not_the_drivers_paths(
    spark: tuple[Any, Traces], served: Served, tls: Tls, tmp_path: Path
) -> None:
    """Executors on other machines do not have the driver's files: once the spec is made, the
    driver's copies can go and the job still connects with the client certificate."""
    from mqadmin.spark.engine import search_offsets
    from mqadmin.spark.jobs import ConnectSpec

    copies = {}
    for key, path in (("tls_ca", tls.ca), ("tls_cert", tls.cert), ("tls_key", tls.key)):
        copies[key] = tmp_path / path.name
        shutil.copy(path, copies[key])
    options = {"access_key": ACCESS_KEY, "secret_key": SECRET, **{k: str(p) for k, p in copies.items()}}
    spec = ConnectSpec.from_options(served.addr, options, timeout=5)
    shutil.rmtree(tmp_path)
    queries = [(TOPIC, broker, qid, T0 + 30_000) for broker in ("broker-a", "broker-b") for qid in (0, 1)]
    got = search_offsets(spec, queries, spark=spark[0])
    assert len(got) == 4 and all(50 < offset < 150 for offset in got), got
    assert SECRET not in repr(spec) and tls.key_marker() not in repr(spec)


# -- a standalone cluster: executors in their own JVMs, with a Python that has no mqadmin ------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    """(master URL, folder of the master/worker logs and executor work dirs, executor Python)."""
    import pyspark

    folder = tmp_path_factory.mktemp("standalone")
    bare = getattr(sys, "_base_executable", "")
    probe = (
        subprocess.run([bare, "-c", "import mqadmin"], cwd=folder, capture_output=True, timeout=60) if bare else None
    )
    if probe is None or probe.returncode == 0:
        pytest.skip("no Python without mqadmin installed to run the executors with")
    home = Path(next(iter(pyspark.__path__)))
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("MQADMIN_SECRET_KEY", None)
    spark_class = str(home / "bin" / "spark-class")
    procs = []
    try:
        with (folder / "master.log").open("w") as log:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
                    + ["--webui-port", str(free_port())],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        wait_for(lambda: "Starting Spark master" in (folder / "master.log").read_text(errors="replace"), "a master")
        with (folder / "worker.log").open("w") as log:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", "2", "--memory", "1g"]
                    + ["--host", "127.0.0.1", "--webui-port", str(free_port()), "--work-dir", str(folder / "work")],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        registered = "Successfully registered with master"
        wait_for(lambda: registered in (folder / "worker.log").read_text(errors="replace"), "a worker")
        yield url, folder, bare
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)


def test_standalone_executors_without_mqadmin_replay_with_the_keys(
    standalone: tuple[str, Path, str], served: Served, tls: Tls, tmp_path: Path
) -> None:
    """The real CLI in its own process (keys from the environment), its own driver JVM, a
    standalone master and worker on loopback, executors with a Python that has no mqadmin: the
    replay matches the local engine's, and no process, log, event log or file holds a secret."""
    url, folder, bare = standalone
    mqadmin = str(Path(sys.executable).with_name("mqadmin"))
    events = tmp_path / "events"
    events.mkdir()
    env = {**os.environ, "MQADMIN_ACCESS_KEY": ACCESS_KEY, "MQADMIN_SECRET_KEY": SECRET, "PYSPARK_PYTHON": bare}
    window = ["-n", served.addr, "-t", TOPIC, "-b", str(T0 + 5_000), "-e", str(T0 + 70_000), *tls.argv()]
    local = subprocess.run(
        [mqadmin, "rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'local.jsonl'}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert local.returncode == 0, local.stderr
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false", "spark.eventLog.dir": events.as_uri()}
    conf |= {"spark.executor.memory": "512m", "spark.cores.max": "2"}
    argv = [mqadmin, "rangeReplay", *window, "--slice-size", "60", "--to", f"jsonl:{tmp_path / 'spark'}"]
    argv += ["--engine", "spark", "--spark-master", url, "--checkpoint", str(tmp_path / "cp")]
    argv += [x for k, v in conf.items() for x in ("--spark-conf", f"{k}={v}")]
    needles = [SECRET, tls.key_marker()]
    conns, handshakes = served.connections(), CountingContext.handshakes
    with Watcher(needles) as watcher:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    opened = served.connections() - conns
    assert opened >= 4 and CountingContext.handshakes - handshakes == opened, "a plaintext connection"
    assert watcher.saw("CoarseGrainedExecutorBackend"), [c[:200] for c in sorted(watcher.seen)]
    assert any(c.startswith(bare) and "pyspark" in c for c in watcher.seen), "executors ran another Python"
    assert "SparkListenerEnvironmentUpdate" in "".join(p.read_text() for p in events.rglob("*") if p.is_file())
    assert list(read_records(tmp_path / "spark")) == list(read_records(tmp_path / "local.jsonl"))
    assert list((folder / "work").rglob("stderr")), "no executor ran on the worker"
    leaks = list(watcher.leaks)
    leaks += [f"stdout/stderr: {n}" for n in needles if n in stdout + stderr]
    leaks += files_holding(needles, events, folder, tmp_path / "spark", tmp_path / "cp")
    # the CLI's own environment holds the secret by the user's choice; no other process may
    assert not [leak for leak in leaks if not leak.startswith(f"/proc/{proc.pid}/environ")], leaks


# -- a real ACL broker (4.9.7 plain ACL, 5.3.3 authentication/authorization) --------------------

REAL_ADMIN = ("spark_admin", f"realSecret-{secrets.token_hex(8)}")


@pytest.fixture(scope="module", params=["4.9.7", "5.3.3"])
def real_acl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real broker with ACL and one admin account; a topic of 2 queues with 40 messages and a
    group that committed 5 per queue. Yields the name server address."""
    from mqadmin.model import Message
    from mqadmin.remoting.backend import RemotingAdmin
    from tests.support import realbroker as rb

    version: str = request.param
    workdir = tmp_path_factory.mktemp(f"real-acl-{version}") / "rmq"
    if rb.is_v4(version):
        acl = rb.plain_acl_yaml({REAL_ADMIN[0]: {"secretKey": REAL_ADMIN[1], "admin": True}})
        cluster = rb.RealCluster(version, workdir, credentials=REAL_ADMIN, plain_acl=acl)
    else:
        cluster = rb.RealCluster(version, workdir, credentials=REAL_ADMIN, auth=True)
    with cluster:
        cluster.create_topic(TOPIC, 2)
        cluster.create_group(GROUP)
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=10, access_key=REAL_ADMIN[0], secret_key=REAL_ADMIN[1])
        try:
            for i in range(40):
                admin.send(TOPIC, Message(TOPIC, f"real-{i}".encode(), {"TAGS": "a", "KEYS": f"k{i}"}))
        finally:
            admin.close()
        for q in range(2):
            cluster.commit_offset("broker-a", GROUP, TOPIC, q, 5)
        yield cluster.namesrv_addr


@pytest.mark.realbroker
@pytest.mark.acl
def test_real_acl_broker_replay_and_search_on_spark(
    spark: tuple[Any, Traces],
    real_acl: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """On a real ACL broker, executors sign as the driver does: the replay and the born-time
    search on Spark answer as the local engine, and the secret shows up nowhere."""
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", REAL_ADMIN[0])
    monkeypatch.setenv("MQADMIN_SECRET_KEY", REAL_ADMIN[1])
    base = ["-n", real_acl, "-t", TOPIC, "--timeout", "10"]
    window = [*base, "-b", "-1h", "-e", "now", "--slice-size", "8"]
    local = cli(["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'local.jsonl'}"])
    assert local.code == 0, local.err
    spark_argv = ["--engine", "spark", "--spark-master", "local[2]"]
    run, leaks = watched(
        spark, ["rangeReplay", *window, "--to", f"jsonl:{tmp_path / 'spark'}", *spark_argv], [REAL_ADMIN[1]], capfd
    )
    assert run.code == 0, run.err
    want = list(read_records(tmp_path / "local.jsonl"))
    assert len(want) == 40 and list(read_records(tmp_path / "spark")) == want
    hour_ago = str(int(time.time() * 1000) - 3_600_000)
    query = ["queryOffset", *base, "-g", GROUP, "-s", hour_ago, "--time-field", "born", "--json"]
    local = cli(query)
    assert local.code == 0, local.err
    found, more = watched(spark, [*query, *spark_argv], [REAL_ADMIN[1]], capfd)
    assert found.code == 0, found.err
    want_doc, got_doc = json.loads(local.out), json.loads(found.out)
    assert (want_doc.pop("engine"), got_doc.pop("engine")) == ("local", "spark") and got_doc == want_doc
    assert [q["consumer_offset"] for q in want_doc["queues"]] == [5, 5]
    leaks += more + files_holding([REAL_ADMIN[1]], tmp_path / "spark")
    assert not leaks, leaks
    monkeypatch.setenv("MQADMIN_SECRET_KEY", "wrongSecret-000000")
    wrong = cli(["rangeReplay", *window, "--to", "stdout", *spark_argv])
    assert wrong.code == 1 and len(wrong.err.strip().splitlines()) == 1 and "permission denied" in wrong.err
