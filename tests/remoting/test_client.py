"""The remoting client against a tiny scripted server on 127.0.0.1:0.

Each test scripts what the server does with the requests it receives (answer, answer out of
order, stay silent, reset, send garbage) and checks what callers see.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mqadmin import errors
from mqadmin.protocol import acl
from mqadmin.protocol.codec import FLAG_ONEWAY, FrameDecoder, RemotingCommand, encode
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.remoting.client import (
    ConnectFailed,
    ConnectionLost,
    RemotingClient,
    RequestTimeout,
)
from mqadmin.remoting.transport import TlsOptions, parse_address, split_addresses

SHORT = 0.3  # seconds: a time limit the tests expect to expire
WAIT = 5.0  # seconds: a bound for things that should happen promptly


class Peer:
    """The server side of one accepted connection."""

    def __init__(self, server: FakeServer, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self._send_lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def send(self, cmd: RemotingCommand) -> None:
        self.send_raw(encode(cmd))

    def send_raw(self, data: bytes) -> None:
        with self._send_lock:
            self.sock.sendall(data)

    def reply(self, request: RemotingCommand, **kw: object) -> None:
        self.send(request.reply(**kw))  # type: ignore[arg-type]

    def reset(self) -> None:
        """Close with RST instead of FIN, as a crashed or restarted server does."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _loop(self) -> None:
        decoder = FrameDecoder()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return
                for cmd in decoder.feed(data):
                    with self.server.lock:
                        self.server.requests.append(cmd)
                    self.server.handler(self, cmd)
        except (OSError, ValueError, errors.ConnectError):
            return  # the peer went away or sent what a server would also reject


Handler = Callable[[Peer, RemotingCommand], None]


def echo(peer: Peer, cmd: RemotingCommand) -> None:
    """Answer SUCCESS, echoing the request's fields and body; stay quiet for oneway requests."""
    if not cmd.is_response and not cmd.is_oneway:
        peer.reply(cmd, ext_fields=cmd.ext_fields, body=cmd.body)


