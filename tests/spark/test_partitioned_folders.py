"""--partition-by queue on both engines: the same Hive-style folders holding the same messages,
each sealed by a manifest (counts, window, filters, sha256 per file) and _SUCCESS."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.replay.records import read_records

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000


def folders(root: Path) -> dict[str, list[dict[str, object]]]:
    """The records of each partition folder, read as one dataset per folder."""
    out: dict[str, list[dict[str, object]]] = {}
    for leaf in sorted(p for p in root.glob("broker=*/queue_id=*") if p.is_dir()):
        out[leaf.relative_to(root).as_posix()] = [
            {k: v for k, v in r.items() if k not in ("broker", "queue_id")} for r in read_records(leaf)
        ]
    return out


@pytest.mark.parametrize("scheme", ["jsonl", "parquet"])
def test_local_and_spark_write_the_same_sealed_folders(tmp_path: Path, scheme: str) -> None:
    if scheme == "parquet":
        pytest.importorskip("pyarrow")
    root = tmp_path / "store"
    cluster = MockCluster.create(root)
    fill_topic(cluster, "T", 600, T0, T0 + 40, queues_per_broker=2)
    cluster.close()
    args = ["rangeReplay", "-n", f"mock://{root}", "-t", "T", "-b", str(T0 + 3), "-e", str(T0 + 30)]
    args += ["--tag", "TagA || TagC", "--partition-by", "queue", "--slice-size", "50", "--json"]

    def run(out: Path, *extra: str) -> dict[str, object]:
        cmd = [sys.executable, "-m", "mqadmin", *args, "--to", f"{scheme}:{out}", *extra]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr
        doc: dict[str, object] = json.loads(r.stdout)
        return doc

    local = run(tmp_path / "local")
    spark = run(tmp_path / "spark", "--engine", "spark", "--spark-master", "local[1]")
    assert spark["engine"] == "spark" and local["engine"] == "local"
    assert folders(tmp_path / "spark") == folders(tmp_path / "local") and folders(tmp_path / "local")
    ml = json.loads((tmp_path / "local" / "_MANIFEST.json").read_text())
    ms = json.loads((tmp_path / "spark" / "_MANIFEST.json").read_text())
    assert ms["engine"] == "spark" and ml["engine"] == "local"
    for key in ("partitions", "total", "window", "filters", "partition_by", "format"):
        assert ms[key] == ml[key], key
    assert ms["total"] == spark["written"] == local["written"] > 0
    assert ms["partitions"] == spark["partitions"] == local["partitions"]
    for f in ms["files"]:
        data = (tmp_path / "spark" / f["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == f["sha256"] and len(data) == f["bytes"]
    assert sum(f["rows"] for f in ms["files"]) == ms["total"]
    assert (tmp_path / "spark" / "_SUCCESS").is_file()
