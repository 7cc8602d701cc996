"""consumerProgress --health on a scripted timeline: the mock broker over TCP with scripted
consumers online, driven minute by minute by a test clock, one group per state.

Every minute each queue of TopicTest gets 10 messages; then, per group:

* healthy (a client online) commits up to 5 behind the end: a steady lag, OK;
* slowing (online) commits 5 more than before: the lag grows at every sample, WARN;
* stuck (online) commits nothing: STALL;
* stopped (nobody online) commits nothing: STOP;
* rewound (online) commits like healthy, then is reset back at the last minute: REWIND, naming the
  client that holds the queue;
* idle (nobody online) is caught up on a topic without traffic: OK, not STOP;
* pop (a POP consumer online) commits nothing: STALL.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

from mqadmin.cli import RUN_OPTIONS
from mqadmin.context import Context
from mqadmin.localstore import JAVA, OffsetsFile, render
from mqadmin.message import Message
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import MessageQueue
from mqadmin.output import Env
from mqadmin.registry import lookup
from tests.support.scripted_consumer import ScriptedConsumer

TOPIC, QUIET, QUEUES = "TopicTest", "Quiet", 2
T0, MIN = 1_800_000_000_000, 60_000
STEPS = 5  # the default window
PER_STEP = 10
REWOUND_CLIENT = "10.0.0.7@rewound"
EXPECTED = {
    "healthy": "OK",
    "slowing": "WARN",
    "stuck": "STALL",
    "stopped": "STOP",
    "rewound": "REWIND",
    "idle": "OK",
    "pop": "STALL",
}
#: named together with -g A,B,...
SEVERAL = ("stuck", "healthy", "stopped", "rewound")
#: every option at its default (as the command line gives them), with --health on
DEFAULTS: dict[str, Any] = {
    o.dest: o.default for o in lookup("consumerProgress").options if o.dest not in RUN_OPTIONS
} | {"health": True}


@dataclass
class Timeline:
    server: MockServer
    #: the MQADMIN_HOME whose state files hold the timeline's samples
    home: Path
    minute: int = -1

    @property
    def now(self) -> int:
        return T0 + self.minute * MIN

    def broker(self) -> Any:
        return self.server.cluster.brokers["broker-a"]

    def step(self) -> None:
        """One minute: new messages, then each group's commits."""
        self.minute += 1
        with self.server.lock:
            b = self.broker()
            for q in range(QUEUES):
                for _ in range(PER_STEP):
                    msg = Message(topic=TOPIC, body=b"x", properties={}, queue_id=q, born_timestamp=self.now - 2000)
                    b.put_message(msg, store_timestamp=self.now - 1000)
                end = b.max_offset(TOPIC, q)
                b.update_consumer_offset("healthy", TOPIC, q, end - 5)
                b.update_consumer_offset("slowing", TOPIC, q, b.committed_offset("slowing", TOPIC, q) + 5)
                back = self.minute == STEPS - 1
                b.update_consumer_offset("rewound", TOPIC, q, 3 if back else end - 5)


