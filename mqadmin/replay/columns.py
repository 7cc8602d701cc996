"""Pulled records decoded column by column: many pulls' records into one Arrow table at once.

``decode_rows`` runs a few microseconds of Python bytecode per record. Here Python only walks
the records' size fields to find where each starts; every field of every record is then read
at once, by numpy (fixed fields, through big-endian views of the buffer) and Arrow compute
(bodies, topics and properties, cut out of the buffer by their offsets). It takes the records
producers write: IPv4 hosts, v1 topics, bodies not compressed, topic and properties valid UTF-8,
no property name twice. A batch holding anything else (or anything malformed) goes through
``decode_rows`` whole, so the table is always ``rows_to_table`` of what ``decode_rows`` gives,
value for value and byte for byte once written.

Imports numpy and pyarrow: only the Parquet path of a replay loads this module.
"""

from __future__ import annotations

import functools
import struct
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mqadmin.message import MAGIC_V1, SYSFLAG_BORNHOST_V6, SYSFLAG_COMPRESSED, SYSFLAG_STOREHOST_V6, _unpack_host
from mqadmin.replay.records import arrow_schema, decode_rows, rows_to_table

if TYPE_CHECKING:
    import pyarrow

#: (first queue offset, end queue offset, begin store time, end store time), ends excluded
Window = tuple[int, int, int, int]
#: one pull's record buffers (a pull body, or views of a store's files) and its window
Pull = tuple[Sequence[bytes | memoryview], Window | None]

#: a record with IPv4 hosts: where the message id's parts start, and the body
_PHYSICAL_OFFSET, _STORE_HOST, _HEAD = 28, 64, 88
#: the shortest record: the head, a topic length byte and a properties length
_SMALLEST = _HEAD + 3
_SIZE = struct.Struct(">i")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UNUSUAL = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6 | SYSFLAG_COMPRESSED
#: one buffer must fit Arrow's 32-bit offsets
_MAX_BUFFER = (1 << 31) - 1
_HEX = b"0123456789ABCDEF"
#: each thread's buffer to join a batch's records in, kept up to this size
_SCRATCH_MAX = 64 << 20
_scratch = threading.local()


@dataclass
class Decoded:
    """A table of the kept records, and per pull how many rows and body bytes it gave."""

    table: pyarrow.Table
    counts: list[int]
    body_bytes: list[int]


def decode_table(buffers: Sequence[bytes | memoryview], broker: str, window: Window | None = None) -> pyarrow.Table:
    """``rows_to_table(decode_rows(buffers, broker, window))``, decoded column-wise."""
    return decode_pulls([(buffers, window)], broker).table


def decode_pulls(pulls: Sequence[Pull], broker: str) -> Decoded:
    """The rows ``decode_rows`` gives for each pull in turn (its buffers, its window), as one
    table: column-wise when every record allows, else through ``decode_rows``."""
    return _columns(pulls, broker) or _by_rows(pulls, broker)


def _by_rows(pulls: Sequence[Pull], broker: str) -> Decoded:
    rows, counts, body_bytes = [], [], []
    for buffers, window in pulls:
        got = decode_rows(buffers, broker, window)
        rows += got
        counts.append(len(got))
        body_bytes.append(sum(len(r[-1]) for r in got))
    return Decoded(rows_to_table(rows), counts, body_bytes)


