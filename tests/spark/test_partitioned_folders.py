"""--partition-by on the Spark engine writes the local engine's folder: the same partition folders
and file names holding the same records (the same bytes), the same manifest but for its
``engine``, ``_SUCCESS`` last; a killed checkpointed run leaves nothing marked complete and
resumes to the same folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

pytest.importorskip("pyspark")

from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message
from mqadmin.replay.records import read_records

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000  # 22:13:20 UTC: the window crosses two hour boundaries
STEP = 20_000
Run = Callable[..., CliResult]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One small session for the module; the in-process CLI runs on it."""
    from mqadmin.spark.engine import build_session

    session = build_session("local[2]", {"spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """400 messages 20 s apart on 4 queues of 2 brokers; one in four born 10 min before it was
    stored (so by born time it falls in another hour near an hour's start), one in ten stored
    twice (a producer's retry) for --dedup."""
    root = tmp_path_factory.mktemp("sparkpart") / "store"
    cluster = MockCluster.create(root)
    cluster.create_topic("P", 2)
    targets = [(b, q) for b in cluster.brokers.values() for q in range(2)]
    for i in range(400):
        broker, qid = targets[i % 4]
        stored = T0 + i * STEP
        born = stored - (600_000 if i % 4 == 1 else 40)
        props = {"TAGS": "sms" if i % 3 else "push", "KEYS": f"k{i}", "UNIQ_KEY": new_uniq_key()}
        msg = Message("P", f"m{i}".encode(), props, queue_id=qid, born_timestamp=born)
        broker.put_message(msg, store_timestamp=stored)
        if i % 10 == 3:
            again = Message("P", msg.body, dict(props), queue_id=qid, born_timestamp=born)
            broker.put_message(again, store_timestamp=stored)
    cluster.close()
    return f"mock://{root}"


def window(store: str, by: str, slice_size: int = 25) -> tuple[str, ...]:
    args = ["rangeReplay", "-n", store, "-t", "P", "-b", str(T0 + 7 * STEP), "-e", str(T0 + 390 * STEP)]
    args += ["--slice-size", str(slice_size), "--partition-by", by, "--tag", "sms", "--dedup"]
    if by == "hour":  # bucketed by born time on both engines
        args += ["--time-field", "born", "--slack", "15m"]
    return tuple(args)


def listing(root: Path) -> dict[str, Any]:
    """Every file of a folder by relative path: the records of data files, the manifest without
    its ``engine``, and the other files' bytes."""
    out: dict[str, Any] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel == "_MANIFEST.json":
            out[rel] = {k: v for k, v in json.loads(path.read_text()).items() if k != "engine"}
        elif path.name.startswith("part-"):
            out[rel] = list(read_records(path))
        else:
            out[rel] = path.read_bytes()
    return out


@pytest.mark.parametrize("scheme", ["jsonl", "parquet"])
@pytest.mark.parametrize("by", ["hour", "broker", "queue"])
def test_spark_writes_the_local_engines_folder(
    spark: Any, store: str, tmp_path: Path, cli: Run, by: str, scheme: str
) -> None:
    if scheme == "parquet":
        pytest.importorskip("pyarrow")
    local, remote = tmp_path / "local", tmp_path / "spark"
    dry = cli(*window(store, by), "--to", f"{scheme}:{remote}", "--dry-run", "--json")
    lr = cli(*window(store, by), "--to", f"{scheme}:{local}", "--engine", "local", "--json")
    sr = cli(*window(store, by), "--to", f"{scheme}:{remote}", "--engine", "spark", "--json")
    assert dry.code == lr.code == sr.code == 0, dry.stderr + lr.stderr + sr.stderr
    ld, sd, dd = json.loads(lr.stdout), json.loads(sr.stdout), json.loads(dry.stdout)
    assert (ld["engine"], sd["engine"]) == ("local", "spark")
    assert listing(remote) == listing(local)  # file names, records, manifest (counts, sha256), _SUCCESS
    assert {"_MANIFEST.json", "_SUCCESS"} <= set(listing(local))
    manifest = json.loads((remote / "_MANIFEST.json").read_text())
    assert manifest["engine"] == "spark" and manifest["partition_by"] == by and manifest["format"] == scheme
    assert manifest["total"] == sd["written"] == ld["written"] == dd["would_write"] > 150
    assert manifest["partitions"] == sd["partitions"] == dd["partitions"]
    assert len(manifest["partitions"]) == {"hour": 3, "broker": 2, "queue": 4}[by]
    assert sd["duplicates_dropped"] == ld["duplicates_dropped"] == dd["duplicates_dropped"] > 0
    assert not (tmp_path / "spark.parts").exists() and not (remote / "_temporary").exists()
    if by == "hour":
        assert manifest["hour_of"] == "born" and manifest["filters"]["time_field"] == "born"
        if scheme == "jsonl":  # each message in the hour of its born time
            for path in remote.rglob("part-*"):
                hours = {"hour=" + _utc_hour(r["born_timestamp"]) for r in read_records(path)}
                assert hours == {path.parent.name}


def test_a_window_with_nothing_to_write_is_an_empty_sealed_folder(
    spark: Any, store: str, tmp_path: Path, cli: Run
) -> None:
    local, remote = tmp_path / "local", tmp_path / "spark"
    args = (*window(store, "broker")[:-3], "--tag", "none-such")  # without --tag sms --dedup
    assert cli(*args, "--to", f"parquet:{local}", "--engine", "local").code == 0
    r = cli(*args, "--to", f"parquet:{remote}", "--engine", "spark", "--json")
    assert r.code == 0, r.stderr
    assert listing(remote) == listing(local) and set(listing(remote)) == {"_MANIFEST.json", "_SUCCESS"}
    assert json.loads(r.stdout)["written"] == 0 == listing(remote)["_MANIFEST.json"]["total"]


def _utc_hour(ms: int) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H", time.gmtime(ms // 1000))


def test_killed_spark_run_resumes_to_the_same_folder(spark: Any, store: str, tmp_path: Path, cli: Run) -> None:
    """The driver is SIGKILLed after its first wave is committed and one slice recorded: nothing
    is presented as complete (no PATH, no _SUCCESS, no manifest); the resumed run rewrites the
    unrecorded slices' files under the same names, so the folder is the local engine's."""
    clean, out, cp = tmp_path / "clean", tmp_path / "out", tmp_path / "cp"
    args = window(store, "hour", slice_size=50)  # 12 slices: 3 waves of 4 on local[1]
    assert cli(*args, "--to", f"jsonl:{clean}", "--engine", "local").code == 0
    run = (*args, "--to", f"jsonl:{out}", "--engine", "spark", "--checkpoint", str(cp))
    cmd = [sys.executable, "-m", "mqadmin", *run, "--spark-master", "local[1]"]
    env = {**os.environ, "MQADMIN_FAULT_POINT": "replay-slice-recorded"}
    killed = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    parts = tmp_path / "out.parts"
    assert not out.exists() and parts.is_dir() and list(parts.rglob("part-*"))
    assert not list(parts.rglob("_SUCCESS")) and not list(parts.rglob("_MANIFEST.json"))
    recorded = [json.loads(line) for line in cp.read_text().splitlines()[1:]]
    assert len(recorded) == 1 and "slice" in recorded[0]  # the wave's other slices: written, not recorded
    stray = parts / "hour=2023-11-14T22" / "part-00000099.jsonl"  # a file no slice of the plan writes
    stray.write_bytes(b"{}\n")
    refused = cli(*run, "--json")
    assert refused.code == 1 and "not sealed" in refused.stderr and not out.exists()
    stray.unlink()
    resumed = cli(*run, "--json")
    assert resumed.code == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["complete"] and doc["written"] == json.loads((clean / "_MANIFEST.json").read_text())["total"]
    assert listing(out) == listing(clean) and not parts.exists()
    again = cli(*run, "--json")  # the checkpoint says finished: the folder is left as it is
    assert again.code == 0 and listing(out) == listing(clean)
