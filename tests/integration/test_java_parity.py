"""Our CLI beside the Java ``mqadmin`` on the same real broker state (issue 3, point 8).

One two-broker cluster per RocketMQ version (4.9.7, 5.3.3, 5.5.1), each shared with other modules
(5.5.1's Java tool, 5.5.0, runs one call at a time). The state is built without
the JVM (every Java call costs ~4 s): messages through ``RemotingAdmin.send``, groups made
known to the brokers by one heartbeat (which also creates their ``%RETRY%`` topics, needed by
Java's ``consumerProgress -g``) and then left offline, offsets committed directly, plus one
official C++ push consumer for a live group. The Java calls run concurrently, in two batches,
each compared with what our CLI prints as ``--output json``:

* resets (while the live consumer settles): Java ``resetOffsetByTime`` on one group, ours on a
  twin group with the same prior offsets and the same mid-stream ``-s <ms>``, both read back
  with Java ``consumerProgress -g``; force, ``-f false``, and a group with offsets on one broker;
* a snapshot: Java ``topicStatus``, ``consumerProgress -g`` (an offline and the live group) and
  ``consumerProgress`` (all groups), beside our ``consumerProgress`` and ``queryOffset``.

Known differences are asserted as such (``test_reset_no_force``,
``test_reset_group_without_offsets_on_one_broker``), so a change on either side shows up.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
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
from tests.support import official_client as oc
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

TOPIC = "JavaParityTopic"
QUEUES = 4  # per broker
BROKERS = 2
PER_QUEUE = 6  # messages in every queue
SEND_GAP_S = 0.005  # distinct store times, so a time lands between two messages of a queue
WAIT = 10.0
RETRY = "%RETRY%"
PERSIST_LOG = "oneway updateConsumeOffsetToBroker"  # the C++ client's offset commit, every 5 s

G_PROGRESS = "JpProgress"  # offline, uneven offsets: consumerProgress / queryOffset
G_ONLINE = "JpOnline"  # the official push consumer, online while the snapshot is taken
G_FORCE = ("JpForceJava", "JpForceOurs")  # resetOffsetByTime -s ts (force), Java vs ours
G_NOFORCE = ("JpNoForceJava", "JpNoForceOurs")  # the same with -f false
G_PARTIAL = ("JpPartialJava", "JpPartialOurs")  # offsets on broker-a only, force
OFFLINE_GROUPS = (G_PROGRESS, *G_FORCE, *G_NOFORCE, *G_PARTIAL)

#: queue index (broker-a 0..3, broker-b 0..3) -> prior committed offset
PROGRESS_OFFSETS = tuple((i * 3) % (PER_QUEUE + 1) for i in range(QUEUES * BROKERS))  # 0 3 6 2 5 1 4 0
RESET_PRIOR = tuple(i % (PER_QUEUE + 1) for i in range(QUEUES * BROKERS))  # 0..6, 0: below, at, above
PARTIAL_PRIOR = PER_QUEUE - 1
#: the time the resets go to: the store time of this message (global send index), mid-stream everywhere
TS_MESSAGE_INDEX = 3 * QUEUES * BROKERS + 5

QKey = tuple[str, str, int]  # topic, broker, queue id


# ---------------------------------------------------------------------------------------------
# Parsing the Java tool's tables


def java_table(out: str, first_column: str) -> list[dict[str, str]]:
    """Rows of the table whose header starts with ``#<first_column>``, keyed by column name.

    Java prints headers and rows with the same printf widths, so each value starts where its
    ``#Label`` does; slicing by those positions keeps empty cells (Type/Model of an offline
    group) and values with spaces (LastTime). Works for 4.9 and 5.x column sets alike.
    """
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#" + first_column)), None)
    assert start is not None, f"no #{first_column} table in Java output:\n{out}"
    header = lines[start]
    marks = [m.start() for m in re.finditer(r"#", header)]
    names = [header[a:b].strip().lstrip("#") for a, b in zip(marks, [*marks[1:], None], strict=True)]
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        for pos in marks[1:]:
            assert pos >= len(line) or line[pos - 1] == " ", f"a value overflows its column:\n{header}\n{line}"
        cells = [line[a:b].strip() for a, b in zip(marks, [*marks[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def java_footer(out: str, label: str) -> str:
    """Value of a ``Label: value`` footer line (``Diff Total``, ``Consume TPS``...)."""
    m = re.search(rf"^{re.escape(label)}:\s*(\S+)\s*$", out, re.M)
    assert m, f"no '{label}:' line in Java output:\n{out}"
    return m.group(1)


def java_progress(out: str) -> dict[QKey, dict[str, str]]:
    """Java ``consumerProgress -g`` rows by (topic, broker, queue id)."""
    return {(r["Topic"], r["Broker Name"], int(r["QID"])): r for r in java_table(out, "Topic")}


def java_time(ms: int) -> str:
    """LastTime as Java prints it (``yyyy-MM-dd HH:mm:ss``; the JVMs run with TZ=UTC here)."""
    if ms == 0:
        return "N/A"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# ---------------------------------------------------------------------------------------------
# The world: one cluster per version, state built without the JVM


@dataclass
class World:
    version: str
    cluster: rb.RealCluster
    admin: RemotingAdmin
    workdir: Path
    queues: list[MessageQueue] = field(default_factory=list)
    store_times: dict[MessageQueue, list[int]] = field(default_factory=dict)
    ts: int = 0
    online: oc.Peer | None = None
    timings: dict[str, float] = field(default_factory=dict)
    java_runs: list[float] = field(default_factory=list)  # seconds of each Java mqadmin run, in order
    topic: str = TOPIC  # the topic the world's messages are on (its own per module on a shared cluster)

    @property
    def v4(self) -> bool:
        return rb.is_v4(self.version)

    def ours(self, *args: str, ok: bool = True) -> tuple[int, Any, str]:
        """Our CLI in-process with ``--output json``: (exit code, parsed stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        argv = [*args, "-n", self.cluster.namesrv_addr, "--output", "json", "--timeout", str(WAIT)]
        code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        if ok:
            assert code == 0, f"mqadmin {' '.join(args)} exited {code}: {err.getvalue()}"
        return code, json.loads(out.getvalue()) if out.getvalue().strip() else None, err.getvalue()

    def ours_java(self, *args: str) -> str:
        """Our CLI in-process with ``--output java``: the text a script written for the Java tool reads."""
        out, err = io.StringIO(), io.StringIO()
        argv = [*args, "-n", self.cluster.namesrv_addr, "--output", "java", "--timeout", str(WAIT), "--tz", "UTC"]
        code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        assert code == 0, f"mqadmin {' '.join(args)} exited {code}: {err.getvalue()}"
        return out.getvalue()

    def java_many(self, calls: Mapping[str, tuple[str, ...]], check: bool = True) -> dict[str, str]:
        """Several Java mqadmin runs at once: each is a fresh JVM, ~3 s of it idle in shutdown."""
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            futures = {k: pool.submit(self.java, args, check) for k, args in calls.items()}
            return {k: f.result() for k, f in futures.items()}

    def java(self, args: tuple[str, ...], check: bool = True) -> str:
        """One Java mqadmin run: stdout, plus stderr when unchecked (failures print there)."""
        t0 = time.monotonic()
        proc = self.cluster.mqadmin(*args, check=check)
        self.java_runs.append(time.monotonic() - t0)
        return proc.stdout if check else proc.stdout + proc.stderr


def _heartbeat_body(client_id: str, groups: tuple[str, ...], topic: str = TOPIC) -> bytes:
    consumers = [
        {
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY",
            "groupName": group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": [
                {
                    "classFilterMode": False,
                    "codeSet": [],
                    "expressionType": "TAG",
                    "subString": "*",
                    "subVersion": int(time.time() * 1000),
                    "tagsSet": [],
                    "topic": topic,
                }
            ],
            "unitMode": False,
        }
        for group in groups
    ]
    return json.dumps({"clientID": client_id, "consumerDataSet": consumers, "producerDataSet": []}).encode()


