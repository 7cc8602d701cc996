"""The SQL92 filter: its semantics case by case, and the broker's own filter code as the oracle.

The oracle test runs the broker's compiled filter module (the jars of a real 5.3.3 broker) in a
JVM over thousands of generated expressions and property sets, and requires the same parse
verdict and the same match for every pair.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from mqadmin.replay.sql92 import SqlError, compile_sql
from tests.support import realbroker as rb


def match(expr: str, **props: str) -> bool:
    return compile_sql(expr).matches(props)


@pytest.mark.parametrize(
    ("expr", "props", "want"),
    [
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5.5"}, False),  # an int constant parses the property as an int: 5.5 throws
        ("a > 5.0E0", {"a": "5.5"}, True),
        ("a = 1", {"a": "+1"}, True),
        ("a = 1", {"a": " 1"}, False),  # Integer.valueOf does not trim...
        ("a = 1.0E0", {"a": " 1 "}, True),  # ...Double.valueOf does
        ("a = 3000000000", {"a": "3000000000"}, True),  # a long constant
        ("a = 1", {"a": "3000000000"}, False),  # beyond an int
        ("a > b", {"a": "10", "b": "9.5"}, True),  # two properties compare as doubles
        ("a > b", {"a": "x", "b": "9.5"}, False),
        ("a = 'x'", {"a": "x"}, True),
        ("a <> 'x'", {}, False),  # NULL, and NOT NULL is NULL
        ("a IS NULL", {}, True),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a = b", {}, True),  # the broker's equality: two NULLs are equal
        ("a = TRUE", {"a": "True"}, True),
        ("a = FALSE", {"a": "anything"}, True),  # Boolean.valueOf
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("TAGS IN ('TagA', 'TagB')", {"TAGS": "TagB"}, True),
        ("TAGS NOT IN ('TagA')", {}, False),
        ("a CONTAINS 'bc'", {"a": "abcd"}, True),
        ("a NOT CONTAINS 'bc'", {}, False),  # a missing property: FALSE, not NULL
        ("a STARTSWITH 'ab' AND a ENDSWITH 'cd'", {"a": "abcd"}, True),
        ("NOT a = 1", {"a": "1"}, False),  # (NOT a) = 1
        ("NOT (a = 1)", {"a": "2"}, True),
        ("a = 1 OR b = 2", {"b": "2"}, True),  # three-valued OR
        ("a = 1 OR b > 2", {"a": "1", "b": "x"}, True),  # short-circuit: b is never parsed
        ("b > 2 OR a = 1", {"a": "1", "b": "x"}, False),  # ... but here it throws first
        ("TRUE", {}, True),
        ("a", {"a": "true"}, False),  # a bare property is never a Boolean
        ("a > -5 -- the rest of the line is a comment\n", {"a": "-4"}, True),
        ("/* c */ a = 'it''s'", {"a": "it's"}, True),
    ],
)
def test_semantics(expr: str, props: dict[str, str], want: bool) -> None:
    assert compile_sql(expr).matches(props) is want


@pytest.mark.parametrize(
    ("expr", "column"),
    [
        ("a >", 4),
        ("a = 1 b = 2", 7),  # the broker would ignore " b = 2"; refusing is safer
        ("a > 'x'", 3),
        ("a = NULL", 3),
        ("a BETWEEN 5 AND 1", 3),
        ("a IN (1, 2)", 7),
        ("5", 1),
        ('a = "x"', 5),
        ("a > 0.0", 5),
        ("a = 99999999999999999999", 5),
        ("(a = 1", 7),
        ("a == 1", 4),
    ],
)
def test_errors_name_the_column(expr: str, column: int) -> None:
    with pytest.raises(SqlError, match=f"column {column}\\b"):
        compile_sql(expr)


# ---- the broker's filter module as the oracle ----

ORACLE = r"""
import java.io.*;
import java.util.*;
import org.apache.rocketmq.filter.expression.*;
import org.apache.rocketmq.filter.parser.SelectorParser;

