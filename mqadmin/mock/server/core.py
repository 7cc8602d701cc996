"""The server: its life cycle, the worker pool, dispatch of a request to its role's handler,
the periodic flush, and which connection each registered client is on.

Threads, a fixed number whatever the connection count: one I/O loop (``ioloop``), a pool of
workers handling requests (each connection's in order), one long-polling thread
(``longpoll``), one flusher. Model access is serialised by one lock, taken per step rather
than across a whole expensive request.
"""

from __future__ import annotations

import itertools
import logging
import queue
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Final

from mqadmin import errors
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server.broker import BrokerRole
from mqadmin.mock.server.clients import forget_client
from mqadmin.mock.server.connection import Connection
from mqadmin.mock.server.handlers import BROKER_HANDLERS, NAMESRV_HANDLERS
from mqadmin.mock.server.ioloop import (
    ACCEPT_LOG_INTERVAL_S,
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_UNSENT_BYTES,
    DEFAULT_REPLY_TIMEOUT_S,
    IoLoop,
    RateLimitedLog,
)
from mqadmin.mock.server.longpoll import LongPolling
from mqadmin.mock.server.namesrv import NamesrvRole
from mqadmin.mock.server.role import Role, oversized_number
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import CURRENT_VERSION, LanguageCode, ResponseCode, version_ordinal
from mqadmin.protocol.versions import is_v5, version_tuple
from mqadmin.timeparse import now_ms

log = logging.getLogger("mqadmin.mock.server")

DEFAULT_NAMESRV_PORT: Final = 9876
DEFAULT_BIND: Final = "127.0.0.1"
WILDCARD_BINDS: Final = frozenset({"", "0.0.0.0", "::"})
#: the broker persists consumer offsets every 5 s (flushConsumerOffsetInterval); so do we
FLUSH_INTERVAL_S: Final = 5.0
JOIN_TIMEOUT_S: Final = 5.0
#: how long the broker waits for a client's answer to a request it forwards (broker: Broker2Client.java)
CALL_CLIENT_TIMEOUT_S: Final = 10.0
#: how often a forwarded call checks whether the client's connection closed meanwhile
CALL_CLIENT_POLL_S: Final = 0.05
#: threads handling requests; a connection's requests stay in order (one worker at a time)
DEFAULT_WORKERS: Final = 8
#: requests a worker handles for one connection before letting others have a turn
WORKER_BATCH: Final = 32
#: decoded requests a connection may have waiting before the server stops reading from it
MAX_PENDING_REQUESTS: Final = 256
#: what Java appends to some remarks (FAQUrl.suggestTodo): one address per major version
FAQ_SUFFIX_V4: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
FAQ_SUFFIX_V5: Final = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def _advertised_host(bind: str) -> str:
    """The host routes name: the bind address, or this machine's address for a wildcard bind."""
    if bind not in WILDCARD_BINDS:
        return bind
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET: no packet is sent for a UDP connect
            host: str = probe.getsockname()[0]
            return host
    except OSError:
        return DEFAULT_BIND


def _server_ordinal(version: str) -> int:
    try:
        return version_ordinal(version)
    except ValueError:
        return int(CURRENT_VERSION)