def _make_groups_known(world: World, groups: tuple[str, ...]) -> None:
    """One heartbeat per broker, then disconnect: the broker auto-creates each subscription group
    (5.3 refuses commits without one) and its %RETRY% topic, as a consumer's first start does,
    and the groups are offline again once the connection is gone."""
    client = RemotingClient(world.cluster.namesrv_addr, timeout=WAIT)
    try:
        body = _heartbeat_body("127.0.0.1@mqadmin-java-parity", groups, world.topic)
        for addr in world.cluster.broker_addrs:
            reply = client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
            assert reply.code == ResponseCode.SUCCESS, reply
    finally:
        client.close()
    deadline = time.monotonic() + WAIT
    for group in groups:
        while True:
            try:
                world.admin.topic_route(RETRY + group)
                world.admin.consumer_connections(group)
            except errors.ConsumerNotOnline:
                break
            except errors.TopicNotExist:
                pass
            assert time.monotonic() < deadline, f"{group}: no %RETRY% route or still online after {WAIT}s"
            time.sleep(0.1)


def _produce(world: World) -> None:
    admin = world.admin
    route_deadline = time.monotonic() + WAIT
    while True:
        with_route = _try_route(admin, world.topic)
        if len(with_route) == QUEUES * BROKERS:
            break
        assert time.monotonic() < route_deadline, f"route of {world.topic}: {with_route}"
        time.sleep(0.1)
    world.queues = with_route
    for i in range(PER_QUEUE * len(world.queues)):
        mq = world.queues[i % len(world.queues)]
        admin.send(
            world.topic, Message(world.topic, f"parity-{i}".encode(), {"TAGS": "TagA", "KEYS": f"k{i}"}), queue=mq
        )
        time.sleep(SEND_GAP_S)
    for mq in world.queues:
        result = admin.pull(mq, 0, 32)
        world.store_times[mq] = [m.store_timestamp for m in result.messages]
        assert len(world.store_times[mq]) == PER_QUEUE
    sent_order = [world.queues[i % len(world.queues)] for i in range(PER_QUEUE * len(world.queues))]
    mq = sent_order[TS_MESSAGE_INDEX]
    world.ts = world.store_times[mq][TS_MESSAGE_INDEX // len(world.queues)]
    for mq, times in world.store_times.items():
        assert times[0] < world.ts < times[-1], f"ts must be mid-stream on {mq}: {times}"


def _try_route(admin: RemotingAdmin, topic: str) -> list[MessageQueue]:
    try:
        return admin.topic_route(topic).message_queues()
    except errors.TopicNotExist:
        return []


def _commit(world: World, group: str, offsets: Mapping[MessageQueue, int]) -> None:
    for mq, offset in offsets.items():
        world.admin.update_consumer_offset(group, mq, offset)


def _settle_online_consumer(world: World) -> None:
    """Wait until G_ONLINE's committed offsets stop changing.

    Settled means: every message consumed and committed, the %RETRY% queues rebalanced, and one
    more 5 s persist round logged after that. On 4.x that round also commits offset 0 on the
    %RETRY% queues (a 4.x broker answers 0 for an empty queue: ConsumerManageProcessor.java,
    docs/protocol.md "Offset queries and commits"); on 5.x the client has no offset to commit
    there. Both tools must then read the same, unchanging table.
    """
    peer = world.online
    assert peer is not None
    peer.wait_for_messages(PER_QUEUE * len(world.queues), timeout=60)
    peer.wait_for_log(f"Start to pull MessageQueue [topic={RETRY}{G_ONLINE},", timeout=30, count=BROKERS)
    persisted = peer.cpp_log().count(PERSIST_LOG)
    peer.wait_for_log(PERSIST_LOG, timeout=20, count=persisted + len(world.queues))
    retry_committed = f"{PERSIST_LOG} of mq:MessageQueue [topic={RETRY}{G_ONLINE}," in peer.cpp_log()
    deadline = time.monotonic() + WAIT
    while True:
        stats = world.admin.consume_stats(G_ONLINE).offsets
        topic_rows = [w for mq, w in stats.items() if mq.topic == TOPIC]
        retry_rows = [mq for mq in stats if mq.topic == RETRY + G_ONLINE]
        done = len(topic_rows) == len(world.queues) and all(w.consumer_offset == PER_QUEUE for w in topic_rows)
        if done and len(retry_rows) == (BROKERS if retry_committed else 0):
            return
        assert time.monotonic() < deadline, f"{G_ONLINE} did not settle: {stats}"
        time.sleep(0.2)


#: the versions held to the Java tool, each on the cluster shared with other modules
PARITY_VERSIONS = (*rb.VERSIONS, "5.5.1")


@pytest.fixture(scope="module", params=PARITY_VERSIONS)
def world(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shared_cluster: Callable[[str], rb.RealCluster],
) -> Iterator[World]:
    version: str = request.param
    workdir = tmp_path_factory.mktemp(f"java-parity-{version}")
    oc.ensure_all()  # before the JVMs start: a PyPI failure is loud and cheap here
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "UTC")  # the Java tool prints LastTime in the JVM's zone
        mp.setenv("MQADMIN_HOME", str(workdir / "mqadmin-home"))
        mp.setenv("NO_COLOR", "1")
        mp.delenv("NAMESRV_ADDR", raising=False)
        cluster = shared_cluster(version)
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=WAIT)
        w = World(version, cluster, admin, workdir)
        try:
            t0 = time.monotonic()
            setup = RemotingClient(cluster.namesrv_addr, timeout=WAIT)
            try:
                for addr in cluster.broker_addrs:
                    rb.create_topic(addr, TOPIC, QUEUES)
            finally:
                setup.close()
            _produce(w)
            t1 = time.monotonic()
            # G_ONLINE too: its %RETRY% route then exists when the consumer starts (faster rebalance)
            _make_groups_known(w, (*OFFLINE_GROUPS, G_ONLINE))
            t2 = time.monotonic()
            _commit(w, G_PROGRESS, dict(zip(w.queues, PROGRESS_OFFSETS, strict=True)))
            for group in (*G_FORCE, *G_NOFORCE):
                _commit(w, group, dict(zip(w.queues, RESET_PRIOR, strict=True)))
            for group in G_PARTIAL:
                _commit(w, group, {mq: PARTIAL_PRIOR for mq in w.queues if mq.broker_name == "broker-a"})
            w.timings |= {"produce_s": t1 - t0, "groups_s": t2 - t1, "commit_s": time.monotonic() - t2}
            # started now, settled only before the snapshot: it consumes while the resets run
            w.online = oc.push_consumer(
                cluster.namesrv_addr, G_ONLINE, TOPIC, workdir=workdir / "online-consumer", name="online"
            ).start()
            yield w
        finally:
            if w.online is not None:
                w.online.stop(check=False)
            admin.close()


