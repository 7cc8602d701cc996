"""The mock broker server against hostile input and scarce resources: names that would leave the
store, header fields out of range, fuzzed frames, idle and greedy peers, too few file descriptors.

Raw frames only (tests/mock/server/wire.py), with the fixtures of this folder's conftest.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mqadmin import fastjson
from mqadmin.mock.server import MAX_QUEUE_NUMS, MockServer
from mqadmin.protocol.codec import BadFrame, FrameDecoder, RemotingCommand, encode
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import GROUP, TOPIC, Clients, RawClient, Serve, send_v2
from tests.support.fuzz import codec_inputs, nasty_frame

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients

ESCAPES = ("x/../../../../escaped_by_name", "../escaped_by_name", "..", ".", "a\\..\\escaped_by_name", "")


def _escaped_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if "escaped" in p.name]


def _offset_of_first_message(broker: RawClient) -> int:
    reply = send_v2(broker, TOPIC, 0, b"original")
    assert reply.code == ResponseCode.SUCCESS
    return int(reply.ext_fields["msgId"][-16:], 16)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_names_that_would_leave_the_store_are_refused(
    serve: Serve, clients: Clients, tmp_path: Path, version: str
) -> None:
    server = serve(version)
    broker = clients(server.broker_addrs["broker-a"])
    offset = _offset_of_first_message(broker)
    topic_code = ResponseCode.INVALID_PARAMETER if version == "5.3.3" else ResponseCode.SYSTEM_ERROR
    for name in ESCAPES:
        # send, v1 and v2: TopicValidator (AbstractSendMessageProcessor.msgCheck)
        v1 = broker.call(RequestCode.SEND_MESSAGE, {"producerGroup": "p", "topic": name, "queueId": 0}, b"x")
        assert v1.code == topic_code, (name, v1)
        v2 = send_v2(broker, name, 0, b"x")
        assert v2.code == topic_code and v2.remark and "topic" in v2.remark, (name, v2)
        # send-back: the group's retry topic would be a folder
        back = broker.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": name, "offset": offset, "delayLevel": 0})
        assert back.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, (name, back)
        assert back.remark and back.remark.startswith(f"subscription group not exist, {name}")
        created = broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": name, "readQueueNums": 1})
        assert created.code == topic_code, (name, created)
        group_body = fastjson.dumps({"groupName": name}).encode()
        group = broker.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group_body)
        assert group.code == ResponseCode.INVALID_PARAMETER and "group" in (group.remark or ""), (name, group)
        for g, t in ((name, TOPIC), (GROUP, name)):
            ext = {"consumerGroup": g, "topic": t, "queueId": 0, "commitOffset": 1}
            update = broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
            assert update.code in (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.TOPIC_NOT_EXIST), (g, t)
        for g, t, code in ((name, TOPIC, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST), (GROUP, name, 17)):
            ext = {"consumerGroup": g, "topic": t, "queueId": 0, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 4}
            reply = broker.call(RequestCode.PULL_MESSAGE, ext)
            assert reply.code == code, (g, t, reply)
        for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP):
            reply = broker.call(code, {"topic": name, "queueId": 0, "timestamp": 0})
            assert reply.code == topic_code, (code, name, reply)
        heartbeat = {"clientID": "c1", "consumerDataSet": [{"groupName": name, "subscriptionDataSet": []}]}
        assert broker.call(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode()).code == ResponseCode.SUCCESS
    assert _escaped_files(tmp_path) == []
    # The refusals changed nothing: the store holds only what it held plus the one message.
    assert send_v2(broker, TOPIC, 0, b"still served").code == ResponseCode.SUCCESS


def test_long_names_follow_the_broker_limits(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    assert send_v2(broker, "t" * 127, 0, b"x").code == ResponseCode.SUCCESS
    too_long = send_v2(broker, "t" * 128, 0, b"x")
    assert (too_long.code, too_long.remark) == (
        ResponseCode.INVALID_PARAMETER,
        "The specified topic is longer than topic max length.",
    )
    for name, ok in (("g" * 120, True), ("g" * 121, False)):
        reply = broker.call(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps({"groupName": name}).encode()
        )
        assert (reply.code == ResponseCode.SUCCESS) is ok


def test_out_of_range_header_fields_are_refused_without_a_traceback(
    serve: Serve, clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    caplog.set_level(logging.INFO, logger="mqadmin.mock.server")
    view = broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": -1})
    assert (view.code, view.remark) == (ResponseCode.SYSTEM_ERROR, "can not find message by the offset, -1")
    beyond = broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": 2**62})
    assert beyond.code == ResponseCode.SYSTEM_ERROR
    for key, value in (("h", 2**31), ("f", -(2**31) - 1), ("j", 2**40), ("e", 2**31), ("g", 2**63)):
        ext = {"a": "p", "b": TOPIC, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "", key: value}
        reply = broker.call(RequestCode.SEND_MESSAGE_V2, ext, b"x")
        assert reply.code == ResponseCode.SYSTEM_ERROR and "is not a Java" in (reply.remark or ""), (key, reply)
    big_props = "\x02".join(f"k{i}\x01{'v' * 100}" for i in range(400))
    ext = {"a": "p", "b": TOPIC, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": big_props}
    assert broker.call(RequestCode.SEND_MESSAGE_V2, ext, b"x").code == ResponseCode.MESSAGE_ILLEGAL
    queue = send_v2(broker, TOPIC, 999, b"x")
    assert queue.code == ResponseCode.INVALID_PARAMETER and "queueId[999] is illegal" in (queue.remark or "")
    assert not [r for r in caplog.records if r.exc_info], "a handler logged a traceback"


def test_queue_counts_are_capped(serve: Serve, clients: Clients) -> None:
    server = serve()
    broker = clients(server.broker_addrs["broker-a"])
    huge = broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "Huge", "readQueueNums": 100_000})
    assert huge.code == ResponseCode.INVALID_PARAMETER
    for field in ("readQueueNums", "writeQueueNums"):
        ext = {"topic": "Huge", "readQueueNums": 4, field: MAX_QUEUE_NUMS + 1}
        assert broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.INVALID_PARAMETER
    ext = {"topic": "Largest", "readQueueNums": MAX_QUEUE_NUMS, "writeQueueNums": MAX_QUEUE_NUMS}
    assert broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.SUCCESS
    stats = broker.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Largest"})
    assert stats.code == ResponseCode.SUCCESS and len(fastjson.loads(stats.body)["offsetTable"]) == MAX_QUEUE_NUMS


def test_idle_connections_are_closed_and_busy_ones_kept(serve: Serve, clients: Clients) -> None:
    server = serve(idle_timeout=1.0)
    idle = clients(server.namesrv_addr)
    busy = clients(server.namesrv_addr)
    deadline = time.monotonic() + 10
    while not idle.eof.is_set() and time.monotonic() < deadline:
        assert busy.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == ResponseCode.SUCCESS
        idle.eof.wait(0.3)
    assert idle.eof.is_set(), "the idle connection was not closed"
    assert not busy.eof.is_set()
    fresh = clients(server.namesrv_addr)
    assert fresh.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).code == ResponseCode.SUCCESS


def test_half_open_peer_is_closed_after_idle_timeout(serve: Serve) -> None:
    """A peer that sent half a frame and went quiet still counts as idle."""
    server = serve(idle_timeout=1.0)
    host, port = server.namesrv_addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))[:7])
        sock.settimeout(10)
        assert sock.recv(1) == b""  # closed by the server


def test_a_peer_that_never_reads_is_cut_and_its_memory_released(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    server = serve(reply_timeout=3.0)
    caplog.set_level(logging.WARNING, logger="mqadmin.mock.server")
    host, port = server.broker_addrs["broker-a"].rsplit(":", 1)
    request = encode(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC}))
    ext = {"topic": "Wide", "readQueueNums": MAX_QUEUE_NUMS, "writeQueueNums": MAX_QUEUE_NUMS}
    client = RawClient(server.broker_addrs["broker-a"])
    assert client.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.SUCCESS
    client.close()
    wide = encode(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Wide"}))
    rss_before = _rss_mb()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                sock.sendall(wide * 50 + request)
            except TimeoutError:
                continue
            except OSError:
                break  # cut by the server
        else:
            pytest.fail("the server kept serving a peer that never reads its replies")
        wait_until(lambda: not server.io.conns, 20)
    assert any("left unread" in r.getMessage() for r in caplog.records)
    assert server.stats()["connections"] >= 2
    # The cut peer's 64 MiB of replies are gone from the heap, not kept by the allocator.
    assert _rss_mb() - rss_before < 40, f"RSS grew {_rss_mb() - rss_before:.0f} MB and stayed"
    fresh = RawClient(server.namesrv_addr)
    try:
        assert fresh.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).code == ResponseCode.SUCCESS
    finally:
        fresh.close()


def test_server_survives_fuzzed_frames(serve: Serve, clients: Clients, caplog: pytest.LogCaptureFixture) -> None:
    """20,000 frames: well-formed ones with hostile headers on one connection, mutated and random
    bytes on short-lived ones. Afterwards the server answers correctly with the threads it had."""
    server = serve()
    caplog.set_level(logging.WARNING, logger="mqadmin.mock.server")
    threads_before = _server_threads()
    rng = random.Random(8)
    addrs = [server.namesrv_addr, *server.broker_addrs.values()]
    frames = [nasty_frame(rng, 10_000 + i) for i in range(15_000)] + list(codec_inputs(88, 5_000))
    readable: list[bytes] = []
    unreadable: list[bytes] = []
    for data in frames:
        decoder = FrameDecoder()
        try:
            whole = bool(decoder.feed(data)) and decoder.buffered == 0
        except BadFrame:
            whole = False
        (readable if whole else unreadable).append(data)
    assert len(readable) > 8_000 and len(unreadable) > 5_000
    # Frames the codec reads are answered (or ignored, as oneway) on one long-lived connection.
    hostile = clients(server.broker_addrs["broker-a"])
    for start in range(0, len(readable), 500):
        hostile.sock.sendall(b"".join(readable[start : start + 500]))
    # Frames it cannot read cost only their own connection.
    for start in range(0, len(unreadable), 10):
        host, port = rng.choice(addrs).rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            with contextlib.suppress(OSError):  # dropped mid-send for a bad frame: that is the point
                sock.sendall(b"".join(unreadable[start : start + 10]))
    assert not hostile.eof.is_set()
    reply = hostile.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 1}, timeout=60)
    assert reply.code == ResponseCode.SUCCESS
    ns = clients(server.namesrv_addr)
    route = json.loads(ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).body)
    assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info][:3]
    assert _server_threads() == threads_before


# ---------------------------------------------------------------------------------------------
# Out of file descriptors: a real process under a low RLIMIT_NOFILE

FD_LIMIT = 64


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def test_out_of_file_descriptors_backs_off_and_recovers(tmp_path: Path) -> None:
    store = f"mock://{tmp_path / 'store'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", "mockBroker", "-n", store, "--port", "0", "--brokers", "1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=_low_fd_limit,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    held: list[socket.socket] = []
    try:
        wait_until(lambda: any("namesrv " in line for line in lines), 60)
        addr = re.search(r"namesrv (\S+)", next(line for line in lines if "namesrv " in line))
        assert addr is not None
        host, port = addr.group(1).rsplit(":", 1)
        for _ in range(FD_LIMIT * 2):  # far more than the server can accept
            held.append(socket.create_connection((host, int(port)), timeout=10))
        cpu_before = _cpu_seconds(proc.pid)
        time.sleep(3)
        cpu = _cpu_seconds(proc.pid) - cpu_before
        assert cpu < 1.5, f"the server spent {cpu:.1f} s of CPU in 3 s while out of descriptors"
        failures = [line for line in lines if "accept failed" in line]
        assert 1 <= len(failures) <= 3, failures
        for sock in held:
            sock.close()
        held.clear()
        # Recovered: a new client is served (after its turn in the back-log).
        client = RawClient(addr.group(1))
        try:
            reply = client.call(RequestCode.GET_BROKER_CLUSTER_INFO, timeout=30)
            assert reply.code == ResponseCode.SUCCESS
        finally:
            client.close()
    finally:
        for sock in held:
            sock.close()
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, "".join(lines)
    assert not [line for line in lines if "Traceback" in line], "".join(lines)


def _server_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("mock-"))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def wait_until(check: object, timeout: float) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the server")
        time.sleep(0.05)


def test_server_keeps_a_fixed_thread_count_for_many_connections(serve: Serve) -> None:
    server: MockServer = serve()
    before = _server_threads()
    host, port = server.namesrv_addr.rsplit(":", 1)
    socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(200)]
    try:
        wait_until(lambda: len(server.io.conns) >= 200, 20)
        assert _server_threads() == before
    finally:
        for sock in socks:
            sock.close()


def test_many_held_pulls_share_one_thread_and_wake_on_a_send(serve: Serve, clients: Clients) -> None:
    server = serve()
    addr = server.broker_addrs["broker-a"]
    before = _server_threads()
    consumers = [clients(addr) for _ in range(50)]
    ext = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": 1,
        "queueOffset": 0,
        "maxMsgNums": 32,
        "sysFlag": 0x4 | 0x2,  # subscription + suspend
        "suspendTimeoutMillis": 20_000,
        "subscription": "*",
    }
    opaques = [c.send(RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)) for c in consumers]
    wait_until(lambda: server.long_polling.count == 50, 10)
    assert _server_threads() == before
    started = time.monotonic()
    assert send_v2(clients(addr), TOPIC, 1, b"wake").code == ResponseCode.SUCCESS
    replies = [c.wait(o, timeout=10) for c, o in zip(consumers, opaques, strict=True)]
    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 50
    assert time.monotonic() - started < 5, "held pulls were not woken by the send"
    other = clients(addr)
    held_other = other.send(
        RemotingCommand.request(RequestCode.PULL_MESSAGE, {**ext, "queueId": 0, "suspendTimeoutMillis": 500})
    )
    assert other.wait(held_other, timeout=10).code == ResponseCode.PULL_NOT_FOUND  # its own queue stayed empty
