"""What every remoting admin call stands on: the client, broker addresses and topic routes.

:class:`BrokerSession` sends requests (one, or many fanned out over the pipelined connections),
turns error replies into typed ``BrokerError``s naming the broker, and knows where each broker
set lives: masters for writes, a master or else a slave for reads, as the Java tool picks them.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Final

from mqadmin import errors
from mqadmin.model import BrokerData, BrokerInfo, MessageQueue, TopicRoute
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.constants import MASTER_ID, RETRY_PREFIX
from mqadmin.protocol.headers import RouteInfoHeader
from mqadmin.remoting import replies
from mqadmin.remoting.client import DEFAULT_TIMEOUT, ConnectFailed, PendingReply, RemotingClient
from mqadmin.remoting.transport import TlsOptions

__all__ = ["BrokerSession"]

log = logging.getLogger("mqadmin.remoting")

#: requests one fan-out keeps in flight (per-group calls can number tens of thousands)
FAN_OUT_WINDOW: Final = 128
# How long a looked-up route is reused: long enough for one command's fan-out, short enough
# that a topic created meanwhile shows up on the next command.
ROUTE_CACHE_S: Final = 5.0
#: broker names this process already said it reads from a slave (once per run, not per connection)
_SLAVE_READS: set[str] = set()
_SLAVE_READS_LOCK = threading.Lock()

#: one reply per call of a fan-out, or the error that stood in for it
Replies = list[RemotingCommand | errors.MqadminError]


class BrokerSession:
    """Connections to a name-server list and its brokers, with the small caches calls share.

    Thread-safe: one :class:`RemotingClient` multiplexes every caller's requests over one
    connection per address, and the caches (broker addresses, routes, send queues) are guarded
    by locks.
    """

    def __init__(
        self,
        address: str,
        timeout: float = DEFAULT_TIMEOUT,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool = False,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
    ) -> None:
        if bool(access_key) != bool(secret_key):
            raise errors.UsageError("ACL needs both an access key and a secret key")
        self.address = address.strip()
        self.timeout = timeout
        # A CA or client certificate only makes sense over TLS, so giving one turns TLS on.
        use_tls = tls or any(x is not None for x in (tls_ca, tls_cert, tls_key))
        self._client = RemotingClient(
            self.address,
            timeout=timeout,
            access_key=access_key,
            secret_key=secret_key,
            tls=TlsOptions(tls_ca, tls_cert, tls_key) if use_tls else None,
        )
        self._lock = threading.Lock()
        self._brokers: dict[str, BrokerData] = {}
        self._send_queues: dict[str, tuple[float, list[MessageQueue]]] = {}
        self._round_robin = itertools.count()
        self._routes: dict[str, tuple[float, TopicRoute]] = {}
        self._routes_lock = threading.Lock()
        #: the run's look at the cluster: the name server's broker table, and each broker's
        #: version and settings (``cluster_brokers``); dropped on a connection error or ``refresh``
        self._snapshot: tuple[list[BrokerData], dict[str, list[str]]] | None = None
        self._infos: list[BrokerInfo] | None = None
        self._snapshot_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.address!r}>"

    def close(self) -> None:
        self._client.close()

    def refresh(self) -> None:
        """Forget the cluster snapshot: the next call asks the name server and brokers again."""
        with self._lock:
            self._snapshot = self._infos = None

    # -- sending ----------------------------------------------------------------------------

    def _check(self, addr: str, reply: RemotingCommand, ok: frozenset[int] | None = None) -> RemotingCommand:
        if reply.code not in (ok or {ResponseCode.SUCCESS}):
            raise errors.BrokerError.for_code(reply.code, reply.remark or "", addr)
        return reply

    def _namesrv(self, request: RemotingCommand) -> tuple[str, RemotingCommand]:
        addr, reply = self._client.invoke_namesrv(request)
        return addr, self._check(addr, reply)

    def _broker_call(
        self, addr: str, request: RemotingCommand, *, idempotent: bool, timeout: float | None = None
    ) -> RemotingCommand:
        return self._check(addr, self._invoke(addr, request, idempotent=idempotent, timeout=timeout))

    def _invoke(
        self, addr: str, cmd: RemotingCommand, *, idempotent: bool, timeout: float | None = None
    ) -> RemotingCommand:
        try:
            return self._client.invoke(addr, cmd, timeout=timeout, idempotent=idempotent)
        except errors.ConnectError as exc:
            self._lost(addr, exc)
            raise

    def _fan_out(
        self,
        calls: Sequence[tuple[str, RemotingCommand]],
        *,
        idempotent: bool,
        timeout: float | None = None,
    ) -> Replies:
        """Send calls before waiting for earlier ones: one round trip for N brokers, no extra threads.

        At most ``FAN_OUT_WINDOW`` are in flight, so with thousands of calls (one per group) none
        waits out its timeout in the queue behind the others.
        """
        pending: deque[PendingReply] = deque()
        out: Replies = []

        def take_oldest() -> None:
            p = pending.popleft()
            try:
                out.append(self._client.wait(p, idempotent=idempotent))
            except errors.ConnectError as exc:
                self._lost(p.addr, exc)
                out.append(exc)

        for addr, cmd in calls:
            if len(pending) >= FAN_OUT_WINDOW:
                take_oldest()
            pending.append(self._client.submit(addr, cmd, timeout=timeout))
        while pending:
            take_oldest()
        return out

    def _checked(self, addr: str, reply: RemotingCommand | errors.MqadminError) -> RemotingCommand:
        """A fan-out's reply when it succeeded; its error (raised) otherwise."""
        if isinstance(reply, Exception):
            raise reply
        return self._check(addr, reply)

    @staticmethod
    def _error_of(addr: str, reply: RemotingCommand | errors.MqadminError) -> errors.MqadminError:
        if isinstance(reply, errors.MqadminError):
            return reply
        return errors.BrokerError.for_code(reply.code, reply.remark or "", addr)

    # -- broker addresses -------------------------------------------------------------------

    def _remember(self, brokers: Sequence[BrokerData]) -> None:
        with self._lock:
            for b in brokers:
                self._brokers[b.broker_name] = b

    def _cluster_info(self) -> tuple[list[BrokerData], dict[str, list[str]]]:
        """The name server's broker table, asked once per run (the snapshot)."""
        with self._snapshot_lock:  # callers on many threads share one request
            with self._lock:
                snapshot = self._snapshot
            if snapshot is None:
                snapshot = self._fetch_cluster_info()
                with self._lock:
                    self._snapshot = snapshot
        return list(snapshot[0]), snapshot[1]

    def _fetch_cluster_info(self) -> tuple[list[BrokerData], dict[str, list[str]]]:
        addr, reply = self._namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        brokers, clusters = replies.cluster_info(addr, reply)
        # The name server may list a broker under a cluster without naming it in the BrokerData.
        owner = {name: cluster for cluster, names in clusters.items() for name in names}
        brokers = [
            b if b.cluster else BrokerData(b.broker_name, owner.get(b.broker_name, ""), b.addrs) for b in brokers
        ]
        brokers.sort(key=lambda b: b.broker_name)
        self._remember(brokers)
        return brokers, clusters

    def _lost(self, addr: str, exc: errors.ConnectError) -> None:
        """A connection error: the cluster may have changed (a broker down, restarted, moved), so
        the snapshot is dropped; an address that refused the connection is forgotten too."""
        if isinstance(exc, ConnectFailed):
            self._forget_addr(addr)
        self.refresh()

    def _forget_addr(self, addr: str) -> None:
        """A broker we cannot reach may have moved: look its name up again on the next call."""
        with self._lock:
            for name in [n for n, b in self._brokers.items() if addr in b.addrs.values()]:
                del self._brokers[name]

    def _broker_addr(self, broker_name: str, *, write: bool = False) -> str:
        """The address to use for a broker name: for reads its master, else a slave (as the Java
        tool); for writes only the master."""
        with self._lock:
            known = self._brokers.get(broker_name)
        if known is None or not known.addrs:
            brokers, _ = self._cluster_info()
            known = next((b for b in brokers if b.broker_name == broker_name), None)
            if known is None or not known.addrs:
                raise errors.ConnectError(f"no broker named {broker_name!r} on the name server {self.address}")
        return self._master_addr(known) if write else self._read_addr(known)

    def _read_addr(self, broker: BrokerData) -> str:
        """Master, else a slave; reading from a slave is said once per broker (on stderr)."""
        addr = broker.select_addr()
        if MASTER_ID not in broker.addrs:
            with _SLAVE_READS_LOCK:
                first = broker.broker_name not in _SLAVE_READS
                _SLAVE_READS.add(broker.broker_name)
            if first:
                log.warning(
                    "mqadmin: %s: master not online, reading from its slave %s (offsets there follow the master's "
                    "with a few seconds' delay)",
                    broker.broker_name,
                    addr,
                )
        return addr

    @staticmethod
    def _master_addr(broker: BrokerData) -> str:
        """Offsets live on the master: a slave accepts an update but the master's copy wins later."""
        if MASTER_ID not in broker.addrs:
            raise errors.ConnectError(
                f"{broker.broker_name} has no master online (only its slave {broker.select_addr()}); "
                "offsets live on the master, so they cannot be changed until it is back"
            )
        return broker.addrs[MASTER_ID]

    def _all_brokers(self) -> list[BrokerData]:
        brokers, _ = self._cluster_info()
        return brokers

    # -- routing ----------------------------------------------------------------------------

    def topic_route(self, topic: str) -> TopicRoute:
        """Routes are cached briefly (found ones only), as clients cache them: one command asks
        for the same %RETRY% routes many times over."""
        now = time.monotonic()
        with self._routes_lock:
            hit = self._routes.get(topic)
        if hit is not None and now - hit[0] < ROUTE_CACHE_S:
            return hit[1]
        route = self._fetch_route(topic)
        with self._routes_lock:
            self._routes[topic] = (now, route)
        return route

    def _fetch_route(self, topic: str) -> TopicRoute:
        # Standard JSON (quoted broker ids) from 4.9.4 on; older servers ignore the flag and
        # send bare numeric keys, which fastjson.loads reads as well.
        addr, reply = self._namesrv(RouteInfoHeader(topic=topic, acceptStandardJsonOnly=True).request())
        brokers, queues = replies.route(addr, reply)
        self._remember(brokers)
        return TopicRoute(topic, tuple(brokers), tuple(queues))

    def _group_brokers(self, group: str, topic: str | None) -> list[BrokerData]:
        """Brokers of the group's retry topic plus the topic's; all brokers if neither has a route.

        A group that only ever committed offsets (no consumer ever started) has no retry topic,
        so the fallback still finds its offsets.
        """
        found: dict[str, BrokerData] = {}
        for t in [RETRY_PREFIX + group] + ([topic] if topic else []):
            try:
                route = self.topic_route(t)
            except errors.TopicNotExist:
                continue
            for b in route.brokers:
                found.setdefault(b.broker_name, b)
        if not found:
            return self._all_brokers()
        return [found[n] for n in sorted(found)]
