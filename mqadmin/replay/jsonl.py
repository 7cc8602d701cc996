"""JSON lines from an Arrow table of replay rows, column by column.

``table_json_chunks(rows_to_table(rows))`` writes byte for byte what ``json_chunks(rows)``
writes, without a Python object per record: each field becomes a column of its JSON text
(numbers cast, strings between quotes, properties joined into objects, a column with one value
a literal) and one element-wise join of those columns with the keys between them gives every
line at once. Values that need escaping (a quote, a backslash or a control character inside)
are escaped by orjson, one by one when they are few, all in one call when they are many (JSON
documents as bodies); bodies that are not UTF-8 become base64 as in the row path. Imports
pyarrow: only a sink that already holds a table calls it."""

from __future__ import annotations

import binascii
import functools
from array import array
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate, islice
from typing import TYPE_CHECKING, Any, TypeAlias

from mqadmin.replay.records import RECORD_KEYS, arrow_schema

if TYPE_CHECKING:
    import pyarrow

#: rows joined in one go (a slice's, as a rule): enough that the kernels' cost per call is small
_CHUNK_ROWS = 8192
#: body bytes a piece holds at most, so that its lines (bodies escaped: up to six times their
#: size) stay within a string array's 2 GiB
_CHUNK_BYTES = 256 << 20
#: a body range whose rows are checked one by one once validating it as a whole has failed
_LEAF_ROWS = 128
#: escaped all at once when more than one row in this many needs it
_MANY = 16


def table_json_lines(table: pyarrow.Table) -> bytes:
    """``json_lines(rows)`` for ``table = rows_to_table(rows)``."""
    return b"".join(table_json_chunks(table))


def table_json_chunks(table: pyarrow.Table) -> list[pyarrow.Buffer]:
    """``json_lines(rows)`` for ``table = rows_to_table(rows)`` in pieces of up to
    ``_CHUNK_ROWS`` lines, as Arrow buffers: bytes-like (a file writes them, ``b"".join``
    joins them, pickle copies them), so the lines are not copied once more into ``bytes``."""
    schema = arrow_schema()
    if table.schema.names != schema.names or table.schema.types != schema.types:
        raise ValueError(f"not a replay table: {table.schema}")
    out = []
    for batch in table.to_batches():
        bodies = _offsets(batch.column(len(RECORD_KEYS)))
        start = 0
        while start < batch.num_rows:
            end = min(start + _CHUNK_ROWS, batch.num_rows)
            while end - start > 1 and bodies[end].as_py() - bodies[start].as_py() > _CHUNK_BYTES:
                end = start + (end - start) // 2
            out.append(_lines(batch.slice(start, end - start)))
            start = end
    return out


def _lines(batch: pyarrow.RecordBatch) -> pyarrow.Buffer:
    """One piece: the fields' JSON columns joined with the keys between them."""
    import pyarrow as pa

    columns = batch.columns
    parts: list[Part] = []
    for i, key in enumerate(RECORD_KEYS):
        parts.append(f'{"," if i else "{"}"{key}":')
        if pa.types.is_string(columns[i].type):
            parts += _json_string(columns[i])
        elif pa.types.is_map(columns[i].type):
            parts += _json_object(columns[i])
        else:
            parts.append(_json_number(columns[i]))
    parts += _json_body(columns[len(RECORD_KEYS)])
    parts.append("}\n")
    return _data(_join(parts, batch.num_rows))


#: a piece of a line: a column of texts, or a literal (the same in every line)
Part: TypeAlias = "pyarrow.Array | str"


