from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from mqadmin import fastjson
from mqadmin.errors import StoreError, UsageError
from mqadmin.message import MAGIC_BLANK, decode_message, parse_properties
from mqadmin.mock import commitlog as commitlog_module
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.store import CQ_UNIT, BatchFields, BrokerStore
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


def batch_items(n: int, first: int = 0) -> list[tuple[int, bytes, bytes, int]]:
    from mqadmin.message import format_properties, tags_code

    props = [{"TAGS": "TagA", "KEYS": f"k{first + i}"} for i in range(n)]
    return [
        (i, f"b{first + i}".encode() * 40, format_properties(p).encode(), tags_code(p)) for i, p in enumerate(props)
    ]


FIELDS = BatchFields(
    sys_flag=0, born_timestamp=7, born_host="10.0.0.9:4000", store_timestamp=9, store_host="10.0.0.1:10911"
)


def test_a_batch_is_one_commit_log_write_and_one_queue_write_of_what_single_puts_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []

    def counted(fd: int, data: memoryview) -> int:
        writes.append(len(data))
        return os.write(fd, data)

    single = BrokerStore(tmp_path / "single", writable=True)
    for flag, body, props, _ in batch_items(6):
        single.put(
            Message(
                topic="T",
                body=body,
                properties=parse_properties(props.decode()),
                flag=flag,
                queue_id=1,
                born_timestamp=7,
                born_host="10.0.0.9:4000",
                store_timestamp=9,
                store_host="10.0.0.1:10911",
            )
        )
    batched = BrokerStore(tmp_path / "batched", writable=True)
    monkeypatch.setattr(commitlog_module, "_os_write", counted)
    first, offsets = batched.put_batch("T", 1, batch_items(6), FIELDS)
    assert len(writes) == 2  # the records, then their six queue entries
    assert first == 0 and offsets[0] == 0 and offsets == sorted(offsets)
    for part in ("commitlog/" + "0" * 20, "consumequeue/T/1/" + "0" * 20):
        assert (tmp_path / "batched" / part).read_bytes() == (tmp_path / "single" / part).read_bytes(), part
    assert batched.put_batch("T", 1, batch_items(2, 6), FIELDS)[0] == 6


def test_a_batch_never_spans_commit_log_files(tmp_path: Path) -> None:
    store = BrokerStore(tmp_path, writable=True, commitlog_file_size=4096, cq_file_size=10 * CQ_UNIT)
    store.put_batch("T", 0, batch_items(10), FIELDS)  # about 2.6 KiB: the next batch does not fit
    first, offsets = store.put_batch("T", 0, batch_items(10, 10), FIELDS)
    assert first == 10 and offsets[0] == 4096  # the tail of the first file is a BLANK record
    head = (tmp_path / "commitlog" / ("0" * 20)).read_bytes()
    assert len(head) == 4096
    cq = store.queue("T", 0)
    assert cq.max_offset == 20 and len(list((tmp_path / "consumequeue" / "T" / "0").iterdir())) == 2
    keys = [decode_message(store.read_record(cq.entry(i)))[0].properties["KEYS"] for i in range(20)]
    assert keys == [f"k{i}" for i in range(20)]
    # a batch larger than a whole file is stored half by half, in queue order
    first, offsets = store.put_batch("T", 0, batch_items(40, 20), FIELDS)
    assert first == 20 and len(offsets) == 40 and store.queue("T", 0).max_offset == 60
    keys = [decode_message(store.read_record(cq.entry(i)))[0].properties["KEYS"] for i in range(20, 60)]
    assert keys == [f"k{i}" for i in range(20, 60)]
