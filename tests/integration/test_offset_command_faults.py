"""skipAccumulatedMessage and cloneGroupOffset under injected faults, as resetOffsetByTime is
tested in test_reset_faults: broker-b is reached through a fault proxy that cuts the connection
at an exact offset write or drops a reply; what the command prints per queue must be what the
brokers hold afterwards, and the printed undo line must put every queue back exactly.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import MessageQueue
from mqadmin.safety import OffsetBackup
from tests.integration.test_reset_faults import END, QUEUES, START, TIMEOUT_S, TOPIC, Rig, cli, serve_rig
from tests.support.faultproxy import WRITE_CODES, Fault

pytestmark = pytest.mark.integration

#: a second topic of the group (--all-topics moves both in one change)
TOPIC2 = "T2"
GROUP, SOURCE = "g", "src"  # the group moved (skip, shift) or cloned into; the clone's source
#: 10 messages per queue; the group is at 5 of each, the clone source at 2
MAX = 10
BASELINE = 5


def make_rig(root: Path, version: str) -> Iterator[Rig]:
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version=version)
    for topic in (TOPIC, TOPIC2):
        fill_topic(cluster, topic, 80, START, END)
    for broker in cluster.brokers.values():
        for group, topic, offset in ((GROUP, TOPIC, BASELINE), (SOURCE, TOPIC, 2), (GROUP, TOPIC2, BASELINE)):
            commit_at_time(broker, group, topic, None)  # makes the group known, then the exact offsets
            for q in range(4):
                broker.update_consumer_offset(group, topic, q, offset)
    cluster.close()
    yield from serve_rig(root, version)


@pytest.fixture(scope="module")
def rig5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    yield from make_rig(tmp_path_factory.mktemp("cmdfaults5") / "store", "5.3.3")


@pytest.fixture(scope="module")
def rig4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    yield from make_rig(tmp_path_factory.mktemp("cmdfaults4") / "store", "4.9.8")


def state(rig: Rig, group: str = GROUP, topic: str = TOPIC) -> dict[tuple[str, int], int]:
    rig.proxy.arm(Fault())
    admin = connect(rig.namesrv, timeout=5)
    try:
        return {(b, q): admin.consumer_offset(group, MessageQueue(topic, b, q)) or 0 for b, q in QUEUES}
    finally:
        admin.close()


def run(rig: Rig, command: str, fault: Fault, output: str) -> tuple[int, str, str]:
    before = state(rig)
    assert set(before.values()) == {BASELINE}, before
    args = {
        "skipAccumulatedMessage": ("skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC),
        "cloneGroupOffset": ("cloneGroupOffset", "-s", SOURCE, "-d", GROUP, "-t", TOPIC),
        "--shift-by": ("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "--shift-by", "-3"),
    }[command]
    rig.proxy.arm(fault)
    return cli(*args, "-n", rig.namesrv, "--yes", "--timeout", TIMEOUT_S, "--output", output)


def printed(out: str, output: str) -> dict[tuple[str, int], tuple[str, int]]:
    """Per queue: (the outcome printed, the planned offset), from the JSON or the plain table."""
    if output == "json":
        doc: dict[str, Any] = json.loads(out)
        return {(q["broker"], q["queue_id"]): (q["detail"], q["new_offset"]) for q in doc["queues"]}
    found = {}
    for line in out.splitlines():
        m = re.match(r"(broker-[ab])\s+(\d)\s+\d+\s+\d+\s+\d+\s+(\d+)\s+(?:skips|re-delivers) \d+\s+(.+?)\s*$", line)
        if m:
            found[(m.group(1), int(m.group(2)))] = (m.group(4), int(m.group(3)))
    return found


def check_and_undo(rig: Rig, code: int, out: str, err: str, output: str, planned_at: int) -> list[str]:
    rows = printed(out, output)
    now = state(rig)
    assert set(rows) == set(QUEUES), out
    for key, (outcome, planned) in rows.items():
        assert planned == planned_at, (key, planned)
        if outcome.startswith(("applied", "acknowledged")):
            assert now[key] == planned, (key, outcome, now)
        elif outcome == "unchanged":
            assert now[key] == BASELINE, (key, outcome, now)
        else:
            assert outcome.startswith("unknown"), (key, outcome)
            assert now[key] in (planned, BASELINE)
    all_applied = all(o == "applied" for o, _ in rows.values())
    assert code == (0 if all_applied else 1), err
    if output == "json":
        undo = json.loads(out)["undo"]
    else:
        m = re.search(r"^Undo: (.+)$", out, re.M)
        assert m is not None, out
        undo = m.group(1)
    if not all_applied:
        assert f"restore with: {undo}" in err.strip().splitlines()[-1]
    argv = shlex.split(undo)
    rig.proxy.arm(Fault())
    back, _, back_err = cli(*argv[1:], "--yes", "--timeout", "5")
    assert back == 0, back_err
    assert set(state(rig).values()) == {BASELINE}
    return [rows[("broker-b", q)][0] for q in range(4)]


#: what each case runs -> the offset it plans on every queue
COMMANDS = {"skipAccumulatedMessage": MAX, "cloneGroupOffset": 2, "--shift-by": BASELINE - 3}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("k", [0, 2])
def test_cut_after_k_of_4_writes(rig5: Rig, command: str, k: int) -> None:
    code, out, err = run(rig5, command, Fault(cut_at=k + 1), "json")
    outcomes = check_and_undo(rig5, code, out, err, "json", COMMANDS[command])
    assert outcomes == ["applied"] * k + ["unchanged"] * (4 - k)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_printed_table_matches_the_state_after_a_cut(rig5: Rig, command: str) -> None:
    code, out, err = run(rig5, command, Fault(cut_at=2), "table")
    outcomes = check_and_undo(rig5, code, out, err, "table", COMMANDS[command])
    assert outcomes == ["applied"] + ["unchanged"] * 3
    assert "Verified: 5 of 8 queues read back at their planned offsets" in out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_reply_dropped_after_the_broker_applied(rig5: Rig, command: str) -> None:
    code, out, err = run(rig5, command, Fault(drop_reply_to=3), "json")
    outcomes = check_and_undo(rig5, code, out, err, "json", COMMANDS[command])
    assert outcomes == ["applied"] * 3 + ["unchanged"]


def test_broker_unreachable_after_the_cut_is_unknown(rig5: Rig) -> None:
    code, out, err = run(rig5, "skipAccumulatedMessage", Fault(cut_at=3, stay_down=True), "json")
    outcomes = check_and_undo(rig5, code, out, err, "json", MAX)
    assert outcomes == ["acknowledged (not read back: broker unreachable)"] * 2 + ["unknown (broker unreachable)"] * 2


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_4x_cut_after_2_of_4_writes(rig4: Rig, command: str) -> None:
    rig4.proxy.codes = frozenset({15})  # no consumer online: one UPDATE_CONSUMER_OFFSET per queue
    code, out, err = run(rig4, command, Fault(cut_at=3), "json")
    outcomes = check_and_undo(rig4, code, out, err, "json", COMMANDS[command])
    assert outcomes == ["applied"] * 2 + ["unchanged"] * 2


def test_two_topics_cut_mid_apply_one_undo_restores_both(rig5: Rig) -> None:
    """--all-topics: broker-b takes 8 writes (4 queues of each topic); cut at the 3rd. What is
    printed per (topic, queue) is what the brokers hold, and the one undo line restores both."""
    for topic in (TOPIC, TOPIC2):
        assert set(state(rig5, topic=topic).values()) == {BASELINE}
    rig5.proxy.arm(Fault(cut_at=3))
    args = ("resetOffsetByTime", "-g", GROUP, "--all-topics", "--shift-by", "-3", "-n", rig5.namesrv, "--yes")
    code, out, err = cli(*args, "--timeout", TIMEOUT_S, "--json")
    assert code == 1, err
    doc: dict[str, Any] = json.loads(out)
    now = {t: state(rig5, topic=t) for t in (TOPIC, TOPIC2)}
    assert {q["topic"] for q in doc["queues"]} == {TOPIC, TOPIC2}
    for q in doc["queues"]:
        held = now[q["topic"]][(q["broker"], q["queue_id"])]
        if q["outcome"] == "applied":
            assert held == q["new_offset"] == BASELINE - 3, q
        else:
            assert q["outcome"] == "unchanged" and held == BASELINE, q
    b_applied = [q for q in doc["queues"] if q["broker"] == "broker-b" and q["outcome"] == "applied"]
    assert len(b_applied) == 2
    saved = json.loads(Path(doc["backup"]).read_text())
    assert {o["topic"] for o in saved["offsets"]} == {TOPIC, TOPIC2}
    assert f"restore with: {doc['undo']}" in err.strip().splitlines()[-1]
    rig5.proxy.arm(Fault())
    back, _, back_err = cli(*shlex.split(doc["undo"])[1:], "--yes", "--timeout", "5")
    assert back == 0, back_err
    for topic in (TOPIC, TOPIC2):
        assert set(state(rig5, topic=topic).values()) == {BASELINE}


#: planning reads a broker's queue bounds in one GET_TOPIC_STATS_INFO; the check before the
#: question reads one queue's max offset (GET_MAX_OFFSET) on every planned broker
GET_MAX_OFFSET, GET_TOPIC_STATS_INFO = 30, 202


def test_unreachable_broker_refuses_every_offset_command_before_any_backup(rig5: Rig, tmp_path: Path) -> None:
    """broker-b refuses connections: each command fails naming it, with no backup and no write
    on the live broker-a."""
    saved = tmp_path / "saved.json"
    rows = [{"broker": b, "queue_id": q, "offset": 0} for b, q in QUEUES]
    OffsetBackup(GROUP, TOPIC, rig5.namesrv, 0, "test", rows).write(saved)
    backup = tmp_path / "new.json"
    commands = [
        ("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(START)),
        ("restoreOffset", "--from", str(saved)),
        ("skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC),
        ("cloneGroupOffset", "-s", SOURCE, "-d", GROUP, "-t", TOPIC),
    ]
    for args in commands:
        assert set(state(rig5).values()) == {BASELINE}
        rig5.proxy.down = True
        rig5.proxy.cut_all()
        code, out, err = cli(*args, "-n", rig5.namesrv, "--yes", "--timeout", TIMEOUT_S, "--backup", str(backup))
        assert code == 1 and rig5.proxy.addr in err and out == "", (args, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not backup.exists(), args
        assert set(state(rig5).values()) == {BASELINE}, args


@pytest.mark.parametrize("command", ["skipAccumulatedMessage", "--shift-by"])
def test_broker_gone_after_planning_refuses_before_the_backup(rig5: Rig, command: str, mqadmin_home: Path) -> None:
    """broker-b answered the plan's reads, then stopped answering: the check before the question
    finds it, names it, and nothing is backed up or written anywhere."""
    rig5.proxy.codes = frozenset({GET_MAX_OFFSET, GET_TOPIC_STATS_INFO})
    try:
        code, out, err = run(rig5, command, Fault(cut_at=2, stay_down=True), "json")
        assert rig5.proxy.writes == 2, "planning read broker-b's bounds in one request, the check a max offset"
    finally:
        rig5.proxy.codes = WRITE_CODES
    assert code == 1 and out == "", (out, err)
    line = err.strip().splitlines()[-1]
    assert "broker-b did not answer" in line and "nothing was changed" in line, err
    assert not (mqadmin_home / "backups").exists()  # where the backup would have gone
    assert set(state(rig5).values()) == {BASELINE}


def test_query_offset_answers_for_the_live_broker_and_names_the_silent_one(rig5: Rig) -> None:
    """broker-b refuses connections: broker-a's queues are shown, broker-b is named on stderr and
    under missing_brokers, exit 1; --partial accepts the answer (exit 0)."""
    args = ("queryOffset", "-n", rig5.namesrv, "-t", TOPIC, "-g", GROUP, "-s", str(START), "--timeout", TIMEOUT_S)
    try:
        rig5.proxy.down = True
        rig5.proxy.cut_all()
        for partial, code_wanted in ((False, 1), (True, 0)):
            code, out, err = cli(*args, "--json", *(["--partial"] if partial else []))
            assert code == code_wanted, (partial, out, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "broker-b did not answer" in lines[0] and rig5.proxy.addr in lines[0], err
            assert ("--partial accepts that" in lines[0]) is not partial
            doc: dict[str, Any] = json.loads(out)
            assert [(q["broker"], q["queue_id"]) for q in doc["queues"]] == [("broker-a", q) for q in range(4)]
            assert all(q["consumer_offset"] == BASELINE and q["lag"] == MAX - BASELINE for q in doc["queues"])
            assert all(q["offset_at_time"] == 0 for q in doc["queues"])
            assert [m["broker"] for m in doc["missing_brokers"]] == ["broker-b"]
        code, out, err = cli(*args)
        assert code == 1 and "Missing: broker-b did not answer" in out and "broker-b" not in out.split("Missing")[0]
    finally:
        rig5.proxy.arm(Fault())
    code, out, err = cli(*args, "--json")  # all brokers answer: the document has no missing_brokers
    assert code == 0 and "missing_brokers" not in json.loads(out) and err == "", err
    code, _, err = cli("queryOffset", "-n", rig5.namesrv, "-t", f"{TOPIC},{TOPIC2}", "--partial")
    assert code == 2 and "--partial takes one topic" in err


def _progress(rig: Rig, *args: str, timeout: str = TIMEOUT_S) -> tuple[int, str, str, float]:
    started = time.monotonic()
    code, out, err = cli("consumerProgress", "-n", rig.namesrv, "--timeout", timeout, *args)
    return code, out, err, time.monotonic() - started


def _one_missing_line(err: str, rig: Rig, partial: bool) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "broker-b did not answer" in lines[0] and rig.proxy.addr in lines[0], err
    assert ("--partial accepts that" in lines[0]) is not partial, err
    assert lines[0].startswith("mqadmin: warning:" if partial else "mqadmin: error:"), err


@pytest.mark.parametrize("one_group", [True, False], ids=["-g", "all-groups"])
def test_consumer_progress_answers_for_the_live_broker_and_names_the_silent_one(rig5: Rig, one_group: bool) -> None:
    """broker-b refuses connections: broker-a's figures are shown, broker-b is named on stderr,
    under the table and under missing_brokers; exit 1, and 0 with --partial; in well under a timeout."""
    group_args = ("-g", GROUP) if one_group else ()
    try:
        rig5.proxy.down = True
        rig5.proxy.cut_all()
        for partial, code_wanted in ((False, 1), (True, 0)):
            code, out, err, took = _progress(rig5, *group_args, "--json", *(["--partial"] if partial else []))
            assert code == code_wanted, (partial, out, err)
            assert took < float(TIMEOUT_S), took  # refused, not waited for
            _one_missing_line(err, rig5, partial)
            doc: dict[str, Any] = json.loads(out)
            assert [m["broker"] for m in doc["missing_brokers"]] == ["broker-b"]
            assert rig5.proxy.addr in doc["missing_brokers"][0]["error"]
            if one_group:
                user = [q for q in doc["queues"] if q["topic"] in (TOPIC, TOPIC2)]
                assert {q["broker"] for q in doc["queues"]} == {"broker-a"} and len(user) == 8, doc
                assert all(q["consumer_offset"] == BASELINE and q["diff"] == MAX - BASELINE for q in user)
                assert doc["diff_total"] == 8 * (MAX - BASELINE)
            else:  # each group's totals are broker-a's share alone
                assert {g["group"]: g["diff_total"] for g in doc["groups"]} == {GROUP: 40, SOURCE: 4 * (MAX - 2)}
        code, out, err, _ = _progress(rig5, *group_args)
        assert code == 1 and "Missing: broker-b did not answer" in out, out
        assert "broker-b" not in out.split("Missing")[0], out
    finally:
        rig5.proxy.arm(Fault())
    code, out, err, _ = _progress(rig5, *group_args, "--json")  # all brokers answer: no missing_brokers
    doc = json.loads(out)
    assert code == 0 and "missing_brokers" not in doc and err == "", err
    if not one_group:
        assert {g["group"]: g["diff_total"] for g in doc["groups"]} == {GROUP: 80, SOURCE: 2 * 4 * (MAX - 2)}


def test_consumer_progress_partial_prometheus_and_checks(rig5: Rig) -> None:
    """--output prometheus leaves the silent broker's series out and still fails (exit 1) unless
    --partial; a check that passes on the live broker's figures does not pass silently."""
    try:
        rig5.proxy.down = True
        rig5.proxy.cut_all()
        code, out, err, _ = _progress(rig5, "-g", GROUP, "--output", "prometheus")
        assert code == 1 and 'broker="broker-a"' in out and "broker-b" not in out, out
        _one_missing_line(err, rig5, partial=False)
        code, out, err, _ = _progress(rig5, "-g", GROUP, "--output", "prometheus", "--partial")
        assert code == 0 and 'broker="broker-a"' in out and "broker-b" not in out, out
        _one_missing_line(err, rig5, partial=True)
        code, out, err, _ = _progress(rig5, "--max-lag", "100")  # passes on broker-a's share
        assert code == 1, (out, err)
        _one_missing_line(err, rig5, partial=False)
        code, out, err, _ = _progress(rig5, "--max-lag", "100", "--partial")
        assert code == 0, (out, err)
        _one_missing_line(err, rig5, partial=True)
        code, out, err, _ = _progress(rig5, "--max-lag", "1", "--partial")  # a breach is still a breach
        assert code == 3 and f"{GROUP}: Diff Total 40 > --max-lag 1" in err, err
        code, out, err, _ = _progress(rig5, "--max-lag", "1")  # both said, in the check's line (exit 3)
        assert code == 3 and "Diff Total 40 > --max-lag 1" in err and "broker-b did not answer" in err, err
    finally:
        rig5.proxy.arm(Fault())
    code, _, err = cli("consumerProgress", "--local-store", "/nonexistent", "--partial")
    assert code == 2 and "--partial" in err and "--local-store" in err, err


