"""The remoting transport: one TCP (or TLS) connection per address, many requests in flight.

RocketMQ servers hand each request to the thread pool registered for its code, so replies on
one connection come back in any order: a reader thread per connection matches them to waiting
callers by ``opaque`` through a dict of futures, never a FIFO. Frames are
built and parsed by :mod:`mqadmin.protocol.codec` and sockets are :mod:`.transport`'s; this
module owns connections, threads, time limits, retries of idempotent reads, ACL signing and
name-server failover.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Final

from mqadmin import errors
from mqadmin.protocol import acl
from mqadmin.protocol.codec import (
    DEFAULT_LANGUAGE,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FRAME_MAX_LENGTH,
    BadFrame,
    FrameDecoder,
    RemotingCommand,
    encode,
)
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.remoting.transport import (
    ADDRESS_SEPARATOR,
    PlainTransport,
    TlsOptions,
    TlsTransport,
    Transport,
    describe_os_error,
    parse_address,
    seconds_text,
    split_addresses,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ConnectFailed",
    "ConnectionLost",
    "PendingReply",
    "RemotingClient",
    "RemotingConnectError",
    "RequestHandler",
    "RequestTimeout",
    "code_name",
]

log = logging.getLogger("mqadmin.remoting")

#: seconds to connect and to wait for each reply (the Java admin tool's default too)
DEFAULT_TIMEOUT: Final = 3.0
#: extra attempts for an idempotent read whose connection broke before the reply came
DEFAULT_READ_RETRIES: Final = 1
#: Java masks nothing, the C++ client keeps opaques non-negative; we do the latter
OPAQUE_MASK: Final = 0x7FFFFFFF
#: threads that run registered handlers for server-to-client requests
HANDLER_WORKERS: Final = 4


class RemotingConnectError(errors.ConnectError):
    """Could not talk to ``addr``: the message names the address and what went wrong."""

    def __init__(self, message: str, addr: str) -> None:
        super().__init__(message)
        self.addr = addr


class ConnectFailed(RemotingConnectError):
    """The TCP (or TLS) connection could not be opened: nothing was sent."""


class RequestTimeout(RemotingConnectError):
    """No reply in time. The request may still have been executed by the server."""


class ConnectionLost(RemotingConnectError):
    """The connection closed (reset, EOF, bad frame) before the reply arrived."""


#: a handler for a server-to-client request; its return value is sent back unless the request is oneway
RequestHandler = Callable[[RemotingCommand], "RemotingCommand | None"]


def code_name(code: int) -> str:
    """A request code's Java name for messages and logs (the number when we have no name)."""
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


# ---------------------------------------------------------------------------------------------
# One connection


#: how a server that requires TLS (``tls.server.mode=enforcing``) treats a plaintext request
_SILENT_CLOSE = ("closed by peer", "connection reset by peer")