def _join(parts: list[Part], length: int) -> pyarrow.Array:
    """The parts joined row by row into ``length`` texts (a kernel's cost grows with its
    arguments: literals next to each other are merged first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    args: list[Any] = []
    for part in parts:
        if isinstance(part, str) and args and isinstance(args[-1], str):
            args[-1] += part
        else:
            args.append(part)
    if len(args) == 1 and isinstance(args[0], str):
        return pc.fill_null(pa.nulls(length, pa.string()), _text(args[0]))
    return pc.binary_join_element_wise(*(_text(a) if isinstance(a, str) else a for a in args), _text(""))


def _json_number(column: pyarrow.Array) -> Part:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not column.null_count:
        low, high = pc.min_max(column).values()
        if low == high:  # one value in every line (a queue id, reconsume times): a literal
            return str(low.as_py())
    text = column.cast(pa.string())
    return pc.fill_null(text, _text("null")) if column.null_count else text


def _json_string(column: pyarrow.Array) -> list[Part]:
    """The strings as JSON: between literal quotes (nulls as ``null``)."""
    import orjson
    import pyarrow.compute as pc

    if _constant(column):  # one value in every line (the topic, the broker): a literal
        return [orjson.dumps(column[0].as_py()).decode()]
    if not column.null_count:
        return ['"', _escaped(column), '"']
    return [pc.fill_null(_join(['"', _escaped(column), '"'], len(column)), _text("null"))]


def _escaped(column: pyarrow.Array) -> pyarrow.Array:
    """The strings' JSON text between the quotes: the strings themselves as a rule, the few that
    need escaping escaped by orjson one by one, or all of them by one orjson call when many do
    (bodies that are JSON documents: every one holds quotes)."""
    import orjson
    import pyarrow as pa

    rows = _rows_to_escape(column, len(column) // _MANY)
    if rows is None and not column.null_count:
        return _escape_all(column)
    if rows is None:
        rows = _rows_to_escape(column, len(column))
        assert rows is not None
    if not rows:
        return column
    values = column.take(pa.array(rows, pa.int64())).to_pylist()
    return _replace(column, rows, [orjson.dumps(v)[1:-1] for v in values])


def _escape_all(column: pyarrow.Array) -> pyarrow.Array:
    """Every string escaped by one orjson call: an indented list, one string a line (a newline
    inside a string is always escaped, so the lines are the list's), and a last empty one so
    that each string's line ends alike: ``  "text",``. The texts are read in place, each with
    what follows it up to the next text's start (``",\\n  "``) cut off."""
    import orjson
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(column)
    listed = orjson.dumps([*column.to_pylist(), ""], option=orjson.OPT_INDENT_2)
    # the k-th newline is at the lengths of the lines before it and k newlines; a text starts 4 after
    lengths = array("i", islice(accumulate(map(len, listed.split(b"\n"))), count + 1))
    newlines = pc.add(
        pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(lengths)]),
        pa.array(range(count + 1), pa.int32()),
    )
    starts = pc.add(newlines, pa.scalar(4, pa.int32()))
    texts = pa.Array.from_buffers(pa.binary(), count, [None, starts.buffers()[1], pa.py_buffer(listed)])
    return pc.binary_slice(texts, 0, -6).view(pa.string())


def _constant(column: pyarrow.Array) -> bool:
    """Whether every row holds the same string (no null); most columns that vary differ
    between their first and last rows already."""
    import pyarrow.compute as pc

    if column.null_count or not len(column):
        return False
    first = column[0]
    return bool(first == column[-1] and pc.all(pc.equal(column, first)).as_py())


def _json_object(column: pyarrow.Array) -> list[Part]:
    """Each map as a JSON object, its entries in their order (a dict's, as orjson writes it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = column.offsets  # into the whole child arrays, also when the column is a slice
    first = offsets[0].as_py()
    count = offsets[-1].as_py() - first
    keys = column.keys.slice(first, count)
    items = column.items.slice(first, count)
    mask = column.is_null() if column.null_count else None
    starts = pc.subtract(offsets, pa.scalar(first, pa.int32()))
    sizes = pc.list_value_length(pa.ListArray.from_arrays(starts, keys))
    if not (column.null_count or items.null_count or pc.min(sizes).as_py() == 0):
        # as a rule: every map has entries, all strings: quotes between the entries' texts
        entries = pc.binary_join_element_wise(_escaped(keys), _escaped(items), _text('":"'))
        inner = pc.binary_join(pa.ListArray.from_arrays(starts, entries), _text('","'))
        return ['{"', inner, '"}']
    entries = _join([*_json_string(keys), ":", *_json_string(items)], count)
    inner = pc.binary_join(pa.ListArray.from_arrays(starts, entries, mask=mask), _text(","))
    objects = _join(["{", inner, "}"], len(column))
    return [pc.fill_null(objects, _text("null")) if column.null_count else objects]


def _json_body(column: pyarrow.Array) -> list[Part]:
    """The body's key (``body`` or, where the bytes are not UTF-8, ``body_base64``) and its
    text: the bytes themselves as a rule, escaped by orjson where they need it, base64 where
    they are not UTF-8."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count:
        raise ValueError("a replay row without a body")
    text = column.view(pa.string())
    try:
        column.cast(pa.string())  # validates the whole column at once, as a rule all UTF-8
        invalid: list[int] = []
    except pa.ArrowInvalid:
        invalid = _not_utf8(column, 0, len(column))
    b64 = binascii.b2a_base64
    key: Part = ',"body":"'
    if len(invalid) == len(column):
        key = ',"body_base64":"'
        text = _strings([b64(v, newline=False) for v in column.to_pylist()])
    elif invalid:
        key = pc.if_else(_mask(len(column), invalid), _text(',"body_base64":"'), _text(key))
        values = column.take(pa.array(invalid, pa.int64())).to_pylist()
        text = _replace(text, invalid, [b64(v, newline=False) for v in values])
    return [key, _escaped(text), '"']  # base64 needs no escaping


def _not_utf8(column: pyarrow.Array, lo: int, hi: int) -> list[int]:
    """The rows in [lo, hi) whose bytes are not UTF-8: halves validated by Arrow until a range
    is small, then its rows by Python's decoder (the two agree: both follow RFC 3629)."""
    import pyarrow as pa

    if hi - lo <= _LEAF_ROWS:
        bad = []
        for r, value in enumerate(column.slice(lo, hi - lo).to_pylist(), lo):
            try:
                str(value, "utf-8")
            except UnicodeDecodeError:
                bad.append(r)
        return bad
    try:
        column.slice(lo, hi - lo).cast(pa.string())
        return []
    except pa.ArrowInvalid:
        mid = (lo + hi) // 2
        return _not_utf8(column, lo, mid) + _not_utf8(column, mid, hi)


def _rows_to_escape(column: pyarrow.Array, limit: int) -> list[int] | None:
    """The rows that may hold a quote, a backslash or a control character, or None when there
    are more than ``limit``: found in the column's bytes at once (memchr for the first two, the
    smallest byte for the last), then located row by row only when there is one. It may
    include rows that need no escaping (a non-ASCII row when a control character is there);
    never misses one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = _offsets(column)
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if start == end:
        return []
    data = column.buffers()[2].slice(start, end - start)
    rows: set[int] = set()
    find = _finder(data)
    bounds: list[int] = []
    for char in b'"\\':
        at = find(char, 0)
        while at >= 0:
            bounds = bounds or offsets.to_pylist()
            row = bisect_right(bounds, start + at) - 1
            rows.add(row)
            if len(rows) > limit:
                return None
            at = find(char, bounds[row + 1] - start)
    low = pc.min(pa.Array.from_buffers(pa.uint8(), len(data), [None, data])).as_py()
    if low < 0x20:
        printable = pc.fill_null(pc.ascii_is_printable(column), True)
        rows.update(pc.indices_nonzero(pc.invert(printable)).to_pylist())
    return sorted(rows) if len(rows) <= limit else None


def _finder(data: pyarrow.Buffer) -> Callable[[int, int], int]:
    """``find(byte, start)``: where ``byte`` next is in ``data`` from ``start``, or -1; by the C
    library's memchr in place where there is one (a body column is megabytes: copying it out
    cost more than searching it), else in a copy."""
    memchr = _memchr()
    if memchr is None:
        copy: bytes = data.to_pybytes()
        return copy.find
    base, size = data.address, data.size

    def find(byte: int, start: int) -> int:
        at = memchr(base + start, byte, size - start) if start < size else None
        return -1 if at is None else at - base

    return find


@functools.cache
def _memchr() -> Any:
    import ctypes

    try:
        memchr = ctypes.CDLL(None).memchr  # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):
        return None
    memchr.restype = ctypes.c_void_p
    memchr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    return memchr


@functools.lru_cache(maxsize=512)
def _text(value: str) -> pyarrow.Scalar:
    """A literal as an Arrow scalar, made once: a plain str argument costs a kernel call a
    conversion (and a failed optional import) every time."""
    import pyarrow as pa

    return pa.scalar(value, pa.string())


def _offsets(column: pyarrow.Array) -> pyarrow.Array:
    """A string or binary array's value offsets (len + 1 of them), honouring a slice."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int32(), len(column) + 1, [None, column.buffers()[1]], offset=column.offset)


def _mask(length: int, rows: list[int]) -> pyarrow.Array:
    import pyarrow as pa

    flags = bytearray(length)
    for row in rows:
        flags[row] = 1
    return pa.Array.from_buffers(pa.uint8(), length, [None, pa.py_buffer(flags)]).cast(pa.bool_())


def _replace(column: pyarrow.Array, rows: list[int], texts: list[bytes]) -> pyarrow.Array:
    """``column`` with ``texts`` (UTF-8) in place of its values at ``rows`` (ascending)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    replacements = pa.array(texts, pa.binary()).view(pa.string())
    return pc.replace_with_mask(column, _mask(len(column), rows), replacements)


def _strings(texts: list[bytes]) -> pyarrow.Array:
    """UTF-8 texts as a string array: joined once, offsets from their lengths (several times
    faster than converting them one by one)."""
    import pyarrow as pa

    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, texts)))
    return pa.Array.from_buffers(pa.string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(texts))])


def _data(column: pyarrow.Array) -> pyarrow.Buffer:
    """A string array's values, end to end (every line, in order)."""
    offsets = _offsets(column)
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return column.buffers()[2].slice(start, end - start)
