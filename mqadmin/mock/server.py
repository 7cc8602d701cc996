"""The mock broker's wire door: a MockCluster served over TCP in the RocketMQ remoting protocol.

One listener plays the name server, one listener per broker plays that broker, so real clients
(the C++ client behind rocketmq-client-python, Java clients, our own remoting backend) can
produce, consume with a push consumer, commit offsets and receive resets. Every answer comes
from the same model the embedded backend calls (style guide §5: one model, two doors); this
module only speaks the wire (protocol doc §1, §2.3-2.6, §3, §8.4).

Threads, a fixed number whatever the connection count: one I/O loop (selectors) accepts,
reads and writes every socket without blocking; a pool of workers handles requests, each
connection's in order; one thread answers long-polled pulls; one flushes. A peer that stops
reading is cut once its replies pile up, one silent both ways is closed after an idle time,
and running out of file descriptors pauses accepting instead of spinning. Model access is
serialised by one lock, taken per step rather than across a whole expensive request.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import itertools
import json
import logging
import os
import queue
import random
import selectors
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from mqadmin import errors, fastjson, names
from mqadmin.message import encode_message, format_properties, java_string_hash, parse_properties
from mqadmin.mock.backend import DEMO_NAME, mock_root
from mqadmin.mock.cluster import CLUSTER_FILE, DEFAULT_VERSION, MockCluster
from mqadmin.mock.model import ClientInfo, MockBroker, PullOutcome
from mqadmin.mock.store import StoreWriteFailed
from mqadmin.model import BrokerData, Message, MessageQueue, QueueData, TopicRoute
from mqadmin.protocol import acl as acl_sign
from mqadmin.protocol.codec import BadFrame, FrameDecoder, FrameTooLarge, RemotingCommand, encode
from mqadmin.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    MQVersion,
    RequestCode,
    ResponseCode,
    version_name,
    version_ordinal,
)
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.protocol.versions import version_tuple

__all__ = [
    "DEFAULT_NAMESRV_PORT",
    "MockServer",
    "ServeReport",
    "ServerReady",
    "open_store",
    "serve_store",
    "tls_context",
]

log = logging.getLogger("mqadmin.mock.server")

DEFAULT_NAMESRV_PORT: Final = 9876
DEFAULT_BIND: Final = "127.0.0.1"
DEFAULT_BROKER_COUNT: Final = 2
#: the broker persists consumer offsets every 5 s (flushConsumerOffsetInterval); so do we
FLUSH_INTERVAL_S: Final = 5.0
#: how often serve_store looks at its stop event (x5)
ACCEPT_POLL_S: Final = 0.2
#: held pulls are swept for expiry and closed peers this often
HOLD_SLICE_S: Final = 0.2
#: clients wait 30 s for a pull they ask the broker to hold 15 s; never hold longer than that
MAX_SUSPEND_MS: Final = 15_000
RECV_SIZE: Final = 64 * 1024
LISTEN_BACKLOG: Final = 128
#: a peer that lets this much pile up unread is dropped rather than allowed to eat memory
MAX_OUTBOX_BYTES: Final = 64 * 1024 * 1024
JOIN_TIMEOUT_S: Final = 5.0
#: a connection silent both ways this long is closed: the broker's serverChannelMaxIdleTimeSeconds
DEFAULT_IDLE_TIMEOUT_S: Final = 120.0
#: how often the I/O loop looks for idle connections (and, at the latest, notices a stop)
IDLE_CHECK_S: Final = 0.5
#: threads handling requests; a connection's requests stay in order (one worker at a time)
DEFAULT_WORKERS: Final = 8
#: requests a worker handles for one connection before letting others have a turn
WORKER_BATCH: Final = 32
#: decoded requests a connection may have waiting before the server stops reading from it
MAX_PENDING_REQUESTS: Final = 256
#: long-polled pulls parked at once; beyond that a pull is answered at once (not found)
MAX_HELD_PULLS: Final = 10_000
#: accepting pauses this long, doubling up to the maximum, while the process is out of descriptors
ACCEPT_BACKOFF_MIN_S: Final = 0.05
ACCEPT_BACKOFF_MAX_S: Final = 1.0
#: at most one "accept failed" line per this many seconds
ACCEPT_LOG_INTERVAL_S: Final = 10.0
#: heap trims after dropping a peer are at most this frequent
TRIM_INTERVAL_S: Final = 1.0
_OUT_OF_FDS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: first byte of a TLS ClientHello record; anything else on a TLS server is plaintext (permissive)
TLS_HANDSHAKE_RECORD: Final = 0x16
WILDCARD_BINDS: Final = frozenset({"", "0.0.0.0", "::"})

#: the topic producers fall back to for unknown topics; brokers create it with 8 queues, perm 7
DEFAULT_TOPIC: Final = "TBW102"
DEFAULT_TOPIC_QUEUES: Final = 8
DEFAULT_TOPIC_PERM: Final = 7
DEFAULT_NEW_TOPIC_QUEUES: Final = 4
RETRY_TOPIC_QUEUES: Final = 1
PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_READ_WRITE: Final = PERM_READ | PERM_WRITE
MASTER_ID: Final = 0
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
#: message properties are written with a 2-byte length (the broker's PROPERTIES_SIZE_EXCEEDED)
MAX_PROPERTIES_SIZE: Final = 32767
#: read/write queue numbers UPDATE_AND_CREATE_TOPIC accepts. A real broker has no cap (only
#: auto-created topics are capped, at defaultTopicQueueNums); the mock caps them so that one
#: request cannot make every later stats or route request slow (an mqadmin limit).
MAX_QUEUE_NUMS: Final = 1024
#: queues a per-queue request (topic stats) reads under the server lock before letting others in
LOCK_SLICE_QUEUES: Final = 64
#: Java header fields are int or long; a value outside them fails Java's parse
INT32_RANGE: Final = (-(2**31), 2**31 - 1)
INT64_RANGE: Final = (-(2**63), 2**63 - 1)
DEFAULT_MAX_RECONSUME_TIMES: Final = 16
#: orderly consumers' queue locks expire after this long without renewal (REBALANCE_LOCK_MAX_LIVE_TIME)
LOCK_LIVE_S: Final = 60.0

# PullSysFlag bits (§2.5)
PULL_COMMIT_OFFSET: Final = 0x1
PULL_SUSPEND: Final = 0x2
PULL_SUBSCRIPTION: Final = 0x4

SUBSCRIBE_ALL: Final = "*"
TAG_SEPARATOR: Final = "||"
EXPRESSION_TAG: Final = "TAG"
EXPRESSION_SQL92: Final = "SQL92"

# Enum names by ordinal, for the C++ client's heartbeats (§8.2).
CONSUME_TYPES: Final = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS: Final = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE: Final = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)

#: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE one-letter keys -> SEND_MESSAGE names (§2.5)
SEND_V2_KEYS: Final[Mapping[str, str]] = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}

#: what Java appends to some remarks (FAQUrl.suggestTodo): one address per major version
FAQ_SUFFIX_V4: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
FAQ_SUFFIX_V5: Final = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
#: properties the broker stamps on stored messages (seen on real 4.9.8 and 5.3.3 brokers)
PROPERTY_CLUSTER: Final = "CLUSTER"
PROPERTY_WAIT: Final = "WAIT"
V5_STORED_PROPERTIES: Final[Mapping[str, str]] = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
#: heartbeat V2 (lite heartbeats keyed by a subscription fingerprint) is advertised from here
HEARTBEAT_V2_SINCE: Final = (5, 1, 1)

_MISSING: Final = object()


def _bad(code: int, remark: str) -> errors.BrokerError:
    """An error reply raised from inside a handler; the dispatcher turns it into a response."""
    return errors.BrokerError.for_code(int(code), remark)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _host_port(addr: tuple[Any, ...] | str) -> str:
    if isinstance(addr, str):
        return addr
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


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


class _RateLimitedLog:
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


# ---------------------------------------------------------------------------------------------
# Transports: plaintext, or TLS done in memory so reader and writer threads never share an SSL object


class _Plain:
    def inbound(self, data: bytes) -> tuple[bytes, bytes]:
        """(plaintext for the decoder, raw bytes to send back)."""
        return data, b""

    def outbound(self, data: bytes) -> bytes:
        return data


class _Tls(_Plain):
    """Server-side TLS over memory BIOs; the caller serialises calls (one lock per connection)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=True)
        self._ready = False

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


# ---------------------------------------------------------------------------------------------
# Connections


