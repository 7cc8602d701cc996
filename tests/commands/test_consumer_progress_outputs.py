"""consumerProgress as the Java tool's text, as Prometheus metrics, into a file, and watched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import HOUR_MS, CliResult, Store
from prometheus_client.parser import text_string_to_metric_families

from tests.support.terminal import Terminal, default_sigint


def java_rows(text: str, first: str) -> list[dict[str, str]]:
    """Rows under the ``#first ...`` header, cut at the header's ``#`` marks as the Java tool pads them."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#" + first))
    marks = [i for i, ch in enumerate(lines[start]) if ch == "#"]
    bounds = list(zip(marks, [*marks[1:], None], strict=True))
    names = [lines[start][a:b].strip().lstrip("#") for a, b in bounds]
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append({n: line[a:b].strip() for n, (a, b) in zip(names, bounds, strict=True)})
    return rows


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_java_text_of_one_group(version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(version, count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2})
    doc: Any = cli("consumerProgress", "-n", store.address, "-g", "g", "--json").json()
    out = cli("consumerProgress", "-n", store.address, "-g", "g", "--output", "java")
    assert out.code == 0, out.stderr
    rows = java_rows(out.stdout, "Topic")
    v5 = version.startswith("5")
    expected = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff"]
    assert list(rows[0]) == [*expected, *(["Inflight"] if v5 else []), "LastTime"]
    assert len(rows) == len(doc["queues"])
    for row, q in zip(rows, doc["queues"], strict=True):
        assert (row["Topic"], row["Broker Name"], int(row["QID"])) == (q["topic"], q["broker"], q["queue_id"])
        assert (int(row["Broker Offset"]), int(row["Consumer Offset"]), int(row["Diff"])) == (
            q["broker_offset"],
            q["consumer_offset"],
            q["diff"],
        )
    footer = out.stdout.split("\n\n", 1)[1].splitlines()
    totals = (
        [f"Consume Diff Total: {doc['diff_total']}", "Consume Inflight Total: 0"]
        if v5
        else [f"Diff Total: {doc['diff_total']}"]
    )
    assert footer == [f"Consume TPS: {doc['tps']:.2f}", *totals]


def test_java_text_of_all_groups(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"a": None, "b": -1})
    out = cli("consumerProgress", "-n", store.address, "--output", "java")
    assert out.code == 0, out.stderr
    rows = {r["Group"]: r for r in java_rows(out.stdout, "Group")}
    assert set(rows) == {"a", "b"}
    assert (rows["b"]["Count"], rows["b"]["Version"], rows["b"]["TPS"], rows["b"]["Diff Total"]) == (
        "0",
        "OFFLINE",
        "0",
        "80",
    )
    assert rows["a"]["Diff Total"] == "0"


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


def test_prometheus_text_and_output_file(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=80, span_ms=HOUR_MS, groups={"g": -HOUR_MS // 2, "done": None})
    doc: Any = cli("consumerProgress", "-n", store.address, "-g", "g", "--json").json()
    out = cli("consumerProgress", "-n", store.address, "-g", "g", "--output", "prometheus")
    assert out.code == 0, out.stderr
    got = samples(out.stdout)
    topic_diff = sum(q["diff"] for q in doc["queues"] if q["topic"] == "TopicTest")
    key = frozenset({"group": "g", "topic": "TopicTest", "countOfOnlineConsumers": "0", "msgModel": "1"}.items())
    assert got[("rocketmq_group_diff", key)] == topic_diff > 0
    assert got[("mqadmin_group_lag_seconds", frozenset({("group", "g")}))] == pytest.approx(
        doc["lag_time_ms"] / 1000, abs=5
    )
    for q in doc["queues"]:
        labels = {"group": "g", "topic": q["topic"], "broker": q["broker"], "queue_id": str(q["queue_id"])}
        assert got[("mqadmin_queue_diff", frozenset(labels.items()))] == q["diff"]

    target = tmp_path / "textfile" / "mqadmin.prom"
    target.parent.mkdir()
    target.write_text("stale\n")
    written = cli("consumerProgress", "-n", store.address, "--output", "prometheus", "--output-file", str(target))
    assert written.code == 0 and written.stdout == "", written.stderr
    every = samples(target.read_text())
    assert every[("mqadmin_group_diff", frozenset({("group", "done")}))] == 0
    assert every[("mqadmin_group_diff", frozenset({("group", "g")}))] == doc["diff_total"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["mqadmin.prom"]  # no temp file left behind


def test_bad_combinations_are_refused(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=8, groups={"g": None})
    (tmp_path / "afile").write_text("")
    for args, message in [
        (("--watch", "0"), "--watch must be a number of seconds above 0"),
        (("--watch", "1", "--output", "csv"), "not --output csv"),
        (("--local-store", str(tmp_path), "--output", "java"), "no --local-store form"),
        (("--output", "prometheus", "--output-file", str(tmp_path / "afile" / "x.prom")), str(tmp_path / "afile")),
    ]:
        r = cli("consumerProgress", "-n", store.address, "-g", "g", *args)
        assert r.code in (1, 2) and r.stdout == "" and message in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    r = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "--output", "prometheus")
    assert r.code == 2 and "not available for queryOffset (it is for: consumerProgress)" in r.stderr


def test_watch_piped_prints_json_lines_and_stops_quietly(make_store: Callable[..., Store], mqadmin_home: Path) -> None:
    store = make_store(count=80, groups={"g": -1})
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqadmin", "consumerProgress", "-n", store.address, "-g", "g", "--watch", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MQADMIN_HOME": str(mqadmin_home)},
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stdout is not None
        first, second = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err == ""
    assert first["diff_total"] == second["diff_total"] == 80 and second["read_at_ms"] > first["read_at_ms"]
    assert "diff_change" not in first["queues"][0] and {q["diff_change"] for q in second["queues"]} == {0}


def test_watch_on_a_terminal_redraws_the_table_with_the_change(
    make_store: Callable[..., Store], mqadmin_home: Path
) -> None:
    store = make_store(count=80, groups={"g": -1})
    argv = [sys.executable, "-m", "mqadmin", "consumerProgress", "-n", store.address, "-g", "g", "--watch", "0.3"]
    env = {**os.environ, "MQADMIN_HOME": str(mqadmin_home), "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    with Terminal(argv, cols=120, rows=40, env=env) as term:
        screen = term.wait_for(lambda s: "Change" in s and "Ctrl-C stops" in s, timeout=30)
        assert "Consume Diff Total: 80" in screen and "TopicTest" in screen
        term.send("\x03")
        assert term.wait(timeout=15) == 130
