"""Real clusters beyond one master (``topology`` marker): master + slave with the master stopped,
and a broker whose retention has really deleted old files.

Each topology is one 4.9.7 cluster for the module; tests run in file order and build on it
(the master is stopped once, halfway).  Our CLI runs as a subprocess here, because what it says
about a slave goes to stderr as a warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqadmin.model import Message
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.topology]

VERSION = "4.9.7"
WAIT = 40.0  # a 4.9 slave copies the master's offsets every 10 s


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.stdout)  # type: ignore[no-any-return]


def run(cluster: rb.RealCluster, home: Path, *args: str) -> Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MQADMIN_", "NAMESRV_"))}
    env |= {"MQADMIN_HOME": str(home), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mqadmin", *args, "-n", cluster.namesrv_addr, "--timeout", "10"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _send(cluster: rb.RealCluster, topic: str, count: int, body: bytes = b"") -> None:
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        for i in range(count):
            admin.send(topic, Message(topic, body or f"m{i}".encode(), {"TAGS": "a"}))
    finally:
        admin.close()


def _offset_on(addr: str, group: str, topic: str, queue_id: int) -> int | None:
    head, _ = rb.remoting_call(
        addr, rb.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id}
    )
    return int(head["extFields"]["offset"]) if head.get("code") == 0 else None


GET_MAX_OFFSET = 30


def _max_on(addr: str, topic: str, queue_id: int) -> int | None:
    head, _ = rb.remoting_call(addr, GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    return int(head["extFields"]["offset"]) if head.get("code") == 0 else None


# ---------------------------------------------------------------------------------------------
# Master + slave, then the master stopped

MS_TOPIC = "MsTopic"
MS_GROUP = "MsGroup"
MS_QUEUES = 2
MS_PER_QUEUE = 5
MS_COMMITTED = 2


@dataclass
class MasterSlave:
    cluster: rb.RealCluster
    home: Path
    before: dict  # type: ignore[type-arg]  # consumerProgress -g JSON with the master up


@pytest.fixture(scope="module")
def ms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterSlave]:
    workdir = tmp_path_factory.mktemp("master-slave")
    with rb.RealCluster(VERSION, workdir / "rmq", slaves=True) as cluster:
        cluster.create_topic(MS_TOPIC, MS_QUEUES)
        cluster.create_topic(f"%RETRY%{MS_GROUP}", 1)  # Java's consumerProgress -g needs its route
        cluster.create_group(MS_GROUP)
        _send(cluster, MS_TOPIC, MS_QUEUES * MS_PER_QUEUE)
        for q in range(MS_QUEUES):
            cluster.commit_offset("broker-a", MS_GROUP, MS_TOPIC, q, MS_COMMITTED)
        ((_, slave_addr),) = cluster.slaves
        deadline = time.monotonic() + WAIT
        while any(
            _offset_on(slave_addr, MS_GROUP, MS_TOPIC, q) != MS_COMMITTED
            or _max_on(slave_addr, MS_TOPIC, q) != MS_PER_QUEUE
            for q in range(MS_QUEUES)
        ):
            assert time.monotonic() < deadline, "the slave never caught up with the master's messages and offsets"
            time.sleep(1)
        home = workdir / "home"
        before = run(cluster, home, "consumerProgress", "-g", MS_GROUP, "--json")
        assert before.code == 0, before.stderr
        assert "slave" not in before.stderr
        cluster.stop_broker("broker-a", 0)
        yield MasterSlave(cluster, home, before.json())


def _progress_rows(doc: dict) -> list[tuple[str, int, int, int]]:  # type: ignore[type-arg]
    return [(q["topic"], q["queue_id"], q["broker_offset"], q["consumer_offset"]) for q in doc["queues"]]


def test_master_stopped_reads_come_from_the_slave_and_say_so(ms: MasterSlave, tmp_path: Path) -> None:
    res = run(ms.cluster, ms.home, "consumerProgress", "-g", MS_GROUP, "--json")
    assert res.code == 0, res.stderr
    assert _progress_rows(res.json()) == _progress_rows(ms.before)
    assert res.json()["diff_total"] == ms.before["diff_total"] == (MS_PER_QUEUE - MS_COMMITTED) * MS_QUEUES
    assert "broker-a: master not online, reading from its slave" in res.stderr

    res = run(ms.cluster, ms.home, "queryOffset", "-t", MS_TOPIC, "-g", MS_GROUP, "-s", "-1h", "--json")
    assert res.code == 0, res.stderr
    assert [
        (q["min_offset"], q["max_offset"], q["consumer_offset"], q["offset_at_time"]) for q in res.json()["queues"]
    ] == [(0, MS_PER_QUEUE, MS_COMMITTED, 0)] * MS_QUEUES
    assert "reading from its slave" in res.stderr

    res = run(ms.cluster, ms.home, "consumerProgress", "--json")
    assert res.code == 0, res.stderr
    (row,) = [g for g in res.json()["groups"] if g["group"] == MS_GROUP]
    assert row["diff_total"] == (MS_PER_QUEUE - MS_COMMITTED) * MS_QUEUES

    dest = tmp_path / "r.jsonl"
    res = run(ms.cluster, ms.home, "rangeReplay", "-t", MS_TOPIC, "-b", "-1h", "--to", f"jsonl:{dest}", "--json")
    assert res.code == 0, res.stderr
    assert res.json()["written"] == MS_QUEUES * MS_PER_QUEUE


def test_master_stopped_java_tool_reads_the_slave_too(ms: MasterSlave) -> None:
    """The Java tool's consumerProgress -g answers from the slave as well (selectBrokerAddr),
    with the same numbers and without saying so."""
    out = ms.cluster.mqadmin("consumerProgress", "-g", MS_GROUP).stdout
    rows = {
        int(c[2]): (int(c[3]), int(c[4]))
        for c in (line.split() for line in out.splitlines())
        if c[:2] == [MS_TOPIC, "broker-a"]
    }
    assert rows == {q: (MS_PER_QUEUE, MS_COMMITTED) for q in range(MS_QUEUES)}, out


def test_master_stopped_resets_refuse(ms: MasterSlave, tmp_path: Path) -> None:
    """A slave would accept an offset update, and the master's copy would overwrite it when it
    is back: the reset would be lost silently, so we refuse."""
    backup = tmp_path / "b.json"
    res = run(
        ms.cluster,
        ms.home,
        "resetOffsetByTime",
        "-g",
        MS_GROUP,
        "-t",
        MS_TOPIC,
        "-s",
        "-1h",
        "--yes",
        "--backup",
        str(backup),
    )
    assert res.code == 1, (res.stdout, res.stderr)
    # the plan's footer says why; the offsets on the slave did not move
    assert "FAILED broker-a: broker-a has no master online" in res.stdout, res.stdout
    assert "offsets live on the master" in res.stdout
    assert res.stderr.count("reading from its slave") == 1, res.stderr
    assert "Traceback" not in res.stderr
    ((_, slave_addr),) = ms.cluster.slaves
    assert [_offset_on(slave_addr, MS_GROUP, MS_TOPIC, q) for q in range(MS_QUEUES)] == [MS_COMMITTED] * MS_QUEUES

    # a backup with other offsets (as an earlier reset would have left) is refused the same way
    doc = json.loads(backup.read_text())
    for row in doc["offsets"]:
        row["offset"] = 0
    backup.write_text(json.dumps(doc))
    res = run(ms.cluster, ms.home, "restoreOffset", "--from", str(backup), "--yes")
    assert res.code == 1 and "broker-a has no master online" in res.stdout, (res.stdout, res.stderr)
    assert [_offset_on(slave_addr, MS_GROUP, MS_TOPIC, q) for q in range(MS_QUEUES)] == [MS_COMMITTED] * MS_QUEUES
