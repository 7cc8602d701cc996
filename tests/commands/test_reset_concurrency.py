"""Two operators on one group: the plan is checked against the offsets right before the first
write, so a change made meanwhile is never silently overwritten; what each operator prints is
what the brokers hold, and each backup undoes exactly its own change.

The second operator runs while the first waits at its question (a person reading the plan; on an
embedded store, which the first holds from its question on, between its plan and its question),
or while the first is between its writes and its read-back (a race the check cannot close)."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, Store
from mqadmin.commands import _reset as flow
from mqadmin.commands._broker_offsets import BrokerOffsets

from mqadmin.cli import main
from mqadmin.model import MessageQueue
from mqadmin.output import Env

GROUP, TOPIC = "g", "TopicTest"


class _Answer(io.StringIO):
    """A terminal whose user, before answering ``y``, lets ``meanwhile`` happen."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.meanwhile = meanwhile

    def isatty(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        self.meanwhile()
        return "y\n"


def _meanwhile(door: str, monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> io.StringIO | None:
    """Let ``act`` happen after the first operator read its plan and before it writes: at its
    question (the stdin to give it), or on an embedded store just before it opens the store."""
    if door == "tcp":
        return _Answer(act)
    check, done = BrokerOffsets.check, []

    def check_after(self: BrokerOffsets, *args: Any) -> None:
        if not done:
            done.append(True)
            act()
        check(self, *args)

    monkeypatch.setattr(BrokerOffsets, "check", check_after)
    return None


def _run(*args: str, stdin: io.StringIO | None = None) -> CliResult:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=stdin or io.StringIO()))
    return CliResult(code, out.getvalue(), err.getvalue())


def _reset(store: Store, to: int, *more: str, stdin: io.StringIO | None = None) -> CliResult:
    args = ("resetOffsetByTime", "-n", store.address, "-g", GROUP, "-t", TOPIC, "--to-offset", str(to), "--json")
    return _run(*args, *more, stdin=stdin)


def _offsets(store: Store) -> dict[tuple[str, int], int]:
    cluster = store.open()
    try:
        return {(n, q): o for n, b in cluster.brokers.items() for q, o in b.offsets.get(f"{TOPIC}@{GROUP}", {}).items()}
    finally:
        cluster.close()


def _printed(r: CliResult) -> dict[tuple[str, int], Any]:
    doc: Any = json.loads(r.stdout)
    return {(q["broker"], q["queue_id"]): q for q in doc["queues"]}


def _undo(store: Store, r: CliResult) -> dict[tuple[str, int], int]:
    """Paste the operator's undo (the backup it wrote), and the offsets it leaves."""
    doc: Any = json.loads(r.stdout)
    back = _run("restoreOffset", "--from", doc["backup"], "-n", store.address, "--no-wait", "--force-stale")
    assert back.code == 0, back.stderr
    return _offsets(store)


def _backup(r: CliResult) -> dict[tuple[str, int], int]:
    doc: Any = json.loads(Path(json.loads(r.stdout)["backup"]).read_text())
    return {(o["broker"], o["queue_id"]): o["offset"] for o in doc["offsets"]}


