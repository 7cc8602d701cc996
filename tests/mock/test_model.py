"""The mock broker answers as a real broker of its version would: offset queries, the time
search, resets and consume stats differ between 4.x, 5.0-5.1 and 5.2+ (broker:
ConsumerManageProcessor.java, AdminBrokerProcessor.java; store: ConsumeQueue.java)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqadmin import errors
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.model import ClientInfo, MockBroker
from mqadmin.model import Message

TIMES = [100, 200, 200, 200, 300, 400]


def broker(tmp_path: Path, version: str, times: list[int] = TIMES) -> MockBroker:
    cluster = MockCluster.create(tmp_path / version, ("broker-a",), version=version)
    b = cluster.brokers["broker-a"]
    b.create_topic("T", 2)
    for t in times:
        b.put_message(Message(topic="T", body=b"x", properties={"TAGS": "A"}), store_timestamp=t)
    return b


@pytest.mark.parametrize(
    ("ts", "expected"),
    [(50, 0), (100, 0), (200, 1), (250, 4), (300, 4), (399, 5), (400, 5), (500, 6)],
)
def test_search_5x_lower_boundary(tmp_path: Path, ts: int, expected: int) -> None:
    assert broker(tmp_path, "5.3.3").search_offset("T", 0, ts) == expected


@pytest.mark.parametrize(("ts", "expected"), [(50, 0), (200, 3), (250, 3), (500, 5)])
def test_search_5x_upper_boundary(tmp_path: Path, ts: int, expected: int) -> None:
    assert broker(tmp_path, "5.3.3").search_offset("T", 0, ts, "UPPER") == expected


@pytest.mark.parametrize(
    ("ts", "expected"),
    [(50, 0), (200, 2), (250, 3), (290, 4), (120, 0), (180, 1), (500, 5)],
)
def test_search_4x_nearest(tmp_path: Path, ts: int, expected: int) -> None:
    assert broker(tmp_path, "4.9.8").search_offset("T", 0, ts) == expected


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_search_empty_queue_is_zero(tmp_path: Path, version: str) -> None:
    assert broker(tmp_path, version).search_offset("T", 1, 150) == 0


def test_query_offset_without_commit_differs_by_version(tmp_path: Path) -> None:
    old, new = broker(tmp_path, "4.9.8"), broker(tmp_path, "5.3.3")
    assert old.query_consumer_offset("g", "T", 0) == 0
    assert old.query_consumer_offset("g", "T", 1) == 0  # empty queue: 0 on 4.x
    assert new.query_consumer_offset("g", "T", 0) == 0
    with pytest.raises(errors.QueryNotFound):
        new.query_consumer_offset("g", "T", 1)  # empty queue: not found on 5.1+
    with pytest.raises(errors.QueryNotFound):
        new.query_consumer_offset("g", "T", 0, set_zero_if_not_found=False)


def test_server_side_reset_5x(tmp_path: Path) -> None:
    b = broker(tmp_path, "5.3.3")
    with pytest.raises(errors.SubscriptionGroupNotExist):
        b.reset_offset("T", "g", 250, True)
    b.ensure_group("g")
    assert b.reset_offset("T", "g", 250, False) == {0: 4, 1: 0}  # isForce ignored, no client needed
    assert b.committed_offset("g", "T", 0) == 4
    assert b.update_consumer_offset("g", "T", 0, 6) == "Offset has been previously reset"
    assert b.query_consumer_offset("g", "T", 0) == 4
    pulled = b.pull("g", "T", 0, 6)
    assert (pulled.status, pulled.next_begin_offset) == ("OFFSET_RESET", 4)
    assert b.update_consumer_offset("g", "T", 0, 6) == ""
    with pytest.raises(errors.SystemError_, match="not in consume queue range"):
        b.reset_offset("T", "g", 0, True, queue_id=0, offset=99)
    assert b.reset_offset("T", "g", 0, True, queue_id=0, offset=2) == {0: 2}


def test_client_push_reset_4x(tmp_path: Path) -> None:
    b = broker(tmp_path, "4.9.8")
    b.ensure_group("g")
    with pytest.raises(errors.SystemError_, match="not exist"):
        b.reset_offset("T", "g", 250, True)  # a queue without a committed offset
    b.update_consumer_offset("g", "T", 0, 2)
    b.update_consumer_offset("g", "T", 1, 0)
    with pytest.raises(errors.ConsumerNotOnline):
        b.reset_offset("T", "g", 250, True)
    pushed: list[tuple[str, dict[int, int]]] = []
    b.register_client(ClientInfo("c1", "g", "127.0.0.1:1", "CPP", 333, on_reset=lambda t, tab: pushed.append((t, tab))))
    assert b.reset_offset("T", "g", 290, True) == {0: 4, 1: 0}
    assert pushed == [("T", {0: 4, 1: 0})]
    assert b.committed_offset("g", "T", 0) == 2  # the broker does not write: clients commit later
    assert b.reset_offset("T", "g", 290, False) == {0: 2, 1: 0}  # non-force only rewinds
    assert b.reset_offset("T", "g", -1, True) == {0: 6, 1: 0}  # -1: max offset


def test_pull_status_mapping(tmp_path: Path) -> None:
    b = broker(tmp_path, "5.3.3")
    assert b.pull(None, "T", 1, 0).status == "NO_MESSAGE_IN_QUEUE"
    found = b.pull(None, "T", 0, 1, max_nums=2)
    assert (found.status, found.next_begin_offset, len(found.records)) == ("FOUND", 3, 2)
    assert b.pull(None, "T", 0, 6).status == "OFFSET_OVERFLOW_ONE"
    assert b.pull(None, "T", 0, 9).next_begin_offset == 6
    assert b.pull(None, "T", 0, 2, tags={"B"}).status == "NO_MATCHED_MESSAGE"


def test_consume_stats_rows(tmp_path: Path) -> None:
    b = broker(tmp_path, "5.3.3")
    b.ensure_group("g")
    b.update_consumer_offset("g", "T", 0, 4)
    stats = b.consume_stats("g")
    rows = {mq.queue_id: w for mq, w in stats.offsets.items() if mq.topic == "T"}
    assert (rows[0].broker_offset, rows[0].consumer_offset, rows[0].last_timestamp) == (6, 4, 200)
    assert (rows[1].broker_offset, rows[1].consumer_offset, rows[1].last_timestamp) == (0, 0, 0)
    b.pull("g", "T", 0, 4, max_nums=2)
    assert b.consume_stats("g", "T").consume_tps == pytest.approx(2 / 60)


def test_send_back_goes_to_the_group_retry_topic(tmp_path: Path) -> None:
    b = broker(tmp_path, "5.3.3")
    b.ensure_group("g")
    original = b.message_at(b.store.queue("T", 0).entry(1).commitlog_offset)
    copy = b.send_back("g", original.commitlog_offset, 0)
    assert copy.topic == "%RETRY%g" and copy.reconsume_times == 1
    assert copy.properties["RETRY_TOPIC"] == "T" and copy.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
