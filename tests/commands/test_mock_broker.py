"""mockBroker: its own --tls-cert/--tls-key reach the server (they share names with the common TLS
options of the broker commands, which mockBroker does not take)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult


def test_a_key_without_its_certificate_is_refused(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    r = cli("mockBroker", "-n", f"mock://{tmp_path / 'store'}", "--port", "0", "--tls-key", str(tmp_path / "k.pem"))
    assert r.code == 2 and r.stderr == "mqadmin: error: --tls-key needs --tls-cert\n"
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--port", "65536"), "--port must be 0..65535, not 65536"),
        (("--idle-timeout", "-1"), "--idle-timeout must be 0 or more seconds, not -1"),
        (("--acl", "onlyakey"), "--acl takes ACCESS_KEY:SECRET_KEY"),
    ],
)
def test_bad_values_are_one_line_before_serving(
    cli: Callable[..., CliResult], tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    r = cli("mockBroker", "-n", f"mock://{tmp_path / 'store'}", *args)
    assert r.code == 2 and r.stderr == f"mqadmin: error: {line}\n"
    assert not (tmp_path / "store").exists()


def test_tls_cert_serves_tls(cli: Callable[..., CliResult], tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    store = f"mock://{tmp_path / 'store'}"
    args = ["mockBroker", "-n", store, "--port", "0", "--demo", "--tls-cert", str(cert), "--tls-key", str(key)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not any("namesrv " in line for line in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        found = re.search(r"namesrv (\S+)", next(line for line in lines if "namesrv " in line))
        assert found is not None
        secure = cli("queryOffset", "-n", found.group(1), "--tls-ca", str(cert), "-t", "TopicTest", "--json")
        assert secure.code == 0, secure.stderr
        assert secure.json()["topic"] == "TopicTest"  # type: ignore[index]
    finally:
        proc.terminate()
        proc.wait(30)
        reader.join(10)
    assert proc.returncode == 0, "".join(lines)


def test_consumer_keeps_a_simulated_client_of_the_group_online(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """--consumer G: consumerConnection shows the client, -s true names it as every queue's holder."""
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.seed import commit_at_time, fill_topic

    cluster = MockCluster.create(tmp_path / "store")
    fill_topic(cluster, "TopicTest", 40, 1_700_000_000_000, 1_700_000_100_000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g", "TopicTest", None)
    cluster.close()
    args = ["mockBroker", "-n", f"mock://{tmp_path / 'store'}", "--port", "0", "--consumer", "g"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not any("consumer g online" in line for line in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        found = re.search(r"namesrv (\S+)", next(line for line in lines if "namesrv " in line))
        assert found is not None
        conn: Any = cli("consumerConnection", "-n", found.group(1), "-g", "g", "--json").json()
        progress: Any = cli("consumerProgress", "-n", found.group(1), "-g", "g", "-s", "true", "--json").json()
    finally:
        proc.terminate()
        proc.wait(30)
        reader.join(10)
    assert proc.returncode == 0, "".join(lines)
    assert [c["client_id"] for c in conn["clients"]] == ["127.0.0.1@1"] and "TopicTest" in conn["subscriptions"]
    held = {q["client_ip"] for q in progress["queues"] if q["topic"] == "TopicTest"}
    assert held == {"127.0.0.1"}
