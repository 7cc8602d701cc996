"""What GET_CONSUME_STATS and GET_BROKER_CONSUME_STATS compute, and the pull history they read.

Per queue: brokerOffset = max offset, consumerOffset = the committed offset (none: 0),
pullOffset = the larger of that and the last pull's next offset, lastTimestamp = store time of
the message before the consumer offset; consumeTps from the pulls of the last minute
(broker: AdminBrokerProcessor.java, getConsumeStats and fetchAllConsumeStatsInBroker).
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Final

from mqadmin.model import ConsumeStats, MessageQueue, OffsetWrapper

if TYPE_CHECKING:
    from mqadmin.mock.model import MockBroker

TPS_WINDOW_S: Final = 60


class PullHistory:
    """Where each group last pulled each queue to, and how many messages it pulled when."""

    def __init__(self) -> None:
        self._pulled: dict[tuple[str, str], deque[tuple[float, int]]] = defaultdict(deque)
        self._last_pull: dict[tuple[str, str, int], int] = {}

    def record(self, group: str, topic: str, queue_id: int, next_offset: int, count: int) -> None:
        self._last_pull[(group, topic, queue_id)] = next_offset
        if count:
            self._pulled[(group, topic)].append((time.time(), count))

    def next_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self._last_pull.get((group, topic, queue_id), 0)

    def tps(self, group: str, topics: list[str]) -> float:
        cutoff = time.time() - TPS_WINDOW_S
        total = 0
        for t in topics:
            events = self._pulled.get((group, t))
            if events:
                while events and events[0][0] < cutoff:
                    events.popleft()
                total += sum(n for _, n in events)
        return total / TPS_WINDOW_S


def consume_stats(broker: MockBroker, group: str, topic: str | None) -> ConsumeStats:
    """One group's stats over ``topic``, or every topic it has offsets for (those it subscribes
    to, when it has subscriptions); each queue below readQueueNums. Under the broker's lock."""
    if topic is not None:
        topics = [topic]
    else:
        topics = sorted({k.split("@", 1)[0] for k in broker.offsets if k.split("@", 1)[1] == group})
        subscribed = {t for c in broker.clients.get(group, {}).values() for t in c.subscriptions}
        if subscribed:
            topics = [t for t in topics if t in subscribed]
    table: dict[MessageQueue, OffsetWrapper] = {}
    for t in topics:
        cfg = broker.queue_config(t)
        if cfg is None:
            continue
        for qid in range(int(cfg["readQueueNums"])):
            broker_offset = max(broker.max_offset(t, qid), 0)
            consumer = broker.committed_offset(group, t, qid)
            consumer = max(consumer, 0)
            pulled = broker.pulls.next_offset(group, t, qid)
            last = broker.store_time_at(t, qid, consumer - 1) if consumer > 0 else None
            table[MessageQueue(t, broker.name, qid)] = OffsetWrapper(
                broker_offset=broker_offset,
                consumer_offset=consumer,
                last_timestamp=last or 0,
                pull_offset=max(consumer, pulled),
            )
    return ConsumeStats(table, broker.pulls.tps(group, topics))


def broker_consume_stats(broker: MockBroker, is_order: bool) -> list[tuple[str, list[ConsumeStats]]]:
    """Every subscription group's stats per topic, as the broker builds ConsumeStatsList: its
    write queues, no pull offset (so no inflight), and with ``is_order`` only order topics.
    Groups without offsets are listed with no stats. Under the broker's lock."""
    topics_of: dict[str, list[str]] = defaultdict(list)
    for key in broker.offsets:
        topic, _, group = key.partition("@")
        topics_of[group].append(topic)
    # thousands of groups stand on the same few queues: each queue's object and end, and each
    # store time, are read once per request, not once per group
    queues: dict[str, list[tuple[MessageQueue, int]]] = {}
    store_times: dict[tuple[str, int, int], int] = {}

    def last_time(t: str, qid: int, consumer: int) -> int:
        if consumer <= 0:
            return 0
        key = (t, qid, consumer)
        if key not in store_times:
            store_times[key] = broker.store_time_at(t, qid, consumer - 1) or 0
        return store_times[key]

    out: list[tuple[str, list[ConsumeStats]]] = []
    for group in sorted(broker.groups):
        clients = broker.clients.get(group)
        subscribed = {t for c in clients.values() for t in c.subscriptions} if clients else None
        per_topic: list[ConsumeStats] = []
        for t in sorted(topics_of.get(group, ())):
            cfg = broker.queue_config(t)
            if cfg is None or (is_order and not cfg.get("order")) or (subscribed and t not in subscribed):
                continue
            if t not in queues:
                queues[t] = [
                    (MessageQueue(t, broker.name, qid), max(broker.max_offset(t, qid), 0))
                    for qid in range(int(cfg["writeQueueNums"]))
                ]
            committed = broker.offsets.get(broker.key(t, group), {})
            table: dict[MessageQueue, OffsetWrapper] = {}
            for mq, broker_offset in queues[t]:
                consumer = max(committed.get(mq.queue_id, -1), 0)
                table[mq] = OffsetWrapper(broker_offset, consumer, last_time(t, mq.queue_id, consumer), 0)
            per_topic.append(ConsumeStats(table, broker.pulls.tps(group, [t])))
        out.append((group, per_topic))
    return out
