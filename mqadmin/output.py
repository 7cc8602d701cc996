"""Rendering results: a rich table on a terminal, plain columns when piped, JSON, CSV.

Commands return data; this is the only place that turns it into text. stdout carries the
result only; notes, warnings and progress go to stderr, so ``--output json | jq`` always works.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

#: formats only some commands have (SubCommand.extra_formats): each is a ``<format>_text()`` method
EXTRA_FORMATS = ("java", "prometheus")
FORMATS = ("table", "json", "csv", *EXTRA_FORMATS)


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Any]]
    title: str | None = None
    footer: list[str] = field(default_factory=list)


class Result(Protocol):
    """What a command returns and the CLI reads: the data in each format, and how the run ends."""

    def to_json(self) -> dict[str, Any]: ...
    def table(self) -> Table: ...

    @property
    def failure(self) -> str | None:
        """Part of the work failed: the result is printed, then this line and exit 1."""

    @property
    def check_failure(self) -> str | None:
        """A check (--max-lag, ...) was breached: the result is printed, then this line and exit 3."""

    @property
    def stdout_used(self) -> bool:
        """The command wrote its data to stdout itself; its summary goes to stderr."""


class ResultBase:
    """The ``Result`` members a result may leave at their defaults: nothing failed, no check
    breached, stdout untouched. Plain class attributes, so they are no dataclass fields. A result
    whose JSON is not its command's one document names its schema in ``schema_name``."""

    failure: str | None = None
    check_failure: str | None = None
    stdout_used: bool = False


