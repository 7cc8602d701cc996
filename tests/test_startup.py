"""`mqadmin --help` and a simple query must start fast: no heavy imports on their path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mqadmin.mock.cluster import MockCluster

HEAVY = ("pyspark", "pyarrow", "numpy", "mqadmin.spark", "rich", "mqadmin.remoting")


def loaded_after(args: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from mqadmin.cli import main\n"
        f"main({args!r})\n"
        f"print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY!r})), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return set(eval(proc.stderr.strip().splitlines()[-1]))


def test_help_imports_nothing_heavy() -> None:
    assert loaded_after(["--help"]) == set()


def store(tmp_path: Path) -> str:
    """An empty mock store (a mock:// name that is no store is refused before the backend opens)."""
    MockCluster.create(tmp_path / "store").close()
    return f"mock://{tmp_path / 'store'}"


def test_embedded_query_imports_nothing_heavy(tmp_path: Path) -> None:
    assert loaded_after(["queryOffset", "-n", store(tmp_path), "-t", "T", "--json"]) == set()


def modules_after_entry(args: list[str]) -> set[str]:
    """Modules loaded when the console script's entry point handles ``args``."""
    code = (
        "import sys\n"
        "from mqadmin.entry import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return set(eval(proc.stderr.strip().splitlines()[-1]))


def test_help_imports_no_command_module_nor_click() -> None:
    for args in (["--help"], ["-h"], [], ["--version"]):
        loaded = modules_after_entry(args)
        assert not {m for m in loaded if m.startswith("mqadmin.commands.")}, args
        assert not {m for m in loaded if m.split(".")[0] in ("typer", "click", "rich")}, args
        assert "mqadmin.cli" not in loaded, args


def test_a_command_imports_only_its_own_module(tmp_path: Path) -> None:
    loaded = modules_after_entry(["queryOffset", "-n", store(tmp_path), "-t", "T", "--json"])
    commands = {m for m in loaded if m.startswith("mqadmin.commands.") and not m.startswith("mqadmin.commands._")}
    assert commands == {"mqadmin.commands.query_offset"}


#: what a plain embedded query must not load: click (typer, pydantic) parse only other lines;
#: the replay planner only a search that scans; the thread pool (with logging) only a fan-out
NOT_FOR_A_PLAIN_QUERY = (
    "typer",
    "click",
    "pydantic",
    "mqadmin.cli_click",
    "concurrent.futures",
    "mqadmin.replay.search",
    "mqadmin.replay.planner",
    "mqadmin.replay.worker",
)


def test_a_plain_embedded_query_imports_neither_click_nor_the_planner(tmp_path: Path) -> None:
    loaded = modules_after_entry(["queryOffset", "-n", store(tmp_path), "-t", "T", "-g", "G", "--json"])
    assert not {m for m in loaded if any(m == h or m.startswith(h + ".") for h in NOT_FOR_A_PLAIN_QUERY)}


def test_help_to_a_closed_or_broken_stdout_is_one_line_not_a_traceback() -> None:
    import os

    closed = subprocess.run(
        [sys.executable, "-m", "mqadmin", "--help"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),
        timeout=60,
    )
    assert closed.returncode == 1
    assert closed.stderr.splitlines() == ["mqadmin: error: cannot write to stdout: stdout is closed"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `mqadmin --help | head -0`: nobody will read
    try:
        broken = subprocess.run(
            [sys.executable, "-m", "mqadmin", "--help"], stdout=write_end, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(write_end)
    assert broken.returncode == 1 and broken.stderr == b""
