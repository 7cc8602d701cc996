"""RocketMQ's SQL92 message filter, evaluated client-side on a message's properties.

The broker's ``enablePropertyFilter`` evaluates the same language (its ``filter`` module, which
took ActiveMQ's JMS selector grammar and changed it): this module follows the broker's grammar
and its Java semantics, so ``rangeReplay --sql`` keeps exactly the messages a SQL92
subscription would get, on brokers without property filtering too. What matters:

* Properties are strings (``TAGS``, ``KEYS`` and every user property); constants are strings
  (``'it''s'``), integers (an int if it fits 32 bits, else a long; ``5L``), doubles, ``TRUE``,
  ``FALSE``, ``NULL``. Names are ASCII letters, digits, ``_`` and ``$``.
* A comparison of a property with a number parses the property as that number's Java type
  (``Integer.valueOf`` for an int, ``Double.valueOf`` for a double); ``>``/``<`` between two
  properties compares them as doubles. A value that does not parse makes the whole expression
  unmatched (the broker's evaluation throws, and a throwing filter matches nothing).
* A missing property is NULL: comparisons with it are NULL (unmatched, and ``NOT`` of NULL is
  NULL), ``AND``/``OR`` are three-valued, ``CONTAINS``/``STARTSWITH``/``ENDSWITH`` (and their
  ``NOT`` forms) are FALSE. ``IS [NOT] NULL`` tests presence.
* ``NOT`` binds tighter than comparisons: ``NOT a = 1`` is ``(NOT a) = 1`` (never true);
  write ``NOT (a = 1)``.
* The operand checks the broker makes when it compiles a subscription are errors here too
  (``a > 'x'``, ``a = NULL``, ``a BETWEEN 5 AND 1``, a double constant below 4.9E-324 such as
  ``0.0``). One difference: the broker ignores text after a complete expression
  (``a = 1 b = 2`` subscribes to ``a = 1``); here that is an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mqadmin.errors import UsageError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
#: Double.MIN_VALUE: the broker refuses a (non-negative) double constant below it, 0.0 included
DOUBLE_MIN = 5e-324

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
# token kinds in the broker's order of declaration (a tie in length goes to the earlier one)
_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("space", re.compile(r"[ \t\n\r\f]+")),
    ("comment", re.compile(r"--[^\n\r]*(?:\n|\r\n?)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")),
    ("decimal", re.compile(r"(?:0|[1-9][0-9]*[lL]?)")),
    ("float", re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")),
    ("string", re.compile(r"'(?:''|[^'])*'")),
    ("id", re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")),
    ("op", re.compile(r"<>|>=|<=|[=><(),+-]")),
)


class SqlError(UsageError):
    """An expression the broker would refuse to compile (exit 2), with where it went wrong."""


class _EvalError(Exception):
    """Where the broker's evaluation throws: the message is not matched."""


class JInt(int):
    """A Java Integer constant (a property compared with it is parsed as a 32-bit int)."""


