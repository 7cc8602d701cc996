"""One accepted socket: its transport (plaintext, or TLS in memory), outbox and decoded requests.

The I/O loop (``ioloop``) reads and writes it without blocking; workers queue replies on it from
any thread.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from mqadmin.protocol.codec import BadFrame, FrameDecoder, FrameTooLarge, RemotingCommand, encode

if TYPE_CHECKING:
    from mqadmin.mock.server.ioloop import IoLoop
    from mqadmin.mock.server.role import Role

log = logging.getLogger("mqadmin.mock.server")

RECV_SIZE: Final = 64 * 1024
#: a peer that lets this much pile up unread is dropped rather than allowed to eat memory
MAX_OUTBOX_BYTES: Final = 64 * 1024 * 1024
#: a connection with this many reply bytes unsent is neither read nor served until they drain
#: (the peer feels TCP back-pressure); serving resumes below half of it
OUTBOX_STALL_BYTES: Final = 1024 * 1024
#: first byte of a TLS ClientHello record; anything else on a TLS server is plaintext (permissive)
TLS_HANDSHAKE_RECORD: Final = 0x16


def host_port(addr: tuple[Any, ...] | str) -> str:
    if isinstance(addr, str):
        return addr
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


# ---------------------------------------------------------------------------------------------
# Transports: plaintext, or TLS done in memory so reader and writer threads never share an SSL object


class Plain:
    @property
    def partial(self) -> bool:
        """Whether bytes received do not make plaintext yet (a TLS record or handshake cut short)."""
        return False

    def inbound(self, data: bytes) -> tuple[bytes, bytes]:
        """(plaintext for the decoder, raw bytes to send back)."""
        return data, b""

    def outbound(self, data: bytes) -> bytes:
        return data


class Tls(Plain):
    """Server-side TLS over memory BIOs; the caller serialises calls (one lock per connection)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=True)
        self._ready = False

    @property
    def partial(self) -> bool:
        return not self._ready or self._in.pending > 0

    def inbound(self, data: bytes) -> tuple[bytes, bytes]:
        self._in.write(data)
        if not self._ready:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                return b"", self._out.read()
            self._ready = True
        plain = bytearray()
        while True:
            try:
                chunk = self._obj.read(RECV_SIZE)
            except ssl.SSLWantReadError:
                break
            if not chunk:
                break
            plain += chunk
        return bytes(plain), self._out.read()

    def outbound(self, data: bytes) -> bytes:
        self._obj.write(data)
        return self._out.read()


def transport_for(tls: ssl.SSLContext | None, first_byte: int) -> Plain:
    """TLS when the server has a context and the peer opens with a handshake, else plaintext."""
    if tls is not None and first_byte == TLS_HANDSHAKE_RECORD:
        return Tls(tls)
    return Plain()


# ---------------------------------------------------------------------------------------------
# Connections


