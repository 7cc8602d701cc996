"""The journal file: whole lines only (concurrent writers, torn tails, short writes), secrets kept
out of the recorded command line, and every line valid against docs/schemas/journal.schema.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mqadmin import journal

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "schemas" / "journal.schema.json"


def validate_journal(path: Path) -> list[dict[str, Any]]:
    """Every line of the journal at ``path`` parsed and checked against the schema."""
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "the journal ends in the middle of a line"
    docs = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    for doc in docs:
        validator.validate(doc)
    return docs


def record(n: int, pad: int = 0) -> dict[str, Any]:
    return {"format": journal.FORMAT, "id": f"{n:08x}", "event": "started", "time": n, "pad": "x" * pad}


def test_append_writes_whole_lines_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal.append(record(1), path)
    with path.open("ab") as f:  # a writer killed in the middle of its line
        f.write(b'{"format":"mqadmin-journal/1","id":"000')
    assert [d["id"] for d in journal.read_lines(path)] == ["00000001"]  # readers skip the torn tail
    journal.append(record(2), path)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(x)["id"] for x in lines[:-1]] == ["00000001", "00000002"]


def test_a_torn_first_line_is_cut_whole(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"format":"mqadmin-j')
    journal.append(record(7), path)
    assert path.read_bytes() == (json.dumps(record(7), separators=(",", ":")) + "\n").encode()


def test_a_short_write_is_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk that takes half the line: the half is removed, the error is raised."""
    path = tmp_path / "journal.jsonl"
    journal.append(record(1), path)
    before = path.read_bytes()
    real_write = os.write

    def half(fd: int, data: bytes) -> int:
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(journal.os, "write", half)
    with pytest.raises(OSError, match="short write"):
        journal.append(record(2, pad=5000), path)
    assert path.read_bytes() == before


def test_a_failing_write_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal.jsonl"
    journal.append(record(1), path)
    before = path.read_bytes()

    def enospc(fd: int, data: bytes) -> int:
        os.ftruncate(fd, os.fstat(fd).st_size + 10)  # as if some bytes had reached the file
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal.os, "write", enospc)
    with pytest.raises(OSError) as caught:
        journal.append(record(2), path)
    assert caught.value.filename == str(path)
    assert path.read_bytes() == before


WRITER = """
import sys
from pathlib import Path
from mqadmin import journal
path, who, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    # lines of 1 to ~70 KiB: beyond a pipe buffer and a page, so a plain unlocked write could interleave
    journal.append({"format": journal.FORMAT, "id": f"{who:04x}{i:04x}", "event": "started", "time": i,
                    "pad": chr(97 + who) * ((who * 7919 + i * 104729) % 70000)}, path)
"""


def test_many_processes_appending_at_once_leave_every_line_whole(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    writers, each = 8, 40
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w), str(each)]) for w in range(writers)]
    assert [p.wait(timeout=120) for p in procs] == [0] * writers
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    docs = [json.loads(line) for line in raw.split(b"\n")[:-1]]
    assert sorted(d["id"] for d in docs) == sorted(f"{w:04x}{i:04x}" for w in range(writers) for i in range(each))
    for d in docs:  # no line carries another writer's bytes
        who = int(d["id"][:4], 16)
        assert set(d["pad"]) <= {chr(97 + who)}


def test_redact_removes_secret_values_in_every_spelling() -> None:
    args = [
        "resetOffsetByTime",
        "--secret-key",
        "S3CR3T-A",
        "--secret-key=S3CR3T-B",
        "-sk",
        "S3CR3T-C",
        "--access-key",
        "ops",
        "--acl",
        "ak:S3CR3T-D",
        "--spark-conf",
        "spark.hadoop.fs.s3a.secret.key=S3CR3T-E",
        "--to",
        "parquet:s3a://user:S3CR3T-F@bucket/x",
        "--reason",
        "INC-1",
    ]
    out = journal.redact(args)
    assert not [a for a in out if "S3CR3T" in a]
    assert out[:3] == ["resetOffsetByTime", "--secret-key", "***"]
    assert "--secret-key=***" in out and "ak:***" in out and "ops" in out and "INC-1" in out
    assert "spark.hadoop.fs.s3a.secret.key=***" in out and "parquet:s3a://user:***@bucket/x" in out
    assert journal.redact(["--secret-key"]) == ["--secret-key"]  # a trailing flag without its value


def test_entries_merge_started_and_finished_and_flag_a_dead_run(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    base = {"format": journal.FORMAT, "host": "elsewhere", "pid": 1, "outcome": journal.IN_PROGRESS}
    journal.append(base | {"id": "0000000a", "event": "started", "time": 10}, path)
    journal.append(base | {"id": "0000000b", "event": "started", "time": 20}, path)
    journal.append(base | {"id": "0000000a", "event": "finished", "time": 30, "outcome": "applied"}, path)
    found = journal.entries(path)
    assert [(e.id, e.finished, e.outcome, e.started_at) for e in found] == [
        ("0000000a", True, "applied", 10),
        ("0000000b", False, journal.MAY_BE_PARTIAL, 20),
    ]


def test_a_started_change_of_a_running_process_is_in_progress(tmp_path: Path) -> None:
    import socket
    import time

    path = tmp_path / "journal.jsonl"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        line = {"format": journal.FORMAT, "id": "0000000c", "event": "started", "time": int(time.time() * 1000)}
        journal.append(line | {"host": socket.gethostname(), "pid": sleeper.pid}, path)
        [running] = journal.entries(path)
        assert running.outcome == f"in progress (pid {sleeper.pid} is running)"
    finally:
        sleeper.kill()
        sleeper.wait()
    [dead] = journal.entries(path)
    assert dead.outcome == journal.MAY_BE_PARTIAL
