"""Faults an operator meets, through the CLI: one clear line, exit 1, nothing half-applied."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqadmin", *args], capture_output=True, text=True, timeout=60)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def store(tmp_path: Path) -> MockCluster:
    cluster = MockCluster.create(tmp_path / "store")
    fill_topic(cluster, "T", 80, 1_700_000_000_000, 1_700_000_600_000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g", "T", None)
    return cluster


def test_unreachable_name_server_names_the_address() -> None:
    addr = f"127.0.0.1:{free_port()}"
    proc = run("queryOffset", "-n", addr, "-t", "T", "--timeout", "1")
    assert proc.returncode == 1 and addr in one_line(proc)


def test_a_broker_down_fails_the_command_and_changes_nothing(tmp_path: Path) -> None:
    cluster = store(tmp_path)
    with MockServer(cluster, namesrv_port=0) as server:
        dead = f"127.0.0.1:{free_port()}"
        with server.lock:
            cluster.brokers["broker-b"].addr = dead  # the name server still routes to it
        args = ["resetOffsetByTime", "-g", "g", "-t", "T", "-s", "0000000000000"]
        proc = run(*args, "-n", server.namesrv_addr, "--timeout", "2")
        assert proc.returncode == 1 and dead in one_line(proc), args
        # queryOffset and consumerProgress answer for the broker that answers, name the other,
        # and still exit 1
        for args, broker_col in ((["queryOffset", "-t", "T", "-g", "g"], 0), (["consumerProgress", "-g", "g"], 1)):
            proc = run(*args, "-n", server.namesrv_addr, "--timeout", "2")
            (line,) = proc.stderr.strip().splitlines()
            assert proc.returncode == 1 and "broker-b did not answer" in line and dead in line, proc.stderr
            rows = [r.split() for r in proc.stdout.splitlines() if "broker-" in r and not r.startswith("Missing")]
            assert rows and {r[broker_col] for r in rows} == {"broker-a"}, proc.stdout
        with server.lock:
            assert {o for b in cluster.brokers.values() for o in b.offsets["T@g"].values()} == {10}


def test_wrong_acl_keys_are_permission_denied_and_the_secret_stays_secret(tmp_path: Path) -> None:
    with MockServer(store(tmp_path), namesrv_port=0, acl=("ops", "right-secret")) as server:
        ok = run(
            "queryOffset", "-n", server.namesrv_addr, "-t", "T", "--access-key", "ops", "--secret-key", "right-secret"
        )
        assert ok.returncode == 0, ok.stderr
        for keys in (["--access-key", "ops", "--secret-key", "wrong-secret"], []):
            proc = run("queryOffset", "-n", server.namesrv_addr, "-t", "T", *keys)
            line = one_line(proc)
            assert proc.returncode == 1 and "permission denied" in line and "wrong-secret" not in line