class JLong(int):
    """A Java Long constant."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # decimal, float, string, id, op, a keyword (upper case), or eof
    text: str
    pos: int  # 0-based offset in the expression


def _tokenize(expr: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, n = 0, len(expr)
    while pos < n:
        best: tuple[int, str] | None = None
        for kind, pattern in _TOKENS:
            m = pattern.match(expr, pos)
            if m and m.end() > pos and (best is None or m.end() > best[0]):
                best = (m.end(), kind)
        if best is None:
            raise SqlError(f"--sql: unexpected character {expr[pos]!r} at column {pos + 1}")
        end, kind = best
        text = expr[pos:end]
        if kind == "id" and text.upper() in KEYWORDS:
            kind = text.upper()
        if kind not in ("space", "comment"):
            out.append(_Tok(kind, text, pos))
        pos = end
    out.append(_Tok("eof", "", n))
    return out


# ---- values and Java's comparison rules ----

_BOOL, _INT, _LONG, _DOUBLE, _STR = range(5)
_INT_TEXT = re.compile(r"[+-]?\d+")  # Java's parseInt: an optional sign, then (Unicode) digits
_DOUBLE_SPECIAL = re.compile(r"([+-]?)(NaN|Infinity)")
_DOUBLE_TEXT = re.compile(r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_HEX_DOUBLE = re.compile(r"([+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")


def _kind(v: Any) -> int:
    if isinstance(v, bool):
        return _BOOL
    if isinstance(v, JLong):
        return _LONG
    if isinstance(v, int):
        return _INT
    if isinstance(v, float):
        return _DOUBLE
    return _STR


def _java_int(text: str, lo: int, hi: int) -> int:
    if not (text.isascii() and text.isdigit()) and not _INT_TEXT.fullmatch(text):
        raise _EvalError(f"not an integer: {text!r}")
    value = int(text)
    if not lo <= value <= hi:
        raise _EvalError(f"out of range: {text!r}")
    return value


def _java_double(text: str) -> float:
    """``Double.valueOf``: trims characters up to U+0020, accepts NaN, Infinity, a type suffix, hex."""
    i, j = 0, len(text)
    while i < j and text[i] <= " ":
        i += 1
    while j > i and text[j - 1] <= " ":
        j -= 1
    t = text[i:j]
    m = _DOUBLE_TEXT.fullmatch(t)
    if m:
        return float(m.group(1))
    m = _DOUBLE_SPECIAL.fullmatch(t)
    if m:
        return float(m.group(1) + ("nan" if m.group(2) == "NaN" else "inf"))
    m = _HEX_DOUBLE.fullmatch(t)
    if m:
        return float.fromhex(m.group(1))
    raise _EvalError(f"not a number: {text!r}")


def _java_bool(text: str) -> bool:
    return text.lower() == "true" and len(text) == 4


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if a < b:
            return -1
        if a > b:
            return 1
        if a == b and a != 0:
            return 0
        # Double.compare: NaN above everything and equal to itself; -0.0 below 0.0
        ka = (math.isnan(a), not math.isnan(a) and math.copysign(1, a) > 0)
        kb = (math.isnan(b), not math.isnan(b) and math.copysign(1, b) > 0)
        return (ka > kb) - (ka < kb)
    return int(a > b) - int(a < b)


def _compare(lv: Any, rv: Any) -> int:
    """The broker's ``__compare`` (string conversion on): convert the odd one out, or -1."""
    lc, rc = _kind(lv), _kind(rv)
    if lc != rc:
        if lc == _BOOL:
            if rc == _STR:  # the broker casts the Boolean itself to String here, and throws
                raise _EvalError("a boolean compared with a string")
            return -1
        if lc in (_INT, _LONG):
            if rc in (_INT, _LONG, _DOUBLE):
                return _cmp(lv, rv)
            if rc == _STR:
                return _cmp(lv, _java_int(rv, INT_MIN, INT_MAX) if lc == _INT else _java_int(rv, LONG_MIN, LONG_MAX))
            return -1
        if lc == _DOUBLE:
            if rc in (_INT, _LONG):
                return _cmp(lv, float(rv))
            if rc == _STR:
                return _cmp(lv, _java_double(rv))
            return -1
        # a string on the left
        if rc == _BOOL:
            return _cmp(_java_bool(lv), rv)
        if rc == _INT:
            return _cmp(_java_int(lv, INT_MIN, INT_MAX), rv)
        if rc == _LONG:
            return _cmp(_java_int(lv, LONG_MIN, LONG_MAX), rv)
        return _cmp(_java_double(lv), rv)
    if lc == _STR:  # String.compareTo orders UTF-16 code units
        la: bytes = lv.encode("utf-16-be")
        lb: bytes = rv.encode("utf-16-be")
        return int(la > lb) - int(la < lb)
    return _cmp(lv, rv)


# ---- the expression tree: each node is a function of the properties, giving True/False/None
# (NULL) or a value; raising _EvalError where the broker's evaluation throws ----

Props = Mapping[str, str]
Node = Callable[[Props], Any]


@dataclass(frozen=True)
class _Expr:
    node: Node
    kind: str  # "const", "bool" (a boolean expression), "prop", "value"
    value: Any = None  # a constant's value
    name: str = ""  # a property's name


def _const(value: Any) -> _Expr:
    """A literal; TRUE, FALSE and NULL are boolean expressions as well (the broker's kinds)."""
    return _Expr(lambda p: value, "boolconst" if value is None or isinstance(value, bool) else "const", value)


def _is_constant(e: _Expr) -> bool:
    return e.kind in ("const", "boolconst")


def _as_bool(e: _Expr, tok: _Tok) -> _Expr:
    if e.kind in ("bool", "boolconst"):
        return e
    if e.kind == "prop":  # a bare property: TRUE only for a Boolean value, which properties never are
        get = e.node
        return _Expr(lambda p: None if get(p) is None else False, "bool")
    raise _err(tok, "this does not give a boolean value")


def _err(tok: _Tok, what: str) -> SqlError:
    near = f"near {tok.text!r}" if tok.kind != "eof" else "at the end"
    return SqlError(f"--sql: {what} ({near}, column {tok.pos + 1})")