# ---------------------------------------------------------------------------------------------
# Resets: Java on one group, ours on its twin, read back by Java


@dataclass
class Resets:
    targets: dict[tuple[str, int], int]  # (broker, queue id) -> where ts lands (the broker's time search)
    java_reset: dict[str, str]  # scenario -> Java resetOffsetByTime output (stdout + stderr when it failed)
    ours: dict[str, tuple[int, Any, str]]  # scenario -> our (exit code, JSON, stderr)
    readback: dict[str, str]  # group -> Java consumerProgress -g output after the resets
    ours_after: dict[str, Any]  # group -> our consumerProgress -g JSON after the resets
    seconds: float
    java_s: float  # the batch's Java runs added up


@pytest.fixture(scope="module")
def resets(world: World) -> Resets:
    """All resets at once (each pair on its own groups); each group is read back by Java as soon
    as its reset is done, so the read-backs overlap the Java resets still running."""
    t0, runs = time.monotonic(), len(world.java_runs)
    ts = str(world.ts)
    targets = {(mq.broker_name, mq.queue_id): world.admin.search_offset(mq, world.ts) for mq in world.queues}
    scenarios = {"force": G_FORCE, "noforce": G_NOFORCE, "partial": G_PARTIAL}
    extra = {"force": (), "noforce": ("-f", "false"), "partial": ()}
    with ThreadPoolExecutor(max_workers=2 * len(scenarios)) as pool:
        java_resets = {
            name: pool.submit(
                world.java, ("resetOffsetByTime", "-g", java_group, "-t", TOPIC, "-s", ts, *extra[name]), False
            )
            for name, (java_group, _) in scenarios.items()
        }  # not checked: the partial case fails on 4.9 (asserted in its test)
        readbacks: dict[str, Future[str]] = {}
        ours = {}
        for name, (_, our_group) in scenarios.items():
            backup = world.workdir / f"backup-{our_group}.json"
            args = ("resetOffsetByTime", "-g", our_group, "-t", TOPIC, "-s", ts, *extra[name], "--backup", str(backup))
            ours[name] = world.ours(*args, ok=False)
            readbacks[our_group] = pool.submit(world.java, ("consumerProgress", "-g", our_group))
        for future in as_completed(java_resets.values()):
            name = next(n for n, f in java_resets.items() if f is future)
            java_group = scenarios[name][0]
            readbacks[java_group] = pool.submit(world.java, ("consumerProgress", "-g", java_group))
        java_reset = {name: f.result() for name, f in java_resets.items()}
        readback = {group: f.result() for group, f in readbacks.items()}
    groups = [g for pair in scenarios.values() for g in pair]
    ours_after = {g: world.ours("consumerProgress", "-g", g)[1] for g in groups}
    seconds = time.monotonic() - t0
    return Resets(targets, java_reset, ours, readback, ours_after, seconds, sum(world.java_runs[runs:]))


