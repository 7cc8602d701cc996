"""The replay record: one message as a flat document, the same for every sink and both engines.

JSON lines carry ``body`` when the bytes are valid UTF-8 (readable with ``jq``) and
``body_base64`` otherwise, so no byte is ever lost; Parquet keeps ``body`` as binary. Keys
are always present and always in the same order, so local and Spark outputs compare line for
line.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.model import Message

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
    return json.dumps(to_record(msg, broker), ensure_ascii=False, separators=(",", ":"))


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


def rows_to_table(rows: Iterable[tuple[Any, ...]]) -> pyarrow.Table:
    """Row tuples (ROW_KEYS order) as an Arrow table with the replay schema."""
    import pyarrow as pa

    schema = arrow_schema()
    columns: list[list[Any]] = [[] for _ in ROW_KEYS]
    for row in rows:
        for i, value in enumerate(row):
            columns[i].append(list(value.items()) if i == _PROPERTIES else value)
    return pa.Table.from_arrays([pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)], schema=schema)


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