def _logic_or(a: Node, b: Node) -> Node:
    def run(p: Props) -> Any:
        lv = a(p)
        if lv is True:
            return True
        rv = b(p)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    return run


def _logic_and(a: Node, b: Node) -> Node:
    def run(p: Props) -> Any:
        lv = a(p)
        if lv is False:
            return False
        rv = b(p)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return run


def _not(a: Node) -> Node:
    def run(p: Props) -> Any:
        v = a(p)
        return None if v is None else not v

    return run


def _equal(a: Node, b: Node) -> Node:
    def run(p: Props) -> Any:
        lv, rv = a(p), b(p)
        if lv.__class__ is str and rv.__class__ is str:  # the usual case: a property and a string
            return lv == rv
        if lv is None or rv is None:
            return True if lv is None and rv is None else (None if lv is None else False)
        return _compare(lv, rv) == 0

    return run


def _ordering(a: Node, b: Node, test: Callable[[int], bool]) -> Node:
    def run(p: Props) -> Any:
        lv = a(p)
        if lv is None:
            return None
        rv = b(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            return test(_cmp(_java_double(lv), _java_double(rv)))
        return test(_compare(lv, rv))

    return run


_ORDERINGS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _negate(a: Node) -> Node:
    def run(p: Props) -> Any:
        v = a(p)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return type(v)(-v)

    return run


def _string_test(a: Node, search: str, test: Callable[[str, str], bool], negated: bool) -> Node:
    def run(p: Props) -> Any:
        if not search:
            return False
        v = a(p)
        if not isinstance(v, str) or isinstance(v, bool):
            return False
        return test(v, search) != negated

    return run


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda v, s: s in v,
    "STARTSWITH": lambda v, s: v.startswith(s),
    "ENDSWITH": lambda v, s: v.endswith(s),
}


