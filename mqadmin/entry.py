"""The console script's first stop: ``mqadmin``, ``mqadmin --help`` and ``mqadmin --version``
are answered here from the registry's command table, without importing click/typer or any
command module (that import was most of their start-up time). Everything else goes on to
``mqadmin.cli``, which renders the same help through click for ``mqadmin COMMAND --help``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mqadmin.command_table import HELP, HELP_HELP, PROG, VERSION_HELP

_HELP_FLAGS = (["--help"], ["-h"])
#: click's help layout: at most 80 columns less 2, at least 50; a definition column of at most 30
_MAX_WIDTH = 80
_MIN_WIDTH = 50
_COL_MAX = 30
_COL_SPACING = 2
_INDENT = "  "


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args in _HELP_FLAGS or args == ["help"]:
        sys.exit(_print(group_help()))
    if args == ["--version"]:
        from mqadmin import __version__

        sys.exit(_print(f"{PROG} {__version__}\n"))
    from mqadmin.cli import main as full

    sys.exit(full(args))


def _print(text: str) -> int:
    """Write to stdout; a closed or broken stdout is exit 1 with one line, never a traceback."""
    try:
        if sys.stdout is None:
            raise OSError("stdout is closed")
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `mqadmin --help | head`: the reader has what it wanted
        from mqadmin.exit_codes import silence_stdout

        silence_stdout()
        return 1
    except OSError as exc:
        if sys.stderr is not None:
            sys.stderr.write(f"{PROG}: error: cannot write to stdout: {exc}\n")
        return 1
    return 0


def group_help(width: int | None = None) -> str:
    """The top-level help exactly as click lays it out for the command group."""
    import shutil
    import textwrap

    from mqadmin.command_table import command_rows

    if width is None:
        width = max(min(shutil.get_terminal_size().columns, _MAX_WIDTH) - 2, _MIN_WIDTH)

    def paragraphs(text: str, indent: str, room: int) -> list[str]:
        out: list[str] = []
        for i, para in enumerate(text.split("\n\n")):
            if i:
                out.append("")
            wrapper = textwrap.TextWrapper(
                room, initial_indent=indent, subsequent_indent=indent, replace_whitespace=False
            )
            out.extend(wrapper.wrap(" ".join(para.split())))
        return out

    def definitions(rows: list[tuple[str, str]]) -> list[str]:
        first = min(max(len(a) for a, _ in rows), _COL_MAX) + _COL_SPACING
        room = max(width - first - 2, 10)
        out: list[str] = []
        for term, text in rows:
            lines = paragraphs(text, "", room) or [""]
            if len(term) <= first - _COL_SPACING:
                out.append(f"{_INDENT}{term}{' ' * (first - len(term))}{lines[0]}".rstrip())
            else:
                out += [f"{_INDENT}{term}", f"{' ' * (first + len(_INDENT))}{lines[0]}"]
            out += [f"{' ' * (first + len(_INDENT))}{line}" for line in lines[1:]]
        return out

    commands = [(name, f"{summary} (alias: {kebab})") for name, kebab, summary in command_rows()]
    lines = [f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]...", ""]
    lines += paragraphs(HELP, _INDENT, width)
    lines += ["", "Options:"] + definitions([("--version", VERSION_HELP), ("-h, --help", HELP_HELP)])
    lines += ["", "Commands:"] + definitions(commands)
    return "\n".join(lines) + "\n"