class Connection:
    """One accepted socket. The server's I/O loop reads and writes it (never blocking); its
    requests queue in ``pending`` and are handled in order by one pool worker at a time."""

    def __init__(self, loop: IoLoop, sock: socket.socket, role: Role, peer: str) -> None:
        self.loop = loop
        self.sock = sock
        self.role = role
        self.peer = peer
        self.closed = threading.Event()
        #: (broker name, group, client id) registered through heartbeats on this connection
        self.registrations: set[tuple[str, str, str]] = set()
        self.last_active = time.monotonic()
        #: requests decoded but not yet handled, and whether a worker owns them (both under lock)
        self.pending: deque[RemotingCommand] = deque()
        self.scheduled = False
        #: reading stops while too many requests wait (the peer then feels TCP back-pressure)
        self.paused = False
        #: neither read nor served while its unsent replies exceed OUTBOX_STALL_BYTES (under lock)
        self.stalled = False
        #: dropped for leaving its replies unread: its memory goes back to the system once released
        self.cut = False
        #: when the frame now arriving began (None between frames): a frame must arrive whole in time
        self.frame_started: float | None = None
        self._transport: Plain | None = None
        self.lock = threading.Lock()
        #: unsent reply bytes, each chunk with the monotonic time it was queued
        self._outbox: deque[tuple[bytes, float]] = deque()
        self._out_pos = 0
        self._queued = 0
        self._decoder: FrameDecoder | None = FrameDecoder()

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one frame (always a JSON header, type byte 0: C++ and ali-ons read nothing else)."""
        if self.closed.is_set():
            return
        frame = encode(cmd)
        failed = False
        with self.lock:
            transport = self._transport or Plain()
            raw = transport.outbound(frame)
            if raw and not self._outbox:
                # Nothing queued before it: send from this thread, sparing a hand-over to the I/O loop.
                try:
                    sent = self.sock.send(raw)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    sent, failed = len(raw), True
                if sent:
                    self.last_active = time.monotonic()
                raw = raw[sent:]
            cut = self._enqueue(raw)
        if failed:
            self.close()
        elif cut:
            self._cut()
        elif raw:
            self.loop.want_write(self)

    def _enqueue(self, raw: bytes) -> bool:
        """Add to the outbox (caller holds lock); True when the peer must be cut for not reading."""
        if not raw:
            return False
        if self._queued + len(raw) > MAX_OUTBOX_BYTES:
            return True
        self._queued += len(raw)
        self._outbox.append((raw, time.monotonic()))
        if self._queued > OUTBOX_STALL_BYTES:
            self.stalled = True
        self.loop.unsent_changed(len(raw))
        return False

    def _cut(self, why: str = "") -> None:
        log.warning("dropping %s: %d bytes of replies left unread%s", self.peer, self.unsent, why)
        self.cut = True
        self.close()

    def cut_for(self, why: str) -> None:
        """Drop a peer that leaves its replies unread (the I/O loop's server-wide bounds)."""
        self._cut(f" ({why})")

    @property
    def wants_write(self) -> bool:
        return bool(self._outbox)

    @property
    def unsent(self) -> int:
        """Reply bytes queued and not yet taken by the socket."""
        return self._queued

    @property
    def oldest_unsent(self) -> float | None:
        """When the oldest reply still (partly) unsent was queued; None when all are sent."""
        with self.lock:
            return self._outbox[0][1] if self._outbox else None

    # -- called on the I/O loop's thread only ------------------------------------------------

    def on_readable(self) -> list[RemotingCommand]:
        """Read what the socket has; the decoded requests (empty at EOF, which closes us)."""
        try:
            data = self.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError as exc:
            log.debug("connection %s ended: %s", self.peer, exc)
            self.close()
            return []
        if not data:
            self.close()
            return []
        self.last_active = time.monotonic()
        if self.frame_started is None:
            self.frame_started = self.last_active
        try:
            with self.lock:
                if self._transport is None:
                    self._transport = transport_for(self.loop.tls, data[0])
                plain, raw = self._transport.inbound(data)
                cut = self._enqueue(raw)
            if cut:
                self._cut()
                return []
            assert self._decoder is not None
            cmds = self._decoder.feed(plain)
            if not (self._decoder.buffered or self._transport.partial):
                self.frame_started = None  # between frames: the next byte starts the clock
            elif cmds:
                self.frame_started = self.last_active  # frames completed: the clock is the next one's
            return cmds
        except FrameTooLarge as exc:
            log.warning("dropping %s: %s", self.peer, exc)
        except BadFrame as exc:
            log.warning("dropping %s: not a RocketMQ frame (%s)", self.peer, exc)
        except ssl.SSLZeroReturnError:
            log.debug("%s closed its TLS session", self.peer)
        except ssl.SSLError as exc:
            log.info("dropping %s: TLS failed (%s)", self.peer, exc)
        except Exception as exc:  # a bug must cost this connection only, never the loop
            log.warning("dropping %s: cannot read its frames (%s: %s)", self.peer, type(exc).__name__, exc)
        self.close()
        return []

    def on_writable(self) -> None:
        """Send as much of the outbox as the socket takes."""
        while True:
            with self.lock:  # held across the send: a worker sending directly must not overtake us
                if not self._outbox:
                    return
                chunk = self._outbox[0][0]
                pos = self._out_pos
                try:
                    sent = self.sock.send(memoryview(chunk)[pos:])
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    sent = -1
                if sent < 0:
                    self._drop_outbox()
            if sent < 0:
                self.close()
                return
            self.last_active = time.monotonic()
            with self.lock:
                self._queued -= sent
                self.loop.unsent_changed(-sent)
                resume = self.stalled and self._queued <= OUTBOX_STALL_BYTES // 2
                if resume:
                    self.stalled = False
                whole = pos + sent >= len(chunk)
                if whole:
                    self._outbox.popleft()
                    self._out_pos = 0
                else:
                    self._out_pos = pos + sent
            if resume:
                if self.frame_started is not None:
                    self.frame_started = time.monotonic()  # not its fault: we stopped reading
                self.loop.server.resume(self)
            if not whole:
                return

    def _drop_outbox(self) -> None:
        """Forget every unsent byte (caller holds lock)."""
        self.loop.unsent_changed(-self._queued)
        self._outbox.clear()
        self._out_pos = 0
        self._queued = 0

    def release(self) -> None:
        """Forget buffered bytes and requests once closed, so a cut peer's memory goes at once."""
        with self.lock:
            self._drop_outbox()
            self.pending.clear()
            self._decoder = None
        with contextlib.suppress(OSError):
            self.sock.close()

    def close(self) -> None:
        """Idempotent, lock-free and callable from any thread; the I/O loop does the rest."""
        if self.closed.is_set():
            return
        self.closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.loop.want_write(self)