class _Parser:
    def __init__(self, expr: str):
        self.toks = _tokenize(expr)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def expect(self, kind: str, text: str | None = None) -> _Tok:
        t = self.tok
        if t.kind != kind or (text is not None and t.text != text):
            raise _err(t, f"expected {text or kind}")
        return self.take()

    def is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def selector(self) -> Node:
        start = self.tok
        e = self.or_expr()
        if self.tok.kind != "eof":
            raise _err(self.tok, "unexpected text after the expression (a missing AND or OR?)")
        return _as_bool(e, start).node

    def or_expr(self) -> _Expr:
        left = self.and_expr()
        while self.tok.kind == "OR":
            op = self.take()
            right = self.and_expr()
            left = _Expr(_logic_or(_as_bool(left, op).node, _as_bool(right, op).node), "bool")
        return left

    def and_expr(self) -> _Expr:
        left = self.equality()
        while self.tok.kind == "AND":
            op = self.take()
            right = self.equality()
            left = _Expr(_logic_and(_as_bool(left, op).node, _as_bool(right, op).node), "bool")
        return left

    def equality(self) -> _Expr:
        left = self.comparison()
        while True:
            if self.is_op("=", "<>"):
                op = self.take()
                right = self.comparison()
                for side in (left, right):
                    if side.kind == "boolconst" and side.value is None:
                        raise _err(op, "NULL cannot be compared (use IS NULL)")
                if left.kind == "boolconst" and _is_constant(right) and right.kind != "boolconst":
                    raise _err(op, f"{op.text} cannot compare a boolean with {right.value!r}")
                node = _equal(left.node, right.node)
                left = _Expr(node if op.text == "=" else _not(node), "bool")
            elif self.tok.kind == "IS":
                self.take()
                negated = self.tok.kind == "NOT"
                if negated:
                    self.take()
                self.expect("NULL")
                node = _equal(left.node, lambda p: None)
                left = _Expr(_not(node) if negated else node, "bool")
            else:
                return left

    def _orderable(self, op: _Tok, *exprs: _Expr) -> None:
        for e in exprs:
            if _is_constant(e) and not (isinstance(e.value, int | float) and not isinstance(e.value, bool)):
                raise _err(op, f"{op.text.upper()} compares numbers only; {e.value!r} is not a number")
            if e.kind in ("bool", "boolconst"):
                raise _err(op, f"{op.text.upper()} cannot compare a boolean expression")

    def comparison(self) -> _Expr:
        left = self.unary()
        while True:
            t = self.tok
            negated = t.kind == "NOT" and self.peek().kind in ("BETWEEN", "IN", *_STRING_TESTS)
            if negated:
                self.take()
                t = self.tok
            if not negated and self.is_op(*_ORDERINGS):
                op = self.take()
                right = self.unary()
                self._orderable(op, left, right)
                left = _Expr(_ordering(left.node, right.node, _ORDERINGS[op.text]), "bool")
            elif t.kind in _STRING_TESTS:
                self.take()
                search = self.string()
                left = _Expr(_string_test(left.node, search, _STRING_TESTS[t.kind], negated), "bool")
            elif t.kind == "BETWEEN":
                op = self.take()
                low = self.unary()
                self.expect("AND")
                high = self.unary()
                left = self._between(op, left, low, high, negated)
            elif t.kind == "IN":
                op = self.take()
                if left.kind != "prop":
                    raise _err(op, "IN needs a property on its left")
                self.expect("op", "(")
                items = [self.string()]
                while self.is_op(","):
                    self.take()
                    items.append(self.string())
                self.expect("op", ")")
                left = _Expr(self._in(left.node, frozenset(items), negated), "bool")
            else:
                return left

    def _between(self, op: _Tok, value: _Expr, low: _Expr, high: _Expr, negated: bool) -> _Expr:
        if not negated and _is_constant(low) and _is_constant(high):
            if low.value is None or high.value is None:
                raise _err(op, "BETWEEN takes no NULL bounds")
            try:
                backwards = _compare(high.value, low.value) < 0
            except _EvalError:
                raise _err(op, "BETWEEN bounds cannot be compared") from None
            if backwards:
                raise _err(op, f"BETWEEN {low.value} AND {high.value}: the low bound is above the high one")
        self._orderable(op, value, low)
        self._orderable(op, value, high)
        if negated:
            node = _logic_or(
                _ordering(value.node, low.node, _ORDERINGS["<"]), _ordering(value.node, high.node, _ORDERINGS[">"])
            )
        else:
            node = _logic_and(
                _ordering(value.node, low.node, _ORDERINGS[">="]), _ordering(value.node, high.node, _ORDERINGS["<="])
            )
        return _Expr(node, "bool")

    @staticmethod
    def _in(get: Node, items: frozenset[str], negated: bool) -> Node:
        def run(p: Props) -> Any:
            v = get(p)
            if not isinstance(v, str):
                return None
            return (v in items) != negated

        return run

    def string(self) -> str:
        t = self.expect("string")
        return t.text[1:-1].replace("''", "'")

    def unary(self) -> _Expr:
        t = self.tok
        if self.is_op("+"):
            self.take()
            return self.unary()
        if self.is_op("-"):
            self.take()
            # not folded into a constant: the broker's operand checks do not see through it
            return _Expr(_negate(self.unary().node), "value")
        if t.kind == "NOT":
            self.take()
            inner = self.unary()
            return _Expr(_not(_as_bool(inner, t).node), "bool")
        return self.primary()

    def primary(self) -> _Expr:
        t = self.tok
        if t.kind == "string":
            return _const(self.string())
        if t.kind == "decimal":
            self.take()
            value = int(t.text.rstrip("lL"))
            if value > LONG_MAX:
                raise _err(t, f"{t.text} is beyond a 64-bit integer")
            return _const(JInt(value) if value <= INT_MAX else JLong(value))
        if t.kind == "float":
            self.take()
            d = float(t.text)
            if math.isinf(d) or d < DOUBLE_MIN:
                raise _err(t, f"{t.text} is outside the doubles the broker takes (4.9E-324 to 1.8E308)")
            return _const(d)
        if t.kind in ("TRUE", "FALSE", "NULL"):
            self.take()
            return _const({"TRUE": True, "FALSE": False, "NULL": None}[t.kind])
        if t.kind == "id":
            self.take()
            name = t.text
            return _Expr(lambda p: p.get(name), "prop", name=name)
        if self.is_op("("):
            self.take()
            e = self.or_expr()
            self.expect("op", ")")
            return e
        raise _err(t, "expected a value, a property name or (")


@dataclass(frozen=True)
class SqlFilter:
    """A compiled ``--sql`` expression: ``matches(properties)`` as the broker's SQL92 filter."""

    text: str
    _node: Node

    def matches(self, properties: Props | None) -> bool:
        try:
            return self._node(properties or {}) is True
        except _EvalError:
            return False


def compile_sql(text: str) -> SqlFilter:
    """The filter for ``text``; a ``SqlError`` (exit 2) names the column where it went wrong."""
    if not text.strip():
        raise SqlError("--sql: the expression is empty")
    return SqlFilter(text, _Parser(text).selector())