def _columns(pulls: Sequence[Pull], broker: str) -> Decoded | None:
    """The column-wise decoding, or None when a record needs ``decode_rows``."""
    buffers = [b for bufs, _ in pulls for b in bufs]
    total = sum(map(len, buffers))
    if total > _MAX_BUFFER:
        return None
    data = buffers[0] if len(buffers) == 1 and type(buffers[0]) is bytes else _joined(buffers, total)
    # where each record starts: the one step per record in Python (into a list: appending to
    # an array of int64 took twice as long)
    found: list[int] = []
    per_pull = array("q")
    append, unpack = found.append, _SIZE.unpack_from
    pos = 0
    try:
        for bufs, _ in pulls:
            first = len(found)
            for buf in bufs:
                end = pos + len(buf)
                while pos < end:
                    append(pos)
                    size = unpack(data, pos)[0]
                    if size < _SMALLEST:
                        return None
                    pos += size
                if pos != end:  # the last record overruns its buffer
                    return None
            per_pull.append(len(found) - first)
    except struct.error:  # a size cut off by the end
        return None
    starts = array("q", found)
    import numpy as np
    import pyarrow as pa

    n = len(starts)
    if n == 0:
        return Decoded(arrow_schema().empty_table(), [0] * len(pulls), [0] * len(pulls))
    raw = np.frombuffer(data, dtype=np.uint8)
    at = np.frombuffer(starts, dtype=np.int64)
    # every record's fixed part, gathered as opaque bytes through a view with one at every byte
    # (a gather of the record type itself copies field by field, ten times slower), then typed
    heads = np.ndarray((len(raw) - _HEAD + 1,), dtype=f"V{_HEAD}", buffer=raw, strides=(1,))[at].view(_head_type())

    def gather(dtype: str, where: Any) -> Any:
        """The ``dtype`` value at each of the positions ``where``."""
        width = np.dtype(dtype).itemsize
        return np.ndarray((len(raw) - width + 1,), dtype=dtype, buffer=raw, strides=(1,))[where]

    # the checks decode_rows makes before it takes a record as usual, and those it raises on
    size = heads["size"].astype(np.int64)
    blen = heads["body_len"].astype(np.int64)
    if (
        (heads["magic"] != MAGIC_V1).any()
        or (heads["sys_flag"] & _UNUSUAL).any()
        or (blen < 0).any()
        or (_SMALLEST + blen > size).any()
        or (heads["physical_offset"] < 0).any()
    ):
        return None
    ends = at + size
    topic_at = at + (_HEAD + 1) + blen
    topic_end = topic_at + gather("u1", topic_at - 1)
    if (topic_end + 2 > ends).any():
        return None
    props_at = topic_end + 2
    props_end = props_at + gather(">i2", topic_end)
    if (props_end < props_at).any() or (props_end > ends).any():
        return None

    # the window of each record's pull (as inclusive bounds that fit int64)
    records_per_pull = np.frombuffer(per_pull, dtype=np.int64)
    bounds = np.repeat(np.array([_bounds(w) for _, w in pulls], dtype=np.int64), records_per_pull, axis=0)
    qoff, store_ts = heads["queue_offset"], heads["store_time"]
    keep = (qoff >= bounds[:, 0]) & (qoff <= bounds[:, 1]) & (store_ts >= bounds[:, 2]) & (store_ts <= bounds[:, 3])
    pull_ends = np.cumsum(records_per_pull)
    counts = _segment_sums(np.cumsum(keep), pull_ends)
    body_bytes = _segment_sums(np.cumsum(np.where(keep, blen, 0)), pull_ends)
    if not keep.all():
        kept = np.flatnonzero(keep)
        if not len(kept):
            return Decoded(arrow_schema().empty_table(), counts, body_bytes)
        at, blen, topic_at, topic_end = at[kept], blen[kept], topic_at[kept], topic_end[kept]
        props_at, props_end = props_at[kept], props_end[kept]
        heads = heads.view(f"V{_HEAD}")[kept].view(_head_type())  # opaque: see above
    k = len(at)
    buffer = pa.py_buffer(data)
    try:
        topics = _topics(raw, buffer, topic_at, topic_end)
        props = _properties(_cut(buffer, props_at, props_end), k)
    except (pa.ArrowInvalid, UnicodeDecodeError):  # not UTF-8: decode_rows puts replacement characters in
        return None
    if props is None:
        return None
    properties, uniq_keys, tags, keys = props
    head_bytes = heads.view(np.uint8).reshape(k, _HEAD)
    columns = [
        topics,
        _repeat(broker.encode(), k),
        pa.array(heads["queue_id"].astype(np.int32)),
        pa.array(heads["queue_offset"].astype(np.int64)),
        pa.array(heads["physical_offset"].astype(np.int64)),
        _message_ids(head_bytes),
        uniq_keys,
        tags,
        keys,
        pa.array(heads["born_time"].astype(np.int64)),
        pa.array(heads["store_time"].astype(np.int64)),
        _hosts(heads["born_host"]),
        _hosts(heads["store_host"]),
        pa.array(heads["reconsume_times"].astype(np.int32)),
        properties,
        _cut(buffer, at + _HEAD, at + _HEAD + blen),
    ]
    return Decoded(pa.Table.from_arrays(columns, schema=arrow_schema()), counts, body_bytes)


