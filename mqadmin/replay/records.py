"""The replay record: one message as a flat document, the same for every sink and both engines.

JSON lines carry ``body`` when the bytes are valid UTF-8 (readable with ``jq``) and
``body_base64`` otherwise, so no byte is ever lost; Parquet keeps ``body`` as binary. Keys
are always present and always in the same order, so local and Spark outputs compare line for
line.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.message import (
    MAGIC_V1,
    PROPERTY_NAME_SEP,
    PROPERTY_PAIR_SEP,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_COMPRESSED,
    SYSFLAG_STOREHOST_V6,
    MessageDecodeError,
    _unpack_host,
    decode_message,
)
from mqadmin.model import Message
from mqadmin.replay import BORN_TIME, STORE_TIME, TimeField

if TYPE_CHECKING:
    import pyarrow

#: every record has these keys, in this order, then ``body`` or ``body_base64``
RECORD_KEYS: tuple[str, ...] = (
    "topic",
    "broker",
    "queue_id",
    "queue_offset",
    "commitlog_offset",
    "msg_id",
    "uniq_key",
    "tags",
    "keys",
    "born_timestamp",
    "store_timestamp",
    "born_host",
    "store_host",
    "reconsume_times",
    "properties",
)
#: what a Parquet/Spark row holds: the record keys plus the body as binary
ROW_KEYS: tuple[str, ...] = RECORD_KEYS + ("body",)
_PROPERTIES = ROW_KEYS.index("properties")

#: Arrow types of ROW_KEYS (as type names, so this module needs no pyarrow to import)
_ARROW_TYPES: dict[str, str] = {
    "topic": "string",
    "broker": "string",
    "queue_id": "int32",
    "queue_offset": "int64",
    "commitlog_offset": "int64",
    "msg_id": "string",
    "uniq_key": "string",
    "tags": "string",
    "keys": "string",
    "born_timestamp": "int64",
    "store_timestamp": "int64",
    "born_host": "string",
    "store_host": "string",
    "reconsume_times": "int32",
    "properties": "map",
    "body": "binary",
}


#: a replay row: the values of ROW_KEYS in order (body as bytes, or a view of a pulled buffer)
Row = tuple[Any, ...]


def row_time(field: TimeField) -> Callable[[Row], int | None]:
    """``field.of`` for a replay row (born time at 9, store time at 10, properties at 14)."""
    if field.kind == STORE_TIME:
        return lambda r: int(r[10])
    if field.kind == BORN_TIME:
        return lambda r: int(r[9])
    name = field.name

    def prop(r: Row) -> int | None:
        try:
            return int(r[14][name].strip())
        except (KeyError, ValueError):
            return None

    return prop


def to_row(msg: Message, broker: str) -> tuple[Any, ...]:
    """The message as a tuple in ROW_KEYS order (body as bytes): what Parquet and Spark store."""
    return (
        msg.topic,
        broker,
        msg.queue_id,
        msg.queue_offset,
        msg.commitlog_offset,
        msg.msg_id,
        msg.uniq_key,
        msg.tags,
        msg.keys,
        msg.born_timestamp,
        msg.store_timestamp,
        msg.born_host,
        msg.store_host,
        msg.reconsume_times,
        dict(msg.properties),
        bytes(msg.body),
    )


def to_record(msg: Message, broker: str) -> dict[str, Any]:
    """The JSON form: ``body`` if the bytes are UTF-8, else ``body_base64``."""
    row = to_row(msg, broker)
    record = dict(zip(RECORD_KEYS, row[:-1], strict=True))
    body: bytes = row[-1]
    try:
        record["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        record["body_base64"] = base64.b64encode(body).decode("ascii")
    return record


def to_json_line(msg: Message, broker: str) -> str:
    """One JSONL line (no newline); compact and key-ordered so both engines write the same bytes."""
    return json_lines([to_row(msg, broker)])[:-1].decode("utf-8")


def json_lines(rows: Sequence[Row]) -> bytes:
    """Rows as JSON lines, each ending in a newline: compact, keys in RECORD_KEYS order, non-ASCII
    as UTF-8, ``body`` when the bytes are UTF-8 else ``body_base64`` -- byte for byte what
    ``json.dumps(to_record(...), ensure_ascii=False, separators=(",", ":"))`` writes, through
    orjson (the standard library's encoder took most of a replay's time)."""
    return b"".join(json_chunks(rows))


def json_chunks(rows: Sequence[Row]) -> list[bytes]:
    """``json_lines`` in pieces of a few hundred lines: encoding and joining a piece while it is
    in cache is several times faster than gathering a whole slice's lines, and the pieces can
    be written (or sent from a worker process) without joining them at all."""
    return [_json_chunk(rows[i : i + _JSON_CHUNK]) for i in range(0, len(rows), _JSON_CHUNK)]


_JSON_CHUNK = 256


#: where one record ends and the next begins in orjson's compact array of records: a quote
#: inside a string is always escaped, so only the array's own separators match
_RECORD_SEP = b'},{"topic":'


def _json_chunk(rows: Sequence[Row]) -> bytes:
    """The rows' lines from one orjson call for the whole piece (an array of the records, its
    separators turned into newlines): a call per record cost more than the encoding itself."""
    if not rows:
        return b""
    import orjson

    b64 = binascii.b2a_base64
    records: list[dict[str, Any]] = []
    append = records.append
    for (
        topic,
        broker,
        qid,
        qoff,
        phy,
        msg_id,
        uniq,
        tags,
        keys,
        born_ts,
        store_ts,
        born,
        store,
        rc,
        props,
        body,
    ) in rows:
        record = {
            "topic": topic,
            "broker": broker,
            "queue_id": qid,
            "queue_offset": qoff,
            "commitlog_offset": phy,
            "msg_id": msg_id,
            "uniq_key": uniq,
            "tags": tags,
            "keys": keys,
            "born_timestamp": born_ts,
            "store_timestamp": store_ts,
            "born_host": born,
            "store_host": store,
            "reconsume_times": rc,
            "properties": props,
        }
        try:
            record["body"] = str(body, "utf-8")
        except UnicodeDecodeError:
            record["body_base64"] = b64(body, newline=False).decode("ascii")
        append(record)
    return orjson.dumps(records)[1:-1].replace(_RECORD_SEP, b'}\n{"topic":') + b"\n"


# ---- decoding pulled records straight into rows ----------------------------------------------

#: a record's fixed part when both hosts are IPv4 (as good as every record), without the fields
#: a row leaves out (crc, flag, prepared offset): size, magic, queue id, queue offset, physical
#: offset, sys flag, born time, born host (ip+port as one number), store time, store host,
#: reconsume times, body length
_V4_HEAD = struct.Struct(">ii4xi4xqqiqQqQi8xi")
_SHORT = struct.Struct(">h")
_V6_FLAGS = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6
#: host texts by their 8 packed bytes (ip, port): a replay meets few hosts, many times
_HOSTS: dict[int, str] = {}
#: (host text, the message id's first half) by the store host's packed bytes
_STORES: dict[int, tuple[str, str]] = {}
_HOSTS_MAX = 4096
#: a window that keeps every record: (first offset, end offset, begin time, end time)
_EVERYTHING = (-(1 << 63), 1 << 63, -(1 << 63), 1 << 63)


def decode_rows(
    buffers: Iterable[bytes | memoryview], broker: str, window: tuple[int, int, int, int] | None = None
) -> list[Row]:
    """Rows of every record in ``buffers`` (each holds one or more concatenated commit-log
    records: a pull body, or views of a store's files); exactly what ``to_row(decode_message())``
    gives, without the per-message objects. Bodies are views of the buffers (no copy) unless
    compressed; unusual records (IPv6 hosts, v2 topics, compression) take the generic decoder.

    ``window`` (first queue offset, end queue offset, begin store time, end store time, ends
    excluded) keeps only the records inside it, and skips decoding the others' properties."""
    rows: list[Row] = []
    append = rows.append
    unpack = _V4_HEAD.unpack_from
    head_size = _V4_HEAD.size
    unpack_short = _SHORT.unpack_from
    hosts, stores = _HOSTS, _STORES
    if len(hosts) > _HOSTS_MAX or len(stores) > _HOSTS_MAX:
        hosts.clear()
        stores.clear()
    lo, hi, begin, end_time = window or _EVERYTHING
    pair_sep, name_sep = PROPERTY_PAIR_SEP, PROPERTY_NAME_SEP
    unusual = _V6_FLAGS | SYSFLAG_COMPRESSED
    topic, topic_raw = "", b""  # the last topic and its bytes with their length byte before them
    for buffer in buffers:
        buf = memoryview(buffer)
        raw = buffer if type(buffer) is bytes else None  # bytes can be compared in place
        n = len(buf)
        pos = 0
        while pos < n:
            if n - pos < head_size:
                raise MessageDecodeError(f"truncated record at {pos}")
            (size, magic, qid, qoff, phy, sys_flag,
             born_ts, born_raw, store_ts, store_raw, rc, blen) = unpack(buf, pos)  # fmt: skip
            end = pos + size
            if (
                magic != MAGIC_V1
                or sys_flag & unusual
                or not head_size + blen + 3 <= size <= n - pos
                or blen < 0
                or phy < 0
            ):
                row, pos = _generic_row(buf, pos, size, broker)
                if lo <= row[3] < hi and begin <= row[10] < end_time:
                    append(row)
                continue
            p = pos + head_size + blen
            tlen = buf[p]
            # a pull's records are all of one topic: decode it once
            if raw is None or not raw.startswith(topic_raw, p) or len(topic_raw) != tlen + 1:
                topic = str(buf[p + 1 : p + 1 + tlen], "utf-8", "replace")
                topic_raw = bytes(buf[p : p + 1 + tlen])
            p += 1 + tlen
            (plen,) = unpack_short(buf, p)
            p += 2
            if p + plen > end or plen < 0:
                raise MessageDecodeError(f"record at {pos} overruns its size")
            if not (lo <= qoff < hi and begin <= store_ts < end_time):
                pos = end
                continue
            if raw is not None:
                text = raw[p : p + plen].decode("utf-8", "replace")
            else:
                text = str(buf[p : p + plen], "utf-8", "replace")
            props: dict[str, str] = {}
            for pair in text.split(pair_sep):
                name, sep, value = pair.partition(name_sep)
                if sep and name:
                    props[name] = value
            born = hosts.get(born_raw)
            if born is None:
                born = hosts[born_raw] = _unpack_host(born_raw.to_bytes(8, "big"), 0, False)[0]
            known = stores.get(store_raw)
            if known is None:
                host = _unpack_host(store_raw.to_bytes(8, "big"), 0, False)[0]
                known = stores[store_raw] = (host, "%016X" % store_raw)  # noqa: UP031
            store, id_head = known
            # in ROW_KEYS order; the message id is the store host and the commit-log offset
            # (%-formatting: several times faster than an f-string with format specs)
            append((topic, broker, qid, qoff, phy, id_head + "%016X" % phy,  # noqa: UP031
                    props.get("UNIQ_KEY"), props.get("TAGS"), props.get("KEYS"), born_ts, store_ts,
                    born, store, rc, props, buf[pos + head_size : pos + head_size + blen]))  # fmt: skip
            pos = end
    return rows


def _generic_row(buf: memoryview, pos: int, size: int, broker: str) -> tuple[Row, int]:
    """The record at ``pos`` through the generic decoder, and where the next one starts: for the
    unusual records (IPv6 hosts, v2 topics, compression); it raises what it always raised."""
    if 0 < size <= len(buf) - pos:
        msg, _ = decode_message(bytes(buf[pos : pos + size]))
        end = pos + size
    else:
        msg, end = decode_message(buf, pos)
    return to_row(msg, broker), end


def record_body(record: dict[str, Any]) -> bytes:
    """The body bytes of a record in either form (JSON text/base64, or a Parquet row)."""
    body = record.get("body")
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    encoded = record.get("body_base64")
    if isinstance(encoded, str):
        return base64.b64decode(encoded, validate=True)
    raise ValueError("record has neither body nor body_base64")


def normalize(record: dict[str, Any]) -> dict[str, Any]:
    """A record from any sink in one shape (ROW_KEYS, body as bytes, plain ints and dicts), so
    JSONL, Parquet and Spark outputs can be compared with ``==``."""
    props = record.get("properties") or {}
    if isinstance(props, list):  # Arrow maps come back as [(key, value), ...]
        props = dict(props)
    out: dict[str, Any] = {}
    for key in RECORD_KEYS:
        value = record.get(key)
        if key == "properties":
            value = {str(k): str(v) for k, v in props.items()}
        elif value is not None:
            # partition folders come back typed by inference (a broker named "1" as an int)
            value = int(value) if _ARROW_TYPES[key].startswith("int") else str(value)
        out[key] = value
    out["body"] = record_body(record)
    return out


def from_record(record: dict[str, Any]) -> Message:
    """Back to a Message with every stored field the record keeps (for re-publishing a file)."""
    rec = normalize(record)
    return Message(
        topic=rec["topic"],
        body=rec["body"],
        properties=dict(rec["properties"]),
        queue_id=rec["queue_id"],
        queue_offset=rec["queue_offset"],
        commitlog_offset=rec["commitlog_offset"],
        born_timestamp=rec["born_timestamp"],
        born_host=rec["born_host"],
        store_timestamp=rec["store_timestamp"],
        store_host=rec["store_host"],
        reconsume_times=rec["reconsume_times"],
        msg_id=rec["msg_id"],
        broker_name=rec["broker"],
    )


def arrow_schema() -> pyarrow.Schema:
    """The Parquet schema of ROW_KEYS (imports pyarrow, so only sinks that write Parquet call it)."""
    import pyarrow as pa

    types: dict[str, pyarrow.DataType] = {
        "string": pa.string(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "binary": pa.binary(),
        "map": pa.map_(pa.string(), pa.string()),
    }
    nullable = {"uniq_key", "tags", "keys"}
    return pa.schema([pa.field(k, types[_ARROW_TYPES[k]], nullable=k in nullable) for k in ROW_KEYS])


def rows_to_table(rows: Sequence[Row]) -> pyarrow.Table:
    """Row tuples (ROW_KEYS order) as an Arrow table with the replay schema, built column by
    column: the bodies are joined into one buffer rather than converted one by one."""
    import pyarrow as pa

    schema = arrow_schema()
    if not rows:
        return schema.empty_table()
    columns = list(zip(*rows, strict=True))
    bodies = columns.pop()
    offsets = array("i", [0])
    total = 0
    for body in bodies:
        total += len(body)
        offsets.append(total)
    if total >= 1 << 31:  # int32 offsets: fall back to Arrow's own chunking
        body_array = pa.array([bytes(b) for b in bodies], type=pa.binary())  # chunked by Arrow
    else:
        body_array = pa.Array.from_buffers(
            pa.binary(), len(bodies), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(bodies))]
        )
    arrays = [pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)]
    return pa.Table.from_arrays([*arrays, body_array], schema=schema)


def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Normalised records from a replay output: a JSONL or Parquet file, or a folder of them (the
    Spark engine's output, partitioned by queue); a folder is read in queue, then offset order."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(("_", ".")))
        if any(_is_parquet(f) for f in files):
            # Spark drops the partition columns (broker, queue_id) from the files: read the folder
            # as a Hive-partitioned dataset to get them back from the folder names
            out = [normalize(r) for r in _read_parquet(p)]
        else:
            out = [r for f in files for r in read_records(f)]
        yield from sorted(out, key=lambda r: (r["topic"], r["broker"], r["queue_id"], r["queue_offset"]))
        return
    if _is_parquet(p):
        for row in _read_parquet(p):
            yield normalize(row)
        return
    with p.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield normalize(json.loads(line))


def _is_parquet(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"PAR1"


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    if path.is_dir():
        table = pq.read_table(str(path), partitioning="hive")
    else:
        table = pq.read_table(str(path))
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows
