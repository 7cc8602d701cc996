"""Read and write the JSON dialect that Java's fastjson 1.2.x produces.

RocketMQ bodies and config files are fastjson output, which standard parsers reject: map keys
may be bare numbers (``{0:250}``) or whole objects (``{{"brokerName":"b",...}:12}``). This module
parses that dialect (standard JSON parses exactly as ``json.loads`` would) and writes it back
compactly or in fastjson's PrettyFormat layout, so a file we write looks like one a broker wrote.
"""

from __future__ import annotations

import decimal
import enum
import gc
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import chain, cycle
from typing import Any, Final

from mqadmin.model import MessageQueue

__all__ = [
    "FastjsonDecodeError",
    "FrozenObject",
    "dumps",
    "dumps_pretty",
    "java_double",
    "loads",
    "loads_queue_keyed",
    "mq_table",
    "to_message_queue",
]


class FastjsonDecodeError(json.JSONDecodeError):
    """Garbage in a fastjson text; ``pos``/``lineno``/``colno`` say where (a ValueError)."""


class FrozenObject(Mapping[Any, Any]):
    """A JSON object used as a map key: immutable, hashable, equal to any mapping with the same items.

    Keys keep the order they had in the text; equality and hashing ignore that order.
    """

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        self._items: dict[Any, Any] = dict(items)
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenObject({self._items!r})"


# ---------------------------------------------------------------------------------------------
# Parsing

_WS: Final = " \t\n\r"
_NUMBER_RE: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_STRING_CHUNK_RE: Final = re.compile(r'[^"\\]*')
_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX_ESCAPE_LEN: Final = 4
_ESCAPE_PREFIX_LEN: Final = len("\\u")
_SIMPLE_ESCAPE_LEN: Final = len("\\n")
_HIGH_SURROGATES: Final = range(0xD800, 0xDC00)
_LOW_SURROGATES: Final = range(0xDC00, 0xE000)
_SURROGATE_BASE: Final = 0x10000
_SURROGATE_SHIFT: Final = 10
# Non-standard constants that json.loads also accepts; kept for parity with it.
_CONSTANTS: Final[dict[str, Any]] = {
    "true": True,
    "false": False,
    "null": None,
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
}


#: deepest nesting loads() accepts: far beyond any RocketMQ body, far below Python's recursion limit
MAX_DEPTH: Final = 200


class _Parser:
    """Recursive descent over one text; values are built bottom-up."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, msg: str, pos: int | None = None) -> FastjsonDecodeError:
        return FastjsonDecodeError(msg, self.text, self.pos if pos is None else pos)

    def skip_ws(self) -> None:
        text, pos, n = self.text, self.pos, len(self.text)
        while pos < n and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self, as_key: bool = False) -> Any:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("Expecting value")
        ch = self.text[self.pos]
        if ch in "{[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"Nesting deeper than {MAX_DEPTH}")
            value = self.obj(as_key) if ch == "{" else self.array(as_key)
            self.depth -= 1
            return value
        if ch == '"':
            return self.string()
        if ch == "-" or ch.isdigit():
            if self.text.startswith("-Infinity", self.pos):
                self.pos += len("-Infinity")
                return -math.inf
            return self.number()
        for word, const in _CONSTANTS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return const
        raise self.fail("Expecting value")

    def number(self) -> int | float:
        m = _NUMBER_RE.match(self.text, self.pos)
        if m is None:
            raise self.fail("Expecting value")
        self.pos = m.end()
        if m.group(1) is None and m.group(2) is None:
            return int(m.group())
        return float(m.group())

    def string(self) -> str:
        text = self.text
        start = self.pos
        self.pos += 1
        parts: list[str] = []
        while True:
            m = _STRING_CHUNK_RE.match(text, self.pos)
            assert m is not None  # the pattern matches the empty string
            parts.append(m.group())
            self.pos = m.end()
            if self.pos >= len(text):
                raise self.fail("Unterminated string starting at", start)
            if text[self.pos] == '"':
                self.pos += 1
                return "".join(parts)
            parts.append(self.escape())

    def escape(self) -> str:
        """Decode one backslash escape at ``pos``, joining surrogate pairs like json does."""
        text = self.text
        esc = text[self.pos + 1 : self.pos + 2]
        if esc in _SIMPLE_ESCAPES:
            self.pos += _SIMPLE_ESCAPE_LEN
            return _SIMPLE_ESCAPES[esc]
        if esc != "u":
            raise self.fail("Invalid \\escape")
        code = self.hex4(self.pos + _ESCAPE_PREFIX_LEN)
        self.pos += _ESCAPE_PREFIX_LEN + _HEX_ESCAPE_LEN
        if code in _HIGH_SURROGATES and text.startswith("\\u", self.pos):
            low = self.hex4(self.pos + _ESCAPE_PREFIX_LEN)
            if low in _LOW_SURROGATES:
                self.pos += _ESCAPE_PREFIX_LEN + _HEX_ESCAPE_LEN
                code = (
                    _SURROGATE_BASE
                    + ((code - _HIGH_SURROGATES.start) << _SURROGATE_SHIFT)
                    + (low - _LOW_SURROGATES.start)
                )
        return chr(code)

    def hex4(self, at: int) -> int:
        digits = self.text[at : at + _HEX_ESCAPE_LEN]
        if len(digits) != _HEX_ESCAPE_LEN or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise self.fail("Invalid \\uXXXX escape", at - _ESCAPE_PREFIX_LEN)
        return int(digits, 16)

    def obj(self, frozen: bool) -> Any:
        start = self.pos
        self.pos += 1
        items: list[tuple[Any, Any]] = []
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return FrozenObject() if frozen else {}
        while True:
            # fastjson writes non-string keys bare: numbers, or whole objects for bean keys,
            # which come back frozen (hashable) all the way down.
            key = self.value(as_key=True)
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.fail("Expecting ':' delimiter")
            self.pos += 1
            items.append((key, self.value(as_key=frozen)))
            self.skip_ws()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == "}":
                break
            if ch != ",":
                raise self.fail("Expecting ',' delimiter", self.pos - 1)
            self.skip_ws()
            if self.pos >= len(self.text):
                raise self.fail(f"Unterminated object starting at char {start}")
        return FrozenObject(items) if frozen else dict(items)

    def array(self, frozen: bool) -> Any:
        self.pos += 1
        out: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return () if frozen else out
        while True:
            out.append(self.value(as_key=frozen))
            self.skip_ws()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == "]":
                break
            if ch != ",":
                raise self.fail("Expecting ',' delimiter", self.pos - 1)
        return tuple(out) if frozen else out


def loads(text: str | bytes) -> Any:
    """Parse fastjson text; object keys come back as ``str``, ``int``/``float`` or ``FrozenObject``.

    Objects in value position are plain dicts, exactly as ``json.loads`` gives them.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8-sig")
    parser = _Parser(text)
    try:
        result = parser.value()
    except RecursionError:
        raise parser.fail("Nesting too deep") from None
    parser.skip_ws()
    if parser.pos != len(text):
        raise parser.fail("Extra data")
    return result