def _offsets(java_out: str) -> dict[tuple[str, int], int]:
    return {(b, q): int(r["Consumer Offset"]) for (t, b, q), r in java_progress(java_out).items() if t == TOPIC}


def _expected_method(world: World) -> str:
    if world.v4:
        return "direct offset update (no consumer online)"
    return f"broker-side reset (server-side, broker {world.version})"


def _java_reset_rows(out: str) -> dict[tuple[str, int], dict[str, str]]:
    """4.x falls back to the old method (offline group): #brokerName #queueId #brokerOffset
    #consumerOffset #timestampOffset #rollbackOffset; 5.x resets server-side: #brokerName #queueId #offset."""
    return {(r["brokerName"], int(r["queueId"])): r for r in java_table(out, "brokerName")}


def test_reset_force(world: World, resets: Resets) -> None:
    java_group, our_group = G_FORCE
    targets = resets.targets
    assert all(0 < t < PER_QUEUE for t in targets.values()), f"ts must land mid-stream: {targets}"
    # Identical resulting offsets, read back by the Java tool for both groups.
    assert _offsets(resets.readback[java_group]) == _offsets(resets.readback[our_group]) == targets
    code, ours, err = resets.ours["force"]
    assert code == 0, err
    assert set(ours["method"].values()) == {_expected_method(world)}
    prior = {(mq.broker_name, mq.queue_id): o for mq, o in zip(world.queues, RESET_PRIOR, strict=True)}
    for q in ours["queues"]:
        key = (q["broker"], q["queue_id"])
        assert (q["old_offset"], q["new_offset"], q["max_offset"]) == (prior[key], targets[key], PER_QUEUE), key
    # What the Java tool printed agrees with our plan row by row.
    java_rows = _java_reset_rows(resets.java_reset["force"])
    assert sorted(java_rows) == sorted(targets)
    for key, row in java_rows.items():
        if world.v4:
            got = (int(row["brokerOffset"]), int(row["consumerOffset"]), int(row["timestampOffset"]))
            assert got == (PER_QUEUE, prior[key], targets[key]), key
            assert int(row["rollbackOffset"]) == targets[key], key
        else:
            assert int(row["offset"]) == targets[key], key
    # Our consumerProgress still equals Java's after a reset (5.x: the pending-reset table too).
    for group in G_FORCE:
        _compare_progress(resets.readback[group], resets.ours_after[group], world.v4)


