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

FORMATS = ("table", "json", "csv", "java")


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Any]]
    title: str | None = None
    footer: list[str] = field(default_factory=list)


class Result(Protocol):
    def to_json(self) -> dict[str, Any]: ...
    def table(self) -> Table: ...


@dataclass
class Env:
    """The streams and terminal facts a run uses; tests build one over StringIO."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin: TextIO | None = field(default_factory=lambda: sys.stdin)
    color: bool | None = None  # None: decide from the terminal and NO_COLOR/FORCE_COLOR

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


def render(result: Result, fmt: str, env: Env) -> None:
    """Print ``result``; one whose command already wrote its data to stdout (``stdout_used``,
    e.g. rangeReplay --to stdout) gets its summary on stderr, so stdout stays pure data."""
    if getattr(result, "stdout_used", False):
        env = Env(stdout=env.stderr, stderr=env.stderr, stdin=env.stdin, color=env.color)
    if fmt == "json":
        json.dump(result.to_json(), env.stdout, indent=2, ensure_ascii=False)
        env.stdout.write("\n")
    elif fmt == "java":
        env.stdout.write(result.java_text())  # type: ignore[attr-defined]  # commands with java_output only
    elif fmt == "csv":
        table = result.table()
        writer = csv.writer(env.stdout, lineterminator="\n")
        writer.writerow(table.columns)
        writer.writerows([_cell(c) for c in row] for row in table.rows)
    elif env.stdout_tty:
        _render_rich(result.table(), env)
    else:
        _render_plain(result.table(), env.stdout)
    env.stdout.flush()


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


def _render_rich(table: Table, env: Env) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(file=env.stdout, no_color=not env.use_color(env.stdout), highlight=False)
    rt = RichTable(title=table.title, show_edge=False, header_style="bold")
    for i, col in enumerate(table.columns):
        numeric = any(isinstance(r[i], int | float) for r in table.rows if r[i] is not None)
        rt.add_column(col, justify="right" if numeric else "left", no_wrap=True)
    for row in table.rows:
        rt.add_row(*(_cell(c) for c in row))
    console.print(rt)
    for line in table.footer:
        console.print(line, markup=False)
