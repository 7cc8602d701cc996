"""A full disk under the mock store, simulated at the store's one write fault point.

The fault writes what "fits" and then fails with ENOSPC, as a small tmpfs does: the store must
cut back to its last whole record, refuse the put, and take writes again once space returns,
with every acknowledged message readable by a record-by-record scan from offset 0.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.message import MAGIC_BLANK, decode_message
from mqadmin.mock import commitlog as commitlog_module
from mqadmin.mock import store as store_module
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.mock.store import BatchFields, BrokerStore, StoreWriteFailed
from mqadmin.model import Message
from mqadmin.protocol.codec import FLAG_ONEWAY, RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server.wire import RawClient, send_v2
from tests.mock.test_store import batch_items

FILE_SIZE = 16 * 1024


class Disk:
    """The fault point: ``room`` bytes may still be written (None: unlimited)."""

    def __init__(self) -> None:
        self.room: int | None = None

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.room is None:
            return os.write(fd, data)
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = os.write(fd, bytes(data[: self.room]))
        self.room -= n
        return n


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    fault = Disk()
    monkeypatch.setattr(commitlog_module, "_os_write", fault.write)
    return fault


def message(i: int, queue_id: int = 0) -> Message:
    return Message(topic="T", body=f"body-{i}".encode() * 20, properties={"KEYS": f"k{i}"}, queue_id=queue_id)


def scan(commitlog: Path) -> Iterator[Message]:
    """Every record of every commit-log file, from offset 0, as a recovery scan reads them."""
    for path in sorted(commitlog.iterdir()):
        data = path.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">ii", data, pos)
            if magic == MAGIC_BLANK:
                break
            msg, end = decode_message(data, pos)
            assert end - pos == size
            yield msg
            pos = end
        assert pos == len(data) or struct.unpack_from(">ii", data, pos)[1] == MAGIC_BLANK, f"torn bytes in {path}"


def test_full_disk_rolls_back_and_writes_resume(tmp_path: Path, disk: Disk) -> None:
    store = BrokerStore(tmp_path, writable=True, commitlog_file_size=FILE_SIZE)
    acked = [store.put(message(i, i % 2)).properties["KEYS"] for i in range(5)]
    for room in (0, 36, 200, 250, 1000):  # nothing fits, a torn head, a torn record, a record but no queue entry
        disk.room = room
        failures = 0
        for i in range(100, 110):
            try:
                acked.append(store.put(message(i + room, i % 2)).properties["KEYS"])
            except StoreWriteFailed:
                failures += 1
        assert failures > 0
        assert [m.properties["KEYS"] for m in scan(tmp_path / "commitlog")] == acked
    disk.room = None  # space returns
    for i in range(200, 400):  # enough to roll into a second file
        acked.append(store.put(message(i, i % 2)).properties["KEYS"])
    assert len(list((tmp_path / "commitlog").iterdir())) > 1
    assert [m.properties["KEYS"] for m in scan(tmp_path / "commitlog")] == acked
    # Every queue entry points at the record it names: reading through the queues finds them all.
    via_queues = []
    for qid in (0, 1):
        cq = store.queue("T", qid)
        for offset in range(cq.min_offset, cq.max_offset):
            msg, _ = decode_message(store.read_record(cq.entry(offset)))
            via_queues.append(msg.properties["KEYS"])
    assert sorted(via_queues) == sorted(acked)


def test_reopening_cuts_a_torn_tail_left_by_an_older_writer(tmp_path: Path) -> None:
    store = BrokerStore(tmp_path, writable=True, commitlog_file_size=FILE_SIZE)
    acked = [store.put(message(i)).properties["KEYS"] for i in range(3)]
    store.close()
    (log_file,) = (tmp_path / "commitlog").iterdir()
    whole = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(b"\x00\x00\x01\x00\xda\xa3\x20\xa7" + b"x" * 28)  # 36 torn bytes
    reopened = BrokerStore(tmp_path, writable=True, commitlog_file_size=FILE_SIZE)
    assert log_file.stat().st_size == whole
    acked.append(reopened.put(message(9)).properties["KEYS"])
    assert [m.properties["KEYS"] for m in scan(tmp_path / "commitlog")] == acked
    # A read-only view never changes the files.
    reopened.close()
    size = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(b"torn")
    BrokerStore(tmp_path, writable=False, commitlog_file_size=FILE_SIZE).close()
    assert log_file.stat().st_size == size + 4


def test_the_server_answers_disk_full_and_recovers(tmp_path: Path, disk: Disk) -> None:
    cluster = MockCluster.create(tmp_path / "store", ("broker-a",), version="5.3.3")
    cluster.create_topic("TopicTest", 1)
    server = MockServer(cluster, namesrv_port=0).start()
    client = RawClient(server.broker_addrs["broker-a"])
    try:
        assert send_v2(client, "TopicTest", 0, b"before").code == ResponseCode.SUCCESS
        disk.room = 40
        full = send_v2(client, "TopicTest", 0, b"during")
        assert full.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert full.remark and "the broker's disk is full" in full.remark
        disk.room = None
        assert send_v2(client, "TopicTest", 0, b"after").code == ResponseCode.SUCCESS
        pulled = client.call(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "g",
                "topic": "TopicTest",
                "queueId": 0,
                "queueOffset": 0,
                "maxMsgNums": 32,
                "sysFlag": 4,
            },
        )
        assert pulled.code == ResponseCode.SUCCESS
        bodies = []
        pos = 0
        while pos < len(pulled.body):
            msg, pos = decode_message(pulled.body, pos)
            bodies.append(msg.body)
        assert bodies == [b"before", b"after"]
    finally:
        client.close()
        server.stop()
        cluster.close()
    root = tmp_path / "store" / "broker-a" / "commitlog"
    assert [m.body for m in scan(root)] == [b"before", b"after"]


def test_full_disk_while_rolling_to_a_new_file(tmp_path: Path, disk: Disk) -> None:
    store = BrokerStore(tmp_path, writable=True, commitlog_file_size=FILE_SIZE)
    acked = []
    while store.commitlog.write_position() < FILE_SIZE - 300:
        acked.append(store.put(message(len(acked))).properties["KEYS"])
    for room in (10, 400):  # the blank tail itself fails; then the blank fits but the record does not
        disk.room = room
        while True:
            try:
                acked.append(store.put(message(len(acked))).properties["KEYS"])
            except StoreWriteFailed:
                break
        assert [m.properties["KEYS"] for m in scan(tmp_path / "commitlog")] == acked
    disk.room = None
    acked += [store.put(message(1000 + i)).properties["KEYS"] for i in range(3)]
    assert [m.properties["KEYS"] for m in scan(tmp_path / "commitlog")] == acked
    assert store.commitlog.write_position() > FILE_SIZE


def test_config_flushes_on_a_full_disk_log_one_line_and_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import mqadmin.mock.server.core as server_module

    monkeypatch.setattr(server_module, "FLUSH_INTERVAL_S", 0.05)
    real_write = store_module.atomic_write
    full = [True]
    refused = [0]

    def atomic_write(path: Path, text: str, **kwargs: object) -> None:
        if full[0]:
            refused[0] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "atomic_write", atomic_write)
    caplog.set_level(logging.WARNING, logger="mqadmin.mock.server")
    cluster = MockCluster.create(tmp_path / "store", ("broker-a",), version="4.9.8")
    cluster.create_topic("TopicTest", 1)
    with MockServer(cluster, namesrv_port=0) as server:
        client = RawClient(server.broker_addrs["broker-a"])
        ext = {"consumerGroup": "g", "topic": "TopicTest", "queueId": 0, "commitOffset": 5}
        # a two-way commit is persisted before its acknowledgement: on a full disk it fails
        assert client.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext).code == ResponseCode.SYSTEM_ERROR
        # a oneway one (a consumer's periodic commit) is left to the periodic flush
        oneway = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
        oneway.flag |= FLAG_ONEWAY
        client.send(oneway)
        query = {"consumerGroup": "g", "topic": "TopicTest", "queueId": 0}
        assert client.call(RequestCode.QUERY_CONSUMER_OFFSET, query).ext_fields["offset"] == "5"
        # about ten failed flushes (each periodic flush tries the config files first)
        refused_by_the_commit = refused[0]
        deadline = time.monotonic() + 10
        while refused[0] < refused_by_the_commit + 10:
            assert time.monotonic() < deadline, f"only {refused[0] - refused_by_the_commit} flushes in 10 s"
            time.sleep(0.02)
        flush_lines = [r for r in caplog.records if "periodic flush" in r.getMessage()]
        assert len(flush_lines) == 1 and not flush_lines[0].exc_info
        full[0] = False  # space returns: the next flush writes the offsets
        path = tmp_path / "store" / "broker-a" / "config" / "consumerOffset.json"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (path.exists() and "TopicTest@g" in path.read_text()):
            time.sleep(0.05)
        assert "TopicTest@g" in path.read_text()
        client.close()
    cluster.close()


def test_a_batch_on_a_full_disk_is_stored_whole_or_not_at_all(tmp_path: Path, disk: Disk) -> None:
    store = BrokerStore(tmp_path, writable=True, commitlog_file_size=FILE_SIZE)
    fields = BatchFields(0, 1, "127.0.0.1:1", 2, "127.0.0.1:10911")
    probe = BrokerStore(tmp_path / "probe", writable=True)
    probe.put_batch("T", 0, batch_items(5), fields)
    records = (tmp_path / "probe" / "commitlog" / ("0" * 20)).stat().st_size
    acked: list[str] = []
    for n, room in enumerate((0, 50, records - 1, records, records + 40)):  # the last two: records, no queue entries
        disk.room = room
        with pytest.raises(StoreWriteFailed):
            store.put_batch("T", 0, batch_items(5, 10 * n), fields)
        disk.room = None
        store.put_batch("T", 0, batch_items(2, 10 * n + 5), fields)
        acked += [f"k{10 * n + 5}", f"k{10 * n + 6}"]
        assert [m.properties["KEYS"] for m in scan(tmp_path / "commitlog")] == acked
        cq = store.queue("T", 0)
        assert cq.max_offset == len(acked)
        assert [
            decode_message(store.read_record(cq.entry(i)))[0].properties["KEYS"] for i in range(len(acked))
        ] == acked
