"""Ctrl-C while offsets are being written, as a person at a terminal does it: the broker (a mock
server in its own process, broker-b behind a fault proxy that holds back the reply to one write)
is SIGSTOPped mid-apply and ``\\x03`` is written to the pty. The report must not be cut short:
the per-queue outcomes, equal to what the brokers hold, the backup and the Undo line, exit 130."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin.admin import connect
from mqadmin.model import MessageQueue
from tests.integration.test_reset_faults import BASELINE, GROUP, QUEUES, RESET_TS, TOPIC, Rig, make_rig, undo_and_check
from tests.support.faultproxy import Fault
from tests.support.terminal import Terminal

pytestmark = pytest.mark.integration

#: where RESET_TS lands on broker-a's queues (on broker-b's, the 4.x nearest search lands on 4)
PLANNED = 5
#: the table's cell borders (rich on a terminal)
BORDERS = re.compile(r"\s*[│┃|]\s*")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    yield from make_rig(tmp_path_factory.mktemp("interrupt") / "store", "4.9.8")


def _start(rig: Rig) -> Terminal:
    """The reset on a terminal, the reply to broker-b's second offset write held back (its
    first write is the pushed reset a 4.x broker refuses with no consumer online)."""
    assert set(rig.offsets().values()) == {BASELINE}
    rig.proxy.arm(Fault(drop_reply_to=3))
    argv = [sys.executable, "-m", "mqadmin", "resetOffsetByTime", "-n", rig.namesrv, "-g", GROUP, "-t", TOPIC]
    term = Terminal([*argv, "-s", RESET_TS, "--yes", "--timeout", "20"], cols=200, rows=60)
    term.wait_for(lambda s: "backup of the current offsets" in s, 30)
    admin = connect(rig.namesrv, timeout=5)
    try:  # broker-a took all its writes; broker-b got its second write, whose reply never comes
        deadline = time.monotonic() + 15
        while rig.proxy.writes < 3 or any(
            admin.consumer_offset(GROUP, MessageQueue(TOPIC, "broker-a", q)) == BASELINE for q in range(4)
        ):
            assert time.monotonic() < deadline, term.text()
            term.pump(0.05)
    finally:
        admin.close()
    # (broker-b is not read here: the proxy matches replies by opaque, and would drop ours too)
    settle = time.monotonic() + 0.5  # time for broker-b to apply that write
    while time.monotonic() < settle:
        term.pump(0.05)
    os.kill(rig.server.proc.pid, signal.SIGSTOP)
    term.send("\x03")
    return term


def _report(screen: str) -> tuple[dict[tuple[str, int], tuple[str, int]], str]:
    """Per queue the printed outcome and planned offset, and the Undo line."""
    rows = {}
    for line in screen.splitlines():
        cells = BORDERS.split(line.strip())
        if len(cells) == 8 and cells[0].startswith("broker-"):  # Broker QID Min Max Old New Change Result
            assert int(cells[4]) == BASELINE, line
            rows[(cells[0], int(cells[1]))] = (cells[7], int(cells[5]))
    undo = re.search(r"Undo: (mqadmin restoreOffset .+)$", screen, re.M)
    assert undo is not None and set(rows) == set(QUEUES), screen
    return rows, undo.group(1).strip()


def test_ctrl_c_mid_apply_prints_every_outcome_and_the_undo(rig: Rig) -> None:
    with _start(rig) as term:
        time.sleep(0.5)
        os.kill(rig.server.proc.pid, signal.SIGCONT)  # back within the read-back's bound
        code = term.wait(15)
        screen = term.text()
    assert code == 130, screen
    printed, undo = _report(screen)
    state = rig.offsets()
    for key, (outcome, planned) in printed.items():  # what it printed is what the brokers hold
        assert outcome == ("applied" if state[key] == planned else "unchanged"), (key, outcome, state[key])
    # broker-b applied its first two writes (the second's reply never came); no write was sent after Ctrl-C
    assert [o for o, _ in printed.values()] == ["applied"] * 6 + ["unchanged"] * 2
    assert [state[("broker-b", q)] for q in range(4)] == [printed[("broker-b", 0)][1]] * 2 + [BASELINE] * 2
    assert "interrupted: partly applied" in screen and "Backup: " in screen
    undo_and_check(rig, undo)


def test_a_second_ctrl_c_abandons_the_read_back_and_still_prints_the_undo(rig: Rig) -> None:
    try:
        with _start(rig) as term:
            term.wait_for(lambda s: "Ctrl-C again to stop waiting" in s, 10)
            started = time.monotonic()
            term.send("\x03")
            code = term.wait(10)
            took = time.monotonic() - started
            screen = term.text()
    finally:
        os.kill(rig.server.proc.pid, signal.SIGCONT)
    assert code == 130 and took < 2.0, screen
    printed, undo = _report(screen)
    assert {o for o, _ in printed.values()} == {"unknown (interrupted; not read back)"}
    assert Path(undo.split("--from ", 1)[1].split()[0]).is_file()
    undo_and_check(rig, undo)


def test_ctrl_c_at_the_question_changes_nothing(rig: Rig, mqadmin_home: Path) -> None:
    assert set(rig.offsets().values()) == {BASELINE}
    argv = [sys.executable, "-m", "mqadmin", "resetOffsetByTime", "-n", rig.namesrv, "-g", GROUP, "-t", TOPIC]
    with Terminal([*argv, "-s", RESET_TS], cols=200, rows=60) as term:
        term.wait_for(lambda s: "Apply to 8 queue(s) of group g on cluster" in s and "[y/N]" in s, 30)
        term.send("\x03")
        code = term.wait(10)
        screen = term.text()
    assert code == 130 and "cancelled, nothing changed" in screen and "Traceback" not in screen, screen
    assert set(rig.offsets().values()) == {BASELINE} and not (mqadmin_home / "backups").exists()