def test_a_change_made_while_the_plan_waited_stops_the_stale_plan(
    make_store: Callable[..., Store], mqadmin_home: Path, door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(count=800, groups={GROUP: None})
    initial = _offsets(store)
    second: list[CliResult] = []
    first = _reset(store, 20, stdin=_meanwhile(door, monkeypatch, lambda: second.append(_reset(store, 30))))
    (b,) = second
    assert b.code == 0, b.stderr
    final = _offsets(store)
    assert set(final.values()) == {30}
    assert {k: q["new_offset"] for k, q in _printed(b).items() if q["outcome"] == "applied"} == final
    assert first.code == 1 and "moved since the plan was read" in first.stderr
    assert "nothing was changed" in first.stderr and "--force-stale" in first.stderr
    assert "broker-a queue 0: 100 -> 30" in first.stderr
    assert len(list((mqadmin_home / "backups").iterdir())) == 1  # only the operator who wrote backed up
    assert _backup(b) == initial and _undo(store, b) == initial


def test_force_stale_applies_over_it_and_backs_up_what_it_replaced(
    make_store: Callable[..., Store], mqadmin_home: Path, door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(count=800, groups={GROUP: None})
    initial = _offsets(store)
    second: list[CliResult] = []
    act = _meanwhile(door, monkeypatch, lambda: second.append(_reset(store, 30)))
    first = _reset(store, 20, "--force-stale", stdin=act)
    (b,) = second
    assert b.code == 0 and first.code == 0, first.stderr
    assert "applying the plan over them (--force-stale)" in first.stderr
    final = _offsets(store)
    assert set(final.values()) == {20}
    printed = _printed(first)
    assert {k: q["new_offset"] for k, q in printed.items() if q["outcome"] == "applied"} == final
    assert {q["old_offset"] for q in printed.values()} == {30}  # what it replaced, not what it planned from
    by_b = {k: 30 for k in initial}
    assert _backup(first) == by_b and _undo(store, first) == by_b  # undoes its own change only
    assert _undo(store, b) == initial


def test_on_an_embedded_store_the_second_operator_waits_for_the_first(
    make_store: Callable[..., Store], door: str
) -> None:
    """The first holds the store from its question on: the second is refused, nothing changed."""
    if door == "tcp":
        pytest.skip("a server takes both operators' writes")
    store = make_store(count=800, groups={GROUP: None})
    initial = _offsets(store)
    second: list[CliResult] = []
    first = _reset(store, 20, stdin=_Answer(lambda: second.append(_reset(store, 30))))
    (b,) = second
    assert b.code == 1 and "in use by pid" in b.stderr and b.stdout == ""
    assert first.code == 0, first.stderr
    final = _offsets(store)
    assert {k: q["new_offset"] for k, q in _printed(first).items() if q["outcome"] == "applied"} == final
    assert _backup(first) == initial and _undo(store, first) == initial


def test_a_change_between_the_writes_and_the_read_back_is_reported_as_overwritten(
    make_store: Callable[..., Store], door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if door == "embedded":
        pytest.skip("an embedded store has one writer at a time: the second operator is refused (in use)")
    store = make_store(count=800, groups={GROUP: None})
    initial = _offsets(store)
    second: list[CliResult] = []
    verify = BrokerOffsets.verify
    calls: list[BrokerOffsets] = []

    def late_verify(self: BrokerOffsets, *args: Any) -> None:
        calls.append(self)
        if len(calls) == 1:
            second.append(_reset(store, 30, "--force-stale"))  # lands after the first operator's writes
        verify(self, *args)

    monkeypatch.setattr(BrokerOffsets, "verify", late_verify)
    first = _reset(store, 20)
    (b,) = second
    assert b.code == 0, b.stderr
    final = _offsets(store)
    assert set(final.values()) == {30}
    assert first.code == 1 and "overwritten" in first.stderr
    for k, q in _printed(first).items():
        assert (
            q["outcome"] == "overwritten"
            and q["detail"] == f"overwritten by another change: at {final[k]} (planned 20)"
        )
    assert {k: q["new_offset"] for k, q in _printed(b).items() if q["outcome"] == "applied"} == final
    monkeypatch.setattr(BrokerOffsets, "verify", verify)
    by_first = {k: 20 for k in initial}
    assert _backup(b) == by_first and _undo(store, b) == by_first
    assert _undo(store, first) == initial


class SilentCommitter:
    """A client the broker does not list (it sends no heartbeats) that pulls a message per queue
    each round and commits the offsets it keeps itself: it undoes a reset written straight to the
    offsets, and follows a server-side one (its next pull answers with the reset offset)."""

    def __init__(self, namesrv: str, interval_s: float = 0.3) -> None:
        from mqadmin.remoting.backend import RemotingAdmin

        self.admin = RemotingAdmin(namesrv, timeout=5)
        queues = self.admin.topic_route(TOPIC).message_queues()
        self.offsets = {mq: self.admin.consumer_offset(GROUP, mq) or 0 for mq in queues}
        self.history: dict[MessageQueue, list[int]] = {mq: [] for mq in queues}
        self.interval_s, self._stop, self.moved = interval_s, threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            for mq, offset in self.offsets.items():
                self.offsets[mq] = self.admin.pull(mq, offset, 1, group=GROUP).next_begin_offset
                self.history[mq].append(self.offsets[mq])
                self.admin.update_consumer_offset(GROUP, mq, self.offsets[mq])
            self.moved.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.admin.close()


def test_a_committer_the_broker_does_not_list_is_caught_by_the_second_read_back(
    make_store: Callable[..., Store], door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if door == "embedded":
        pytest.skip("an embedded store has no connections, so no client can commit beside the reset")
    # A 4.x broker: offsets are written directly, so the committer's next commit wins. (A 5.2+
    # broker keeps a server-side reset pending and ignores commits until the next pull takes it.)
    store = make_store(count=800, groups={GROUP: 0}, version="4.9.7")  # the whole backlog ahead
    monkeypatch.setattr(flow, "COMMIT_WAIT_S", 1.5)
    committer = SilentCommitter(store.address)
    try:
        assert committer.moved.wait(10)  # every queue is past the earliest: each one moves
        committer_started = _offsets(store)
        r = _run("resetOffsetByTime", "-n", store.address, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--json")
    finally:
        committer.close()
    final = _offsets(store)
    assert r.code == 1, r.stderr
    assert "the broker lists none, but the group pulled messages in the last minute" in r.stderr
    printed = _printed(r)
    assert all(q["outcome"] in ("undone", "moved") for q in printed.values()), printed
    assert "committed by a client the broker does not list" in r.stdout
    for k, q in printed.items():  # what it printed is where the queue was; the committer only moves on
        now = int(q["detail"].split("at ", 1)[1].split(" ")[0])
        assert committer_started[k] <= now <= final[k] and final[k] > 0
    assert _backup(r) == {k: q["old_offset"] for k, q in printed.items()}  # what the apply replaced


def test_a_server_side_reset_reaches_a_committer_the_broker_does_not_list(
    make_store: Callable[..., Store], door: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 5.2+ the broker ignores commits while a reset is pending and answers the next pull with
    it: the client re-consumes from the reset, and the read-back after the commit interval finding
    it at or past its old place is consumption, not an undo (so too a POP group behind a proxy)."""
    if door == "embedded":
        pytest.skip("an embedded store has no connections, so no client can commit beside the reset")
    store = make_store(count=800, groups={GROUP: 0}, version="5.3.3")
    monkeypatch.setattr(flow, "COMMIT_WAIT_S", 1.5)
    committer = SilentCommitter(store.address)
    try:
        assert committer.moved.wait(10)
        r = _run("resetOffsetByTime", "-n", store.address, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--json")
        time.sleep(3 * committer.interval_s)
    finally:
        committer.close()
    assert r.code == 0, r.stderr
    assert "broker lists none, but the group pulled messages" in r.stderr  # the second read-back ran
    assert "undone" not in r.stdout
    assert all(q["outcome"].startswith("applied") and q["new_offset"] == 0 for q in _printed(r).values())
    for mq, seen in committer.history.items():  # the client was moved back to the reset and went on from it
        assert any(b < a for a, b in zip(seen, seen[1:], strict=False)), (mq, seen)