public class SqlOracle {
    public static void main(String[] a) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        BooleanExpression expr = null;
        String line;
        while ((line = in.readLine()) != null) {
            if (line.startsWith("E")) {
                try { expr = SelectorParser.parse(line.substring(1).replace('\u0003', '\n')); out.println("OK"); }
                catch (Throwable t) { expr = null; out.println("ERR"); }
                continue;
            }
            final Map<String, String> props = new HashMap<>();
            String body = line.substring(1);
            if (!body.isEmpty()) for (String pair : body.split("\u0002", -1)) {
                int i = pair.indexOf('\u0001');
                props.put(pair.substring(0, i), pair.substring(i + 1));
            }
            Object ret = null;
            try {
                ret = expr.evaluate(new EvaluationContext() {
                    public Object get(String name) { return props.get(name); }
                    public Map<String, Object> keyValues() { return new HashMap<String, Object>(props); }
                });
            } catch (Throwable t) { ret = null; }
            out.println(ret instanceof Boolean && (Boolean) ret ? "T" : "F");
        }
    }
}
"""

VALUES = (
    "1", "-1", "+1", "007", "0", "-0", "1.5", "-2.5", " 2", "2 ", "1e3", "1E-3", ".5", "5.", "1f", "2d",
    "NaN", "-Infinity", "Infinity", "0x1p3", "true", "TRUE", "false", "abc", "", "TagA", "TagB",
    "2147483647", "2147483648", "3000000000", "9223372036854775808", "\u0663", "a'b", "x y",
)  # fmt: skip
NAMES = ("a", "b", "TAGS")
CONSTANTS = (
    "1", "0", "5", "2147483648", "3000000000L", "1.5", "2.5E1", ".5", "5.", "'abc'", "'1'", "'TagA'", "''",
    "TRUE", "FALSE", "NULL", "-1", "- 2.5", "+3",
)  # fmt: skip


def _operand(rng: random.Random) -> str:
    return rng.choice(NAMES) if rng.random() < 0.55 else rng.choice(CONSTANTS)


def _predicate(rng: random.Random) -> str:
    x, y, z = _operand(rng), _operand(rng), _operand(rng)
    lit = rng.choice(("'a'", "'1'", "'Tag'", "''", "'A'"))
    not_ = rng.choice(("", "NOT "))
    return rng.choice(
        (
            f"{x} {rng.choice(('=', '<>', '>', '>=', '<', '<='))} {y}",
            f"{x} {not_}BETWEEN {y} AND {z}",
            f"{rng.choice(NAMES)} {not_}IN ({lit}, {rng.choice(('TagA', 'TagB', '1', 'abc'))!r})",
            f"{x} IS {not_}NULL",
            f"{x} {not_}{rng.choice(('CONTAINS', 'STARTSWITH', 'ENDSWITH'))} {lit}",
            f"{not_}{x}",
        )
    )


def _expression(rng: random.Random, depth: int = 0) -> str:
    if depth >= 2 or rng.random() < 0.4:
        return _predicate(rng)
    left, right = _expression(rng, depth + 1), _expression(rng, depth + 1)
    return rng.choice((f"{left} AND {right}", f"{left} OR {right}", f"NOT ({left})", f"({left}) AND {right}"))


def _props(rng: random.Random) -> dict[str, str]:
    return {n: rng.choice(VALUES) for n in NAMES if rng.random() < 0.8}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command line of the broker's filter module in a JVM (compiled once)."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found on PATH (JDK 17 expected)")
    lib = rb.ensure_dist("5.3.3")
    classpath = ":".join(str(p) for p in sorted(lib.glob("*.jar")))
    work = tmp_path_factory.mktemp("oracle")
    (work / "SqlOracle.java").write_text(ORACLE)
    subprocess.run([javac, "-cp", classpath, "-d", str(work), str(work / "SqlOracle.java")], check=True)
    return [rb.java_binary(), "-cp", f"{classpath}:{work}", "SqlOracle"]


def _ask(oracle: list[str], cases: list[tuple[str, list[dict[str, str]]]]) -> list[list[str]]:
    lines: list[str] = []
    for expr, prop_sets in cases:
        lines.append("E" + expr.replace("\n", "\u0003"))  # one line each: newlines travel as U+0003
        lines += ["P" + "\u0002".join(f"{k}\u0001{v}" for k, v in p.items()) for p in prop_sets]
    out = subprocess.run(oracle, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    answers = iter(out.stdout.split("\n"))
    return [[next(answers) for _ in range(1 + len(p))] for _, p in cases]


@pytest.mark.realbroker
def test_same_verdicts_as_the_brokers_filter_module(oracle: list[str]) -> None:
    rng = random.Random(20260524)
    cases = [(_expression(rng), [_props(rng) for _ in range(12)]) for _ in range(2500)]
    answers = _ask(oracle, cases)
    accepted = 0
    for (expr, prop_sets), (verdict, *matches) in zip(cases, answers, strict=True):
        if verdict == "ERR":
            with pytest.raises(SqlError):
                compile_sql(expr)
            continue
        accepted += 1
        flt = compile_sql(expr)
        got = ["T" if flt.matches(p) else "F" for p in prop_sets]
        assert got == matches, f"{expr!r}: {list(zip(prop_sets, got, matches, strict=True))}"
    assert accepted > 1000  # the generator is not mostly producing errors


@pytest.mark.realbroker
def test_the_table_above_is_the_brokers_too(oracle: list[str]) -> None:
    """Every case of test_semantics has the broker's answer (the trailing-text one aside)."""
    params = test_semantics.pytestmark[0].args[1]  # type: ignore[attr-defined]
    answers = _ask(oracle, [(e, [p]) for e, p, _ in params])
    assert answers == [["OK", "T" if want else "F"] for _, _, want in params]
    errors = test_errors_name_the_column.pytestmark[0].args[1]  # type: ignore[attr-defined]
    verdicts = _ask(oracle, [(e, []) for e, _ in errors])
    assert [v[0] for v in verdicts] == ["OK" if e == "a = 1 b = 2" else "ERR" for e, _ in errors]
