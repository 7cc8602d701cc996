"""Demo data: what ``mock://demo`` holds, its timeline anchored to now.

The demo's story ("demo_group stopped consuming 20 minutes ago; re-consume the last 30") is told
in times relative to now, but stored messages keep their times. So the demo records when it was
seeded and a fingerprint of its state; once it is older than ``DEMO_REFRESH_MS`` and nobody changed
it (same offsets, messages, topics and groups), it is seeded again, and the tour reads true at
any time of day. A demo someone changed (a reset, a replay, a client) is left as it is.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from mqadmin.errors import UsageError
from mqadmin.mock.cluster import CLUSTER_FILE, MockCluster
from mqadmin.mock.model import MockBroker
from mqadmin.mock.store import StoreWriteFailed
from mqadmin.model import Message
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.safety import atomic_write

DEMO_TOPIC = "TopicTest"
DEMO_GROUP = "demo_group"
DEMO_GROUP_DONE = "demo_group_done"
DEMO_MESSAGES = 20_000
DEMO_SPAN_MS = 3 * 3600 * 1000
#: demo_group stopped consuming this long ago, so it lags
DEMO_LAG_MS = 20 * 60 * 1000
#: an unchanged demo older than this is seeded again (the README's numbers drift by about 14
#: messages per queue and minute; its story reverses after 10 minutes)
DEMO_REFRESH_MS = 5 * 60 * 1000


def clock() -> int:
    """Now in epoch ms: the demo's one clock (tests replace it)."""
    return int(time.time() * 1000)


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
    now = clock() if now_ms is None else now_ms
    fill_topic(cluster, DEMO_TOPIC, DEMO_MESSAGES, now - DEMO_SPAN_MS, now - 1000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, DEMO_GROUP, DEMO_TOPIC, now - DEMO_LAG_MS)
        commit_at_time(broker, DEMO_GROUP_DONE, DEMO_TOPIC, None)
    cluster.flush()
    meta = dict(cluster.meta, demo={"seeded_at": now, "fingerprint": fingerprint(cluster)})
    atomic_write(cluster.root / CLUSTER_FILE, json.dumps(meta, indent=2) + "\n")


def fingerprint(cluster: MockCluster) -> str:
    """Everything a user can change in a store: topics, groups, consumer offsets, message counts."""
    state = []
    for name, b in sorted(cluster.brokers.items()):
        ends = {t: [b.max_offset(t, q) for q in range(int(cfg["readQueueNums"]))] for t, cfg in b.topics.items()}
        state.append([name, sorted(b.groups), b.offsets, ends])
    import hashlib  # only once the demo is due a refresh: not on every query's seed check

    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def reseed_if_stale(root: Path, now_ms: int | None = None) -> str | None:
    """Seed the demo at ``root`` again when it is stale and unchanged; returns a note saying so.

    Holds the store's lock meanwhile, so a demo a ``mockBroker`` is serving is never replaced; the
    fresh store is built beside and renamed in, so a reader sees the old or the new one."""
    now = clock() if now_ms is None else now_ms
    try:
        info = json.loads((root / CLUSTER_FILE).read_text()).get("demo")
        seeded_at = int(info["seeded_at"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # not a demo this code seeded: leave it alone
    if now - seeded_at < DEMO_REFRESH_MS:
        return None
    try:
        lock = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None  # a read-only home: the old demo is still readable
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # in use (a server, a reset): not now
        try:
            current = MockCluster(root)
        except UsageError:
            return None
        try:
            changed = fingerprint(current) != info.get("fingerprint")
        finally:
            current.close()
        if changed:
            return None
        if not _swap_in_fresh(root, now):
            return None
    finally:
        os.close(lock)
    age = (now - seeded_at) // 60_000
    return f"mock://demo was {age} min old and unchanged: seeded again, so its data ends now"


def _swap_in_fresh(root: Path, now: int) -> bool:
    """Build a fresh demo beside ``root`` and rename it in; on any file-system error (a full
    disk) the old demo stays in place and is used as it is."""
    try:
        fresh = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    except OSError:
        return False
    old = fresh.with_name(fresh.name + ".old")
    try:
        shutil.rmtree(fresh)
        cluster = MockCluster.create(fresh)
        seed_demo(cluster, now)
        cluster.close()
        os.rename(root, old)
        try:
            os.rename(fresh, root)
        except OSError:
            os.rename(old, root)
            raise
        return True
    except (OSError, StoreWriteFailed):
        return False
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def fill_lite_topic(
    broker: MockBroker, parent: str, counts: dict[str, int], start_ms: int, step_ms: int = 1, queues: int = 1
) -> int:
    """Lite messages as a producer sends them: ``counts[lite]`` messages of each lite topic of the
    lite parent ``parent`` (created if missing), in that order, store times from ``start_ms`` one
    ``step_ms`` apart, round-robin over the parent's queues; returns the next store time."""
    if broker.topic_config(parent) is None:
        broker.create_lite_topic(parent, queues)
    n = int(broker.topics[parent]["writeQueueNums"])
    t, sent = start_ms, 0
    for lite_topic, count in counts.items():
        for i in range(count):
            msg = Message(parent, f"{lite_topic}-{i}".encode(), {"__LITE_TOPIC": lite_topic}, queue_id=sent % n)
            broker.put_message(msg, store_timestamp=t)
            t, sent = t + step_ms, sent + 1
    return t