def run(t: Timeline, **options: Any) -> tuple[dict[str, Any], int, str]:
    """consumerProgress in this process at the timeline's minute: (JSON, exit code, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    now = t.now
    ctx = Context(address=t.server.namesrv_addr, env=Env(stdout=out, stderr=err), output="json", now=now)
    ctx.clock = lambda: now
    before = os.environ.get("MQADMIN_HOME")
    os.environ["MQADMIN_HOME"] = str(t.home)
    try:
        result = lookup("consumerProgress").bind(DEFAULTS | options)(ctx)
    finally:
        ctx.close()
        os.environ["MQADMIN_HOME"] = before or ""
    code = 3 if result.check_failure else 1 if result.failure else 0
    doc = result.to_json()
    if result.check_failure:
        doc["check_failure"] = result.check_failure
    return doc, code, err.getvalue()


@pytest.fixture(scope="module")
def timeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Timeline]:
    root: Path = tmp_path_factory.mktemp("health") / "store"
    cluster = MockCluster.create(root, ("broker-a",), version="5.3.3")
    cluster.create_topic(TOPIC, QUEUES)
    cluster.create_topic(QUIET, QUEUES)
    b = cluster.brokers["broker-a"]
    for topic in (TOPIC, QUIET):
        for q in range(QUEUES):
            for _ in range(20):
                b.put_message(Message(topic=topic, body=b"x", properties={}, queue_id=q), store_timestamp=T0 - MIN)
    for group in EXPECTED:
        b.ensure_group(group)
        for q in range(QUEUES):
            if group == "idle":
                b.update_consumer_offset(group, QUIET, q, 20)
            else:
                b.update_consumer_offset(group, TOPIC, q, 10)
    cluster.flush()
    with MockServer(cluster, namesrv_port=0) as server:
        server.call_client_timeout = 1.0
        addr = server.namesrv_addr
        clients = [
            ScriptedConsumer(addr, g, TOPIC, client_id=f"10.0.0.{i}@{g}")
            for i, g in enumerate(("healthy", "slowing", "stuck"), 1)
        ]
        clients.append(ScriptedConsumer(addr, "rewound", TOPIC, client_id=REWOUND_CLIENT))
        clients.append(ScriptedConsumer(addr, "pop", TOPIC, kind="pop", client_id="10.0.0.8@pop"))
        try:
            yield Timeline(server, tmp_path_factory.mktemp("home"))
        finally:
            for c in clients:
                c.close()


@pytest.fixture(scope="module")
def history(timeline: Timeline) -> dict[str, list[Any]]:
    """The whole timeline, each minute: every group alone (-g) and the all-groups view."""
    seen: dict[str, list[Any]] = {g: [] for g in EXPECTED} | {"all": [], "all_no_clients": [], "several": []}
    several_home = timeline.home / "several"  # its own state file: the same samples as each -g alone
    for _ in range(STEPS):
        timeline.step()
        for g in EXPECTED:
            seen[g].append(run(timeline, group=g))
        seen["several"].append(run(replace(timeline, home=several_home), group=",".join(SEVERAL)))
        seen["all"].append(run(timeline))
        seen["all_no_clients"].append(run(timeline, no_clients=True))
    return seen


def test_first_run_collects_instead_of_guessing(history: dict[str, list[Any]]) -> None:
    for group in EXPECTED:
        doc, code, _ = history[group][0]
        if group == "idle":
            assert (doc["health"]["status"], doc["health"]["reason"]) == ("OK", "caught up")
        elif group == "rewound":
            assert doc["health"]["status"] == "OK"
        else:
            assert doc["health"] == {
                "status": "OK",
                "reason": f"collecting (1 of {STEPS} samples)",
                "collecting": True,
            }, group
        assert code == 0


@pytest.mark.parametrize("group", list(EXPECTED))
def test_each_state_at_the_end_of_the_window(history: dict[str, list[Any]], group: str) -> None:
    doc, code, _ = history[group][-1]
    status = doc["health"]["status"]
    assert status == EXPECTED[group], doc["health"]
    assert code == (3 if status in ("STALL", "STOP", "REWIND") else 0)
    for q in doc["queues"]:
        if q["topic"] != TOPIC:
            continue
        samples = q["health"]["samples"]
        assert len(samples) == (STEPS if group != "rewound" else STEPS)
        assert [s["at_ms"] for s in samples] == [T0 + i * MIN for i in range(STEPS)]
        assert samples[-1]["consumer_offset"] == q["consumer_offset"]
        assert samples[-1]["broker_offset"] == q["broker_offset"]


def test_reasons_name_what_was_seen(history: dict[str, list[Any]]) -> None:
    reason = {g: history[g][-1][0]["health"]["reason"] for g in EXPECTED}
    assert "falling behind: lag grew at every sample" in reason["slowing"]
    assert "unmoved for 4m00s" in reason["stuck"] and "1 client(s) online" in reason["stuck"]
    assert "no client online" in reason["stopped"]
    assert "went back" in reason["rewound"] and f"held by {REWOUND_CLIENT}" in reason["rewound"]
    assert reason["idle"] == "caught up"
    assert "1 client(s) online" in reason["pop"]
    assert history["stuck"][-1][0]["check_failure"].startswith("stuck: STALL: TopicTest broker-a ")


def test_all_groups_view_agrees_and_exits_3(history: dict[str, list[Any]]) -> None:
    doc, code, _ = history["all"][-1]
    statuses = {g["group"]: g["health"]["status"] for g in doc["groups"]}
    assert statuses == EXPECTED
    assert code == 3
    failing = {part.split(":")[0] for part in doc["check_failure"].split("; ")}
    assert failing == {"stuck", "stopped", "rewound", "pop"}
    stuck = next(g for g in doc["groups"] if g["group"] == "stuck")["health"]
    assert stuck["queues"] == {"STALL": QUEUES}
    assert stuck["worst_queue"]["queue"] == f"{TOPIC} broker-a 0" and stuck["worst_queue"]["status"] == "STALL"
    assert stuck["worst_queue"]["consumer_offsets"] == [10] * STEPS and stuck["worst_queue"]["samples"] == STEPS
    assert stuck["worst_queue"]["since_ms"] == T0
    healthy = next(g for g in doc["groups"] if g["group"] == "healthy")["health"]
    assert healthy["queues"] == {"OK": QUEUES} and "worst_queue" not in healthy


def test_a_window_holds_every_run_and_its_lag_times(history: dict[str, list[Any]]) -> None:
    """-g and all-groups runs against one address share the state file: a -g run's window holds
    the samples the all-groups runs took in between (the last of each minute), their lag times
    those -g reads (the age of the message at the consumer offset)."""
    for group in ("stuck", "slowing"):
        for minute in range(1, STEPS):
            doc, _, _ = history[group][minute]
            earlier = [history[group][m][0]["queues"] for m in range(minute + 1)]
            for i, q in enumerate(doc["queues"]):
                samples = q["health"]["samples"]
                assert [s["at_ms"] for s in samples] == [T0 + m * MIN for m in range(minute + 1)]
                # the samples before this one: taken by the all-groups runs, as -g read them then
                assert [s["lag_time_ms"] for s in samples] == [e[i]["lag_time_ms"] for e in earlier], (group, minute)
                assert [s["consumer_offset"] for s in samples] == [e[i]["consumer_offset"] for e in earlier]
                assert samples[-1]["lag_time_ms"] > 0


def test_without_clients_a_stopped_group_is_a_stall_that_says_so(history: dict[str, list[Any]]) -> None:
    doc, code, _ = history["all_no_clients"][-1]
    by_group = {g["group"]: g["health"] for g in doc["groups"]}
    assert by_group["stopped"]["status"] == "STALL" and "clients not read" in by_group["stopped"]["reason"]
    assert by_group["idle"]["status"] == "OK"
    assert code == 3


def test_fail_on_and_its_bad_values(timeline: Timeline, history: Any, cli: Any) -> None:
    _, code, _ = run(timeline, group="slowing", fail_on="WARN")
    assert code == 3
    _, code, _ = run(timeline, group="stuck", fail_on="ERR")
    assert code == 0
    for args, words in [
        (("--fail-on", "BAD"), "--fail-on must be one of OK, WARN, STALL, STOP, REWIND, ERR"),
        (("--health-samples", "1"), "--health-samples must be 2 or more"),
        (("--health-max-age", "soon"), "duration"),
    ]:
        res: CliResult = cli("consumerProgress", "-n", timeline.server.namesrv_addr, "--health", *args)
        assert res.code == 2 and words in res.stderr, res.stderr
    addr = timeline.server.namesrv_addr
    for args, words in [
        (
            ("--warn-lag-time", "5m", "--fail-on", "WARN"),
            "--fail-on, --warn-lag-time: options of --health; add --health",
        ),
        (("--health", "--output", "java"), "--health is not for it"),
        (("--health", "--local-store", "."), "give -g"),
        (("--health", "--warn-lag-time", "abc"), "duration"),
    ]:
        res = cli("consumerProgress", "-n", addr, *args)
        assert res.code == 2 and words in res.stderr and res.stderr.count("\n") == 1, (args, res.stderr)


def test_prometheus_status_gauges(timeline: Timeline, history: Any) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    out = io.StringIO()
    now = timeline.now
    for options in ({"group": "stuck"}, {}):
        ctx = Context(address=timeline.server.namesrv_addr, env=Env(stdout=out), output="prometheus", now=now)
        os.environ["MQADMIN_HOME"] = str(timeline.home)  # the autouse fixture puts it back
        result = lookup("consumerProgress").bind(DEFAULTS | options)(ctx)
        ctx.close()
        families = {f.name: f for f in text_string_to_metric_families(result.prometheus_text())}
        groups = {s.labels["group"]: s.value for s in families["mqadmin_group_health_status"].samples}
        if options:
            assert groups == {"stuck": 2.0}
            queues = families["mqadmin_queue_health_status"].samples
            assert {
                (s.labels["topic"], s.labels["queue_id"], s.value) for s in queues if s.labels["topic"] == TOPIC
            } == {
                (TOPIC, "0", 2.0),
                (TOPIC, "1", 2.0),
            }
        else:
            assert groups == {
                g: float(["OK", "WARN", "STALL", "STOP", "REWIND", "ERR"].index(s)) for g, s in EXPECTED.items()
            }


def test_broadcast_group_from_local_offsets(timeline: Timeline, tmp_path: Path) -> None:
    """--local-store: each client's offsets file is a consumer of its own; one moves, one is stuck."""
    mqs = [MessageQueue(TOPIC, "broker-a", q) for q in range(QUEUES)]
    files = {
        c: tmp_path / "collected" / c / ".rocketmq_offsets" / c / "bc" / "offsets.json"
        for c in ("10.0.0.9@m", "10.0.0.9@s")
    }
    local = Timeline(timeline.server, timeline.home, timeline.minute)
    with timeline.server.lock:
        start = timeline.broker().max_offset(TOPIC, 0)
    docs = []
    for _ in range(STEPS):
        local.step()
        with timeline.server.lock:
            end = {mq: timeline.broker().max_offset(TOPIC, mq.queue_id) for mq in mqs}
        for client, path in files.items():
            offsets = {mq: end[mq] - 2 for mq in mqs} if client.endswith("@m") else dict.fromkeys(mqs, start - 5)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(render(OffsetsFile(path, path.parent.name, "", style=JAVA), offsets))
        docs.append(run(local, group="bc", local_store=str(tmp_path / "collected")))
    doc, code, _ = docs[-1]
    by_client = {q["client"]: q["health"]["status"] for q in doc["queues"] if q["topic"] == TOPIC}
    assert by_client == {"10.0.0.9@m": "OK", "10.0.0.9@s": "STALL"}
    assert doc["health"]["status"] == "STALL" and "clients not read" in doc["health"]["reason"]
    assert code == 3
    assert docs[0][0]["health"]["collecting"] is True


