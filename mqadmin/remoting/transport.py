"""Sockets for the remoting client: addresses, plain and TLS transports, socket errors in words.

A transport sends whole frames from any thread and receives bytes on the connection's reader
thread; :mod:`mqadmin.remoting.client` builds connections on top of it.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from mqadmin import errors

__all__ = [
    "ADDRESS_SEPARATOR",
    "PlainTransport",
    "TlsOptions",
    "TlsTransport",
    "Transport",
    "describe_os_error",
    "parse_address",
    "seconds_text",
    "split_addresses",
]

#: separator of a name-server list, as ``-n`` and NAMESRV_ADDR write it
ADDRESS_SEPARATOR: Final = ";"
RECV_CHUNK: Final = 256 * 1024
MAX_PORT: Final = 65535


def seconds_text(value: float) -> str:
    """3 -> "3.0", 0.25 -> "0.25": how long we waited, as people write it."""
    text = f"{value:.1f}"
    return text if float(text) == value else f"{value:g}"


def split_addresses(addresses: str | Iterable[str]) -> list[str]:
    """``"a:9876;b:9876"`` (or a list) into stripped, non-empty entries, order kept."""
    parts = addresses.split(ADDRESS_SEPARATOR) if isinstance(addresses, str) else list(addresses)
    return [p.strip() for p in parts if p and p.strip()]


def parse_address(addr: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` into (host, port); a usage error says what is wrong."""
    scheme, slashes, rest = addr.strip().partition("://")
    if slashes:
        raise errors.UsageError(
            f"bad address {addr!r}: a name server address is host:port without a scheme ({scheme}://), e.g. {rest}"
        )
    host, sep, port_text = addr.strip().rpartition(":")
    host = host.strip("[]")
    bad_host = any(c.isspace() or c in "/?#@" for c in host)
    if not sep or not host or bad_host or not port_text.isdigit() or not 0 < int(port_text) <= MAX_PORT:
        raise errors.UsageError(f"bad address {addr!r}: expected host:port")
    return host, int(port_text)


def describe_os_error(exc: BaseException, timeout: float) -> str:
    """A short, human reason for a socket failure (no stack, no errno soup)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"timed out after {seconds_text(timeout)} s"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failure ({exc.reason or exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


# ---------------------------------------------------------------------------------------------
# TLS


@dataclass(frozen=True)
class TlsOptions:
    """TLS to namesrv and brokers (RocketMQ's ``tls.enable``).

    With ``ca`` the server must present a certificate signed by that CA; host names are not
    checked then, because broker certificates from a private CA seldom list the IPs that the
    name server hands out. Without ``ca`` the system trust store and host-name checks apply.
    ``cert``/``key`` give a client certificate for servers that ask for one (mutual TLS).
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca)
        if self.ca:
            ctx.check_hostname = False
        if self.cert:
            ctx.load_cert_chain(self.cert, self.key)
        return ctx


class Transport(Protocol):
    def send(self, data: bytes) -> None: ...
    def recv(self) -> bytes: ...
    def close(self) -> None: ...


class PlainTransport:
    """A connected TCP socket: blocking sends from callers, blocking receives by the reader."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._send_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self._send_lock:  # frames from concurrent callers must not interleave
            self._sock.sendall(data)

    def recv(self) -> bytes:
        return self._sock.recv(RECV_CHUNK)

    def close(self) -> None:
        close_socket(self._sock)


def close_socket(sock: socket.socket) -> None:
    """shutdown() first: it wakes a reader blocked in recv(), which close() alone may not."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class TlsTransport:
    """TLS over memory BIOs, so one thread can read while others write.

    OpenSSL objects must not be used from two threads at once, which rules out sharing an
    ``SSLSocket`` between the reader and the callers. Here every use of the SSL object happens
    under ``_ssl_lock`` and the socket I/O happens outside it. Encrypted output is drained only
    while ``_send_lock`` is held and sent before it is released, so records leave in order.
    """

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext, server_hostname: str | None) -> None:
        self._sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = ctx.wrap_bio(self._in, self._out, server_side=False, server_hostname=server_hostname)
        self._ssl_lock = threading.Lock()
        self._send_lock = threading.Lock()

    def handshake(self) -> None:
        """Run the handshake on the caller's thread, within the socket's connect timeout."""
        while True:
            try:
                self._obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush_out()
                data = self._sock.recv(RECV_CHUNK)
                if not data:
                    raise ConnectionResetError("connection closed during the TLS handshake") from None
                self._in.write(data)
        self._flush_out()

    def _flush_out(self) -> None:
        pending = self._out.read()
        if pending:
            self._sock.sendall(pending)

    def send(self, data: bytes) -> None:
        with self._send_lock:
            with self._ssl_lock:
                self._obj.write(data)
                pending = self._out.read()
            self._sock.sendall(pending)

    def recv(self) -> bytes:
        while True:
            with self._ssl_lock:
                try:
                    return self._obj.read(RECV_CHUNK)
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLZeroReturnError:
                    return b""  # the peer sent close_notify
                needs_flush = self._out.pending > 0
            if needs_flush:  # e.g. a TLS 1.3 key update answered while reading
                with self._send_lock:
                    with self._ssl_lock:
                        pending = self._out.read()
                    self._sock.sendall(pending)
            data = self._sock.recv(RECV_CHUNK)
            if not data:
                return b""
            with self._ssl_lock:
                self._in.write(data)

    def close(self) -> None:
        close_socket(self._sock)
