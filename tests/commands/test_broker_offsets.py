"""BrokerOffsets refuses before the question and the backup when a planned broker cannot take
the write: its master is not online (the name server lists only its slave), or it does not
answer. Offsets live on the master; a slave's copy would be overwritten when it is back."""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import HOUR_MS, CliResult, Store

from mqadmin.cli import main
from mqadmin.model import TopicRoute
from mqadmin.output import Env
from mqadmin.safety import OffsetBackup
from tests.commands.test_reset_offset_by_time import offsets

SLAVE_ADDR = "127.0.0.1:10931"


class MasterStopped:
    """The real backend, with the name server's view after broker-a's master stopped: the route
    lists broker-a with its slave (brokerId 1) only. Every other call goes to the backend."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def topic_route(self, topic: str) -> TopicRoute:
        route: TopicRoute = self._inner.topic_route(topic)
        brokers = tuple(
            dataclasses.replace(b, addrs={1: SLAVE_ADDR}) if b.broker_name == "broker-a" else b for b in route.brokers
        )
        return dataclasses.replace(route, brokers=brokers)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def master_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    import mqadmin.admin as facade

    real = facade.connect
    monkeypatch.setattr(facade, "connect", lambda address, **kw: MasterStopped(real(address, **kw)))


def _on_a_terminal(*args: str) -> CliResult:
    """As an operator at a terminal who would answer yes: the question must never come."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=_Tty("y\n")))
    return CliResult(code, out.getvalue(), err.getvalue())


def test_every_offset_command_refuses_before_the_question_and_the_backup(
    make_store: Callable[..., Store], mqadmin_home: Path, tmp_path: Path, master_stopped: None
) -> None:
    now = int(time.time() * 1000)
    store = make_store(count=80, groups={"g": now - HOUR_MS, "src": now - 3 * HOUR_MS // 2})
    before = {g: offsets(store, g) for g in ("g", "src")}
    assert before["g"] != before["src"] and max(before["g"].values()) < 10  # every command has a change to make
    saved = tmp_path / "saved.json"
    rows = [{"broker": b, "queue_id": q, "offset": 0} for (b, q) in before["g"]]
    OffsetBackup("g", "TopicTest", store.address, 0, "test", rows).write(saved)
    backup = tmp_path / "new-backup.json"
    commands = [
        ("resetOffsetByTime", "-g", "g", "-t", "TopicTest", "-s", "-3h"),
        ("resetOffsetByTime", "-g", "g", "-t", "TopicTest", "--to-earliest"),
        ("restoreOffset", "--from", str(saved)),
        ("skipAccumulatedMessage", "-g", "g", "-t", "TopicTest"),
        ("cloneGroupOffset", "-s", "src", "-d", "g", "-t", "TopicTest"),
    ]
    for command, *args in commands:
        r = _on_a_terminal(command, "-n", store.address, *args, "--backup", str(backup))
        assert r.code == 1, (command, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert "broker-a has no master online" in lines[-1] and "offsets live on the master" in lines[-1], command
        assert SLAVE_ADDR in lines[-1] and "nothing was changed" in lines[-1]
        assert "?" not in r.stderr and r.stdout == "", (command, r.stderr)  # never asked, nothing printed
        assert not backup.exists() and not (mqadmin_home / "backups").exists(), command
        assert {g: offsets(store, g) for g in ("g", "src")} == before, command


def test_a_dry_run_still_plans_from_what_the_brokers_say(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], master_stopped: None
) -> None:
    """A plan changes nothing: it is shown even when it could not be applied now."""
    store = make_store(count=80, groups={"g": None})
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h", "--dry-run")
    assert r.code == 0, r.stderr
    assert "broker-a" in r.stdout
