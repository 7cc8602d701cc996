"""Demo data: what ``mock://demo`` holds the first time it is used."""

from __future__ import annotations

import random
import time

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.model import RETRY_PREFIX, MockBroker
from mqadmin.model import Message

DEMO_TOPIC = "TopicTest"
DEMO_GROUP = "demo_group"
DEMO_GROUP_DONE = "demo_group_done"
DEMO_MESSAGES = 20_000
DEMO_SPAN_MS = 3 * 3600 * 1000
#: demo_group stopped consuming this long ago, so it lags
DEMO_LAG_MS = 20 * 60 * 1000


def fill_topic(
    cluster: MockCluster,
    topic: str,
    count: int,
    start_ms: int,
    end_ms: int,
    *,
    queues_per_broker: int = 4,
    body_size: int = 0,
    seed: int = 7,
) -> None:
    """``count`` messages with store times spread from ``start_ms`` to ``end_ms``, round-robin
    over every queue of every broker; tags TagA/TagB/TagC and an ``order-N`` key each."""
    rng = random.Random(seed)
    cluster.create_topic(topic, queues_per_broker)
    targets = [(b, q) for b in cluster.brokers.values() for q in range(queues_per_broker)]
    step = (end_ms - start_ms) / max(count - 1, 1)
    for i in range(count):
        broker, qid = targets[i % len(targets)]
        store_ts = int(start_ms + i * step)
        tag = ("TagA", "TagB", "TagC")[rng.randrange(3)]
        text = f'{{"seq":{i},"sms_to":"+8613{rng.randrange(10**9):09d}","text":"verification code {rng.randrange(10**6):06d}"}}'
        body = text.encode()
        if body_size > len(body):
            body += b" " * (body_size - len(body))
        msg = Message(
            topic=topic,
            body=body,
            properties={"TAGS": tag, "KEYS": f"order-{i}", "WAIT": "true"},
            queue_id=qid,
            born_timestamp=store_ts - rng.randrange(1, 5),
            born_host="127.0.0.1:52100",
        )
        broker.put_message(msg, store_timestamp=store_ts)


def commit_at_time(broker: MockBroker, group: str, topic: str, ts_ms: int | None) -> None:
    """Commit the group's offsets where ``ts_ms`` lands on every queue (as if it consumed up to
    then); ``None`` commits the max offsets (everything consumed)."""
    broker.ensure_group(group)
    cfg = broker.topic_config(topic)
    assert cfg is not None
    for qid in range(int(cfg["readQueueNums"])):
        offset = broker.max_offset(topic, qid) if ts_ms is None else broker.search_offset(topic, qid, ts_ms)
        broker.update_consumer_offset(group, topic, qid, offset)
    broker.update_consumer_offset(group, RETRY_PREFIX + group, 0, 0)


def seed_demo(cluster: MockCluster, now_ms: int | None = None) -> None:
    now = int(time.time() * 1000) if now_ms is None else now_ms
    fill_topic(cluster, DEMO_TOPIC, DEMO_MESSAGES, now - DEMO_SPAN_MS, now - 1000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, DEMO_GROUP, DEMO_TOPIC, now - DEMO_LAG_MS)
        commit_at_time(broker, DEMO_GROUP_DONE, DEMO_TOPIC, None)
    cluster.flush()
