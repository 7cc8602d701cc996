"""Every ```console example of README.md runs as written, in order, against a fresh demo.

Each ``$ command`` runs in bash (PATH starting with this interpreter's bin, as after activating
the venv) under a private MQADMIN_HOME, in one working folder for the whole README; its stdout and
stderr together must match the lines the README shows after it, once both are normalised
(``NORMALISE``: times, paths, ports and drifting counts). In the expected text a line ``...``
stands for any number of lines and ``…`` inside a line for any text. A command ending in ``&``
runs in the background until its block ends (its output is not compared); with ``--port N`` the
next command waits until that port listens. Port 9876 in a command is replaced by a free port.

A block that cannot run here says so in the README source, on the line before its fence:
``<!-- readme-test: skip: why -->``, or ``<!-- readme-test: exit-code-only: why -->`` to run it
and check only that every command succeeds (for output too hard to normalise).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|exit-code-only)\s*:?\s*(.*?)\s*-->")
#: where the README's example output was made: the tool prints the real folders instead
EXAMPLE_HOME, EXAMPLE_CWD, EXAMPLE_PORT = "~/.mqadmin", "/home/me", "9876"

#: applied in order to expected and actual lines alike: what changes from run to run
NORMALISE = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{3})?([+-]\d{2}:\d{2}|Z)?"), "<TIME>"),
    (re.compile(r"\b\d{8}T\d{9}Z\b"), "<STAMP>"),
    (re.compile(r"\b1\d{12}\b"), "<MS>"),
    (re.compile(r"\b(\d+d\d{2}h|\d+h\d{2}m|\d+m\d{2}s|\d+(\.\d+)?s)\b"), "<DURATION>"),
    (re.compile(r"\b(127\.0\.0\.1|localhost):\d+\b"), r"\1:<PORT>"),
    (re.compile(r"\b\d[\d,]*(\.\d+)?\b"), "<N>"),  # offsets, counts and rates drift with the clock
    (re.compile(r"\s+"), " "),
]


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    line: int
    mode: str  # "compare", "exit-code-only" or "skip"
    reason: str
    commands: list[Command]


def blocks(text: str) -> list[Block]:
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.search(before)
        start, commands = i + 1, []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            if line.startswith("$ "):
                command = line[2:]
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                commands.append(Command(command))
            elif commands:
                commands[-1].expected.append(line)
            i += 1
        mode = marker.group(1) if marker else "compare"
        out.append(Block(start, mode, marker.group(2) if marker else "", commands))
    return out


def normalise(line: str) -> str:
    for pattern, replacement in NORMALISE:
        line = pattern.sub(replacement, line)
    return line.strip()


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` line by line, ``...`` standing for any lines."""
    pats = [None if e == "..." else re.compile(".*".join(re.escape(p) for p in e.split("…"))) for e in expected]
    memo: dict[tuple[int, int], bool] = {}

    def at(i: int, j: int) -> bool:
        if (i, j) not in memo:
            if i == len(pats):
                memo[i, j] = j == len(actual)
            elif pats[i] is None:
                memo[i, j] = at(i + 1, j) or (j < len(actual) and at(i, j + 1))
            else:
                memo[i, j] = j < len(actual) and bool(pats[i].fullmatch(actual[j])) and at(i + 1, j + 1)  # type: ignore[union-attr]
        return memo[i, j]

    return at(0, 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def script(block: Block, port: int) -> str:
    """The block as one bash script: each command's output between markers, then its exit code."""
    parts = ["set +e"]
    for n, command in enumerate(block.commands):
        text = command.text.replace(EXAMPLE_PORT, str(port))
        parts.append(f"echo '@@@ {n}'")
        if text.rstrip().endswith("&"):
            parts.append(f"( exec {text.rstrip()[:-1]} ) >/dev/null 2>&1 &")  # the job is the command itself
            listen = re.search(r"--port (\d+)", text)
            if listen:
                parts.append(
                    f"for i in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/{listen.group(1)}) 2>/dev/null && break; "
                    "sleep 0.1; done; sleep 1"
                )
            parts.append("echo '@@@ rc 0'")
        else:
            parts.append(f'{{ {text} ; }} 2>&1; echo "@@@ rc $?"')
    parts.append("kill $(jobs -p) 2>/dev/null; wait")
    return "\n".join(parts) + "\n"


ALL = blocks(README.read_text())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One MQADMIN_HOME and working folder for the whole README: examples build on each other."""
    root = tmp_path_factory.mktemp("readme")
    (root / "home").mkdir()
    (root / "work").mkdir()
    return root / "home", root / "work"


def test_the_readme_has_console_examples() -> None:
    assert len([b for b in ALL if b.mode == "compare"]) >= 8
    assert all(b.reason for b in ALL if b.mode != "compare"), "a marked block says why"


@pytest.mark.parametrize("block", ALL, ids=[f"line{b.line}" for b in ALL])
def test_console_example(block: Block, world: tuple[Path, Path]) -> None:
    if block.mode == "skip":
        pytest.skip(f"README line {block.line}: {block.reason}")
    home, work = world
    env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "COLUMNS", "LINES", "MQADMIN_PROFILE")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        MQADMIN_HOME=str(home),
        NO_COLOR="1",
        TZ="UTC",
    )
    proc = subprocess.Popen(
        ["bash", "-c", script(block, free_port())],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that nothing it started outlives it
    )
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    outputs = re.split(r"^@@@ \d+\n", stdout, flags=re.M)[1:]
    assert len(outputs) == len(block.commands), stdout + stderr
    for command, output in zip(block.commands, outputs, strict=True):
        body, _, rc = output.rpartition("@@@ rc ")
        body = body.replace(str(home), EXAMPLE_HOME).replace(str(work), EXAMPLE_CWD)
        failing = any("mqadmin: error:" in e for e in command.expected)
        assert (int(rc) != 0) == failing, f"README line {block.line}: $ {command.text} exited {rc}:\n{body}"
        if block.mode == "exit-code-only":
            continue
        want = [normalise(e) for e in command.expected if e.strip()]
        got = [normalise(a) for a in body.splitlines() if a.strip()]
        assert matches(want, got), (
            f"README line {block.line}: $ {command.text}\n--- README shows:\n"
            + "\n".join(command.expected)
            + "\n--- it printed:\n"
            + body
        )