class _Connection:
    """One accepted socket. The server's I/O loop reads and writes it (never blocking); its
    requests queue in ``pending`` and are handled in order by one pool worker at a time."""

    def __init__(self, server: MockServer, sock: socket.socket, role: _Role, peer: str) -> None:
        self.server = server
        self.sock = sock
        self.role = role
        self.peer = peer
        self.closed = threading.Event()
        #: (broker name, group, client id) registered through heartbeats on this connection
        self.registrations: set[tuple[str, str, str]] = set()
        self.last_active = time.monotonic()
        #: requests decoded but not yet handled, and whether a worker owns them (both under _lock)
        self.pending: deque[RemotingCommand] = deque()
        self.scheduled = False
        #: reading stops while too many requests wait (the peer then feels TCP back-pressure)
        self.paused = False
        self._transport: _Plain | None = None
        self._lock = threading.Lock()
        self._outbox: deque[bytes] = deque()
        self._out_pos = 0
        self._queued = 0
        self._decoder: FrameDecoder | None = FrameDecoder()

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one frame (always a JSON header, type byte 0: C++ and ali-ons read nothing else)."""
        if self.closed.is_set():
            return
        frame = encode(cmd)
        failed = False
        with self._lock:
            transport = self._transport or _Plain()
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
            self.server._want_write(self)

    def _enqueue(self, raw: bytes) -> bool:
        """Add to the outbox (caller holds _lock); True when the peer must be cut for not reading."""
        if not raw:
            return False
        self._queued += len(raw)
        if self._queued > MAX_OUTBOX_BYTES:
            return True
        self._outbox.append(raw)
        return False

    def _cut(self) -> None:
        log.warning("dropping %s: %d bytes of replies left unread", self.peer, self._queued)
        self.close()
        self.server._release_memory()

    @property
    def wants_write(self) -> bool:
        return bool(self._outbox)

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
        try:
            with self._lock:
                if self._transport is None:
                    self._transport = self.server._transport_for(data[0])
                plain, raw = self._transport.inbound(data)
                cut = self._enqueue(raw)
            if cut:
                self._cut()
                return []
            assert self._decoder is not None
            return self._decoder.feed(plain)
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
            with self._lock:  # held across the send: a worker sending directly must not overtake us
                if not self._outbox:
                    return
                chunk = self._outbox[0]
                pos = self._out_pos
                try:
                    sent = self.sock.send(memoryview(chunk)[pos:])
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    sent = -1
                if sent < 0:
                    self._outbox.clear()
                    self._queued = 0
            if sent < 0:
                self.close()
                return
            self.last_active = time.monotonic()
            with self._lock:
                self._queued -= sent
                if pos + sent >= len(chunk):
                    self._outbox.popleft()
                    self._out_pos = 0
                else:
                    self._out_pos = pos + sent
                    return

    def release(self) -> None:
        """Forget buffered bytes and requests once closed, so a cut peer's memory goes at once."""
        with self._lock:
            self._outbox.clear()
            self._queued = 0
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
        self.server._closing(self)


# ---------------------------------------------------------------------------------------------
# Roles: what a listener answers


Handler = Callable[[_Connection, RemotingCommand], RemotingCommand | None]


class _Role:
    """A listener's personality: its request handlers, keyed by request code."""

    name: str
    handlers: dict[int, Handler]
    #: a 4.x name server answers nothing at all to a code it does not know
    answers_unknown: bool = True

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.handlers = {}

    @property
    def ordinal(self) -> int:
        return self.server.version_ordinal

    def reply(
        self,
        req: RemotingCommand,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        empty_ext: bool = False,
    ) -> RemotingCommand:
        """A reply stamped with the server's own version, as Java servers stamp theirs."""
        out = req.reply(code, remark, ext, body, version=self.ordinal)
        out.keep_empty_ext_fields = empty_ext
        return out

    def check_access(self, req: RemotingCommand) -> str | None:
        """None when the request may proceed, else the NO_PERMISSION remark."""
        return None


