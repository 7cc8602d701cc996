"""Resets under injected faults: what the tool prints is what the brokers hold afterwards.

A two-broker mock server runs in its own process (so it can be SIGKILLed and restarted on the
same store and ports); broker-b is reached through a fault proxy that cuts the connection at an
exact offset write, drops the reply to one, or kills the server right after acknowledging one.
Each case resets every queue from 10 to its time-search offset, checks the exit code and every
per-queue outcome the command printed against the offsets read back afterwards, then pastes the
printed undo line and checks every queue is back exactly.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin.admin import connect
from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import MessageQueue
from mqadmin.output import Env
from tests.support import served
from tests.support.faultproxy import Fault, FaultProxy

pytestmark = pytest.mark.integration

TOPIC, GROUP = "T", "g"
START, END = 1_700_000_000_000, 1_700_000_800_000
#: lands on offset 5 of every queue (80 messages, 8 queues, evenly spread over 800 s)
RESET_TS = str(START + 400_000)
BASELINE = 10
QUEUES = [(b, q) for b in ("broker-a", "broker-b") for q in range(4)]
#: the CLI's per-request timeout in these tests: a dropped reply costs this long
TIMEOUT_S = "2.5"


@dataclass
class Rig:
    store: Path
    server: served.Served
    proxy: FaultProxy
    version: str

    @property
    def namesrv(self) -> str:
        return self.server.namesrv

    def restart(self) -> None:
        self.server = served.start(self.store, advertise={"broker-b": self.proxy.addr}, ports=self.server.ports)
        self.proxy.upstream = self.server.brokers["broker-b"]

    def offsets(self) -> dict[tuple[str, int], int]:
        """Read back through the name server (the proxy passes everything when disarmed)."""
        self.proxy.arm(Fault())
        admin = connect(self.namesrv, timeout=5)
        try:
            return {(b, q): admin.consumer_offset(GROUP, MessageQueue(TOPIC, b, q)) or 0 for b, q in QUEUES}
        finally:
            admin.close()


def make_rig(root: Path, version: str) -> Iterator[Rig]:
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version=version)
    fill_topic(cluster, TOPIC, 80, START, END)
    for broker in cluster.brokers.values():
        commit_at_time(broker, GROUP, TOPIC, None)
    cluster.close()
    yield from serve_rig(root, version)


def serve_rig(root: Path, version: str) -> Iterator[Rig]:
    """Serve the store at ``root`` with broker-b behind a fault proxy; stopped afterwards."""
    proxy = FaultProxy()
    server = served.start(root, advertise={"broker-b": proxy.addr})
    proxy.upstream = server.brokers["broker-b"]
    rig = Rig(root, server, proxy, version)
    try:
        yield rig
    finally:
        rig.server.stop()
        proxy.close()


@pytest.fixture(scope="module")
def rig5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    yield from make_rig(tmp_path_factory.mktemp("faults5") / "store", "5.3.3")


@pytest.fixture(scope="module")
def rig4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    yield from make_rig(tmp_path_factory.mktemp("faults4") / "store", "4.9.8")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    return code, out.getvalue(), err.getvalue()


def reset(rig: Rig, fault: Fault, *, output: str = "json") -> tuple[int, str, str]:
    assert set(rig.offsets().values()) == {BASELINE}
    rig.proxy.arm(fault)
    args = ["resetOffsetByTime", "-n", rig.namesrv, "-g", GROUP, "-t", TOPIC, "-s", RESET_TS, "--yes"]
    return cli(*args, "--timeout", TIMEOUT_S, "--output", output)


#: per queue: (the outcome printed, the planned offset)
Printed = dict[tuple[str, int], tuple[str, int]]


def printed_json(stdout: str) -> Printed:
    doc: dict[str, Any] = json.loads(stdout)
    return {(q["broker"], q["queue_id"]): (q["detail"], q["new_offset"]) for q in doc["queues"]}


def printed_text(stdout: str) -> Printed:
    """The per-queue lines of the plain table: Broker QID Min Max Old New Change Result."""
    found = {}
    for line in stdout.splitlines():
        m = re.match(r"(broker-[ab])\s+(\d)\s+\d+\s+\d+\s+\d+\s+(\d+)\s+re-delivers \d+\s+(.+?)\s*$", line)
        if m:
            found[(m.group(1), int(m.group(2)))] = (m.group(4), int(m.group(3)))
    return found


def check(rig: Rig, code: int, printed: Printed, stderr: str) -> dict[tuple[str, int], str]:
    """Every printed outcome against the offsets read back now."""
    state = rig.offsets()
    assert set(printed) == set(QUEUES), printed
    for key, (outcome, planned) in printed.items():
        assert planned < BASELINE
        if outcome.startswith("applied") or outcome.startswith("acknowledged"):
            assert state[key] == planned, (key, outcome, state)
        elif outcome == "unchanged":
            assert state[key] == BASELINE, (key, outcome, state)
        else:
            assert outcome.startswith("unknown"), (key, outcome)
            assert state[key] in (planned, BASELINE)
    outcomes = {k: o for k, (o, _) in printed.items()}
    all_applied = all(o == "applied" for o in outcomes.values())
    assert code == (0 if all_applied else 1), stderr
    if not all_applied:
        line = stderr.strip().splitlines()[-1]
        # the failure line names the broker by name and address, and the undo command
        assert "broker-b (" in line and "restore with: mqadmin restoreOffset --from" in line and " -n " in line
    return outcomes


def undo_and_check(rig: Rig, undo: str) -> None:
    argv = shlex.split(undo)
    assert argv[:2] == ["mqadmin", "restoreOffset"]
    rig.proxy.arm(Fault())
    code, _, err = cli(*argv[1:], "--yes", "--timeout", "5")
    assert code == 0, err
    assert set(rig.offsets().values()) == {BASELINE}


def run_case(rig: Rig, fault: Fault) -> dict[tuple[str, int], str]:
    code, out, err = reset(rig, fault)
    outcomes = check(rig, code, printed_json(out), err)
    undo_and_check(rig, json.loads(out)["undo"])
    return outcomes


def b_outcomes(outcomes: dict[tuple[str, int], str]) -> list[str]:
    return [outcomes[("broker-b", q)] for q in range(4)]


# ---------------------------------------------------------------------------------------------
# 5.3.3: one INVOKE_BROKER_TO_RESET_OFFSET per queue, so broker-b takes 4 writes


def test_no_fault_applies_and_verifies_everything(rig5: Rig) -> None:
    outcomes = run_case(rig5, Fault())
    assert set(outcomes.values()) == {"applied"}


def test_cut_before_any_write(rig5: Rig) -> None:
    outcomes = run_case(rig5, Fault(cut_at=1))
    assert b_outcomes(outcomes) == ["unchanged"] * 4
    assert all(outcomes[("broker-a", q)] == "applied" for q in range(4))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_cut_after_k_of_4_writes(rig5: Rig, k: int) -> None:
    outcomes = run_case(rig5, Fault(cut_at=k + 1))
    assert b_outcomes(outcomes) == ["applied"] * k + ["unchanged"] * (4 - k)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_reply_dropped_after_the_broker_applied(rig5: Rig, n: int) -> None:
    outcomes = run_case(rig5, Fault(drop_reply_to=n))
    assert b_outcomes(outcomes) == ["applied"] * n + ["unchanged"] * (4 - n)


def test_cut_and_broker_stays_unreachable_reports_unknown(rig5: Rig) -> None:
    code, out, err = reset(rig5, Fault(cut_at=3, stay_down=True))
    outcomes = check(rig5, code, printed_json(out), err)
    assert (
        b_outcomes(outcomes)
        == ["acknowledged (not read back: broker unreachable)"] * 2 + ["unknown (broker unreachable)"] * 2
    )
    undo_and_check(rig5, json.loads(out)["undo"])


@pytest.mark.parametrize("k", [1, 3])
def test_printed_table_lines_match_the_state(rig5: Rig, k: int) -> None:
    code, out, err = reset(rig5, Fault(cut_at=k + 1), output="table")
    check(rig5, code, printed_text(out), err)
    assert f"Verified: {4 + k} of 8 queues read back at their planned offsets" in out
    undo = re.search(r"^Undo: (.+)$", out, re.M)
    assert undo is not None
    undo_and_check(rig5, undo.group(1))


@pytest.mark.parametrize("n", [1, 4])
def test_broker_killed_right_after_the_acknowledgement(rig5: Rig, n: int) -> None:
    rig = rig5
    code, out, err = reset(rig, Fault(after_reply_to=n, hook=rig.server.kill))
    assert code == 1
    assert [o for o, _ in list(printed_json(out).values())[4:]][:n] == [
        "acknowledged (not read back: broker unreachable)"
    ] * n
    rig.server.kill()  # already dead: reap it
    rig.restart()
    check(rig, code, printed_json(out), err)  # every acknowledged write survived the crash
    undo_and_check(rig, json.loads(out)["undo"])


# ---------------------------------------------------------------------------------------------
# 4.9.8: no consumer online, so the reset is one UPDATE_CONSUMER_OFFSET per queue


def run4(rig: Rig, fault: Fault) -> dict[tuple[str, int], str]:
    rig.proxy.codes = frozenset({15})
    return run_case(rig, fault)


def test_4x_cut_before_any_write(rig4: Rig) -> None:
    assert b_outcomes(run4(rig4, Fault(cut_at=1))) == ["unchanged"] * 4


@pytest.mark.parametrize("k", [1, 2, 3])
def test_4x_cut_after_k_of_4_writes(rig4: Rig, k: int) -> None:
    assert b_outcomes(run4(rig4, Fault(cut_at=k + 1))) == ["applied"] * k + ["unchanged"] * (4 - k)


@pytest.mark.parametrize("n", [2, 4])
def test_4x_reply_dropped_after_the_broker_applied(rig4: Rig, n: int) -> None:
    assert b_outcomes(run4(rig4, Fault(drop_reply_to=n))) == ["applied"] * n + ["unchanged"] * (4 - n)


def test_4x_broker_killed_right_after_the_acknowledgement(rig4: Rig) -> None:
    rig = rig4
    rig.proxy.codes = frozenset({15})
    code, out, err = reset(rig, Fault(after_reply_to=2, hook=rig.server.kill))
    assert code == 1
    assert [o for o, _ in list(printed_json(out).values())[4:6]] == [
        "acknowledged (not read back: broker unreachable)"
    ] * 2
    rig.server.kill()
    rig.restart()
    check(rig, code, printed_json(out), err)
    undo_and_check(rig, json.loads(out)["undo"])
