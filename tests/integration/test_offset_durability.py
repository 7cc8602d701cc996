"""An offset change the mock server acknowledged survives a crash (kill -9) of the server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mqadmin import fastjson
from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.model import MessageQueue

pytestmark = pytest.mark.integration


def start_mock_broker(store: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``mqadmin mockBroker --demo`` on a free port, as the issue's reproduction runs it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", "mockBroker", "-n", f"mock://{store}", "--port", "0", "--demo"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"namesrv (\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
            return proc, m.group(1)
    proc.kill()
    proc.wait(timeout=30)
    raise AssertionError(f"mockBroker did not start: {''.join(seen)}")


def stored_offsets(store: Path, key: str) -> dict[tuple[str, int], int]:
    cluster = MockCluster(store)
    try:
        return {(n, q): o for n, b in cluster.brokers.items() for q, o in b.offsets.get(key, {}).items()}
    finally:
        cluster.close()


def test_acknowledged_reset_survives_kill_9_right_after(tmp_path: Path) -> None:
    """The issue's reproduction: reset with --yes, kill -9 at once, restart: the reset is there."""
    store = tmp_path / "demo"
    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    proc, namesrv = start_mock_broker(store, env)
    try:
        args = ["resetOffsetByTime", "-n", namesrv, "-g", "demo_group", "-t", "TopicTest", "-s", "-30m", "--yes"]
        reset = subprocess.run(
            [sys.executable, "-m", "mqadmin", *args, "--json"], env=env, capture_output=True, text=True, timeout=60
        )
        proc.send_signal(signal.SIGKILL)  # within milliseconds of the acknowledgement
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert reset.returncode == 0, reset.stderr
    planned = {(q["broker"], q["queue_id"]): q["new_offset"] for q in fastjson.loads(reset.stdout)["queues"]}
    assert any(q["delta"] != 0 for q in fastjson.loads(reset.stdout)["queues"])
    assert stored_offsets(store, "TopicTest@demo_group") == planned


@pytest.fixture
def server(tmp_path: Path) -> MockServer:
    cluster = MockCluster.create(tmp_path / "store")
    fill_topic(cluster, "T", 80, 1_700_000_000_000, 1_700_000_600_000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g", "T", None)
    cluster.flush()
    return MockServer(cluster, namesrv_port=0)


def test_a_commit_is_on_disk_when_acknowledged_and_an_unchanged_one_writes_nothing(
    server: MockServer, tmp_path: Path
) -> None:
    path = tmp_path / "store" / "broker-a" / "config" / "consumerOffset.json"
    with server:
        admin = connect(server.namesrv_addr, timeout=5)
        try:
            mq = MessageQueue("T", "broker-a", 1)
            admin.update_consumer_offset("g", mq, 7)
            assert fastjson.loads(path.read_text())["offsetTable"]["T@g"][1] == 7  # no flush interval waited
            stamp = path.stat().st_mtime_ns, path.stat().st_ino
            admin.update_consumer_offset("g", mq, 7)  # a consumer re-committing where it is
            assert (path.stat().st_mtime_ns, path.stat().st_ino) == stamp
        finally:
            admin.close()


def test_concurrent_commits_share_writes(server: MockServer) -> None:
    """Group commit: many consumers committing at once cost fewer writes than commits."""
    broker = server.cluster.brokers["broker-a"]
    writes = 0
    real = broker.store.save_config

    def counting(name: str, doc: dict[str, object], **kw: bool) -> None:
        nonlocal writes
        if name == "consumerOffset.json":
            writes += 1
            time.sleep(0.005)  # a slow disk: the case where sharing matters
        real(name, doc, **kw)

    broker.store.save_config = counting  # type: ignore[method-assign]
    commits_per_client, clients = 20, 8
    with server:

        def commit(client: int) -> None:
            admin = connect(server.namesrv_addr, timeout=10)
            try:
                for i in range(commits_per_client):
                    admin.update_consumer_offset("g", MessageQueue("T", "broker-a", client % 4), 100 * client + i)
            finally:
                admin.close()

        threads = [threading.Thread(target=commit, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        on_disk = fastjson.loads(broker.store.config_path("consumerOffset.json").read_text())["offsetTable"]["T@g"]
        with server.lock:
            assert {int(q): o for q, o in on_disk.items()} == broker.offsets["T@g"]  # the last commits are on disk
    assert 0 < writes < clients * commits_per_client
