"""The bulk decoder and encoders against a straightforward reference, over generated records:
``decode_rows`` against ``to_row(decode_message())`` with the window applied after, JSON lines
against the standard library's ``json.dumps`` of each record, and the Arrow table against one
built row by row. The records are odd on purpose: malformed properties, topics that change
within a pull (or keep their length), non-UTF-8 and empty bodies, IPv6 hosts, v2 topics,
compressed bodies."""

from __future__ import annotations

import json
import random
import zlib

import pytest

from mqadmin.message import (
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_COMPRESSED,
    SYSFLAG_STOREHOST_V6,
    encode_record,
    iter_messages,
    pack_host,
)
from mqadmin.replay.records import (
    ROW_KEYS,
    Row,
    arrow_schema,
    decode_rows,
    json_chunks,
    rows_to_table,
    to_record,
    to_row,
)

BROKER = "broker-ä"
TOPICS = [b"T", b"U", b"TT", "Tópic".encode(), b"T" * 200, b"\xff\xfeT", b"", b'q"\\']
NAMES = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "x", "é", 'a"b', "", "k\x7f"]
VALUES = ["", "TagA", "k1 k2", "v\x01w", 'q"\\/', "\u2028", "😀", "\x00\x1f", '},{"topic":']
BODIES = [b"", b"x" * 1024, 'text " \\ \n \u2028 😀 },{"topic":'.encode(), b"\xc3", b"\xff\xfe", b"\x00\x7f"]
HOSTS = ["10.0.0.7:52100", "192.168.7.8:10911", "127.0.0.1:0", "255.255.255.255:65535", "[2001:db8::1]:4242"]


def properties(rnd: random.Random) -> bytes:
    """name\\x01value\\x02 pairs, sometimes malformed: no final separator, a pair without a name
    or a separator, an empty pair, bytes that are not UTF-8."""
    pairs = [f"{rnd.choice(NAMES)}\x01{rnd.choice(VALUES)}".encode() for _ in range(rnd.randrange(6))]
    odd = rnd.randrange(10)
    if odd == 0 and pairs:
        pairs[rnd.randrange(len(pairs))] = rnd.choice([b"lonely", b"", b"\x01nameless", b"a\x01\xff\xfeb"])
    text = b"\x02".join(pairs)
    if odd != 1 and pairs:
        text += b"\x02"
    if odd == 2:
        text = b"\x01" + text
    return text


def body(rnd: random.Random) -> bytes:
    if rnd.random() < 0.3:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
    return rnd.choice(BODIES)


def pulled(rnd: random.Random, count: int, first_offset: int) -> bytes:
    """``count`` records as a pull reply carries them; the topic mostly stays, sometimes not."""
    topic = rnd.choice(TOPICS)
    out = []
    for i in range(count):
        if rnd.random() < 0.15:
            topic = rnd.choice(TOPICS)
        data = body(rnd)
        sys_flag = 0
        if rnd.random() < 0.1:
            data, sys_flag = zlib.compress(data), SYSFLAG_COMPRESSED
        born, born_v6 = pack_host(rnd.choice(HOSTS) if rnd.random() < 0.1 else HOSTS[0])
        store, store_v6 = pack_host(rnd.choice(HOSTS) if rnd.random() < 0.1 else HOSTS[1])
        sys_flag |= (SYSFLAG_BORNHOST_V6 if born_v6 else 0) | (SYSFLAG_STOREHOST_V6 if store_v6 else 0)
        out.append(
            encode_record(
                topic,
                properties(rnd),
                data,
                rnd.randrange(16),
                rnd.randrange(4),
                first_offset + i,
                rnd.choice([0, 4096 * i, rnd.randrange(1 << 62)]),
                sys_flag,
                1_700_000_000_000 + rnd.randrange(100),
                born,
                1_700_000_000_000 + rnd.randrange(100),
                store,
                rnd.randrange(20),
                rnd.randrange(3),
            )
        )
    return b"".join(out)


def reference_rows(buffers: list[bytes], window: tuple[int, int, int, int] | None) -> list[Row]:
    rows = [to_row(m, BROKER) for buf in buffers for m in iter_messages(buf)]
    if window is None:
        return rows
    lo, hi, begin, end = window
    return [r for r in rows if lo <= r[3] < hi and begin <= r[10] < end]


def reference_lines(rows: list[Row]) -> bytes:
    """The encoder replays used first: the standard library's, one record at a time."""
    out = []
    for r in rows:
        record = to_record_of_row(r)
        out.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    return "".join(out).encode()


def to_record_of_row(row: Row) -> dict[str, object]:
    from mqadmin.model import Message

    msg = Message(
        topic=row[0],
        body=bytes(row[-1]),
        properties=row[14],
        queue_id=row[2],
        queue_offset=row[3],
        commitlog_offset=row[4],
        msg_id=row[5],
        born_timestamp=row[9],
        store_timestamp=row[10],
        born_host=row[11],
        store_host=row[12],
        reconsume_times=row[13],
    )
    return to_record(msg, row[1])


def plain(rows: list[Row]) -> list[tuple[object, ...]]:
    return [(*r[:-1], bytes(r[-1])) for r in rows]


def cases(seed: int, rounds: int) -> list[tuple[list[bytes], tuple[int, int, int, int] | None]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(rounds):
        first = rnd.randrange(1000)
        buffers = [pulled(rnd, rnd.randrange(1, 40), first + 100 * k) for k in range(rnd.randrange(1, 3))]
        window = None
        if rnd.random() < 0.5:
            lo = first + rnd.randrange(-5, 20)
            t = 1_700_000_000_000 + rnd.randrange(-10, 50)
            window = (lo, lo + rnd.randrange(200), t, t + rnd.randrange(120))
        out.append((buffers, window))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_decoder_and_json_match_the_reference(seed: int) -> None:
    for buffers, window in cases(seed, 60):
        want = reference_rows(buffers, window)
        got = decode_rows(buffers, BROKER, window)
        assert plain(got) == plain(want)
        # views of a store's files (not bytes) decode the same
        assert plain(decode_rows([memoryview(b) for b in buffers], BROKER, window)) == plain(want)
        assert b"".join(json_chunks(got)) == reference_lines(want)


def test_arrow_table_matches_one_built_row_by_row() -> None:
    pa = pytest.importorskip("pyarrow")
    for buffers, window in cases(4, 40):
        want = reference_rows(buffers, window)
        got = rows_to_table(decode_rows(buffers, BROKER, window))
        records = [dict(zip(ROW_KEYS, (*r[:-2], list(r[14].items()), bytes(r[-1])), strict=True)) for r in want]
        assert got.equals(pa.Table.from_pylist(records, schema=arrow_schema()))


def test_the_generator_makes_the_odd_cases() -> None:
    """The cases above are only as good as what they contain: check they hold each odd kind."""
    buffers = [b for bufs, _ in cases(1, 60) for b in bufs]
    rows = reference_rows(buffers, None)
    lines = reference_lines(rows)
    assert b'"body_base64":' in lines and b'"body":""' in lines
    assert any(len(r[0]) > 127 for r in rows) and any("\ufffd" in r[0] for r in rows)
    assert any(r[11].startswith("[") for r in rows)
    assert any("v\x01w" in r[14].values() for r in rows) and any(not r[14] for r in rows)
    raw = b"".join(buffers)
    assert b"\x02\x01" in raw and b"lonely" in raw and b"x\x9c" in raw  # zlib-compressed bodies
