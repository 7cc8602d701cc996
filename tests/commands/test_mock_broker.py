"""mockBroker: its own --tls-cert/--tls-key reach the server (they share names with the common TLS
options of the broker commands, which mockBroker does not take); its ACL pair comes from a 0600
file or the environment without showing in the process list."""

from __future__ import annotations

import os
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
        (("--frame-timeout", "-1"), "--frame-timeout must be 0 or more seconds, not -1"),
        (("--reply-timeout", "-2"), "--reply-timeout must be 0 or more seconds, not -2"),
        (("--max-unsent-mb", "0"), "--max-unsent-mb must be 1 or more, not 0"),
        (("--acl", "a:b", "--acl-env"), "--acl and --acl-env both name the ACL key pair; give one"),
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
    proc, lines, addr = _serve(["-n", store, "--port", "0", "--demo", "--tls-cert", str(cert), "--tls-key", str(key)])
    try:
        secure = cli("queryOffset", "-n", addr, "--tls-ca", str(cert), "-t", "TopicTest", "--json")
        assert secure.code == 0, secure.stderr
        assert secure.json()["topic"] == "TopicTest"  # type: ignore[index]
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, "".join(lines)


SECRET = "s3cret-never-in-ps"


def _acl_file(tmp_path: Path, mode: int, text: str = f"ops:{SECRET}\n") -> Path:
    path = tmp_path / "acl"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("mode", "text", "line"),
    [
        (0o644, f"ops:{SECRET}", "is open to other users (mode 0644); chmod 600"),
        (0o640, f"ops:{SECRET}", "is open to other users (mode 0640); chmod 600"),
        (0o600, "ops", "takes ACCESS_KEY:SECRET_KEY"),
    ],
)
def test_an_acl_file_others_can_read_or_without_a_pair_is_refused(
    cli: Callable[..., CliResult], tmp_path: Path, mode: int, text: str, line: str
) -> None:
    path = _acl_file(tmp_path, mode, text)
    r = cli("mockBroker", "-n", f"mock://{tmp_path / 'store'}", "--port", "0", "--acl-file", str(path))
    assert r.code == 2 and r.stderr.startswith(f"mqadmin: error: --acl-file {path} ") and line in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and SECRET not in r.stderr
    assert not (tmp_path / "store").exists()


def test_acl_env_needs_both_variables(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MQADMIN_ACCESS_KEY", raising=False)
    monkeypatch.delenv("MQADMIN_SECRET_KEY", raising=False)
    r = cli("mockBroker", "-n", f"mock://{tmp_path / 'store'}", "--port", "0", "--acl-env")
    assert r.code == 2
    assert r.stderr == "mqadmin: error: --acl-env needs both $MQADMIN_ACCESS_KEY and $MQADMIN_SECRET_KEY set\n"


def _serve(
    args: list[str], env: dict[str, str] | None = None, ready: str = "namesrv "
) -> tuple[subprocess.Popen[str], list[str], str]:
    """Start mockBroker; (process, its stderr lines so far, the name server address) once a line
    with ``ready`` has appeared."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", "mockBroker", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 60
    while not any(ready in line for line in lines):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
    found = re.search(r"namesrv (\S+)", next(line for line in lines if "namesrv " in line))
    assert found is not None
    return proc, lines, found.group(1)


@pytest.mark.parametrize("source", ["file", "env", "argument"])
def test_the_acl_pair_from_a_file_or_the_environment_stays_out_of_the_process_list(
    cli_proc: Callable[..., CliResult], tmp_path: Path, source: str
) -> None:
    base = ["-n", f"mock://{tmp_path / 'store'}", "--port", "0", "--demo"]
    server_env = {"MQADMIN_ACCESS_KEY": "", "MQADMIN_SECRET_KEY": ""}
    if source == "file":
        args = [*base, "--acl-file", str(_acl_file(tmp_path, 0o600))]
    elif source == "env":
        args = [*base, "--acl-env"]
        server_env = {"MQADMIN_ACCESS_KEY": "ops", "MQADMIN_SECRET_KEY": SECRET}
    else:
        args = [*base, "--acl", f"ops:{SECRET}"]
    proc, lines, addr = _serve(args, server_env)
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace")
        warned = any("--acl puts the secret key in the process list" in line for line in lines)
        if source == "argument":
            assert SECRET in cmdline and warned, "".join(lines)
        else:
            assert SECRET not in cmdline and not warned, "".join(lines)
        query = ["queryOffset", "-n", addr, "-t", "TopicTest", "--json"]
        unsigned = cli_proc(*query, env={"MQADMIN_ACCESS_KEY": "", "MQADMIN_SECRET_KEY": ""})
        assert unsigned.code == 1 and "permission denied" in unsigned.stderr, unsigned.stderr
        signed = cli_proc(*query, env={"MQADMIN_ACCESS_KEY": "ops", "MQADMIN_SECRET_KEY": SECRET})
        assert signed.code == 0, signed.stderr
        assert signed.json()["topic"] == "TopicTest"  # type: ignore[index]
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, "".join(lines)
    assert SECRET not in "".join(lines)


def test_consumer_keeps_a_simulated_client_of_the_group_online(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """--consumer G: consumerConnection shows the client, -s true names it as every queue's holder."""
    from mqadmin.mock.cluster import MockCluster
    from mqadmin.mock.seed import commit_at_time, fill_topic

    cluster = MockCluster.create(tmp_path / "store")
    fill_topic(cluster, "TopicTest", 40, 1_700_000_000_000, 1_700_000_100_000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g", "TopicTest", None)
    cluster.close()
    proc, lines, addr = _serve(
        ["-n", f"mock://{tmp_path / 'store'}", "--port", "0", "--consumer", "g"], ready="consumer g online"
    )
    try:
        conn: Any = cli("consumerConnection", "-n", addr, "-g", "g", "--json").json()
        progress: Any = cli("consumerProgress", "-n", addr, "-g", "g", "-s", "true", "--json").json()
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, "".join(lines)
    assert [c["client_id"] for c in conn["clients"]] == ["127.0.0.1@1"] and "TopicTest" in conn["subscriptions"]
    held = {q["client_ip"] for q in progress["queues"] if q["topic"] == "TopicTest"}
    assert held == {"127.0.0.1"}
