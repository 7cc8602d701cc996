"""What the mock server acknowledges is on disk: a topic or group it answered SUCCESS for survives
a SIGKILL that comes right after the reply (before any periodic flush)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqadmin import fastjson
from mqadmin.mock.cluster import MockCluster
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server.wire import RawClient
from tests.support import served

pytestmark = pytest.mark.integration

ROUNDS = 3


def test_created_topics_and_groups_survive_a_kill_right_after_the_ack(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = served.start(store)
    acked: list[tuple[str, str]] = []
    try:
        for round_no in range(ROUNDS):
            broker = RawClient(server.brokers["broker-a"])
            try:
                topic, group = f"Durable{round_no}", f"durable_group{round_no}"
                ext = {"topic": topic, "readQueueNums": 3, "writeQueueNums": 3, "perm": 6}
                assert broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext).code == ResponseCode.SUCCESS
                body = fastjson.dumps({"groupName": group}).encode()
                reply = broker.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
                assert reply.code == ResponseCode.SUCCESS
                acked.append((topic, group))
            finally:
                broker.close()
            server.kill()  # at once: well inside the 5 s periodic flush
            server = served.start(store, ports=server.ports)
    finally:
        server.stop()
    cluster = MockCluster(store)
    try:
        broker = cluster.brokers["broker-a"]
        for topic, group in acked:
            cfg = broker.topic_config(topic)
            assert cfg is not None, f"acknowledged topic {topic} lost by the kill"
            assert (cfg["readQueueNums"], cfg["writeQueueNums"]) == (3, 3)
            assert group in broker.groups, f"acknowledged group {group} lost by the kill"
    finally:
        cluster.close()
