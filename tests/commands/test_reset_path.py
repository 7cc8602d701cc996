"""The reset path follows the broker's settings (useServerSideResetOffset), not its version alone.

A served mock 5.5.1 with ``useServerSideResetOffset=false`` behaves as a 4.x broker does: it
pushes a time to the online consumers and answers CONSUMER_NOT_ONLINE without them. Offline,
every reset is written directly; online, a plan by time is pushed, and a plan of exact offsets
(which no time expresses) is refused before anything moves.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mqadmin.commands._reset as reset_module
import pytest
from mqadmin.commands._plan import Method

from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.model import BrokerInfo, MessageQueue
from mqadmin.output import Env
from mqadmin.protocol import versions
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.remoting import replies
from mqadmin.remoting.backend import RemotingAdmin
from tests.support.scripted_consumer import ScriptedConsumer

pytestmark = pytest.mark.integration

TOPIC, START, END = "T", 1_700_000_000_000, 1_700_000_800_000
EARLY = str(START - 1000)
OFF = {versions.SERVER_SIDE_RESET_KEY: "false"}


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reset_module, "PUSH_VERIFY_TIMEOUT_S", 6.0)
    monkeypatch.setattr(reset_module, "COMMIT_WAIT_S", 1.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServer]:
    root = tmp_path_factory.mktemp("pushonly") / "store"
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version="5.5.1", broker_config=OFF)
    fill_topic(cluster, TOPIC, 80, START, END)
    cluster.flush()
    with MockServer(cluster, namesrv_port=0) as served:
        yield served


def at_end(server: MockServer, group: str) -> None:
    with server.lock:
        for broker in server.cluster.brokers.values():
            commit_at_time(broker, group, TOPIC, None)


def offsets(server: MockServer, group: str) -> dict[tuple[str, int], int]:
    admin = RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        return {
            (mq.broker_name, mq.queue_id): admin.consumer_offset(group, mq) or 0
            for mq in admin.topic_route(TOPIC).message_queues()
        }
    finally:
        admin.close()


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def reset(server: MockServer, group: str, *extra: str) -> tuple[int, Any, str]:
    return cli("resetOffsetByTime", "-n", server.namesrv_addr, "-g", group, "-t", TOPIC, "--yes", "--json", *extra)


def test_the_setting_decides_not_the_version() -> None:
    assert not versions.resets_on_broker("5.5.1", OFF)
    assert versions.resets_on_broker("5.1.4", {versions.SERVER_SIDE_RESET_KEY: "true"})
    assert not versions.resets_on_broker("5.3.3", {"brokerName": "a"})  # a broker without the setting
    assert versions.resets_on_broker("5.3.3", None) and not versions.resets_on_broker("4.9.7", None)
    assert BrokerInfo("a", "x", "c", "5.5.1", OFF).server_side_reset is False
    reply = RemotingCommand(code=0, body=b"brokerName=a\nuseServerSideResetOffset = false\n#x=y\n")
    assert replies.broker_config(reply) == {"brokerName": "a", "useServerSideResetOffset": "false"}
    assert replies.broker_config(RemotingCommand(code=1, body=b"")) is None


def test_the_client_reads_the_setting_over_the_wire(server: MockServer) -> None:
    admin = RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        infos = admin.cluster_brokers()
    finally:
        admin.close()
    assert [(i.version, i.server_side_reset) for i in infos] == [("5.5.1", False)] * 2
    assert all(i.config is not None and i.config["useServerSideResetOffset"] == "false" for i in infos)


@pytest.mark.parametrize(
    ("group", "args", "want"),
    [
        ("off_earliest", ("--to-earliest",), 0),
        ("off_time", ("-s", EARLY), 0),
        ("off_shift", ("--shift-by", "-3"), 7),
        ("off_offset", ("--to-offset", "4"), 4),
    ],
)
def test_offline_resets_are_written_directly(server: MockServer, group: str, args: tuple[str, ...], want: int) -> None:
    at_end(server, group)
    code, doc, err = reset(server, group, *args)
    assert code == 0, err
    assert all(m.startswith("direct offset update") for m in doc["method"].values()), doc["method"]
    assert doc["verified"] == 8 and set(offsets(server, group).values()) == {want}


def test_offline_skip_and_restore_and_clone(server: MockServer) -> None:
    at_end(server, "off_skip")
    code, doc, err = reset(server, "off_skip", "--to-earliest")
    assert code == 0, err
    code, back, err = cli("restoreOffset", "--from", doc["backup"], "--yes", "--json")
    assert code == 0, err
    assert set(offsets(server, "off_skip").values()) == {10}
    code, _, err = reset(server, "off_skip", "--to-earliest")
    assert code == 0, err
    code, skip, err = cli("skipAccumulatedMessage", "-n", server.namesrv_addr, "-g", "off_skip", "-t", TOPIC, "--yes")
    assert code == 0, err
    assert set(offsets(server, "off_skip").values()) == {10}
    with server.lock:
        for broker in server.cluster.brokers.values():
            broker.ensure_group("off_clone")
    code, _, err = cli(
        "cloneGroupOffset", "-n", server.namesrv_addr, "-s", "off_skip", "-d", "off_clone", "-t", TOPIC, "--yes"
    )
    assert code == 0, err
    assert set(offsets(server, "off_clone").values()) == {10}


@pytest.mark.parametrize(
    "args", [("--shift-by", "-2"), ("--to-offset", "3"), ("--to-earliest",), ("-b", "broker-a", "-q", "0", "-o", "1")]
)
def test_exact_offsets_with_push_consumers_online_are_refused(server: MockServer, args: tuple[str, ...]) -> None:
    """Before the fix a 5.5.1 broker was sent timestamp 0 and pushed "reset to 0" to the consumers."""
    group = "on_exact"
    at_end(server, group)
    extra = ("-s", EARLY) if "-o" in args else ()
    with ScriptedConsumer(server.namesrv_addr, group, TOPIC, kind="push") as consumer:
        code, _, err = reset(server, group, *extra, *args)
        assert not consumer.resets, "nothing was pushed"
    assert code == 2, err
    assert "useServerSideResetOffset=false" in err and "nothing was changed" in err
    assert set(offsets(server, group).values()) == {10}


def test_restore_with_push_consumers_online_is_refused(server: MockServer) -> None:
    at_end(server, "on_restore")
    code, doc, err = reset(server, "on_restore", "--to-earliest")
    assert code == 0, err
    with ScriptedConsumer(server.namesrv_addr, "on_restore", TOPIC, kind="push") as consumer:
        code, _, err = cli("restoreOffset", "--from", doc["backup"], "--yes")
        assert not consumer.resets
    assert code == 2 and "useServerSideResetOffset=false" in err, err
    assert set(offsets(server, "on_restore").values()) == {0}


def test_a_time_is_pushed_to_the_online_consumers(server: MockServer) -> None:
    at_end(server, "on_time")
    with ScriptedConsumer(server.namesrv_addr, "on_time", TOPIC, kind="push") as consumer:
        code, doc, err = reset(server, "on_time", "-s", EARLY, "--no-wait")
        assert consumer.resets, "the broker pushed the reset"
    assert code == 0, err
    assert all("pushed to the online consumers" in m for m in doc["method"].values())
    assert doc["verified"] == 8
    pushed = {mq: off for table in consumer.resets for mq, off in table.items()}
    assert set(pushed.values()) == {0} and MessageQueue(TOPIC, "broker-a", 0) in pushed


def test_skip_is_pushed_as_the_max_offset(server: MockServer) -> None:
    at_end(server, "on_skip")
    code, _, err = reset(server, "on_skip", "--to-earliest")
    assert code == 0, err
    with ScriptedConsumer(server.namesrv_addr, "on_skip", TOPIC, kind="push") as consumer:
        code, _, err = cli(
            "skipAccumulatedMessage", "-n", server.namesrv_addr, "-g", "on_skip", "-t", TOPIC, "--yes", "--no-wait"
        )
        assert consumer.resets
    assert code == 0, err
    assert set(offsets(server, "on_skip").values()) == {10}


def test_the_default_5x_broker_still_resets_on_the_broker(tmp_path: Path) -> None:
    cluster = MockCluster.create(tmp_path / "s", ("broker-a",), version="5.5.1")
    try:
        assert cluster.brokers["broker-a"].server_side_reset
        assert cluster.brokers["broker-a"].broker_config()["useServerSideResetOffset"] == "true"
    finally:
        cluster.close()


def _info(**config: str) -> BrokerInfo:
    return BrokerInfo("broker-a", "127.0.0.1:10911", "c", "5.5.1", {"useServerSideResetOffset": "true", **config})


def test_the_offset_store_decides_the_path_and_the_durability_line() -> None:
    from mqadmin.commands import _reset_path as rp

    file, rocks, v2 = _info(), _info(storeType="defaultRocksDB"), _info(configManagerVersion="v2")
    assert [rp.offset_store(i) for i in (file, rocks, v2)] == ["file", "rocksdb", "v2"]
    assert rp.offset_store(BrokerInfo("b", "", "c", "5.5.1")) is None
    # v2 loses a broker-side reset on restart: nobody online -> direct updates, which it stores
    assert rp.broker_path(v2, None) == "direct" and rp.broker_path(file, None) == "broker"
    assert (
        rp.broker_path(rocks, None) == "broker"
        and rp.broker_path(_info(useServerSideResetOffset="false"), None) == "push"
    )
    line = rp.durability_line({"broker-a": file}, {"broker-a": Method.SERVER_SIDE})
    assert "consumerOffset.json every flushConsumerOffsetInterval (5000 ms)" in line and "crash" in line
    lmq = _info(enableLmq="true")  # lite topics on: every offset goes to another file
    line = rp.durability_line({"broker-a": lmq}, {"broker-a": Method.SERVER_SIDE})
    assert "config/lmqConsumerOffset.json every" in line
    line = rp.durability_line({"broker-a": rocks}, {"broker-a": Method.SERVER_SIDE})
    assert "RocksDB offset store (storeType=defaultRocksDB)" in line
    line = rp.durability_line({"broker-a": v2}, {"broker-a": Method.DIRECT})
    assert "as it was applied" in line and "crash" not in line
    line = rp.durability_line({"broker-a": v2}, {"broker-a": Method.SERVER_SIDE})
    assert "in memory only" in line and "loses this change" in line
