"""Real clusters beyond one master (``topology`` marker): master + slave with the master stopped,
and a broker whose retention has really deleted old files.

Each topology is one 4.9.7 cluster for the module; tests run in file order and build on it
(the master is stopped once, halfway).  Our CLI runs as a subprocess here, because what it says
about a slave goes to stderr as a warning.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqadmin.cli import main
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.topology]

VERSION = "4.9.7"
WAIT = 40.0  # a 4.9 slave copies the master's offsets every 10 s
#: a 5.x slave learns its master's HA address from a name-server registration, then copies
WAIT_5X = 90.0


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.stdout)  # type: ignore[no-any-return]


def run(cluster: rb.RealCluster, home: Path, *args: str, timeout: str = "10") -> Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MQADMIN_", "NAMESRV_"))}
    env |= {"MQADMIN_HOME": str(home), "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mqadmin", *args, "-n", cluster.namesrv_addr, "--timeout", timeout],
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


#: 5.5.1 as well with MQADMIN_RMQ_EXTRA_VERSIONS=1: its master + slave costs ~3 min on two cores,
#: more than the suite can spend (a 5.x slave serves no messages: see the reads test)
MS_VERSIONS = (VERSION, "5.5.1") if rb.EXTRA_VERSIONS else (VERSION,)


@pytest.fixture(scope="module", params=MS_VERSIONS)
def ms(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterSlave]:
    workdir = tmp_path_factory.mktemp("master-slave")
    with rb.RealCluster(request.param, workdir / "rmq", slaves=True) as cluster:
        cluster.create_topic(MS_TOPIC, MS_QUEUES)
        cluster.create_topic(f"%RETRY%{MS_GROUP}", 1)  # Java's consumerProgress -g needs its route
        cluster.create_group(MS_GROUP)
        _send(cluster, MS_TOPIC, MS_QUEUES * MS_PER_QUEUE)
        for q in range(MS_QUEUES):
            cluster.commit_offset("broker-a", MS_GROUP, MS_TOPIC, q, MS_COMMITTED)
        ((_, slave_addr),) = cluster.slaves
        deadline = time.monotonic() + (WAIT if rb.is_v4(request.param) else WAIT_5X)
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
    if not rb.is_v4(ms.cluster.version):
        _five_x_slave_serves_offsets_not_messages(ms, res, tmp_path)
        return
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


def _five_x_slave_serves_offsets_not_messages(ms: MasterSlave, time_search: Result, tmp_path: Path) -> None:
    """A 5.x slave rejects every pull unless slaveReadEnable=true (4.x slaves serve them): what
    needs a message fails, said as that and not as the broker's "system busy"; offsets still read."""
    for res in (
        time_search,
        run(ms.cluster, ms.home, "rangeReplay", "-t", MS_TOPIC, "-b", "-1h", "--to", f"jsonl:{tmp_path / 'r.jsonl'}"),
    ):
        assert res.code == 1 and res.stdout == "", (res.stdout, res.stderr)
        assert "slave that serves no messages (5.x slaves need slaveReadEnable=true)" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and "flow control" not in res.stderr
    res = run(ms.cluster, ms.home, "queryOffset", "-t", MS_TOPIC, "-g", MS_GROUP, "--json")
    assert res.code == 0, res.stderr
    assert [(q["min_offset"], q["max_offset"], q["consumer_offset"]) for q in res.json()["queues"]] == [
        (0, MS_PER_QUEUE, MS_COMMITTED)
    ] * MS_QUEUES
    res = run(ms.cluster, ms.home, "consumerProgress", "--json")
    assert res.code == 0, res.stderr
    (row,) = [g for g in res.json()["groups"] if g["group"] == MS_GROUP]
    assert row["diff_total"] == (MS_PER_QUEUE - MS_COMMITTED) * MS_QUEUES


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
    is back: the reset would be lost silently, so we refuse, before any backup or write."""
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
    # one line says why, naming the broker; nothing was backed up and the slave's offsets did not move
    line = res.stderr.strip().splitlines()[-1]
    assert "broker-a has no master online" in line and "offsets live on the master" in line, res.stderr
    assert res.stdout == "" and not backup.exists()
    assert res.stderr.count("reading from its slave") == 1, res.stderr
    assert "Traceback" not in res.stderr
    ((_, slave_addr),) = ms.cluster.slaves
    assert [_offset_on(slave_addr, MS_GROUP, MS_TOPIC, q) for q in range(MS_QUEUES)] == [MS_COMMITTED] * MS_QUEUES

    # a plan with other offsets (exported: it changes nothing, so it is planned from the slave)
    # is refused the same way by restoreOffset
    plan = tmp_path / "plan.csv"
    res = run(
        ms.cluster, ms.home, "resetOffsetByTime", "-g", MS_GROUP, "-t", MS_TOPIC, "--to-earliest", "--export", str(plan)
    )
    assert res.code == 0 and plan.exists(), (res.stdout, res.stderr)
    res = run(ms.cluster, ms.home, "restoreOffset", "--from", str(plan), "--yes", "--backup", str(backup))
    assert res.code == 1 and "broker-a has no master online" in res.stderr, (res.stdout, res.stderr)
    assert not backup.exists()
    for args in (
        ("skipAccumulatedMessage", "-g", MS_GROUP, "-t", MS_TOPIC),
        ("cloneGroupOffset", "-s", MS_GROUP, "-d", "MsOther", "-t", MS_TOPIC),
    ):
        res = run(ms.cluster, ms.home, *args, "--yes", "--backup", str(backup))
        assert res.code == 1 and "broker-a has no master online" in res.stderr, (args, res.stdout, res.stderr)
        assert not backup.exists(), args
    assert [_offset_on(slave_addr, MS_GROUP, MS_TOPIC, q) for q in range(MS_QUEUES)] == [MS_COMMITTED] * MS_QUEUES


# ---------------------------------------------------------------------------------------------
# Retention has deleted old files

RET_TOPIC = "RetTopic"
RET_GROUP = "RetGroup"
RET_MESSAGES = 300
RET_COMMITTED = 5  # the group's offset, soon below the queue's min offset
#: 64 KiB commit-log files (~55 messages of 1 KiB each), 10-entry consume-queue files, files
#: expire at once (fileReservedTime=0) at any hour (deleteWhen lists all 24).  A 4.9 broker
#: runs its first clean-up 60 s after boot, then every cleanResourceInterval.
RETENTION_CONF = {
    "mappedFileSizeCommitLog": 64 * 1024,
    "mappedFileSizeConsumeQueue": 200,
    "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
    "fileReservedTime": 0,
    "cleanResourceInterval": 1000,
}
RET_WAIT = 150.0


@dataclass
class Retention:
    cluster: rb.RealCluster
    home: Path
    before_first: int  # a time before the first message was sent
    min_offset: int


@pytest.fixture(scope="module")
def ret(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retention]:
    workdir = tmp_path_factory.mktemp("retention")
    with rb.RealCluster(VERSION, workdir / "rmq", extra_broker_conf=RETENTION_CONF) as cluster:
        cluster.create_topic(RET_TOPIC, 1)
        cluster.create_topic(f"%RETRY%{RET_GROUP}", 1)
        cluster.create_group(RET_GROUP)
        before_first = int(time.time() * 1000) - 1000
        _send(cluster, RET_TOPIC, RET_MESSAGES, body=b"x" * 1000)
        cluster.commit_offset("broker-a", RET_GROUP, RET_TOPIC, 0, RET_COMMITTED)
        addr = cluster.broker_addrs[0]
        deadline = time.monotonic() + RET_WAIT
        while (low := _min_on(addr, RET_TOPIC, 0)) in (None, 0):
            assert time.monotonic() < deadline, "retention never deleted the old files"
            time.sleep(1)
        assert low is not None and RET_COMMITTED < low < RET_MESSAGES
        assert len(list((cluster.store_dirs[0] / "commitlog").iterdir())) < RET_MESSAGES * 1000 // (64 * 1024)
        yield Retention(cluster, workdir / "home", before_first, low)


GET_MIN_OFFSET = 31


def _min_on(addr: str, topic: str, queue_id: int) -> int | None:
    head, _ = rb.remoting_call(addr, GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id})
    return int(head["extFields"]["offset"]) if head.get("code") == 0 else None


def test_retention_query_offset(ret: Retention) -> None:
    res = run(
        ret.cluster, ret.home, "queryOffset", "-t", RET_TOPIC, "-g", RET_GROUP, "-s", str(ret.before_first), "--json"
    )
    assert res.code == 0, res.stderr
    (q,) = res.json()["queues"]
    assert (q["min_offset"], q["max_offset"], q["consumer_offset"]) == (ret.min_offset, RET_MESSAGES, RET_COMMITTED)
    assert q["lag"] == RET_MESSAGES - RET_COMMITTED  # as the Java tool's Diff counts it
    assert q["offset_at_time"] == ret.min_offset  # a time before the oldest message left lands on the min


def test_retention_consumer_progress_and_java(ret: Retention) -> None:
    res = run(ret.cluster, ret.home, "consumerProgress", "-g", RET_GROUP, "--json")
    assert res.code == 0, res.stderr
    doc = res.json()
    (q,) = [q for q in doc["queues"] if q["topic"] == RET_TOPIC]
    assert (q["broker_offset"], q["consumer_offset"], q["diff"]) == (
        RET_MESSAGES,
        RET_COMMITTED,
        RET_MESSAGES - RET_COMMITTED,
    )
    # the message at the group's offset is gone: the lag time is the age of the oldest one left
    assert q["lag_time_ms"] > 0 and doc["lag_time_ms"] > 0

    java = ret.cluster.mqadmin("consumerProgress", "-g", RET_GROUP).stdout
    rows = [c for c in (line.split() for line in java.splitlines()) if c[:2] == [RET_TOPIC, "broker-a"]]
    assert [(int(c[3]), int(c[4]), int(c[5])) for c in rows] == [(q["broker_offset"], q["consumer_offset"], q["diff"])]

    res = run(ret.cluster, ret.home, "consumerProgress", "--json")
    assert res.code == 0, res.stderr
    (g,) = [g for g in res.json()["groups"] if g["group"] == RET_GROUP]
    assert g["diff_total"] == RET_MESSAGES - RET_COMMITTED


def test_retention_replay_window_before_retention(ret: Retention, tmp_path: Path) -> None:
    dest = tmp_path / "r.jsonl"
    res = run(
        ret.cluster,
        ret.home,
        "rangeReplay",
        "-t",
        RET_TOPIC,
        "-b",
        str(ret.before_first),
        "--to",
        f"jsonl:{dest}",
        "--json",
    )
    assert res.code == 0, res.stderr
    doc = res.json()
    assert doc["written"] == RET_MESSAGES - ret.min_offset  # only what retention left
    (q,) = doc["queues"]
    assert q["start_offset"] == ret.min_offset
    # and it says what may be missing: the deleted messages' store times are gone, so a bound
    low = ret.min_offset
    assert doc["expired_at_most"] == q["expired_at_most"] == low
    assert q["oldest_left"] > ret.before_first
    assert any(
        n.startswith(f"broker-a queue 0: the window starts before the oldest message left ({q['oldest_left_iso']})")
        and n.endswith(f"up to {low} message(s) before offset {low} are gone (messages expired)")
        for n in doc["notes"]
    ), doc["notes"]
    # a window that starts after the oldest message left has lost nothing
    after = str(q["oldest_left"] + 1)
    res = run(ret.cluster, ret.home, "rangeReplay", "-t", RET_TOPIC, "-b", after, "--dry-run", "--json")
    assert res.code == 0, res.stderr
    later = res.json()
    assert later["expired_at_most"] == 0 and later["total_messages"] < RET_MESSAGES - low
    assert not any("expired" in n for n in later["notes"])


def test_retention_reset_before_the_oldest_lands_on_min_and_restore_warns(ret: Retention, tmp_path: Path) -> None:
    backup = tmp_path / "b.json"
    res = run(
        ret.cluster,
        ret.home,
        "resetOffsetByTime",
        "-g",
        RET_GROUP,
        "-t",
        RET_TOPIC,
        "-s",
        str(ret.before_first),
        "--yes",
        "--backup",
        str(backup),
        "--json",
    )
    assert res.code == 0, res.stderr
    (q,) = res.json()["queues"]
    assert (q["old_offset"], q["new_offset"], q["min_offset"]) == (RET_COMMITTED, ret.min_offset, ret.min_offset)
    addr = ret.cluster.broker_addrs[0]
    assert _offset_on(addr, RET_GROUP, RET_TOPIC, 0) == ret.min_offset

    # the backup holds offset 5, now below the min: restoring it is refused, changing nothing,
    # unless --clamp moves it to the min (and says so)
    res = run(ret.cluster, ret.home, "restoreOffset", "--from", str(backup), "--yes")
    assert res.code == 2, (res.stdout, res.stderr)
    assert f"{RET_COMMITTED} not in [{ret.min_offset}, " in res.stderr and "--clamp" in res.stderr, res.stderr
    assert _offset_on(addr, RET_GROUP, RET_TOPIC, 0) == ret.min_offset
    res = run(ret.cluster, ret.home, "restoreOffset", "--from", str(backup), "--yes", "--clamp")
    assert res.code == 0 and f"clamped broker-a queue 0: {RET_COMMITTED} not in [{ret.min_offset}, " in res.stderr
    assert _offset_on(addr, RET_GROUP, RET_TOPIC, 0) == ret.min_offset


# ---------------------------------------------------------------------------------------------
# Two brokers, one hung: still in the route, answering nothing

DN_TOPIC = "DnTopic"
DN_GROUP = "DnGroup"
DN_QUEUES = 2  # per broker
DN_COMMITTED = 2


@dataclass
class OneDown:
    cluster: rb.RealCluster
    home: Path
    hung_addr: str


@pytest.fixture(scope="module")
def down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OneDown]:
    workdir = tmp_path_factory.mktemp("one-down")
    with rb.RealCluster(VERSION, workdir / "rmq", brokers=2) as cluster:
        cluster.create_topic(DN_TOPIC, DN_QUEUES)
        cluster.create_topic(f"%RETRY%{DN_GROUP}", 1)
        cluster.create_group(DN_GROUP)
        _send(cluster, DN_TOPIC, 4 * DN_QUEUES * 2)
        for name in cluster.broker_names:
            for q in range(DN_QUEUES):
                cluster.commit_offset(name, DN_GROUP, DN_TOPIC, q, DN_COMMITTED)
        cluster.pause_broker("broker-b")
        try:
            yield OneDown(cluster, workdir / "home", dict(cluster.brokers)["broker-b"])
        finally:
            cluster.resume_broker("broker-b")


def test_one_broker_hung_every_command_fails_naming_it(down: OneDown, tmp_path: Path) -> None:
    """Without --partial every command fails: one line naming the silent one, exit 1, in
    bounded time (queryOffset and consumerProgress show the live broker's part first).  (The Java tool's consumerProgress -g fails there too, with a
    stack trace; see the next test.)"""
    commands = [
        ("queryOffset", "-t", DN_TOPIC, "-g", DN_GROUP),
        ("consumerProgress", "-g", DN_GROUP),
        ("consumerProgress",),
        ("rangeReplay", "-t", DN_TOPIC, "-b", "-1h", "--to", f"jsonl:{tmp_path / 'r.jsonl'}"),
    ]
    for args in commands:
        started = time.monotonic()
        res = run(down.cluster, down.home, *args, timeout="1")
        assert res.code == 1, (args, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and down.hung_addr in lines[0] and "timed out" in lines[0], (args, res.stderr)
        assert time.monotonic() - started < 60


def test_one_broker_hung_query_offset_answers_for_the_live_one(down: OneDown) -> None:
    """queryOffset shows the live broker's queues and names the hung one; --partial accepts that."""
    for partial, code in ((False, 1), (True, 0)):
        args = ("queryOffset", "-t", DN_TOPIC, "-g", DN_GROUP, "--json", *(["--partial"] if partial else []))
        res = run(down.cluster, down.home, *args, timeout="1")
        assert res.code == code, (res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "broker-b did not answer" in lines[0] and down.hung_addr in lines[0], res.stderr
        doc = res.json()
        assert {(q["broker"], q["consumer_offset"]) for q in doc["queues"]} == {("broker-a", DN_COMMITTED)}
        assert len(doc["queues"]) == DN_QUEUES and [m["broker"] for m in doc["missing_brokers"]] == ["broker-b"]


@pytest.mark.parametrize("one_group", [True, False], ids=["-g", "all-groups"])
def test_one_broker_hung_consumer_progress_answers_for_the_live_one(down: OneDown, one_group: bool) -> None:
    """consumerProgress (one group, all groups) shows the live broker's figures and names the
    hung one; --partial accepts that; a few timeouts in all, never one per group."""
    for partial, code in ((False, 1), (True, 0)):
        args = ("consumerProgress", *(("-g", DN_GROUP) if one_group else ()), "--json")
        started = time.monotonic()
        res = run(down.cluster, down.home, *args, *(["--partial"] if partial else []), timeout="1")
        assert time.monotonic() - started < 30
        assert res.code == code, (res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "broker-b did not answer" in lines[0] and down.hung_addr in lines[0], res.stderr
        doc = res.json()
        assert [m["broker"] for m in doc["missing_brokers"]] == ["broker-b"]
        if one_group:
            mine = [(q["broker"], q["consumer_offset"]) for q in doc["queues"] if q["topic"] == DN_TOPIC]
            assert mine == [("broker-a", DN_COMMITTED)] * DN_QUEUES, doc
            assert {q["broker"] for q in doc["queues"]} == {"broker-a"}
        else:
            assert DN_GROUP in {g["group"] for g in doc["groups"]}, doc


def test_one_broker_hung_reset_changes_nothing(down: OneDown, tmp_path: Path) -> None:
    backup = tmp_path / "b.json"
    res = run(
        down.cluster,
        down.home,
        "resetOffsetByTime",
        "-g",
        DN_GROUP,
        "-t",
        DN_TOPIC,
        "-s",
        "-1h",
        "--yes",
        "--backup",
        str(backup),
        timeout="1",
    )
    assert res.code == 1 and down.hung_addr in res.stderr, (res.stdout, res.stderr)
    assert not backup.exists()  # refused while planning, before any backup or write
    live = dict(down.cluster.brokers)["broker-a"]
    assert [_offset_on(live, DN_GROUP, DN_TOPIC, q) for q in range(DN_QUEUES)] == [DN_COMMITTED] * DN_QUEUES


def test_one_broker_hung_java_tool_fails_as_well(down: OneDown) -> None:
    proc = down.cluster.mqadmin("consumerProgress", "-g", DN_GROUP, check=False, timeout=120)
    assert "#Topic" not in proc.stdout  # no table at all, not even for the live broker
    assert "Exception" in proc.stdout + proc.stderr


def test_broker_hung_mid_apply_prints_what_the_brokers_hold(down: OneDown, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault cases proven on the mock pair, on the real one: broker-b freezes after taking its
    first offset write, so its second write times out. What the reset prints for every queue must
    be what the brokers hold once broker-b is back, and the printed undo must restore them all."""

    def cli(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main([*args, "-n", down.cluster.namesrv_addr], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        return code, out.getvalue(), err.getvalue()

    addrs = dict(down.cluster.brokers)

    def offsets() -> dict[tuple[str, int], int | None]:
        return {
            (b, q): _offset_on(addrs[b], DN_GROUP, DN_TOPIC, q)
            for b in ("broker-a", "broker-b")
            for q in range(DN_QUEUES)
        }

    # broker-b back in the route and answering (a long pause may have let the name server drop it)
    def both_answer() -> bool:
        code, out, _ = cli("queryOffset", "-t", DN_TOPIC, "-g", DN_GROUP, "--json", "--timeout", "2")
        return code == 0 and {q["broker"] for q in json.loads(out)["queues"]} == {"broker-a", "broker-b"}

    down.cluster.resume_broker("broker-b")
    deadline = time.monotonic() + 90
    while not both_answer():
        assert time.monotonic() < deadline, "broker-b did not come back into the route"
        time.sleep(1)
    assert set(offsets().values()) == {DN_COMMITTED}

    writes: list[str] = []
    original = RemotingAdmin.update_consumer_offset

    def freeze_b_after_its_first_write(self: RemotingAdmin, group: str, mq: object, offset: int) -> None:
        broker = mq.broker_name  # type: ignore[attr-defined]
        if broker == "broker-b" and "broker-b" in writes:
            down.cluster.pause_broker("broker-b")
        writes.append(broker)
        original(self, group, mq, offset)  # type: ignore[arg-type]

    monkeypatch.setattr(RemotingAdmin, "update_consumer_offset", freeze_b_after_its_first_write)
    try:
        args = ("resetOffsetByTime", "-g", DN_GROUP, "-t", DN_TOPIC, "--to-earliest", "--yes")
        code, out, err = cli(*args, "--timeout", "3", "--output", "json")
    finally:
        monkeypatch.undo()
        down.cluster.resume_broker("broker-b")
    assert writes.count("broker-b") == 2, writes
    doc = json.loads(out)
    printed = {(q["broker"], q["queue_id"]): (q.get("outcome", ""), q["new_offset"]) for q in doc["queues"]}
    assert set(printed) == set(offsets())
    deadline = time.monotonic() + 30  # the thawed broker serves the write it had queued
    while None in offsets().values():
        assert time.monotonic() < deadline
        time.sleep(0.5)
    state = offsets()
    for key, (outcome, planned) in printed.items():
        assert planned == 0, printed
        if outcome in ("applied", "acked"):
            assert state[key] == planned, (key, outcome, state)
        elif outcome == "unchanged":
            assert state[key] == DN_COMMITTED, (key, outcome, state)
        else:
            assert outcome == "unknown", (key, outcome)
            assert state[key] in (planned, DN_COMMITTED), (key, outcome, state)
    assert [printed[("broker-a", q)][0] for q in range(DN_QUEUES)] == ["applied"] * DN_QUEUES, printed
    assert printed[("broker-b", 1)][0] == "unknown", printed
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert "broker-b (" in line and "restore with: mqadmin restoreOffset --from" in line, err

    argv = shlex.split(doc["undo"])
    assert argv[:2] == ["mqadmin", "restoreOffset"]
    argv = [a for i, a in enumerate(argv) if a != "-n" and (i == 0 or argv[i - 1] != "-n")]
    out_code, _, restore_err = cli(*argv[1:], "--yes", "--timeout", "5")
    assert out_code == 0, restore_err
    assert set(offsets().values()) == {DN_COMMITTED}
