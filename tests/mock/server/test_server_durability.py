"""What the mock server acknowledges is on disk: a topic or group it answered SUCCESS for survives
a SIGKILL that comes right after the reply (before any periodic flush)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mqadmin import fastjson
from mqadmin.message import format_properties, iter_messages
from mqadmin.mock.cluster import MockCluster
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server.wire import RawClient, send_v2
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


def test_sent_messages_survive_a_kill_right_after_the_ack(tmp_path: Path) -> None:
    """Sends are written to the files (the page cache) before the reply, as a broker with
    flushDiskType=ASYNC_FLUSH: a killed process loses none; only a lost host could."""
    store = tmp_path / "store"
    server = served.start(store)
    try:
        broker = RawClient(server.brokers["broker-a"])
        try:
            single = send_v2(broker, "Sent", 1, b"single")
            assert single.code == ResponseCode.SUCCESS
            body = b"".join(batch_record(f"batch-{i}".encode(), {"KEYS": f"k{i}"}) for i in range(50))
            ext = {"a": "pg", "b": "Sent", "c": "TBW102", "d": 4, "e": 1, "f": 0, "g": 0, "h": 0, "i": "", "m": True}
            batch = broker.call(RequestCode.SEND_BATCH_MESSAGE, ext, body)
            assert batch.code == ResponseCode.SUCCESS
            assert int(batch.ext_fields["queueOffset"]) == 1 and len(batch.ext_fields["msgId"].split(",")) == 50
        finally:
            broker.close()
        server.kill()
    finally:
        server.stop()
    cluster = MockCluster(store)
    try:
        outcome = cluster.brokers["broker-a"].pull(None, "Sent", 1, 0, max_nums=100)
        bodies = [m.body for r in outcome.records for m in iter_messages(r)]
        assert bodies == [b"single"] + [f"batch-{i}".encode() for i in range(50)]
    finally:
        cluster.close()


def batch_record(body: bytes, props: dict[str, str]) -> bytes:
    """One message of a SEND_BATCH_MESSAGE body (MessageDecoder.encodeMessages)."""
    p = format_properties(props).encode()
    return struct.pack(">iiiii", 20 + len(body) + 2 + len(p), 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p
