"""Resets with consumers online against a real Apache RocketMQ 4.9.7.

A push consumer (the official C++ client peer) takes a pushed reset: the command says verified
and exits 0, also after waiting out the commit interval. A pull-style client that commits the
offsets it keeps itself (scripted over mqadmin's remoting client) is warned about before, and
caught undoing a direct write after its commit interval: exit 1, naming it.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import official_client
from tests.support import realbroker as rb
from tests.support.scripted_consumer import ScriptedConsumer
from tests.support.shared_clusters import send_numbered

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

VERSION = "4.9.7"
TOPIC, COUNT = "OnlineTopic", 40


@pytest.fixture(scope="module")
def real4(shared_cluster: Callable[[str], rb.RealCluster]) -> Iterator[tuple[str, int]]:
    """COUNT messages on 4 queues of the first broker of the shared 4.9.7 cluster; (namesrv, ms
    before the first message)."""
    cluster = shared_cluster(VERSION)
    c = cluster.cluster_name
    cluster.mqadmin("updateTopic", "-b", cluster.broker_addrs[0], "-t", TOPIC, "-r", "4", "-w", "4")
    for group in ("push_group", "pull_group", "deaf_group"):
        cluster.mqadmin("updateSubGroup", "-c", c, "-g", group)
    yield cluster.namesrv_addr, send_numbered(cluster.namesrv_addr, TOPIC, COUNT)


def cli(home: Path, *args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*args, "--json"], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def committed(namesrv: str, group: str) -> dict[int, int | None]:
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        return {mq.queue_id: admin.consumer_offset(group, mq) for mq in admin.topic_route(TOPIC).message_queues()}
    finally:
        admin.close()


def test_push_consumer_takes_the_pushed_reset_and_it_is_verified(
    real4: tuple[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namesrv, before = real4
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    official_client.ensure_all()
    with official_client.push_consumer(namesrv, "push_group", TOPIC, workdir=tmp_path / "consumer") as consumer:
        consumer.wait_for_messages(COUNT, timeout=60)
        deadline = time.monotonic() + 30
        while set(committed(namesrv, "push_group").values()) != {COUNT // 4} and time.monotonic() < deadline:
            time.sleep(0.5)
        assert set(committed(namesrv, "push_group").values()) == {COUNT // 4}
        args = ["resetOffsetByTime", "-n", namesrv, "-g", "push_group", "-t", TOPIC, "-s", str(before), "--yes"]
        code, doc, err = cli(tmp_path, *args)
    assert code == 0, err
    assert all("pushed to the online consumers" in m for m in doc["method"].values()), doc["method"]
    assert doc["verified"] == doc["planned"] == 4
    assert all(q["outcome"] == "applied" for q in doc["queues"])
    assert "waiting 6 s" in err  # read back again after the commit interval: nothing undone


def test_pull_client_that_commits_its_own_offsets_is_caught_undoing(
    real4: tuple[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namesrv, before = real4
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        for mq in admin.topic_route(TOPIC).message_queues():
            admin.update_consumer_offset("pull_group", mq, COUNT // 4)
    finally:
        admin.close()
    with ScriptedConsumer(namesrv, "pull_group", TOPIC, kind="pull", client_id="10.9.9.9@lite", commit_interval_s=1):
        args = ["resetOffsetByTime", "-n", namesrv, "-g", "pull_group", "-t", TOPIC, "-s", str(before), "--yes"]
        code, doc, err = cli(tmp_path, *args, "-b", "broker-a", "-q", "0", "-o", "0")
    assert "pull consumers online (10.9.9.9@lite)" in err
    assert code == 1, err
    (q,) = doc["queues"]
    assert q["outcome"] == "undone" and q["detail"] == f"undone: at {COUNT // 4} (committed by 10.9.9.9@lite)"
    assert committed(namesrv, "pull_group")[0] == COUNT // 4


def test_push_consumer_that_never_takes_the_reset_is_a_failure(
    real4: tuple[str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other direction: the broker pushed, the consumer never applied it; no false success."""
    import mqadmin.commands._reset as reset_module

    namesrv, before = real4
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(reset_module, "PUSH_VERIFY_TIMEOUT_S", 4.0)
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        for mq in admin.topic_route(TOPIC).message_queues():
            admin.update_consumer_offset("deaf_group", mq, COUNT // 4)
    finally:
        admin.close()
    with ScriptedConsumer(namesrv, "deaf_group", TOPIC, kind="push", apply_delay_s=120) as consumer:
        args = ["resetOffsetByTime", "-n", namesrv, "-g", "deaf_group", "-t", TOPIC, "-s", str(before), "--yes"]
        code, doc, err = cli(tmp_path, *args, "--no-wait")
        assert consumer.resets, "the broker pushed the reset"
    assert code == 1
    assert all("pushed to the online consumers" in m for m in doc["method"].values())
    assert {q["outcome"] for q in doc["queues"]} == {"unchanged"} and doc["verified"] == 0
    assert set(committed(namesrv, "deaf_group").values()) == {COUNT // 4}
