"""Plans as files: --export FILE.csv writes the plan; restoreOffset --from FILE.csv applies an
edited one, validated whole before anything moves."""

from __future__ import annotations

import csv
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import HOUR_MS, CliResult, Store

from tests.commands.test_reset_offset_by_time import offsets

HEADER = ["group", "topic", "broker", "queue", "offset", "old_offset", "min_offset", "max_offset"]


def hour_ago() -> int:
    return int(time.time() * 1000) - HOUR_MS


def export(store: Store, cli: Callable[..., CliResult], path: Path, *args: str) -> CliResult:
    r = cli(*args, "-n", store.address, "--export", str(path))
    assert r.code == 0, r.stderr
    return r


@pytest.mark.parametrize(
    "command",
    [
        ("resetOffsetByTime", "-g", "g", "-t", "TopicTest", "--shift-by", "-10"),
        ("skipAccumulatedMessage", "-g", "g", "-t", "TopicTest"),
        ("cloneGroupOffset", "-s", "src", "-d", "g", "-t", "TopicTest"),
    ],
)
def test_export_writes_the_plan_and_changes_nothing(
    command: tuple[str, ...], make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=800, groups={"g": hour_ago(), "src": hour_ago() - HOUR_MS // 2})
    before = offsets(store, "g")
    path = tmp_path / "plan.csv"
    r = export(store, cli, path, *command, "--json")
    doc: Any = r.json()
    assert doc["exported"] == str(path) and doc["backup"] is None and "nothing was changed" in r.stderr
    rows = list(csv.reader(path.read_text().splitlines()))
    assert rows[0] == HEADER and len(rows) == 9
    plan = {(q["broker"], q["queue_id"]): q for q in doc["queues"]}
    for g, topic, broker, queue, offset, old, lo, hi in rows[1:]:
        q = plan[(broker, int(queue))]
        assert (g, topic) == ("g", "TopicTest")
        assert (int(offset), int(old), int(lo), int(hi)) == (q["new_offset"], before[(broker, int(queue))], 0, 100)
    assert offsets(store, "g") == before


def test_an_edited_plan_is_applied_and_undone(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=800, groups={"g": hour_ago()})
    before = offsets(store, "g")
    path = tmp_path / "plan.csv"
    r = export(store, cli, path, "resetOffsetByTime", "-g", "g", "-t", "TopicTest", "--to-earliest")
    line = re.search(r"apply it with: (.+)$", r.stdout, re.M)
    assert line is not None
    lines = path.read_text().splitlines()
    edited = [lines[0]] + [re.sub(r"^(g,TopicTest,broker-a,0,)0,", r"\g<1>7,", x) for x in lines[1:]]
    path.write_text("\n".join(edited) + "\n")
    applied = cli(*shlex.split(line.group(1))[1:], "--yes", "--json")
    assert applied.code == 0, applied.stderr
    want = {k: 0 for k in before} | {("broker-a", 0): 7}
    assert offsets(store, "g") == want
    doc: Any = applied.json()
    assert all(q["outcome"] == "applied" for q in doc["queues"])
    assert cli(*shlex.split(doc["undo"])[1:], "--yes").code == 0
    assert offsets(store, "g") == before


def test_a_plan_is_known_by_its_content_too(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=800, groups={"g": hour_ago()})
    path = tmp_path / "plan.txt"
    export(store, cli, path, "skipAccumulatedMessage", "-g", "g", "-t", "TopicTest")
    r = cli("restoreOffset", "-n", store.address, "--from", str(path), "--yes")
    assert r.code == 0, r.stderr
    assert set(offsets(store, "g").values()) == {100}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("topic,broker,queue,offset\nTopicTest,broker-a,0,5\n", "the header lacks group"),
        ("group,topic,broker,offset\ng,TopicTest,broker-a,5\n", "the header lacks queue"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,x\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,12.5\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0, 7\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,+8\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,1e3\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,1_000\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,true\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,\u0663\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,+1,3\n", "must be integers"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,-1\n", "a negative queue or offset"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,1\ng,TopicTest,broker-a,0,2\n", "named twice"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,1\nh,TopicTest,broker-a,1,2\n", "several groups"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,\n", "line 2: empty offset"),
        ("group,topic,broker,queue,offset\n", "has no rows"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,9,1\n", "does not have"),
        ("group,topic,broker,queue,offset\ng,TopicTest,broker-a,0,5000\n", "outside today's [min, max]"),
        ("group,topic,broker,queue,offset\ng,Nope,broker-a,0,1\n", "unknown topic 'Nope'"),
    ],
)
def test_a_bad_plan_is_refused_whole(
    body: str,
    message: str,
    make_store: Callable[..., Store],
    cli: Callable[..., CliResult],
    tmp_path: Path,
    mqadmin_home: Path,
) -> None:
    store = make_store(count=800, groups={"g": hour_ago()})
    before = offsets(store, "g")
    path = tmp_path / "plan.csv"
    path.write_text("group,topic,broker,queue,offset\ng,TopicTest,broker-b,3,1\n" if not body else body)
    r = cli("restoreOffset", "-n", store.address, "--from", str(path), "--yes")
    assert r.code == 2 and message in r.stderr and r.stdout == "", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert offsets(store, "g") == before and not (mqadmin_home / "backups").exists()


def test_a_plan_needs_an_address(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=800, groups={"g": hour_ago()})
    path = tmp_path / "plan.csv"
    export(store, cli, path, "skipAccumulatedMessage", "-g", "g", "-t", "TopicTest")
    r = cli("restoreOffset", "--from", str(path))
    assert r.code == 2 and "records no broker address: give one with -n" in r.stderr
