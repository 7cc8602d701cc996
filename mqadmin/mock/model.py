"""The mock broker: broker semantics over a RocketMQ-layout store.

One model with two doors — called in process by the embedded backend, and served over TCP.
Behaviour follows the broker version set in the store: the time search (``search``), "no
offset" answers and the reset path (``reset``) differ between 4.x, 5.0–5.1 and 5.2+; the
consume stats live in ``stats``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mqadmin import errors, names
from mqadmin.message import decode_message, java_string_hash, new_uniq_key, offset_msg_id, pack_host
from mqadmin.mock import lite, reset, stats
from mqadmin.mock.search import search_offset
from mqadmin.mock.store import BatchFields, BatchItem, BrokerStore, ConsumeQueue
from mqadmin.model import ConsumeStats, Message
from mqadmin.protocol import versions
from mqadmin.protocol.constants import DEFAULT_MAX_RECONSUME_TIMES, DLQ_PREFIX, RETRY_PREFIX
from mqadmin.timeparse import now_ms

#: no record is larger (4 MiB body + 32 KiB properties + header, with room to spare)
MAX_RECORD_SIZE = 8 * 1024 * 1024


@dataclass
class ClientInfo:
    """A consumer seen through heartbeats (only the TCP door has them)."""

    client_id: str
    group: str
    addr: str
    language: str
    version: int
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, str] = field(default_factory=dict)
    #: called with (topic, {queue_id: offset}) when the broker pushes a reset (client-push mode)
    on_reset: Callable[[str, dict[int, int]], None] | None = None


@dataclass
class PullOutcome:
    status: str  # the store's status name, as the broker puts it in the remark
    next_begin_offset: int
    min_offset: int
    max_offset: int
    #: encoded records: bytes, or views of the store's mapped files
    records: list[bytes | memoryview]


class MockBroker:
    """One broker: its topics, queues, groups and offsets, with a real broker's answers."""

    def __init__(
        self,
        name: str,
        cluster: str,
        store: BrokerStore,
        version: str,
        addr: str = "",
        settings: dict[str, str] | None = None,
    ):
        self.name = name
        self.cluster = cluster
        self.store = store
        self.version = version
        #: broker.conf entries that change behaviour (e.g. useServerSideResetOffset=false)
        self.settings = dict(settings or {})
        #: how the embedded backend names it; ``addr`` becomes a host:port while a server serves it
        self.local_addr = f"mock://{name}"
        self.addr = addr or self.local_addr
        self.default_store_host = "127.0.0.1:10911"
        self._v = versions.version_tuple(version)
        self._lock = threading.RLock()
        self.topics: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.offsets: dict[str, dict[int, int]] = {}
        self.pending_resets: dict[str, dict[int, int]] = {}
        self.clients: dict[str, dict[str, ClientInfo]] = defaultdict(dict)
        self.pulls = stats.PullHistory()
        self._arrival = threading.Condition(self._lock)
        self._dirty = False
        #: consumer offsets: bumped on every change; the version consumerOffset.json holds
        self._offsets_version = 0
        self._offsets_saved = 0
        #: one writer of consumerOffset.json at a time; waiters find their change already written
        self._persist_lock = threading.Lock()
        self.load()

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return self._v

    # ---- behaviour switches ----
    def broker_config(self) -> dict[str, str]:
        """What GET_BROKER_CONFIG answers: a few of a real broker's properties, with the
        reset setting where the version has it (5.1+) and the store's settings over them."""
        config = {"brokerName": self.name, "brokerClusterName": self.cluster}
        if self._v >= (5, 1):
            config[versions.SERVER_SIDE_RESET_KEY] = str(versions.server_side_reset(self._v)).lower()
            config |= self.settings
        return config

    @property
    def server_side_reset(self) -> bool:
        """useServerSideResetOffset: off in 5.1, on by default from 5.2.0, as set in the store
        (common: BrokerConfig.java)."""
        return versions.resets_on_broker(self._v, self.broker_config())

    @property
    def lite_on(self) -> bool:
        """Lite topics: a 5.5+ broker with enableLmq and enableMultiDispatch, which a 5.5+ mock
        store has on unless its broker_config turns one off (a real broker's default is off)."""
        return self._v >= lite.LITE_SINCE and all(self.settings.get(k, "true") != "false" for k in lite.SWITCHES)

    @property
    def lower_boundary_search(self) -> bool:
        """The time search answers LOWER/UPPER boundaries from 5.1.1 (store: ConsumeQueue.java)."""
        return versions.lower_boundary_search(self._v)

    # ---- persistence ----
    def load(self) -> None:
        topics = self.store.load_config("topics.json").get("topicConfigTable", {})
        self.topics = {str(k): dict(v) for k, v in topics.items()}
        groups = self.store.load_config("subscriptionGroup.json").get("subscriptionGroupTable", {})
        self.groups = {str(k): dict(v) for k, v in groups.items()}
        table = self.store.load_config("consumerOffset.json").get("offsetTable", {})
        self.offsets = {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}
        self._offsets_version = self._offsets_saved = 0

    def flush(self) -> None:
        """Persist config files, as the broker's periodic persist does."""
        self.persist_configs()
        # Outside self._lock: persist_offsets takes its own lock first, then self._lock.
        self.persist_offsets(keep_bak=True)

    def persist_configs(self) -> None:
        """Write topics.json and subscriptionGroup.json if anything changed (each atomically, with
        fsync). The TCP door calls this before it acknowledges a topic or group it created, so an
        acknowledged creation survives a crash, as the broker's config managers persist on update."""
        with self._lock:
            if not self._dirty:
                return
            stamp = {"counter": 1, "stateVersion": 0, "timestamp": now_ms()}
            self.store.save_config(
                "topics.json", {"dataVersion": stamp, "topicConfigTable": dict(sorted(self.topics.items()))}
            )
            self.store.save_config(
                "subscriptionGroup.json",
                {"dataVersion": stamp, "subscriptionGroupTable": dict(sorted(self.groups.items()))},
            )
            self._dirty = False

    @property
    def offsets_version(self) -> int:
        return self._offsets_version

    def offsets_changed(self) -> None:
        self._offsets_version += 1

    def persist_offsets(self, version: int | None = None, *, keep_bak: bool = False) -> bool:
        """Make consumerOffset.json hold every offset change up to ``version`` (default: all so far).

        The TCP door calls this before it acknowledges a request that moved an offset, so an
        acknowledged commit or reset survives a crash (a real broker only flushes every 5 s).
        Group commit: concurrent callers queue on one lock, and the first writes everything
        changed so far, so the others find their change already on disk and return at once.
        Returns whether this call wrote the file.
        """
        with self._persist_lock:
            with self._lock:
                target = self._offsets_version if version is None else version
                if self._offsets_saved >= target:
                    return False
                doc = {"offsetTable": {k: dict(sorted(v.items())) for k, v in sorted(self.offsets.items())}}
                snapshot = self._offsets_version
            self.store.save_config("consumerOffset.json", doc, keep_bak=keep_bak)
            self._offsets_saved = snapshot
            return True

    # ---- topics and groups ----
    def create_topic(
        self,
        topic: str,
        read_queues: int = 4,
        write_queues: int | None = None,
        perm: int = 6,
        attributes: dict[str, str] | None = None,
    ) -> None:
        """Create or update a topic; ``attributes``: the update's +key/-key changes (5.x)."""
        problem = names.topic_problem(topic)
        if problem:
            raise errors.InvalidParameter(problem, self.addr)
        with self._lock:
            kept = (self.topics.get(topic) or {}).get("attributes")
            self.topics[topic] = {
                "order": False,
                "perm": perm,
                "readQueueNums": read_queues,
                "topicFilterType": "SINGLE_TAG",
                "topicName": topic,
                "topicSysFlag": 0,
                "writeQueueNums": read_queues if write_queues is None else write_queues,
            }
            if kept or attributes:
                self.topics[topic]["attributes"] = lite.altered(kept, attributes or {})
            self._dirty = True

    def ensure_group(self, group: str, *, retry_topic: bool = True, attributes: dict[str, str] | None = None) -> None:
        """Create the subscription group (autoCreateSubscriptionGroup) and its retry topic; an
        explicit updateSubGroup (``retry_topic=False``) creates the group alone, as the broker's
        updateAndCreateSubscriptionGroup does (broker: AdminBrokerProcessor.java)."""
        problem = names.group_problem(group)
        if problem:
            raise errors.InvalidParameter(problem, self.addr)
        with self._lock:
            if group not in self.groups:
                self.groups[group] = {
                    "brokerId": 0,
                    "consumeBroadcastEnable": True,
                    "consumeEnable": True,
                    "consumeFromMinEnable": True,
                    "groupName": group,
                    "notifyConsumerIdsChangedEnable": True,
                    "retryMaxTimes": DEFAULT_MAX_RECONSUME_TIMES,
                    "retryQueueNums": 1,
                    "whichBrokerWhenConsumeSlowly": 1,
                }
                self._dirty = True
            if attributes:  # the update's +key/-key changes (5.x)
                self.groups[group]["attributes"] = lite.altered(self.groups[group].get("attributes"), attributes)
                self._dirty = True
            retry = RETRY_PREFIX + group
            if retry_topic and retry not in self.topics:
                self.create_topic(retry, 1)

    def create_lite_topic(self, parent: str, queues: int = 4) -> None:
        """A lite parent topic (updateTopic with the attribute +message.type=LITE)."""
        self.create_topic(parent, queues, attributes={"+" + lite.MESSAGE_TYPE: "LITE"})

    def ensure_lite_group(self, group: str, parent: str) -> None:
        """A lite group of ``parent`` (updateSubGroup with the attribute +lite.bind.topic=PARENT)."""
        self.ensure_group(group, retry_topic=False, attributes={"+" + lite.BIND_TOPIC: parent})

    def lite_group_info(self, group: str, lite_topic: str | None, top_k: int) -> dict[str, Any]:
        """GET_LITE_GROUP_INFO's body (see mock.lite)."""
        with self._lock:
            return lite.group_info(self, group, lite_topic, top_k)

    def topic_config(self, topic: str) -> dict[str, Any] | None:
        return self.topics.get(topic)

    def queue_config(self, topic: str) -> dict[str, Any] | None:
        """The config the broker reads a queue by (selectTopicConfig): a topic's, or with lite
        topics on, the one-queue config of any LMQ name. Routes use ``topic_config``: an LMQ has none."""
        cfg = self.topics.get(topic)
        if cfg is None and self.lite_on and lite.split(topic) is not None:
            return lite.queue_config(topic)
        return cfg

    def require_topic(self, topic: str) -> dict[str, Any]:
        cfg = self.queue_config(topic)
        if cfg is None:
            raise errors.TopicNotExist(f"topic[{topic}] not exist, apply first please!", self.addr)
        return cfg

    # ---- queue offsets ----
    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return self.store.queue(topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self._queue(topic, queue_id).min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self._queue(topic, queue_id).max_offset

    def store_time_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self._queue(topic, queue_id)
        if not (cq.min_offset <= offset < cq.max_offset):
            return None
        return self.store.store_time(cq.entry(offset))

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        cq = self._queue(topic, queue_id)
        t = self.store_time_at(topic, queue_id, cq.min_offset)
        return -1 if t is None else t

    def search_offset(self, topic: str, queue_id: int, ts: int, boundary: str = "LOWER") -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP as this broker version answers it."""
        cq = self._queue(topic, queue_id)
        return search_offset(self.store, cq, ts, boundary, lower_boundary=self.lower_boundary_search)

    # ---- consumer offsets ----
    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}@{group}"

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when there is none (ConsumerOffsetManager.queryOffset)."""
        return self.offsets.get(self.key(topic, group), {}).get(queue_id, -1)

    def query_consumer_offset(
        self, group: str, topic: str, queue_id: int, set_zero_if_not_found: bool | None = None
    ) -> int:
        """QUERY_CONSUMER_OFFSET; raises QueryNotFound for "no offset".

        A pending server-side reset answers first. Without a committed offset, a queue whose
        first message is still at offset 0 answers 0, as does (before 5.1) an empty queue;
        5.0+ answer "not found" when setZeroIfNotFound is false (broker:
        ConsumerManageProcessor.java, queryConsumerOffset).
        """
        pending = self.pending_resets.get(self.key(topic, group), {}).get(queue_id)
        if pending is not None and self.server_side_reset:
            return pending
        offset = self.committed_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        not_found = errors.QueryNotFound("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first", self.addr)
        if set_zero_if_not_found is False and versions.query_offset_not_found_strict(self._v):
            raise not_found
        cq = self._queue(topic, queue_id)
        has_first = cq.max_offset > 0
        if cq.min_offset <= 0 and (has_first or not versions.zero_offset_needs_first_message(self._v)):
            return 0
        raise not_found

    def update_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> str:
        """UPDATE_CONSUMER_OFFSET; returns the remark (non-empty when the update was ignored)."""
        with self._lock:
            if versions.checks_group_on_commit(self._v):
                if group not in self.groups:
                    raise errors.SubscriptionGroupNotExist(f"subscription group not exist, {group}", self.addr)
                if self.queue_config(topic) is None:
                    raise errors.TopicNotExist(f"topic not exist, {topic}", self.addr)
            key = self.key(topic, group)
            if self.server_side_reset and queue_id in self.pending_resets.get(key, {}):
                return "Offset has been previously reset"
            table = self.offsets.setdefault(key, {})
            if table.get(queue_id) != offset:  # a commit that moves nothing costs no write
                table[queue_id] = offset
                self.offsets_changed()
            return ""

    def groups_with_offsets(self) -> list[str]:
        return sorted({k.split("@", 1)[1] for k in self.offsets})

    # ---- group state ----
    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS (see mock.stats)."""
        with self._lock:
            return stats.consume_stats(self, group, topic)

    def broker_consume_stats(self, is_order: bool = False) -> list[tuple[str, list[ConsumeStats]]]:
        """GET_BROKER_CONSUME_STATS: every subscription group's stats per topic (see mock.stats)."""
        with self._lock:
            return stats.broker_consume_stats(self, is_order)

    # ---- clients ----
    def register_client(self, info: ClientInfo) -> None:
        with self._lock:
            self.ensure_group(info.group)
            self.clients[info.group][info.client_id] = info

    def unregister_client(self, group: str, client_id: str) -> None:
        with self._lock:
            self.clients.get(group, {}).pop(client_id, None)

    def online_clients(self, group: str) -> list[ClientInfo]:
        return list(self.clients.get(group, {}).values())

    # ---- reset ----
    def reset_offset(
        self, topic: str, group: str, timestamp: int, is_force: bool, queue_id: int = -1, offset: int = -1
    ) -> dict[int, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET, server side from 5.2, else pushed to clients (see mock.reset)."""
        with self._lock:
            if self.server_side_reset:
                return reset.reset_server_side(self, topic, group, timestamp, queue_id, offset)
            return reset.reset_client_push(self, topic, group, timestamp, is_force)

    def take_pending_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        with self._lock:
            pending = self.pending_resets.get(self.key(topic, group))
            return pending.pop(queue_id, None) if pending else None

    # ---- messages ----
    def put_message(
        self, msg: Message, *, store_host: str | None = None, store_timestamp: int | None = None
    ) -> Message:
        """SEND_MESSAGE: assign offsets and store time, add UNIQ_KEY if missing (as 5.x does)."""
        problem = names.topic_problem(msg.topic)
        if problem:
            raise errors.InvalidParameter(problem, self.addr)
        with self._arrival:
            cfg = self.topics.get(msg.topic)
            if cfg is None:
                self.create_topic(msg.topic, 4)
                cfg = self.topics[msg.topic]
            if not 0 <= msg.queue_id < int(cfg["writeQueueNums"]):
                raise errors.SystemError_(f"request queueId[{msg.queue_id}] is illegal", self.addr)
            msg.properties.setdefault("UNIQ_KEY", new_uniq_key())
            msg.store_timestamp = store_timestamp if store_timestamp is not None else now_ms()
            if not msg.born_timestamp:
                msg.born_timestamp = msg.store_timestamp
            msg.store_host = store_host or self.store_host
            self.store.put(msg, self.lite_dispatch(msg.topic, msg.properties))
            msg.msg_id = offset_msg_id(msg.store_host, msg.commitlog_offset)
            msg.broker_name = self.name
            self._dirty = True
            self._arrival.notify_all()
            return msg

    def put_batch(
        self,
        topic: str,
        queue_id: int,
        items: Sequence[BatchItem],
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "127.0.0.1:0",
        reconsume_times: int = 0,
        lmqs: Sequence[str] = (),
    ) -> tuple[int, list[str]]:
        """A producer's send into one queue, all or nothing, as ``put_message`` stores one; the
        items come encoded (properties with UNIQ_KEY already set). Returns the first queue offset
        and the offset msg ids. ``lmqs``: a lite message's LMQ (``lite_dispatch``)."""
        problem = names.topic_problem(topic)
        if problem:
            raise errors.InvalidParameter(problem, self.addr)
        with self._arrival:
            cfg = self.topics.get(topic)
            if cfg is None:
                self.create_topic(topic, 4)
                cfg = self.topics[topic]
            if not 0 <= queue_id < int(cfg["writeQueueNums"]):
                raise errors.SystemError_(f"request queueId[{queue_id}] is illegal", self.addr)
            stored = now_ms()
            store_host = self.store_host
            fields = BatchFields(sys_flag, born_timestamp or stored, born_host, stored, store_host, reconsume_times)
            first, offsets = self.store.put_batch(topic, queue_id, items, fields, lmqs)
            self._dirty = True
            self._arrival.notify_all()
        host = pack_host(store_host)[0].hex().upper()  # offset_msg_id, the host packed once
        return first, [f"{host}{offset:016X}" for offset in offsets]

    def lite_dispatch(self, topic: str, props: dict[str, str]) -> list[str]:
        """The LMQ a message sent with a lite topic goes to, named in its INNER_MULTI_DISPATCH
        (SendMessageProcessor sets it for any topic; the store dispatches it with lite topics on)."""
        name = props.get(lite.LITE_TOPIC)
        if not name or not self.lite_on or topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
            return []
        lmq = lite.lmq_name(topic, name)
        if lite.queue_name_problem(lmq, True):
            raise errors.InvalidParameter(f"lite topic {name!r}: {lite.queue_name_problem(lmq, True)}", self.addr)
        props[lite.MULTI_DISPATCH] = lmq
        return [lmq]

    @property
    def store_host(self) -> str:
        """The host:port stamped into stored messages (and so into offset msg ids): the served
        address, else a per-broker default so ids never collide across brokers."""
        if self.addr != self.local_addr:
            return self.addr
        return self.default_store_host

    def pull(
        self,
        group: str | None,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = 32,
        tags: set[str] | None = None,
        max_bytes: int = 4 << 20,
    ) -> PullOutcome:
        """getMessage (store: DefaultMessageStore.java) with its statuses; records stay encoded."""
        with self._lock:
            return self._pull(group, topic, queue_id, offset, max_nums, tags, max_bytes)

    def _pull(
        self,
        group: str | None,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        tags: set[str] | None,
        max_bytes: int,
    ) -> PullOutcome:
        cq = self._queue(topic, queue_id)
        lo, hi = cq.min_offset, cq.max_offset
        if group is not None and self.server_side_reset:
            reset = self.take_pending_reset(group, topic, queue_id)
            if reset is not None:
                return PullOutcome("OFFSET_RESET", reset, lo, hi, [])
        if hi == 0:
            status = "NO_MESSAGE_IN_QUEUE"
            return PullOutcome(status, 0, lo, hi, [])
        if offset < lo:
            return PullOutcome("OFFSET_TOO_SMALL", lo, lo, hi, [])
        if offset == hi:
            return PullOutcome("OFFSET_OVERFLOW_ONE", offset, lo, hi, [])
        if offset > hi:
            return PullOutcome("OFFSET_OVERFLOW_BADLY", hi, lo, hi, [])
        records: list[bytes | memoryview] = []
        size = 0
        next_offset = offset
        scan_limit = max(max_nums, 1) * 16 if tags else max_nums
        view = self.store.commitlog.view
        codes = {java_string_hash(t) for t in tags} if tags is not None else None
        # entries unpacked in bulk, records as views of the mapped commit log (no copies)
        for phy, entry_size, code in cq.entries(offset, min(hi, offset + max(scan_limit, 1))):
            if len(records) >= max_nums:
                break
            next_offset += 1
            if codes is not None and code not in codes:
                continue
            if records and size + entry_size > max_bytes:
                next_offset -= 1
                break
            records.append(view(phy, entry_size))
            size += entry_size
        if group is not None:
            self.pulls.record(group, topic, queue_id, next_offset, len(records))
        return PullOutcome("FOUND" if records else "NO_MATCHED_MESSAGE", next_offset, lo, hi, records)

    def wait_for_message(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """Long polling: block until the queue grows past ``offset`` or the time is up."""
        deadline = time.monotonic() + timeout_s
        with self._arrival:
            while self.max_offset(topic, queue_id) <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._arrival.wait(left)
            return True

    def message_at(self, commitlog_offset: int) -> Message:
        """VIEW_MESSAGE_BY_ID: the record at a commit-log offset."""
        try:
            head = self.store.commitlog.read(commitlog_offset, 4)
            size = int.from_bytes(head, "big", signed=True)
            if not 0 < size <= MAX_RECORD_SIZE:  # not the start of a record: never read gigabytes
                raise ValueError(size)
            msg, _ = decode_message(self.store.commitlog.read(commitlog_offset, size), decompress=False)
        except (errors.StoreError, ValueError):
            raise errors.SystemError_(f"can not find message by the offset, {commitlog_offset}", self.addr) from None
        msg.broker_name = self.name
        return msg

    def send_back(
        self,
        group: str,
        commitlog_offset: int,
        delay_level: int,
        max_reconsume_times: int = DEFAULT_MAX_RECONSUME_TIMES,
    ) -> Message:
        """CONSUMER_SEND_MSG_BACK: copy to %RETRY%group (or %DLQ%group once retries run out)."""
        if group not in self.groups:
            raise errors.SubscriptionGroupNotExist(f"subscription group not exist, {group}", self.addr)
        original = self.message_at(commitlog_offset)
        reconsume = original.reconsume_times + 1
        dlq = delay_level < 0 or original.reconsume_times >= max_reconsume_times
        target = (DLQ_PREFIX if dlq else RETRY_PREFIX) + group
        if target not in self.topics:
            self.create_topic(target, 1)
        props = dict(original.properties)
        props.setdefault("RETRY_TOPIC", original.topic)
        props.setdefault("ORIGIN_MESSAGE_ID", original.msg_id)
        props["RECONSUME_TIME"] = str(reconsume)
        props["DELAY"] = str(3 + original.reconsume_times if delay_level == 0 else max(delay_level, 0))
        copy = Message(
            topic=target,
            body=original.body,
            properties=props,
            flag=original.flag,
            queue_id=0,
            sys_flag=original.sys_flag,
            born_timestamp=original.born_timestamp,
            born_host=original.born_host,
            reconsume_times=reconsume,
        )
        return self.put_message(copy)
