"""JSON lines from an Arrow table against the row encoder (``json_lines``) and the standard
library's ``json.dumps``, over the generated odd records and over tables built to take each
branch: a column the same in every row (a literal) or not, values that need escaping in either,
nulls, bodies that are not UTF-8 among many that are, sliced and multi-chunk tables."""

from __future__ import annotations

import pickle
import random

import pytest

from mqadmin.replay import jsonl
from mqadmin.replay.records import Row, decode_rows, json_lines, rows_to_table
from tests.replay.test_records_fuzz import BROKER, cases, reference_lines

pa = pytest.importorskip("pyarrow")
T0 = 1_700_000_000_000
I64 = (-(1 << 63), (1 << 63) - 1)


def row(i: int, **fields: object) -> Row:
    """A replay row as the decoder makes it (the producer's usual properties), with changes."""
    props = {"TAGS": ("TagA", "TagB")[i % 2], "KEYS": f"order-{i}", "UNIQ_KEY": f"7F0000010000{i:020X}"}
    props["WAIT"] = "true"
    values: dict[str, object] = {
        "topic": "Bench",
        "broker": "broker-a",
        "queue_id": 3,
        "queue_offset": i,
        "commitlog_offset": i * 1300,
        "msg_id": f"0A000009000029BF{i * 1300:016X}",
        "uniq_key": props["UNIQ_KEY"],
        "tags": props["TAGS"],
        "keys": props["KEYS"],
        "born_timestamp": T0 + i,
        "store_timestamp": T0 + i + 1,
        "born_host": "10.0.0.7:52100",
        "store_host": "10.0.0.9:10911",
        "reconsume_times": 0,
        "properties": props,
        "body": b"x" * 64,
    }
    values.update(fields)
    props = values["properties"] or {}
    assert isinstance(props, dict)
    for name, prop in (("uniq_key", "UNIQ_KEY"), ("tags", "TAGS"), ("keys", "KEYS")):
        values[name] = props.get(prop)  # as the decoder reads them
    return tuple(values.values())


def check(rows: list[Row]) -> None:
    table = rows_to_table(rows)
    want = json_lines(rows)
    assert jsonl.table_json_lines(table) == want
    assert want == reference_lines(rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_records_encode_as_the_row_path(seed: int) -> None:
    for buffers, window in cases(seed, 60):
        rows = decode_rows(buffers, BROKER, window)
        assert jsonl.table_json_lines(rows_to_table(rows)) == json_lines(rows)


ODD = [
    "",
    'q"',
    '"lead',
    "b\\s",
    "\\lead",
    "c\x01",
    "\x00",
    "n\nl",
    "t\tab",
    "\x7f",
    "é\x1f",
    "😀",
    "\u2028",
    '},{"topic":',
]


@pytest.mark.parametrize("name", ["topic", "broker", "msg_id", "born_host", "store_host"])
def test_strings_that_need_escaping_varying_or_the_same_in_every_row(name: str) -> None:
    check([row(i, **{name: ODD[i % len(ODD)]}) for i in range(30)])  # varying
    for odd in ODD:
        check([row(i, **{name: odd}) for i in range(5)])  # a literal
    check([row(i, **{name: "plain"}) for i in range(5)] + [row(5, **{name: 'one "odd"'})])


def test_nulls_and_odd_properties() -> None:
    rnd = random.Random(7)
    rows = []
    for i in range(200):
        names = ODD + ["k", "TAGS", "KEYS"]
        props = {rnd.choice(names): rnd.choice(ODD + ["v"]) for _ in range(rnd.randrange(4))}
        rows.append(row(i, properties=props))  # tags and keys odd or null, uniq_key null
    check(rows)
    check([row(i, properties={}) for i in range(4)])  # every map empty
    check([row(i, properties={"WAIT": "true"}) for i in range(4)])  # the same single entry everywhere
    check([row(i, properties={"x": "y"}) for i in range(4)])  # columns of nulls only


def test_nulls_where_a_decoded_row_has_none() -> None:
    """Not from a broker's records, but an Arrow table can hold them: written as the row path
    writes None."""
    rows = [row(i, properties=None if i % 3 else {"a": "b"}, queue_offset=None if i % 2 else i) for i in range(9)]
    assert jsonl.table_json_lines(rows_to_table(rows)) == json_lines(rows)


def test_numbers_to_the_ends_of_their_types() -> None:
    check([row(i, queue_offset=I64[i % 2], commitlog_offset=I64[1], reconsume_times=-(1 << 31)) for i in range(6)])
    check([row(i, queue_id=(1 << 31) - 1 - i, born_timestamp=-i, store_timestamp=0) for i in range(6)])


NOT_UTF8 = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"ok\xe2\x82"]