def test_consumer_progress_hung_broker_costs_a_few_timeouts_not_one_per_group(rig5: Rig) -> None:
    """broker-b accepts connections and never answers: one group and all groups still answer for
    broker-a, naming broker-b, within a bounded number of timeouts (no retry per group)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    timeout = 0.5
    try:
        rig5.proxy.upstream = f"127.0.0.1:{silent.getsockname()[1]}"
        rig5.proxy.cut_all()
        for group_args in (("-g", GROUP), ()):
            code, out, err, took = _progress(rig5, *group_args, "--json", "--partial", timeout=str(timeout))
            assert code == 0, (out, err)
            _one_missing_line(err, rig5, partial=True)
            assert [m["broker"] for m in json.loads(out)["missing_brokers"]] == ["broker-b"]
            # GET_BROKER_CONSUME_STATS may take 10 timeouts (a big broker's answer), then one
            # round of connection look-ups: never a timeout per group
            assert took < 14 * timeout, (group_args, took)
    finally:
        rig5.proxy.upstream = rig5.server.brokers["broker-b"]
        rig5.proxy.arm(Fault())
        silent.close()


#: a replay window inside the seeded span: some of each queue's messages, not all
WINDOW = (str(START + 200_000), str(START + 600_000))


def _window_records(rig: Rig, brokers: tuple[str, ...]) -> list[tuple[str, int, int, int]]:
    """(broker, queue id, offset, store time) of every message of the window on ``brokers``, read
    straight from the brokers (in output order: queue, then offset)."""
    rig.proxy.arm(Fault())
    admin = connect(rig.namesrv, timeout=5)
    begin, end = (int(t) for t in WINDOW)
    try:
        return [
            (b, q, m.queue_offset, m.store_timestamp)
            for b, q in QUEUES
            if b in brokers
            for m in admin.pull(MessageQueue(TOPIC, b, q), 0, 32).messages
            if begin <= m.store_timestamp < end
        ]
    finally:
        admin.close()


def _replay(rig: Rig, dest: Path, *args: str, timeout: str = TIMEOUT_S) -> tuple[int, str, str, float]:
    started = time.monotonic()
    code, out, err = cli(
        "rangeReplay", "-n", rig.namesrv, "-t", TOPIC, "-b", WINDOW[0], "-e", WINDOW[1],
        "--to", f"jsonl:{dest}", "--timeout", timeout, *args,
    )  # fmt: skip
    return code, out, err, time.monotonic() - started


def _written(dest: Path) -> list[tuple[str, int, int, int]]:
    rows = [json.loads(line) for line in dest.read_text().splitlines()]
    return [(r["broker"], r["queue_id"], r["queue_offset"], r["store_timestamp"]) for r in rows]


def test_range_replay_replays_the_live_broker_and_names_the_silent_one(rig5: Rig, tmp_path: Path) -> None:
    """broker-b refuses connections while planning: broker-a's messages of the window, exactly,
    are written; broker-b is named on stderr, in the summary and under missing_brokers; exit 1,
    0 with --partial. A checkpoint never holds a partial plan."""
    only_a, both = _window_records(rig5, ("broker-a",)), _window_records(rig5, ("broker-a", "broker-b"))
    assert 0 < len(only_a) < len(both) < 80
    try:
        rig5.proxy.down = True
        rig5.proxy.cut_all()
        for partial, code_wanted in ((False, 1), (True, 0)):
            dest = tmp_path / f"partial-{partial}.jsonl"
            code, out, err, took = _replay(rig5, dest, "--json", *(["--partial"] if partial else []))
            assert code == code_wanted, (partial, out, err)
            assert took < float(TIMEOUT_S), took  # refused, not waited for
            _one_missing_line(err, rig5, partial)
            assert _written(dest) == only_a
            doc: dict[str, Any] = json.loads(out)
            assert [m["broker"] for m in doc["missing_brokers"]] == ["broker-b"]
            assert rig5.proxy.addr in doc["missing_brokers"][0]["error"]
            assert {q["broker"] for q in doc["queues"]} == {"broker-a"}
            assert doc["written"] == doc["total_messages"] == len(only_a)
        dest = tmp_path / "table.jsonl"
        code, out, err, _ = _replay(rig5, dest)
        assert code == 1 and _written(dest) == only_a, err
        assert "Missing: broker-b did not answer" in out and "the window is incomplete" in out, out
        assert "broker-b" not in out.split("Missing")[0], out
        code, out, err, _ = _replay(rig5, tmp_path / "dry.jsonl", "--dry-run", "--partial", "--json")
        assert code == 0 and json.loads(out)["total_messages"] == len(only_a), err
        assert not (tmp_path / "dry.jsonl").exists()
        # a checkpoint holds a whole plan: without --partial the silent broker fails the command
        # before anything is written or recorded; with --partial it is a usage error
        cp, dest = tmp_path / "cp.json", tmp_path / "cp.jsonl"
        code, out, err, _ = _replay(rig5, dest, "--checkpoint", str(cp))
        assert code == 1 and rig5.proxy.addr in err and out == "", (out, err)
        assert not cp.exists() and not dest.exists()
        for refused in (("--checkpoint", str(cp)), ("--engine", "spark")):
            code, out, err, _ = _replay(rig5, dest, "--partial", *refused)
            assert code == 2 and len(err.strip().splitlines()) == 1 and "--partial" in err, err
            assert out == "" and not cp.exists()
    finally:
        rig5.proxy.arm(Fault())
    dest = tmp_path / "all.jsonl"
    code, out, err, _ = _replay(rig5, dest, "--json")  # all brokers answer: the whole window
    assert code == 0 and "missing_brokers" not in json.loads(out) and err == "", err
    assert _written(dest) == both


def test_range_replay_hung_broker_is_left_out_in_bounded_time(rig5: Rig, tmp_path: Path) -> None:
    """broker-b accepts connections and never answers: --partial replays broker-a's messages of
    the window exactly, names broker-b, exit 0, within a few timeouts; records to stdout."""
    only_a = _window_records(rig5, ("broker-a",))
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    timeout = 0.5
    try:
        rig5.proxy.upstream = f"127.0.0.1:{silent.getsockname()[1]}"
        rig5.proxy.cut_all()
        dest = tmp_path / "hung.jsonl"
        code, out, err, took = _replay(rig5, dest, "--json", "--partial", timeout=str(timeout))
        assert code == 0 and _written(dest) == only_a, (out, err)
        _one_missing_line(err, rig5, partial=True)
        assert [m["broker"] for m in json.loads(out)["missing_brokers"]] == ["broker-b"]
        assert took < 14 * timeout, took
        started = time.monotonic()
        code, out, err = cli(
            "rangeReplay", "-n", rig5.namesrv, "-t", TOPIC, "-b", WINDOW[0], "-e", WINDOW[1],
            "--timeout", str(timeout),
        )  # fmt: skip
        took = time.monotonic() - started
        assert code == 1 and took < 14 * timeout, (err, took)
        rows = [json.loads(line) for line in out.splitlines()]
        assert [(r["broker"], r["queue_id"], r["queue_offset"], r["store_timestamp"]) for r in rows] == only_a
        assert "Missing: broker-b did not answer" in err and "the window is incomplete" in err, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("mqadmin: error:") and "broker-b did not answer" in last, err
    finally:
        rig5.proxy.upstream = rig5.server.brokers["broker-b"]
        rig5.proxy.arm(Fault())
        silent.close()