class _Awaited:
    """One ``call_client`` waiting: set once the client's response arrives."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.done = threading.Event()
        self.reply: RemotingCommand | None = None


class MockServer:
    """Serve a MockCluster: a name server on ``namesrv_port`` and one port per broker.

    ``acl=(access_key, secret_key)`` makes the brokers verify request signatures (the ACL
    signature over the sorted header values and the body; broker: PlainAccessValidator.java in
    4.x) and answer NO_PERMISSION otherwise; the name server stays open, as a 4.x one is. With
    ``tls`` every listener also speaks TLS, and still takes plaintext (Java's default
    "permissive" mode). The cluster must be open for writing; the caller keeps owning it.
    """

    def __init__(
        self,
        cluster: MockCluster,
        bind: str = DEFAULT_BIND,
        namesrv_port: int = DEFAULT_NAMESRV_PORT,
        broker_ports: list[int] | tuple[int, ...] | None = None,
        acl: tuple[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        *,
        advertise_host: str | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        frame_timeout: float = DEFAULT_FRAME_TIMEOUT_S,
        reply_timeout: float = DEFAULT_REPLY_TIMEOUT_S,
        max_unsent: int = DEFAULT_MAX_UNSENT_BYTES,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        if not cluster.writable:
            raise errors.UsageError(f"the mock store {cluster.root} must be opened for writing to be served")
        ports = list(broker_ports) if broker_ports is not None else [0] * len(cluster.brokers)
        if len(ports) != len(cluster.brokers):
            raise errors.UsageError(f"{len(ports)} broker ports given for {len(cluster.brokers)} brokers")
        self.cluster = cluster
        self.bind = bind
        self.acl = acl
        self.tls = tls
        self.advertise_host = advertise_host or _advertised_host(bind)
        self.v = version_tuple(cluster.version)
        self.v5 = is_v5(self.v)
        self.version_ordinal = _server_ordinal(cluster.version)
        #: serialises every model call (the model's own lock does not cover pulls)
        self.lock = threading.RLock()
        self.started_ms = 0
        self.started_monotonic = time.monotonic()
        self._ports = [namesrv_port, *ports]
        self._roles: list[Role] = [NamesrvRole(self, NAMESRV_HANDLERS)]
        self._roles += [BrokerRole(self, b, BROKER_HANDLERS) for b in cluster.brokers.values()]
        self._old_addrs: dict[str, str] = {}
        self.io = IoLoop(
            self, tls, idle_timeout, frame_timeout=frame_timeout, reply_timeout=reply_timeout, max_unsent=max_unsent
        )
        self.long_polling = LongPolling(self)
        #: (broker, group, client id) -> the connection its heartbeats came on (under _registry_lock)
        self._clients: dict[tuple[str, str, str], Connection] = {}
        self._registry_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._worker_count = max(1, workers)
        self._work: queue.SimpleQueue[Connection | Callable[[], None] | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._started = False
        self._stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        self._opaque = itertools.count(1)
        #: broker-to-client calls awaiting their answer, by opaque (under _registry_lock)
        self._awaited: dict[int, _Awaited] = {}
        self.call_client_timeout = CALL_CLIENT_TIMEOUT_S

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> MockServer:
        """Bind every port (brokers first learn their address), then serve in background threads."""
        if self._started:
            return self
        self.io.listen(self.bind, self._ports, self._roles)
        for sock, role in self.io.listeners:
            if isinstance(role, BrokerRole):
                self._old_addrs[role.name] = role.broker.addr
                role.broker.addr = f"{self.advertise_host}:{sock.getsockname()[1]}"
        self.started_ms = now_ms()
        self.started_monotonic = time.monotonic()
        self._started = True
        targets = [(self.io.run, "mock-io"), (self._flush_loop, "mock-flush"), (self.long_polling.run, "mock-hold")]
        targets += [(self._work_loop, f"mock-worker-{i}") for i in range(self._worker_count)]
        for target, name in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("mock name server on %s, brokers %s", self.namesrv_addr, self.broker_addrs)
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection, wait for the threads, flush the store."""
        if not self._started or self._stop.is_set():
            return
        self._stop.set()
        self.io.wake()
        self.long_polling.wake()
        for _ in range(self._worker_count):
            self._work.put(None)
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT_S)
        self.io.close()
        with self.lock:
            self.cluster.flush()
            for role in self._roles:
                if isinstance(role, BrokerRole) and role.name in self._old_addrs:
                    role.broker.addr = self._old_addrs[role.name]
        log.info("mock server stopped after %s", dict(self.stats()))

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def faq(self, remark: str) -> str:
        """A remark with the FAQ pointer Java adds to it."""
        return remark + (FAQ_SUFFIX_V5 if self.v5 else FAQ_SUFFIX_V4)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def namesrv_addr(self) -> str:
        """``host:port`` of the name server, for ``-n`` / NAMESRV_ADDR."""
        if not self.io.listeners:
            raise RuntimeError("the mock server is not started")
        return f"{self.advertise_host}:{self.io.listeners[0][0].getsockname()[1]}"

    @property
    def broker_addrs(self) -> dict[str, str]:
        return {b.name: b.addr for b in self.cluster.brokers.values()}

    def stats(self) -> dict[str, int]:
        """Counters: connections, requests, messages_stored, pulls, resets_pushed."""
        with self._stats_lock:
            return dict(self._stats)

    def count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[name] += n

    def request(
        self, code: int, ext: Mapping[str, object], body: bytes = b"", *, oneway: bool = True
    ) -> RemotingCommand:
        """A broker-to-client request, sent oneway as the broker does (broker: Broker2Client.java)
        unless it is a ``call_client``."""
        return RemotingCommand.request(
            code,
            ext,
            body,
            opaque=next(self._opaque) & 0x7FFFFFFF,
            version=self.version_ordinal,
            language=LanguageCode.JAVA.name,
            oneway=oneway,
        )

    def call_client(self, conn: Connection, code: int, ext: Mapping[str, object], body: bytes) -> RemotingCommand:
        """Send a request to a client over its own connection and wait for its answer, as the
        broker forwards admin requests (broker: Broker2Client.java, callClient). Raises
        TimeoutError after ``call_client_timeout``, ConnectionError when the connection closes."""
        cmd = self.request(code, ext, body, oneway=False)
        slot = _Awaited(conn)
        with self._registry_lock:
            self._awaited[cmd.opaque] = slot
        try:
            conn.send(cmd)
            deadline = time.monotonic() + self.call_client_timeout
            while not slot.done.wait(CALL_CLIENT_POLL_S):
                if conn.closed.is_set():
                    raise ConnectionError(f"the connection to {conn.peer} closed")
                if time.monotonic() >= deadline:
                    ms = int(self.call_client_timeout * 1000)
                    raise TimeoutError(f"wait response on the channel <{conn.peer}> timeout, {ms}(ms)")
        finally:
            with self._registry_lock:
                self._awaited.pop(cmd.opaque, None)
        assert slot.reply is not None
        return slot.reply

    def _answered(self, conn: Connection, cmd: RemotingCommand) -> bool:
        """Hand a client's response to the ``call_client`` awaiting it from that connection;
        False when none is."""
        with self._registry_lock:
            slot = self._awaited.get(cmd.opaque)
            if slot is None or slot.conn is not conn:
                return False
            del self._awaited[cmd.opaque]
        slot.reply = cmd
        slot.done.set()
        return True

    # -- the worker pool ---------------------------------------------------------------------

    def received(self, conn: Connection, cmds: list[RemotingCommand]) -> None:
        """Queue decoded requests; the connection goes to a worker unless one has it already.
        A client's answer to a ``call_client`` is handed over here: a worker is waiting for it."""
        cmds = [c for c in cmds if not (c.is_response and self._answered(conn, c))]
        if not cmds:
            return
        with conn.lock:
            if conn.closed.is_set():
                return
            conn.pending.extend(cmds)
            if len(conn.pending) >= MAX_PENDING_REQUESTS:
                conn.paused = True
            if conn.scheduled or conn.stalled:  # a stalled one is resumed once its replies drain
                return
            conn.scheduled = True
        self._work.put(conn)

    def resume(self, conn: Connection) -> None:
        """Serve a connection again whose unsent replies have drained (the I/O loop calls this)."""
        with conn.lock:
            if conn.closed.is_set() or conn.scheduled or not conn.pending:
                return
            conn.scheduled = True
        self._work.put(conn)

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` on a worker."""
        self._work.put(task)

    def _work_loop(self) -> None:
        """A pool worker: handles one connection's queued requests in order, or runs a task."""
        while True:
            item = self._work.get()
            if item is None:
                return
            if isinstance(item, Connection):
                self._serve(item)
                continue
            try:
                item()
            except Exception:
                log.exception("mock server task failed")

    def _serve(self, conn: Connection) -> None:
        for _ in range(WORKER_BATCH):
            with conn.lock:
                if conn.closed.is_set():
                    conn.pending.clear()
                if conn.stalled and conn.pending:
                    # its replies pile up unread: no more until they drain (resume() schedules it)
                    conn.scheduled = False
                    return
                if not conn.pending:
                    conn.scheduled = False
                    resume = conn.paused
                    conn.paused = False
                    break
                cmd = conn.pending.popleft()
            try:
                self._dispatch(conn, cmd)
            except Exception:  # _dispatch answers every failure; this is the last guard
                log.exception("request %d from %s failed", cmd.code, conn.peer)
        else:
            self._work.put(conn)  # still scheduled: others get a turn first
            return
        if resume:
            if conn.frame_started is not None:
                conn.frame_started = time.monotonic()  # not its fault: we stopped reading
            self.io.want_write(conn)

    def _flush_loop(self) -> None:
        """The broker's periodic persist: offsets and configs reach the disk every few seconds."""
        failures = RateLimitedLog(ACCEPT_LOG_INTERVAL_S)
        while not self._stop.wait(FLUSH_INTERVAL_S):
            try:
                with self.lock:
                    self.cluster.flush()
            except (OSError, errors.StoreError) as exc:  # a full disk: one line now and then, retried
                suppressed = failures.hit()
                if suppressed is not None:
                    log.warning("periodic flush of the mock store failed: %s (%d more since)", exc, suppressed)
            except Exception:
                log.exception("periodic flush of the mock store failed")

    # -- requests ----------------------------------------------------------------------------

    def _dispatch(self, conn: Connection, req: RemotingCommand) -> None:
        """Handle one frame; every failure becomes a reply, never a dropped connection."""
        if req.is_response:
            return  # a late answer to a call_client that gave up, or to a oneway request
        self.count("requests")
        reply = self._handle(conn, req)
        # Reply unless flag bit 1 says oneway. The C++ client encodes its header before setting
        # that bit, so its "oneway" requests arrive with flag 0 and it drops the reply itself
        # (remoting: RemotingCommand.java, RPC_ONEWAY; rocketmq-client-cpp).
        if reply is None or req.is_oneway:
            return
        try:
            conn.send(reply)
        except (ValueError, TypeError):  # a reply the codec refuses must not cost the connection
            log.exception("cannot encode the reply to request %d from %s", req.code, conn.peer)
            conn.send(conn.role.reply(req, ResponseCode.SYSTEM_ERROR, f"cannot encode the reply to request {req.code}"))

    def _handle(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | None:
        role = conn.role
        denied = role.check_access(req)
        if denied is not None:
            return role.reply(req, ResponseCode.NO_PERMISSION, denied)
        handler = role.handlers.get(req.code)
        if handler is None:
            if not role.answers_unknown:
                log.debug("no answer to request code %d on the %s port (as 4.x)", req.code, role.name)
                return None
            return role.reply(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
        oversized = oversized_number(req)
        if oversized is not None:
            return role.reply(req, ResponseCode.SYSTEM_ERROR, oversized)
        try:
            return handler(conn, req)
        except errors.BrokerError as exc:
            return role.reply(req, exc.code, exc.remark)
        except errors.MqadminError as exc:
            return role.reply(req, ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception:  # a bug: the log has it; the peer gets no Python text
            log.exception("request %d from %s failed", req.code, conn.peer)
            return role.reply(req, ResponseCode.SYSTEM_ERROR, f"the mock broker failed to handle request {req.code}")

    # -- client registry ---------------------------------------------------------------------

    def bind_client(self, conn: Connection, broker: str, group: str, client_id: str) -> None:
        key = (broker, group, client_id)
        with self._registry_lock:
            self._clients[key] = conn
            conn.registrations.add(key)

    def unbind_client(self, broker: str, group: str, client_id: str, conn: Connection | None) -> bool:
        """Forget a client; with ``conn``, only if that is still the client's connection."""
        key = (broker, group, client_id)
        with self._registry_lock:
            current = self._clients.get(key)
            if current is None or (conn is not None and current is not conn):
                return False
            del self._clients[key]
            current.registrations.discard(key)
            return True

    def client_connection(self, broker: str, group: str, client_id: str) -> Connection | None:
        with self._registry_lock:
            return self._clients.get((broker, group, client_id))

    def connection_closed(self, conn: Connection) -> None:
        """A connection is gone: its clients leave their groups."""
        with self._registry_lock:
            registrations = list(conn.registrations)
        roles = {r.name: r for r in self._roles if isinstance(r, BrokerRole)}
        for broker, group, client_id in registrations:
            role = roles.get(broker)
            if role is not None:
                forget_client(role, group, client_id, conn)
