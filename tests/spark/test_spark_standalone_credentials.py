"""A standalone Spark cluster (master + worker from pyspark's spark-class, on loopback) whose
executors run a Python without mqadmin: the real CLI in its own process replays from an ACL +
client-certificate TLS mock server as the local engine does, and no process's command line or
environment (but the CLI's own), no log, event log, executor log or file holds the secret."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mqadmin.replay.records import read_records
from tests.spark.secret_support import (
    ACCESS_KEY,
    SECRET,
    T0,
    TOPIC,
    CountingContext,
    Served,
    Tls,
    Watcher,
    files_holding,
    make_tls,
    serve,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("acl") / "store", tls) as server:
        yield server


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
