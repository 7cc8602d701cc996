"""The one reset flow (run_plan) over any offset source: the order of its steps is the safety
promise: nothing moves before the backup is on disk, a declined or dry run moves nothing, and
every apply, failed or not, is read back."""

from __future__ import annotations

import _thread
import io
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Store
from mqadmin.commands._plan import (
    INTERRUPTED_UNKNOWN,
    ApplyError,
    Outcome,
    PlanRow,
    ResetResult,
    outcome_applied,
    outcome_unchanged,
)
from mqadmin.commands._reset import run_plan

from mqadmin import errors
from mqadmin.context import Context
from mqadmin.output import Env
from mqadmin.safety import OffsetBackup


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Recorder:
    """An OffsetSource that records the steps run_plan takes, and what was on disk at each."""

    address = "test:1"

    def __init__(self, fail_apply: bool = False) -> None:
        self.steps: list[str] = []
        self.fail_apply = fail_apply
        self.backup_on_disk_at_apply: bool | None = None
        self.stale: list[tuple[PlanRow, int | None]] = []
        self.hang_apply = False

    def start(self, ctx: Context, result: ResetResult) -> None:
        self.steps.append("start")

    def check(self, ctx: Context, result: ResetResult) -> None:
        self.steps.append("check")

    def question(self, result: ResetResult, changed: list[PlanRow]) -> str:
        return f"move {len(changed)}?"

    def prepare(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        self.steps.append("prepare")

    def moved(self, ctx: Context, result: ResetResult) -> list[tuple[PlanRow, int | None]]:
        self.steps.append("moved")
        return self.stale

    def backup(self, result: ResetResult) -> OffsetBackup:
        self.steps.append("backup")
        rows = [{"broker": q.broker, "queue_id": q.queue_id, "offset": q.old_offset} for q in result.queues]
        return OffsetBackup(result.group, result.topic, self.address, 0, "test", rows)

    def apply(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        self.steps.append("apply")
        if self.hang_apply:
            _thread.interrupt_main()  # Ctrl-C while the write hangs on a stopped broker
            time.sleep(30)
        self.backup_on_disk_at_apply = result.backup is not None and Path(result.backup).is_file()
        if self.fail_apply:
            result.errors.append(ApplyError("b", "refused"))

    def verify(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        self.steps.append("verify")
        for q in changed:
            q.outcome = outcome_unchanged(q.old_offset) if self.fail_apply else outcome_applied(q.new_offset)

    def interrupt(self) -> None:
        self.steps.append("interrupt")

    def settle(self, ctx: Context, result: ResetResult, changed: list[PlanRow], deadline: float) -> None:
        self.steps.append("settle")
        for q in changed:
            q.outcome = INTERRUPTED_UNKNOWN

    def failure_line(self, result: ResetResult) -> str:
        return f"not applied; restore with: {result.undo}"


def _result(dry_run: bool = False, moves: bool = True) -> ResetResult:
    rows = [PlanRow("b", 0, 0, 100, 40, 10 if moves else 40), PlanRow("b", 1, 0, 100, 50, 50)]
    return ResetResult("g", "T", None, dry_run, rows)


def _ctx(answer: str | None = None) -> Context:
    stdin = _Tty(answer) if answer is not None else io.StringIO()
    return Context(address="test:1", env=Env(io.StringIO(), io.StringIO(), stdin), assume_yes=False)


def test_backup_is_on_disk_before_anything_moves(tmp_path: Path) -> None:
    source = Recorder()
    result = run_plan(_ctx(), _result(), source, backup_path=str(tmp_path / "b.json"))
    assert source.steps == ["start", "check", "prepare", "moved", "backup", "apply", "verify"]
    assert source.backup_on_disk_at_apply is True
    saved = json.loads((tmp_path / "b.json").read_text())
    assert [o["offset"] for o in saved["offsets"]] == [40, 50]  # the old offsets, every queue
    assert result.failure is None and result.applied_at is not None


def test_a_failed_apply_is_still_read_back_and_says_how_to_undo(tmp_path: Path) -> None:
    source = Recorder(fail_apply=True)
    result = run_plan(_ctx(), _result(), source, backup_path=str(tmp_path / "b.json"))
    assert source.steps[-2:] == ["apply", "verify"]
    assert result.failure is not None and f"restoreOffset --from {tmp_path / 'b.json'}" in result.failure


def test_declined_on_a_terminal_changes_and_backs_up_nothing(tmp_path: Path) -> None:
    source, ctx = Recorder(), _ctx("n\n")
    asked = ctx.env.stderr
    with pytest.raises(errors.Cancelled):
        run_plan(ctx, _result(), source, backup_path=str(tmp_path / "b.json"))
    assert source.steps == ["start", "check"]
    assert not (tmp_path / "b.json").exists()
    assert isinstance(asked, io.StringIO) and "move 1? [y/N]" in asked.getvalue()


@pytest.mark.parametrize("how", ["dry_run", "export", "nothing_moves"])
def test_dry_run_export_or_nothing_to_move_writes_no_offset(tmp_path: Path, how: str) -> None:
    source = Recorder()
    plan = tmp_path / "plan.csv"
    result = run_plan(
        _ctx(),
        _result(dry_run=how == "dry_run", moves=how != "nothing_moves"),
        source,
        backup_path=str(tmp_path / "b.json"),
        export=str(plan) if how == "export" else None,
    )
    assert source.steps == ["start"] and result.backup is None and not (tmp_path / "b.json").exists()
    if how == "export":
        assert result.exported == str(plan) and result.dry_run and result.address == "test:1"
        assert plan.read_text().splitlines()[1].startswith("g,T,b,0,10,40,")


def test_a_stale_plan_stops_before_the_backup_and_any_write(tmp_path: Path) -> None:
    source, result = Recorder(), _result()
    source.stale = [(result.queues[0], 7)]
    with pytest.raises(errors.MqadminError, match=r"b queue 0: 40 -> 7.*nothing was changed.*--force-stale"):
        run_plan(_ctx(), result, source, backup_path=str(tmp_path / "b.json"))
    assert source.steps == ["start", "check", "prepare", "moved"]
    assert not (tmp_path / "b.json").exists()


def test_force_stale_backs_up_the_offsets_it_replaces(tmp_path: Path) -> None:
    source, result = Recorder(), _result()
    source.stale = [(result.queues[0], 7), (result.queues[1], 55)]  # queue 1 was not planned to move
    ctx = _ctx()
    run_plan(ctx, result, source, backup_path=str(tmp_path / "b.json"), force_stale=True)
    assert source.steps[-3:] == ["backup", "apply", "verify"]
    saved = json.loads((tmp_path / "b.json").read_text())
    assert [o["offset"] for o in saved["offsets"]] == [7, 55]
    assert [(q.old_offset, q.new_offset) for q in result.queues] == [(7, 10), (55, 55)]
    assert isinstance(ctx.env.stderr, io.StringIO) and "--force-stale" in ctx.env.stderr.getvalue()


def test_ctrl_c_during_the_apply_reports_what_is_true_and_how_to_undo(tmp_path: Path) -> None:
    source, result = Recorder(), _result()
    source.hang_apply = True
    started = time.monotonic()
    run_plan(_ctx(), result, source, backup_path=str(tmp_path / "b.json"))
    assert time.monotonic() - started < 5  # the hanging write is left behind
    assert source.steps[-3:] == ["apply", "interrupt", "settle"]
    assert result.interrupted and result.failure is not None and "restoreOffset --from" in result.failure
    outcome = result.queues[0].outcome
    assert outcome is not None and outcome.code is Outcome.INTERRUPTED_UNKNOWN
    assert result.queues[0].detail == "unknown (interrupted; not read back)"


def test_ctrl_c_at_the_question_changes_nothing(tmp_path: Path) -> None:
    class CtrlC(_Tty):
        def readline(self, size: int | None = -1) -> str:
            raise KeyboardInterrupt

    source = Recorder()
    ctx = Context(address="test:1", env=Env(io.StringIO(), io.StringIO(), CtrlC()), assume_yes=False)
    with pytest.raises(errors.InterruptedAtPrompt, match="cancelled, nothing changed") as caught:
        run_plan(ctx, _result(), source, backup_path=str(tmp_path / "b.json"))
    assert caught.value.exit_code == 130 and source.steps == ["start", "check"]
    assert not (tmp_path / "b.json").exists()


def test_a_change_whose_report_cannot_be_written_says_on_stderr_what_it_did(
    make_store: Callable[..., Store], tmp_path: Path
) -> None:
    """stdout on a full disk (/dev/full): the offsets moved, so stderr says so and how to undo."""
    store = make_store(count=80, groups={"g": None})
    argv = [sys.executable, "-m", "mqadmin", "resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest"]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*argv, "--to-earliest", "--yes"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 1, proc.stderr
    assert "8 of 8 queue(s) of group g read back at their planned offsets" in proc.stderr
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr
    undo = [line for line in proc.stderr.splitlines() if line.startswith("Undo: mqadmin restoreOffset --from ")]
    assert len(undo) == 1
    back = subprocess.run([sys.executable, "-m", "mqadmin", *shlex.split(undo[0])[2:]], capture_output=True, text=True)
    assert back.returncode == 0 and "Verified: 8 queues read back" in back.stdout, back.stderr


def test_a_dry_run_whose_report_cannot_be_written_claims_no_change(make_store: Callable[..., Store]) -> None:
    store = make_store(count=80, groups={"g": None})
    argv = [sys.executable, "-m", "mqadmin", "resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest"]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*argv, "--to-earliest", "--dry-run"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 1 and "offsets were changed" not in proc.stderr and "Undo:" not in proc.stderr


def test_a_store_a_server_holds_is_refused_before_the_question(
    make_store: Callable[..., Store], door: str, mqadmin_home: Path
) -> None:
    """mockBroker serving the store holds its lock: the reset says so before it asks, not after y."""
    if door == "tcp":
        pytest.skip("through the server the store is not opened by the command")
    from mqadmin.cli import main
    from mqadmin.mock.cluster import MockCluster

    store = make_store(count=80, groups={"g": None})
    server_side = MockCluster(store.path, writable=True)  # what mockBroker holds while it serves
    try:
        err = io.StringIO()
        stdin = _Tty("y\n")
        code = main(
            ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "--to-earliest"],
            env=Env(io.StringIO(), err, stdin),
        )
    finally:
        server_side.close()
    assert code == 1 and "in use by pid" in err.getvalue(), err.getvalue()
    assert "Apply to" not in err.getvalue() and stdin.tell() == 0  # never asked
    assert not (mqadmin_home / "backups").exists()
