"""consumerProgress -g shows the group's dead-letter depth (the Java tool shows nothing), in the
table, JSON and Prometheus, through both doors (embedded store, mockBroker over TCP)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from conftest import CliResult, store_address

from mqadmin.admin import connect
from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time
from mqadmin.model import Message

Run = Callable[..., CliResult]
GROUP, CLEAN = "sms_group", "billing_group"
DLQ = f"%DLQ%{GROUP}"


@pytest.fixture(scope="module", params=["embedded", "tcp"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """45 messages on two brokers; every third one dead-lettered by GROUP; CLEAN has no DLQ."""
    root = tmp_path_factory.mktemp(f"dlq-{request.param}") / "store"
    cluster = MockCluster.create(root, version="5.3.3")
    cluster.create_topic("SmsTopic", 2)
    brokers = list(cluster.brokers.values())
    for broker in brokers:
        broker.ensure_group(GROUP)
        broker.ensure_group(CLEAN)
    for i in range(45):
        broker = brokers[i % 2]
        props = {"TAGS": "t", "UNIQ_KEY": new_uniq_key()}
        msg = broker.put_message(Message("SmsTopic", f"sms {i}".encode(), props, queue_id=i % 2))
        if i % 3 == 0:
            broker.send_back(GROUP, msg.commitlog_offset, -1)  # retries used up: straight to the DLQ
    for broker in brokers:
        for group in (GROUP, CLEAN):
            commit_at_time(broker, group, "SmsTopic", None)
    cluster.close()
    with store_address(root, request.param) as address:
        yield address


def stored_dead_letters(address: str) -> int:
    admin = connect(address, read_only=True)
    try:
        return sum(len(admin.pull(mq, 0, 10_000).messages) for mq in admin.topic_route(DLQ).message_queues())
    finally:
        admin.close()


def test_dlq_depth_in_table_json_and_prometheus(store: str, cli: Run) -> None:
    dead = stored_dead_letters(store)
    assert dead == 15
    doc = cli("consumerProgress", "-n", store, "-g", GROUP, "--json")
    assert doc.code == 0, doc.stderr
    assert json.loads(doc.stdout)["dlq_depth"] == dead
    table = cli("consumerProgress", "-n", store, "-g", GROUP)
    assert table.code == 0 and f"Dead letters: {dead} message(s) in {DLQ}" in table.stdout
    prom = cli("consumerProgress", "-n", store, "-g", GROUP, "--output", "prometheus")
    assert prom.code == 0, prom.stderr
    series = [line for line in prom.stdout.splitlines() if line.startswith("rocketmq_group_dlqdiff{")]
    assert len(series) == 1 and f'topic="{DLQ}"' in series[0] and series[0].endswith(f" {dead}")
    java = cli("consumerProgress", "-n", store, "-g", GROUP, "--output", "java")
    assert java.code == 0 and "%DLQ%" not in java.stdout  # the Java tool's text stays the Java tool's


def test_a_group_without_dead_letters_shows_zero(store: str, cli: Run) -> None:
    doc = cli("consumerProgress", "-n", store, "-g", CLEAN, "--json")
    assert doc.code == 0 and json.loads(doc.stdout)["dlq_depth"] == 0
    table = cli("consumerProgress", "-n", store, "-g", CLEAN)
    assert table.code == 0 and "Dead letters" not in table.stdout
    prom = cli("consumerProgress", "-n", store, "-g", CLEAN, "--output", "prometheus")
    assert prom.code == 0
    series = [line for line in prom.stdout.splitlines() if line.startswith("rocketmq_group_dlqdiff{")]
    assert series == [
        f'rocketmq_group_dlqdiff{{group="{CLEAN}",topic="%DLQ%{CLEAN}",countOfOnlineConsumers="0",msgModel="1"}} 0'
    ]
