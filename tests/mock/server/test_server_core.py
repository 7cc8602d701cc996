"""The server itself: dispatch (unknown codes, oneway, ACL, bad frames, failing handlers), TLS,
its life cycle and flushes, and serving a store for mockBroker.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mqadmin import fastjson
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer, ServerReady, serve_store, tls_context
from mqadmin.protocol import acl
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import (
    GROUP,
    PULL_SUBSCRIPTION_SUSPEND,
    REPLY_TIMEOUT_S,
    TOPIC,
    Clients,
    RawClient,
    Serve,
    cpp_heartbeat,
    make_cluster,
    pull,
    send_v2,
    wait_until,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


# ---------------------------------------------------------------------------------------------
# Robustness, ACL, TLS, shutdown


def test_unknown_code_and_oneway_requests(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    reply = broker.call(9999)
    assert (reply.code, reply.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported")
    oneway = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 0},
        oneway=True,
    )
    opaque = broker.send(oneway)
    assert broker.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == ResponseCode.SUCCESS
    with pytest.raises(AssertionError):
        broker.wait(opaque, timeout=0.3)  # no reply to a oneway request


def test_acl_rejects_unsigned_and_badly_signed_requests(serve: Serve, clients: Clients) -> None:
    server = serve(acl=("ak", "sk"))
    broker = clients(server.broker_addrs["broker-a"])
    mq = {"topic": TOPIC, "queueId": 0}
    assert broker.call(RequestCode.GET_MAX_OFFSET, mq).code == ResponseCode.NO_PERMISSION
    wrong = acl.sign(mq, None, "ak", "not-the-secret")
    assert broker.call(RequestCode.GET_MAX_OFFSET, wrong).code == ResponseCode.NO_PERMISSION
    other = acl.sign(mq, None, "someone", "sk")
    assert broker.call(RequestCode.GET_MAX_OFFSET, other).code == ResponseCode.NO_PERMISSION
    signed = acl.sign(mq, None, "ak", "sk")
    assert broker.call(RequestCode.GET_MAX_OFFSET, signed).code == ResponseCode.SUCCESS
    body = cpp_heartbeat("c1")
    assert broker.call(RequestCode.HEART_BEAT, acl.sign({}, body, "ak", "sk"), body).code == ResponseCode.SUCCESS
    tampered = acl.sign({}, body, "ak", "sk")
    assert broker.call(RequestCode.HEART_BEAT, tampered, body + b" ").code == ResponseCode.NO_PERMISSION
    ns = clients(server.namesrv_addr)
    assert ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).code == ResponseCode.SUCCESS


def test_oversize_and_garbage_frames_drop_only_that_connection(serve: Serve, clients: Clients) -> None:
    server = serve()
    addr = server.broker_addrs["broker-a"]
    healthy = clients(addr)
    huge = clients(addr)
    huge.sock.sendall(struct.pack(">i", 17 * 1024 * 1024) + b"\0" * 64)
    assert huge.eof.wait(REPLY_TIMEOUT_S)
    garbage = clients(addr)
    garbage.sock.sendall(struct.pack(">ii", 4 + 5, 5) + b"nope!")
    assert garbage.eof.wait(REPLY_TIMEOUT_S)
    assert healthy.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == ResponseCode.SUCCESS
    assert clients(addr).call(RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": 0}).code == 0


def test_handler_failure_is_a_reply_not_a_drop(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    assert broker.call(RequestCode.HEART_BEAT, body=b"{not json").code == ResponseCode.SYSTEM_ERROR
    assert broker.call(RequestCode.PULL_MESSAGE, {"topic": TOPIC}).code == ResponseCode.SYSTEM_ERROR
    assert broker.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == ResponseCode.SUCCESS


def test_tls_and_plaintext_on_the_same_port(serve: Serve, clients: Clients, certificate: tuple[Path, Path]) -> None:
    server = serve(tls=tls_context(*map(str, certificate)))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    secure = clients(server.namesrv_addr, wrap=lambda s: context.wrap_socket(s, server_hostname="127.0.0.1"))
    route = secure.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    assert route.code == ResponseCode.SUCCESS and b"broker-a" in route.body
    key = "k" * 100_000  # request and reply span many TLS records
    big = secure.call(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": key})
    assert big.code == ResponseCode.QUERY_NOT_FOUND and (big.remark or "").endswith(key)
    plain = clients(server.namesrv_addr)
    assert plain.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS


def test_stop_flushes_offsets_and_closes_connections(tmp_path: Path) -> None:
    cluster = make_cluster(tmp_path / "store", "5.3.3")
    server = MockServer(cluster, namesrv_port=0).start()
    client = RawClient(server.broker_addrs["broker-a"])
    held: list[RemotingCommand] = []
    try:
        reply = client.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 1, "commitOffset": 42},
        )
        assert reply.code == ResponseCode.SUCCESS

        def hold() -> None:
            with contextlib.suppress(AssertionError):  # the server goes away without answering
                held.append(pull(client, 0, sys_flag=PULL_SUBSCRIPTION_SUSPEND, suspend_ms=15_000))

        threading.Thread(target=hold, daemon=True).start()
        wait_until(lambda: server.long_polling.count == 1, "the pull to be held")
        t0 = time.monotonic()
        server.stop()
        assert time.monotonic() - t0 < 3, "stop must not wait out a held pull"
        assert client.eof.wait(REPLY_TIMEOUT_S)
        offsets = fastjson.loads((tmp_path / "store" / "broker-a" / "config" / "consumerOffset.json").read_text())
        assert offsets["offsetTable"][f"{TOPIC}@{GROUP}"] == {1: 42}
        assert cluster.brokers["broker-a"].addr == "mock://broker-a"  # the address is handed back
        assert not held
        server.stop()  # idempotent
    finally:
        client.close()
        cluster.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(server.namesrv_addr.rsplit(":", 1)[1])), timeout=1)


def test_periodic_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mqadmin.mock.server.core as server_module

    monkeypatch.setattr(server_module, "FLUSH_INTERVAL_S", 0.1)
    cluster = make_cluster(tmp_path / "store", "5.3.3")
    with MockServer(cluster, namesrv_port=0) as server:
        client = RawClient(server.broker_addrs["broker-b"])
        client.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 7},
        )
        path = tmp_path / "store" / "broker-b" / "config" / "consumerOffset.json"
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while time.monotonic() < deadline and not (path.exists() and "7" in path.read_text()):
            time.sleep(0.05)
        assert fastjson.loads(path.read_text())["offsetTable"][f"{TOPIC}@{GROUP}"] == {0: 7}
        client.close()
    cluster.close()


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    from mqadmin.errors import ConnectError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = make_cluster(tmp_path / "store", "5.3.3")
        try:
            with pytest.raises(ConnectError, match="cannot listen"):
                MockServer(cluster, namesrv_port=port).start()
        finally:
            cluster.close()


# ---------------------------------------------------------------------------------------------
# The mockBroker command and its helper


def test_serve_store_creates_serves_and_reports(tmp_path: Path) -> None:
    stop = threading.Event()
    ready: list[ServerReady] = []
    address = f"mock://{tmp_path}/new"
    result: list[Any] = []

    def run() -> None:
        result.append(serve_store(address, stop=stop, port=0, brokers=1, broker_version="4.9.8", on_ready=ready.append))

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while not ready and time.monotonic() < deadline:
        time.sleep(0.02)
    info = ready[0]
    assert info.created and list(info.brokers) == ["broker-a"] and info.broker_version == "4.9.8"
    client = RawClient(info.brokers["broker-a"])
    assert send_v2(client, "Fresh", 0, b"x").code == ResponseCode.SUCCESS
    client.close()
    stop.set()
    thread.join(REPLY_TIMEOUT_S)
    report = result[0]
    assert report.stats["messages_stored"] == 1 and report.topics == 1
    reopened = MockCluster(tmp_path / "new", writable=True)  # the lock was released
    assert reopened.brokers["broker-a"].max_offset("Fresh", 0) == 1
    reopened.close()


def test_mock_broker_command_serves_until_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", "mock-broker", "-n", "mock://cli", "--port", "0", "--brokers", "1", "--demo"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        namesrv = None
        lines = []
        deadline = time.monotonic() + 60
        while namesrv is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"namesrv (\S+)", line)
            namesrv = m.group(1) if m else None
        assert namesrv, "".join(lines)
        ns = RawClient(namesrv)
        route = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        assert route.code == ResponseCode.SUCCESS  # --demo seeded the store
        ns.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "namesrv" in out and "broker-a" in out and "flushed" in out
    assert (tmp_path / "home" / "mock" / "cli" / "cluster.json").exists()