def test_bodies_that_are_not_utf8_among_many_that_are() -> None:
    for bad in NOT_UTF8:  # one among many: found by halving, the rest still written as text
        rows = [row(i, body=b"plain %d" % i) for i in range(300)]
        rows[171] = row(171, body=bad)
        check(rows)
    rows = [
        row(i, body=[b"x", b'"q"\n', b"\xc3\xa9\x00", b""][i % 4] + NOT_UTF8[i % 6] * (i % 3 == 0)) for i in range(90)
    ]
    check(rows)
    check([row(i, body=NOT_UTF8[i % 6]) for i in range(40)])  # none is UTF-8


def test_bodies_escaped_one_by_one_or_all_at_once() -> None:
    """A few bodies that need escaping go through orjson one by one, many (JSON documents) in
    one call; the same bytes either way."""
    docs = [b'{"order":%d,"note":"a \\"q\\" \\\\ \xc3\xa9"}' % i for i in range(64)]
    check([row(i, body=docs[i]) for i in range(64)])  # every one
    check([row(i, body=docs[i] if i in (0, 33, 63) else b"plain") for i in range(64)])  # three
    check([row(i, body=b"line\n" if i % 2 else b"\xff\xfe") for i in range(64)])  # half base64
    check([row(i, body=[b"", b'""', b"\\"][i % 3]) for i in range(30)])  # empty ones between


def test_sliced_and_chunked_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    props = [{"TAGS": ODD[i % 12]} if i % 5 else {} for i in range(40)]
    rows = [row(i, properties=props[i], body=[b"b", b"\xff", b'"'][i % 3]) for i in range(40)]
    table = rows_to_table(rows)
    assert jsonl.table_json_lines(table.slice(7, 20)) == json_lines(rows[7:27])
    chunked = pa.concat_tables([table.slice(0, 13), table.slice(13)])
    assert chunked.column("body").num_chunks == 2
    assert jsonl.table_json_lines(chunked) == json_lines(rows)
    monkeypatch.setattr(jsonl, "_CHUNK_ROWS", 6)
    chunks = jsonl.table_json_chunks(chunked)
    assert len(chunks) == 3 + 5 and b"".join(chunks) == json_lines(rows)
    assert jsonl.table_json_chunks(table.slice(0, 0)) == []
    assert b"".join(pickle.loads(pickle.dumps(chunks))) == json_lines(rows)  # as a worker sends them
    monkeypatch.setattr(jsonl, "_CHUNK_ROWS", 8192)
    monkeypatch.setattr(jsonl, "_CHUNK_BYTES", 1)  # pieces halved until their bodies fit, or one row
    chunks = jsonl.table_json_chunks(table)
    assert len(chunks) == len(rows) and b"".join(chunks) == json_lines(rows)


def test_without_memchr_the_bytes_are_searched_in_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert jsonl._memchr() is not None  # as on every POSIX system
    monkeypatch.setattr(jsonl, "_memchr", lambda: None)
    test_generated_records_encode_as_the_row_path(4)
    check([row(i, msg_id=ODD[i % len(ODD)], body=[b"b", b"\xff", b'"'][i % 3]) for i in range(40)])


def test_a_table_of_another_schema_is_refused() -> None:
    table = rows_to_table([row(0)])
    with pytest.raises(ValueError, match="not a replay table"):
        jsonl.table_json_lines(table.drop_columns(["keys"]))
