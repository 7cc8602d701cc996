"""Resets with consumers online: "verified" means the consumers took the new offsets.

A push consumer that takes a pushed reset and re-consumes past the plan before the read-back is a
success (not "read back 250, expected 124"); one that never takes it is a failure; a pull consumer
that keeps its own offsets is warned about before, and caught undoing the change after its commit
interval. Consumers are scripted over mqadmin's own remoting client (tests/support).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mqadmin.commands._reset as reset_module
import pytest
from mqadmin.commands._broker_offsets import BrokerOffsets

from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.output import Env
from tests.support.scripted_consumer import ScriptedConsumer

pytestmark = pytest.mark.integration

TOPIC, START, END = "T", 1_700_000_000_000, 1_700_000_800_000
#: before the first message: every queue re-delivers everything (10 -> 0)
EARLY = str(START - 1000)


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reset_module, "PUSH_VERIFY_TIMEOUT_S", 6.0)
    monkeypatch.setattr(reset_module, "COMMIT_WAIT_S", 1.5)


def serve(root: Path, version: str) -> Iterator[MockServer]:
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version=version)
    fill_topic(cluster, TOPIC, 80, START, END)
    cluster.flush()
    with MockServer(cluster, namesrv_port=0) as server:
        yield server


@pytest.fixture(scope="module")
def server4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServer]:
    yield from serve(tmp_path_factory.mktemp("online4") / "store", "4.9.8")


@pytest.fixture(scope="module")
def server5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServer]:
    yield from serve(tmp_path_factory.mktemp("online5") / "store", "5.3.3")


def group_at_end(server: MockServer, group: str) -> None:
    """A fresh group that consumed everything (offset 10 on every queue)."""
    with server.lock:
        for broker in server.cluster.brokers.values():
            commit_at_time(broker, group, TOPIC, None)


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def reset(server: MockServer, group: str, *extra: str) -> tuple[int, Any, str]:
    args = ["resetOffsetByTime", "-n", server.namesrv_addr, "-g", group, "-t", TOPIC, "-s", EARLY, "--yes"]
    return cli(*args, "--json", *extra)


def test_push_consumer_that_took_the_reset_and_moved_on_is_a_success(server4: MockServer) -> None:
    group_at_end(server4, "took")
    delays = {"broker-a": 0.3, "broker-b": 2.5}  # broker-a's queues move on while we wait for broker-b's
    with ScriptedConsumer(server4.namesrv_addr, "took", TOPIC, kind="push", apply_delay_s=delays, hold_s=1.0) as c:
        code, doc, err = reset(server4, "took", "--no-wait")
        assert c.resets, "the broker pushed the reset to the consumer"
    assert code == 0, err
    assert all("pushed to the online consumers" in m for m in doc["method"].values())
    assert doc["verified"] == doc["planned"] == 8
    # the consumer re-consumed to the end before we finished looking, and that is what we say
    outcomes = {(q["broker"], q["detail"]) for q in doc["queues"]}
    assert outcomes == {("broker-a", "applied (taken by the consumers, now at 10)"), ("broker-b", "applied")}
    assert all(q["new_offset"] == 0 for q in doc["queues"])


def test_push_consumer_that_never_takes_the_reset_is_a_failure(server4: MockServer) -> None:
    group_at_end(server4, "deaf")
    with ScriptedConsumer(server4.namesrv_addr, "deaf", TOPIC, kind="push", apply_delay_s=60) as c:
        code, doc, err = reset(server4, "deaf", "--no-wait")
        assert c.resets
    assert code == 1
    assert {q["outcome"] for q in doc["queues"]} == {"unchanged"} and doc["verified"] == 0
    assert "restore with: mqadmin restoreOffset" in err


def test_pull_consumer_is_warned_about_and_caught_undoing_a_direct_write(server4: MockServer) -> None:
    """A pull consumer keeps its offsets and commits them back: restoreOffset writes directly on a
    4.x broker, reads back right (applied), and after the commit interval finds it undone."""
    group_at_end(server4, "lite")
    code, doc, err = cli(
        "resetOffsetByTime", "-n", server4.namesrv_addr, "-g", "lite", "-t", TOPIC, "-s", EARLY, "--yes", "--json"
    )
    assert code == 0, err  # nobody online yet: a direct update, offsets now 0
    with ScriptedConsumer(
        server4.namesrv_addr, "lite", TOPIC, kind="pull", client_id="10.0.0.9@lite", commit_interval_s=0.3
    ):
        code, back, err = cli("restoreOffset", "--from", doc["backup"], "--yes", "--json")
    assert "pull consumers online (10.0.0.9@lite)" in err and "waiting 2 s" in err
    assert code == 1
    undone = [q for q in back["queues"] if q["outcome"].startswith("undone")]
    assert undone and all("committed by 10.0.0.9@lite" in q["detail"] for q in undone)
    assert back["verified"] == 8 - len(undone)


def test_no_wait_skips_the_second_read_back(server4: MockServer) -> None:
    group_at_end(server4, "lite2")
    code, doc, err = cli(
        "resetOffsetByTime", "-n", server4.namesrv_addr, "-g", "lite2", "-t", TOPIC, "-s", EARLY, "--yes", "--json"
    )
    assert code == 0, err
    with ScriptedConsumer(server4.namesrv_addr, "lite2", TOPIC, kind="pull", commit_interval_s=5):
        code, back, err = cli("restoreOffset", "--from", doc["backup"], "--yes", "--json", "--no-wait")
    assert code == 0, err
    assert "waiting" not in err and back["verified"] == 8


def test_five_x_server_side_reset_with_a_push_consumer_online(server5: MockServer) -> None:
    group_at_end(server5, "took5")
    with ScriptedConsumer(server5.namesrv_addr, "took5", TOPIC, kind="push"):
        code, doc, err = reset(server5, "took5")
    assert code == 0, err
    assert all("server-side" in m for m in doc["method"].values()) and doc["verified"] == 8


def test_five_x_server_side_reset_with_a_pop_consumer_acking(
    server5: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A POP group at work takes a server-side reset at its next pop and acks on from it at once:
    the read-back finds it past the plan (0) but short of where it was (10). That is the reset
    taken, not a queue that "moved" and failed the run. (The read-back waits a moment here, as a
    busy network makes it, so that the consumer is seen midway.)"""
    read_back = BrokerOffsets._watch

    def late_read_back(self: BrokerOffsets, result: Any) -> Any:
        time.sleep(0.35)
        return read_back(self, result)

    monkeypatch.setattr(BrokerOffsets, "_watch", late_read_back)
    group_at_end(server5, "pop5")
    with ScriptedConsumer(server5.namesrv_addr, "pop5", TOPIC, kind="pop", acks_every_s=0.1):
        code, doc, err = reset(server5, "pop5")
    assert code == 0, err
    assert all("server-side" in m for m in doc["method"].values()) and doc["verified"] == 8
    assert {q["outcome"] for q in doc["queues"]} == {"applied"}
    taken = [q for q in doc["queues"] if "taken by the consumers, now at" in q["detail"]]
    assert len(taken) == 8, [q["detail"] for q in doc["queues"]]
