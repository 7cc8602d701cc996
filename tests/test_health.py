"""The health rules over hand-made windows, and the state file: bounded, atomic, locked."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import zlib
from pathlib import Path
from typing import Any

import pytest

from mqadmin import errors, health
from mqadmin.health import Clients, Rules, Sample, StateFile, Status, Windows, evaluate_group, evaluate_queue

MIN = 60_000
RULES = Rules(samples=5, max_age_ms=30 * MIN)


def rows_in(path: Path) -> dict[str, list[Any]]:
    """The rows a state file holds, as a run reads them."""
    return Windows.from_bytes(path.read_bytes(), RULES).rows()


def window(*points: tuple[int, int]) -> list[Sample]:
    """Samples a minute apart from (consumer offset, max offset) pairs."""
    return [Sample(i * MIN, c, b) for i, (c, b) in enumerate(points)]


@pytest.mark.parametrize(
    ("points", "online", "status", "words"),
    [
        ([(10, 20), (20, 30), (30, 40), (40, 50), (50, 60)], 1, Status.OK, "consuming: +40"),
        (
            [(10, 20), (20, 35), (30, 50), (40, 65), (50, 80)],
            1,
            Status.WARN,
            "falling behind: lag grew at every sample, 10 -> 30",
        ),
        # grows, then shrinks once: not WARN (Burrow warns when it merely does not shrink)
        ([(10, 20), (20, 35), (30, 50), (45, 55), (50, 80)], 1, Status.OK, "consuming"),
        (
            [(10, 20), (10, 30), (10, 40), (10, 50), (10, 60)],
            2,
            Status.STALL,
            "offset 10 unmoved for 4m00s, 50 waiting (2 client(s) online)",
        ),
        ([(10, 20), (10, 30), (10, 40), (10, 50), (10, 60)], None, Status.STALL, "(clients not read)"),
        (
            [(10, 20), (10, 30), (10, 40), (10, 50), (10, 60)],
            0,
            Status.STOP,
            "offset 10 unmoved for 4m00s, 50 waiting, no client online",
        ),
        # stopped a minute ago after moving for three: not yet STOP, not STALL either
        ([(10, 20), (20, 30), (30, 40), (40, 50), (40, 60)], 0, Status.OK, "consuming"),
        ([(10, 20), (30, 35), (30, 40), (30, 50), (30, 60)], 0, Status.STOP, "unmoved for 3m00s"),
        (
            [(10, 20), (20, 30), (30, 40), (40, 50), (15, 60)],
            1,
            Status.REWIND,
            "went back from 40 to 15 (25 messages again)",
        ),
        # back to where it was before the rewind: recovered, the usual rules apply
        ([(10, 20), (5, 30), (10, 40), (20, 50), (30, 60)], 1, Status.OK, "consuming"),
        # a rewind is a fact with two samples, not something to collect for
        ([(40, 50), (15, 60)], 1, Status.REWIND, "went back"),
        # no traffic, caught up, nobody online: OK, not STOP
        ([(60, 60), (60, 60), (60, 60), (60, 60), (60, 60)], 0, Status.OK, "caught up"),
        # caught up within the window, one new message now: OK
        ([(60, 60), (60, 60), (60, 60), (60, 60), (60, 61)], 0, Status.OK, "caught up 1m00s ago"),
        ([(10, 20)], 0, Status.OK, "collecting (1 of 5 samples)"),
        ([(10, 20), (10, 30), (10, 40), (10, 50)], 0, Status.OK, "collecting (4 of 5 samples)"),
    ],
)
def test_queue_rules(points: list[tuple[int, int]], online: int | None, status: Status, words: str) -> None:
    verdict = evaluate_queue(window(*points), RULES, Clients(online))
    assert verdict.status == status, verdict
    assert words in verdict.reason, verdict


def test_lag_time_above_the_soft_limit_warns() -> None:
    w = [Sample(i * MIN, 10 * i, 10 * i + 5, 10 * MIN) for i in range(5)]
    assert evaluate_queue(w, RULES, Clients(1)).status == Status.OK
    verdict = evaluate_queue(w, Rules(5, 30 * MIN, warn_lag_ms=5 * MIN), Clients(1))
    assert (verdict.status, verdict.reason) == (Status.WARN, "lag time 10m00s above --warn-lag-time 5m00s")


def test_group_takes_its_worst_queue_and_counts_the_others() -> None:
    stall = evaluate_queue(window(*[(10, 20)] * 5), RULES, Clients(1))
    ok = evaluate_queue(window(*[(20, 20)] * 5), RULES, Clients(1))
    group = evaluate_group({"g T b 0": ok, "g T b 1": stall, "g T b 2": stall})
    assert group.status == Status.STALL
    assert group.reason == f"T b 1: {stall.reason} (and 1 more of 3 queues)"
    collecting = evaluate_queue(window((10, 20)), RULES, Clients(1))
    assert evaluate_group({"a": ok, "b": collecting}) == collecting
    assert evaluate_group({"a": ok}).reason == "caught up"
    consuming = evaluate_queue(window(*[(10 * i, 10 * i + 5) for i in range(5)]), RULES, Clients(1))
    assert evaluate_group({"a": ok, "b": consuming}).reason == "2 queue(s) OK"


def test_levels_and_fail_on() -> None:
    assert [s.value for s in Status] == list(range(6))
    assert health.parse_level("stall") == Status.STALL
    with pytest.raises(errors.UsageError, match="--fail-on must be one of OK, WARN, STALL, STOP, REWIND, ERR"):
        health.parse_level("BAD")
    assert health.fails(Status.STOP, Status.STALL) and not health.fails(Status.WARN, Status.STALL)
    assert not health.fails(Status.OK, Status.OK)


def test_windows_are_bounded_by_count_and_age() -> None:
    w = Windows(Rules(samples=3, max_age_ms=10 * MIN))
    for i in range(6):
        kept = w.add("k", Sample(i * MIN, i, 10))
    assert [s.at_ms for s in kept] == [3 * MIN, 4 * MIN, 5 * MIN]
    kept = w.add("k", Sample(20 * MIN, 9, 10))
    assert [s.at_ms for s in kept] == [20 * MIN], "samples older than the max age leave the window"
    kept = w.add("k", Sample(20 * MIN, 10, 10))
    assert kept == [Sample(20 * MIN, 10, 10)], "a second sample at the same instant replaces the first"
    w.add("gone", Sample(0, 1, 1))
    w.prune(20 * MIN)
    assert list(w.queues) == ["k"], "a queue not seen for longer than the max age leaves the state"
    w.prune(20 * MIN)
    assert list(w.queues) == ["k"], "every queue seen within the window: all stay"
    w.queues["empty"] = []
    w.prune(20 * MIN)
    assert list(w.queues) == ["k"], "a row without samples leaves too"


def test_state_file_round_trip_is_atomic_and_survives_a_broken_file(tmp_path: Path) -> None:
    path = health.state_path(tmp_path, "127.0.0.1:9876")
    assert path.parent == tmp_path / "state" and path.name.startswith("health-127.0.0.1_9876-")
    assert health.state_path(tmp_path, "127.0.0.1_9876") != path
    state = StateFile(path, RULES)
    with state.open(0) as w:
        w.add("k", Sample(0, 1, 2, None))
    with state.open(MIN) as w:
        assert w.add("k", Sample(MIN, 2, 3, 5)) == [Sample(0, 1, 2, None), Sample(MIN, 2, 3, 5)]
    assert rows_in(path) == {"k": [0, 1, 2, None, MIN, 2, 3, 5]}
    with pytest.raises(RuntimeError), state.open(2 * MIN) as w:
        w.add("k", Sample(2 * MIN, 3, 4))
        raise RuntimeError("a run that fails keeps the state as it was")
    assert len(rows_in(path)["k"]) == 2 * 4
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    path.write_text("{half a fi")
    warned: list[str] = []
    with StateFile(path, RULES, warned.append).open(3 * MIN) as w:
        assert w.add("k", Sample(3 * MIN, 4, 5)) == [Sample(3 * MIN, 4, 5)]
    assert warned == [f"health state {path} could not be read; starting a new window"]
    for broken in (
        '{"format": "mqadmin-health-state/1", "queues": {"k": ["x", 1, 2, 3]}}',
        '{"format": "mqadmin-health-state/1", "queues": {"k": [0, null, 2, 3]}}',
        '{"format": "mqadmin-health-state/1", "queues": {"j": [0, 1, 2, null], "k": [0, 1, 2, null, null, 1, 2, 3]}}',
        '{"format": "mqadmin-health-state/1", "queues": {"k": [0, true, 2, 3]}}',
        '{"format": "mqadmin-health-state/1", "queues": {"k": [0, 1.5, 2, 3]}}',
        '{"format": "mqadmin-health-state/1", "queues": {"j": [], "k": [0, 1, 2]}}',
        '{"format": "mqadmin-health-state/1", "queues": {"k": {"at": 0}}}',
        '{"format": "other"}',
        "[]",
    ):
        path.write_text(broken)
        with StateFile(path, RULES, warned.append).open(4 * MIN) as w:
            assert w.add("k", Sample(4 * MIN, 4, 5)) == [Sample(4 * MIN, 4, 5)], broken
    assert len(warned) == 10


@pytest.mark.parametrize("form", ["1", "2"])
def test_a_state_file_of_an_earlier_form_is_read_once_and_rewritten(tmp_path: Path, form: str) -> None:
    """A state file written before the checksummed form (/1: one JSON document) or before the
    block (/2: rows only): its samples carry on."""
    path = tmp_path / "s.json"
    rows = {"k": [0, 1, 2, None], "j": [0, 5, 9, 7]}
    if form == "1":
        path.write_text(json.dumps({"format": "mqadmin-health-state/1", "queues": rows}))
    else:
        body = json.dumps(rows).encode()
        path.write_bytes(f"mqadmin-health-state/2 {len(body)} {zlib.crc32(body):08x}\n".encode() + body)
    warned: list[str] = []
    with StateFile(path, RULES, warned.append).open(MIN) as w:
        assert w.add("k", Sample(MIN, 2, 3, 4)) == [Sample(0, 1, 2, None), Sample(MIN, 2, 3, 4)]
    assert warned == []
    assert path.read_bytes().startswith(b"mqadmin-health-state/3 ")
    assert rows_in(path) == {"k": [0, 1, 2, None, MIN, 2, 3, 4], "j": [0, 5, 9, 7]}


def test_a_state_file_cut_short_changed_or_foreign_starts_a_new_window(tmp_path: Path) -> None:
    """The checksum stands in for checking each value: a file not whole as written is not trusted."""
    path = tmp_path / "s.json"
    with StateFile(path, RULES).open(0) as w:
        w.add("k", Sample(0, 10, 20, 30))
    good = path.read_bytes()
    head, body = good.split(b"\n", 1)
    changed = body.replace(b"10", b"11")
    assert changed != body
    for broken in (
        good[:-3],  # cut short
        head + b"\n" + changed,  # a number changed, the length the same
        head + b"\n" + body + b" ",  # longer than written
        head,  # the first line only
        b"mqadmin-health-state/3 3 zz\n[1]",  # a checksum that is not one
        b"mqadmin-health-state/9 2 00000000\n{}",  # a later format
        b"\x00\x01binary",  # another program's file
        b"",
    ):
        path.write_bytes(broken)
        warned: list[str] = []
        with StateFile(path, RULES, warned.append).open(MIN) as w:
            assert w.add("k", Sample(MIN, 12, 20, 0)) == [Sample(MIN, 12, 20, 0)], broken
        assert warned == [f"health state {path} could not be read; starting a new window"], broken
    # the body is checked for a dict of rows of whole samples even when its checksum holds
    for form, body in (
        (2, b"[1, 2]"),
        (2, b'{"k": 5}'),
        (2, b'{"k": [0, 1, 2]}'),
        (2, b'{"k": []}'),
        (3, b'{"rows": {}}'),
        (3, b'{"rows": {"k": [0, 1, 2]}, "block": null}'),
        (3, b'{"rows": {}, "block": [[], [], [], [], []]}'),  # a block without runs
        (3, b'{"rows": {}, "block": [[1], ["k"], [[1]], [[2]]]}'),  # no lag times
        (3, b'{"rows": {}, "block": [[1], ["k"], [[1]], [[2]], [[3], [4]]]}'),  # a run too many
        (3, b'{"rows": {}, "block": [[1], ["k", "j"], [[1, 2]], [[2]], [[3, 4]]]}'),  # a queue short
        (3, b'{"rows": {}, "block": [[1], [7], [[1]], [[2]], [[3]]]}'),  # a key not a name
    ):
        path.write_bytes(f"mqadmin-health-state/{form} {len(body)} {zlib.crc32(body):08x}\n".encode() + body)
        with pytest.raises(ValueError, match="not a health state file"):
            rows_in(path)
    body = b'{"rows": {"j": [0, 5, 9, 7]}, "block": [[1, 2], ["k"], [[1], [2]], [[2], [3]], [[null], [0]]]}'
    path.write_bytes(f"mqadmin-health-state/3 {len(body)} {zlib.crc32(body):08x}\n".encode() + body)
    assert rows_in(path) == {"j": [0, 5, 9, 7], "k": [1, 1, 2, None, 2, 2, 3, 0]}


def test_queues_a_run_does_not_touch_are_kept_as_read_until_too_old(tmp_path: Path) -> None:
    state = StateFile(tmp_path / "s.json", RULES)
    with state.open(0) as w:
        w.add("g1 T b 0", Sample(0, 1, 2, 3))
    with state.open(MIN) as w:
        w.add("g2 T b 0", Sample(MIN, 5, 6, None))
    assert rows_in(state.path) == {"g1 T b 0": [0, 1, 2, 3], "g2 T b 0": [MIN, 5, 6, None]}
    with state.open(32 * MIN) as w:
        w.add("g2 T b 0", Sample(32 * MIN, 7, 8, None))
    assert rows_in(state.path) == {"g2 T b 0": [32 * MIN, 7, 8, None]}


def _add_many(path: str, key: str, count: int) -> None:
    state = StateFile(Path(path), Rules(samples=1000, max_age_ms=10**12))
    for i in range(count):
        with state.open(i) as w:
            w.add(key, Sample(i, i, i))


def test_two_runs_at_once_take_turns(tmp_path: Path) -> None:
    """Two processes adding samples as fast as they can: with the lock neither loses the other's."""
    path = tmp_path / "state" / "s.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_add_many, args=(str(path), key, 60)) for key in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    queues = rows_in(path)
    assert {k: len(v) // 4 for k, v in queues.items()} == {"a": 60, "b": 60}


def test_a_run_holding_the_lock_too_long_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    path = tmp_path / "state" / "s.json"
    path.parent.mkdir(parents=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    monkeypatch.setattr(health, "LOCK_WAIT_S", 0.2)
    try:
        with pytest.raises(errors.MqadminError, match="is held by another run"), StateFile(path, RULES).open(0):
            pass
    finally:
        os.close(fd)


def _random_row(rnd: random.Random, samples: int) -> list[int | None]:
    """A window as the state file holds it, from small offsets so that equal offsets, caught-up
    samples, unmoved and rewound windows are common; times mostly a minute apart, at times not."""
    row: list[int | None] = []
    at, consumer, broker = rnd.randrange(0, 10 * MIN), rnd.randrange(0, 6), rnd.randrange(0, 8)
    moving = rnd.random() < 0.5
    for _ in range(samples):
        row += [at, consumer, broker, rnd.choice([None, 0, rnd.randrange(0, 20 * MIN)])]
        at += rnd.choice([MIN, MIN, MIN, 0, rnd.randrange(-MIN, 40 * MIN)])
        if moving or rnd.random() < 0.2:
            consumer = max(consumer + rnd.randrange(-2, 4), 0)
        broker = max(broker + rnd.randrange(-1, 4), 0)
    return row


def test_status_code_is_evaluate_row_over_many_windows() -> None:
    """The fast path (a status from the deciding figures only) against the full evaluation: the same
    status, collecting and caught-up for every generated window, each status reached."""
    rnd = random.Random(20260514)
    seen: set[int] = set()
    for _ in range(5_000):
        rules = Rules(rnd.randrange(2, 7), 30 * MIN, rnd.choice([None, 5 * MIN]))
        online = rnd.choice([None, 0, 0, 1, 3])
        row = _random_row(rnd, rnd.randrange(1, rules.samples + 2))
        full = health.evaluate_row(row, rules, Clients(online))
        code = health.status_code(row, rules.samples, online, rules.warn_lag_ms)
        got = (health.CODE_STATUS[code], code == health.CODE_COLLECTING, code == health.CODE_CAUGHT_UP)
        assert got == (full.status, full.collecting is not None, full.why == health.CAUGHT_UP), (row, rules, online)
        seen.add(code)
    assert seen == set(range(7)), "the generated windows reach every code"


def _one_by_one(
    windows: Windows, rules: Rules, now: int, columns: list[list[Any]], groups: list[Any]
) -> dict[str, Any]:
    """``assess_all``'s input evaluated group by group with ``assess`` (every queue a row)."""
    out, s = {}, 0
    for name, count, clients, error in groups:
        samples = [(k, (now, c, b, lag)) for k, c, b, lag in zip(*(col[s : s + count] for col in columns), strict=True)]
        out[name] = health.assess(windows, rules, samples, clients, error)
        s += count
    return out


def test_assess_all_is_assess_for_every_group_run_after_run() -> None:
    """All groups at once (the block's columns, a verdict for each group's worst queue only) against
    ``assess`` over rows, run after run: the same windows kept, group verdicts, worst queues and
    their verdicts and windows, and counts by status, while groups come and go, brokers do not
    answer, -g runs sample a few queues between, windows fill, age out and the clock steps back."""
    rnd = random.Random(11)
    reached: set[str] = set()
    for _ in range(60):
        rules = Rules(rnd.randrange(2, 6), rnd.choice([30 * MIN, 4 * MIN]), rnd.choice([None, 5 * MIN]))
        fast, slow = Windows(rules), Windows(rules)
        names = [f"g{i}" for i in range(rnd.randrange(1, 6))]
        offsets = {f"{g} T b{q % 2} {q}": [rnd.randrange(0, 5), 0] for g in names for q in range(4)}
        now = 100 * MIN
        for run in range(14):
            now += rnd.choice([MIN, MIN, MIN, 0, -MIN, 3 * MIN])
            for pair in offsets.values():  # consumers move, stall, rewind; producers write
                pair[1] += rnd.choice([0, 0, 1, 3])
                pair[0] = max(0, min(pair[1], pair[0] + rnd.choice([0, 0, 0, 1, 2, 5, -3])))
            if rnd.random() < 0.3:  # a -g run in between: its queues leave the block
                now += rnd.randrange(1, 1000)
                alone = rnd.choice(names) + " "
                for w in (fast, slow):
                    for key in [k for k in offsets if k.startswith(alone)]:
                        w.add_row(key, (now, offsets[key][0], offsets[key][1], None))
                now += 1000
            if rnd.random() < 0.15:
                names.append(f"g{len(names) + 10}")
                offsets.update({f"{names[-1]} T b{q % 2} {q}": [0, 2] for q in range(4)})
            shown = sorted(rnd.sample(names, max(1, len(names) - rnd.choice([0, 0, 0, 1]))))
            columns: list[list[Any]] = [[], [], [], []]
            groups = []
            for g in shown:
                queues = [k for k in offsets if k.startswith(g + " ") and rnd.random() > 0.05]  # a broker missing
                for col, values in zip(
                    columns,
                    zip(*[(k, *offsets[k], rnd.choice([None, 0, 9 * MIN])) for k in queues], strict=True),
                    strict=False,
                ):
                    col += values  # no queue read at all: no values
                groups.append((g, len(queues), Clients(rnd.choice([None, 0, 2])), rnd.choice([None] * 9 + ["down"])))
            want = _one_by_one(slow, rules, now, columns, groups)
            got = health.assess_all(fast, rules, now, *[list(c) for c in columns], groups)
            assert fast.rows() == slow.rows(), (run, rules)
            for g, full in want.items():
                brief = got[g]
                v, f = brief.verdict, full.verdict
                assert (v.status, v.reason, v.collecting) == (f.status, f.reason, f.collecting), (run, g)
                assert brief.worst == full.worst
                assert list(brief.status_counts().items()) == list(full.status_counts().items())
                if full.worst is not None:
                    bq, fq = brief.queues[full.worst], full.queues[full.worst]
                    assert (bq.verdict.status, bq.verdict.reason, bq.verdict.collecting, bq.row) == (
                        fq.verdict.status,
                        fq.verdict.reason,
                        fq.verdict.collecting,
                        fq.row,
                    )
                reached.add(v.status.name)
            if rnd.random() < 0.3:  # the state file between runs
                fast = Windows.from_bytes(fast.to_bytes(), rules)
            fast.prune(now)
            slow.prune(now)
    assert reached == {s.name for s in Status}, "the runs reach every status"
    assert fast.block is not None


def test_an_all_groups_run_keeps_its_queues_in_one_block_and_a_g_run_takes_its_own_out() -> None:
    """After a state file of rows only, the first all-groups run gathers the queues sampled at the
    same runs into the block; a -g run takes only its group's queues out as rows."""
    rules = Rules(3, 30 * MIN)
    w = Windows(rules)
    keys = [f"g{i} T b 0" for i in range(4)]
    for t in range(3):
        for i, k in enumerate(keys):
            w.add_row(k, (t * MIN, i, 10, None))
    groups = [(f"g{i}", 1, Clients(1), None) for i in range(4)]
    health.assess_all(w, rules, 3 * MIN, keys, [0, 1, 2, 3], [10] * 4, [None] * 4, groups)
    assert w.queues == {} and w.block is not None and w.block.ats == [MIN, 2 * MIN, 3 * MIN]
    before = w.rows()
    w.add_row("g2 T b 0", (3 * MIN + 5, 2, 11, None))
    assert list(w.queues) == ["g2 T b 0"] and w.block.keys.count(None) == 1
    assert w.queues["g2 T b 0"] == [*before["g2 T b 0"][4:], 3 * MIN + 5, 2, 11, None]
    again = Windows.from_bytes(w.to_bytes(), rules)
    assert again.rows() == w.rows() and again.block is not None and len(again.block.keys) == 3


def test_a_group_without_a_committed_offset_is_judged_by_its_clients_and_topics() -> None:
    never = health.uncommitted(0, {"T": 40})
    assert (never.status, never.reason) == (
        Status.WARN,
        "never consumed: no offset committed on any queue, no client online",
    )
    assert not health.fails(never.status, Status.STALL) and health.fails(never.status, Status.WARN)
    assert health.uncommitted(None, {}).reason == "no offset committed on any queue (clients not read)"
    stuck = health.uncommitted(2, {"A": 0, "B": 7, "C": 3})
    assert (stuck.status, stuck.reason) == (
        Status.STALL,
        "2 client(s) online, no offset committed, 10 message(s) waiting in B, C",
    )
    idle = health.uncommitted(1, {"A": 0})
    assert (idle.status, idle.reason) == (
        Status.OK,
        "1 client(s) online, no offset committed yet, nothing to consume (A)",
    )
    assert health.uncommitted(1, {}).reason.endswith("nothing to consume (no topic subscribed)")
