"""A broker the cluster routed recently and does not route now: named on every command, resets
refused unless --partial (the name server drops a crashed broker at once, and every answer then
covers only the live ones)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin import seen
from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.output import Env

TOPIC, START, END = "T", 1_700_000_000_000, 1_700_000_800_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServer]:
    cluster = MockCluster.create(tmp_path_factory.mktemp("vanished") / "store", ("broker-a", "broker-b"))
    fill_topic(cluster, TOPIC, 80, START, END)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "G", TOPIC, None)
    cluster.flush()
    with MockServer(cluster, namesrv_port=0) as served:
        yield served


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def offsets(server: MockServer) -> set[int]:
    with server.lock:
        return {o for b in server.cluster.brokers.values() for o in b.offsets.get(f"{TOPIC}@G", {}).values()}


def test_a_broker_seen_recently_and_gone_now(server: MockServer, mqadmin_home: Path) -> None:
    ns = server.namesrv_addr
    code, _, err = cli("queryOffset", "-n", ns, "-t", TOPIC, "--json")
    assert code == 0 and "missing" not in err, err
    # broker-c was routed by this name server ten minutes ago (as if it crashed since)
    seen.compare_and_record(ns, {"broker-c": "127.0.0.1:1"}, int(time.time() * 1000) - 600_000)
    code, _, err = cli("queryOffset", "-n", ns, "-t", TOPIC, "--json")
    assert code == 0, err
    assert "broker broker-c (127.0.0.1:1, seen 10 min ago) is missing from the route" in err
    code, _, err = cli("consumerProgress", "-n", ns, "-g", "G", "--json")
    assert code == 0 and "broker-c" in err, err

    reset = ("resetOffsetByTime", "-n", ns, "-g", "G", "-t", TOPIC, "--to-earliest", "--yes", "--json")
    code, _, err = cli(*reset)
    assert code == 2, err
    assert "--partial" in err and "nothing was changed" in err
    assert offsets(server) == {10}
    code, doc, err = cli(*reset, "--partial")
    assert code == 0, err
    assert doc["verified"] == 8 and offsets(server) == {0}


def test_a_replay_without_a_vanished_broker_is_incomplete(server: MockServer, tmp_path: Path) -> None:
    ns = server.namesrv_addr
    seen.compare_and_record(ns, {"broker-c": "127.0.0.1:1"}, int(time.time() * 1000) - 60_000)
    replay = ("rangeReplay", "-n", ns, "-t", TOPIC, "--begin", str(START), "--end", str(END + 1), "--json")
    code, _, err = cli(*replay, "--to", f"jsonl:{tmp_path / 'a.jsonl'}")
    assert code == 1 and "broker-c did not answer (missing from the route: 127.0.0.1:1, seen 1 min ago)" in err, err
    out = tmp_path / "b.jsonl"
    code, doc, err = cli(*replay, "--to", f"jsonl:{out}", "--partial")
    assert code == 0, err
    assert [m["broker"] for m in doc["missing_brokers"]] == ["broker-c"] and len(out.read_text().splitlines()) == 80