@functools.lru_cache(maxsize=1)
def _head_type() -> Any:
    """A record's fixed part as a numpy record type (IPv4 hosts; big-endian, as stored)."""
    import numpy as np

    fields = {
        "size": (">i4", 0),
        "magic": (">i4", 4),
        "queue_id": (">i4", 12),
        "queue_offset": (">i8", 20),
        "physical_offset": (">i8", _PHYSICAL_OFFSET),
        "sys_flag": (">i4", 36),
        "born_time": (">i8", 40),
        "born_host": (">u8", 48),
        "store_time": (">i8", 56),
        "store_host": (">u8", _STORE_HOST),
        "reconsume_times": (">i4", 72),
        "body_len": (">i4", 84),
    }
    return np.dtype(
        {
            "names": list(fields),
            "formats": [f for f, _ in fields.values()],
            "offsets": [o for _, o in fields.values()],
            "itemsize": _HEAD,
        }
    )


def _topics(raw: Any, buffer: pyarrow.Buffer, begin: Any, stop: Any) -> pyarrow.Array:
    """The records' topics: as a rule one topic throughout, checked byte for byte and decoded once."""
    import numpy as np
    import pyarrow as pa

    length = int(stop[0] - begin[0])
    if (stop - begin == length).all():
        every = raw[begin[:, None] + np.arange(length)]
        if (every == every[0]).all():
            return _repeat(every[0].tobytes().decode("utf-8").encode(), len(begin))
    return _cut(buffer, begin, stop).cast(pa.string())


