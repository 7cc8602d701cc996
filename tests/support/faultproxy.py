"""A TCP proxy in front of one broker that injects faults at exact remoting frames.

It reads the frames (4-byte length, header, body) both ways and counts the requests whose code
is in ``codes`` (the offset writes, by default). Armed with a :class:`Fault` it can cut every
connection when write ``n`` arrives (so writes 1..n-1 reached the broker and n.. did not), drop
the broker's reply to write ``n`` (the broker applied it; the client never hears so), or call a
hook right after forwarding the reply to write ``n`` (e.g. SIGKILL the broker). Loopback only;
every thread is a daemon and every wait is bounded.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

#: UPDATE_CONSUMER_OFFSET, INVOKE_BROKER_TO_RESET_OFFSET
WRITE_CODES = frozenset({15, 222})
_LEN = struct.Struct(">i")
RPC_TYPE_RESPONSE = 1


@dataclass
class Fault:
    #: cut every connection when the write with this number (1-based) arrives; it is not forwarded
    cut_at: int | None = None
    #: after a cut, refuse new connections too (the broker is unreachable), instead of a blip
    stay_down: bool = False
    #: forward the write with this number but never its reply
    drop_reply_to: int | None = None
    #: called right after the reply to the write with this number was forwarded
    after_reply_to: int | None = None
    hook: Callable[[], None] | None = None


@dataclass
class FaultProxy:
    upstream: str = ""
    codes: frozenset[int] = WRITE_CODES
    fault: Fault = field(default_factory=Fault)
    writes: int = 0
    down: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        #: opaque of a forwarded write -> its number
        self._opaques: dict[int, int] = {}
        threading.Thread(target=self._accept, name="fault-proxy", daemon=True).start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self._sock.getsockname()[1]}"

    def arm(self, fault: Fault) -> None:
        """A fresh fault: counters back to zero, every old connection closed."""
        with self._lock:
            self.fault, self.writes, self.down = fault, 0, False
            self._opaques.clear()
        self.cut_all()

    def cut_all(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._stop.set()
        self.cut_all()
        self._sock.close()

    # -- plumbing -------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.down or not self.upstream:
                client.close()
                continue
            host, port = self.upstream.rsplit(":", 1)
            try:
                server = socket.create_connection((host, int(port)), timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while True:
                frame = _read_frame(src)
                if frame is None:
                    break
                if not self._pass(frame, requests):
                    continue
                dst.sendall(frame)
                if not requests:
                    self._after(frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _pass(self, frame: bytes, request: bool) -> bool:
        code, opaque, flag = _header(frame)
        f = self.fault
        if request and not flag & RPC_TYPE_RESPONSE and code in self.codes:
            with self._lock:
                self.writes += 1
                n = self.writes
                self._opaques[opaque] = n
            if f.cut_at is not None and n >= f.cut_at:
                self.down = self.down or f.stay_down
                threading.Thread(target=self.cut_all, daemon=True).start()
                return False
            return True
        if not request and flag & RPC_TYPE_RESPONSE:
            n = self._opaques.get(opaque, 0)
            if f.drop_reply_to is not None and n == f.drop_reply_to:
                return False
        return True

    def _after(self, frame: bytes) -> None:
        code, opaque, flag = _header(frame)
        f = self.fault
        if flag & RPC_TYPE_RESPONSE and f.hook is not None and self._opaques.get(opaque) == f.after_reply_to:
            f.hook()


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (length,) = _LEN.unpack(head)
    body = _read_exact(sock, length)
    return None if body is None else head + body


def _header(frame: bytes) -> tuple[int, int, int]:
    """(code, opaque, flag) of a frame in either serialisation (JSON or RocketMQ's binary)."""
    mark = _LEN.unpack_from(frame, 4)[0]
    kind, size = (mark >> 24) & 0xFF, mark & 0xFFFFFF
    header = frame[8 : 8 + size]
    if kind == 0:
        doc = json.loads(header)
        return int(doc.get("code", 0)), int(doc.get("opaque", 0)), int(doc.get("flag", 0))
    code, _lang, _version, opaque, flag = struct.unpack_from(">hbhii", header, 0)
    return code, opaque, flag
