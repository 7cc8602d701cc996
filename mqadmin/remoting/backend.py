"""The admin facade over a real RocketMQ cluster, spoken in the remoting protocol.

Every method builds one request (or one per broker, sent together and awaited together),
checks the response code and shapes the reply into the facade's value types, with the
semantics the embedded mock has (the broker's processors: AdminBrokerProcessor.java,
ConsumerManageProcessor.java, PullMessageProcessor.java, SendMessageProcessor.java). Broker errors become typed
``BrokerError``s that name the broker's address; could-not-talk failures are ``ConnectError``s.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mqadmin import errors, fastjson
from mqadmin.message import MessageDecodeError, format_properties, iter_messages, new_uniq_key
from mqadmin.model import (
    BrokerData,
    BrokerInfo,
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    Message,
    MessageQueue,
    OffsetWrapper,
    PullResult,
    QueueData,
    QueueStats,
    RawPull,
    SendResult,
    TopicRoute,
)
from mqadmin.protocol.codec import DEFAULT_LANGUAGE, RemotingCommand
from mqadmin.protocol.codes import LanguageCode, RequestCode, ResponseCode, version_name
from mqadmin.protocol.constants import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DEFAULT_TOPIC,
    DEFAULT_TOPIC_QUEUE_NUMS,
    EXPRESSION_TAG,
    MASTER_ID,
    PERM_READ_WRITE,
    PERM_WRITE,
    PULL_SUBSCRIPTION,
    RETRY_PREFIX,
    SUBSCRIBE_ALL,
    TOOLS_CONSUMER_GROUP,
)
from mqadmin.remoting.client import DEFAULT_TIMEOUT, ConnectFailed, PendingReply, RemotingClient, TlsOptions

__all__ = ["MalformedReply", "RemotingAdmin"]

log = logging.getLogger("mqadmin.remoting")

#: the producer group our sends are attributed to (only statistics use it)
TOOLS_PRODUCER_GROUP: Final = "MQADMIN_TOOLS_PRODUCER"
#: GET_CONSUME_STATS walks every queue of every topic; the Java tool gives it three time limits
CONSUME_STATS_TIMEOUT_FACTOR: Final = 3
#: requests one fan-out keeps in flight (per-group calls can number tens of thousands)
FAN_OUT_WINDOW: Final = 128
#: GET_BROKER_CONSUME_STATS walks every queue of every group on the broker (the Java tool waits 50 s)
BROKER_CONSUME_STATS_TIMEOUT_FACTOR: Final = 10
#: how long a topic's writable queues are reused for round-robin sends (the Java client's route refresh)
SEND_ROUTE_TTL_S: Final = 30.0
# How long a looked-up route is reused: long enough for one command's fan-out, short enough
# that a topic created meanwhile shows up on the next command.
ROUTE_CACHE_S: Final = 5.0
#: broker names this process already said it reads from a slave (once per run, not per connection)
_SLAVE_READS: set[str] = set()
_SLAVE_READS_LOCK = threading.Lock()

#: pull reply code -> the Java client's PullStatus, used only when the broker's remark names no
#: store status (brokers put GetMessageStatus there: FOUND, OFFSET_TOO_SMALL, OFFSET_OVERFLOW_ONE...)
PULL_STATUS: Final[Mapping[int, str]] = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}
_STATUS_NAME_RE: Final = re.compile(r"[A-Z][A-Z_]*")
#: send replies that still mean "stored" (the broker only missed a flush or a slave)
SEND_STORED: Final = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
    }
)


class MalformedReply(errors.ConnectError):
    """A reply we cannot read (missing header field, unparsable body): the peer is not what we expect."""

    def __init__(self, message: str, addr: str) -> None:
        super().__init__(message)
        self.addr = addr


def _response_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"


def _java_version_text(desc: str) -> str:
    """``V5_3_3`` -> ``5.3.3``, ``V4_9_8_SNAPSHOT`` -> ``4.9.8-SNAPSHOT`` (what BrokerInfo carries)."""
    text = desc[1:] if desc[:1] in ("V", "v") else desc
    text = text.replace("_SNAPSHOT", "-SNAPSHOT")
    return text.replace("_", ".")


class RemotingAdmin:
    """``Admin`` against ``host:port[;host:port]`` name servers.

    Thread-safe: one :class:`RemotingClient` multiplexes every caller's requests over one
    connection per address, and the small caches here (broker addresses, send routes) are
    guarded by a lock.
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

    def __repr__(self) -> str:
        return f"<RemotingAdmin {self.address!r}>"

    # -- plumbing ---------------------------------------------------------------------------

    def _check(self, addr: str, reply: RemotingCommand, ok: frozenset[int] | None = None) -> RemotingCommand:
        if reply.code not in (ok or {ResponseCode.SUCCESS}):
            raise errors.BrokerError.for_code(reply.code, reply.remark or "", addr)
        return reply

    def _namesrv(self, code: RequestCode, fields: Mapping[str, object] | None = None) -> tuple[str, RemotingCommand]:
        addr, reply = self._client.invoke_namesrv(RemotingCommand.request(code, fields))
        return addr, self._check(addr, reply)

    def _broker_call(
        self,
        addr: str,
        code: RequestCode,
        fields: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        idempotent: bool,
        timeout: float | None = None,
    ) -> RemotingCommand:
        reply = self._invoke(addr, RemotingCommand.request(code, fields, body), idempotent=idempotent, timeout=timeout)
        return self._check(addr, reply)

    def _invoke(
        self, addr: str, cmd: RemotingCommand, *, idempotent: bool, timeout: float | None = None
    ) -> RemotingCommand:
        try:
            return self._client.invoke(addr, cmd, timeout=timeout, idempotent=idempotent)
        except ConnectFailed:
            self._forget_addr(addr)
            raise

    def _fan_out(
        self,
        calls: Sequence[tuple[str, RemotingCommand]],
        *,
        idempotent: bool,
        timeout: float | None = None,
    ) -> list[RemotingCommand | errors.MqadminError]:
        """Send calls before waiting for earlier ones: one round trip for N brokers, no extra threads.

        At most ``FAN_OUT_WINDOW`` are in flight, so with thousands of calls (one per group) none
        waits out its timeout in the queue behind the others.
        """
        pending: deque[PendingReply] = deque()
        out: list[RemotingCommand | errors.MqadminError] = []

        def take_oldest() -> None:
            p = pending.popleft()
            try:
                out.append(self._client.wait(p, idempotent=idempotent))
            except errors.ConnectError as exc:
                if isinstance(exc, ConnectFailed):
                    self._forget_addr(p.addr)
                out.append(exc)

        for addr, cmd in calls:
            if len(pending) >= FAN_OUT_WINDOW:
                take_oldest()
            pending.append(self._client.submit(addr, cmd, timeout=timeout))
        while pending:
            take_oldest()
        return out

    @staticmethod
    def _ext_int(addr: str, reply: RemotingCommand, name: str) -> int:
        value = reply.ext_int(name)
        if value is None:
            raise MalformedReply(
                f"{addr} answered {_response_name(reply.code)} without a numeric {name!r} header field", addr
            )
        return value

    @staticmethod
    def _body(addr: str, reply: RemotingCommand, what: str) -> Any:
        try:
            return fastjson.loads(reply.body)
        except ValueError as exc:
            raise MalformedReply(f"cannot read the {what} from {addr}: {exc}", addr) from None

    # -- broker addresses -------------------------------------------------------------------

    def _remember(self, brokers: Sequence[BrokerData]) -> None:
        with self._lock:
            for b in brokers:
                self._brokers[b.broker_name] = b

    def _cluster_info(self) -> tuple[list[BrokerData], dict[str, list[str]]]:
        addr, reply = self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        data = self._body(addr, reply, "cluster info")
        try:
            brokers = [self._broker_data(v) for v in (data.get("brokerAddrTable") or {}).values()]
            clusters = {str(k): [str(n) for n in v] for k, v in (data.get("clusterAddrTable") or {}).items()}
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise MalformedReply(f"unexpected cluster info from {addr}: {exc!r}", addr) from None
        # The name server may list a broker under a cluster without naming it in the BrokerData.
        owner = {name: cluster for cluster, names in clusters.items() for name in names}
        brokers = [
            b if b.cluster else BrokerData(b.broker_name, owner.get(b.broker_name, ""), b.addrs) for b in brokers
        ]
        brokers.sort(key=lambda b: b.broker_name)
        self._remember(brokers)
        return brokers, clusters

    @staticmethod
    def _broker_data(raw: Mapping[str, Any]) -> BrokerData:
        addrs = {int(k): str(v) for k, v in (raw.get("brokerAddrs") or {}).items()}
        return BrokerData(str(raw["brokerName"]), str(raw.get("cluster") or ""), addrs)

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
        addr, reply = self._namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": True}
        )
        data = self._body(addr, reply, f"route of {topic}")
        try:
            brokers = sorted((self._broker_data(b) for b in data.get("brokerDatas") or []), key=lambda b: b.broker_name)
            queues = sorted(
                (
                    QueueData(
                        str(q["brokerName"]),
                        int(q.get("readQueueNums", 0)),
                        int(q.get("writeQueueNums", 0)),
                        int(q.get("perm", PERM_READ_WRITE)),
                        # spelled topicSynFlag up to 4.8
                        int(q.get("topicSysFlag", q.get("topicSynFlag", 0))),
                    )
                    for q in data.get("queueDatas") or []
                ),
                key=lambda q: q.broker_name,
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise MalformedReply(f"unexpected route data for {topic} from {addr}: {exc!r}", addr) from None
        self._remember(brokers)
        return TopicRoute(topic, tuple(brokers), tuple(queues))

    def cluster_brokers(self) -> list[BrokerInfo]:
        """Every broker set with its version, read from GET_BROKER_RUNTIME_INFO.

        A Java broker stamps its version ordinal on every reply header, so even an error reply
        names it (a fresh 4.9.8 broker answers this request with SYSTEM_ERROR for its first
        seconds). A broker that cannot be reached is listed with an empty version, which never
        counts as a server-side-reset broker, and a warning is logged.
        """
        brokers = self._all_brokers()
        calls = [(self._read_addr(b), RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)) for b in brokers]
        replies = self._fan_out(calls, idempotent=True)
        out: list[BrokerInfo] = []
        for b, (addr, _), reply in zip(brokers, calls, replies, strict=True):
            version = self._runtime_version(addr, reply) if isinstance(reply, RemotingCommand) else ""
            if not version:
                log.warning("cannot learn the version of broker %s: %s", b.broker_name, self._error_of(addr, reply))
            out.append(BrokerInfo(b.broker_name, addr, b.cluster, version))
        return out

    def _runtime_version(self, addr: str, reply: RemotingCommand) -> str:
        table: Mapping[str, Any] = {}
        if reply.code == ResponseCode.SUCCESS:
            try:
                table = self._body(addr, reply, "runtime info").get("table") or {}
            except (MalformedReply, AttributeError):
                pass
        desc = table.get("brokerVersionDesc")
        if isinstance(desc, str) and desc:
            return _java_version_text(desc)
        ordinal = table.get("brokerVersion")
        if isinstance(ordinal, str) and ordinal.isdigit():
            return _java_version_text(version_name(int(ordinal)))
        return _java_version_text(version_name(reply.version)) if reply.version > 0 else ""

    def list_topics(self) -> list[str]:
        addr, reply = self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        data = self._body(addr, reply, "topic list")
        try:
            return sorted({str(t) for t in data.get("topicList") or []})
        except AttributeError as exc:
            raise MalformedReply(f"unexpected topic list from {addr}: {exc!r}", addr) from None

    def list_groups(self) -> list[str]:
        """Groups as the Java tool finds them: one per ``%RETRY%group`` topic."""
        return sorted(t[len(RETRY_PREFIX) :] for t in self.list_topics() if t.startswith(RETRY_PREFIX))

    # -- queue offsets ----------------------------------------------------------------------

    def _queue_call(self, mq: MessageQueue, code: RequestCode, extra: Mapping[str, object], field: str) -> int:
        addr = self._broker_addr(mq.broker_name)
        fields: dict[str, object] = {"topic": mq.topic, "queueId": mq.queue_id, **extra}
        reply = self._broker_call(addr, code, fields, idempotent=True)
        return self._ext_int(addr, reply, field)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._queue_call(mq, RequestCode.GET_MIN_OFFSET, {}, "offset")

    def max_offset(self, mq: MessageQueue) -> int:
        # 5.x: committed=true asks for what is replicated, as the Java admin does; 4.x ignores it.
        return self._queue_call(mq, RequestCode.GET_MAX_OFFSET, {"committed": True}, "offset")

    def search_offset(self, mq: MessageQueue, ts_ms: int) -> int:
        return self._queue_call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"timestamp": ts_ms}, "offset")

    def earliest_store_time(self, mq: MessageQueue) -> int:
        return self._queue_call(mq, RequestCode.GET_EARLIEST_MSG_STORETIME, {}, "timestamp")

    def queue_stats(self, queues: Sequence[MessageQueue]) -> dict[MessageQueue, QueueStats]:
        """Bounds of many queues: one GET_TOPIC_STATS_INFO per topic and broker, sent together.

        A broker that refuses it (ACL, an old or foreign server) or leaves a queue out is asked
        per queue instead (GET_MIN_OFFSET + GET_MAX_OFFSET, pipelined), as before.
        """
        by_place: dict[tuple[str, str], list[MessageQueue]] = {}
        for mq in queues:
            by_place.setdefault((mq.topic, mq.broker_name), []).append(mq)
        places = list(by_place)
        addrs = {name: self._broker_addr(name) for name in {b for _, b in places}}
        calls = [
            (addrs[broker], RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
            for topic, broker in places
        ]
        out: dict[MessageQueue, QueueStats] = {}
        missing: list[MessageQueue] = []
        for place, (addr, _), reply in zip(places, calls, self._fan_out(calls, idempotent=True), strict=True):
            try:
                if isinstance(reply, Exception):
                    raise reply
                table = self._parse_topic_stats(addr, self._check(addr, reply))
            except errors.MqadminError as exc:
                log.info("%s: no topic stats for %s (%s); asking per queue", addr, place[0], exc)
                table = {}
            for mq in by_place[place]:
                found = table.get(mq)
                if found is None:
                    missing.append(mq)
                else:
                    out[mq] = found
        if missing:
            out.update(self._queue_bounds(missing))
        return {mq: out[mq] for mq in queues}

    def _parse_topic_stats(self, addr: str, reply: RemotingCommand) -> dict[MessageQueue, QueueStats]:
        try:
            data = fastjson.loads_queue_keyed(reply.body)
            return {
                mq: QueueStats(
                    int(row.get("minOffset", 0)), int(row["maxOffset"]), int(row.get("lastUpdateTimestamp", 0))
                )
                for mq, row in fastjson.mq_table(data.get("offsetTable") or {}).items()
            }
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise MalformedReply(f"unexpected topic stats from {addr}: {exc!r}", addr) from None

    def _queue_bounds(self, queues: Sequence[MessageQueue]) -> dict[MessageQueue, QueueStats]:
        """GET_MIN_OFFSET and GET_MAX_OFFSET of every queue, all sent before any is awaited."""
        calls = []
        for mq in queues:
            addr = self._broker_addr(mq.broker_name)
            fields: dict[str, object] = {"topic": mq.topic, "queueId": mq.queue_id}
            calls.append((addr, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, fields)))
            # 5.x: committed=true asks for what is replicated, as max_offset does; 4.x ignores it.
            calls.append((addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {**fields, "committed": True})))
        values: list[int] = []
        for (addr, _), reply in zip(calls, self._fan_out(calls, idempotent=True), strict=True):
            if isinstance(reply, Exception):
                raise reply
            values.append(self._ext_int(addr, self._check(addr, reply), "offset"))
        return {mq: QueueStats(values[2 * i], values[2 * i + 1]) for i, mq in enumerate(queues)}

    # -- consumer offsets -------------------------------------------------------------------

    def consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        """The committed offset, or None when the broker has none (never "0 if not found")."""
        addr = self._broker_addr(mq.broker_name)
        fields = {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "setZeroIfNotFound": False}
        try:
            reply = self._broker_call(addr, RequestCode.QUERY_CONSUMER_OFFSET, fields, idempotent=True)
        except errors.QueryNotFound:
            return None
        return self._ext_int(addr, reply, "offset")

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        addr = self._broker_addr(mq.broker_name, write=True)
        fields = {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset}
        reply = self._broker_call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields, idempotent=False)
        if reply.remark:  # 5.x: "Offset has been previously reset" means the update was ignored
            log.warning("%s accepted the offset update of %s for %s with a remark: %s", addr, group, mq, reply.remark)

    # -- group state ------------------------------------------------------------------------

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

    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        brokers = self._group_brokers(group, topic)
        fields: dict[str, object] = {"consumerGroup": group, "topic": topic}
        calls = [
            (self._read_addr(b), RemotingCommand.request(RequestCode.GET_CONSUME_STATS, fields))
            for b in brokers
            if b.addrs
        ]
        replies = self._fan_out(calls, idempotent=True, timeout=self.timeout * CONSUME_STATS_TIMEOUT_FACTOR)
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for (addr, _), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            self._check(addr, reply)
            part_table, part_tps = self._parse_consume_stats(addr, reply)
            table.update(part_table)
            tps += part_tps
        return ConsumeStats(dict(sorted(table.items())), tps)

    def consume_stats_all(self, groups: Sequence[str]) -> dict[str, ConsumeStats | errors.MqadminError]:
        """Every group's consume stats from one GET_BROKER_CONSUME_STATS per broker.

        A broker answers for each of its subscription groups what GET_CONSUME_STATS would, but
        without pull offsets (so nothing shows in flight). A broker that refuses it (ACL: it
        needs cluster-wide read rights; a server without it) or cannot be read is asked group
        by group instead, as ``consume_stats`` does; a group whose per-group call fails gets
        that error as its value.
        """
        wanted = list(dict.fromkeys(groups))
        tables: dict[str, dict[MessageQueue, OffsetWrapper]] = {g: {} for g in wanted}
        tps = dict.fromkeys(wanted, 0.0)
        brokers = [b for b in self._all_brokers() if b.addrs]
        fields = {"isOrder": False}
        calls = [
            (self._read_addr(b), RemotingCommand.request(RequestCode.GET_BROKER_CONSUME_STATS, fields)) for b in brokers
        ]
        replies = self._fan_out(calls, idempotent=True, timeout=self.timeout * BROKER_CONSUME_STATS_TIMEOUT_FACTOR)
        refused: set[str] = set()
        for b, (addr, _), reply in zip(brokers, calls, replies, strict=True):
            try:
                if isinstance(reply, Exception):
                    raise reply
                parsed = self._parse_broker_consume_stats(addr, self._check(addr, reply))
            except errors.MqadminError as exc:
                log.info("%s: no broker consume stats (%s); asking group by group", addr, exc)
                refused.add(b.broker_name)
                continue
            for group, (table, group_tps) in parsed.items():
                if group in tables:
                    tables[group].update(table)
                    tps[group] += group_tps
        failed: dict[str, errors.MqadminError] = {}
        if refused:
            failed = self._consume_stats_per_group(wanted, refused, tables, tps)
        return {g: failed.get(g) or ConsumeStats(dict(sorted(tables[g].items())), tps[g]) for g in wanted}

    def _consume_stats_per_group(
        self,
        groups: Sequence[str],
        refused: set[str],
        tables: dict[str, dict[MessageQueue, OffsetWrapper]],
        tps: dict[str, float],
    ) -> dict[str, errors.MqadminError]:
        """GET_CONSUME_STATS of each group on the refused brokers that ``consume_stats`` would ask."""
        failed: dict[str, errors.MqadminError] = {}
        owners: list[str] = []
        calls: list[tuple[str, RemotingCommand]] = []
        for group in groups:
            try:
                brokers = self._group_brokers(group, None)
            except errors.MqadminError as exc:
                failed[group] = exc
                continue
            fields: dict[str, object] = {"consumerGroup": group, "topic": None}
            for b in brokers:
                if b.broker_name in refused and b.addrs:
                    owners.append(group)
                    calls.append((self._read_addr(b), RemotingCommand.request(RequestCode.GET_CONSUME_STATS, fields)))
        replies = self._fan_out(calls, idempotent=True, timeout=self.timeout * CONSUME_STATS_TIMEOUT_FACTOR)
        for group, (addr, _), reply in zip(owners, calls, replies, strict=True):
            try:
                if isinstance(reply, Exception):
                    raise reply
                part, part_tps = self._parse_consume_stats(addr, self._check(addr, reply))
            except errors.MqadminError as exc:
                failed.setdefault(group, exc)
                continue
            tables[group].update(part)
            tps[group] += part_tps
        return failed

    def _parse_broker_consume_stats(
        self, addr: str, reply: RemotingCommand
    ) -> dict[str, tuple[dict[MessageQueue, OffsetWrapper], float]]:
        """ConsumeStatsList: ``[{group: [ConsumeStats per topic]}]`` -> group -> (rows, tps)."""
        try:
            data = fastjson.loads_queue_keyed(reply.body)
            out: dict[str, tuple[dict[MessageQueue, OffsetWrapper], float]] = {}
            for entry in data.get("consumeStatsList") or []:
                for group, per_topic in entry.items():
                    rows: dict[MessageQueue, OffsetWrapper] = {}
                    group_tps = 0.0
                    for stats in per_topic or []:
                        for mq, w in fastjson.mq_table(stats.get("offsetTable") or {}).items():
                            consumer = int(w.get("consumerOffset", 0))
                            rows[mq] = OffsetWrapper(
                                broker_offset=int(w.get("brokerOffset", 0)),
                                consumer_offset=consumer,
                                last_timestamp=int(w.get("lastTimestamp", 0)),
                                pull_offset=consumer,  # the broker leaves it unset here
                            )
                        group_tps += float(stats.get("consumeTps", 0.0))
                    out[str(group)] = (rows, group_tps)
            return out
        except (AttributeError, TypeError, ValueError) as exc:
            raise MalformedReply(f"unexpected broker consume stats from {addr}: {exc!r}", addr) from None

    def _parse_consume_stats(
        self, addr: str, reply: RemotingCommand
    ) -> tuple[dict[MessageQueue, OffsetWrapper], float]:
        data = self._body(addr, reply, "consume stats")
        try:
            rows: dict[MessageQueue, OffsetWrapper] = {}
            for mq, w in fastjson.mq_table(data.get("offsetTable") or {}).items():
                consumer = int(w.get("consumerOffset", 0))
                rows[mq] = OffsetWrapper(
                    broker_offset=int(w.get("brokerOffset", 0)),
                    consumer_offset=consumer,
                    last_timestamp=int(w.get("lastTimestamp", 0)),
                    # 4.x has no pullOffset: nothing is known in flight beyond the committed offset
                    pull_offset=int(w.get("pullOffset", consumer)),
                )
            return rows, float(data.get("consumeTps", 0.0))
        except (AttributeError, TypeError, ValueError) as exc:
            raise MalformedReply(f"unexpected consume stats from {addr}: {exc!r}", addr) from None

    def consumer_connections(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """Who is online, merged over the group's brokers (or asked of ``broker_addr`` alone, as the
        Java tool's ``-b``); ConsumerNotOnline when nobody is."""
        fields = {"consumerGroup": group}
        addrs = (
            [broker_addr] if broker_addr else [self._read_addr(b) for b in self._group_brokers(group, None) if b.addrs]
        )
        calls = [(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, fields)) for addr in addrs]
        return self._connections_of(group, calls, self._fan_out(calls, idempotent=True))

    def _connections_of(
        self,
        group: str,
        calls: Sequence[tuple[str, RemotingCommand]],
        replies: Sequence[RemotingCommand | errors.MqadminError],
    ) -> ConsumerConnection:
        """Merge one group's GET_CONSUMER_CONNECTION_LIST replies; ConsumerNotOnline when nobody is."""
        bodies: list[dict[str, Any]] = []
        first_error: errors.MqadminError | None = None
        for (addr, _), reply in zip(calls, replies, strict=True):
            if isinstance(reply, RemotingCommand) and reply.code == ResponseCode.SUCCESS:
                body = self._body(addr, reply, "consumer connections")
                if isinstance(body, dict):
                    bodies.append(body)
                continue
            err = reply if isinstance(reply, errors.MqadminError) else self._error_of(addr, reply)
            # "not online" on one broker is normal when others know the clients
            if first_error is None or isinstance(first_error, errors.ConsumerNotOnline):
                first_error = err
        if not bodies:
            raise first_error or errors.ConsumerNotOnline(f"the consumer group[{group}] not online")
        return self._merge_connections(bodies)

    def consumer_connections_all(self, groups: Sequence[str]) -> dict[str, ConsumerConnection | errors.MqadminError]:
        """``consumer_connections`` of many groups: every request sent before any is awaited.

        RocketMQ has no request for all groups' connections, so this is one request per group
        and broker; it asks every broker of the cluster (one name-server call, not one route
        per group): a broker the group never reached answers "not online", which merging
        tolerates exactly as for a broker of the group's route.
        """
        wanted = list(dict.fromkeys(groups))
        addrs = [self._read_addr(b) for b in self._all_brokers() if b.addrs]
        calls = [
            (addr, RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": g}))
            for g in wanted
            for addr in addrs
        ]
        replies = self._fan_out(calls, idempotent=True)
        out: dict[str, ConsumerConnection | errors.MqadminError] = {}
        for i, group in enumerate(wanted):
            part = slice(i * len(addrs), (i + 1) * len(addrs))
            try:
                out[group] = self._connections_of(group, calls[part], replies[part])
            except errors.MqadminError as exc:
                out[group] = exc
        return out

    @staticmethod
    def _error_of(addr: str, reply: RemotingCommand | errors.MqadminError) -> errors.MqadminError:
        if isinstance(reply, errors.MqadminError):
            return reply
        return errors.BrokerError.for_code(reply.code, reply.remark or "", addr)

    @staticmethod
    def _merge_connections(bodies: list[dict[str, Any]]) -> ConsumerConnection:
        clients: dict[str, ClientConnection] = {}
        subs: dict[str, str] = {}
        for body in bodies:
            for c in body.get("connectionSet") or []:
                cid = str(c.get("clientId", ""))
                clients.setdefault(
                    cid,
                    ClientConnection(
                        cid, str(c.get("clientAddr", "")), str(c.get("language", "")), int(c.get("version", 0))
                    ),
                )
            for t, sub in (body.get("subscriptionTable") or {}).items():
                subs[str(t)] = str(sub.get("subString", SUBSCRIBE_ALL)) if isinstance(sub, Mapping) else str(sub)
        first = bodies[0]
        return ConsumerConnection(
            connections=tuple(clients.values()),
            consume_type=str(first.get("consumeType", "")),
            message_model=str(first.get("messageModel", "")),
            consume_from_where=str(first.get("consumeFromWhere", "")),
            subscriptions=subs,
        )

    # -- reset ------------------------------------------------------------------------------

    def reset_offset_by_time(
        self,
        topic: str,
        group: str,
        ts_ms: int,
        force: bool = True,
        *,
        broker_name: str | None = None,
        queue_id: int = -1,
        offset: int = -1,
        cplus: bool = False,
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on each broker of the topic (or the one named).

        ``cplus`` sends the request as a C++ client would, so a client-push broker sends the
        array body C++ consumers parse (the Java tool's ``-c``).

        4.x and 5.0-5.1 brokers push the new offsets to online consumers and answer
        CONSUMER_NOT_ONLINE (raised as ``errors.ConsumerNotOnline``) when there are none; 5.2+
        brokers reset on the server side. ``queueId``/``offset`` are always sent: 5.x brokers
        honour them, 4.x ignores them. Returns the merged table the brokers answered.
        """
        if broker_name is not None:
            addrs = [(broker_name, self._broker_addr(broker_name, write=True))]
        else:
            route = self.topic_route(topic)
            addrs = [(b.broker_name, self._master_addr(b)) for b in route.brokers if b.addrs]
        fields: dict[str, object] = {
            "topic": topic,
            "group": group,
            "timestamp": ts_ms,
            "isForce": force,
            "queueId": queue_id,
            "offset": offset,
        }
        language = LanguageCode.CPP.name if cplus else DEFAULT_LANGUAGE
        calls = [
            (
                addr,
                RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields, language=language),
            )
            for _, addr in addrs
        ]
        replies = self._fan_out(calls, idempotent=False)
        table: dict[MessageQueue, int] = {}
        for (addr, _), reply in zip(calls, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            self._check(addr, reply)
            if not reply.body:
                continue
            data = self._body(addr, reply, "reset result")
            try:
                table.update({mq: int(o) for mq, o in fastjson.mq_table(data.get("offsetTable") or {}).items()})
            except (AttributeError, TypeError, ValueError) as exc:
                raise MalformedReply(f"unexpected reset result from {addr}: {exc!r}", addr) from None
        return dict(sorted(table.items()))

    # -- messages ---------------------------------------------------------------------------

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32) -> PullResult:
        """Read messages as the Java tool does: group TOOLS_CONSUMER, no commit, no long poll.

        ``status`` is the broker's store status from the reply's remark (FOUND, NO_MATCHED_MESSAGE,
        OFFSET_TOO_SMALL, OFFSET_OVERFLOW_ONE, NO_MESSAGE_IN_QUEUE...), as the mock reports it;
        a reply without one gets the Java client's PullStatus name for its code.
        """
        raw = self.pull_raw(mq, offset, max_nums).result()
        messages: list[Message] = []
        for body in raw.records:
            try:
                messages += iter_messages(bytes(body))
            except MessageDecodeError as exc:
                addr = self._broker_addr(mq.broker_name)
                raise MalformedReply(f"cannot decode the messages pulled from {addr} ({mq}): {exc}", addr) from None
        for m in messages:
            m.broker_name = mq.broker_name
        return PullResult(raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset, messages)

    def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32) -> _PendingPull:
        """``pull`` sent without waiting, its body left encoded: a replay keeps several in flight
        over the one pipelined connection and decodes each body in bulk."""
        addr = self._broker_addr(mq.broker_name)
        fields: dict[str, object] = {
            "consumerGroup": TOOLS_CONSUMER_GROUP,
            "topic": mq.topic,
            "queueId": mq.queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_nums,
            "sysFlag": PULL_SUBSCRIPTION,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": SUBSCRIBE_ALL,
            "subVersion": 0,
            "expressionType": EXPRESSION_TAG,
        }
        return _PendingPull(
            self, addr, self._client.submit(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, fields))
        )

    def _pull_result(self, addr: str, pending: PendingReply) -> RawPull:
        try:
            reply = self._client.wait(pending, idempotent=True)
        except ConnectFailed:
            self._forget_addr(addr)
            raise
        fallback = PULL_STATUS.get(reply.code)
        if fallback is None:
            raise errors.BrokerError.for_code(reply.code, reply.remark or "", addr)
        records: list[bytes | memoryview] = []
        if reply.code == ResponseCode.SUCCESS and reply.body:
            records.append(reply.body)
        remark = reply.remark or ""
        return RawPull(
            remark if _STATUS_NAME_RE.fullmatch(remark) else fallback,
            self._ext_int(addr, reply, "nextBeginOffset"),
            self._ext_int(addr, reply, "minOffset"),
            self._ext_int(addr, reply, "maxOffset"),
            records,
        )

    def _writable_queues(self, topic: str) -> list[MessageQueue]:
        now = time.monotonic()
        with self._lock:
            cached = self._send_queues.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        route = self.topic_route(topic)
        queues = [
            MessageQueue(topic, q.broker_name, i)
            for q in route.queues
            if q.perm & PERM_WRITE and route.broker(q.broker_name) is not None
            for i in range(q.write_queue_nums)
        ]
        if not queues:
            raise errors.NoPermission(f"topic {topic} has no writable queue", self.address)
        with self._lock:
            self._send_queues[topic] = (now + SEND_ROUTE_TTL_S, queues)
        return queues

    def send(self, topic: str, message: Message, queue: MessageQueue | None = None) -> SendResult:
        """SEND_MESSAGE_V2 to ``queue`` or the next writable queue (round-robin over the route).

        The message gets a UNIQ_KEY when it has none, as Java producers do; the caller's
        object is left untouched.
        """
        if queue is None:
            queues = self._writable_queues(topic)
            queue = queues[next(self._round_robin) % len(queues)]
        addr = self._broker_addr(queue.broker_name)
        props = dict(message.properties)
        props.setdefault("UNIQ_KEY", new_uniq_key())
        fields: dict[str, object] = {
            "a": TOOLS_PRODUCER_GROUP,
            "b": topic,
            "c": DEFAULT_TOPIC,
            "d": DEFAULT_TOPIC_QUEUE_NUMS,
            "e": queue.queue_id,
            "f": 0,  # sysFlag: plain body, no transaction
            "g": int(time.time() * 1000),
            "h": message.flag,
            "i": format_properties(props),
            "j": 0,
            "k": False,
            "m": False,
            "n": queue.broker_name,
        }
        reply = self._invoke(
            addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, message.body), idempotent=False
        )
        self._check(addr, reply, SEND_STORED)
        if reply.code != ResponseCode.SUCCESS:
            log.warning("%s stored the message but answered %s", addr, ResponseCode(reply.code).name)
        msg_id = reply.ext_str("msgId") or ""
        qid = reply.ext_int("queueId", queue.queue_id)
        return SendResult(
            msg_id,
            MessageQueue(topic, queue.broker_name, queue.queue_id if qid is None else qid),
            self._ext_int(addr, reply, "queueOffset"),
            props["UNIQ_KEY"],
        )

    def send_back(self, group: str, message: Message, delay_level: int = 0) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker copies the stored message to ``%RETRY%group``."""
        if not message.broker_name:
            raise errors.UsageError("send_back needs a message pulled from a broker (broker_name is empty)")
        addr = self._broker_addr(message.broker_name)
        fields: dict[str, object] = {
            "offset": message.commitlog_offset,
            "group": group,
            "delayLevel": delay_level,
            "originMsgId": message.uniq_key or message.msg_id,
            "originTopic": message.topic,
            "unitMode": False,
            "maxReconsumeTimes": DEFAULT_MAX_RECONSUME_TIMES,
        }
        self._broker_call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, fields, idempotent=False)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RemotingAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _PendingPull:
    """A PULL_MESSAGE in flight; ``result()`` waits for it as ``pull`` would."""

    def __init__(self, admin: RemotingAdmin, addr: str, pending: PendingReply):
        self._admin, self._addr, self._pending = admin, addr, pending

    def result(self) -> RawPull:
        return self._admin._pull_result(self._addr, self._pending)