@pytest.mark.parametrize("group", [("-g", "stuck"), ()])
def test_status_column_survives_80_columns(timeline: Timeline, tmp_path: Path, group: tuple[str, ...]) -> None:
    """On an 80-column terminal (a pty) the Status column is shown whole, never hidden, for one
    group and for all; a first run's "collecting 1/5" is its widest value."""
    from tests.test_output import run_in_pty

    args = ["consumerProgress", "-n", timeline.server.namesrv_addr, "--health", *group]
    text = run_in_pty(args, 80, tmp_path / "home")
    assert "collecting 1/5" in text, text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if "Status" in line.split())
    assert all(len(line) <= 80 for line in lines), text
    if group:
        rows = [line.split() for line in lines[header + 1 :] if line.startswith(TOPIC)]
        assert len(rows) == QUEUES and all(r[-2:] == ["collecting", "1/5"] for r in rows), text
        assert "Health: OK: collecting (1 of 5 samples)" in text
    else:
        rows = [line.split() for line in lines[header + 1 :] if line.split()[:1] == ["stuck"]]
        assert rows and rows[0][-2:] == ["collecting", "1/5"], text
        assert "Health: 7 of 7 groups OK (6 still collecting)" in " ".join(text.split())


def _watch(timeline: Timeline, group: str, refreshes: int) -> list[dict[str, Any]]:
    """``consumerProgress -g GROUP --health --watch`` for ``refreshes`` refreshes a minute apart
    (from ten minutes after the timeline), in a context of its own; the JSON documents printed."""
    from mqadmin.watch import watch_loop

    clock = {"now": timeline.now + 10 * MIN, "refreshes": 0}
    out = io.StringIO()
    ctx = Context(address=timeline.server.namesrv_addr, env=Env(stdout=out, stderr=io.StringIO()), output="json")
    ctx.clock = lambda: clock["now"]

    def sleep(_: float) -> None:
        clock["refreshes"] += 1
        if clock["refreshes"] == refreshes:
            raise KeyboardInterrupt
        clock["now"] += MIN

    with pytest.raises(KeyboardInterrupt):
        watch_loop(ctx, lookup("consumerProgress").bind(DEFAULTS | {"group": group}), 1, "json", None, sleep=sleep)
    ctx.close()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_watch_keeps_its_samples_in_memory_and_shows_the_status_change(timeline: Timeline, tmp_path: Path) -> None:
    """--watch --health: one sample per refresh, in memory (no state file is written), and the
    status goes from collecting to STALL as the window fills."""
    os.environ["MQADMIN_HOME"] = str(tmp_path / "home")  # the autouse fixture puts it back
    docs = _watch(timeline, "stuck", STEPS + 1)
    statuses = [(d["health"]["status"], d["health"]["collecting"]) for d in docs]
    assert statuses == [("OK", True)] * (STEPS - 1) + [("STALL", False)] * 2
    assert not list((tmp_path / "home" / "state").glob("health-*"))  # the samples stay in memory


