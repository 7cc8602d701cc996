"""rangeReplay on a stopped broker's store: the same messages as from the broker, store untouched."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HOUR_MS, CliResult, Store


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


def window(store: Store) -> tuple[str, str]:
    return str(store.start_ms + HOUR_MS // 2), str(store.start_ms + 3 * HOUR_MS // 2)


def test_local_engine_writes_what_the_broker_gives(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store("4.9.8", count=400)
    before = snapshot(store.path)
    begin, end = window(store)
    outputs = {}
    for name, address in (("live", store.address), ("offline", f"store://{store.path}")):
        out = tmp_path / f"{name}.jsonl"
        r = cli("rangeReplay", "-n", address, "-t", "TopicTest", "-b", begin, "-e", end, "--to", f"jsonl:{out}")
        assert r.code == 0, r.stderr
        outputs[name] = out.read_bytes()
    assert outputs["offline"] == outputs["live"] and outputs["offline"].count(b"\n") == 200
    tagged = cli(
        "rangeReplay", "-n", f"store://{store.path}", "-t", "TopicTest", "-b", begin, "-e", end,
        "--tag", "TagA", "--to", "stdout",
    )  # fmt: skip
    assert tagged.code == 0 and {json.loads(line)["tags"] for line in tagged.stdout.splitlines()} == {"TagA"}
    refused = cli(
        "rangeReplay",
        "-n",
        f"store://{store.path}",
        "-t",
        "TopicTest",
        "-b",
        begin,
        "-e",
        end,
        "--to",
        "topic:TopicTest",
        "--yes",
    )
    assert refused.code != 0 and "read-only" in refused.stderr
    assert snapshot(store.path) == before


@pytest.mark.spark
def test_spark_engine_reads_the_store_on_executors(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    pytest.importorskip("pyspark")
    store = make_store("5.3.3", count=400)
    before = snapshot(store.path)
    begin, end = window(store)
    local, spark = tmp_path / "local.jsonl", tmp_path / "spark.jsonl"
    address = f"store://{store.path}"
    base = ("rangeReplay", "-n", address, "-t", "TopicTest", "-b", begin, "-e", end)
    assert cli(*base, "--to", f"jsonl:{local}").code == 0
    r = cli(*base, "--to", f"jsonl:{spark}", "--engine", "spark", "--slice-size", "25")
    assert r.code == 0, r.stderr
    parts = [p for p in spark.rglob("part-*") if not p.name.endswith(".crc")]
    from_spark = {json.loads(line)["msg_id"] for p in parts for line in p.read_text().splitlines()}
    from_local = {json.loads(line)["msg_id"] for line in local.read_text().splitlines()}
    assert from_spark == from_local and len(from_local) == 200
    assert snapshot(store.path) == before