def _joined(buffers: Sequence[bytes | memoryview], total: int) -> bytes | memoryview:
    """The buffers end to end, in this thread's scratch buffer when they fit: a fresh buffer of a
    slice's size comes from the system page by page each time (a page fault per 4 KiB cost more
    than the copy). Nothing decoded refers to it: every column is copied out."""
    if total > _SCRATCH_MAX:
        return b"".join(buffers)
    scratch: bytearray | None = getattr(_scratch, "buffer", None)
    if scratch is None or len(scratch) < total:
        # room to spare: the next slice's batch is as a rule a little bigger or smaller
        scratch = _scratch.buffer = bytearray(min(max(total * 5 // 4, 2 * len(scratch or b"")), _SCRATCH_MAX))
    view = memoryview(scratch)
    pos = 0
    for buf in buffers:
        end = pos + len(buf)
        view[pos:end] = buf
        pos = end
    return view[:total]


def _segment_sums(running: Any, segment_ends: Any) -> list[int]:
    """Per segment, the sum of the values whose running total is ``running``."""
    import numpy as np

    totals = np.concatenate(([0], running))[segment_ends]
    return [int(x) for x in np.diff(totals, prepend=0)]


def _cut(buffer: pyarrow.Buffer, begin: Any, stop: Any) -> pyarrow.Array:
    """The bytes ``[begin[i], stop[i])`` of ``buffer`` as a binary array, copied out together:
    the ranges (increasing, not overlapping) and the gaps between them make one binary array
    over the buffer, of which every other element is taken."""
    import numpy as np
    import pyarrow as pa

    k = len(begin)
    if k == 0:
        return pa.array([], type=pa.binary())
    offsets = np.empty(2 * k, dtype=np.int32)
    offsets[0::2] = begin
    offsets[1::2] = stop
    both = pa.Array.from_buffers(pa.binary(), 2 * k - 1, [None, pa.py_buffer(offsets), buffer])
    return both.take(pa.array(np.arange(0, 2 * k - 1, 2, dtype=np.int32)))


def _repeat(text: bytes, k: int) -> pyarrow.Array:
    """A string array of ``text`` ``k`` times."""
    import numpy as np
    import pyarrow as pa

    offsets = np.arange(0, len(text) * (k + 1), len(text), dtype=np.int32) if text else np.zeros(k + 1, np.int32)
    return pa.Array.from_buffers(pa.string(), k, [None, pa.py_buffer(offsets), pa.py_buffer(text * k)])


def _message_ids(heads: Any) -> pyarrow.Array:
    """The broker's message ids: store host (ip, port) and commit-log offset as stored, in 32
    upper-case hex digits (``heads``: the records' fixed parts, a row of bytes each)."""
    import numpy as np
    import pyarrow as pa

    k = len(heads)
    raw = np.empty((k, 16), dtype=np.uint8)
    raw[:, :8] = heads[:, _STORE_HOST : _STORE_HOST + 8]
    raw[:, 8:] = heads[:, _PHYSICAL_OFFSET : _PHYSICAL_OFFSET + 8]
    hex_digits = np.frombuffer(_HEX, dtype=np.uint8)
    text = np.empty((k, 32), dtype=np.uint8)
    text[:, 0::2] = hex_digits[raw >> 4]
    text[:, 1::2] = hex_digits[raw & 15]
    offsets32 = np.arange(0, 32 * (k + 1), 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), k, [None, pa.py_buffer(offsets32), pa.py_buffer(text)])


def _hosts(packed: Any) -> pyarrow.Array:
    """``ip:port`` of each packed IPv4 host: a replay meets few, so each is formatted once."""
    import pyarrow as pa

    encoded = pa.array(packed.astype("u8")).dictionary_encode()
    texts = [_unpack_host(v.to_bytes(8, "big"), 0, False)[0] for v in encoded.dictionary.to_pylist()]
    return pa.array(texts, type=pa.string()).take(encoded.indices)


def _properties(texts: pyarrow.Array, k: int) -> tuple[pyarrow.Array, ...] | None:
    """The properties map of each record, and its UNIQ_KEY, TAGS and KEYS (null when absent);
    None when a record names a property twice (a dict keeps the first place, the last value)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pairs = pc.split_pattern(texts, "\x02")
    owner = np.asarray(pc.list_parent_indices(pairs), dtype=np.int64)
    flat = pairs.flatten()
    # within each pair, the first name separator: a pair with none, or with an empty name, is skipped
    offsets = np.frombuffer(flat.buffers()[1], dtype=np.int32)[flat.offset : flat.offset + len(flat) + 1]
    data = np.frombuffer(flat.buffers()[2], dtype=np.uint8) if flat.buffers()[2] is not None else np.zeros(0, np.uint8)
    seps = np.flatnonzero(data == 1)
    begin, stop = offsets[:-1], offsets[1:]
    first = np.searchsorted(seps, begin)
    sep = np.append(seps, len(data))[first]
    good = (sep < stop) & (sep > begin)
    if not good.all():
        begin, stop, sep, owner = begin[good], stop[good], sep[good], owner[good]
    names = _cut(flat.buffers()[2], begin, sep).cast(pa.string())
    values = _cut(flat.buffers()[2], sep + 1, stop).cast(pa.string())
    coded = names.dictionary_encode()
    codes = np.asarray(coded.indices, dtype=np.int64)
    distinct = len(coded.dictionary)
    if len(codes):
        slots = owner * distinct + codes
        if k * distinct <= 4 * len(slots) + 65536:
            twice = np.bincount(slots).max() > 1
        else:  # many names: sort instead of counting
            twice = len(np.unique(slots)) < len(slots)
        if twice:
            return None
    map_offsets = np.zeros(k + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner, minlength=k), out=map_offsets[1:])
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), names, values, type=pa.map_(pa.string(), pa.string()))
    known = {name: code for code, name in enumerate(coded.dictionary.to_pylist())}
    looked_up = []
    for name in ("UNIQ_KEY", "TAGS", "KEYS"):
        code = known.get(name)
        where = np.full(k, 0, dtype=np.int64)
        missing = np.ones(k, dtype=bool)
        if code is not None:
            hits = np.flatnonzero(codes == code)
            where[owner[hits]] = hits
            missing[owner[hits]] = False
        looked_up.append(values.take(pa.array(where, mask=missing)))
    return (properties, *looked_up)


def _bounds(window: Window | None) -> tuple[int, int, int, int]:
    """A window as inclusive int64 bounds (an empty range as one no value is in)."""
    if window is None:
        return (_INT64_MIN, _INT64_MAX, _INT64_MIN, _INT64_MAX)
    lo, hi, begin, end = window
    a, b = max(lo, _INT64_MIN), min(hi - 1, _INT64_MAX)
    c, d = max(begin, _INT64_MIN), min(end - 1, _INT64_MAX)
    if a > b:
        a, b = 1, 0
    if c > d:
        c, d = 1, 0
    return (a, b, c, d)