def test_each_watch_starts_its_own_window(timeline: Timeline, tmp_path: Path) -> None:
    """A second --watch in the same process (a library caller, or the next test) collects afresh:
    the first one's samples went with its context, even when the new context reuses its memory."""
    os.environ["MQADMIN_HOME"] = str(tmp_path / "home")
    for _ in range(3):
        docs = _watch(timeline, "stuck", 2)
        assert [d["health"]["collecting"] for d in docs] == [True, True]


def test_several_groups_get_each_status_and_one_check(history: dict[str, list[Any]]) -> None:
    """-g A,B --health: each group's status, reason and window are those of the group alone; the
    check fails for each group at --fail-on or worse, in one line."""
    first, code, _ = history["several"][0]
    assert [r["health"]["reason"] for r in first["results"] if r["group"] != "rewound"] == [
        f"collecting (1 of {STEPS} samples)"
    ] * 3
    assert code == 0
    doc, code, _ = history["several"][-1]
    assert [r["group"] for r in doc["results"]] == list(SEVERAL)
    for r in doc["results"]:
        alone = history[r["group"]][-1][0]
        assert r["health"] == alone["health"], r["group"]
        assert [q["health"] for q in r["queues"]] == [q["health"] for q in alone["queues"]]
    assert code == 3
    failed = doc["check_failure"]
    assert failed.startswith("stuck: STALL: ") and "; stopped: STOP: " in failed and "; rewound: REWIND: " in failed
    assert failed.index("stopped:") < failed.index("rewound:") and "healthy:" not in failed