def test_reset_no_force(world: World, resets: Resets) -> None:
    """-f false: only move offsets back.

    4.x: both tools apply it (the Java tool's old method updates a queue only if the target is
    at or below its offset). 5.2+: the broker-side reset the Java tool sends ignores ``isForce``
    (AdminBrokerProcessor.java; docs/protocol.md "Offset reset"), so Java moves offsets forward
    too; ours honours -f false on every version (issue 3 point 3). That is the one intended
    difference.
    """
    java_group, our_group = G_NOFORCE
    targets = resets.targets
    prior = {(mq.broker_name, mq.queue_id): o for mq, o in zip(world.queues, RESET_PRIOR, strict=True)}
    only_back = {k: min(prior[k], targets[k]) for k in targets}
    assert only_back != targets, "the scenario needs queues whose target is ahead of the offset"
    java_after, ours_after = _offsets(resets.readback[java_group]), _offsets(resets.readback[our_group])
    assert ours_after == only_back
    assert java_after == (only_back if world.v4 else targets)
    code, ours, err = resets.ours["noforce"]
    assert code == 0, err
    assert set(ours["method"].values()) == {_expected_method(world)}
    assert {(q["broker"], q["queue_id"]): q["new_offset"] for q in ours["queues"]} == only_back
    if world.v4:
        rows = _java_reset_rows(resets.java_reset["noforce"])
        assert {k: int(r["rollbackOffset"]) for k, r in rows.items()} == only_back
        assert {k: int(r["timestampOffset"]) for k, r in rows.items()} == targets


