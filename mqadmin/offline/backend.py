"""The ``store:`` backend: a stopped broker's answers, read from its store directory.

It is the mock broker's model (the same time search, consumer-offset and pull code the
embedded backend runs) over a read-only view of each store, so a copy of a dead broker's
files answers queryOffset, consumerProgress and replays as the broker did. Writes are
refused: this backend never creates, changes or locks a file in the store.
"""

from __future__ import annotations

from typing import Any, NoReturn

from mqadmin import errors
from mqadmin.mock.backend import MockAdmin
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.model import MockBroker
from mqadmin.mock.store import BrokerStore
from mqadmin.model import BROKER_STORE, ConsumerConnection, Message, MessageQueue, SendResult
from mqadmin.offline.layout import StoreSpec, discover, lock_holder, parse_address
from mqadmin.protocol.constants import PERM_READ_WRITE

_CONFIGS = ("consumerOffset.json", "topics.json", "subscriptionGroup.json")


#: where a broker run with enableLmq (5.x lite topics) persists every consumer offset instead of
#: consumerOffset.json, which it leaves as it was (broker: LmqConsumerOffsetManager)
LMQ_OFFSETS = "lmqConsumerOffset.json"


def offsets_file(store: BrokerStore) -> str:
    """The offsets file the broker wrote last: the newer of the two (each with its .bak)."""

    def newest(name: str) -> float:
        path = store.config_path(name)
        times = [p.stat().st_mtime for p in (path, path.with_name(path.name + ".bak")) if p.exists()]
        return max(times, default=-1.0)

    lmq = newest(LMQ_OFFSETS)
    return LMQ_OFFSETS if lmq >= 0 and lmq >= newest("consumerOffset.json") else "consumerOffset.json"


class StoreBroker(MockBroker):
    """MockBroker's read paths over one store; topics the config lacks come from consumequeue/.

    A real broker lists every topic in ``config/topics.json``; a copied store may lack it, and
    then the consume-queue folders are all there is (queues up to the highest folder number).
    """

    def load(self) -> None:
        super().load()
        if offsets_file(self.store) == LMQ_OFFSETS:
            table = self.store.load_config(LMQ_OFFSETS).get("offsetTable", {})
            self.offsets = {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}
        for topic in self.store.topics_on_disk():
            ids = self.store.queue_ids_on_disk(topic)
            if topic in self.topics or not ids:
                continue
            n = max(ids) + 1
            self.topics[topic] = {
                "order": False,
                "perm": PERM_READ_WRITE,
                "readQueueNums": n,
                "topicFilterType": "SINGLE_TAG",
                "topicName": topic,
                "topicSysFlag": 0,
                "writeQueueNums": n,
            }


class StoreCluster(MockCluster):
    """The name-server view over several stores; never locks, never flushes."""

    def __init__(self, specs: list[StoreSpec]):  # MockCluster's reads only need these
        self.root = specs[0].root
        self.writable = False
        self._lock_fd = None
        self.cluster_name = specs[0].cluster
        self.version = specs[0].version
        self.meta = {"brokers": [s.name for s in specs], "broker_version": self.version, "cluster": self.cluster_name}
        self.brokers = {}
        for spec in specs:
            store = BrokerStore(spec.root, offline=True)
            self.brokers[spec.name] = StoreBroker(spec.name, spec.cluster, store, spec.version, f"store://{spec.root}")


class OfflineAdmin(MockAdmin):
    """The facade over stopped brokers' stores: every read a live broker answers, no write."""

    capabilities = BROKER_STORE

    def __init__(self, cluster: StoreCluster, address: str, notes: list[str]):
        super().__init__(cluster, address)
        #: what a user should know about these stores (locks, unclean stops, .bak fallbacks)
        self.notes = notes

    def _read_only(self, what: str) -> NoReturn:
        raise errors.UsageError(
            f"{self.address} is a broker's store opened read-only: mqadmin never writes into it, so it cannot "
            f"{what}; start the broker on it and use the broker's address (-n host:port) to change it"
        )

    def _stats_brokers(self, group: str, topic: str | None) -> list[MockBroker]:
        """Also the brokers holding offsets of the group: a copied store may lack the topics.json
        that routes its retry topic, and consumerOffset.json is what an offline view is for."""
        try:
            brokers = super()._stats_brokers(group, topic)
        except errors.TopicNotExist:
            brokers = []
        named = {b.name for b in brokers}
        brokers += [
            b for b in self.cluster.brokers.values() if b.name not in named and group in b.groups_with_offsets()
        ]
        if not brokers:
            raise errors.TopicNotExist(f"No topic route info in name server for the topic: %RETRY%{group}")
        return brokers

    def consumer_connections(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        raise errors.ConsumerNotOnline(f"the consumer group[{group}] not online (offline store {self.address})")

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._read_only("update consumer offsets")

    def reset_offset_by_time(self, topic: str, group: str, ts_ms: int, force: bool = True, **kw: Any) -> NoReturn:
        self._read_only("reset consumer offsets")

    def send(self, topic: str, message: Message, queue: MessageQueue | None = None) -> SendResult:
        self._read_only("store messages")

    def send_back(self, group: str, message: Message, delay_level: int = 0) -> None:
        self._read_only("send messages back")


def open_store(address: str) -> OfflineAdmin:
    """Open the stores an address names, read-only, with notes on what the files say."""
    specs = discover(parse_address(address))
    cluster = StoreCluster(specs)
    notes: list[str] = []
    for spec in specs:
        notes.extend(_notes(spec, cluster.brokers[spec.name].store))
    return OfflineAdmin(cluster, address, notes)


def _notes(spec: StoreSpec, store: BrokerStore) -> list[str]:
    out = []
    holder = lock_holder(spec.root)
    if holder is not None:
        who = f"pid {holder}" if holder else "another process"
        out.append(
            f"{spec.name}: {spec.root} is locked by a running broker ({who}); reading it read-only anyway: "
            "consumer offsets on disk trail the live broker by up to 5 s"
        )
    elif (spec.root / "abort").exists():
        out.append(
            f"{spec.name}: {spec.root / 'abort'} exists: the broker did not shut down cleanly; consumer offsets "
            "are from its last persist, and queue entries past the end of the commit log are left out"
        )
    offsets = LMQ_OFFSETS if LMQ_OFFSETS in store.config_sources else "consumerOffset.json"  # as load() chose
    if offsets == LMQ_OFFSETS:
        out.append(f"{spec.name}: read config/{LMQ_OFFSETS}, the newer offsets file (the broker ran with enableLmq)")
    for name in (offsets if n == "consumerOffset.json" else n for n in _CONFIGS):
        main = store.config_path(name)
        used = store.config_sources.get(name)
        if name in ("consumerOffset.json", LMQ_OFFSETS) and used is None and (main.exists() or _bak(main).exists()):
            out.append(f"{spec.name}: neither config/{name} nor its .bak is readable: no consumer offsets")
        elif used is not None and used != main:
            state = "missing" if not main.exists() else "empty or corrupt"
            out.append(f"{spec.name}: config/{name} is {state}; read {used.name}, as the broker does")
    return out


def _bak(path: Any) -> Any:
    return path.with_name(path.name + ".bak")