def test_several_groups_watched_and_as_prometheus(timeline: Timeline, history: Any, tmp_path: Path) -> None:
    """--watch -g A,B --health keeps both groups' samples in memory; Prometheus has each group's gauge."""
    from mqadmin.watch import watch_loop

    clock = {"now": timeline.now + 10 * MIN, "refreshes": 0}
    out = io.StringIO()
    ctx = Context(address=timeline.server.namesrv_addr, env=Env(stdout=out, stderr=io.StringIO()), output="json")
    ctx.clock = lambda: clock["now"]

    def sleep(_: float) -> None:
        clock["refreshes"] += 1
        if clock["refreshes"] == STEPS:
            raise KeyboardInterrupt
        clock["now"] += MIN

    os.environ["MQADMIN_HOME"] = str(tmp_path / "home")  # the autouse fixture puts it back
    with pytest.raises(KeyboardInterrupt):
        watch_loop(
            ctx, lookup("consumerProgress").bind(DEFAULTS | {"group": "stuck,idle"}), 1, "json", None, sleep=sleep
        )
    ctx.close()
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [[r["health"]["status"] for r in d["results"]] for d in docs] == [["OK", "OK"]] * (STEPS - 1) + [
        ["STALL", "OK"]
    ]
    assert {q["diff_change"] for q in docs[-1]["results"][0]["queues"]} == {0}
    assert not list((tmp_path / "home" / "state").glob("health-*"))

    from prometheus_client.parser import text_string_to_metric_families

    now = timeline.now
    ctx = Context(address=timeline.server.namesrv_addr, env=Env(stderr=io.StringIO()), output="prometheus", now=now)
    ctx.clock = lambda: now
    os.environ["MQADMIN_HOME"] = str(timeline.home)  # the timeline's samples: the window is full
    try:
        result = lookup("consumerProgress").bind(DEFAULTS | {"group": "stuck,idle"})(ctx)
    finally:
        ctx.close()
    gauges = {
        s.labels["group"]: s.value
        for f in text_string_to_metric_families(result.prometheus_text())  # type: ignore[attr-defined]
        for s in f.samples
        if s.name == "mqadmin_group_health_status"
    }
    assert gauges == {"stuck": 2, "idle": 0}
    assert result.check_failure is not None and result.check_failure.startswith("stuck: STALL")