@dataclass
class Env:
    """The streams and terminal facts a run uses; tests build one over StringIO."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin: TextIO | None = field(default_factory=lambda: sys.stdin)
    color: bool | None = None  # None: decide from the terminal and NO_COLOR/FORCE_COLOR
    #: the command line after "mqadmin" (the journal records it, secrets removed)
    argv: list[str] | None = None

    @property
    def stdout_tty(self) -> bool:
        return _isatty(self.stdout)

    @property
    def stderr_tty(self) -> bool:
        return _isatty(self.stderr)

    @property
    def stdin_tty(self) -> bool:
        return self.stdin is not None and _isatty(self.stdin)

    def use_color(self, stream: TextIO) -> bool:
        if self.color is not None:
            return self.color
        if os.environ.get("NO_COLOR"):
            return False
        if os.environ.get("FORCE_COLOR"):
            return True
        return _isatty(stream)

    def note(self, message: str) -> None:
        print(f"mqadmin: {message}", file=self.stderr, flush=True)

    def warn(self, message: str) -> None:
        print(f"mqadmin: warning: {message}", file=self.stderr, flush=True)

    def error(self, message: str) -> None:
        print(f"mqadmin: error: {message}", file=self.stderr, flush=True)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # closed stream
        return False


#: the version of the JSON documents' schemas (docs/schemas): within a version fields and codes
#: are only added; removing, renaming or retyping one moves it
SCHEMA_VERSION = 1


def json_document(result: Result, command: str) -> dict[str, Any]:
    """``result`` as JSON, led by the name of its schema: ``mqadmin/<name>/<version>``, the name
    the result's ``schema_name`` (a command printing several kinds of document) or the command's."""
    name = getattr(result, "schema_name", None) or command
    return {"schema": f"mqadmin/{name}/{SCHEMA_VERSION}", **result.to_json()} if name else result.to_json()


def render(result: Result, fmt: str, env: Env, command: str = "") -> None:
    """Print ``result`` of ``command``; one whose command already wrote its data to stdout
    (``stdout_used``, e.g. rangeReplay --to stdout) gets its summary on stderr, so stdout stays pure data."""
    if result.stdout_used:
        env = Env(stdout=env.stderr, stderr=env.stderr, stdin=env.stdin, color=env.color)
    if fmt == "json":
        from mqadmin.fastjson import collector_paused

        # a document is acyclic dicts and lists (10,000 groups' health: 100,000 of them), which the
        # cyclic collector would scan again and again as they are made; one write: json.dump would
        # make one per token (200,000 for 10,000 groups)
        with collector_paused():
            text = _dumps(json_document(result, command))
        env.stdout.write(text)
        env.stdout.write("\n")
    elif fmt in EXTRA_FORMATS:
        env.stdout.write(getattr(result, f"{fmt}_text")())
    elif fmt == "csv":
        table = result.table()
        times = _csv_times(result)
        writer = csv.writer(env.stdout, lineterminator="\n")
        writer.writerow(table.columns + [label for label, _ in times])
        writer.writerows([_cell(c) for c in row] + [str(v) for _, v in times] for row in table.rows)
    elif env.stdout_tty:
        _render_rich(result.table(), env)
    else:
        _render_plain(result.table(), env.stdout)
    env.stdout.flush()


def _dumps(doc: Any) -> str:
    """``doc`` as indented JSON, as ``json.dumps(indent=2, ensure_ascii=False)`` writes it, by
    orjson (a tenth of the time: 10,000 groups' health is a second of json's); the same values
    (a tiny float may be written 0.00001 rather than 1e-05), and json for what orjson refuses
    (keys that are not strings, integers beyond 64 bits)."""
    import orjson

    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return json.dumps(doc, indent=2, ensure_ascii=False)


def render_table(table: Table, env: Env, stream: TextIO) -> None:
    """``table`` on ``stream`` (e.g. a plan on stderr before a question) laid out as a result is
    there: the terminal layouts on a terminal (numbers right-aligned), plain columns otherwise."""
    if _isatty(stream):
        _render_rich(table, Env(stdout=stream, stderr=env.stderr, stdin=env.stdin, color=env.color))
    else:
        _render_plain(table, stream)


def write_result(result: Result, fmt: str, env: Env, path: str, command: str = "") -> None:
    """``--output-file``: the rendered result replaces ``path`` atomically (temp file + rename), so
    a reader such as node_exporter's textfile collector never sees half of it; its mode follows the
    umask, as a file the shell writes would, so such a reader running as another user can read it."""
    import io

    from mqadmin.safety import atomic_write

    buffer = io.StringIO()
    render(result, fmt, Env(stdout=buffer, stderr=env.stderr, stdin=None, color=False), command)
    atomic_write(path, buffer.getvalue(), shared=True)


#: the resolved times every result echoes (JSON keys → CSV columns): CSV has no footer, so each
#: row carries them, as epoch ms and ISO-8601 like the JSON
CSV_TIMES = (
    ("timestamp", "Timestamp"),
    ("timestamp_iso", "Timestamp ISO"),
    ("begin", "Begin"),
    ("begin_iso", "Begin ISO"),
    ("end", "End"),
    ("end_iso", "End ISO"),
)


def _csv_times(result: Result) -> list[tuple[str, Any]]:
    doc = result.to_json()
    return [(label, doc[key]) for key, label in CSV_TIMES if doc.get(key) is not None]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _render_plain(table: Table, out: TextIO) -> None:
    """Fixed-width columns like the Java tool prints, stable for grep and awk."""
    rows = [[_cell(c) for c in row] for row in table.rows]
    widths = [len(c) for c in table.columns]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    if table.title:
        out.write(table.title + "\n")
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out.write(fmt.format(*table.columns).rstrip() + "\n")
    for row in rows:
        out.write(fmt.format(*row).rstrip() + "\n")
    if table.footer:
        out.write("\n")
        for line in table.footer:
            out.write(line + "\n")


#: Columns a narrow terminal may hide, least important first; a note names what is hidden.
#: Identifiers, offsets, Diff/Lag and the lag time are never here: they are what the tables show.
#: (a name also stands for the columns ending in it: "At Offset" for "Born Time At Offset" and
#: "Property NAME At Offset")
OPTIONAL_COLUMNS = ("Inflight", "LastTime", "Store Time At Offset", "At Offset", "Version", "Model", "Type")
#: spaces between columns in the compact layouts (as in the plain output)
GAP = 2


def _render_rich(table: Table, env: Env) -> None:
    """A table on a terminal that never cuts a cell. By the terminal's width: the boxed table;
    else plain columns; else the same with headers folded at their spaces; else without the
    optional columns (a note names them); else one block per row."""
    from rich.console import Console

    color = env.use_color(env.stdout)
    # no colour means no escapes at all: rich's no_color keeps bold and the like, color_system=None drops them
    console = Console(
        file=env.stdout, color_system="auto" if color else None, no_color=not color, highlight=False, emoji=False
    )
    cells = [[_cell(c) for c in row] for row in table.rows]
    ncol = len(table.columns)
    numeric = [any(isinstance(r[i], int | float) for r in table.rows if r[i] is not None) for i in range(ncol)]
    width = console.width
    keep = list(range(ncol))
    if _boxed_width(table.columns, cells) <= width:
        _print_boxed(console, table, cells, numeric)
    else:
        headers = _fit(table.columns, cells, keep, width)
        hidden: list[int] = []
        for name in OPTIONAL_COLUMNS:
            for i, col in enumerate(table.columns):
                if headers is None and i in keep and len(keep) > 1 and (col == name or col.endswith(f" {name}")):
                    hidden.append(i)
                    keep = [k for k in keep if k != i]
                    headers = _fit(table.columns, cells, keep, width)
        if headers is None:
            _print_vertical(console, table, cells)
        else:
            _print_compact(console, table, cells, numeric, keep, headers)
            if hidden:
                names = ", ".join(table.columns[i] for i in sorted(hidden))
                console.print(f"(hidden at {width} columns: {names}; --output json shows all)", markup=False)
    for line in table.footer:
        console.print(line, markup=False, soft_wrap=True)


def _width(text: str) -> int:
    """Terminal cells ``text`` takes (wide characters two, control characters none); printable ASCII,
    the commonest cell, without asking rich (a table of 10,000 groups has 50,000 cells)."""
    if text.isascii() and text.isprintable():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _content_widths(cells: list[list[str]], ncol: int) -> list[int]:
    return [max((_width(r[i]) for r in cells), default=0) for i in range(ncol)]


def _boxed_width(columns: list[str], cells: list[list[str]]) -> int:
    """rich's table without outer edges: one space of padding each side, one rule between."""
    widths = [max(_width(h), c) for h, c in zip(columns, _content_widths(cells, len(columns)), strict=True)]
    return sum(widths) + 3 * len(widths) - 1


