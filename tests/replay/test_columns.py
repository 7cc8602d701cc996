"""The column-wise decoder against the row decoder, over generated records: ``decode_pulls``
must give ``rows_to_table`` of what ``decode_rows`` gives for each pull, value for value and
byte for byte once written as Parquet. Plain records (the ones producers write, with everything
about them that varies) must take the column-wise path; each kind of record it does not handle
must send its batch to ``decode_rows`` -- a missed one would show as a difference."""

from __future__ import annotations

import io
import random
import struct
import zlib

import pytest

from mqadmin.message import (
    MAGIC_V1,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_COMPRESSED,
    SYSFLAG_STOREHOST_V6,
    MessageDecodeError,
    encode_record,
    pack_host,
)
from mqadmin.replay.records import decode_rows, rows_to_table

pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")
pq = pytest.importorskip("pyarrow.parquet")

from mqadmin.replay.columns import _columns, decode_pulls, decode_table  # noqa: E402

BROKER = "broker-ä"
TOPICS = [b"T", b"TopicTest", "Tópic".encode(), b"", b"T" * 127, b'q"\\']
NAMES = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "x", "é", 'a"b', "k\x7f", "DELAY", "😀"]
VALUES = ["", "TagA", "k1 k2", "v\x01w", "\u2028", "😀", "\x00\x1f", "TagB"]
#: pieces without a name or a separator, skipped by both decoders (not UTF-8 in one: never read)
SKIPPED = [b"lonely", b"", b"\x01nameless", b"\xff\xfe"]
HOSTS = ["10.0.0.7:52100", "192.168.7.8:10911", "127.0.0.1:0", "255.255.255.255:65535", "1.2.3.4:-5"]
T0 = 1_700_000_000_000
#: kinds of record the column-wise path leaves to decode_rows; a batch holding one goes there whole
ODD = ["ipv6", "compressed", "v2-topic", "topic-not-utf8", "name-twice", "value-not-utf8", "bad-magic", "truncated"]


def properties(rnd: random.Random, odd: str | None) -> bytes:
    names = rnd.sample(NAMES, rnd.randrange(len(NAMES) // 2))
    pairs = [f"{n}\x01{rnd.choice(VALUES)}".encode() for n in names]
    if rnd.random() < 0.3:
        pairs.insert(rnd.randrange(len(pairs) + 1), rnd.choice(SKIPPED))
    if odd == "name-twice":
        pairs += [b"TAGS\x01one", b"TAGS\x01two"]
    if odd == "value-not-utf8":
        pairs.append(b"x\x01\xc3")
    text = b"\x02".join(pairs)
    return text + b"\x02" if pairs and rnd.random() < 0.8 else text


def record(rnd: random.Random, offset: int, topic: bytes, odd: str | None = None) -> bytes:
    body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(60))) if rnd.random() < 0.5 else b"x" * 100
    sys_flag = rnd.choice([0, 0x2, 0x4 << 8])  # multi-tags and other flags the decoder ignores
    if odd == "compressed":
        body, sys_flag = zlib.compress(body), sys_flag | SYSFLAG_COMPRESSED
    born, _ = pack_host(rnd.choice(HOSTS))
    store, _ = pack_host(rnd.choice(HOSTS))
    if odd == "ipv6" and rnd.random() < 0.5:
        store, _ = pack_host("[2001:db8::1]:4242")
        sys_flag |= SYSFLAG_STOREHOST_V6
    elif odd == "ipv6":
        born, _ = pack_host("[::1]:4242")
        sys_flag |= SYSFLAG_BORNHOST_V6
    if odd == "v2-topic":
        topic = b"V" * 200
    if odd == "topic-not-utf8":
        topic = b"\xffT"
    out = encode_record(
        topic,
        properties(rnd, odd),
        body,
        rnd.choice([0, 7, (1 << 31) - 1, -1]),
        rnd.randrange(4),
        offset,
        rnd.choice([0, 4096 * offset, rnd.randrange(1 << 63)]),
        sys_flag,
        T0 + rnd.randrange(100),
        born,
        T0 + rnd.randrange(100),
        store,
        rnd.randrange(-2, 20),
        rnd.randrange(3),
    )
    if rnd.random() < 0.1:  # a record longer than its parts: the rest is ignored
        out = struct.pack(">i", len(out) + 5) + out[4:] + b"\x02\x01zzz"
    if odd == "bad-magic":
        out = out[:4] + struct.pack(">i", MAGIC_V1 + 1) + out[8:]
    return out