#: a queue object in key position, as fastjson writes it (fields sorted, names without escapes).
#: It cannot match inside a JSON string: there every quote is escaped.
_MQ_KEY_RE: Final = re.compile(r'\{"brokerName":"([^"\\]*)","queueId":(-?\d+),"topic":"([^"\\]*)"\}:')
#: what a rewritten queue key starts with; NUL is in no topic or broker name
_MQ_KEY_MARK: Final = "\x00"
#: what goes before each of a queue key's three fields and after the last, in its rewritten form
#: ``"\u0000<brokerName>\u0000<queueId>\u0000<topic>":`` (a JSON string key the C json module reads)
_MQ_KEY_SEAMS: Final = ('"\\u0000', "\\u0000", "\\u0000", '":')


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a big reply becomes objects (JSON holds no cycles;
    reference counting frees them), back to what it was afterwards."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def loads_queue_keyed(text: str | bytes) -> Any:
    """``loads`` for big bodies keyed by message queues (ConsumeStatsList, TopicStatsTable).

    The queue keys are rewritten into marked strings (``to_message_queue`` reads them) and the
    rest is parsed by the C json module, tens of times faster than the general parser; a body
    with anything else json cannot read goes to ``loads``.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8-sig")
    # split, not sub with a template: a template is expanded in Python once per key (tens of
    # thousands per reply), while split and join run in C. The parts are the text before the
    # first key, then per key its three fields and the text after it.
    parts = _MQ_KEY_RE.split(text)
    try:
        return json.loads("".join(chain.from_iterable(zip(parts[:-1], cycle(_MQ_KEY_SEAMS)))) + parts[-1])
    except ValueError:
        return loads(text)


# ---------------------------------------------------------------------------------------------
# Message queues as keys

_MQ_FIELDS: Final = ("brokerName", "queueId", "topic")
# ali-ons writes its local offsets keyed by MessageQueue.toString-like text.
_ONS_MQ_RE: Final = re.compile(r'\[topic="(.*)", brokerName="(.*)", queueId="?(-?\d+)"?\]\Z', re.DOTALL)


def to_message_queue(key: Any) -> MessageQueue:
    """Turn a map key that denotes a queue into a ``MessageQueue``.

    Accepts a fastjson object key (``FrozenObject``/mapping with brokerName, queueId, topic), a
    string holding such an object (the C++ client keys its offsets by the MQ's JSON text), the
    ali-ons ``[topic="T", brokerName="b", queueId="0"]`` text, or a ``MessageQueue``.
    """
    if isinstance(key, MessageQueue):
        return key
    if isinstance(key, str):
        if key.startswith(_MQ_KEY_MARK):  # from loads_queue_keyed
            _, broker, qid, topic = key.split(_MQ_KEY_MARK)
            return MessageQueue(topic, broker, int(qid))
        stripped = key.strip()
        ons = _ONS_MQ_RE.match(stripped)
        if ons:
            return MessageQueue(ons.group(1), ons.group(2), int(ons.group(3)))
        try:
            key = loads(stripped)
        except ValueError:
            raise ValueError(f"not a message queue key: {key!r}") from None
    if isinstance(key, Mapping) and all(f in key for f in _MQ_FIELDS):
        topic, broker, qid = key["topic"], key["brokerName"], key["queueId"]
        if isinstance(topic, str) and isinstance(broker, str) and not isinstance(qid, bool):
            try:
                return MessageQueue(topic, broker, int(qid))
            except (TypeError, ValueError):
                pass
    raise ValueError(f"not a message queue key: {key!r}")


def mq_table(table: Mapping[Any, Any]) -> dict[MessageQueue, Any]:
    """Re-key a parsed MQ-keyed map (ConsumeStats, ResetOffsetBody, offsets.json) by MessageQueue."""
    return {to_message_queue(k): v for k, v in table.items()}


# ---------------------------------------------------------------------------------------------
# Writing

_INDENT: Final = "\t"
# Java's Double.toString switches to scientific notation outside [1e-3, 1e7).
_JAVA_PLAIN_MIN: Final = 1e-3
_JAVA_PLAIN_MAX: Final = 1e7
_SHORT_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_NEEDS_ESCAPE_RE: Final = re.compile(r'["\\\x00-\x1f\x7f]')


def _escape_char(m: re.Match[str]) -> str:
    ch = m.group()
    return _SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04X}"


def _quote(s: str) -> str:
    """A JSON string literal as fastjson writes it (non-ASCII raw, control chars escaped)."""
    return '"' + _NEEDS_ESCAPE_RE.sub(_escape_char, s) + '"'


def java_double(x: float) -> str:
    """Format like Java's shortest ``Double.toString`` (``0.0``, ``1.5``, ``1.0E10``, ``NaN``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    dec = decimal.Decimal(repr(x))
    sign = "-" if dec < 0 else ""
    dec = abs(dec)
    if _JAVA_PLAIN_MIN <= abs(x) < _JAVA_PLAIN_MAX:
        plain = f"{dec:f}"
        if "." not in plain:
            return f"{sign}{plain}.0"
        plain = plain.rstrip("0")
        return sign + (plain + "0" if plain.endswith(".") else plain)
    _, digits, exp = dec.normalize().as_tuple()
    assert isinstance(exp, int)
    mantissa = "".join(map(str, digits))
    exponent = exp + len(mantissa) - 1
    frac = mantissa[1:] or "0"
    return f"{sign}{mantissa[0]}.{frac}E{exponent}"


class _Writer:
    """Emits one value; in pretty mode follows fastjson's PrettyFormat rules.

    Those rules, learnt from fastjson's map, bean and list serializers: beans and string-keyed map
    entries each start on a new line; non-string keys do not get a line break; a non-empty object
    closes on its own line; lists with more than one element put each on its own line; sets
    (collections that are not lists) stay on one line.
    """

    def __init__(self, pretty: bool) -> None:
        self.pretty = pretty
        self.depth = 0
        self.out: list[str] = []

    def newline(self) -> None:
        if self.pretty:
            self.out.append("\n" + _INDENT * self.depth)

    def value(self, obj: Any) -> None:
        out = self.out
        if obj is None:
            out.append("null")
        elif obj is True:
            out.append("true")
        elif obj is False:
            out.append("false")
        elif isinstance(obj, int):  # IntEnum members too: they stand for numbers
            out.append(str(int(obj)))
        elif isinstance(obj, enum.Enum):
            out.append(_quote(obj.name))  # fastjson writes (Java) enums by name
        elif isinstance(obj, float):
            # fastjson has no literal for NaN/infinity and writes null.
            out.append(java_double(obj) if math.isfinite(obj) else "null")
        elif isinstance(obj, str):
            out.append(_quote(obj))
        elif isinstance(obj, MessageQueue):
            self.bean((("brokerName", obj.broker_name), ("queueId", obj.queue_id), ("topic", obj.topic)))
        elif isinstance(obj, Mapping):
            self.mapping(obj)
        elif isinstance(obj, (list, tuple)):
            self.sequence(obj)
        elif isinstance(obj, (set, frozenset)):
            self.collection(obj)
        else:
            raise TypeError(f"cannot write {type(obj).__name__} as fastjson")

    def bean(self, fields: Iterable[tuple[str, Any]]) -> None:
        """A Java bean: properties in the given (alphabetical) order, each on its own line."""
        self.out.append("{")
        self.depth += 1
        for i, (name, val) in enumerate(fields):
            if i:
                self.out.append(",")
            self.newline()
            self.out.append(_quote(name) + ":")
            self.value(val)
        self.depth -= 1
        self.newline()
        self.out.append("}")

    def mapping(self, obj: Mapping[Any, Any]) -> None:
        self.out.append("{")
        self.depth += 1
        for i, (key, val) in enumerate(obj.items()):
            if i:
                self.out.append(",")
            if isinstance(key, str):
                self.newline()
                self.out.append(_quote(key))
            else:
                self.value(key)
            self.out.append(":")
            self.value(val)
        self.depth -= 1
        if obj:
            self.newline()
        self.out.append("}")

    def sequence(self, items: list[Any] | tuple[Any, ...]) -> None:
        if self.pretty and len(items) > 1:
            self.out.append("[")
            self.depth += 1
            for i, item in enumerate(items):
                if i:
                    self.out.append(",")
                self.newline()
                self.value(item)
            self.depth -= 1
            self.newline()
            self.out.append("]")
        else:
            self.collection(items)

    def collection(self, items: Iterable[Any]) -> None:
        if isinstance(items, (set, frozenset)):
            items = _stable_order(items)
        self.out.append("[")
        for i, item in enumerate(items):
            if i:
                self.out.append(",")
            self.value(item)
        self.out.append("]")


def _stable_order(items: set[Any] | frozenset[Any]) -> list[Any]:
    """Sets have no order of their own; sort when possible so output is reproducible."""
    try:
        return sorted(items)
    except TypeError:
        return list(items)


def dumps(obj: Any) -> str:
    """Compact fastjson text: str keys quoted, numeric keys bare, MessageQueue keys as objects.

    Dict keys keep insertion order (fastjson does not sort maps; callers sort if they want to).
    """
    w = _Writer(pretty=False)
    w.value(obj)
    return "".join(w.out)


def dumps_pretty(obj: Any) -> str:
    """fastjson PrettyFormat text, laid out as a broker writes ``config/consumerOffset.json``."""
    w = _Writer(pretty=True)
    w.value(obj)
    return "".join(w.out)