class _Connection:
    """A connection to one address, with the futures of its requests in flight by opaque."""

    def __init__(self, client: RemotingClient, addr: str, transport: Transport, max_frame_length: int) -> None:
        self.addr = addr
        self._client = client
        self._transport = transport
        self._decoder = FrameDecoder(max_frame_length)
        self._lock = threading.Lock()
        self._pending: dict[int, Future[RemotingCommand]] = {}
        self._closed_reason: str | None = None
        self._reader = threading.Thread(target=self._read_loop, name=f"mqadmin-remoting-{addr}", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._closed_reason is None

    def request(self, cmd: RemotingCommand) -> Future[RemotingCommand]:
        """Send ``cmd`` and return the future its reply will complete."""
        fut: Future[RemotingCommand] = Future()
        with self._lock:
            if self._closed_reason is not None:
                raise self._lost(self._closed_reason)
            self._pending[cmd.opaque] = fut
        self._send(cmd)
        return fut

    def request_many(self, cmds: Sequence[RemotingCommand]) -> list[Future[RemotingCommand]]:
        """``request`` of several commands in one write: one system call, not one each."""
        futures: list[Future[RemotingCommand]] = [Future() for _ in cmds]
        with self._lock:
            if self._closed_reason is not None:
                raise self._lost(self._closed_reason)
            for cmd, fut in zip(cmds, futures, strict=True):
                self._pending[cmd.opaque] = fut
        self._send_bytes(b"".join(encode(cmd) for cmd in cmds))
        return futures

    def send_oneway(self, cmd: RemotingCommand) -> None:
        if self._closed_reason is not None:
            raise self._lost(self._closed_reason)
        self._send(cmd)

    def forget(self, opaque: int) -> None:
        """Stop waiting for a reply (after a timeout); a late reply is then dropped."""
        with self._lock:
            self._pending.pop(opaque, None)

    def _send(self, cmd: RemotingCommand) -> None:
        self._send_bytes(encode(cmd))

    def _send_bytes(self, data: bytes) -> None:
        try:
            self._transport.send(data)
        except OSError as exc:
            reason = describe_os_error(exc, 0)
            self.close(reason)
            raise self._lost(reason) from None

    def _lost(self, reason: str) -> ConnectionLost:
        return ConnectionLost(f"connection to {self.addr} lost: {reason}", self.addr)

    def _read_loop(self) -> None:
        reason = "closed by peer"
        answered = False
        try:
            while True:
                data = self._transport.recv()
                if not data:
                    break
                for cmd in self._decoder.feed(data):
                    answered = True
                    self._dispatch(cmd)
        except BadFrame as exc:
            reason = f"bad frame from peer ({exc})"
            log.warning("closing connection to %s: %s", self.addr, reason)
        except OSError as exc:
            reason = describe_os_error(exc, 0)
        except Exception as exc:  # the reader must end cleanly whatever happens
            reason = f"internal error ({type(exc).__name__}: {exc})"
            log.exception("reader of %s failed", self.addr)
        finally:
            if not answered and isinstance(self._transport, PlainTransport) and reason in _SILENT_CLOSE:
                # what a server with tls.server.mode=enforcing does to plaintext: drop it unanswered
                reason += " before any reply (does the server require TLS? try --tls)"
            self.close(reason)

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if not cmd.is_response:
            self._client._incoming(self, cmd)
            return
        with self._lock:
            fut = self._pending.pop(cmd.opaque, None)
        if fut is None:
            log.debug("dropping reply with unknown opaque %d from %s", cmd.opaque, self.addr)
            return
        fut.set_result(cmd)

    def reply(self, cmd: RemotingCommand) -> None:
        """Answer a server-to-client request; a dead connection just drops the answer."""
        try:
            self.send_oneway(cmd)
        except errors.ConnectError as exc:
            log.debug("could not answer %s: %s", self.addr, exc)

    def close(self, reason: str = "closed by client") -> None:
        """Close once; every waiting caller gets ConnectionLost with the reason."""
        with self._lock:
            if self._closed_reason is not None:
                return
            self._closed_reason = reason
            pending, self._pending = self._pending, {}
        self._transport.close()
        for fut in pending.values():
            fut.set_exception(self._lost(reason))
        self._client._forget_connection(self)


# ---------------------------------------------------------------------------------------------
# Pending replies


class PendingReply:
    """A request that was sent (or failed to be): ``result()`` waits for the reply until the deadline."""

    def __init__(
        self,
        addr: str,
        request: RemotingCommand,
        timeout: float,
        conn: _Connection | None = None,
        future: Future[RemotingCommand] | None = None,
        error: errors.ConnectError | None = None,
        *,
        source: RemotingCommand | None = None,
    ) -> None:
        self.addr = addr
        self.request = request
        # what the caller passed (unsigned, no opaque): a retry prepares it afresh
        self.source = source or request
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._conn = conn
        self._future = future
        self._error = error

    def result(self) -> RemotingCommand:
        """The reply, or ConnectFailed / ConnectionLost / RequestTimeout naming the address."""
        if self._error is not None:
            raise self._error
        assert self._future is not None and self._conn is not None
        try:
            return self._future.result(max(self._deadline - time.monotonic(), 0))
        except FutureTimeout:
            self._conn.forget(self.request.opaque)
            raise RequestTimeout(
                f"timed out after {seconds_text(self.timeout)} s waiting for {self.addr} ({code_name(self.request.code)})",
                self.addr,
            ) from None


# ---------------------------------------------------------------------------------------------
# The client


class RemotingClient:
    """Connections to a name-server list and to any broker address, shared by many threads.

    * Requests are signed (:mod:`mqadmin.protocol.acl`) when both ``access_key`` and ``secret_key`` are
      given; the secret is kept private and never logged.
    * ``invoke(..., idempotent=True)`` retries a read once on a fresh connection when the old
      one broke before the reply (a broker restart leaves stale pooled connections); writes
      and timeouts are never retried, since the server may already have acted.
    * Name-server requests go to the last address that answered and fail over along the list.
    * Server-to-client requests are answered REQUEST_CODE_NOT_SUPPORTED unless a handler for
      their code is registered.
    """

    def __init__(
        self,
        namesrv_addrs: str | Sequence[str] = (),
        *,
        timeout: float = DEFAULT_TIMEOUT,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        tls: TlsOptions | None = None,
        read_retries: int = DEFAULT_READ_RETRIES,
        max_frame_length: int = FRAME_MAX_LENGTH,
        language: str = DEFAULT_LANGUAGE,
    ) -> None:
        self.namesrv_addrs = split_addresses(namesrv_addrs)
        for addr in self.namesrv_addrs:
            parse_address(addr)
        self.timeout = timeout
        self.read_retries = read_retries
        self.max_frame_length = max_frame_length
        self.language = language
        self._access_key = access_key
        self._secret_key = secret_key
        self._security_token = security_token
        self._tls_context = tls.context() if tls is not None else None
        self._lock = threading.Lock()
        self._connections: dict[str, _Connection] = {}
        self._connect_locks: dict[str, threading.Lock] = {}
        self._handlers: dict[int, RequestHandler] = {}
        self._handler_pool: ThreadPoolExecutor | None = None
        self._namesrv_index = 0
        self._opaques = itertools.count()
        self._closed = False

    def __repr__(self) -> str:
        signed = " signed" if self.signs_requests else ""
        return f"<RemotingClient namesrv={ADDRESS_SEPARATOR.join(self.namesrv_addrs)!r}{signed}>"

    @property
    def signs_requests(self) -> bool:
        return bool(self._access_key and self._secret_key)

    # -- requests ---------------------------------------------------------------------------

    def submit(self, addr: str, request: RemotingCommand, *, timeout: float | None = None) -> PendingReply:
        """Send without waiting; errors surface from ``result()``. Lets one caller fan out."""
        limit = self.timeout if timeout is None else timeout
        cmd = self._prepare(request)
        try:
            conn = self._connection(addr, limit)
            future = conn.request(cmd)
        except errors.ConnectError as exc:
            return PendingReply(addr, cmd, limit, error=exc, source=request)
        log.debug("-> %s %s opaque=%d", addr, code_name(cmd.code), cmd.opaque)
        return PendingReply(addr, cmd, limit, conn, future, source=request)

    def submit_many(
        self, addr: str, requests: Sequence[RemotingCommand], *, timeout: float | None = None
    ) -> list[PendingReply]:
        """``submit`` of several requests to one address in one write: a replay keeps many pulls
        in flight, and a system call (and thread switch) per request was most of their cost."""
        limit = self.timeout if timeout is None else timeout
        cmds = [self._prepare(r) for r in requests]
        try:
            conn = self._connection(addr, limit)
            futures = conn.request_many(cmds)
        except errors.ConnectError as exc:
            return [PendingReply(addr, c, limit, error=exc, source=r) for c, r in zip(cmds, requests, strict=True)]
        return [
            PendingReply(addr, c, limit, conn, f, source=r) for c, f, r in zip(cmds, futures, requests, strict=True)
        ]

    def invoke(
        self, addr: str, request: RemotingCommand, *, timeout: float | None = None, idempotent: bool = False
    ) -> RemotingCommand:
        """Send and wait for the reply (any response code: interpreting it is the caller's job)."""
        return self.wait(self.submit(addr, request, timeout=timeout), idempotent=idempotent)

    def wait(self, pending: PendingReply, *, idempotent: bool = False) -> RemotingCommand:
        """``pending.result()``, retrying an idempotent read whose connection broke."""
        attempts = self.read_retries if idempotent else 0
        while True:
            try:
                return pending.result()
            except ConnectionLost as exc:
                if attempts <= 0:
                    raise
                attempts -= 1
                log.info("retrying %s on a new connection: %s", code_name(pending.request.code), exc)
                pending = self.submit(pending.addr, pending.source, timeout=pending.timeout)

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Fire and forget (flag RPC_ONEWAY): the server sends no reply."""
        cmd = self._prepare(request)
        cmd.flag |= FLAG_ONEWAY
        self._connection(addr, self.timeout).send_oneway(cmd)

    def invoke_namesrv(self, request: RemotingCommand, *, timeout: float | None = None) -> tuple[str, RemotingCommand]:
        """Ask the name servers, starting with the last one that answered; (address, reply).

        Every name-server request is a read, so failing over to the next address is safe.
        """
        if not self.namesrv_addrs:
            raise errors.UsageError("no name server address given")
        failures: list[errors.ConnectError] = []
        count = len(self.namesrv_addrs)
        start = self._namesrv_index
        for step in range(count):
            index = (start + step) % count
            addr = self.namesrv_addrs[index]
            try:
                reply = self.invoke(addr, request, timeout=timeout, idempotent=True)
            except errors.ConnectError as exc:
                log.info("name server %s failed, trying the next: %s", addr, exc)
                failures.append(exc)
                continue
            self._namesrv_index = index
            return addr, reply
        if count == 1:
            raise failures[0]
        raise errors.ConnectError("no name server answered: " + "; ".join(map(str, failures))) from failures[-1]

    def _prepare(self, request: RemotingCommand) -> RemotingCommand:
        """A copy with a fresh opaque, signed when credentials are set."""
        fields = request.ext_fields
        if self._access_key and self._secret_key:
            fields = acl.sign(fields, request.body, self._access_key, self._secret_key, self._security_token)
        return dataclasses.replace(request, opaque=next(self._opaques) & OPAQUE_MASK, ext_fields=dict(fields))

    # -- server-to-client requests ----------------------------------------------------------

    def register_handler(self, code: int, handler: RequestHandler) -> None:
        """Answer requests the server sends us with ``code`` (run on a small worker pool)."""
        with self._lock:
            self._handlers[int(code)] = handler

    def _incoming(self, conn: _Connection, cmd: RemotingCommand) -> None:
        """Called on the reader thread: never block it, never let a handler kill it."""
        handler = self._handlers.get(cmd.code)
        if handler is None:
            log.debug("%s sent unsupported request %s", conn.addr, code_name(cmd.code))
            if not cmd.is_oneway:
                conn.reply(
                    cmd.reply(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        f" request type {cmd.code} not supported",
                        language=self.language,
                    )
                )
            return
        with self._lock:
            if self._closed:
                return
            if self._handler_pool is None:
                self._handler_pool = ThreadPoolExecutor(HANDLER_WORKERS, thread_name_prefix="mqadmin-remoting-handler")
            pool = self._handler_pool
        pool.submit(self._run_handler, conn, cmd, handler)

    def _run_handler(self, conn: _Connection, cmd: RemotingCommand, handler: RequestHandler) -> None:
        try:
            response = handler(cmd)
        except Exception as exc:
            log.exception("handler for %s failed", code_name(cmd.code))
            response = cmd.reply(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}", language=self.language)
        if response is None or cmd.is_oneway:
            return
        response.opaque = cmd.opaque
        response.flag |= FLAG_RESPONSE
        conn.reply(response)

    # -- connections ------------------------------------------------------------------------

    def _connection(self, addr: str, timeout: float) -> _Connection:
        """The live connection to ``addr``, opening one (once, even under concurrent callers)."""
        with self._lock:
            if self._closed:
                raise errors.ConnectError("the remoting client is closed")
            conn = self._connections.get(addr)
            if conn is not None and conn.alive:
                return conn
            connect_lock = self._connect_locks.setdefault(addr, threading.Lock())
        with connect_lock:
            with self._lock:
                conn = self._connections.get(addr)
                if conn is not None and conn.alive:
                    return conn
            conn = self._open(addr, timeout)
            with self._lock:
                closed = self._closed
                if not closed:
                    self._connections[addr] = conn
            if closed:
                conn.close()
                raise errors.ConnectError("the remoting client is closed")
            return conn

    def _open(self, addr: str, timeout: float) -> _Connection:
        host, port = parse_address(addr)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {addr}: {describe_os_error(exc, timeout)}", addr) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            transport: Transport
            if self._tls_context is not None:
                hostname = host if self._tls_context.check_hostname else None
                tls = TlsTransport(sock, self._tls_context, hostname)
                tls.handshake()
                transport = tls
            else:
                transport = PlainTransport(sock)
            sock.settimeout(None)  # the reader blocks; callers time out on their futures
        except OSError as exc:
            sock.close()
            raise ConnectFailed(f"cannot connect to {addr}: {describe_os_error(exc, timeout)}", addr) from None
        log.debug("connected to %s%s", addr, " (TLS)" if self._tls_context is not None else "")
        return _Connection(self, addr, transport, self.max_frame_length)

    def _forget_connection(self, conn: _Connection) -> None:
        """A closed connection leaves the table, so the next use reconnects."""
        with self._lock:
            if self._connections.get(conn.addr) is conn:
                del self._connections[conn.addr]

    def close(self) -> None:
        """Close every connection; waiting callers get ConnectionLost. Idempotent."""
        with self._lock:
            self._closed = True
            conns = list(self._connections.values())
            pool, self._handler_pool = self._handler_pool, None
        for conn in conns:
            conn.close()
        if pool is not None:
            pool.shutdown(wait=False)

    def __enter__(self) -> RemotingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
