from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mqadmin import fastjson
from mqadmin.errors import StoreError, UsageError
from mqadmin.message import MAGIC_BLANK, decode_message
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.store import CQ_UNIT, BrokerStore
from mqadmin.model import Message


def put(store: BrokerStore, i: int, ts: int, queue_id: int = 0) -> Message:
    return store.put(
        Message(
            topic="T",
            body=f"m{i}".encode() * 10,
            properties={"TAGS": "TagA"},
            queue_id=queue_id,
            store_timestamp=ts,
            born_timestamp=ts,
        )
    )


def test_layout_is_rocketmq_s_own(tmp_path: Path) -> None:
    store = BrokerStore(tmp_path, writable=True, commitlog_file_size=4096, cq_file_size=10 * CQ_UNIT)
    msgs = [put(store, i, 1000 + i, queue_id=i % 2) for i in range(60)]
    commitlog = sorted(p.name for p in (tmp_path / "commitlog").iterdir())
    assert commitlog[0] == "0" * 20 and all(len(n) == 20 and int(n) % 4096 == 0 for n in commitlog)
    assert len(commitlog) > 1
    # a record never spans files: the tail of a full file is a BLANK record
    first = (tmp_path / "commitlog" / commitlog[0]).read_bytes()
    assert len(first) == 4096
    last_end = max(m.commitlog_offset + 0 for m in msgs if m.commitlog_offset < 4096)
    blank_at = last_end + struct.unpack_from(">i", first, last_end)[0]
    assert struct.unpack_from(">ii", first, blank_at)[1] == MAGIC_BLANK
    cq_files = sorted(p.name for p in (tmp_path / "consumequeue" / "T" / "0").iterdir())
    assert cq_files == ["0" * 20, f"{200:020d}", f"{400:020d}"]  # 30 entries, 10 per file, named by byte offset
    entry = (tmp_path / "consumequeue" / "T" / "1" / ("0" * 20)).read_bytes()[:CQ_UNIT]
    phy, size, tags = struct.unpack(">qiq", entry)
    assert (phy, tags) == (msgs[1].commitlog_offset, 2598919)
    record = store.commitlog.read(phy, size)
    assert decode_message(record)[0].body == b"m1" * 10


def test_reader_sees_what_the_writer_wrote_and_preallocated_zeros(tmp_path: Path) -> None:
    writer = BrokerStore(tmp_path, writable=True)
    for i in range(5):
        put(writer, i, 1000 + i)
    cq_file = tmp_path / "consumequeue" / "T" / "0" / ("0" * 20)
    with open(cq_file, "ab") as f:  # a real broker preallocates consume-queue files with zeros
        f.write(b"\0" * 600)
    reader = BrokerStore(tmp_path)
    q = reader.queue("T", 0)
    assert (q.min_offset, q.max_offset) == (0, 5)
    assert reader.store_time(q.entry(4)) == 1004
    with pytest.raises(StoreError):
        put(reader, 9, 9)


def test_config_falls_back_to_bak(tmp_path: Path) -> None:
    store = BrokerStore(tmp_path, writable=True)
    store.save_config("consumerOffset.json", {"offsetTable": {"T@g": {0: 1}}})
    store.save_config("consumerOffset.json", {"offsetTable": {"T@g": {0: 2}}})
    path = tmp_path / "config" / "consumerOffset.json"
    assert "{0:2" in path.read_text().replace("\n", "").replace("\t", "")
    path.write_text("{ half writ")
    assert store.load_config("consumerOffset.json")["offsetTable"]["T@g"] == {0: 1}
    path.write_text("")
    assert store.load_config("consumerOffset.json")["offsetTable"]["T@g"] == {0: 1}


def test_consumer_offset_file_is_fastjson_with_topic_at_group_keys(tmp_path: Path) -> None:
    cluster = MockCluster.create(tmp_path / "s", ("broker-a",))
    b = cluster.brokers["broker-a"]
    b.create_topic("T", 2)
    b.ensure_group("g")
    b.update_consumer_offset("g", "T", 1, 7)
    cluster.close()
    text = (tmp_path / "s" / "broker-a" / "config" / "consumerOffset.json").read_text()
    assert '"T@g":{1:7' in text.replace("\t", "").replace("\n", "")
    assert fastjson.loads(text)["offsetTable"]["T@g"] == {1: 7}


def test_second_writer_is_refused_readers_are_not(tmp_path: Path) -> None:
    cluster = MockCluster.create(tmp_path / "s", ("broker-a",))
    with pytest.raises(StoreError, match="in use"):
        MockCluster(tmp_path / "s", writable=True)
    MockCluster(tmp_path / "s").close()  # read-only open works while locked
    cluster.close()
    MockCluster(tmp_path / "s", writable=True).close()


def test_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "file").write_text("hi")
    with pytest.raises(UsageError, match="not a mock broker store"):
        MockCluster(tmp_path / "x")
    with pytest.raises(UsageError):
        MockCluster.create(tmp_path / "x")