class FakeServer:
    """Accepts connections on a loopback port and hands each request to ``handler``."""

    def __init__(self, handler: Handler = echo, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.lock = threading.Lock()
        self.requests: list[RemotingCommand] = []
        self.peers: list[Peer] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            if self.ssl_context is not None:
                try:
                    sock = self.ssl_context.wrap_socket(sock, server_side=True)
                except (OSError, ssl.SSLError):
                    sock.close()
                    continue
            with self.lock:
                self.peers.append(Peer(self, sock))

    def close(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone leaves the port listening
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for p in self.peers:
                p.close()

    def wait_requests(self, n: int) -> list[RemotingCommand]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            time.sleep(0.01)
        raise AssertionError(f"expected {n} requests, got {len(self.requests)}")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    yield srv
    srv.close()


@pytest.fixture
def client() -> Iterator[RemotingClient]:
    c = RemotingClient(timeout=WAIT)
    yield c
    c.close()


def free_port() -> int:
    """A port nobody listens on (bound then released; the kernel won't hand it out at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def request(code: int = RequestCode.GET_MAX_OFFSET, **fields: object) -> RemotingCommand:
    return RemotingCommand.request(code, fields)


# ---------------------------------------------------------------------------------------------
# Basics


def test_round_trip_sends_json_header_and_matches_the_reply(server: FakeServer, client: RemotingClient) -> None:
    reply = client.invoke(server.addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T"}, b"xyz"))
    assert reply.code == ResponseCode.SUCCESS
    assert reply.ext_fields == {"topic": "T"} and reply.body == b"xyz"
    (sent,) = server.requests
    assert sent.language == "PYTHON" and sent.flag == 0 and sent.opaque == reply.opaque


def test_one_connection_per_address_shared_by_threads(server: FakeServer, client: RemotingClient) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.invoke(server.addr, request(n=i)), range(64)))
    assert len(server.peers) == 1
    assert len({r.opaque for r in server.requests}) == 64


def test_replies_out_of_order_reach_their_callers() -> None:
    """The server holds 16 requests and answers them backwards: matching is by opaque, not FIFO."""
    batch = 16
    held: list[tuple[Peer, RemotingCommand]] = []
    lock = threading.Lock()

    def reverse(peer: Peer, cmd: RemotingCommand) -> None:
        with lock:
            held.append((peer, cmd))
            if len(held) < batch:
                return
            todo = held[::-1]
            held.clear()
        for p, c in todo:
            p.reply(c, ext_fields={"n": c.ext_fields["n"]})

    srv = FakeServer(reverse)
    try:
        with RemotingClient(timeout=WAIT) as c, ThreadPoolExecutor(batch) as pool:
            answers = list(pool.map(lambda i: c.invoke(srv.addr, request(n=i)).ext_fields["n"], range(batch)))
        assert answers == [str(i) for i in range(batch)]
        opaques = [r.opaque for r in srv.requests]
        assert len(set(opaques)) == batch
    finally:
        srv.close()


def test_submit_pipelines_without_threads(server: FakeServer, client: RemotingClient) -> None:
    pending = [client.submit(server.addr, request(n=i)) for i in range(10)]
    assert [p.result().ext_fields["n"] for p in pending] == [str(i) for i in range(10)]


def test_submit_many_writes_every_request_at_once_and_matches_each_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    """A window of pulls goes out in one write; every request keeps its own opaque and signature,
    and each caller gets its own reply."""
    from mqadmin.remoting import transport

    writes: list[bytes] = []
    real_send = transport.PlainTransport.send

    def counting_send(self: transport.PlainTransport, data: bytes) -> None:
        writes.append(data)
        real_send(self, data)

    monkeypatch.setattr(transport.PlainTransport, "send", counting_send)
    verdicts: list[bool] = []

    def check(peer: Peer, cmd: RemotingCommand) -> None:
        verdicts.append(acl.verify(cmd.ext_fields, cmd.body, "sk"))
        echo(peer, cmd)

    srv = FakeServer(check)
    try:
        with RemotingClient(timeout=WAIT, access_key="ak", secret_key="sk") as c:
            pending = c.submit_many(srv.addr, [request(n=i) for i in range(12)])
            assert [p.result().ext_fields["n"] for p in pending] == [str(i) for i in range(12)]
        assert len(writes) == 1
        assert len({r.opaque for r in srv.requests}) == 12 and verdicts == [True] * 12
    finally:
        srv.close()


def test_submit_many_to_a_dead_address_fails_each_request_with_its_address(client: RemotingClient) -> None:
    addr = f"127.0.0.1:{free_port()}"
    pending = client.submit_many(addr, [request(n=i) for i in range(3)])
    for p in pending:
        with pytest.raises(ConnectFailed, match=f"cannot connect to {addr}"):
            p.result()


def test_oneway_request_sets_the_flag_and_gets_no_reply(server: FakeServer, client: RemotingClient) -> None:
    client.invoke_oneway(server.addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, commitOffset=5))
    (sent,) = server.wait_requests(1)
    assert sent.flag & FLAG_ONEWAY
    # the connection is still in step afterwards
    assert client.invoke(server.addr, request(x=1)).ext_fields == {"x": "1"}


# ---------------------------------------------------------------------------------------------
# Failures


def test_refused_connection_names_the_address(client: RemotingClient) -> None:
    addr = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConnectFailed) as info:
        client.invoke(addr, request())
    assert str(info.value) == f"cannot connect to {addr}: connection refused"
    assert info.value.addr == addr
    assert isinstance(info.value, errors.ConnectError)


def test_timeout_names_the_address_and_leaves_the_connection_usable() -> None:
    silent_once = threading.Event()
    late_sent = threading.Event()

    def answer_late(peer: Peer, cmd: RemotingCommand) -> None:
        peer.reply(cmd, ext_fields={"late": "yes"})
        late_sent.set()

    def first_silent(peer: Peer, cmd: RemotingCommand) -> None:
        if not silent_once.is_set():
            silent_once.set()
            threading.Timer(SHORT * 2, answer_late, (peer, cmd)).start()
            return
        echo(peer, cmd)

    srv = FakeServer(first_silent)
    try:
        with RemotingClient(timeout=SHORT) as c:
            started = time.monotonic()
            with pytest.raises(RequestTimeout) as info:
                c.invoke(srv.addr, request(RequestCode.GET_CONSUME_STATS))
            waited = time.monotonic() - started
            assert SHORT <= waited < SHORT + 1.0
            assert str(info.value) == f"timed out after 0.3 s waiting for {srv.addr} (GET_CONSUME_STATS)"
            # the late reply is on the wire before the next request: it must be dropped, not misdelivered
            assert late_sent.wait(WAIT)
            assert c.invoke(srv.addr, request(x=2)).ext_fields == {"x": "2"}
            assert len(srv.peers) == 1
    finally:
        srv.close()


def test_timeouts_are_not_retried_even_for_reads() -> None:
    srv = FakeServer(lambda peer, cmd: None)
    try:
        with RemotingClient(timeout=SHORT) as c, pytest.raises(RequestTimeout):
            c.invoke(srv.addr, request(), idempotent=True)
        assert len(srv.requests) == 1
    finally:
        srv.close()


def test_reset_fails_waiters_and_reads_retry_on_a_new_connection() -> None:
    resets = {"left": 1}

    def reset_first(peer: Peer, cmd: RemotingCommand) -> None:
        if resets["left"]:
            resets["left"] -= 1
            peer.reset()
            return
        echo(peer, cmd)

    srv = FakeServer(reset_first)
    try:
        with RemotingClient(timeout=WAIT) as c:
            reply = c.invoke(srv.addr, request(n=1), idempotent=True)
            assert reply.ext_fields == {"n": "1"}
            assert len(srv.peers) == 2  # reconnected once
            assert len(srv.requests) == 2
    finally:
        srv.close()


def test_writes_are_not_retried_and_the_next_use_reconnects() -> None:
    resets = {"left": 1}

    def reset_first(peer: Peer, cmd: RemotingCommand) -> None:
        if resets["left"]:
            resets["left"] -= 1
            peer.reset()
            return
        echo(peer, cmd)

    srv = FakeServer(reset_first)
    try:
        with RemotingClient(timeout=WAIT) as c:
            with pytest.raises(ConnectionLost) as info:
                c.invoke(srv.addr, request(RequestCode.UPDATE_CONSUMER_OFFSET))
            assert srv.addr in str(info.value)
            assert len(srv.requests) == 1
            assert c.invoke(srv.addr, request(n=3)).ext_fields == {"n": "3"}
            assert len(srv.peers) == 2
    finally:
        srv.close()


def test_server_closing_while_many_wait_fails_all_of_them() -> None:
    def close_at_four(peer: Peer, cmd: RemotingCommand) -> None:
        if len(peer.server.requests) == 4:
            peer.close()

    srv = FakeServer(close_at_four)
    try:
        with RemotingClient(timeout=WAIT) as c:
            pending = [c.submit(srv.addr, request(n=i)) for i in range(4)]
            started = time.monotonic()
            for p in pending:
                with pytest.raises(ConnectionLost):
                    p.result()
            assert time.monotonic() - started < WAIT  # failed at once, not after the time limit
    finally:
        srv.close()


def test_a_server_that_drops_plaintext_unanswered_suggests_tls() -> None:
    """What a RocketMQ server with tls.server.mode=enforcing does to a plaintext request."""
    srv = FakeServer(lambda peer, cmd: peer.close())
    try:
        with RemotingClient(timeout=WAIT) as c:
            with pytest.raises(ConnectionLost) as info:
                c.invoke(srv.addr, request())
            assert str(info.value) == (
                f"connection to {srv.addr} lost: closed by peer before any reply (does the server require TLS? try --tls)"
            )
    finally:
        srv.close()


def test_bad_frame_closes_only_that_connection() -> None:
    def garbage(peer: Peer, cmd: RemotingCommand) -> None:
        # a length that leaves no room for the header word
        peer.send_raw(b"\x00\x00\x00\x02\x00\x00")

    bad = FakeServer(garbage)
    good = FakeServer()
    try:
        with RemotingClient(timeout=WAIT) as c:
            good_pending = c.submit(good.addr, request(n=1))
            with pytest.raises(ConnectionLost) as info:
                c.invoke(bad.addr, request(RequestCode.UPDATE_CONSUMER_OFFSET))
            assert "bad frame" in str(info.value) and bad.addr in str(info.value)
            assert good_pending.result().ext_fields == {"n": "1"}
            assert c.invoke(good.addr, request(n=2)).ext_fields == {"n": "2"}
            assert len(good.peers) == 1
    finally:
        bad.close()
        good.close()


def test_oversized_frame_is_refused_before_it_is_buffered() -> None:
    limit = 4096
    announced = 1 << 30

    def huge(peer: Peer, cmd: RemotingCommand) -> None:
        peer.send_raw(struct.pack(">i", announced) + b"\x00" * 64)

    srv = FakeServer(huge)
    try:
        with RemotingClient(timeout=WAIT, max_frame_length=limit) as c:
            with pytest.raises(ConnectionLost) as info:
                c.invoke(srv.addr, request())
            assert "exceeds" in str(info.value)
    finally:
        srv.close()


def test_large_reply_within_the_limit_arrives_whole(server: FakeServer, client: RemotingClient) -> None:
    body = bytes(range(256)) * 8192  # 2 MiB: many recv() calls
    reply = client.invoke(server.addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, {}, body))
    assert reply.body == body


def test_closed_client_refuses_new_requests(server: FakeServer) -> None:
    c = RemotingClient()
    c.invoke(server.addr, request())
    c.close()
    with pytest.raises(errors.ConnectError, match="closed"):
        c.invoke(server.addr, request())
    c.close()  # idempotent


# ---------------------------------------------------------------------------------------------
# Server-to-client requests


def _server_request(peer_holder: list[Peer], code: int, *, oneway: bool = False) -> RemotingCommand:
    cmd = RemotingCommand.request(code, {"consumerGroup": "g"}, opaque=777, language="JAVA", oneway=oneway)
    peer_holder[0].send(cmd)
    return cmd


def test_unhandled_server_request_gets_request_code_not_supported() -> None:
    replies: list[RemotingCommand] = []

    def record(peer: Peer, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            replies.append(cmd)
        else:
            echo(peer, cmd)

    srv = FakeServer(record)
    try:
        with RemotingClient(timeout=WAIT) as c:
            c.invoke(srv.addr, request())
            _server_request(srv.peers, RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, oneway=True)  # no answer
            _server_request(srv.peers, RequestCode.GET_CONSUMER_RUNNING_INFO)
            srv.wait_requests(2)
            assert c.invoke(srv.addr, request(after=1)).ext_fields == {"after": "1"}  # reader alive
        (answer,) = replies
        assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert answer.opaque == 777 and answer.is_response
        assert answer.remark == " request type 307 not supported"
    finally:
        srv.close()


def test_registered_handler_answers_and_a_failing_handler_does_not_kill_the_reader() -> None:
    replies: list[RemotingCommand] = []

    def record(peer: Peer, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            replies.append(cmd)
        else:
            echo(peer, cmd)

    def running_info(cmd: RemotingCommand) -> RemotingCommand:
        return cmd.reply(body=b'{"ok":true}')

    def broken(cmd: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("boom")

    srv = FakeServer(record)
    try:
        with RemotingClient(timeout=WAIT) as c:
            c.register_handler(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
            c.register_handler(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, broken)
            c.invoke(srv.addr, request())
            _server_request(srv.peers, RequestCode.GET_CONSUMER_RUNNING_INFO)
            _server_request(srv.peers, RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
            srv.wait_requests(3)
            assert c.invoke(srv.addr, request(after=1)).ext_fields == {"after": "1"}
        by_code = {r.code: r for r in replies}
        assert by_code[ResponseCode.SUCCESS].body == b'{"ok":true}'
        assert by_code[ResponseCode.SUCCESS].opaque == 777
        assert "boom" in (by_code[ResponseCode.SYSTEM_ERROR].remark or "")
    finally:
        srv.close()


def test_reply_with_unknown_opaque_is_dropped(server: FakeServer, client: RemotingClient) -> None:
    client.invoke(server.addr, request())
    server.peers[0].send(RemotingCommand.response(opaque=123456, ext_fields={"stray": "1"}))
    assert client.invoke(server.addr, request(n=9)).ext_fields == {"n": "9"}


# ---------------------------------------------------------------------------------------------
# ACL


def test_every_request_is_signed_and_the_secret_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cr3t-value"
    verdicts: list[bool] = []

    def check(peer: Peer, cmd: RemotingCommand) -> None:
        verdicts.append(cmd.ext_fields.get("AccessKey") == "ak" and acl.verify(cmd.ext_fields, cmd.body, secret))
        echo(peer, cmd)

    srv = FakeServer(check)
    caplog.set_level(logging.DEBUG, logger="mqadmin")
    try:
        with RemotingClient(srv.addr, timeout=WAIT, access_key="ak", secret_key=secret) as c:
            c.invoke(srv.addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "T", "e": 1}, b"body"))
            c.invoke_namesrv(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T"))
            c.invoke_oneway(srv.addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, commitOffset=1))
            srv.wait_requests(3)
            assert secret not in repr(c)
        assert verdicts == [True, True, True]
        assert secret not in caplog.text
        # a wrong secret is what the server would reject
        assert not acl.verify(srv.requests[0].ext_fields, srv.requests[0].body, "other")
    finally:
        srv.close()


def test_unsigned_without_credentials(server: FakeServer, client: RemotingClient) -> None:
    client.invoke(server.addr, request(topic="T"))
    assert server.requests[0].ext_fields == {"topic": "T"}


# ---------------------------------------------------------------------------------------------
# Name-server list


def test_namesrv_failover_goes_to_the_next_address_and_stays_there(server: FakeServer) -> None:
    dead = f"127.0.0.1:{free_port()}"
    with RemotingClient(f"{dead}; {server.addr}", timeout=WAIT) as c:
        assert c.namesrv_addrs == [dead, server.addr]
        addr, reply = c.invoke_namesrv(request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert addr == server.addr and reply.code == ResponseCode.SUCCESS
        addr, _ = c.invoke_namesrv(request(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert addr == server.addr


def test_namesrv_failover_after_a_timeout() -> None:
    silent = FakeServer(lambda peer, cmd: None)
    good = FakeServer()
    try:
        with RemotingClient([silent.addr, good.addr], timeout=SHORT) as c:
            addr, _ = c.invoke_namesrv(request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert addr == good.addr
    finally:
        silent.close()
        good.close()


def test_all_namesrvs_down_lists_every_failure() -> None:
    a, b = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with RemotingClient(f"{a};{b}", timeout=WAIT) as c, pytest.raises(errors.ConnectError) as info:
        c.invoke_namesrv(request(RequestCode.GET_BROKER_CLUSTER_INFO))
    text = str(info.value)
    assert text.startswith("no name server answered: ")
    assert f"cannot connect to {a}: connection refused" in text and f"cannot connect to {b}" in text


def test_single_namesrv_down_keeps_the_plain_message() -> None:
    a = f"127.0.0.1:{free_port()}"
    with RemotingClient(a) as c, pytest.raises(ConnectFailed) as info:
        c.invoke_namesrv(request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert str(info.value) == f"cannot connect to {a}: connection refused"


@pytest.mark.parametrize("bad", ["nohost", "host:", ":9876", "h:0", "h:70000", "h:x"])
def test_bad_addresses_are_usage_errors(bad: str) -> None:
    with pytest.raises(errors.UsageError, match="expected host:port"):
        parse_address(bad)


def test_address_helpers() -> None:
    assert parse_address("[::1]:9876") == ("::1", 9876)
    assert split_addresses(" a:1 ;; b:2 ;") == ["a:1", "b:2"]


# ---------------------------------------------------------------------------------------------
# TLS


def test_tls_with_a_private_ca_and_concurrent_callers(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    srv = FakeServer(ssl_context=ctx)
    try:
        with RemotingClient(timeout=WAIT, tls=TlsOptions(ca=str(cert))) as c, ThreadPoolExecutor(8) as pool:
            body = b"x" * 300_000  # several TLS records each way
            got = list(pool.map(lambda i: c.invoke(srv.addr, RemotingCommand.request(11, {"n": i}, body)), range(32)))
            assert [r.ext_fields["n"] for r in got] == [str(i) for i in range(32)]
            assert all(r.body == body for r in got)
            assert len(srv.peers) == 1
    finally:
        srv.close()


def test_tls_refuses_an_untrusted_server(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = certificate
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    srv = FakeServer(ssl_context=ctx)
    try:
        with RemotingClient(timeout=WAIT, tls=TlsOptions()) as c, pytest.raises(ConnectFailed) as info:
            c.invoke(srv.addr, request())
        assert str(info.value).startswith(f"cannot connect to {srv.addr}: TLS failure")
    finally:
        srv.close()


def test_tls_client_against_a_plain_server_fails_cleanly(server: FakeServer) -> None:
    with RemotingClient(timeout=SHORT, tls=TlsOptions()) as c, pytest.raises(errors.ConnectError) as info:
        c.invoke(server.addr, request())
    assert server.addr in str(info.value)