def pull(rnd: random.Random, count: int, first: int, odd: str | None = None) -> bytes:
    topic = rnd.choice(TOPICS)
    place = rnd.randrange(count) if odd else -1
    out = []
    for i in range(count):
        if rnd.random() < 0.1:
            topic = rnd.choice(TOPICS)
        out.append(record(rnd, first + i, topic, odd if i == place else None))
    data = b"".join(out)
    return data[: -rnd.randrange(1, 60)] if odd == "truncated" else data


def window(rnd: random.Random, first: int) -> tuple[int, int, int, int] | None:
    return rnd.choice(
        [
            None,
            (first + rnd.randrange(-5, 20), first + rnd.randrange(10, 80), T0 + rnd.randrange(-10, 50), T0 + 200),
            (first, first + 100, T0 + 30, T0 + 40),
            (-(1 << 63), 1 << 63, -(1 << 63), 1 << 63),
            (first + 50, first, T0, T0 + 100),  # empty
        ]
    )


def slice_of(
    rnd: random.Random, odd: str | None = None, *, odd_kept: bool = True
) -> list[tuple[list[bytes], tuple[int, int, int, int] | None]]:
    """A few pulls, each of one or two buffers, each with its own window; ``odd`` in one of them
    (whose window keeps everything, with ``odd_kept``)."""
    pulls = []
    first = rnd.randrange(1 << 40)
    chosen = rnd.randrange(3)
    for p in range(3):
        buffers = [pull(rnd, rnd.randrange(1, 30), first + 100 * p + 50 * b) for b in range(rnd.randrange(1, 3))]
        if p == chosen and odd:
            buffers.append(pull(rnd, rnd.randrange(1, 30), first + 100 * p + 60, odd))
        pulls.append((buffers, None if p == chosen and odd and odd_kept else window(rnd, first + 100 * p)))
    if rnd.random() < 0.2:
        pulls.append(([], window(rnd, first)))  # a pull that found nothing
    return pulls


def parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, compression="none", use_dictionary=False)  # as the sink writes parts
    return out.getvalue()


def by_rows(pulls: list[tuple[list[bytes], tuple[int, int, int, int] | None]]) -> tuple[pa.Table, list[int], list[int]]:
    rows = [decode_rows(buffers, BROKER, w) for buffers, w in pulls]
    return (
        rows_to_table([r for got in rows for r in got]),
        [len(r) for r in rows],
        [sum(len(x[-1]) for x in r) for r in rows],
    )


def check(pulls: list[tuple[list[bytes], tuple[int, int, int, int] | None]]) -> None:
    table, counts, body_bytes = by_rows(pulls)
    got = decode_pulls(pulls, BROKER)
    assert got.table.schema == table.schema
    assert got.table.equals(table)
    assert (got.counts, got.body_bytes) == (counts, body_bytes)
    assert all(c.num_chunks == 1 for c in got.table.columns)
    assert parquet(got.table) == parquet(table)


@pytest.mark.parametrize("seed", [1, 2])
def test_plain_records_decode_column_wise_as_rows_do(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(40):
        pulls = slice_of(rnd)
        assert _columns(pulls, BROKER) is not None
        check(pulls)
        # views of a store's files decode the same
        views = [([memoryview(b) for b in bufs], w) for bufs, w in pulls]
        assert decode_pulls(views, BROKER).table.equals(decode_pulls(pulls, BROKER).table)


@pytest.mark.parametrize("odd", ODD)
def test_each_odd_record_sends_its_batch_to_the_row_decoder(odd: str) -> None:
    rnd = random.Random(odd)
    for i in range(8):
        pulls = slice_of(rnd, odd, odd_kept=i % 2 == 0)
        if i % 2 == 0:  # out of the window, an odd record may go column-wise: it is not decoded
            assert _columns(pulls, BROKER) is None
        try:
            by_rows(pulls)
        except MessageDecodeError as exc:
            with pytest.raises(MessageDecodeError, match=str(exc)):
                decode_pulls(pulls, BROKER)
        else:
            check(pulls)


def test_a_table_keeps_its_values_when_the_next_batch_is_decoded() -> None:
    """Batches are joined in a scratch buffer the thread reuses: no column may point into it."""
    rnd = random.Random(11)
    first, second = slice_of(rnd), slice_of(rnd)
    table = decode_pulls(first, BROKER).table
    decode_pulls(second, BROKER)
    assert table.equals(by_rows(first)[0])


def test_a_single_pull_and_nothing_at_all() -> None:
    rnd = random.Random(7)
    data = pull(rnd, 25, 1000)
    for w in (None, (1005, 1010, 0, T0 + 1000), (0, 1, 0, 1)):
        assert decode_table([data], BROKER, w).equals(rows_to_table(decode_rows([data], BROKER, w)))
    assert decode_table([], BROKER).equals(rows_to_table([]))
    assert decode_pulls([([], None), ([b""], None)], BROKER).counts == [0, 0]
