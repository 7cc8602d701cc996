"""Every reset-family command on a real 5.5.1 broker run with ``useServerSideResetOffset=false``.

Such a broker behaves as 4.x does: it pushes a time to the online consumers and answers
CONSUMER_NOT_ONLINE without them. mqadmin reads the setting (GET_BROKER_CONFIG) rather than
guessing from the version: offline, every command writes the offsets directly; online (the
official client's push consumer), a reset by time is pushed and verified, and a plan of exact
offsets is refused before anything moves (it was once sent as timestamp 0, rewinding every queue).
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
from tests.support.shared_clusters import send_numbered

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

VERSION = "5.5.1"
TOPIC, COUNT, QUEUES = "PushOnlyTopic", 40, 4
PER_QUEUE = COUNT // QUEUES


@pytest.fixture(scope="module")
def real(shared_cluster: Callable[[str], rb.RealCluster]) -> Iterator[tuple[str, int]]:
    """(namesrv, ms before the first message) of the shared 5.5.1 cluster with the setting off
    (updateBrokerConfig takes it at once) and this module's topic on broker-a only."""
    cluster = shared_cluster(VERSION)
    broker_a = cluster.broker_addrs[0]
    for addr in cluster.broker_addrs:
        rb.update_broker_config(addr, {"useServerSideResetOffset": False})
    try:
        rb.create_topic(broker_a, TOPIC, QUEUES)
        yield cluster.namesrv_addr, send_numbered(cluster.namesrv_addr, TOPIC, COUNT)
    finally:
        for addr in cluster.broker_addrs:
            rb.update_broker_config(addr, {"useServerSideResetOffset": True})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    return tmp_path


def cli(*args: str) -> tuple[int, Any, str]:
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


def group_at(namesrv: str, group: str, offset: int) -> None:
    """A subscription group (as updateSubGroup makes it) with ``offset`` on every queue."""
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        queues = admin.topic_route(TOPIC).message_queues()
        for addr in {admin._broker_addr(mq.broker_name) for mq in queues}:
            rb.create_group(addr, group)
        for mq in queues:
            admin.update_consumer_offset(group, mq, offset)
    finally:
        admin.close()


def test_the_broker_says_it_pushes(real: tuple[str, int]) -> None:
    admin = RemotingAdmin(real[0], timeout=10)
    try:
        infos = admin.cluster_brokers()
    finally:
        admin.close()
    for info in infos:
        assert info.version == VERSION and info.config is not None
        assert info.config["useServerSideResetOffset"] == "false" and not info.server_side_reset


def test_every_command_offline_writes_directly(real: tuple[str, int], home: Path) -> None:
    """Before the fix: CONSUMER_NOT_ONLINE, exit 1, nothing changed (the broker was asked for a
    server-side reset it does not do)."""
    namesrv, before = real
    group = "G_off"
    group_at(namesrv, group, PER_QUEUE)
    base = ["resetOffsetByTime", "-n", namesrv, "-g", group, "-t", TOPIC, "--yes"]
    steps: list[tuple[list[str], int]] = [
        ([*base, "--to-earliest"], 0),
        ([*base, "--to-latest"], PER_QUEUE),
        ([*base, "-s", str(before)], 0),
        ([*base, "--shift-by", "3"], 3),
        ([*base, "--to-offset", "7"], 7),
        (["skipAccumulatedMessage", "-n", namesrv, "-g", group, "-t", TOPIC, "--yes"], PER_QUEUE),
    ]
    backup = ""
    for args, want in steps:
        code, doc, err = cli(*args)
        assert code == 0, (args, err)
        assert all(m.startswith("direct offset update") for m in doc["method"].values()), (args, doc["method"])
        assert doc["verified"] == QUEUES and set(committed(namesrv, group).values()) == {want}, args
        backup = backup or doc["backup"]
    code, doc, err = cli("restoreOffset", "--from", backup, "--yes")  # the first backup: every queue at the end
    assert code == 0, err
    assert set(committed(namesrv, group).values()) == {PER_QUEUE}
    group_at(namesrv, "G_off_green", 0)
    code, doc, err = cli("cloneGroupOffset", "-n", namesrv, "-s", group, "-d", "G_off_green", "-t", TOPIC, "--yes")
    assert code == 0, err
    assert set(committed(namesrv, "G_off_green").values()) == {PER_QUEUE}


def test_online_exact_plans_are_refused_and_a_time_is_pushed(real: tuple[str, int], home: Path) -> None:
    """Before the fix, --shift-by -3 sent timestamp 0: every queue went to 0 (all 40 messages
    re-delivered instead of 12) and the command said "unchanged", exit 1."""
    namesrv, before = real
    group = "G_on"
    group_at(namesrv, group, 0)
    official_client.ensure_all()
    with official_client.push_consumer(namesrv, group, TOPIC, workdir=home / "consumer") as consumer:
        consumer.wait_for_messages(COUNT, timeout=60)
        deadline = time.monotonic() + 30
        while set(committed(namesrv, group).values()) != {PER_QUEUE} and time.monotonic() < deadline:
            time.sleep(0.5)
        assert set(committed(namesrv, group).values()) == {PER_QUEUE}
        base = ["resetOffsetByTime", "-n", namesrv, "-g", group, "-t", TOPIC, "--yes"]
        code, doc, err = cli(*base, "-s", str(before), "--no-wait")
        assert code == 0, err
        assert all("pushed to the online consumers" in m for m in doc["method"].values()), doc["method"]
        assert doc["verified"] == QUEUES
        # the C++ client commits the pushed offsets and stays there (it does not re-pull from them)
        time.sleep(2)
        now = committed(namesrv, group)
        delivered = len(consumer.messages)
        plan = home / "plan.csv"  # a hand-edited plan: every queue back to 5
        plan.write_text(
            "group,topic,broker,queue,offset\n" + "".join(f"{group},{TOPIC},broker-a,{q},5\n" for q in range(QUEUES))
        )
        group_at(namesrv, "G_src", 5)
        refused = [
            [*base, "--shift-by", "3"],
            [*base, "--to-offset", "2"],
            [*base, "--to-latest"],
            [*base, "-s", str(before), "-b", "broker-a", "-q", "0", "-o", "6"],
            ["restoreOffset", "--from", str(plan), "-n", namesrv, "--yes"],
            ["cloneGroupOffset", "-n", namesrv, "-s", "G_src", "-d", group, "-t", TOPIC, "--yes", "--while-online"],
        ]
        for args in refused:
            code, _, err = cli(*args)
            assert code == 2, (args, err)
            assert "useServerSideResetOffset=false" in err and "nothing was changed" in err, (args, err)
        time.sleep(1)
        assert committed(namesrv, group) == now
        assert len(consumer.messages) == delivered, "nothing more was re-delivered"
