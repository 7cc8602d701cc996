"""Value types shared by the facade, the backends and the commands."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

from mqadmin.protocol import versions


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker; ordered like the Java tool sorts rows."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


V = TypeVar("V")


def in_queue_order(
    table: Mapping[MessageQueue, V], seen: dict[tuple[int, ...], bool] | None = None
) -> dict[MessageQueue, V]:
    """``table`` with its queues in the Java tool's row order. Sorted by a key tuple: comparing
    the dataclasses themselves runs in Python, which made 10,000 groups' tables cost 0.2 s.

    ``seen``, for many tables over the same queue objects (one reply's groups): whether a run of
    queues, by identity, is already in order, so each run is checked once and a table in order is
    copied with its hashes rather than sorted and hashed again. The caller keeps the queues alive
    while it uses ``seen`` (an identity is only unique among live objects)."""
    if seen is not None:
        ids = tuple(map(id, table))
        ordered = seen.get(ids)
        if ordered is None:
            keys = [(mq.topic, mq.broker_name, mq.queue_id) for mq in table]
            ordered = seen[ids] = keys == sorted(keys)
        if ordered:
            return dict(table)
    return dict(sorted(table.items(), key=lambda item: (item[0].topic, item[0].broker_name, item[0].queue_id)))


@dataclass(frozen=True)
class Capabilities:
    """What a backend is, declared by it, so no caller guesses it from the address string."""

    #: it never takes a write (a stopped broker's store, read in place): writers refuse up front
    read_only: bool
    #: files on this machine that this process opens itself (an embedded mock, a broker's store):
    #: another process here may open the address too, an executor elsewhere cannot, and writing
    #: needs the files opened for it
    on_disk: bool
    #: an acknowledged offset write is already on disk (a live broker keeps offsets in memory
    #: until its next flush, which the reset's durability line explains)
    persists_on_ack: bool
    #: a name server routes its brokers, which can vanish between runs (seen.py remembers them)
    routed: bool


#: the mock broker in this process, on its store's files
EMBEDDED_STORE: Final = Capabilities(read_only=False, on_disk=True, persists_on_ack=True, routed=False)
#: stopped brokers' stores, read where they lie
BROKER_STORE: Final = Capabilities(read_only=True, on_disk=True, persists_on_ack=False, routed=False)
#: name servers and brokers over the remoting protocol (a real cluster, or the mock served over TCP)
LIVE_CLUSTER: Final = Capabilities(read_only=False, on_disk=False, persists_on_ack=False, routed=True)


@dataclass(frozen=True)
class BrokerData:
    """A broker set of a route: its name, cluster and addresses by broker id (0 = master)."""

    broker_name: str
    cluster: str
    addrs: dict[int, str]

    def select_addr(self) -> str:
        """The master, else any slave (as the Java admin's selectBrokerAddr)."""
        if 0 in self.addrs:
            return self.addrs[0]
        return self.addrs[min(self.addrs)]


@dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = 6
    topic_sys_flag: int = 0


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    brokers: tuple[BrokerData, ...]
    queues: tuple[QueueData, ...]

    def message_queues(self, readable: bool = True) -> list[MessageQueue]:
        """Every queue of the topic (read queues by default), sorted."""
        out: list[MessageQueue] = []
        for q in self.queues:
            n = q.read_queue_nums if readable else q.write_queue_nums
            out.extend(MessageQueue(self.topic, q.broker_name, i) for i in range(n))
        return sorted(out)

    def broker(self, name: str) -> BrokerData | None:
        return next((b for b in self.brokers if b.broker_name == name), None)


@dataclass
class Message:
    """A message as stored by a broker (decoded commit-log record) or to be sent."""

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    queue_id: int = 0
    queue_offset: int = 0
    commitlog_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1:0"
    store_timestamp: int = 0
    store_host: str = "127.0.0.1:0"
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    msg_id: str = ""
    broker_name: str = ""

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get("UNIQ_KEY")


@dataclass(frozen=True)
class OffsetWrapper:
    """One queue's row of GET_CONSUME_STATS."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    pull_offset: int = 0


@dataclass(frozen=True)
class QueueStats:
    """One queue's row of GET_TOPIC_STATS_INFO: its bounds and the store time of its last message."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0


@dataclass(frozen=True)
class ConsumeStats:
    offsets: dict[MessageQueue, OffsetWrapper]
    consume_tps: float
    #: brokers that did not answer (name -> one-line reason), filled only when the caller asked
    #: for a partial answer: ``offsets`` and ``consume_tps`` are the other brokers' alone
    missing_brokers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientConnection:
    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True)
class ConsumerConnection:
    """Who is online for a group, and how they consume (GET_CONSUMER_CONNECTION_LIST)."""

    connections: tuple[ClientConnection, ...]
    consume_type: str  # CONSUME_ACTIVELY (pull) / CONSUME_PASSIVELY (push)
    message_model: str  # CLUSTERING / BROADCASTING
    consume_from_where: str
    subscriptions: dict[str, str]  # topic -> sub expression


@dataclass(frozen=True)
class SendResult:
    msg_id: str  # offset msg id
    queue: MessageQueue
    queue_offset: int
    uniq_key: str | None


@dataclass(frozen=True)
class PullResult:
    """Status is the broker's store status name (FOUND, NO_NEW_MSG, OFFSET_MOVED...)."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[Message]


@dataclass(frozen=True)
class RawPull:
    """A pull answer whose messages are still encoded: ``records`` are buffers of concatenated
    commit-log records (a reply's body, or views into a store's files), for callers that decode
    many messages at once into columns rather than one ``Message`` at a time."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes | memoryview]


@dataclass(frozen=True)
class BrokerInfo:
    """What a broker says about itself: name, address, cluster and behaviour-relevant version."""

    broker_name: str
    addr: str
    cluster: str
    version: str  # e.g. "5.3.3", "4.9.8"
    #: the broker's own settings (GET_BROKER_CONFIG); None when they could not be read
    config: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

    @property
    def server_side_reset(self) -> bool:
        """The broker resets offsets itself (useServerSideResetOffset); otherwise it pushes a
        time to the online clients. From its settings; the version's default if unknown."""
        return versions.resets_on_broker(self.version, self.config)


@dataclass(frozen=True)
class LiteLag:
    """One lite topic of a lite group on one broker (5.5's LiteLagInfo): messages behind, the
    committed offset (None: not in the reply, as 5.5.1 leaves it out of the top list), and the
    store time of the oldest unconsumed message (None: nothing waits)."""

    lite_topic: str
    lag: int
    consumer_offset: int | None
    earliest_unconsumed_ms: int | None


@dataclass(frozen=True)
class LiteGroupInfo:
    """GET_LITE_GROUP_INFO from one broker: the group's parent topic and total lag, with either
    its top lite topics by lag (``top``) or one lite topic's offsets (``offsets``; None when the
    broker holds no offset for it)."""

    group: str
    parent_topic: str
    total_lag: int
    earliest_unconsumed_ms: int | None
    top: tuple[LiteLag, ...] = ()
    offsets: OffsetWrapper | None = None