def _fold(header: str, width: int) -> list[str]:
    """``header`` broken at spaces into lines of at most ``width`` (a longer word gets its own line)."""
    lines: list[str] = []
    for word in header.split():
        if lines and _width(lines[-1]) + 1 + _width(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _fit(columns: list[str], cells: list[list[str]], keep: list[int], width: int) -> list[list[str]] | None:
    """Header lines per kept column for the compact layout within ``width`` (one-line headers
    if they fit, else folded ones), or None when even folded headers are too wide."""
    content = _content_widths(cells, len(columns))
    gaps = GAP * (len(keep) - 1)
    one_line = [[columns[i]] for i in keep]
    if sum(max(_width(columns[i]), content[i]) for i in keep) + gaps <= width:
        return one_line
    folded = [_fold(columns[i], max(content[i], *(_width(w) for w in columns[i].split() or [""]))) for i in keep]
    if sum(max(content[i], *(_width(x) for x in f)) for i, f in zip(keep, folded, strict=True)) + gaps <= width:
        return folded
    return None


def _print_boxed(console: Any, table: Table, cells: list[list[str]], numeric: list[bool]) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    # Text, not markup: a name like "[red]x" prints as it is
    rt = RichTable(title=Text(table.title) if table.title else None, show_edge=False, header_style="bold")
    for col, num in zip(table.columns, numeric, strict=True):
        rt.add_column(Text(col), justify="right" if num else "left", no_wrap=True)
    for row in cells:
        rt.add_row(*(Text(c) for c in row))
    console.print(rt)


def _print_compact(
    console: Any, table: Table, cells: list[list[str]], numeric: list[bool], keep: list[int], headers: list[list[str]]
) -> None:
    """Plain columns (numbers right-aligned), headers bold and bottom-aligned when folded."""
    from rich.text import Text

    content = _content_widths(cells, len(table.columns))
    widths = [max(content[i], *(_width(x) for x in h)) for i, h in zip(keep, headers, strict=True)]
    height = max(len(h) for h in headers)

    def line(values: list[str]) -> str:
        parts = []
        for i, w, v in zip(keep, widths, values, strict=True):
            pad = " " * (w - _width(v))
            parts.append(pad + v if numeric[i] else v + pad)
        return (" " * GAP).join(parts).rstrip()

    if table.title:
        console.print(table.title, markup=False, soft_wrap=True)
    for n in range(height):
        values = [h[n - (height - len(h))] if n >= height - len(h) else "" for h in headers]
        console.print(Text(line(values), style="bold"), soft_wrap=True)
    for row in cells:
        console.print(line([row[i] for i in keep]), markup=False, soft_wrap=True)


def _print_vertical(console: Any, table: Table, cells: list[list[str]]) -> None:
    """One block per row, ``Header  value`` per line: for terminals too narrow for any table."""
    from rich.text import Text

    label = max(_width(c) for c in table.columns)
    if table.title:
        console.print(table.title, markup=False, soft_wrap=True)
    for n, row in enumerate(cells, 1):
        console.print(Text(f"[{n}]", style="bold"), soft_wrap=True)
        for col, value in zip(table.columns, row, strict=True):
            console.print(f"  {col:<{label}}  {value}", markup=False, soft_wrap=True)
