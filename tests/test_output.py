"""Tables in a real pseudo-terminal: at any width, every identifier and number stays whole."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import seed_demo

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: what the tables exist to show: never hidden, whatever the width
KEY_COLUMNS = {"Topic", "Broker", "Broker Name", "QID", "Consumer Offset", "Diff", "Lag", "Lag Time", "Group"}
#: a fixed reset/search time, so the table run and the JSON run answer the same
AT_MS = 1_795_000_000_000


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("demo") / "store"
    cluster = MockCluster.create(root)
    seed_demo(cluster, AT_MS + 1_800_000)  # AT_MS is 30 minutes before the demo's "now"
    cluster.close()
    yield f"mock://{root}"


def run_in_pty(args: list[str], columns: int, home: Path, *, raw: bool = False, no_color: bool = True) -> str:
    """mqadmin on a pty of ``columns`` x 40 (TIOCSWINSZ), as a terminal would run it (``raw``:
    its bytes as written, escapes and all)."""
    pid, fd = pty.fork()
    if pid == 0:  # child: the terminal is set up before exec, so the size is there at start
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}  # pytest sets them
        env.update(MQADMIN_HOME=str(home), TERM="xterm", **({"NO_COLOR": "1"} if no_color else {}))
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        os.execve(sys.executable, [sys.executable, "-m", "mqadmin", *args], env)
    out = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                break
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")
    return (out.decode() if raw else ANSI.sub("", out.decode())).replace("\r\n", "\n")


def json_of(args: list[str], home: Path) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "mqadmin", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MQADMIN_HOME": str(home)},
        check=True,
    )
    return json.loads(proc.stdout)


def tokens(line: str) -> list[str]:
    return [t for t in re.split(r"[\s│┃╇━]+", line) if t]


def is_subsequence(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(x == y for y in it) for x in needle)


def check_table(text: str, columns: list[str], rows: list[list[Any]], columns_wide: int) -> None:
    """Every header appears whole (its words, in order, in the header lines) unless a note says
    it was hidden; key columns are never hidden; every value of the first rows appears whole, in
    order, on one line; no line is wider than the terminal and nothing is cut with an ellipsis."""
    assert "…" not in text, text
    lines = text.split("\n")
    for line in lines:
        if not line.startswith("("):  # the hidden-columns note may wrap, as prose does
            assert len(line) <= columns_wide, f"{len(line)} > {columns_wide}: {line!r}"
    note = next((x for x in lines if x.startswith(f"(hidden at {columns_wide} columns: ")), "")
    hidden = set(note.split(": ", 1)[1].split(";")[0].split(", ")) if note else set()
    assert not hidden & KEY_COLUMNS, note
    first_row = next(
        i for i, x in enumerate(lines) if rows and is_subsequence([str(v) for v in rows[0][:2]], tokens(x))
    )
    header_tokens = [t for x in lines[:first_row] for t in tokens(x)]
    for col in columns:
        if col in hidden:
            continue
        for word in col.split():
            assert word in header_tokens, f"header {col!r} not whole in:\n{text}"
    shown = [i for i, c in enumerate(columns) if c not in hidden]
    body = [tokens(x) for x in lines[first_row:]]
    for row in rows[:4]:
        want = [t for i in shown for t in str(row[i]).split()]
        assert any(is_subsequence(want, line) for line in body), f"row {want} not whole in:\n{text}"


def progress_rows(doc: Any) -> list[list[Any]]:
    return [
        [q["topic"], q["broker"], q["queue_id"], q["broker_offset"], q["consumer_offset"], q["diff"], q["inflight"]]
        for q in doc["queues"]
    ]


@pytest.mark.parametrize("width", [80, 200])
def test_consumer_progress_one_group(demo: str, mqadmin_home: Path, width: int) -> None:
    args = ["consumerProgress", "-n", demo, "-g", "demo_group"]
    doc = json_of(args, mqadmin_home)
    text = run_in_pty(args, width, mqadmin_home)
    columns = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "Inflight"]
    check_table(text, columns + ["LastTime", "Lag Time"], [r + ["", ""] for r in progress_rows(doc)], width)
    assert re.search(r"\b\d+[dhm]\d\d[hms]\b", text), "a lag time per queue is shown"
    if width == 200:
        assert "hidden" not in text


@pytest.mark.parametrize("width", [80, 200])
def test_consumer_progress_all_groups(demo: str, mqadmin_home: Path, width: int) -> None:
    args = ["consumerProgress", "-n", demo]
    doc = json_of(args, mqadmin_home)
    text = run_in_pty(args, width, mqadmin_home)
    rows = [[g["group"], g["count"], g["version"], "", "", int(g["tps"]), g["diff_total"], ""] for g in doc["groups"]]
    check_table(text, ["Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total", "Lag Time"], rows, width)


@pytest.mark.parametrize("width", [80, 200])
def test_query_offset_with_time(demo: str, mqadmin_home: Path, width: int) -> None:
    args = ["queryOffset", "-n", demo, "-t", "TopicTest", "-g", "demo_group", "-s", str(AT_MS)]
    doc = json_of(args, mqadmin_home)
    text = run_in_pty(args, width, mqadmin_home)
    rows = [
        [q["broker"], q["queue_id"], q["min_offset"], q["max_offset"], q["consumer_offset"], q["lag"]]
        + [q["offset_at_time"], q["store_time_at_offset_iso"]]
        for q in doc["queues"]
    ]
    columns = ["Broker", "QID", "Min Offset", "Max Offset", "Consumer Offset", "Lag", "Offset At Time"]
    check_table(text, columns + ["Store Time At Offset"], rows, width)


@pytest.mark.parametrize("width", [80, 200])
def test_reset_plan(demo: str, mqadmin_home: Path, width: int) -> None:
    args = ["resetOffsetByTime", "-n", demo, "-g", "demo_group", "-t", "TopicTest", "-s", str(AT_MS), "--dry-run"]
    doc = json_of(args, mqadmin_home)
    text = run_in_pty(args, width, mqadmin_home)
    rows = [
        [q["broker"], q["queue_id"], q["min_offset"], q["max_offset"], q["old_offset"], q["new_offset"]]
        + [f"re-delivers {-q['delta']}"]
        for q in doc["queues"]
    ]
    check_table(text, ["Broker", "QID", "Min", "Max", "Old Offset", "New Offset", "Change"], rows, width)


def test_too_narrow_for_any_table_goes_vertical(demo: str, mqadmin_home: Path) -> None:
    """Below what even folded headers need: one block per row, every value whole on its line."""
    text = run_in_pty(["queryOffset", "-n", demo, "-t", "TopicTest", "-g", "demo_group"], 30, mqadmin_home)
    assert "…" not in text
    assert re.search(r"^\[1\]$", text, re.M) and re.search(r"^  Consumer Offset\s+2223$", text, re.M), text
    assert re.search(r"^  Max Offset\s+2500$", text, re.M)


def test_scanned_time_field_column_is_hidden_once_with_the_store_time(demo: str, mqadmin_home: Path) -> None:
    args = ["queryOffset", "-n", demo, "-t", "TopicTest", "-g", "demo_group", "-s", str(AT_MS), "--time-field", "born"]
    text = run_in_pty(args, 80, mqadmin_home)
    assert "(hidden at 80 columns: Store Time At Offset, Born Time At Offset; --output json shows all)" in " ".join(
        text.split()
    )
    assert "…" not in text and re.search(r"^broker-a\s+0\s+0\s+2500\s+2223\s+277\s+\d+$", text, re.M), text


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_output_file_mode_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """A file for another program (node_exporter reads the textfile as its own user): the mode a
    new file gets from the shell, whether it is created or replaced; no temp file left behind."""
    from mqadmin.output import Env, Table, write_result

    class Doc:
        failure = check_failure = None
        stdout_used = False

        def to_json(self) -> dict[str, Any]:
            return {"n": 1}

        def table(self) -> Table:
            return Table(["N"], [[1]])

    target = tmp_path / "out.json"
    old = os.umask(umask)
    try:
        write_result(Doc(), "json", Env(), str(target))
        assert target.stat().st_mode & 0o777 == 0o666 & ~umask
        target.chmod(0o600)
        write_result(Doc(), "json", Env(), str(target))
        assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    finally:
        os.umask(old)
    assert json.loads(target.read_text()) == {"n": 1} and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_output_file_that_is_a_directory_is_named_before_any_work(demo: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mqadmin", "consumerProgress", "-n", demo, "--output-file", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr == f"mqadmin: error: --output-file {tmp_path} is a directory: name the file to write\n"


@pytest.mark.parametrize("width", [80, 200])
def test_no_color_means_no_escapes_at_all(demo: str, mqadmin_home: Path, width: int) -> None:
    """NO_COLOR or --no-color: not even bold headers; without either, a terminal gets styles."""
    for args in (["consumerProgress", "-n", demo, "-g", "demo_group"],):
        assert "\x1b[" not in run_in_pty(args, width, mqadmin_home, raw=True)
        assert "\x1b[" not in run_in_pty([*args, "--no-color"], width, mqadmin_home, raw=True, no_color=False)
        assert "\x1b[" in run_in_pty(args, width, mqadmin_home, raw=True, no_color=False)


@pytest.mark.parametrize("width", [80, 200])
def test_plan_before_the_question_is_laid_out_as_the_result_after_it(tmp_path: Path, width: int) -> None:
    """On a terminal the plan (stderr) and the result (stdout) share a layout: numbers right-aligned
    in both, so a row reads the same before and after the answer."""
    from tests.support.terminal import Terminal

    root = tmp_path / "store"
    cluster = MockCluster.create(root)
    seed_demo(cluster, AT_MS + 1_800_000)
    cluster.close()
    argv = [sys.executable, "-m", "mqadmin", "resetOffsetByTime", "-n", f"mock://{root}", "-g", "demo_group"]
    env = {**os.environ, "MQADMIN_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    with Terminal([*argv, "-t", "TopicTest", "--shift-by", "-3"], cols=width, rows=80, env=env) as term:
        term.wait_for(lambda s: "[y/N]" in s, 60)
        term.send("y\r")
        assert term.wait(60) == 0
        screen = term.text()
    plan, _, result = screen.partition("[y/N] y")
    for part in (plan, result):
        header = next(line for line in part.splitlines() if "New Offset" in line)
        row = re.search(r"^.*broker-a\W+0\W+0\W+2500\W+2223\W+2220\b", part, re.M)
        assert row, screen
        for name, value in (("Max", "2500"), ("Old Offset", "2223"), ("New Offset", "2220")):
            end = header.index(name) + len(name)
            assert row.group(0).index(value, len("broker-a")) + len(value) == end, (name, screen)


def test_last_time_says_its_zone(demo: str, cli: Any) -> None:
    """A LastTime read in another zone than it was printed in is still right: it carries its offset."""
    doc: Any = cli("consumerProgress", "-n", demo, "-g", "demo_group", "--json").json()
    q = next(q for q in doc["queues"] if q["last_timestamp"])
    for zone, offset in (("Asia/Shanghai", "+08:00"), ("UTC", "+00:00")):
        r = cli("consumerProgress", "-n", demo, "-g", "demo_group", "--tz", zone)
        shown = datetime.fromtimestamp(q["last_timestamp"] / 1000, ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")
        assert f"{shown}{offset}" in r.stdout, r.stdout


def test_cell_widths_are_richs_for_every_ascii_character_and_wide_text() -> None:
    """Printable ASCII is measured without rich (a table of 10,000 groups has 50,000 cells): the
    same widths rich gives, control characters (none) and wide characters (two) included."""
    from rich.cells import cell_len

    from mqadmin.output import _width

    texts = [chr(c) for c in range(128)] + ["group_0001", "中文组", "é", "a\u0301", "", "tab\there", "x\x1by"]
    assert [_width(t) for t in texts] == [cell_len(t) for t in texts]
