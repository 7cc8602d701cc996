"""rangeReplay --partition-by against the mock, through both doors (the embedded store and
mockBroker over TCP): the folder holds exactly what a single-file replay writes, each message in
its partition, sealed by a manifest that matches the files and the dry run; kills resume exactly."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, store_address

from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message
from mqadmin.replay.records import read_records

T0 = 1_700_000_000_000  # 22:13:20 UTC: the window crosses three hour boundaries
STEP = 20_000
Run = Callable[..., CliResult]


def seed(root: Path) -> None:
    """480 messages 20 s apart (2 h 40 min) on 4 queues of 2 brokers, a kind property, and every
    tenth stored twice (a producer's retry) for --dedup; one in five born 15 min before it was
    stored, and an ORDER_TIME property 40 min before (other hours than the store time's)."""
    cluster = MockCluster.create(root, version="5.3.3")
    cluster.create_topic("P", 2)
    targets = [(b, q) for b in cluster.brokers.values() for q in range(2)]
    for i in range(480):
        broker, qid = targets[i % 4]
        props = {"TAGS": "sms" if i % 3 else "push", "KEYS": f"k{i}", "UNIQ_KEY": new_uniq_key()}
        props["ORDER_TIME"] = str(T0 + i * STEP - 2_400_000)
        born = T0 + i * STEP - (900_000 if i % 5 == 2 else 30)
        msg = Message(topic="P", body=f"m{i}".encode(), properties=props, queue_id=qid, born_timestamp=born)
        broker.put_message(msg, store_timestamp=T0 + i * STEP)
        if i % 10 == 3:
            again = Message(topic="P", body=msg.body, properties=dict(props), queue_id=qid, born_timestamp=born)
            broker.put_message(again, store_timestamp=T0 + i * STEP)
    cluster.close()


@pytest.fixture(scope="module", params=["embedded", "tcp"])
def door(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp(f"partitions-{request.param}") / "store"
    seed(root)
    with store_address(root, request.param) as address:
        yield address


def window_args(address: str) -> tuple[str, ...]:
    begin, end = T0 + 7 * STEP, T0 + 470 * STEP
    return ("rangeReplay", "-n", address, "-t", "P", "-b", str(begin), "-e", str(end), "--slice-size", "25")


def folder_of(by: str, record: dict[str, object]) -> str:
    if by == "hour":
        return "hour=" + time.strftime("%Y-%m-%dT%H", time.gmtime(int(record["store_timestamp"]) // 1000))  # type: ignore[call-overload]
    if by == "broker":
        return f"broker={record['broker']}"
    return f"broker={record['broker']}/queue_id={record['queue_id']}"


def manifest(folder: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((folder / "_MANIFEST.json").read_text())
    return doc


@pytest.mark.parametrize("scheme", ["jsonl", "parquet"])
@pytest.mark.parametrize("by", ["hour", "broker", "queue"])
def test_folder_holds_the_window_in_its_partitions(door: str, tmp_path: Path, cli: Run, by: str, scheme: str) -> None:
    if scheme == "parquet":
        pytest.importorskip("pyarrow")
    args = (*window_args(door), "--tag", "sms", "--dedup")
    flat, out = tmp_path / "flat.jsonl", tmp_path / "out"
    assert cli(*args, "--to", f"jsonl:{flat}").code == 0
    dry = cli(*args, "--partition-by", by, "--to", f"{scheme}:{out}", "--dry-run", "--json")
    real = cli(*args, "--partition-by", by, "--to", f"{scheme}:{out}", "--json")
    assert dry.code == real.code == 0, dry.stderr + real.stderr
    want = list(read_records(flat))
    assert list(read_records(out)) == want and len(want) > 200  # exactly the single-file replay
    counts: dict[str, int] = {}
    for rel in sorted(p.relative_to(out).as_posix() for p in out.rglob("part-*")):
        part = rel.rsplit("/", 1)[0]
        rows = list(read_records(out / rel)) if scheme == "jsonl" else None
        if rows is not None:
            assert {folder_of(by, r) for r in rows} == {part}  # each message in its own partition
    for r in want:
        counts[folder_of(by, r)] = counts.get(folder_of(by, r), 0) + 1
    doc, real_doc, dry_doc = manifest(out), json.loads(real.stdout), json.loads(dry.stdout)
    assert doc["partitions"] == real_doc["partitions"] == dry_doc["partitions"] == counts
    assert len(counts) == {"hour": 3, "broker": 2, "queue": 4}[by]
    assert doc["total"] == real_doc["written"] == dry_doc["would_write"] == len(want)
    assert doc["window"] == {"begin": T0 + 7 * STEP, "end": T0 + 470 * STEP}
    assert doc["engine"] == "local" and doc["partition_by"] == by and doc["format"] == scheme
    assert doc["filters"]["tag"] == "sms" and doc["filters"]["dedup"] is True  # type: ignore[index]
    files = doc["files"]
    assert isinstance(files, list) and {f["path"] for f in files} == {
        p.relative_to(out).as_posix() for p in out.rglob("part-*")
    }
    for f in files:
        assert hashlib.sha256((out / f["path"]).read_bytes()).hexdigest() == f["sha256"]
        assert (out / f["path"]).stat().st_size == f["bytes"]
    assert sum(f["rows"] for f in files) == len(want)
    assert (out / "_SUCCESS").is_file() and not (tmp_path / "out.parts").exists()
    if scheme == "parquet" and by != "hour":  # the partition columns live in the folder names, as Spark writes
        import pyarrow.parquet as pq

        names = pq.read_schema(next(out.rglob("part-*"))).names
        assert "broker" not in names and ("queue_id" in names) == (by == "broker")


@pytest.mark.parametrize(("field", "column"), [("born", "born_timestamp"), ("property:ORDER_TIME", "ORDER_TIME")])
def test_hours_are_those_of_the_windows_time_field(
    door: str, tmp_path: Path, cli: Run, field: str, column: str
) -> None:
    """A window by born time (or a property) is bucketed by that time, not by the store time."""
    out = tmp_path / "out"
    args = (*window_args(door), "--time-field", field, "--slack", "1h", "--partition-by", "hour", "--json")
    dry = cli(*args, "--to", f"jsonl:{out}", "--dry-run")
    real = cli(*args, "--to", f"jsonl:{out}")
    assert dry.code == real.code == 0, dry.stderr + real.stderr

    def hour(r: dict[str, Any]) -> str:
        ms = int(r[column] if column in r else r["properties"][column])
        return "hour=" + time.strftime("%Y-%m-%dT%H", time.gmtime(ms // 1000))

    counts: dict[str, int] = {}
    moved = 0
    for path in out.rglob("part-*"):
        rows = list(read_records(path))
        assert {hour(r) for r in rows} == {path.parent.name}  # each message in its field's hour
        counts[path.parent.name] = counts.get(path.parent.name, 0) + len(rows)
        moved += sum(folder_of("hour", r) != path.parent.name for r in rows)
    assert moved > 10  # messages whose store time is in another hour
    doc = manifest(out)
    assert doc["partitions"] == counts == json.loads(dry.stdout)["partitions"] == json.loads(real.stdout)["partitions"]
    assert doc["hour_of"] == field and doc["filters"]["time_field"] == field  # type: ignore[index]


@pytest.mark.parametrize("fault", ["replay-slice-written", "replay-slice-recorded", "replay-published"])
def test_killed_partitioned_replay_resumes_exactly(door: str, tmp_path: Path, cli_proc: Run, fault: str) -> None:
    """A kill after a slice's files are written but not recorded, after it is recorded, or after
    the folder is in place: the resumed folder is the uninterrupted run's, file for file."""
    args = (*window_args(door), "--partition-by", "hour", "--dedup")
    clean, out, cp = tmp_path / "clean", tmp_path / "out", tmp_path / "cp"
    assert cli_proc(*args, "--to", f"jsonl:{clean}").code == 0
    run = (*args, "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": fault})
    assert killed.code == -signal.SIGKILL
    assert (out / "_SUCCESS").exists() == (fault == "replay-published")  # no marker on a half-made folder
    parts = tmp_path / "out.parts"
    if parts.exists():  # what a run killed inside a slice leaves: a file half-written, one not recorded
        (parts / ".00000099.0.4242.tmp").write_bytes(b"half")
        (parts / "hour=2023-11-14T22").mkdir(exist_ok=True)
        (parts / "hour=2023-11-14T22" / "part-00000099.jsonl").write_bytes(b"{}\n")
    other = cli_proc(
        *window_args(door), "--partition-by", "broker", "--dedup", "--to", f"jsonl:{out}", "--checkpoint", str(cp)
    )
    assert other.code == 2 and "partition_by" in other.stderr  # a resume keeps its layout
    resumed = cli_proc(*run, "--json")
    assert resumed.code == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["complete"] and doc["written"] == manifest(clean)["total"]
    assert doc["partitions"] == manifest(clean)["partitions"]
    assert manifest(out)["files"] == manifest(clean)["files"]  # same names, rows and sha256
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert got == sorted(p.relative_to(clean).as_posix() for p in clean.rglob("*") if p.is_file())
    assert not (tmp_path / "out.parts").exists()


def test_resume_whose_unfinished_folder_is_gone(door: str, tmp_path: Path, cli_proc: Run) -> None:
    out, cp = tmp_path / "out", tmp_path / "cp"
    run = (*window_args(door), "--partition-by", "queue", "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    assert cli_proc(*run, env={"MQADMIN_FAULT_POINT": "replay-slice-recorded"}).code == -signal.SIGKILL
    shutil.rmtree(tmp_path / "out.parts")
    gone = cli_proc(*run)
    assert gone.code == 2 and f"({tmp_path / 'out.parts'}) is gone" in gone.stderr and not out.exists()
    over = cli_proc(*run, "--overwrite", "--json")
    assert over.code == 0 and json.loads(over.stdout)["written"] == manifest(out)["total"] > 0


def test_existing_folder_needs_overwrite(door: str, tmp_path: Path, cli: Run) -> None:
    out = tmp_path / "out"
    args = (*window_args(door), "--partition-by", "broker", "--tag", "push", "--to", f"jsonl:{out}")
    assert cli(*args).code == 0
    first = manifest(out)
    again = cli(*window_args(door), "--partition-by", "queue", "--to", f"jsonl:{out}")
    assert again.code == 2 and "--overwrite" in again.stderr and manifest(out) == first  # untouched
    replaced = cli(*window_args(door), "--partition-by", "queue", "--to", f"jsonl:{out}", "--overwrite")
    assert replaced.code == 0 and manifest(out)["partition_by"] == "queue"
    assert not list(out.glob("broker=*/part-*"))  # nothing left of the old layout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--to", "stdout"), "--partition-by writes a folder"),
        (("--to", "topic:P"), "--partition-by writes a folder"),
        (("--to", "jsonl:s3a://bucket/x", "--engine", "spark"), "local (or mounted) folder"),
    ],
)
def test_partition_by_needs_a_local_file_output(door: str, cli_proc: Run, extra: tuple[str, ...], message: str) -> None:
    r = cli_proc(*window_args(door), "--partition-by", "hour", *extra)
    assert r.code == 2 and message in r.stderr and "Traceback" not in r.stderr
    bad = cli_proc(*window_args(door), "--partition-by", "day", "--to", "jsonl:x")
    assert bad.code == 2 and "Traceback" not in bad.stderr