def test_reset_group_without_offsets_on_one_broker(world: World, resets: Resets) -> None:
    """A group with offsets on broker-a only (e.g. broker-b joined the topic later).

    5.x: both tools reset all eight queues (server-side reset needs only the subscription group).
    4.x: broker-b answers the client-push reset with SYSTEM_ERROR "THe consumer group <g> not
    exist" (not CONSUMER_NOT_ONLINE), so the Java tool stops without falling back and changes
    nothing (it asks broker-b first: the namesrv's route order). Ours applies its plan on both:
    broker-a directly (no consumer online), broker-b directly too, saying why.
    """
    java_group, our_group = G_PARTIAL
    targets = resets.targets
    java_after, ours_after = _offsets(resets.readback[java_group]), _offsets(resets.readback[our_group])
    code, ours, err = resets.ours["partial"]
    if not world.v4:
        assert java_after == ours_after == targets
        assert code == 0, err
        assert set(ours["method"].values()) == {_expected_method(world)}
        return
    assert "THe consumer group <" in resets.java_reset["partial"] and "not exist" in resets.java_reset["partial"]
    on_a = {k: PARTIAL_PRIOR for k in targets if k[0] == "broker-a"}
    assert java_after == on_a, "Java changed nothing (Java's consumerProgress lists only broker-a queues)"
    assert {k: v for k, v in ours_after.items() if k[0] == "broker-a"} == {
        k: v for k, v in targets.items() if k[0] == "broker-a"
    }
    assert ours["method"].get("broker-a") == _expected_method(world)
    # ours applies its plan there too, by direct update, and says so
    assert {k: v for k, v in ours_after.items() if k[0] == "broker-b"} == {
        k: v for k, v in targets.items() if k[0] == "broker-b"
    }
    assert code == 0, err
    assert "no offset on some queues" in ours["method"]["broker-b"]


# ---------------------------------------------------------------------------------------------
# A snapshot: one batch of Java calls beside ours, on the same settled state


@dataclass
class Snapshot:
    java: dict[str, str]
    ours: dict[str, Any]
    seconds: float
    java_s: float  # the batch's Java runs added up


@pytest.fixture(scope="module")
def before(world: World, resets: Resets) -> Snapshot:
    """Java and ours read the same, unchanging state (after the resets, the live consumer
    settled); ours run while the JVMs do."""
    t0 = time.monotonic()
    _settle_online_consumer(world)
    world.timings["settle_consumer_s"] = time.monotonic() - t0
    t0, runs = time.monotonic(), len(world.java_runs)
    calls = {
        "topicStatus": ("topicStatus", "-t", TOPIC),
        "progress": ("consumerProgress", "-g", G_PROGRESS),
        "online": ("consumerProgress", "-g", G_ONLINE),
        "all": ("consumerProgress",),
        # -b: Java asks a random broker otherwise, and each broker sees its own client address
        "connection": ("consumerConnection", "-g", G_ONLINE, "-b", world.cluster.broker_addrs[0]),
    }
    with ThreadPoolExecutor(max_workers=1) as pool:
        java = pool.submit(world.java_many, calls)
        ours = {
            "progress": world.ours("consumerProgress", "-g", G_PROGRESS)[1],
            "online": world.ours("consumerProgress", "-g", G_ONLINE)[1],
            "all": world.ours("consumerProgress")[1],
            "connection": world.ours(*calls["connection"])[1],
            "connection_java": world.ours_java(*calls["connection"]),
            "progress_java": world.ours_java("consumerProgress", "-g", G_PROGRESS),
            "all_java": world.ours_java("consumerProgress"),
        }
        java_out = java.result()
    # After the Java reads: a read as the group (4.x, when TOOLS_CONSUMER is refused) would show in
    # the group's consume TPS for a minute, and the Java tool's consumerProgress with it
    ours["query"] = world.ours("queryOffset", "-t", world.topic, "-g", G_PROGRESS, "-s", str(world.ts))[1]
    return Snapshot(java_out, ours, time.monotonic() - t0, sum(world.java_runs[runs:]))


