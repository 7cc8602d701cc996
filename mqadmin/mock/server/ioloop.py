"""The I/O loop: one thread accepts, reads and writes every socket without blocking.

Decoded requests go to the server's worker pool. A connection silent both ways is closed after
an idle time, and one whose frame does not arrive whole in time (a slowloris peer trickling
bytes) after the frame timeout; running out of file descriptors pauses accepting (doubling
back-off) instead of spinning. Unsent replies are bounded: a connection whose replies pile up
is neither read nor served until they drain, a reply may wait only so long, and when the
server's total passes its limit the peer with the oldest unsent reply is cut; a cut peer hands
its heap back to the system.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import selectors
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any, Final

from mqadmin import errors
from mqadmin.mock.server.connection import Connection, host_port
from mqadmin.mock.server.role import Role

if TYPE_CHECKING:
    from mqadmin.mock.server.core import MockServer

log = logging.getLogger("mqadmin.mock.server")

LISTEN_BACKLOG: Final = 128
#: a connection silent both ways this long is closed: the broker's serverChannelMaxIdleTimeSeconds
DEFAULT_IDLE_TIMEOUT_S: Final = 120.0
#: a frame begun must arrive whole within this (bytes trickling in do not count as progress)
DEFAULT_FRAME_TIMEOUT_S: Final = 30.0
#: a reply left unsent this long (the peer does not read) costs the peer its connection
DEFAULT_REPLY_TIMEOUT_S: Final = 60.0
#: unsent reply bytes of all connections together; past it the oldest offender is cut
DEFAULT_MAX_UNSENT_BYTES: Final = 256 * 1024 * 1024
#: how often the I/O loop looks for idle connections (and, at the latest, notices a stop)
IDLE_CHECK_S: Final = 0.5
#: accepting pauses this long, doubling up to the maximum, while the process is out of descriptors
ACCEPT_BACKOFF_MIN_S: Final = 0.05
ACCEPT_BACKOFF_MAX_S: Final = 1.0
#: at most one "accept failed" line per this many seconds
ACCEPT_LOG_INTERVAL_S: Final = 10.0
#: heap trims after dropping a peer are at most this frequent
TRIM_INTERVAL_S: Final = 1.0
_OUT_OF_FDS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class RateLimitedLog:
    """Counts events; ``hit`` returns how many were suppressed when a line is due, else None."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last = -interval_s
        self._suppressed = 0

    def hit(self) -> int | None:
        now = time.monotonic()
        if now - self._last < self.interval_s:
            self._suppressed += 1
            return None
        self._last = now
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed


def _malloc_trim() -> None:
    """glibc's malloc_trim(0), where there is one: freed arenas go back to the system."""
    global _LIBC
    if _LIBC is None:
        name = ctypes.util.find_library("c")
        try:
            _LIBC = ctypes.CDLL(name) if name else False
        except OSError:
            _LIBC = False
    if _LIBC and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


_LIBC: Any = None


