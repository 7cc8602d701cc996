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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

VERSION = "5.5.1"
TOPIC, COUNT, QUEUES = "StoreTopic", 40, 4
PER_QUEUE = COUNT // QUEUES


@pytest.fixture(scope="module", params=["rocksdb-store", "v2-metadata"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[rb.RealCluster]:
    work = tmp_path_factory.mktemp(f"stores-{request.param}")
    with rb.RealCluster(VERSION, work / "rmq", extra_broker_conf=rb.BROKER_VARIANTS[request.param]) as c:
        c.create_topic(TOPIC, QUEUES)
        admin = RemotingAdmin(c.namesrv_addr, timeout=10)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    admin.topic_route(TOPIC)
                    break
                except Exception:
                    assert time.monotonic() < deadline, "no route for the topic"
                    time.sleep(0.5)
            for i in range(COUNT):
                admin.send(TOPIC, Message(TOPIC, f"m{i}".encode()))
        finally:
            admin.close()
        yield c


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*args, "--json"], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def offsets(namesrv: str, group: str) -> set[int | None]:
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        return {admin.consumer_offset(group, mq) for mq in admin.topic_route(TOPIC).message_queues()}
    finally:
        admin.close()


def test_a_reset_survives_a_restart_and_the_durability_line_says_why(
    cluster: rb.RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    v2 = cluster.extra_broker_conf.get("configManagerVersion") == "v2"
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        (info,) = admin.cluster_brokers()
        assert info.config is not None and info.server_side_reset
        queues = admin.topic_route(TOPIC).message_queues()
        for group in ("G_ours", "G_broker_side"):
            cluster.create_group(group)
            for mq in queues:
                admin.update_consumer_offset(group, mq, PER_QUEUE)
        # the broker-side reset (what the Java tool sends on 5.x), for the ground truth below
        for mq in queues:
            admin.reset_offset_by_time(
                TOPIC, "G_broker_side", 0, True, broker_name="broker-a", queue_id=mq.queue_id, offset=0
            )
    finally:
        admin.close()
    code, doc, err = cli(
        "resetOffsetByTime", "-n", cluster.namesrv_addr, "-g", "G_ours", "-t", TOPIC, "--to-earliest", "--yes"
    )
    assert code == 0, err
    assert doc["verified"] == QUEUES
    (method,) = doc["method"].values()
    if v2:
        assert "configManagerVersion=v2 keeps a broker-side reset in memory only" in err
        assert method.startswith("direct offset update"), method
        assert "as it was applied" in doc["durability"] and "crash" not in doc["durability"]
    else:
        assert "server-side" in method, method
        assert "storeType=defaultRocksDB" in doc["durability"] and "crash" in doc["durability"]
    assert offsets(cluster.namesrv_addr, "G_ours") == offsets(cluster.namesrv_addr, "G_broker_side") == {0}

    cluster.stop()
    cluster.start()
    assert offsets(cluster.namesrv_addr, "G_ours") == {0}
    # the broker-side reset itself: lost by v2 on a clean restart, kept by the RocksDB offset store
    assert offsets(cluster.namesrv_addr, "G_broker_side") == ({PER_QUEUE} if v2 else {0})
