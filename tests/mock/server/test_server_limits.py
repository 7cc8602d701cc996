"""The mock server's bounds on what misbehaving peers may hold: unsent replies per connection and
server-wide, how long a reply may wait, and how long a frame may take to arrive (slowloris)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

import pytest

from mqadmin.mock.server import MAX_QUEUE_NUMS
from mqadmin.protocol.codec import RemotingCommand, encode
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import TOPIC, Clients, RawClient, Serve

pytestmark = pytest.mark.integration

serve = wire.serve
clients = wire.clients

MIB = 1024 * 1024
WIDE = "Wide"


def _wide_topic(addr: str) -> bytes:
    """Create a topic of the widest kind; a stats request for it (a ~100 KB reply), encoded."""
    client = RawClient(addr)
    try:
        ext = {"topic": WIDE, "readQueueNums": MAX_QUEUE_NUMS, "writeQueueNums": MAX_QUEUE_NUMS}
        assert client.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.SUCCESS
    finally:
        client.close()
    return encode(RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": WIDE}))


class NonReader:
    """A peer that pipelines requests and never reads a reply, until the server cuts it."""

    def __init__(self, addr: str, request: bytes) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.request = request
        self.cut = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._pipeline, daemon=True)
        self.thread.start()

    def _pipeline(self) -> None:
        while not self.stop.is_set():
            try:
                self.sock.sendall(self.request * 20)
            except TimeoutError:
                continue  # the server stopped reading us: the point
            except OSError:
                self.cut.set()
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close()


def test_non_reading_peers_hold_a_bounded_backlog_until_their_replies_time_out(
    serve: Serve, clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve(reply_timeout=6.0)
    caplog.set_level(logging.WARNING, logger="mqadmin.mock.server")
    request = _wide_topic(server.broker_addrs["broker-a"])
    good = clients(server.broker_addrs["broker-a"])
    peers = [NonReader(server.broker_addrs["broker-a"], request) for _ in range(4)]
    peak = 0
    stalled: set[int] = set()
    try:
        # the kernel's socket buffers fill first; then each connection stalls (neither read nor
        # served) at about a megabyte plus the reply that crossed it, not at 64 MiB
        deadline = time.monotonic() + 60
        while not all(p.cut.is_set() for p in peers) and time.monotonic() < deadline:
            peak = max(peak, server.io.unsent)
            stalled |= {id(c) for c in list(server.io.conns) if c.stalled}
            if len(stalled) == 2:  # a well-behaved client is served meanwhile
                assert good.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}).code == 0
            time.sleep(0.02)
        assert all(p.cut.is_set() for p in peers), "a peer whose replies waited past the reply timeout was not cut"
    finally:
        for peer in peers:
            peer.close()
    assert len(stalled) == len(peers)
    assert 0 < peak < len(peers) * 3 * MIB, f"{peak / MIB:.1f} MiB unsent"
    wire.wait_until(lambda: server.io.unsent == 0, "the cut peers' replies to be released")
    assert sum("a reply waited" in r.getMessage() for r in caplog.records) == len(peers)
    assert good.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 1}).code == ResponseCode.SUCCESS


def test_past_the_server_wide_limit_the_oldest_offender_is_cut(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    server = serve(reply_timeout=0, max_unsent=3 * MIB)
    caplog.set_level(logging.WARNING, logger="mqadmin.mock.server")
    request = _wide_topic(server.broker_addrs["broker-a"])
    first = NonReader(server.broker_addrs["broker-a"], request)
    later: list[NonReader] = []
    try:
        deadline = time.monotonic() + 30
        while server.io.unsent <= MIB:  # the kernel's buffers first, then the first peer's backlog
            assert time.monotonic() < deadline, "the first peer's replies never piled up"
            time.sleep(0.02)
        later = [NonReader(server.broker_addrs["broker-a"], request) for _ in range(3)]
        assert first.cut.wait(45), "the oldest offender was not cut"
        time.sleep(1.0)
        assert server.io.unsent <= 3 * MIB + MIB, f"{server.io.unsent / MIB:.1f} MiB unsent"
        assert sum(not p.cut.is_set() for p in later) >= 1, "more were cut than the limit asks"
    finally:
        for peer in [first, *later]:
            peer.close()
    assert any("more than" in r.getMessage() and "unsent reply bytes" in r.getMessage() for r in caplog.records)


def test_a_frame_trickling_in_is_closed_at_the_frame_timeout(serve: Serve, clients: Clients) -> None:
    """Slowloris: bytes of a never-ending frame every 0.2 s keep a connection busy, not alive;
    one whole request at a time, as slowly, is served."""
    server = serve(idle_timeout=0, frame_timeout=1.5)
    host, port = server.namesrv_addr.rsplit(":", 1)
    frame = encode(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    slow = [socket.create_connection((host, int(port)), timeout=5) for _ in range(20)]
    honest = clients(server.namesrv_addr)
    started = time.monotonic()
    lived: list[float] = []
    try:
        for i in range(60):
            for sock in [s for s in slow if s.fileno() != -1]:
                try:
                    sock.sendall(frame[i % 7 : i % 7 + 1] if i < 7 else b"\x00")
                except OSError:
                    lived.append(time.monotonic() - started)
                    sock.close()
            if i % 3 == 0:
                reply = honest.call(RequestCode.GET_BROKER_CLUSTER_INFO)
                assert reply.code == ResponseCode.SUCCESS
            if len(lived) == len(slow):
                break
            time.sleep(0.2)
    finally:
        for sock in slow:
            with contextlib.suppress(OSError):
                sock.close()
    assert len(lived) == len(slow), f"{len(slow) - len(lived)} trickling connections still open after 12 s"
    assert max(lived) < 6.0, f"closed after up to {max(lived):.1f} s with a 1.5 s frame timeout"
    assert not honest.eof.is_set()


def test_a_client_streaming_frames_for_longer_than_the_frame_timeout_is_served(serve: Serve) -> None:
    """The deadline is per frame: a pipelining client whose reads never end on a frame boundary
    is busy, not slow, however long it streams."""
    server = serve(frame_timeout=1.0)
    client = RawClient(server.broker_addrs["broker-a"])
    try:
        frames = [
            encode(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}, opaque=i))
            for i in range(1000, 3000)
        ]
        size = len(frames[0])
        assert {len(f) for f in frames} == {size}
        stream = b"".join(frames)
        client.sock.sendall(stream[: size // 2])
        pos = size // 2  # every send (and so every read) ends half-way through a frame
        started = time.monotonic()
        while time.monotonic() - started < 3.0 and pos + 3 * size < len(stream):  # three frame timeouts
            client.sock.sendall(stream[pos : pos + 3 * size])
            pos += 3 * size
            time.sleep(0.004)
        assert time.monotonic() - started > 2.0, "the stream ran out before two frame timeouts passed"
        client.sock.sendall(stream[pos:])
        assert not client.eof.is_set(), "a streaming client was closed as if it were slowloris"
        reply = client.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0})
        assert reply.code == ResponseCode.SUCCESS
    finally:
        client.close()
