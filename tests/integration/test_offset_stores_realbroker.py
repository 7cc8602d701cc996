"""Resets on real 5.5.1 brokers with the offset stores people run, across a broker restart.

``storeType=defaultRocksDB`` keeps the offset table in RocksDB and writes it every
flushConsumerOffsetInterval, as the file store does. ``configManagerVersion=v2`` writes each
offset commit into its RocksDB metadata store at once, but keeps a broker-side reset in memory
only (ConsumerOffsetManagerV2.assignResetOffset files its write under group and topic swapped),
so a clean restart loses it. mqadmin reads the store from the broker's settings, writes offsets
directly on v2 when nobody is online, and says per store when the change is durable.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb
from tests.support.shared_clusters import send_numbered

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

VERSION = "5.5.1"
COUNT, QUEUES = 40, 4
PER_QUEUE = COUNT // QUEUES
#: one broker per variant in one cluster, so one start and one restart cover both stores
VARIANTS = {"broker-a": "rocksdb-store", "broker-b": "v2-metadata"}


def topic_of(broker: str) -> str:
    return f"StoreTopic_{broker[-1]}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rb.RealCluster]:
    work = tmp_path_factory.mktemp("stores")
    conf = {broker: rb.BROKER_VARIANTS[variant] for broker, variant in VARIANTS.items()}
    with rb.RealCluster(VERSION, work / "rmq", brokers=len(VARIANTS), broker_conf=conf) as c:
        brokers = dict(c.brokers)
        for broker in VARIANTS:
            rb.create_topic(brokers[broker], topic_of(broker), QUEUES)
        for broker in VARIANTS:
            send_numbered(c.namesrv_addr, topic_of(broker), COUNT)
        yield c


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*args, "--json"], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def offsets(namesrv: str, group: str, topic: str) -> set[int | None]:
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        return {admin.consumer_offset(group, mq) for mq in admin.topic_route(topic).message_queues()}
    finally:
        admin.close()


def test_a_reset_survives_a_restart_and_the_durability_line_says_why(
    cluster: rb.RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        infos = {info.broker_name: info for info in admin.cluster_brokers()}
        assert set(infos) == set(VARIANTS)
        for broker in VARIANTS:
            info, topic = infos[broker], topic_of(broker)
            assert info.config is not None and info.server_side_reset, broker
            queues = admin.topic_route(topic).message_queues()
            assert {mq.broker_name for mq in queues} == {broker}
            for group in ("G_ours", "G_broker_side"):
                rb.create_group(info.addr, group)
                for mq in queues:
                    admin.update_consumer_offset(group, mq, PER_QUEUE)
            # the broker-side reset (what the Java tool sends on 5.x), for the ground truth below
            for mq in queues:
                admin.reset_offset_by_time(
                    topic, "G_broker_side", 0, True, broker_name=broker, queue_id=mq.queue_id, offset=0
                )
    finally:
        admin.close()
    for broker, variant in VARIANTS.items():
        topic = topic_of(broker)
        code, doc, err = cli(
            "resetOffsetByTime", "-n", cluster.namesrv_addr, "-g", "G_ours", "-t", topic, "--to-earliest", "--yes"
        )
        assert code == 0, (variant, err)
        assert doc["verified"] == QUEUES, variant
        (method,) = doc["method"].values()
        if variant == "v2-metadata":
            assert "configManagerVersion=v2 keeps a broker-side reset in memory only" in err
            assert method.startswith("direct offset update"), method
            assert "as it was applied" in doc["durability"] and "crash" not in doc["durability"]
        else:
            assert "server-side" in method, method
            assert "storeType=defaultRocksDB" in doc["durability"] and "crash" in doc["durability"]
        ours, theirs = (
            offsets(cluster.namesrv_addr, "G_ours", topic),
            offsets(cluster.namesrv_addr, "G_broker_side", topic),
        )
        assert ours == theirs == {0}, variant

    cluster.stop()
    cluster.start()
    for broker, variant in VARIANTS.items():
        topic = topic_of(broker)
        assert offsets(cluster.namesrv_addr, "G_ours", topic) == {0}, variant
        # the broker-side reset itself: lost by v2 on a clean restart, kept by the RocksDB offset store
        want = {PER_QUEUE} if variant == "v2-metadata" else {0}
        assert offsets(cluster.namesrv_addr, "G_broker_side", topic) == want, variant
