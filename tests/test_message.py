from __future__ import annotations

import struct
import zlib

import pytest

from mqadmin.message import (
    MAGIC_V1,
    MAGIC_V2,
    SYSFLAG_COMPRESSED,
    MessageDecodeError,
    decode_message,
    encode_message,
    iter_messages,
    java_string_hash,
    offset_msg_id,
    parse_properties,
    read_store_timestamp,
)
from mqadmin.model import Message


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(broker address, commit-log offset) of an IPv4 offset msgId, read independently of the product."""
    raw = bytes.fromhex(msg_id)
    assert len(raw) == 16, msg_id
    ip, port, offset = raw[:4], struct.unpack(">i", raw[4:8])[0], struct.unpack(">q", raw[8:])[0]
    return f"{'.'.join(map(str, ip))}:{port}", offset


def sample(**kw: object) -> Message:
    base: dict[str, object] = dict(
        topic="TopicTest",
        body=b"hello",
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AB"},
        flag=3,
        queue_id=2,
        queue_offset=17,
        commitlog_offset=4096,
        born_timestamp=1_700_000_000_000,
        born_host="10.0.0.9:53122",
        store_timestamp=1_700_000_000_005,
        store_host="10.0.0.5:10911",
        reconsume_times=1,
    )
    base.update(kw)
    return Message(**base)  # type: ignore[arg-type]


def test_layout_matches_the_documented_offsets() -> None:
    raw = encode_message(sample())
    size, magic, crc, qid, flag, qoff, phy = struct.unpack_from(">iiiiiqq", raw)
    assert (size, magic, qid, flag, qoff, phy) == (len(raw), MAGIC_V1, 2, 3, 17, 4096)
    assert crc == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert struct.unpack_from(">q", raw, 56)[0] == 1_700_000_000_005  # store time at 56 for IPv4
    assert raw[48:52] == bytes([10, 0, 0, 9])
    assert read_store_timestamp(raw) == 1_700_000_000_005


def test_round_trip_and_msg_id() -> None:
    msg, end = decode_message(encode_message(sample()))
    assert end > 0
    assert (msg.topic, msg.body, msg.tags, msg.keys, msg.queue_offset) == ("TopicTest", b"hello", "TagA", "k1 k2", 17)
    assert msg.born_host == "10.0.0.9:53122" and msg.store_host == "10.0.0.5:10911"
    assert msg.msg_id == offset_msg_id("10.0.0.5:10911", 4096)
    assert decode_offset_msg_id(msg.msg_id) == ("10.0.0.5:10911", 4096)
    assert len(msg.msg_id) == 32


def test_ipv6_hosts_long_topic_and_compression() -> None:
    body = zlib.compress(b"x" * 5000)
    raw = encode_message(
        sample(
            topic="T" * 200,
            body=body,
            sys_flag=SYSFLAG_COMPRESSED,
            born_host="[::1]:5000",
            store_host="[fe80::1]:10911",
        )
    )
    assert struct.unpack_from(">i", raw, 4)[0] == MAGIC_V2
    msg, _ = decode_message(raw)
    assert msg.body == b"x" * 5000 and msg.topic == "T" * 200
    assert msg.born_host == "[::1]:5000" and msg.store_host == "[fe80::1]:10911"
    assert read_store_timestamp(raw) == 1_700_000_000_005
    assert len(msg.msg_id) == 56


def test_concatenated_bodies_and_truncation() -> None:
    raw = encode_message(sample(queue_offset=1)) + encode_message(sample(queue_offset=2))
    assert [m.queue_offset for m in iter_messages(raw)] == [1, 2]
    with pytest.raises(MessageDecodeError):
        list(iter_messages(raw[:-3]))
    with pytest.raises(MessageDecodeError):
        decode_message(b"\0" * 100)


def test_properties_skip_malformed_pairs() -> None:
    assert parse_properties("A\x01b\x02broken\x02C\x01d\x02") == {"A": "b", "C": "d"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("TagA", 2598919), ("hello", 99162322), ("", 0), ("中", 20013), ("polygenelubricants", -2147483648)],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