class _NamesrvRole(_Role):
    """The name server: routes, cluster info, topic list; the KV store is always empty."""

    name = "namesrv"

    def __init__(self, server: MockServer) -> None:
        super().__init__(server)
        self.answers_unknown = server.v5
        self.handlers = {
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
            RequestCode.GET_KV_CONFIG: self.kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_list,
            RequestCode.REGISTER_BROKER: self.accept,
            RequestCode.UNREGISTER_BROKER: self.accept,
        }

    def route(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic = req.ext_str("topic") or ""
        with self.server.lock:
            route = self.server.cluster.topic_route(topic) or self._implicit_route(topic)
        if route is None:
            remark = f"No topic route info in name server for the topic: {topic}"
            raise _bad(ResponseCode.TOPIC_NOT_EXIST, self.server.faq(remark))
        # §2.3: standard JSON from 4.9.4 on, when the client is new enough or asks for it.
        standard = self.server.version_ordinal >= MQVersion.V4_9_4 and (
            req.version >= MQVersion.V4_9_4 or bool(req.ext_bool("acceptStandardJsonOnly", False))
        )
        return self.reply(req, body=_route_body(route, standard=standard, v5=self.server.v5))

    def _implicit_route(self, topic: str) -> TopicRoute | None:
        """Routes a real cluster has before anyone asks: TBW102, and retry topics (§8.4, gotcha 19).

        Brokers create ``%RETRY%group`` on the first heartbeat, but clients ask for its route
        before they send one; answering with every broker lets them start without a 30 s wait.
        """
        if topic == DEFAULT_TOPIC:
            queues, perm = DEFAULT_TOPIC_QUEUES, DEFAULT_TOPIC_PERM
        elif topic.startswith(RETRY_PREFIX) and len(topic) > len(RETRY_PREFIX):
            queues, perm = RETRY_TOPIC_QUEUES, PERM_READ_WRITE
        else:
            return None
        cluster = self.server.cluster
        brokers = tuple(BrokerData(b.name, b.cluster, {MASTER_ID: b.addr}) for b in cluster.brokers.values())
        datas = tuple(QueueData(b.name, queues, queues, perm, 0) for b in cluster.brokers.values())
        return TopicRoute(topic, brokers, datas)

    def cluster_info(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        cluster = self.server.cluster
        table: dict[str, Any] = {}
        for b in cluster.brokers.values():
            table[b.name] = _broker_data_json(b.name, b.cluster, b.addr, v5=self.server.v5)
        names: dict[str, list[str]] = {}
        for b in cluster.brokers.values():
            names.setdefault(b.cluster, []).append(b.name)
        doc = {"brokerAddrTable": table, "clusterAddrTable": {c: sorted(n) for c, n in names.items()}}
        return self.reply(req, body=fastjson.dumps(doc).encode())  # never standardised (gotcha 5)

    def topic_list(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        with self.server.lock:
            topics = self.server.cluster.list_topics()
        return self.reply(req, body=fastjson.dumps({"topicList": topics}).encode())

    def kv_config(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        ns, key = req.ext_str("namespace"), req.ext_str("key")
        return self.reply(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")

    def kv_list(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        ns = req.ext_str("namespace")
        return self.reply(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")

    def accept(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """Broker (un)registration: the cluster's brokers are fixed, so there is nothing to record."""
        return self.reply(req)


def _broker_data_json(name: str, cluster: str, addr: str, *, v5: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"brokerAddrs": {MASTER_ID: addr}, "brokerName": name, "cluster": cluster}
    if v5:
        data["enableActingMaster"] = False
    return data


def _route_body(route: TopicRoute, *, standard: bool, v5: bool) -> bytes:
    """TopicRouteData; standard JSON quotes broker-id keys and escapes non-ASCII (§2.3, §3.2)."""
    brokers = [
        {**_broker_data_json(b.broker_name, b.cluster, "", v5=v5), "brokerAddrs": dict(sorted(b.addrs.items()))}
        for b in sorted(route.brokers, key=lambda b: b.broker_name)
    ]
    queues = [
        {
            "brokerName": q.broker_name,
            "perm": q.perm,
            "readQueueNums": q.read_queue_nums,
            "topicSysFlag": q.topic_sys_flag,
            "writeQueueNums": q.write_queue_nums,
        }
        for q in sorted(route.queues, key=lambda q: q.broker_name)
    ]
    doc: dict[str, Any] = {"brokerDatas": brokers, "filterServerTable": {}, "queueDatas": queues}
    if standard:
        for b in brokers:
            b["brokerAddrs"] = {str(k): v for k, v in b["brokerAddrs"].items()}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return fastjson.dumps(doc).encode()


@dataclass
class _PullParams:
    group: str
    topic: str
    queue_id: int
    offset: int
    max_nums: int
    sys_flag: int
    tags: set[str] | None


@dataclass(eq=False)
class _HeldPull:
    conn: _Connection
    req: RemotingCommand
    role: _BrokerRole
    params: _PullParams
    deadline: float
    #: answer once the queue grows past this offset
    watermark: int


class _BrokerRole(_Role):
    """One broker of the cluster: every broker request a client or admin tool sends (§2.4-2.6)."""

    def __init__(self, server: MockServer, broker: MockBroker) -> None:
        super().__init__(server)
        self.broker = broker
        self.name = broker.name
        #: (group, queue) -> (client id, monotonic time of the last lock)
        self.locks: dict[tuple[str, MessageQueue], tuple[str, float]] = {}
        #: (group, client id) -> topic -> SubscriptionData as the heartbeat described it
        self.subscriptions: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._reset_request: tuple[int, bool] = (-1, False)
        self.handlers = {
            RequestCode.SEND_MESSAGE: self.send,
            RequestCode.SEND_MESSAGE_V2: self.send,
            RequestCode.SEND_BATCH_MESSAGE: self.send,
            RequestCode.PULL_MESSAGE: self.pull,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_store_time,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_consumer_offsets,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.subscription_groups,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_TOPIC_CONFIG: self.topic_config,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consume_by_who,
        }

    # -- helpers -----------------------------------------------------------------------------

    @property
    def lock(self) -> threading.RLock:
        return self.server.lock

    def check_access(self, req: RemotingCommand) -> str | None:
        acl = self.server.acl
        if acl is None:
            return None
        access_key, secret_key = acl
        sent = req.ext_fields.get(acl_sign.ACCESS_KEY)
        major = self.server.v[0] if self.server.v else 5
        # the refusals as a 4.9 PlainAccessValidator and a 5.3 DefaultAuthenticationHandler word them
        if not sent:
            return "No accessKey is configured" if major < 5 else "username cannot be null."
        if sent != access_key:
            return f"No acl config for {sent}" if major < 5 else f"User:{sent} is not found."
        exclude = acl_sign.server_unsigned_fields(req.version, server_major=major)
        if not acl_sign.verify(req.ext_fields, req.body, secret_key, exclude=exclude):
            return f"Check signature failed for accessKey={sent}" if major < 5 else "check signature failed."
        return None

    @staticmethod
    def _str(req: RemotingCommand, name: str) -> str:
        value = req.ext_str(name)
        if value is None:
            raise _bad(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
        return value

    @staticmethod
    def _int(req: RemotingCommand, name: str, default: int | object = _MISSING, *, long: bool = False) -> int:
        """An int (or ``long``) header field; out of the Java type's range is refused as Java's
        header decoding would fail it (SYSTEM_ERROR, RemotingCommand.decodeCommandCustomHeader)."""
        value = req.ext_int(name)
        if value is None:
            if default is _MISSING:
                raise _bad(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
            assert isinstance(default, int)
            return default
        low, high = INT64_RANGE if long else INT32_RANGE
        if not low <= value <= high:
            kind = "long" if long else "int"
            raise _bad(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is not a Java {kind}: {value}")
        return value

    def _check_topic(self, topic: str) -> None:
        """TopicValidator.validateTopic as the send and create-topic paths apply it
        (AbstractSendMessageProcessor.msgCheck, AdminBrokerProcessor.updateAndCreateTopic):
        SYSTEM_ERROR up to 5.3.1, INVALID_PARAMETER from 5.3.2."""
        problem = names.topic_problem(topic)
        if problem:
            code = ResponseCode.INVALID_PARAMETER if self.server.v >= (5, 3, 2) else ResponseCode.SYSTEM_ERROR
            raise _bad(code, problem)

    def _check_group(self, group: str, remark: str) -> None:
        """A group name that fails TopicValidator.validateGroup is a group that cannot exist:
        SubscriptionGroupManager.findSubscriptionGroupConfig will not create it, so the broker
        answers SUBSCRIPTION_GROUP_NOT_EXIST with the handler's own ``remark``."""
        if names.group_problem(group):
            raise _bad(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, self.server.faq(remark))

    def _check_queue_id(self, topic: str, queue_id: int) -> None:
        if not 0 <= queue_id < MAX_QUEUE_NUMS:
            code = ResponseCode.INVALID_PARAMETER if self.server.v5 else ResponseCode.SYSTEM_ERROR
            raise _bad(code, f"queueId[{queue_id}] is illegal, topic:[{topic}]")

    def _topic_config(self, topic: str) -> dict[str, Any]:
        cfg = self.broker.topic_config(topic)
        if cfg is None:
            raise _bad(ResponseCode.TOPIC_NOT_EXIST, self.server.faq(f"topic[{topic}] not exist, apply first please!"))
        return cfg

    def _queue_args(self, req: RemotingCommand) -> tuple[str, int]:
        """(topic, queueId) of an offset request. Brokers do not check these names; a name that
        could not be a folder is refused here instead of reaching the store (an mqadmin check)."""
        topic, queue_id = self._str(req, "topic"), self._int(req, "queueId")
        self._check_topic(topic)
        self._check_queue_id(topic, queue_id)
        return topic, queue_id

    # -- messages ----------------------------------------------------------------------------

    def send(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        if req.code == RequestCode.SEND_MESSAGE:
            header = dict(req.ext_fields)
        else:
            header = {SEND_V2_KEYS.get(k, k): v for k, v in req.ext_fields.items()}
        probe = RemotingCommand(code=req.code, ext_fields=header)
        topic = self._str(probe, "topic")
        self._check_topic(topic)
        qid = self._int(probe, "queueId", -1)
        sys_flag = self._int(probe, "sysFlag", 0)
        born = self._int(probe, "bornTimestamp", 0, long=True)
        reconsume = self._int(probe, "reconsumeTimes", 0)
        self._int(probe, "defaultTopicQueueNums", DEFAULT_NEW_TOPIC_QUEUES)
        # Stored as Java stores them: UTF-8, a lone surrogate as "?"
        props = parse_properties((header.get("properties") or "").encode("utf-8", "replace").decode("utf-8"))
        if req.code == RequestCode.SEND_BATCH_MESSAGE:
            items = [(flag, body, {**props, **own}) for flag, body, own in _split_batch(req.body)]
        else:
            items = [(self._int(probe, "flag", 0), req.body, props)]
        if not items:
            raise _bad(ResponseCode.MESSAGE_ILLEGAL, "the message batch is empty")
        for _, body, message_props in items:
            if len(body) > MAX_MESSAGE_SIZE:
                raise _bad(
                    ResponseCode.MESSAGE_ILLEGAL, f"the message body size over max value, MAX: {MAX_MESSAGE_SIZE}"
                )
            if len(format_properties(message_props).encode()) > MAX_PROPERTIES_SIZE:
                # SendMessageProcessor.handlePutMessageResult, PROPERTIES_SIZE_EXCEEDED
                raise _bad(
                    ResponseCode.MESSAGE_ILLEGAL,
                    "the message is illegal, maybe msg body or properties length not matched. "
                    f"msg body length limit {MAX_MESSAGE_SIZE}B, msg properties length limit 32KB.",
                )
        with self.lock:
            cfg = self.broker.topic_config(topic)
            if cfg is None:
                # autoCreateTopicEnable: the topic takes the producer's default queue count
                wanted = self._int(probe, "defaultTopicQueueNums", DEFAULT_NEW_TOPIC_QUEUES)
                self.broker.create_topic(topic, min(max(wanted, 1), DEFAULT_TOPIC_QUEUES))
                cfg = self._topic_config(topic)
            if not int(cfg.get("perm", PERM_READ_WRITE)) & PERM_WRITE:
                raise _bad(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
            write_queues = int(cfg["writeQueueNums"])
            if qid >= max(write_queues, int(cfg["readQueueNums"])) or (qid < 0 and write_queues <= 0):
                # AbstractSendMessageProcessor.msgCheck
                raise _bad(
                    ResponseCode.INVALID_PARAMETER,
                    f"request queueId[{qid}] is illegal, {_topic_config_text(cfg)} Producer: {conn.peer}",
                )
            if qid < 0:
                qid = random.randrange(write_queues)
            stored: list[Message] = []
            for flag, body, message_props in items:
                message_props.setdefault(PROPERTY_CLUSTER, self.broker.cluster)
                if self.server.v5:
                    for key, value in V5_STORED_PROPERTIES.items():
                        message_props.setdefault(key, value)
                else:
                    message_props.pop(PROPERTY_WAIT, None)  # 4.x does not store it
                msg = Message(
                    topic=topic,
                    body=body,
                    properties=message_props,
                    flag=flag,
                    queue_id=qid,
                    sys_flag=sys_flag,
                    born_timestamp=born,
                    born_host=conn.peer,
                    reconsume_times=reconsume,
                )
                try:
                    stored.append(self.broker.put_message(msg))
                except StoreWriteFailed as exc:
                    raise self._store_unavailable(exc) from None
        self.server.count("messages_stored", len(stored))
        self.server.message_arrived(self.name, topic, qid)
        ext: dict[str, object] = {
            "msgId": ",".join(m.msg_id for m in stored),
            "queueId": qid,
            "queueOffset": stored[0].queue_offset,
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        uniq = stored[0].uniq_key if len(stored) == 1 else None
        if uniq and self.server.v5:  # 4.x leaves it out for plain messages
            ext["transactionId"] = uniq
        return self.reply(req, ext=ext)

    def _store_unavailable(self, exc: StoreWriteFailed) -> errors.BrokerError:
        """What a put that the store could not write answers: SERVICE_NOT_AVAILABLE with the
        disk-full remark (SendMessageProcessor.handlePutMessageResult); the store has rolled
        back to its last whole record, so the next send may succeed."""
        log.warning("broker %s could not store a message: %s", self.name, exc)
        try:
            usage = shutil.disk_usage(self.broker.store.root)
            used = 100.0 * (usage.total - usage.free) / usage.total if usage.total else 100.0
        except OSError:
            used = 100.0
        ratios = f"CL: {used:5.2f} CQ: {used:5.2f} INDEX: {used:5.2f}"
        return _bad(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full [{ratios}], messages are put to the slave, message store has been shut down, etc.",
        )

    def pull(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand | None:
        """PULL_MESSAGE with §5.3's status mapping; PULL_NOT_FOUND with SUSPEND is held (long polling)."""
        params = _PullParams(
            group=self._str(req, "consumerGroup"),
            topic=self._str(req, "topic"),
            queue_id=self._int(req, "queueId"),
            offset=self._int(req, "queueOffset", long=True),
            max_nums=max(self._int(req, "maxMsgNums", 32), 1),
            sys_flag=self._int(req, "sysFlag", 0),
            tags=None,
        )
        # PullMessageProcessor: a group that cannot exist, then a topic that cannot exist
        self._check_group(params.group, f"subscription group [{params.group}] does not exist,")
        if names.topic_problem(params.topic):
            remark = f"topic[{params.topic}] not exist, apply first please!"
            raise _bad(ResponseCode.TOPIC_NOT_EXIST, self.server.faq(remark))
        self.server.count("pulls")
        with self.lock:
            cfg = self._topic_config(params.topic)
            if not int(cfg.get("perm", PERM_READ_WRITE)) & PERM_READ:
                raise _bad(ResponseCode.NO_PERMISSION, f"the topic[{params.topic}] pulling message is forbidden")
            read_queues = int(cfg["readQueueNums"])
            if not 0 <= params.queue_id < read_queues:
                code = ResponseCode.INVALID_PARAMETER if self.server.v5 else ResponseCode.SYSTEM_ERROR
                raise _bad(
                    code,
                    f"queueId[{params.queue_id}] is illegal, topic:[{params.topic}] "
                    f"topicConfig.readQueueNums:[{read_queues}] consumer:[/{conn.peer}]",
                )
            params.tags = self._pull_filter(req, params)
            if params.sys_flag & PULL_COMMIT_OFFSET:
                # Before the read, so a pending server-side reset wins over the client's stale offset.
                commit = self._int(req, "commitOffset", -1, long=True)
                if commit >= 0:
                    if params.group not in self.broker.groups:
                        # Java's pull auto-creates the group config; commits here skip 5.3's group check.
                        self.broker.ensure_group(params.group)
                    with contextlib.suppress(errors.BrokerError):
                        self.broker.update_consumer_offset(params.group, params.topic, params.queue_id, commit)
            outcome = self._read(params)
        suspend_ms = min(self._int(req, "suspendTimeoutMillis", 0, long=True), MAX_SUSPEND_MS)
        if (
            _pull_code(outcome.status, params.offset) == ResponseCode.PULL_NOT_FOUND
            and params.sys_flag & PULL_SUSPEND
            and suspend_ms > 0
        ):
            if self.server._hold(conn, req, self, params, time.monotonic() + suspend_ms / 1000):
                return None
        return self.pull_reply(req, params, outcome)

    def _pull_filter(self, req: RemotingCommand, params: _PullParams) -> set[str] | None:
        """Tags to keep (None = all), from the request or from the group's heartbeat."""
        if params.sys_flag & PULL_SUBSCRIPTION:
            expression_type = (req.ext_str("expressionType") or EXPRESSION_TAG).upper()
            if expression_type == EXPRESSION_SQL92:
                raise _bad(ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
            return _parse_tags(req.ext_str("subscription") or SUBSCRIBE_ALL)
        clients = self.broker.online_clients(params.group)
        if not clients:
            raise _bad(ResponseCode.SUBSCRIPTION_NOT_EXIST, self.server.faq("the consumer's group info not exist"))
        expression = next((c.subscriptions[params.topic] for c in clients if params.topic in c.subscriptions), None)
        if expression is None:
            raise _bad(ResponseCode.SUBSCRIPTION_NOT_EXIST, self.server.faq("the consumer's subscription not exist"))
        return _parse_tags(expression)

    def _read(self, params: _PullParams) -> PullOutcome:
        return self.broker.pull(
            params.group, params.topic, params.queue_id, params.offset, params.max_nums, params.tags
        )

    def read_held(self, params: _PullParams) -> PullOutcome:
        with self.lock:
            return self._read(params)

    def pull_reply(self, req: RemotingCommand, params: _PullParams, outcome: PullOutcome) -> RemotingCommand:
        code = _pull_code(outcome.status, params.offset)
        ext: dict[str, object] = {
            "nextBeginOffset": outcome.next_begin_offset,
            "minOffset": outcome.min_offset,
            "maxOffset": outcome.max_offset,
            "suggestWhichBrokerId": MASTER_ID,
        }
        if self.server.v5:
            ext["topicSysFlag"] = 0
            ext["groupSysFlag"] = 0
        body = b"".join(outcome.records) if code == ResponseCode.SUCCESS else b""
        return self.reply(req, code, outcome.status, ext, body)

    def view_message(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        offset = self._int(req, "offset", long=True)
        if offset < 0:  # what selectOneMessageByOffset's null becomes (QueryMessageProcessor)
            raise _bad(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        with self.lock:
            msg = self.broker.message_at(offset)
        return self.reply(req, body=encode_message(msg))

    def send_back(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        group = self._str(req, "group")
        offset = self._int(req, "offset", long=True)
        delay = self._int(req, "delayLevel", 0)
        # AbstractSendMessageProcessor.consumerSendMsgBack: no group config, no retry topic
        self._check_group(group, f"subscription group not exist, {group} ")
        if offset < 0:
            raise _bad(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        with self.lock:
            self.broker.ensure_group(group)  # findSubscriptionGroupConfig auto-creates it
            max_times = self._int(req, "maxReconsumeTimes", -1)
            if req.version < MQVersion.V3_4_9 or max_times < 0:
                max_times = int(self.broker.groups[group].get("retryMaxTimes", DEFAULT_MAX_RECONSUME_TIMES))
            try:
                copy = self.broker.send_back(group, offset, delay, max_times)
            except StoreWriteFailed as exc:
                raise self._store_unavailable(exc) from None
        self.server.count("messages_stored")
        self.server.message_arrived(self.name, copy.topic, copy.queue_id)
        return self.reply(req)

    # -- offsets -----------------------------------------------------------------------------

    def query_consumer_offset(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        group = self._str(req, "consumerGroup")
        topic, qid = self._queue_args(req)
        zero = req.ext_bool("setZeroIfNotFound")
        with self.lock:
            offset = self.broker.query_consumer_offset(group, topic, qid, zero)
        return self.reply(req, ext={"offset": offset})

    def update_consumer_offset(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        group = self._str(req, "consumerGroup")
        topic = self._str(req, "topic")
        qid, offset = req.ext_int("queueId"), req.ext_int("commitOffset")
        if qid is None or offset is None:
            missing = "queueId" if qid is None else "commitOffset"
            code = ResponseCode.INVALID_PARAMETER if self.server.v >= (5, 3, 2) else ResponseCode.SYSTEM_ERROR
            raise _bad(code, f"the custom field <{missing}> is null")
        qid, offset = self._int(req, "queueId"), self._int(req, "commitOffset", long=True)
        # ConsumerManageProcessor (5.3): a group or topic that cannot exist
        self._check_group(group, f"subscription group not exist, {group}")
        if names.topic_problem(topic):
            raise _bad(ResponseCode.TOPIC_NOT_EXIST, f"topic not exist, {topic}")
        self._check_queue_id(topic, qid)
        with self.lock:
            remark = self.broker.update_consumer_offset(group, topic, qid, offset)
            version = self.broker.offsets_version
        if not req.is_oneway:  # consumers' periodic commits are oneway: no ack to honour, the flush takes them
            self._persist_offsets(version)
        return self.reply(req, remark=remark or None, empty_ext=True)

    def search_offset(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic, qid = self._queue_args(req)
        ts = self._int(req, "timestamp", long=True)
        boundary = "LOWER"
        if self.server.v >= (5, 1, 4):  # the header field exists from 5.1.4
            boundary = (req.ext_str("boundaryType") or "LOWER").upper()
        with self.lock:
            offset = self.broker.search_offset(topic, qid, ts, boundary)
        return self.reply(req, ext={"offset": offset})

    def max_offset(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic, qid = self._queue_args(req)
        with self.lock:
            return self.reply(req, ext={"offset": self.broker.max_offset(topic, qid)})

    def min_offset(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic, qid = self._queue_args(req)
        with self.lock:
            return self.reply(req, ext={"offset": self.broker.min_offset(topic, qid)})

    def earliest_store_time(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic, qid = self._queue_args(req)
        with self.lock:
            return self.reply(req, ext={"timestamp": self.broker.earliest_store_time(topic, qid)})

    def all_consumer_offsets(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """The consumer-offset manager's JSON, compact (§2.4). Java encodes even an empty table."""
        with self.lock:
            table = {k: dict(sorted(v.items())) for k, v in sorted(self.broker.offsets.items())}
        doc: dict[str, Any] = {}
        if self.server.v5:
            topics_by_group: dict[str, set[str]] = {}
            for key in table:
                topic, _, group = key.partition("@")
                topics_by_group.setdefault(group, set()).add(topic)
            doc["dataVersion"] = _data_version()
            doc["groupTopicMap"] = {g: sorted(t) for g, t in sorted(topics_by_group.items())}
        doc["offsetTable"] = table
        return self.reply(req, body=fastjson.dumps(doc).encode())

    # -- topics and groups -------------------------------------------------------------------

    def create_topic(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC (what ``mqadmin updateTopic`` sends), so Java tools can set up tests."""
        topic = self._str(req, "topic")
        self._check_topic(topic)
        read = self._int(req, "readQueueNums", DEFAULT_NEW_TOPIC_QUEUES)
        write = self._int(req, "writeQueueNums", read)
        perm = self._int(req, "perm", PERM_READ_WRITE)
        for field_name, value in (("readQueueNums", read), ("writeQueueNums", write)):
            if not 0 <= value <= MAX_QUEUE_NUMS:
                raise _bad(
                    ResponseCode.INVALID_PARAMETER,
                    f"{field_name} {value} is out of range: the mock broker allows 0..{MAX_QUEUE_NUMS} queues",
                )
        if not 0 <= perm <= PERM_READ_WRITE | 0x1:
            raise _bad(ResponseCode.INVALID_PARAMETER, f"perm {perm} is not a permission (0..7)")
        with self.lock:
            self.broker.create_topic(topic, read, write, perm)
        return self.reply(req)

    def create_group(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the group gets the broker's default config."""
        try:
            data = fastjson.loads(req.body)
            group = str(data["groupName"])
        except (ValueError, KeyError, TypeError):
            raise _bad(ResponseCode.SYSTEM_ERROR, "the request body is not a SubscriptionGroupConfig") from None
        problem = names.group_problem(group)
        if problem:  # AdminBrokerProcessor.updateAndCreateSubscriptionGroup (TopicValidator.validateGroup)
            raise _bad(ResponseCode.INVALID_PARAMETER, problem)
        with self.lock:
            self.broker.ensure_group(group)
        return self.reply(req)

    def subscription_groups(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        with self.lock:
            groups = {name: dict(cfg) for name, cfg in sorted(self.broker.groups.items())}
        if self.server.v5:
            for cfg in groups.values():
                for key, default in _GROUP_DEFAULTS_V5.items():
                    cfg.setdefault(key, default)
        doc: dict[str, Any] = {"dataVersion": _data_version()}
        if self.server.v5:
            doc["forbiddenTable"] = {}
        doc["subscriptionGroupTable"] = {name: dict(sorted(cfg.items())) for name, cfg in groups.items()}
        ext = {"totalGroupNum": len(groups)} if self.server.v >= (5, 3) else None
        return self.reply(req, ext=ext, body=fastjson.dumps(doc).encode())

    def topic_stats(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic = self._str(req, "topic")
        table: dict[MessageQueue, dict[str, int]] = {}
        with self.lock:
            cfg = self.broker.topic_config(topic)
            if cfg is None:
                raise _bad(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
            queues = int(cfg["writeQueueNums"])
        for first in range(0, queues, LOCK_SLICE_QUEUES):
            # A slice at a time: a wide topic must not keep a route request waiting for all of it.
            with self.lock:
                for qid in range(first, min(first + LOCK_SLICE_QUEUES, queues)):
                    lo, hi = self.broker.min_offset(topic, qid), self.broker.max_offset(topic, qid)
                    last = self.broker.store_time_at(topic, qid, hi - 1) if hi > 0 else None
                    table[MessageQueue(topic, self.name, qid)] = {
                        "lastUpdateTimestamp": last or 0,
                        "maxOffset": max(hi, 0),
                        "minOffset": max(lo, 0),
                    }
        doc = {"offsetTable": table, "topicPutTps": 0.0}
        return self.reply(req, body=fastjson.dumps(doc).encode())

    def topic_config(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (5.x only): the topic's config, as the 5.x Java tool reads it."""
        if not self.server.v5:
            return self.reply(req, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")
        topic = self._str(req, "topic")
        with self.lock:
            cfg = self.broker.topic_config(topic)
            if cfg is None:
                raise _bad(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
            doc = {"attributes": {}, **{k: v for k, v in sorted(cfg.items()) if k != "attributes"}}
        return self.reply(req, body=fastjson.dumps(dict(sorted(doc.items()))).encode())

    def consume_by_who(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic = self._str(req, "topic")
        with self.lock:
            groups = {
                g for g, members in self.broker.clients.items() for c in members.values() if topic in c.subscriptions
            }
            groups |= {k.partition("@")[2] for k in self.broker.offsets if k.partition("@")[0] == topic}
        return self.reply(req, body=fastjson.dumps({"groupList": sorted(groups)}).encode())

    def runtime_info(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """A KVTable like the broker's; the remoting backend learns the version from it."""
        stats = self.server.stats()
        uptime_s = int(time.monotonic() - self.server.started_monotonic)
        days, rest = divmod(uptime_s, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        with self.lock:
            commitlog_max = self.broker.store.commitlog.write_position()
            commitlog_min = self.broker.store.commitlog.min_offset
        table = {
            "bootTimestamp": str(self.server.started_ms),
            "brokerVersion": str(self.ordinal),
            "brokerVersionDesc": version_name(self.ordinal),
            "commitLogMaxOffset": str(commitlog_max),
            "commitLogMinOffset": str(commitlog_min),
            "msgGetTotalTodayNow": str(stats.get("pulls", 0)),
            "msgPutTotalTodayNow": str(stats.get("messages_stored", 0)),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
        }
        return self.reply(req, body=fastjson.dumps({"table": table}).encode())

    # -- clients -----------------------------------------------------------------------------

    def heartbeat(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        try:
            data = fastjson.loads(req.body)
            client_id = str(data["clientID"])
            consumers = list(data.get("consumerDataSet") or [])
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _bad(ResponseCode.SYSTEM_ERROR, "the heartbeat body is not HeartbeatData") from None
        without_sub = bool(data.get("withoutSub"))
        changed: list[str] = []
        sub_changed = False
        with self.lock:
            for consumer in consumers:
                if not isinstance(consumer, Mapping) or not consumer.get("groupName"):
                    continue
                group = str(consumer["groupName"])
                if names.group_problem(group):
                    continue  # ClientManageProcessor skips a group findSubscriptionGroupConfig refuses
                subs = {
                    str(s["topic"]): _subscription_json(s)
                    for s in consumer.get("subscriptionDataSet") or []
                    if isinstance(s, Mapping) and s.get("topic")
                }
                known_subs = self.subscriptions.get((group, client_id))
                if without_sub and not subs:  # a 5.x "lite" heartbeat: the subscription is unchanged
                    subs = known_subs or {}
                    sub_changed |= known_subs is None  # unknown to us: ask for a full heartbeat
                else:
                    sub_changed |= known_subs is None or _sub_strings(known_subs) != _sub_strings(subs)
                known = {c.client_id for c in self.broker.online_clients(group)}
                info = ClientInfo(
                    client_id=client_id,
                    group=group,
                    addr=conn.peer,
                    language=req.language,
                    version=req.version,
                    consume_type=_enum_name(consumer.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"),
                    message_model=_enum_name(consumer.get("messageModel"), MESSAGE_MODELS, "CLUSTERING"),
                    consume_from_where=_enum_name(
                        consumer.get("consumeFromWhere"), CONSUME_FROM_WHERE, CONSUME_FROM_WHERE[0]
                    ),
                    subscriptions={t: str(s["subString"]) for t, s in subs.items()},
                    on_reset=self._reset_pusher(conn, client_id, group, req.language, req.version),
                )
                self.broker.register_client(info)
                self.subscriptions[(group, client_id)] = subs
                self.server._bind_client(conn, self.name, group, client_id)
                if client_id not in known:
                    changed.append(group)
        for group in changed:
            self.notify_ids_changed(group)
        ext = None
        if self.server.v >= HEARTBEAT_V2_SINCE:
            ext = {"IS_SUPPORT_HEART_BEAT_V2": True, "IS_SUB_CHANGE": sub_changed}
        return self.reply(req, ext=ext)

    def unregister_client(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        client_id = self._str(req, "clientID")
        group = req.ext_str("consumerGroup")
        if group:
            self.forget_client(group, client_id)
        return self.reply(req, empty_ext=True)

    def forget_client(self, group: str, client_id: str, conn: _Connection | None = None) -> None:
        """Drop a client (on UNREGISTER_CLIENT, or when ``conn``, its connection, closed)."""
        with self.lock:
            if not self.server._unbind_client(self.name, group, client_id, conn):
                return
            self.broker.unregister_client(group, client_id)
            self.subscriptions.pop((group, client_id), None)
            for key in [k for k, (holder, _) in self.locks.items() if k[0] == group and holder == client_id]:
                del self.locks[key]
        if not self.server.stopping:
            self.notify_ids_changed(group)

    def notify_ids_changed(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to every member, so C++ consumers rebalance at once."""
        with self.lock:
            members = [c.client_id for c in self.broker.online_clients(group)]
        for client_id in members:
            target = self.server._client_connection(self.name, group, client_id)
            if target is not None:
                target.send(self.server.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))

    def consumer_list(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        group = self._str(req, "consumerGroup")
        with self.lock:
            ids = sorted(c.client_id for c in self.broker.online_clients(group))
        if not ids:
            raise _bad(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return self.reply(req, body=fastjson.dumps({"consumerIdList": ids}).encode())

    def consumer_connections(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        group = self._str(req, "consumerGroup")
        with self.lock:
            clients = sorted(self.broker.online_clients(group), key=lambda c: c.client_id)
            subs: dict[str, dict[str, Any]] = {}
            for c in clients:
                subs.update(self.subscriptions.get((group, c.client_id), {}))
        if not clients:
            raise _bad(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        last = clients[-1]
        doc = {
            "connectionSet": [
                {"clientAddr": c.addr, "clientId": c.client_id, "language": c.language, "version": c.version}
                for c in clients
            ],
            "consumeFromWhere": last.consume_from_where,
            "consumeType": last.consume_type,
            "messageModel": last.message_model,
            "subscriptionTable": dict(sorted(subs.items())),
        }
        return self.reply(req, body=fastjson.dumps(doc).encode())

    def lock_batch(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        client_id, group, mqs = _lock_body(req.body)
        now = time.monotonic()
        locked: list[MessageQueue] = []
        with self.lock:
            for mq in mqs:
                holder = self.locks.get((group, mq))
                if holder is None or holder[0] == client_id or now - holder[1] > LOCK_LIVE_S:
                    self.locks[(group, mq)] = (client_id, now)
                    locked.append(mq)
        return self.reply(req, body=fastjson.dumps({"lockOKMQSet": sorted(locked)}).encode())

    def unlock_batch(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        client_id, group, mqs = _lock_body(req.body)
        with self.lock:
            for mq in mqs:
                holder = self.locks.get((group, mq))
                if holder is not None and holder[0] == client_id:
                    del self.locks[(group, mq)]
        return self.reply(req)

    # -- group state and reset ---------------------------------------------------------------

    def consume_stats(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        group = self._str(req, "consumerGroup")
        topic_list = [t for t in (req.ext_str("topicList") or "").split(";") if t]
        topics: list[str | None] = list(topic_list) or [req.ext_str("topic") or None]
        table: dict[MessageQueue, dict[str, int]] = {}
        tps = 0.0
        with self.lock:
            for topic in topics:
                stats = self.broker.consume_stats(group, topic)
                tps += stats.consume_tps
                for mq, w in stats.offsets.items():
                    row = {
                        "brokerOffset": w.broker_offset,
                        "consumerOffset": w.consumer_offset,
                        "lastTimestamp": w.last_timestamp,
                    }
                    if self.server.v >= (5, 1):
                        row["pullOffset"] = w.pull_offset
                    table[mq] = row
        doc = {"consumeTps": tps, "offsetTable": dict(sorted(table.items()))}
        return self.reply(req, body=fastjson.dumps(doc).encode())

    def broker_consume_stats(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: a ConsumeStatsList of every subscription group.

        The body can hold tens of thousands of queues, so it is written here piece by piece in
        fastjson's layout (sorted fields, queue objects as keys) rather than through a document.
        """
        is_order = self._str(req, "isOrder").strip().lower() == "true"  # Boolean.parseBoolean
        with_pull = self.server.v >= (5, 1)
        with self.lock:
            groups = self.broker.broker_consume_stats(is_order)
        keys: dict[MessageQueue, str] = {}
        parts: list[str] = []
        total_diff = total_inflight = 0
        for group, per_topic in groups:
            stats_json = []
            for stats in per_topic:
                rows = []
                for mq, w in stats.offsets.items():
                    key = keys.get(mq)
                    if key is None:
                        key = keys[mq] = fastjson.dumps(mq)
                    pull = f',"pullOffset":{w.pull_offset}' if with_pull else ""
                    rows.append(
                        f'{key}:{{"brokerOffset":{w.broker_offset},"consumerOffset":{w.consumer_offset},'
                        f'"lastTimestamp":{w.last_timestamp}{pull}}}'
                    )
                    total_diff += w.broker_offset - w.consumer_offset
                    total_inflight += (w.pull_offset if with_pull else 0) - w.consumer_offset
                tps = fastjson.java_double(stats.consume_tps)
                stats_json.append(f'{{"consumeTps":{tps},"offsetTable":{{{",".join(rows)}}}}}')
            parts.append(f"{{{fastjson.dumps(group)}:[{','.join(stats_json)}]}}")
        body = (
            f'{{"brokerAddr":{fastjson.dumps(self.broker.addr)},"consumeStatsList":[{",".join(parts)}],'
            f'"totalDiff":{total_diff},"totalInflightDiff":{total_inflight}}}'
        )
        return self.reply(req, body=body.encode())

    def reset_offset(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand:
        topic = self._str(req, "topic")
        group = self._str(req, "group")
        timestamp = self._int(req, "timestamp", -1, long=True)
        force = bool(req.ext_bool("isForce", False))
        queue_id = self._int(req, "queueId", -1)
        offset = self._int(req, "offset", -1, long=True)
        with self.lock:
            # The model pushes to online clients through their on_reset callbacks, synchronously
            # and under this lock; they read the request's timestamp from here.
            self._reset_request = (timestamp, req.language == LanguageCode.CPP.name)
            try:
                table = self.broker.reset_offset(topic, group, timestamp, force, queue_id, offset)
            finally:
                self._reset_request = (-1, False)
            version = self.broker.offsets_version
        self._persist_offsets(version)
        body = {MessageQueue(topic, self.name, q): o for q, o in sorted(table.items())}
        return self.reply(req, body=fastjson.dumps({"offsetTable": body}).encode())

    def _persist_offsets(self, version: int) -> None:
        """Offsets on disk before the acknowledgement (outside the server lock: concurrent
        commits share one write). A failed write is the request's failure, not a silent loss."""
        try:
            self.broker.persist_offsets(version)
        except (OSError, errors.MqadminError) as exc:
            log.error("cannot persist consumer offsets of %s: %s", self.name, exc)
            raise _bad(ResponseCode.SYSTEM_ERROR, f"cannot persist consumer offsets: {exc}") from None

    def _reset_pusher(
        self, conn: _Connection, client_id: str, group: str, language: str, version: int
    ) -> Callable[[str, dict[int, int]], None]:
        """The ClientInfo.on_reset for one client: RESET_CONSUMER_CLIENT_OFFSET (220), oneway (§2.6).

        As a real broker, the body form follows the *admin request's* language: the ForC array
        when it said CPP (the Java tool's -c), else the MQ-keyed map, which C++ consumers cannot
        decode. mqadmin's resetOffsetByTime asks for CPP when a C++ consumer is online.
        """

        def push(topic: str, table: dict[int, int]) -> None:
            if version < MQVersion.V3_0_7_SNAPSHOT:
                raise _bad(
                    ResponseCode.SYSTEM_ERROR,
                    f"the client does not support this feature. version={version_name(version)}",
                )
            timestamp, cpp_body = self._reset_request
            if cpp_body:
                rows = [
                    {"brokerName": self.name, "offset": o, "queueId": q, "topic": topic}
                    for q, o in sorted(table.items())
                ]
                body = fastjson.dumps({"offsetTable": rows})
            else:
                body = fastjson.dumps(
                    {"offsetTable": {MessageQueue(topic, self.name, q): o for q, o in sorted(table.items())}}
                )
            ext: dict[str, object] = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": False}
            if self.server.v5:
                ext["queueId"] = -1
            conn.send(self.server.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body.encode()))
            self.server.count("resets_pushed")
            log.info("pushed a reset of %s/%s to %s", topic, group, client_id)

        return push


_GROUP_DEFAULTS_V5: Final[Mapping[str, Any]] = {
    "attributes": {},
    "consumeMessageOrderly": False,
    "consumeTimeoutMinute": 15,
    "groupRetryPolicy": {"type": "CUSTOMIZED"},
    "groupSysFlag": 0,
}


def _data_version() -> dict[str, int]:
    return {"counter": 1, "stateVersion": 0, "timestamp": _now_ms()}


def _topic_config_text(cfg: Mapping[str, Any]) -> str:
    """TopicConfig.toString, as the broker puts it into refusals."""
    return (
        f"TopicConfig [topicName={cfg.get('topicName')}, readQueueNums={cfg.get('readQueueNums')}, "
        f"writeQueueNums={cfg.get('writeQueueNums')}, perm={cfg.get('perm')}, "
        f"topicFilterType={cfg.get('topicFilterType', 'SINGLE_TAG')}, topicSysFlag={cfg.get('topicSysFlag', 0)}, "
        f"order={str(cfg.get('order', False)).lower()}]"
    )


def _pull_code(status: str, request_offset: int) -> int:
    """Store status -> reply code (§5.3)."""
    if status == "FOUND":
        return ResponseCode.SUCCESS
    if status == "NO_MATCHED_MESSAGE":
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in ("OFFSET_OVERFLOW_ONE", "OFFSET_FOUND_NULL"):
        return ResponseCode.PULL_NOT_FOUND
    if status == "NO_MESSAGE_IN_QUEUE":
        return ResponseCode.PULL_NOT_FOUND if request_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return ResponseCode.PULL_OFFSET_MOVED


def _parse_tags(expression: str) -> set[str] | None:
    """``*`` / empty -> every message; ``a || b`` -> those tags."""
    tags = {t.strip() for t in expression.split(TAG_SEPARATOR)}
    tags.discard("")
    if not tags or SUBSCRIBE_ALL in tags:
        return None
    return tags


def _enum_name(value: Any, names: tuple[str, ...], default: str) -> str:
    """Java sends enum names, the C++ client ordinals (§8.2)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    return default


def _subscription_json(raw: Mapping[str, Any]) -> dict[str, Any]:
    """SubscriptionData as Java writes it, whatever dialect the heartbeat used."""
    sub_string = str(raw.get("subString") or SUBSCRIBE_ALL)
    tags = sorted(_parse_tags(sub_string) or ())
    version = raw.get("subVersion")
    try:
        sub_version = int(version) if version is not None else _now_ms()
    except (TypeError, ValueError):
        sub_version = _now_ms()
    return {
        "classFilterMode": bool(raw.get("classFilterMode", False)),
        "codeSet": [java_string_hash(t) for t in tags],
        "expressionType": str(raw.get("expressionType") or EXPRESSION_TAG),
        "subString": sub_string,
        "subVersion": sub_version,
        "tagsSet": tags,
        "topic": str(raw["topic"]),
    }


def _sub_strings(subs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    return {topic: str(sub.get("subString")) for topic, sub in subs.items()}


def _lock_body(body: bytes) -> tuple[str, str, list[MessageQueue]]:
    try:
        data = fastjson.loads(body)
        mqs = [fastjson.to_message_queue(m) for m in data.get("mqSet") or []]
        return str(data["clientId"]), str(data["consumerGroup"]), mqs
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _bad(ResponseCode.SYSTEM_ERROR, "the request body is not a LockBatchRequestBody") from None


_BATCH_HEAD: Final = 20  # totalSize, magic, bodyCRC, flag, bodyLen


def _split_batch(data: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """SEND_BATCH_MESSAGE body: per message size, magic, crc, flag, body, properties (§2.5)."""
    out: list[tuple[int, bytes, dict[str, str]]] = []
    pos = 0
    try:
        while pos < len(data):
            size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
            flag = int.from_bytes(data[pos + 12 : pos + 16], "big", signed=True)
            body_len = int.from_bytes(data[pos + 16 : pos + 20], "big", signed=True)
            body_end = pos + _BATCH_HEAD + body_len
            props_len = int.from_bytes(data[body_end : body_end + 2], "big", signed=False)
            props = data[body_end + 2 : body_end + 2 + props_len].decode("utf-8", "replace")
            if size < _BATCH_HEAD + 2 or body_len < 0 or body_end + 2 + props_len > len(data):
                raise ValueError("truncated")
            out.append((flag, data[pos + _BATCH_HEAD : body_end], parse_properties(props)))
            pos += size
    except ValueError:
        raise _bad(ResponseCode.MESSAGE_ILLEGAL, "the batch body is not a list of encoded messages") from None
    return out


# ---------------------------------------------------------------------------------------------
# The server


class MockServer:
    """Serve a MockCluster: a name server on ``namesrv_port`` and one port per broker.

    ``acl=(access_key, secret_key)`` makes the brokers verify request signatures (protocol doc
    §6) and answer NO_PERMISSION otherwise; the name server stays open, as a 4.x one is. With
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
        self.v5 = self.v >= (5,)
        self.version_ordinal = _server_ordinal(cluster.version)
        #: serialises every model call (the model's own lock does not cover pulls)
        self.lock = threading.RLock()
        self.started_ms = 0
        self.started_monotonic = time.monotonic()
        self._ports = [namesrv_port, *ports]
        self._roles: list[_Role] = [_NamesrvRole(self)] + [_BrokerRole(self, b) for b in cluster.brokers.values()]
        self._listeners: list[tuple[socket.socket, _Role]] = []
        self._old_addrs: dict[str, str] = {}
        self._conns: set[_Connection] = set()
        self._clients: dict[tuple[str, str, str], _Connection] = {}
        self._registry_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        #: seconds without a byte either way before a connection is closed (0: never)
        self.idle_timeout = idle_timeout
        self._worker_count = max(1, workers)
        self._work: queue.SimpleQueue[_Connection | Callable[[], None] | None] = queue.SimpleQueue()
        #: connections whose selector interest may have changed, for the I/O loop (under _wake_lock)
        self._dirty: set[_Connection] = set()
        self._wake_lock = threading.Lock()
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        self._waker_w.setblocking(False)
        self._woken = False
        #: long-polled pulls waiting for messages, by (broker, topic, queue), and the queues
        #: that received messages since the long-polling thread last looked (both under _arrival)
        self._held: dict[tuple[str, str, int], list[_HeldPull]] = {}
        self._held_count = 0
        self._arrived: set[tuple[str, str, int]] = set()
        self._arrival = threading.Condition()
        self._accept_failures = _RateLimitedLog(ACCEPT_LOG_INTERVAL_S)
        self._last_trim = 0.0
        self._stop = threading.Event()
        self._started = False
        self._stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        self._opaque = itertools.count(1)

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> MockServer:
        """Bind every port (brokers first learn their address), then serve in background threads."""
        if self._started:
            return self
        try:
            for port, role in zip(self._ports, self._roles, strict=True):
                self._listeners.append((self._listen(port), role))
        except BaseException:
            for sock, _ in self._listeners:
                sock.close()
            self._listeners.clear()
            raise
        for sock, role in self._listeners:
            if isinstance(role, _BrokerRole):
                self._old_addrs[role.name] = role.broker.addr
                role.broker.addr = f"{self.advertise_host}:{sock.getsockname()[1]}"
        self.started_ms = _now_ms()
        self.started_monotonic = time.monotonic()
        self._started = True
        targets = [(self._io_loop, "mock-io"), (self._flush_loop, "mock-flush"), (self._hold_loop, "mock-hold")]
        targets += [(self._work_loop, f"mock-worker-{i}") for i in range(self._worker_count)]
        for target, name in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("mock name server on %s, brokers %s", self.namesrv_addr, self.broker_addrs)
        return self

    def _listen(self, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.bind else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.bind, port))
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise errors.ConnectError(f"cannot listen on {_host_port((self.bind, port))}: {exc.strerror}") from None
        return sock

    def stop(self) -> None:
        """Stop accepting, close every connection, wait for the threads, flush the store."""
        if not self._started or self._stop.is_set():
            return
        self._stop.set()
        self._wake()
        with self._arrival:
            self._arrival.notify_all()
        for _ in range(self._worker_count):
            self._work.put(None)
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT_S)
        for sock, _ in self._listeners:
            sock.close()
        with self._registry_lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            conn.close()
            conn.release()
        self._waker_r.close()
        self._waker_w.close()
        with self.lock:
            self.cluster.flush()
            for role in self._roles:
                if isinstance(role, _BrokerRole) and role.name in self._old_addrs:
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
        if not self._listeners:
            raise RuntimeError("the mock server is not started")
        return f"{self.advertise_host}:{self._listeners[0][0].getsockname()[1]}"

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

    def request(self, code: int, ext: Mapping[str, object], body: bytes = b"") -> RemotingCommand:
        """A broker-to-client request, sent oneway as the broker does (§2.6)."""
        return RemotingCommand.request(
            code,
            ext,
            body,
            opaque=next(self._opaque) & 0x7FFFFFFF,
            version=self.version_ordinal,
            language=LanguageCode.JAVA.name,
            oneway=True,
        )

    # -- threads -----------------------------------------------------------------------------

    def _io_loop(self) -> None:
        """Accept, read and write every socket from one thread; requests go to the worker pool."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._waker_r, selectors.EVENT_READ, None)
            for sock, role in self._listeners:
                selector.register(sock, selectors.EVENT_READ, role)
            accept_paused_until = 0.0
            backoff = ACCEPT_BACKOFF_MIN_S
            next_idle_check = time.monotonic() + IDLE_CHECK_S
            try:
                while not self._stop.is_set():
                    now = time.monotonic()
                    if accept_paused_until and now >= accept_paused_until:
                        accept_paused_until = 0.0
                        for sock, role in self._listeners:
                            selector.register(sock, selectors.EVENT_READ, role)
                    timeout = IDLE_CHECK_S if not accept_paused_until else min(IDLE_CHECK_S, accept_paused_until - now)
                    for key, events in selector.select(max(timeout, 0.0)):
                        if key.fileobj is self._waker_r:
                            self._drain_waker()
                        elif isinstance(key.data, _Role):
                            if not self._accept(selector, key):
                                # Out of descriptors: stop asking until some are free (no spin).
                                for sock, _ in self._listeners:
                                    selector.unregister(sock)
                                accept_paused_until = time.monotonic() + backoff
                                backoff = min(backoff * 2, ACCEPT_BACKOFF_MAX_S)
                                break
                            backoff = ACCEPT_BACKOFF_MIN_S
                        else:
                            conn = key.data
                            if events & selectors.EVENT_READ and not conn.closed.is_set():
                                self._received(conn, conn.on_readable())
                            if events & selectors.EVENT_WRITE and not conn.closed.is_set():
                                conn.on_writable()
                            self._update_interest(selector, conn)
                    self._apply_dirty(selector)
                    if time.monotonic() >= next_idle_check:
                        next_idle_check = time.monotonic() + IDLE_CHECK_S
                        self._close_idle()
            finally:
                with self._registry_lock:
                    conns = list(self._conns)
                for conn in conns:
                    conn.close()

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
            if not self._stop.is_set():
                log.warning("accept failed: %s", exc)
            return True
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(self, sock, key.data, _host_port(addr))
        with self._registry_lock:
            self._conns.add(conn)
        selector.register(sock, selectors.EVENT_READ, conn)
        self.count("connections")
        log.debug("%s connected to the %s port", conn.peer, conn.role.name)
        return True

    def _received(self, conn: _Connection, cmds: list[RemotingCommand]) -> None:
        if not cmds:
            return
        with conn._lock:
            if conn.closed.is_set():
                return
            conn.pending.extend(cmds)
            if len(conn.pending) >= MAX_PENDING_REQUESTS:
                conn.paused = True
            if conn.scheduled:
                return
            conn.scheduled = True
        self._work.put(conn)

    def _update_interest(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        """Register what ``conn`` waits for now; forget it once closed."""
        if conn.closed.is_set():
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(conn.sock)
            self._forget(conn)
            return
        events = 0 if conn.paused else selectors.EVENT_READ
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
        with self._registry_lock:
            idle = [c for c in self._conns if c.last_active < cutoff and not c.scheduled]
        for conn in idle:
            log.info("closing %s: idle for %.0f s", conn.peer, self.idle_timeout)
            conn.close()

    def _forget(self, conn: _Connection) -> None:
        """The last step of a connection: free its buffers, then let the roles forget its clients."""
        with self._registry_lock:
            if conn not in self._conns:
                return
            self._conns.discard(conn)
        conn.release()
        if conn.registrations:
            self._work.put(lambda: self._connection_closed(conn))

    def _wake(self) -> None:
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

    def _want_write(self, conn: _Connection) -> None:
        """Called by any thread after queueing a reply: the I/O loop sends it."""
        with self._wake_lock:
            self._dirty.add(conn)
        self._wake()

    def _closing(self, conn: _Connection) -> None:
        self._want_write(conn)

    def _release_memory(self) -> None:
        """Hand freed heap back to the system after a big drop (glibc keeps it otherwise)."""
        now = time.monotonic()
        if now - self._last_trim < TRIM_INTERVAL_S:
            return
        self._last_trim = now
        _malloc_trim()

    def _work_loop(self) -> None:
        """A pool worker: handles one connection's queued requests in order, or runs a task."""
        while True:
            item = self._work.get()
            if item is None:
                return
            if isinstance(item, _Connection):
                self._serve(item)
                continue
            try:
                item()
            except Exception:
                log.exception("mock server task failed")

    def _serve(self, conn: _Connection) -> None:
        for _ in range(WORKER_BATCH):
            with conn._lock:
                if conn.closed.is_set():
                    conn.pending.clear()
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
            self._want_write(conn)

    def _flush_loop(self) -> None:
        """The broker's periodic persist: offsets and configs reach the disk every few seconds."""
        failures = _RateLimitedLog(ACCEPT_LOG_INTERVAL_S)
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

    def _transport_for(self, first_byte: int) -> _Plain:
        if self.tls is not None and first_byte == TLS_HANDSHAKE_RECORD:
            return _Tls(self.tls)
        return _Plain()

    # -- requests ----------------------------------------------------------------------------

    def _dispatch(self, conn: _Connection, req: RemotingCommand) -> None:
        """Handle one frame; every failure becomes a reply, never a dropped connection."""
        if req.is_response:
            return  # we send only oneway requests, so no reply is awaited
        self.count("requests")
        reply = self._handle(conn, req)
        # Reply unless flag bit 1 says oneway; C++ "oneway" requests arrive with flag 0 and
        # drop the reply themselves (§1.3).
        if reply is None or req.is_oneway:
            return
        try:
            conn.send(reply)
        except (ValueError, TypeError) as exc:  # a reply the codec refuses must not cost the connection
            log.exception("cannot encode the reply to request %d from %s", req.code, conn.peer)
            conn.send(conn.role.reply(req, ResponseCode.SYSTEM_ERROR, f"cannot encode the reply: {exc}"))

    def _handle(self, conn: _Connection, req: RemotingCommand) -> RemotingCommand | None:
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
        try:
            return handler(conn, req)
        except errors.BrokerError as exc:
            return role.reply(req, exc.code, exc.remark)
        except errors.MqadminError as exc:
            return role.reply(req, ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:
            log.exception("request %d from %s failed", req.code, conn.peer)
            return role.reply(req, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def _hold(
        self, conn: _Connection, req: RemotingCommand, role: _BrokerRole, params: _PullParams, deadline: float
    ) -> bool:
        """Park a pull until a matching message arrives or its suspend time ends (§5.3); False
        when too many are parked already (the caller answers at once)."""
        key = (role.name, params.topic, params.queue_id)
        with self._arrival:
            if self._held_count >= MAX_HELD_PULLS:
                return False
            self._held.setdefault(key, []).append(_HeldPull(conn, req, role, params, deadline, params.offset))
            self._held_count += 1
            self._arrived.add(key)  # look once at once: a message may have come in meanwhile
            self._arrival.notify_all()
        return True

    def message_arrived(self, broker: str, topic: str, queue_id: int) -> None:
        """Tell the long-polling thread that a queue grew (every write goes through a handler)."""
        with self._arrival:
            self._arrived.add((broker, topic, queue_id))
            self._arrival.notify_all()

    def _hold_loop(self) -> None:
        """One thread for every held pull (the broker's PullRequestHoldService), not one each:
        it looks at the queues that grew, and sweeps for expired pulls every HOLD_SLICE_S."""
        next_sweep = time.monotonic()
        while not self._stop.is_set():
            with self._arrival:
                if not self._arrived:
                    self._arrival.wait(max(0.0, min(HOLD_SLICE_S, next_sweep - time.monotonic())))
                grown, self._arrived = self._arrived, set()
                #: id -> (held pull, whether its queue grew)
                candidates = {id(h): (h, True) for key in grown for h in self._held.get(key, ())}
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + HOLD_SLICE_S
                    for held in self._held.values():
                        for h in held:
                            if id(h) not in candidates and (h.deadline <= now or h.conn.closed.is_set()):
                                candidates[id(h)] = (h, False)
            done = {key for key, (h, look) in candidates.items() if self._check_held(h, look)}
            if done:
                with self._arrival:
                    for key in list(self._held):
                        left = [h for h in self._held[key] if id(h) not in done]
                        self._held_count -= len(self._held[key]) - len(left)
                        if left:
                            self._held[key] = left
                        else:
                            del self._held[key]

    def _check_held(self, held: _HeldPull, look: bool) -> bool:
        """Answer ``held`` if it can be answered now (``look``: its queue grew); True when finished."""
        if held.conn.closed.is_set() or self._stop.is_set():
            return True  # a stopping server goes away without answering, as a broker does
        try:
            params, role = held.params, held.role
            grown = False
            if look:
                with self.lock:
                    grown = role.broker.max_offset(params.topic, params.queue_id) > held.watermark
            expired = time.monotonic() >= held.deadline
            if not grown and not expired:
                return False
            outcome = role.read_held(params)
            if (
                not expired
                and outcome.status == "NO_MATCHED_MESSAGE"
                and outcome.next_begin_offset >= outcome.max_offset
            ):
                held.watermark = outcome.max_offset  # only unwanted tags arrived: keep holding, as the broker does
                return False
            held.conn.send(role.pull_reply(held.req, params, outcome))
        except Exception:
            log.exception("held pull from %s failed", held.conn.peer)
            held.conn.send(held.role.reply(held.req, ResponseCode.SYSTEM_ERROR, "held pull failed"))
        return True

    # -- client registry ---------------------------------------------------------------------

    def _bind_client(self, conn: _Connection, broker: str, group: str, client_id: str) -> None:
        key = (broker, group, client_id)
        with self._registry_lock:
            self._clients[key] = conn
            conn.registrations.add(key)

    def _unbind_client(self, broker: str, group: str, client_id: str, conn: _Connection | None) -> bool:
        """Forget a client; with ``conn``, only if that is still the client's connection."""
        key = (broker, group, client_id)
        with self._registry_lock:
            current = self._clients.get(key)
            if current is None or (conn is not None and current is not conn):
                return False
            del self._clients[key]
            current.registrations.discard(key)
            return True

    def _client_connection(self, broker: str, group: str, client_id: str) -> _Connection | None:
        with self._registry_lock:
            return self._clients.get((broker, group, client_id))

    def _connection_closed(self, conn: _Connection) -> None:
        with self._registry_lock:
            registrations = list(conn.registrations)
        roles = {r.name: r for r in self._roles if isinstance(r, _BrokerRole)}
        for broker, group, client_id in registrations:
            role = roles.get(broker)
            if role is not None:
                role.forget_client(group, client_id, conn)


# ---------------------------------------------------------------------------------------------
# Serving a store from the command line


@dataclass(frozen=True)
class ServerReady:
    """What ``serve_store`` tells its caller once the ports are open."""

    address: str
    store: str
    namesrv_addr: str
    brokers: dict[str, str]
    broker_version: str
    created: bool


@dataclass(frozen=True)
class ServeReport:
    """What was served, for the command's result."""

    ready: ServerReady
    seconds: float
    stats: dict[str, int] = field(default_factory=dict)
    topics: int = 0
    groups: int = 0


def _broker_names(count: int) -> tuple[str, ...]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    if not 1 <= count <= len(letters):
        raise errors.UsageError(f"--brokers must be between 1 and {len(letters)}, not {count}")
    return tuple(f"broker-{letters[i]}" for i in range(count))


def open_store(
    address: str, *, brokers: int | None = None, version: str | None = None, demo: bool = False
) -> tuple[MockCluster, bool]:
    """Open a mock store for writing, creating it first if needed; (cluster, created).

    ``mock://demo`` is seeded on creation, as the embedded backend does; ``demo`` seeds any
    new store. ``brokers``/``version`` only shape a new store.
    """
    root, name = mock_root(address)
    created = False
    if not (root / CLUSTER_FILE).exists():
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise errors.UsageError(f"{root} is not a mock broker store (no {CLUSTER_FILE})")
        names = _broker_names(DEFAULT_BROKER_COUNT if brokers is None else brokers)
        chosen = version or DEFAULT_VERSION
        try:
            version_ordinal(chosen)
        except ValueError:
            raise errors.UsageError(f"unknown broker version {chosen!r} (e.g. 4.9.8, 5.3.3)") from None
        _create_store(root, names, chosen, demo=demo or name == DEMO_NAME)
        created = True
    return MockCluster(root, writable=True), created


def _create_store(root: Path, brokers: tuple[str, ...], version: str, *, demo: bool) -> None:
    """Build beside the final place and rename it in, so a racing process never sees half a store."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        shutil.rmtree(tmp)
        cluster = MockCluster.create(tmp, brokers, version=version)
        try:
            if demo:
                from mqadmin.mock.seed import seed_demo

                seed_demo(cluster)
        finally:
            cluster.close()
        try:
            os.rename(tmp, root)
        except OSError:
            if not (root / CLUSTER_FILE).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tls_context(cert: str, key: str | None = None) -> ssl.SSLContext:
    """A server context from a PEM certificate (and key, unless the certificate file holds it)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise errors.UsageError(f"cannot load the TLS certificate {cert}: {exc}") from None
    return context


def serve_store(
    address: str,
    *,
    stop: threading.Event,
    port: int = DEFAULT_NAMESRV_PORT,
    bind: str = DEFAULT_BIND,
    brokers: int | None = None,
    broker_version: str | None = None,
    demo: bool = False,
    acl: tuple[str, str] | None = None,
    tls: ssl.SSLContext | None = None,
    on_ready: Callable[[ServerReady], None] | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
) -> ServeReport:
    """Open (or create) the store at a ``mock://`` address and serve it until ``stop`` is set.

    The one entry point for ``mqadmin mockBroker``; the store is flushed and unlocked on return.
    """
    cluster, created = open_store(address, brokers=brokers, version=broker_version, demo=demo)
    try:
        server = MockServer(cluster, bind=bind, namesrv_port=port, acl=acl, tls=tls, idle_timeout=idle_timeout)
        with server:
            ready = ServerReady(
                address=address,
                store=str(cluster.root),
                namesrv_addr=server.namesrv_addr,
                brokers=server.broker_addrs,
                broker_version=cluster.version,
                created=created,
            )
            if on_ready is not None:
                on_ready(ready)
            started = time.monotonic()
            while not stop.wait(ACCEPT_POLL_S * 5):
                pass
            seconds = time.monotonic() - started
        return ServeReport(
            ready=ready,
            seconds=seconds,
            stats=server.stats(),
            topics=len(cluster.list_topics()),
            groups=len(cluster.list_groups()),
        )
    finally:
        cluster.close()
