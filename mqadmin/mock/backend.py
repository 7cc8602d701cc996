"""The embedded backend: the admin facade served by a mock cluster in this process."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from mqadmin import errors, names
from mqadmin.config import default_home
from mqadmin.message import iter_messages
from mqadmin.mock import lite
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.model import MockBroker
from mqadmin.model import (
    EMBEDDED_STORE,
    BrokerInfo,
    Capabilities,
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    LiteGroupInfo,
    LiteLag,
    Message,
    MessageQueue,
    OffsetWrapper,
    PullResult,
    QueueStats,
    RawPull,
    SendResult,
    TopicRoute,
    in_queue_order,
)
from mqadmin.protocol.codes import RequestCode
from mqadmin.protocol.constants import RETRY_PREFIX

GET_LITE_GROUP_INFO = int(RequestCode.GET_LITE_GROUP_INFO)

DEMO_NAME = "demo"


def mock_root(address: str) -> tuple[Path, str | None]:
    """(store folder, mock name or None for an explicit path) for a ``mock`` address."""
    if address in ("mock", "mock:", "mock://"):
        raise errors.UsageError(
            f"-n {address} names no mock store: use mock://{DEMO_NAME} for the demo, mock://NAME or mock:///abs/path"
        )
    if not address.startswith("mock://"):
        raise errors.UsageError(f"bad mock address {address!r}: use mock://NAME or mock:///abs/path")
    rest = unquote(address[len("mock://") :])
    if rest.startswith("/"):
        return Path(rest), None
    if not rest or "/" in rest or rest in (".", ".."):
        raise errors.UsageError(f"bad mock name {rest!r}: use mock://NAME (letters, digits, - and _)")
    return Path(default_home()) / "mock" / rest, rest


def open_mock(address: str, *, read_only: bool = False) -> MockAdmin:
    root, name = mock_root(address)
    notes: list[str] = []
    if not (root / "cluster.json").exists():
        if root.exists() and root.is_dir() and any(root.iterdir()):
            raise errors.UsageError(f"{root} is not a mock broker store (no cluster.json)")
        if root.exists() and not root.is_dir():
            raise errors.UsageError(f"{root} is not a directory")
        if name != DEMO_NAME:  # a typo (mock://dmeo) must not leave a new empty store behind
            raise errors.UsageError(_no_store(address, root, name))
        _create(root, demo=True)
    elif name == DEMO_NAME:
        from mqadmin.mock.seed import reseed_if_stale

        note = reseed_if_stale(root)
        notes += [note] if note else []
    admin = MockAdmin(MockCluster(root, writable=not read_only), address)
    admin.notes = notes
    return admin


def _no_store(address: str, root: Path, name: str | None) -> str:
    """Why ``address`` names nothing, with the stores it may have meant."""
    import difflib

    home = root.parent
    known = sorted({DEMO_NAME} | {p.name for p in home.glob("*") if (p / "cluster.json").exists()})
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) if name else []
    hint = f"did you mean mock://{close[0]}? " if close else ""
    return (
        f"no mock store at {address} ({root}): {hint}mock://{DEMO_NAME} is the demo, created on first use; "
        f"'mqadmin mockBroker --store {address}' creates an empty one"
    )


def _create(root: Path, *, demo: bool) -> None:
    """Build the store beside its final place and rename it in, so racing processes can't half-see it."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        shutil.rmtree(tmp)
        cluster = MockCluster.create(tmp)
        if demo:
            from mqadmin.mock.seed import seed_demo

            seed_demo(cluster)
        cluster.close()
        try:
            os.rename(tmp, root)
        except OSError:
            if not (root / "cluster.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class MockAdmin:
    """Admin facade over a MockCluster; answers and errors match the remoting backend's."""

    capabilities: Capabilities = EMBEDDED_STORE

    def __init__(self, cluster: MockCluster, address: str):
        self.cluster = cluster
        self.address = address
        self._rr = itertools.count()
        #: what the user should hear about the store (printed once per run)
        self.notes: list[str] = []

    def _broker(self, name: str) -> MockBroker:
        broker = self.cluster.brokers.get(name)
        if broker is None:
            raise errors.ConnectError(f"no broker named {name!r} in {self.address}")
        return broker

    def _check(self, topic: str | None = None, group: str | None = None) -> None:
        """The broker's name rule (TopicValidator), before a name can reach the store's paths;
        with lite topics on, a lite topic's queue (%LMQ%$parent$lite) too."""
        lite_on = topic is not None and any(b.lite_on for b in self.cluster.brokers.values())
        problem = (lite.queue_name_problem(topic, lite_on) if topic is not None else None) or (
            names.group_problem(group) if group is not None else None
        )
        if problem:
            raise errors.InvalidParameter(problem)

    # routing
    def topic_route(self, topic: str) -> TopicRoute:
        route = self.cluster.topic_route(topic)
        if route is None:
            raise errors.TopicNotExist(f"No topic route info in name server for the topic: {topic}")
        return route

    def cluster_brokers(self, *, probe: bool = True) -> list[BrokerInfo]:
        return [
            BrokerInfo(b.name, b.addr, b.cluster, b.version, b.broker_config()) for b in self.cluster.brokers.values()
        ]

    def list_topics(self) -> list[str]:
        return self.cluster.list_topics()

    def list_groups(self, *, subscribed: bool = False) -> list[str]:
        if subscribed:
            return sorted({g for b in self.cluster.brokers.values() for g in b.groups})
        return self.cluster.list_groups()

    # queue offsets
    def min_offset(self, mq: MessageQueue) -> int:
        self._check(mq.topic)
        return self._broker(mq.broker_name).min_offset(mq.topic, mq.queue_id)

    def max_offset(self, mq: MessageQueue) -> int:
        self._check(mq.topic)
        return self._broker(mq.broker_name).max_offset(mq.topic, mq.queue_id)

    def search_offset(self, mq: MessageQueue, ts_ms: int) -> int:
        self._check(mq.topic)
        return self._broker(mq.broker_name).search_offset(mq.topic, mq.queue_id, ts_ms)

    def earliest_store_time(self, mq: MessageQueue) -> int:
        self._check(mq.topic)
        return self._broker(mq.broker_name).earliest_store_time(mq.topic, mq.queue_id)

    def queue_stats(self, queues: Sequence[MessageQueue]) -> dict[MessageQueue, QueueStats]:
        """Bounds of each queue (in process there is no round trip to save)."""
        out: dict[MessageQueue, QueueStats] = {}
        for mq in queues:
            self._check(mq.topic)  # as min_offset/max_offset: no bad name reaches the store's paths
            broker = self._broker(mq.broker_name)
            hi = broker.max_offset(mq.topic, mq.queue_id)
            last = broker.store_time_at(mq.topic, mq.queue_id, hi - 1) if hi > 0 else None
            out[mq] = QueueStats(broker.min_offset(mq.topic, mq.queue_id), hi, last or 0)
        return out

    # consumer offsets
    def consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        self._check(mq.topic, group)
        try:
            return self._broker(mq.broker_name).query_consumer_offset(
                group, mq.topic, mq.queue_id, set_zero_if_not_found=False
            )
        except errors.QueryNotFound:
            return None

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        self._check(mq.topic, group)
        self._broker(mq.broker_name).update_consumer_offset(group, mq.topic, mq.queue_id, offset)

    # group state
    def _stats_brokers(self, group: str, topic: str | None) -> list[MockBroker]:
        names: list[str] = []
        for t in [RETRY_PREFIX + group] + ([topic] if topic else []):
            route = self.cluster.topic_route(t)
            if route is not None:
                names.extend(b.broker_name for b in route.brokers if b.broker_name not in names)
        if not names:
            # no retry topic (a group made by updateSubGroup, a lite group): the brokers holding it
            names = [n for n, b in self.cluster.brokers.items() if group in b.groups]
        if not names:
            raise errors.TopicNotExist(f"No topic route info in name server for the topic: {RETRY_PREFIX}{group}")
        return [self._broker(n) for n in names]

    def consume_stats(self, group: str, topic: str | None = None, *, partial: bool = False) -> ConsumeStats:
        """In process every broker answers: ``partial`` never leaves one out."""
        self._check(topic, group)
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for broker in self._stats_brokers(group, topic):
            stats = broker.consume_stats(group, topic)
            table.update(stats.offsets)
            tps += stats.consume_tps
        return ConsumeStats(in_queue_order(table), tps)

    def consume_stats_all(
        self, groups: Sequence[str], *, partial: bool = False
    ) -> dict[str, ConsumeStats | errors.MqadminError]:
        """Each group's ``consume_stats`` (or the error it raises); in process, group by group."""
        return _each(self.consume_stats, groups)

    def consumer_connections(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        brokers = [b for b in self.cluster.brokers.values() if broker_addr in (None, b.addr)]
        clients = [c for b in brokers for c in b.online_clients(group)]
        if not clients:
            raise errors.ConsumerNotOnline(f"the consumer group[{group}] not online")
        unique = {c.client_id: c for c in clients}
        first = clients[0]
        subs: dict[str, str] = {}
        for c in clients:
            subs.update(c.subscriptions)
        return ConsumerConnection(
            connections=tuple(ClientConnection(c.client_id, c.addr, c.language, c.version) for c in unique.values()),
            consume_type=first.consume_type,
            message_model=first.message_model,
            consume_from_where=first.consume_from_where,
            subscriptions=subs,
        )

    def consumer_connections_all(self, groups: Sequence[str]) -> dict[str, ConsumerConnection | errors.MqadminError]:
        """Each group's ``consumer_connections`` (or the error it raises)."""
        return _each(self.consumer_connections, groups)

    def consumer_running_queues(self, group: str, client_id: str) -> frozenset[MessageQueue]:
        """Nothing: a client recorded here has no connection to be asked over (nor offline)."""
        return frozenset()

    def lite_group_info(
        self, group: str, lite_topic: str | None, top_k: int
    ) -> dict[str, LiteGroupInfo | errors.MqadminError]:
        """Each 5.5+ broker's answer (see mock.lite), as the remoting backend reads it; brokers
        before 5.5 do not know the request."""
        out: dict[str, LiteGroupInfo | errors.MqadminError] = {}
        for name, broker in self.cluster.brokers.items():
            if broker.version_tuple < lite.LITE_SINCE:
                out[name] = errors.RequestCodeNotSupported(f" request type {GET_LITE_GROUP_INFO} not supported")
                continue
            try:
                body = broker.lite_group_info(group, lite_topic if lite_topic is not None else "", top_k)
            except errors.MqadminError as exc:
                out[name] = exc
                continue
            out[name] = _lite_info(body)
        return out

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
    ) -> dict[MessageQueue, int]:
        self._check(topic, group)
        # a named broker is asked without the route, as the remoting backend does (an LMQ has none)
        names = [broker_name] if broker_name else [b.broker_name for b in self.topic_route(topic).brokers]
        out: dict[MessageQueue, int] = {}
        for name in names:
            table = self._broker(name).reset_offset(topic, group, ts_ms, force, queue_id, offset)
            out.update({MessageQueue(topic, name, q): o for q, o in table.items()})
        return out

    # messages
    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult:
        """``group`` is accepted and not checked: the embedded mock has no ACL."""
        self._check(mq.topic)
        broker = self._broker(mq.broker_name)
        if broker.queue_config(mq.topic) is None:  # as a broker answers PULL_MESSAGE
            raise errors.TopicNotExist(f"topic[{mq.topic}] not exist, apply first please!", broker.addr)
        outcome = broker.pull(None, mq.topic, mq.queue_id, offset, max_nums)
        messages = [m for r in outcome.records for m in iter_messages(r)]
        for m in messages:
            m.broker_name = mq.broker_name
        return PullResult(outcome.status, outcome.next_begin_offset, outcome.min_offset, outcome.max_offset, messages)

    def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> _LazyPull:
        """``pull`` with the records left encoded (views of the store's files), run when its
        result is asked for: in process there is no round trip to overlap."""
        return _LazyPull(self, mq, offset, max_nums)

    def send(self, topic: str, message: Message, queue: MessageQueue | None = None) -> SendResult:
        self._check(topic)
        if queue is None:
            route = self.topic_route(topic)
            writable = [MessageQueue(topic, q.broker_name, i) for q in route.queues for i in range(q.write_queue_nums)]
            queue = writable[next(self._rr) % len(writable)]
        message.topic = topic
        message.queue_id = queue.queue_id
        stored = self._broker(queue.broker_name).put_message(message)
        return SendResult(stored.msg_id, queue, stored.queue_offset, stored.uniq_key)

    def send_back(self, group: str, message: Message, delay_level: int = 0) -> None:
        self._check(group=group)
        self._broker(message.broker_name).send_back(group, message.commitlog_offset, delay_level)

    def refresh(self) -> None:
        pass  # every call reads the store itself: nothing is kept to forget

    def close(self) -> None:
        self.cluster.close()


class _LazyPull:
    """A pull of the embedded store that runs on ``result()`` (a dropped one costs nothing)."""

    def __init__(self, admin: MockAdmin, mq: MessageQueue, offset: int, max_nums: int):
        self._args = (admin, mq, offset, max_nums)

    def result(self) -> RawPull:
        admin, mq, offset, max_nums = self._args
        broker = admin._broker(mq.broker_name)
        if broker.queue_config(mq.topic) is None:  # as pull()
            raise errors.TopicNotExist(f"topic[{mq.topic}] not exist, apply first please!", broker.addr)
        out = broker.pull(None, mq.topic, mq.queue_id, offset, max_nums)
        return RawPull(out.status, out.next_begin_offset, out.min_offset, out.max_offset, out.records)


def _lite_info(body: dict[str, Any]) -> LiteGroupInfo:
    """GetLiteGroupInfoResponseBody as the model builds it, read as mqadmin.remoting.lite reads
    the broker's: times of -1 or 0 are none, the top-K entries carry no consumer offset."""

    def when(ms: int) -> int | None:
        return ms if ms > 0 else None

    w = body.get("liteTopicOffsetWrapper")
    return LiteGroupInfo(
        body["group"],
        body["parentTopic"],
        body["totalLagCount"],
        when(body["earliestUnconsumedTimestamp"]),
        tuple(
            LiteLag(t["liteTopic"], t["lagCount"], None, when(t["earliestUnconsumedTimestamp"]))
            for t in body.get("lagCountTopK") or ()
        ),
        OffsetWrapper(w["brokerOffset"], w["consumerOffset"], w["lastTimestamp"], w["pullOffset"]) if w else None,
    )


T = TypeVar("T")


def _each(fn: Callable[[str], T], groups: Sequence[str]) -> dict[str, T | errors.MqadminError]:
    """``fn`` of each group, or the error it raised: one group's failure is that group's answer."""
    out: dict[str, T | errors.MqadminError] = {}
    for group in groups:
        try:
            out[group] = fn(group)
        except errors.MqadminError as exc:
            out[group] = exc
    return out