def _compare_progress(java_out: str, ours: Mapping[str, Any], v4: bool, *, live: bool = False) -> None:
    """Every row and footer of Java ``consumerProgress -g`` equals our JSON for the group.

    ``live``: the group consumed within the last minute, so its consume TPS (the brokers'
    per-minute rate, resampled every 10 s on each broker) may differ between two calls made
    seconds apart; only its presence is compared then.
    """
    theirs = java_progress(java_out)
    mine = {(q["topic"], q["broker"], q["queue_id"]): q for q in ours["queues"]}
    assert list(mine) == sorted(mine), "ours: rows sorted by (topic, broker, queue id) as Java sorts them"
    assert list(theirs) == list(mine), "same queues in the same order (the %RETRY% topic included)"
    for key, row in theirs.items():
        q = mine[key]
        got = (int(row["Broker Offset"]), int(row["Consumer Offset"]), int(row["Diff"]), row["LastTime"])
        assert got == (q["broker_offset"], q["consumer_offset"], q["diff"], java_time(q["last_timestamp"] or 0)), key
        if not v4:  # 4.x has no Inflight column
            assert int(row["Inflight"]) == q["inflight"], key
    diff_label = "Diff Total" if v4 else "Consume Diff Total"
    assert int(java_footer(java_out, diff_label)) == ours["diff_total"]
    if not v4:
        inflight = sum(q["inflight"] for q in ours["queues"])
        assert int(java_footer(java_out, "Consume Inflight Total")) == inflight
    java_tps = float(java_footer(java_out, "Consume TPS"))
    if live:
        assert java_tps >= 0 and ours["tps"] >= 0
    else:
        assert java_tps == ours["tps"]


def test_consumer_progress_offline_group(world: World, before: Snapshot) -> None:
    _compare_progress(before.java["progress"], before.ours["progress"], world.v4)
    ours = before.ours["progress"]
    # The state is what was committed: uneven offsets, lag in both directions of zero.
    by_mq = {(q["broker"], q["queue_id"]): q["consumer_offset"] for q in ours["queues"] if q["topic"] == TOPIC}
    assert by_mq == {(mq.broker_name, mq.queue_id): o for mq, o in zip(world.queues, PROGRESS_OFFSETS, strict=True)}
    assert ours["diff_total"] == sum(PER_QUEUE - o for o in PROGRESS_OFFSETS)


def test_consumer_progress_online_group(world: World, before: Snapshot) -> None:
    _compare_progress(before.java["online"], before.ours["online"], world.v4, live=True)
    topics = {q["topic"] for q in before.ours["online"]["queues"]}
    assert TOPIC in topics
    assert before.ours["online"]["diff_total"] == 0


def test_consumer_progress_java_text(world: World, before: Snapshot) -> None:
    """--output java parses, row for row and footer for footer, as the Java tool's own text does."""
    theirs, ours = before.java["progress"], before.ours["progress_java"]
    assert java_table(ours, "Topic") == java_table(theirs, "Topic")
    labels = (
        ["Consume TPS", "Diff Total"] if world.v4 else ["Consume TPS", "Consume Diff Total", "Consume Inflight Total"]
    )
    for label in labels:
        assert java_footer(ours, label) == java_footer(theirs, label), label
    mine = {r["Group"]: r for r in java_table(before.ours["all_java"], "Group")}
    java_all = {r["Group"]: r for r in java_table(before.java["all"], "Group")}
    assert sorted(mine) == sorted(java_all)
    for group, row in java_all.items():
        if group == G_ONLINE:  # its TPS is the brokers' moving rate, read seconds apart
            row, mine[group] = {**row, "TPS": ""}, {**mine[group], "TPS": ""}
        assert mine[group] == row, group


def test_consumer_connection(world: World, before: Snapshot) -> None:
    """The live group's clients and subscriptions: Java's text, ours as JSON and ours as Java's text."""
    java_out, ours, ours_java = before.java["connection"], before.ours["connection"], before.ours["connection_java"]
    theirs = sorted(java_table(java_out, "ClientId"), key=lambda r: r["ClientId"])
    assert len(theirs) == 1 and theirs[0]["Language"] == "CPP"  # the official (C++) push consumer
    assert sorted(java_table(ours_java, "ClientId"), key=lambda r: r["ClientId"]) == theirs
    mine = [
        {"ClientId": c["client_id"], "ClientAddr": c["client_addr"], "Language": c["language"]}
        | {"Version": c["version_desc"]}
        for c in ours["clients"]
    ]
    assert mine == theirs
    subs = {r["Topic"]: r["SubExpression"] for r in java_table(java_out, "Topic")}
    assert {r["Topic"]: r["SubExpression"] for r in java_table(ours_java, "Topic")} == subs == ours["subscriptions"]
    assert TOPIC in subs
    for label, key in (("ConsumeType", "consume_type"), ("MessageModel", "message_model")):
        assert java_footer(java_out, label) == java_footer(ours_java, label) == ours[key]
    assert java_footer(java_out, "ConsumeFromWhere") == java_footer(ours_java, "ConsumeFromWhere")


