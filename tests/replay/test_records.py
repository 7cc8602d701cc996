"""Bulk decoding and encoding of replay rows: the same fields and the same bytes as the
Message-by-Message path with the standard library's encoder, on awkward messages."""

from __future__ import annotations

import json
import zlib

import pytest

from mqadmin.message import SYSFLAG_COMPRESSED, MessageDecodeError, encode_message, iter_messages
from mqadmin.model import Message
from mqadmin.replay.records import ROW_KEYS, decode_rows, json_chunks, json_lines, rows_to_table, to_record, to_row

BROKER = "broker-ä"
AWKWARD_TEXT = 'quote " backslash \\ slash / nul \x00 bell \x07 tab \t nl \n cr \r del \x7f ls \u2028 bom \ufeff é 😀'


def awkward_messages() -> list[Message]:
    """Bodies in both JSON forms and property names/values that need escaping, hosts of both IP
    versions, both record magics (a topic over 127 bytes), and a zlib-compressed body."""

    def msg(i: int, body: bytes, props: dict[str, str], **kw: object) -> Message:
        base: dict[str, object] = {
            "queue_id": 3,
            "queue_offset": 1000 + i,
            "commitlog_offset": 4096 * i,
            "born_timestamp": 1_700_000_000_000 + i,
            "store_timestamp": 1_700_000_000_100 + i,
            "born_host": "10.1.2.3:52100",
            "store_host": "192.168.7.8:10911",
            "reconsume_times": i % 3,
        }
        base.update(kw)
        return Message("Tópic", body, props, **base)  # type: ignore[arg-type]

    return [
        msg(0, AWKWARD_TEXT.encode(), {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC", "WAIT": "true"}),
        msg(1, b"\xff\xfe not utf-8 \x80", {"TAGS": 'tag "q"', AWKWARD_TEXT: AWKWARD_TEXT}),
        msg(2, b"", {}),
        msg(3, bytes(range(256)), {"KEYS": "", "empty": "", "x": "a\x01b"}),
        msg(4, "ünïcödé ✓".encode(), {"TAGS": "T"}, born_host="[2001:db8::1]:4242", store_host="[::1]:10911"),
        Message("T" * 200, b"long topic", {"TAGS": "L"}, queue_offset=7, store_host="127.0.0.1:10911"),
        msg(6, zlib.compress(b'{"zipped":true}'), {"TAGS": "Z"}, sys_flag=SYSFLAG_COMPRESSED),
        msg(7, b"x" * 1024, {"TAGS": "TagB", "KEYS": "order-7", "UNIQ_KEY": "7F000001"}, reconsume_times=16),
        # text that looks like the boundary between two records of an encoded array
        msg(8, b'"},{"topic":"fake"}', {"topic": '},{"topic":', '},{"topic":': "}\n{"}),
    ]


def stdlib_line(msg: Message, broker: str) -> bytes:
    """The encoder replays used before: json.dumps of the record, compact, UTF-8."""
    return (json.dumps(to_record(msg, broker), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


@pytest.fixture
def pulled() -> bytes:
    """Records as a pull reply carries them: encoded one after another."""
    return b"".join(encode_message(m) for m in awkward_messages())


def test_decoded_rows_equal_the_message_path(pulled: bytes) -> None:
    want = [to_row(m, BROKER) for m in iter_messages(pulled)]
    got = decode_rows([pulled], BROKER)
    assert [r[:-1] for r in got] == [r[:-1] for r in want]
    assert [bytes(r[-1]) for r in got] == [r[-1] for r in want]
    assert len(got[0]) == len(ROW_KEYS)
    assert bytes(got[6][-1]) == b'{"zipped":true}'  # decompressed, as pulls always were
    assert got[4][ROW_KEYS.index("born_host")] == "[2001:db8::1]:4242"
    # one record per buffer (views of a store's files) decodes the same
    one_each = decode_rows([encode_message(m) for m in awkward_messages()], BROKER)
    assert [r[:-1] for r in one_each] == [r[:-1] for r in want]


def test_json_lines_are_byte_identical_to_the_stdlib_encoder(pulled: bytes) -> None:
    old = b"".join(stdlib_line(m, BROKER) for m in iter_messages(pulled))
    rows = decode_rows([pulled], BROKER)
    assert json_lines(rows) == old
    assert b"".join(json_chunks(rows * 300)) == old * 300  # across chunk boundaries too
    assert b'"body_base64":' in old and b"\\u0000" in old and "😀".encode() in old
    assert b'},{\\"topic\\":' in old and json_lines([]) == b""


def test_truncated_or_foreign_buffers_fail_as_before(pulled: bytes) -> None:
    for bad in (pulled[:-3], pulled + b"\x00" * 10, b"\x00" * 100):
        with pytest.raises(MessageDecodeError):
            list(iter_messages(bad))
        with pytest.raises(MessageDecodeError):
            decode_rows([bad], BROKER)


def test_arrow_table_from_rows_keeps_every_value(pulled: bytes) -> None:
    pytest.importorskip("pyarrow")
    rows = decode_rows([pulled], BROKER)
    table = rows_to_table(rows)
    back = table.to_pylist()
    assert [r["body"] for r in back] == [bytes(r[-1]) for r in rows]
    assert [dict(r["properties"]) for r in back] == [r[ROW_KEYS.index("properties")] for r in rows]
    for key in ROW_KEYS[:-2]:
        assert [r[key] for r in back] == [row[ROW_KEYS.index(key)] for row in rows], key
    assert rows_to_table([]).num_rows == 0