def _listen(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise errors.ConnectError(f"cannot listen on {host_port((bind, port))}: {exc.strerror}") from None
    return sock


class IoLoop:
    """The listeners, every open connection, and the thread that serves their sockets."""

    def __init__(
        self,
        server: MockServer,
        tls: ssl.SSLContext | None,
        idle_timeout: float,
        *,
        frame_timeout: float = DEFAULT_FRAME_TIMEOUT_S,
        reply_timeout: float = DEFAULT_REPLY_TIMEOUT_S,
        max_unsent: int = DEFAULT_MAX_UNSENT_BYTES,
    ) -> None:
        self.server = server
        self.tls = tls
        #: seconds without a byte either way before a connection is closed (0: never)
        self.idle_timeout = idle_timeout
        #: seconds a frame may take from its first byte to its last (0: no limit)
        self.frame_timeout = frame_timeout
        #: seconds a reply may wait unsent (0: no limit)
        self.reply_timeout = reply_timeout
        #: unsent reply bytes of all connections together before the oldest offender is cut
        self.max_unsent = max_unsent
        self._unsent = 0
        self._unsent_lock = threading.Lock()
        self._over_limit = False
        self.listeners: list[tuple[socket.socket, Role]] = []
        self.conns: set[Connection] = set()
        self._conns_lock = threading.Lock()
        #: connections whose selector interest may have changed, for the I/O loop (under _wake_lock)
        self._dirty: set[Connection] = set()
        self._wake_lock = threading.Lock()
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        self._waker_w.setblocking(False)
        self._woken = False
        self._accept_failures = RateLimitedLog(ACCEPT_LOG_INTERVAL_S)
        self._last_trim = 0.0

    def listen(self, bind: str, ports: list[int], roles: list[Role]) -> None:
        """Bind every port, one per role; none stays open if one fails."""
        try:
            for port, role in zip(ports, roles, strict=True):
                self.listeners.append((_listen(bind, port), role))
        except BaseException:
            for sock, _ in self.listeners:
                sock.close()
            self.listeners.clear()
            raise

    def close(self) -> None:
        """After the loop's thread ended: close the listeners and every connection."""
        for sock, _ in self.listeners:
            sock.close()
        with self._conns_lock:
            conns = list(self.conns)
            self.conns.clear()
        for conn in conns:
            conn.close()
            conn.release()
        self._waker_r.close()
        self._waker_w.close()

    def run(self) -> None:
        """Accept, read and write every socket from one thread; requests go to the worker pool."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._waker_r, selectors.EVENT_READ, None)
            self._register_listeners(selector)
            accept_paused_until = 0.0
            backoff = ACCEPT_BACKOFF_MIN_S
            next_idle_check = time.monotonic() + IDLE_CHECK_S
            try:
                while not self.server.stopping:
                    now = time.monotonic()
                    if accept_paused_until and now >= accept_paused_until:
                        accept_paused_until = 0.0
                        self._register_listeners(selector)
                    timeout = IDLE_CHECK_S if not accept_paused_until else min(IDLE_CHECK_S, accept_paused_until - now)
                    for key, events in selector.select(max(timeout, 0.0)):
                        if key.fileobj is self._waker_r:
                            self._drain_waker()
                        elif isinstance(key.data, Role):
                            if not self._accept(selector, key):
                                # Out of descriptors: stop asking until some are free (no spin).
                                for sock, _ in self.listeners:
                                    selector.unregister(sock)
                                accept_paused_until = time.monotonic() + backoff
                                backoff = min(backoff * 2, ACCEPT_BACKOFF_MAX_S)
                                break
                            backoff = ACCEPT_BACKOFF_MIN_S
                        else:
                            self._serve_socket(selector, key.data, events)
                    self._apply_dirty(selector)
                    if self._over_limit:
                        self._shed()
                    if time.monotonic() >= next_idle_check:
                        next_idle_check = time.monotonic() + IDLE_CHECK_S
                        self._close_idle()
                        self._close_late()
            finally:
                with self._conns_lock:
                    conns = list(self.conns)
                for conn in conns:
                    conn.close()

    def _register_listeners(self, selector: selectors.BaseSelector) -> None:
        for sock, role in self.listeners:
            selector.register(sock, selectors.EVENT_READ, role)

    def _serve_socket(self, selector: selectors.BaseSelector, conn: Connection, events: int) -> None:
        if events & selectors.EVENT_READ and not conn.closed.is_set():
            self.server.received(conn, conn.on_readable())
        if events & selectors.EVENT_WRITE and not conn.closed.is_set():
            conn.on_writable()
        self._update_interest(selector, conn)

    def _accept(self, selector: selectors.BaseSelector, key: selectors.SelectorKey) -> bool:
        """Take one pending connection; False when the process is out of file descriptors."""
        listener = key.fileobj
        assert isinstance(listener, socket.socket)
        try:
            sock, addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as exc:
            if exc.errno in _OUT_OF_FDS:
                suppressed = self._accept_failures.hit()
                if suppressed is not None:
                    log.warning(
                        "accept failed: %s (%d more since the last report; backing off, connections already open are served)",
                        exc.strerror,
                        suppressed,
                    )
                return False
            if not self.server.stopping:
                log.warning("accept failed: %s", exc)
            return True
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self, sock, key.data, host_port(addr))
        with self._conns_lock:
            self.conns.add(conn)
        selector.register(sock, selectors.EVENT_READ, conn)
        self.server.count("connections")
        log.debug("%s connected to the %s port", conn.peer, conn.role.name)
        return True

    def _update_interest(self, selector: selectors.BaseSelector, conn: Connection) -> None:
        """Register what ``conn`` waits for now; forget it once closed."""
        if conn.closed.is_set():
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(conn.sock)
            self._forget(conn)
            return
        events = 0 if conn.paused or conn.stalled else selectors.EVENT_READ
        if conn.wants_write:
            events |= selectors.EVENT_WRITE
        try:
            if events:
                selector.modify(conn.sock, events, conn)
            else:
                selector.unregister(conn.sock)
        except KeyError:
            if events:
                selector.register(conn.sock, events, conn)
        except (ValueError, OSError):
            conn.close()

    def _apply_dirty(self, selector: selectors.BaseSelector) -> None:
        with self._wake_lock:
            dirty, self._dirty = self._dirty, set()
        for conn in dirty:
            if not conn.closed.is_set() and conn.wants_write:
                conn.on_writable()  # most replies fit the socket buffer: no extra select round
            self._update_interest(selector, conn)

    def _close_idle(self) -> None:
        """Close connections silent both ways for idle_timeout (serverChannelMaxIdleTimeSeconds)."""
        if self.idle_timeout <= 0:
            return
        cutoff = time.monotonic() - self.idle_timeout
        with self._conns_lock:
            idle = [c for c in self.conns if c.last_active < cutoff and not c.scheduled]
        for conn in idle:
            log.info("closing %s: idle for %.0f s", conn.peer, self.idle_timeout)
            conn.close()

    def _close_late(self) -> None:
        """Close connections whose frame is overdue (slowloris) or whose replies wait too long."""
        now = time.monotonic()
        with self._conns_lock:
            conns = list(self.conns)
        for conn in conns:
            started = conn.frame_started
            if (
                self.frame_timeout > 0
                and started is not None
                and now - started > self.frame_timeout
                and not (conn.paused or conn.stalled)
            ):
                log.info("closing %s: a frame did not arrive whole within %g s", conn.peer, self.frame_timeout)
                conn.close()
                continue
            oldest = conn.oldest_unsent if self.reply_timeout > 0 else None
            if oldest is not None and now - oldest > self.reply_timeout:
                conn.cut_for(f"a reply waited {now - oldest:.0f} s")

    def unsent_changed(self, delta: int) -> None:
        """Any thread: the server-wide count of unsent reply bytes moved by ``delta``."""
        with self._unsent_lock:
            self._unsent += delta
            over = self._unsent > self.max_unsent and not self._over_limit
            if over:
                self._over_limit = True
        if over:
            self.wake()

    @property
    def unsent(self) -> int:
        """Unsent reply bytes of every connection together."""
        return self._unsent

    def _shed(self) -> None:
        """Past the server-wide limit: cut the peers with the oldest unsent replies until what
        they hold brings the total back under it."""
        with self._unsent_lock:
            self._over_limit = False
            excess = self._unsent - self.max_unsent
        with self._conns_lock:
            conns = list(self.conns)
        # peers closed but not yet released give their bytes back in a moment: count them as gone
        excess -= sum(c.unsent for c in conns if c.closed.is_set())
        if excess <= 0:
            return
        live = [c for c in conns if not c.closed.is_set()]
        waiting = sorted((t, id(c), c) for c in live if (t := c.oldest_unsent) is not None)
        for _, _, conn in waiting:
            if excess <= 0:
                break
            excess -= conn.unsent
            conn.cut_for(f"the server holds more than {self.max_unsent} unsent reply bytes")

    def _forget(self, conn: Connection) -> None:
        """The last step of a connection: free its buffers, then let the roles forget its clients."""
        with self._conns_lock:
            if conn not in self.conns:
                return
        conn.release()
        if conn.cut:
            self.release_memory()  # after the release: only now is its outbox freed
        with self._conns_lock:  # last: a connection no longer listed holds no memory
            self.conns.discard(conn)
        if conn.registrations:
            self.server.submit(lambda: self.server.connection_closed(conn))

    def wake(self) -> None:
        with self._wake_lock:
            if self._woken:
                return
            self._woken = True
        with contextlib.suppress(OSError):
            self._waker_w.send(b"\0")

    def _drain_waker(self) -> None:
        # Drain first, then re-arm: a wake between the two is still seen, because the loop
        # applies every dirty connection after draining, in the same round.
        with contextlib.suppress(OSError):
            while self._waker_r.recv(4096):
                pass
        with self._wake_lock:
            self._woken = False

    def want_write(self, conn: Connection) -> None:
        """Called by any thread after queueing a reply (or closing): the I/O loop sends it."""
        with self._wake_lock:
            self._dirty.add(conn)
        self.wake()

    def release_memory(self) -> None:
        """Hand freed heap back to the system after a big drop (glibc keeps it otherwise)."""
        now = time.monotonic()
        if now - self._last_trim < TRIM_INTERVAL_S:
            return
        self._last_trim = now
        _malloc_trim()