def test_consumer_progress_all_groups(world: World, before: Snapshot) -> None:
    theirs = {r["Group"]: r for r in java_table(before.java["all"], "Group")}
    mine = {g["group"]: g for g in before.ours["all"]["groups"]}
    # beyond the Java tool: 5.5 lite groups (another module's, on the shared cluster), which need
    # no %RETRY% topic; each is one the brokers answer GET_LITE_GROUP_INFO for
    lite = {g for g in set(mine) - set(theirs) if _is_lite_group(world.admin, g)}
    mine = {g: row for g, row in mine.items() if g not in lite}
    assert sorted(theirs) == sorted(mine), "the same groups (one per %RETRY% topic)"
    assert set(OFFLINE_GROUPS) | {G_ONLINE} <= set(mine)
    for group, row in theirs.items():
        g = mine[group]
        assert (int(row["Count"]), row["Version"], row["Type"], row["Model"], int(row["Diff Total"])) == (
            g["count"],
            g["version"],
            g["type"],
            g["model"],
            g["diff_total"],
        ), group
        if group != G_ONLINE:  # a live group's TPS moves between two calls (see _compare_progress)
            assert int(row["TPS"]) == int(g["tps"]), group
    online = mine[G_ONLINE]
    assert (online["count"], online["type"], online["model"]) == (1, "PUSH", "CLUSTERING")
    assert all(mine[g]["version"] == "OFFLINE" and mine[g]["count"] == 0 for g in OFFLINE_GROUPS)
    # lag as time is filled for every group (Java has no such column): 0 when caught up, else
    # about the one-group view's (both read the oldest unconsumed message, seconds apart)
    for group, g in mine.items():
        assert isinstance(g["lag_time_ms"], int), group
        assert g["lag_time_ms"] > 0 or g["diff_total"] <= 0, group
    progress = before.ours["progress"]
    assert progress["lag_time_ms"] > 0
    assert abs(mine[G_PROGRESS]["lag_time_ms"] - progress["lag_time_ms"]) < 60_000


def _is_lite_group(admin: RemotingAdmin, group: str) -> bool:
    return any(not isinstance(a, errors.MqadminError) for a in admin.lite_group_info(group, None, 1).values())


def test_query_offset_vs_topic_status_and_progress(world: World, before: Snapshot, resets: Resets) -> None:
    status = {(r["Broker Name"], int(r["QID"])): r for r in java_table(before.java["topicStatus"], "Broker Name")}
    progress = java_progress(before.java["progress"])
    query = before.ours["query"]
    assert [(q["broker"], q["queue_id"]) for q in query["queues"]] == sorted(status)
    for q in query["queues"]:
        key = (q["broker"], q["queue_id"])
        java_row = progress[(TOPIC, key[0], key[1])]
        assert (q["min_offset"], q["max_offset"]) == (
            int(status[key]["Min Offset"]),
            int(status[key]["Max Offset"]),
        ), key
        assert q["consumer_offset"] == int(java_row["Consumer Offset"]), key
        assert q["lag"] == int(java_row["Diff"]), key
        # -s: where the time lands, which is where the Java reset put its group (test_reset_force)
        assert q["offset_at_time"] == resets.targets[key], key
    assert query["timestamp"] == world.ts


def test_java_batches_overlap(world: World, resets: Resets, before: Snapshot) -> None:
    """The module's Java runs overlap, as the module docstring promises: each batch takes less
    wall time than its JVMs added up (one after another they would double the module's cost,
    ~4 s per JVM). The costs print with ``pytest -rP``."""
    batches = {"reset": (resets.seconds, resets.java_s), "snapshot": (before.seconds, before.java_s)}
    print(
        json.dumps(
            {
                "version": world.version,
                "cluster_start_s": round(world.cluster.timings.get("start", 0.0), 1),
                **{k: round(v, 1) for k, v in world.timings.items()},
                **{f"{name}_batch_s": round(wall, 1) for name, (wall, _) in batches.items()},
                **{f"{name}_java_runs_s": round(java, 1) for name, (_, java) in batches.items()},
                "java_runs": len(world.java_runs),
            }
        )
    )
    if rb.tool_runs_serial(world.version):
        return  # one JVM at a time (the measured runs include their wait), so there is no overlap to check
    for name, (wall, java) in batches.items():
        assert java > wall, (
            f"{name} batch: {wall:.1f} s of wall time for {java:.1f} s of Java runs: they did not overlap"
        )