@pytest.fixture(scope="module", params=["embedded", "tcp"])
def uncommitted_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Groups that never committed an offset: "unstarted" made by updateSubGroup (no retry topic, so
    only -g finds it), "left" whose clients came and went (a retry topic, listed in the all-groups
    view); over TCP also "fresh", a client online on TopicTest (messages waiting), and "quiet", a
    client online on an empty topic."""
    from conftest import store_address

    root: Path = tmp_path_factory.mktemp(f"uncommitted-{request.param}") / "store"
    cluster = MockCluster.create(root, ("broker-a",), version="5.3.3")
    cluster.create_topic(TOPIC, QUEUES)
    cluster.create_topic(QUIET, QUEUES)
    b = cluster.brokers["broker-a"]
    for q in range(QUEUES):
        for _ in range(20):
            b.put_message(Message(topic=TOPIC, body=b"x", properties={}, queue_id=q), store_timestamp=T0)
    b.ensure_group("unstarted", retry_topic=False)
    b.ensure_group("left")
    b.ensure_group("busy")  # a group with offsets beside them, caught up
    for q in range(QUEUES):
        b.update_consumer_offset("busy", TOPIC, q, 20)
    cluster.close()
    with store_address(root, request.param) as address:
        clients = []
        if request.param == "tcp":
            clients = [
                ScriptedConsumer(address, "fresh", TOPIC, client_id="10.0.0.11@fresh"),
                ScriptedConsumer(address, "quiet", QUIET, client_id="10.0.0.12@quiet"),
            ]
        try:
            yield address
        finally:
            for c in clients:
                c.close()


def test_a_group_that_never_committed_is_not_a_silent_ok(uncommitted_store: str, cli: Any) -> None:
    """No committed offset, so no window: the clients and their topics decide. Nobody online (a
    group set up and not started yet) is WARN: shown, not paged at the default --fail-on STALL;
    clients online with messages waiting and nothing committed are STALL; online with nothing to
    consume is OK, and says so."""
    addr = uncommitted_store
    tcp = not addr.startswith("mock://")
    expected = {
        "unstarted": ("WARN", "never consumed: no offset committed on any queue, no client online", 0),
        "left": ("WARN", "never consumed: no offset committed on any queue, no client online", 0),
    }
    if tcp:
        waiting = f"1 client(s) online, no offset committed, {20 * QUEUES} message(s) waiting in {TOPIC}"
        expected["fresh"] = ("STALL", waiting, 3)
        expected["quiet"] = ("OK", f"1 client(s) online, no offset committed yet, nothing to consume ({QUIET})", 0)
    for group, (status, reason, code) in expected.items():
        res = cli("consumerProgress", "-n", addr, "-g", group, "--health", "--json")
        assert res.code == code, (group, res.stderr)
        doc = json.loads(res.stdout)
        assert doc["health"] == {"status": status, "reason": reason, "collecting": False}, group
        assert doc["queues"] == []
        table = cli("consumerProgress", "-n", addr, "-g", group, "--health")
        assert table.code == code and f"Health: {status}: {reason}" in " ".join(table.stdout.split()), table.stdout
    res = cli("consumerProgress", "-n", addr, "-g", "unstarted", "--health", "--fail-on", "WARN")
    assert res.code == 3 and "unstarted: WARN: never consumed" in res.stderr, res.stderr
    # without --health an offline group without offsets stays what it was: unknown to the offsets
    res = cli("consumerProgress", "-n", addr, "-g", "unstarted")
    assert res.code == 2 and "unknown consumer group 'unstarted'" in res.stderr, res.stderr
    assert "a subscription group of that name exists, but no consumer has committed" in res.stderr
    res = cli("consumerProgress", "-n", addr, "-g", "nosuch", "--health")
    assert res.code == 2 and "unknown consumer group 'nosuch'" in res.stderr, res.stderr
    assert "subscription group" not in res.stderr

    # every group: the same verdicts (a group made by updateSubGroup alone is not listed: no retry topic)
    res = cli("consumerProgress", "-n", addr, "--health", "--json")
    assert res.code == (3 if tcp else 0), res.stderr
    by_group = {g["group"]: g["health"] for g in json.loads(res.stdout)["groups"]}
    assert "unstarted" not in by_group
    for group, (status, reason, _) in expected.items():
        if group != "unstarted":
            assert by_group[group] == {"status": status, "reason": reason, "collecting": False, "queues": {}}, group
    assert by_group["busy"]["status"] == "OK"
    prom = cli("consumerProgress", "-n", addr, "--health", "--output", "prometheus")
    assert 'mqadmin_group_health_status{group="left"} 1' in prom.stdout, prom.stdout
    if tcp:
        assert 'mqadmin_group_health_status{group="fresh"} 2' in prom.stdout
    res = cli("consumerProgress", "-n", addr, "--health", "--no-clients", "--json")
    by_group = {g["group"]: g["health"] for g in json.loads(res.stdout)["groups"]}
    for group in ("left", "fresh") if tcp else ("left",):
        assert by_group[group]["status"] == "WARN", by_group[group]
        assert by_group[group]["reason"] == "no offset committed on any queue (clients not read)"
