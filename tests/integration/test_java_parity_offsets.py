"""skipAccumulatedMessage, cloneGroupOffset and resetOffsetByTime --output java beside the Java
``mqadmin`` on the same real broker state (4.9.7, 5.3.3 and 5.5.1, whose Java tool is 5.5.0).

One two-broker cluster per version, shared with other modules, built as in test_java_parity (messages and
offsets without the JVM). Each scenario runs the Java tool on one group and ours on a twin group
with the same prior offsets, all Java calls at once; then both groups are read back, and the
Java tool's printed rows are compared with ours printed as ``--output java``.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from mqadmin import errors
from mqadmin.cli import main
from mqadmin.model import Message, MessageQueue
from mqadmin.output import Env
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.remoting.backend import RemotingAdmin
from mqadmin.remoting.client import RemotingClient
from tests.integration.test_java_parity import (
    BROKERS,
    PARITY_VERSIONS,
    PER_QUEUE,
    QUEUES,
    RESET_PRIOR,
    WAIT,
    World,
    _commit,
    _heartbeat_body,
    _make_groups_known,
    _produce,
    java_table,
)
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

G_SKIP = ("OcSkipJava", "OcSkipOurs")
G_CLONE_SRC = "OcCloneSrc"
G_CLONE = ("OcCloneJava", "OcCloneOurs")
G_RESET = ("OcResetJava", "OcResetOurs")
G_BUSY = "OcBusy"  # online while the clone into it is refused
G_EARLIEST = ("OcEarliestJava", "OcEarliestOurs")  # Java -s 0 beside ours --to-earliest
G_SHIFT = "OcShift"  # ours --shift-by -2 (no Java equivalent)
G_MULTI = "OcMulti"  # offsets on OC_TOPIC and OTHER: --all-topics, one backup, one undo
G_PLAN = "OcPlan"  # --export FILE.csv, edited, restoreOffset --from FILE.csv
GROUPS = (*G_SKIP, G_CLONE_SRC, *G_CLONE, *G_RESET, G_BUSY, *G_EARLIEST, G_SHIFT, G_MULTI, G_PLAN)
OC_TOPIC = "OcParityTopic"  # not test_java_parity's topic: on 5.5.1 both modules share one cluster
OTHER = "OcOtherTopic"  # a second topic: 2 queues per broker, 3 messages each
OTHER_QUEUES, OTHER_PER_QUEUE = 2, 3
#: the clone source's offsets, per queue (broker-a 0..3, broker-b 0..3)
SOURCE_OFFSETS = (1, 4, 6, 0, 2, 5, 3, 6)


@pytest.fixture(scope="module", params=PARITY_VERSIONS)
def world(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shared_cluster: Callable[[str], rb.RealCluster],
) -> Iterator[World]:
    version: str = request.param
    workdir = tmp_path_factory.mktemp(f"offset-parity-{version}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "UTC")
        mp.setenv("MQADMIN_HOME", str(workdir / "mqadmin-home"))
        mp.setenv("NO_COLOR", "1")
        mp.delenv("NAMESRV_ADDR", raising=False)
        cluster = shared_cluster(version)
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=WAIT)
        w = World(version, cluster, admin, workdir, topic=OC_TOPIC)
        try:
            for addr in cluster.broker_addrs:
                rb.create_topic(addr, w.topic, QUEUES)
            _produce(w)
            _make_groups_known(w, GROUPS)
            for addr in cluster.broker_addrs:
                rb.create_topic(addr, OTHER, OTHER_QUEUES)
            other = _other_queues(w)
            for i in range(OTHER_PER_QUEUE * len(other)):
                mq = other[i % len(other)]
                w.admin.send(OTHER, Message(OTHER, f"other-{i}".encode(), {"TAGS": "TagA"}), queue=mq)
            _commit(w, G_MULTI, dict.fromkeys(other, 2))
            for group in (*G_SKIP, *G_CLONE, *G_RESET, G_BUSY, *G_EARLIEST, G_SHIFT, G_MULTI, G_PLAN):
                _commit(w, group, dict(zip(w.queues, RESET_PRIOR, strict=True)))
            _commit(w, G_CLONE_SRC, dict(zip(w.queues, SOURCE_OFFSETS, strict=True)))
            yield w
        finally:
            admin.close()


def _other_queues(world: World) -> list[MessageQueue]:
    deadline = time.monotonic() + WAIT
    while True:
        try:
            queues = world.admin.topic_route(OTHER).message_queues()
            if len(queues) == OTHER_QUEUES * BROKERS:
                return queues
        except errors.TopicNotExist:
            pass
        assert time.monotonic() < deadline, f"no route for {OTHER}"
        time.sleep(0.1)


def ours(world: World, *args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [*args, "-n", world.cluster.namesrv_addr, "--json", "--timeout", str(WAIT), "--yes"]
    code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    return code, json.loads(out.getvalue()) if out.getvalue().strip() else None, err.getvalue()


def ours_java(world: World, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [*args, "-n", world.cluster.namesrv_addr, "--output", "java", "--timeout", str(WAIT), "--yes"]
    code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    return code, out.getvalue(), err.getvalue()


def committed(world: World, group: str) -> dict[tuple[str, int], int | None]:
    return {(mq.broker_name, mq.queue_id): world.admin.consumer_offset(group, mq) for mq in world.queues}


@dataclass
class Runs:
    java: dict[str, str]
    ours: dict[str, tuple[int, str, str]]
    after: dict[str, dict[tuple[str, int], int | None]]


@pytest.fixture(scope="module")
def runs(world: World) -> Runs:
    """Every Java call at once (each a JVM of a few seconds); ours meanwhile, on the twin groups."""
    ts = str(world.ts)
    calls = {
        "skip": ("skipAccumulatedMessage", "-g", G_SKIP[0], "-t", world.topic),
        "clone": ("cloneGroupOffset", "-s", G_CLONE_SRC, "-d", G_CLONE[0], "-t", world.topic, "-o", "true"),
        "reset": ("resetOffsetByTime", "-g", G_RESET[0], "-t", world.topic, "-s", ts),
        "earliest": ("resetOffsetByTime", "-g", G_EARLIEST[0], "-t", world.topic, "-s", "0"),
    }
    with ThreadPoolExecutor(max_workers=1) as pool:
        java = pool.submit(world.java_many, calls)
        ours = {
            "skip": ours_java(world, "skipAccumulatedMessage", "-g", G_SKIP[1], "-t", world.topic),
            "clone": ours_java(
                world, "cloneGroupOffset", "-s", G_CLONE_SRC, "-d", G_CLONE[1], "-t", world.topic, "-o", "true"
            ),
            "reset": ours_java(world, "resetOffsetByTime", "-g", G_RESET[1], "-t", world.topic, "-s", ts),
            "earliest": ours_java(world, "resetOffsetByTime", "-g", G_EARLIEST[1], "-t", world.topic, "--to-earliest"),
            "shift": ours_java(world, "resetOffsetByTime", "-g", G_SHIFT, "-t", world.topic, "--shift-by", "-2"),
        }
        java_out = java.result()
    groups = (*G_SKIP, *G_CLONE, *G_RESET, *G_EARLIEST, G_SHIFT)
    return Runs(java_out, ours, {g: committed(world, g) for g in groups})


def rows(text: str) -> dict[tuple[str, int], dict[str, str]]:
    return {(r["brokerName"], int(r["queueId"])): r for r in java_table(text, "brokerName")}


def prior(world: World) -> dict[tuple[str, int], int]:
    return {(mq.broker_name, mq.queue_id): o for mq, o in zip(world.queues, RESET_PRIOR, strict=True)}


def test_skip_accumulated_message(world: World, runs: Runs) -> None:
    code, out, err = runs.ours["skip"]
    assert code == 0, err
    everything = {k: PER_QUEUE for k in prior(world)}
    assert runs.after[G_SKIP[0]] == runs.after[G_SKIP[1]] == everything
    theirs, mine = rows(runs.java["skip"]), rows(out)
    assert theirs == mine, f"Java:\n{runs.java['skip']}\nours:\n{out}"
    if world.v4:  # no consumer online: the old method's six columns
        assert {k: int(r["consumerOffset"]) for k, r in mine.items()} == prior(world)
        assert {k: int(r["rollbackOffset"]) for k, r in mine.items()} == everything
    else:
        assert {k: int(r["offset"]) for k, r in mine.items()} == everything
    # the header line is byte for byte the Java tool's
    assert out.splitlines()[0] == next(line for line in runs.java["skip"].splitlines() if line.startswith("#"))


def test_clone_group_offset(world: World, runs: Runs) -> None:
    code, out, err = runs.ours["clone"]
    assert code == 0, err
    source = {(mq.broker_name, mq.queue_id): o for mq, o in zip(world.queues, SOURCE_OFFSETS, strict=True)}
    assert runs.after[G_CLONE[0]] == runs.after[G_CLONE[1]] == source
    line = f"clone group offset success. srcGroup[{G_CLONE_SRC}], destGroup=[%s], topic[{world.topic}]"
    assert line % G_CLONE[0] in runs.java["clone"]
    assert out == line % G_CLONE[1] + "\n"  # ours ends the line; Java does not


def test_reset_offset_by_time_java_text(world: World, runs: Runs) -> None:
    code, out, err = runs.ours["reset"]
    assert code == 0, err
    assert runs.after[G_RESET[0]] == runs.after[G_RESET[1]]
    theirs, mine = rows(runs.java["reset"]), rows(out)
    assert theirs == mine, f"Java:\n{runs.java['reset']}\nours:\n{out}"
    # the line before the table names the group (which differs), the rest is the Java tool's
    said = [line for line in runs.java["reset"].splitlines() if "consumer offset by specified" in line]
    assert len(said) == 1, runs.java["reset"]
    ours_said = [line for line in out.splitlines() if "consumer offset by specified" in line]
    assert [s.replace(G_RESET[1], G_RESET[0]) for s in ours_said] == said


def test_clone_refuses_a_destination_with_consumers_online(world: World, runs: Runs) -> None:
    """A consumer of the destination is online (one heartbeat, connection kept): refused, nothing
    moves, and --while-online is named; a real broker's view, not the mock's."""
    client = RemotingClient(world.cluster.namesrv_addr, timeout=WAIT)
    try:
        body = _heartbeat_body("127.0.0.1@mqadmin-busy", (G_BUSY,), world.topic)
        for addr in world.cluster.broker_addrs:
            reply = client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
            assert reply.code == ResponseCode.SUCCESS, reply
        before = committed(world, G_BUSY)
        code, out, err = ours_java(world, "cloneGroupOffset", "-s", G_CLONE_SRC, "-d", G_BUSY, "-t", world.topic)
        assert code == 2 and out == "", err
        assert "consumer(s) online (127.0.0.1@mqadmin-busy)" in err and "--while-online" in err
        assert len(err.strip().splitlines()) == 1
        assert committed(world, G_BUSY) == before
    finally:
        client.close()


def test_skip_dry_run_shows_what_each_queue_skips(world: World, runs: Runs) -> None:
    """On a group with a backlog (the clone source, untouched): the plan counts the messages."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["skipAccumulatedMessage", "-g", G_CLONE_SRC, "-t", world.topic, "--dry-run", "--json"]
    code = main([*argv, "-n", world.cluster.namesrv_addr], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    assert code == 0, err.getvalue()
    doc: Any = json.loads(out.getvalue())
    source = {(mq.broker_name, mq.queue_id): o for mq, o in zip(world.queues, SOURCE_OFFSETS, strict=True)}
    assert {(q["broker"], q["queue_id"]): q["delta"] for q in doc["queues"]} == {
        k: PER_QUEUE - o for k, o in source.items()
    }
    assert committed(world, G_CLONE_SRC) == source
    assert re.search(r"backup", err.getvalue()) is None


def test_to_earliest_equals_the_java_reset_to_time_zero(world: World, runs: Runs) -> None:
    code, _, err = runs.ours["earliest"]
    assert code == 0, err
    assert runs.after[G_EARLIEST[0]] == runs.after[G_EARLIEST[1]] == {k: 0 for k in prior(world)}


def test_shift_by_rewinds_and_keeps_inside_min(world: World, runs: Runs) -> None:
    code, _, err = runs.ours["shift"]
    assert code == 0, err
    assert runs.after[G_SHIFT] == {k: max(o - 2, 0) for k, o in prior(world).items()}
    assert "kept inside their [min, max]" in err  # RESET_PRIOR has queues at 0 and 1


def test_all_topics_one_backup_one_undo(world: World, runs: Runs) -> None:
    other = {(mq.broker_name, mq.queue_id): 2 for mq in _other_queues(world)}
    before = committed(world, G_MULTI)
    code, doc, err = ours(world, "resetOffsetByTime", "-g", G_MULTI, "--all-topics", "--to-earliest")
    assert code == 0, err
    assert {q["topic"] for q in doc["queues"]} == {world.topic, OTHER}  # no %RETRY% topic
    assert all(q.get("outcome", "applied") == "applied" for q in doc["queues"])  # none on unmoved queues
    assert set(committed(world, G_MULTI).values()) == {0}
    assert {k: world.admin.consumer_offset(G_MULTI, MessageQueue(OTHER, *k)) for k in other} == dict.fromkeys(other, 0)
    code, _, err = ours(world, *doc["undo"].split()[1:])
    assert code == 0, err
    assert committed(world, G_MULTI) == before
    assert {k: world.admin.consumer_offset(G_MULTI, MessageQueue(OTHER, *k)) for k in other} == other


def test_exported_plan_edited_and_applied(world: World, runs: Runs) -> None:
    plan = world.workdir / "plan.csv"
    before = committed(world, G_PLAN)
    code, doc, err = ours(world, "skipAccumulatedMessage", "-g", G_PLAN, "-t", world.topic, "--export", str(plan))
    assert code == 0 and doc["exported"] == str(plan), err
    assert committed(world, G_PLAN) == before
    lines = plan.read_text().splitlines()
    assert lines[0] == "group,topic,broker,queue,offset,old_offset,min_offset,max_offset"
    first = lines[1].split(",")
    first[4] = "1"  # edit: one queue to offset 1, the rest to the end
    plan.write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    code, doc, err = ours(world, "restoreOffset", "--from", str(plan))
    assert code == 0, err
    want = {k: PER_QUEUE for k in before} | {(first[2], int(first[3])): 1}
    assert committed(world, G_PLAN) == want
    assert all(q.get("outcome", "applied") == "applied" for q in doc["queues"])  # none on unmoved queues
