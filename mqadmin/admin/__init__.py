"""The admin facade: the one interface every command and job uses to reach a broker.

``connect(address)`` picks the backend from the address: ``mock``/``mock://NAME``/
``mock:///abs/path`` open the embedded mock broker, ``store:///path`` a stopped broker's store,
``host:port[;host:port]`` the remoting client. Commands never import a backend directly, and
never look at the address to learn what the backend is: it declares its ``capabilities``
(``capabilities_of`` tells them from an address without opening it). This module is the one
place that reads an address's scheme.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

from mqadmin import errors
from mqadmin.config import default_home
from mqadmin.errors import UsageError
from mqadmin.model import (
    BROKER_STORE,
    EMBEDDED_STORE,
    LIVE_CLUSTER,
    BrokerData,
    BrokerInfo,
    Capabilities,
    ConsumerConnection,
    ConsumeStats,
    LiteGroupInfo,
    Message,
    MessageQueue,
    PullResult,
    QueueStats,
    RawPull,
    SendResult,
    TopicRoute,
)


class PendingPull(Protocol):
    """A pull on its way: ``result()`` waits for the answer (raising what ``pull`` would)."""

    def result(self) -> RawPull: ...


class Admin(Protocol):
    """The operations commands may use. Keep this set small: add a keyword before a method."""

    address: str
    #: what the backend is (read-only, on this machine's disk, ...): ask this, never the address
    capabilities: Capabilities

    @property
    def notes(self) -> Sequence[str]:
        """What the user should hear about the data behind this backend (a stale demo re-seeded, a
        crashed broker's store, a .bak fallback): the Context prints them once per run, for every
        command, so no caller can forget them."""

    # routing
    def topic_route(self, topic: str) -> TopicRoute: ...
    def cluster_brokers(self, *, probe: bool = True) -> list[BrokerInfo]: ...
    def list_topics(self) -> list[str]: ...
    def list_groups(self, *, subscribed: bool = False) -> list[str]: ...

    # queue offsets
    def min_offset(self, mq: MessageQueue) -> int: ...
    def max_offset(self, mq: MessageQueue) -> int: ...
    def search_offset(self, mq: MessageQueue, ts_ms: int) -> int: ...
    def earliest_store_time(self, mq: MessageQueue) -> int: ...
    def queue_stats(self, queues: Sequence[MessageQueue]) -> dict[MessageQueue, QueueStats]: ...

    # consumer offsets
    def consumer_offset(self, group: str, mq: MessageQueue) -> int | None: ...
    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None: ...

    # group state
    # partial=True: a broker that cannot be reached is named in ``missing_brokers`` instead of
    # failing the call (unless no broker answers); a broker that answers with an error still fails it
    def consume_stats(self, group: str, topic: str | None = None, *, partial: bool = False) -> ConsumeStats: ...
    def consume_stats_all(
        self, groups: Sequence[str], *, partial: bool = False
    ) -> dict[str, ConsumeStats | errors.MqadminError]: ...
    def consumer_connections(self, group: str, broker_addr: str | None = None) -> ConsumerConnection: ...
    def consumer_connections_all(
        self, groups: Sequence[str]
    ) -> dict[str, ConsumerConnection | errors.MqadminError]: ...
    def consumer_running_queues(self, group: str, client_id: str) -> frozenset[MessageQueue]: ...
    # 5.5 lite groups: each broker's answer (broker name -> info or error); an ordinary or unknown
    # group, or a broker before 5.5, answers with an error that ``is_not_lite`` recognises
    def lite_group_info(
        self, group: str, lite_topic: str | None, top_k: int
    ) -> dict[str, LiteGroupInfo | errors.MqadminError]: ...

    # reset
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
    ) -> dict[MessageQueue, int]: ...

    # messages
    # ``group``: the consumer group the broker sees the read under (ACL checks it); None is
    # TOOLS_CONSUMER, as the Java tool reads. A read never commits an offset.
    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult: ...
    def pull_raw(
        self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None
    ) -> PendingPull: ...
    def send(self, topic: str, message: Message, queue: MessageQueue | None = None) -> SendResult: ...
    def send_back(self, group: str, message: Message, delay_level: int = 0) -> None: ...

    def refresh(self) -> None:
        """Forget what was learned of the cluster (its brokers, versions, settings), which a run
        reuses: the next call looks again (each --watch refresh is a new look)."""

    def close(self) -> None: ...


def resolve_address(address: str | None) -> str:
    """-n wins, then NAMESRV_ADDR (as the Java tool reads it)."""
    addr = address or os.environ.get("NAMESRV_ADDR")
    if not addr:
        raise UsageError("no name server: pass -n ADDR (host:port[;host:port] or mock://NAME) or set NAMESRV_ADDR")
    return addr.strip()


def _scheme(address: str) -> str:
    """Which backend an address names: "mock", "store" or "remoting" (host:port)."""
    if address == "mock" or address.startswith("mock:"):
        return "mock"
    if address.startswith("store:"):
        return "store"
    return "remoting"


_CAPABILITIES: dict[str, Capabilities] = {"mock": EMBEDDED_STORE, "store": BROKER_STORE, "remoting": LIVE_CLUSTER}


def capabilities_of(address: str) -> Capabilities:
    """What the backend ``address`` names is, without opening it: for a worker process, a Spark
    master, or a writer refused before it plans anything."""
    return _CAPABILITIES[_scheme(address.strip())]


def connect(address: str | None, *, timeout: float = 3.0, read_only: bool = False, **options: Any) -> Admin:
    """Open the backend the address names. Heavy modules load only for the backend chosen."""
    addr = resolve_address(address)
    scheme = _scheme(addr)
    if scheme == "mock":
        from mqadmin.mock.backend import open_mock

        return open_mock(addr, read_only=read_only)
    if scheme == "store":
        from mqadmin.offline import open_store  # read-only whatever ``read_only`` says

        return open_store(addr)
    from mqadmin.remoting.backend import RemotingAdmin

    return RemotingAdmin(addr, timeout=timeout, **options)


__all__ = [
    "Admin",
    "BrokerData",
    "BrokerInfo",
    "Capabilities",
    "PendingPull",
    "capabilities_of",
    "connect",
    "default_home",
    "resolve_address",
]
