"""rangeReplay --time-field born|property:NAME with --slack, against the mock through both doors.

Born times here are out of store order (random skew either way), a few are far behind their
store time (more than the slack), and the property is sometimes absent or not a number; the
expected sets are computed from what is stored."""

from __future__ import annotations

import json
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliResult, store_address

from mqadmin.admin import connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message
from mqadmin.replay.records import read_records

T0 = 1_700_000_000_000
B, E = T0 + 1000, T0 + 3000  # the window asked for
SLACK = 500
FAR = 2000  # how far behind its store time a straggler was born (more than SLACK)
PROP = "biz_ts"
Run = Callable[..., CliResult]
Key = tuple[str, int, int]


def born_of(i: int, rng: random.Random) -> int:
    store = T0 + i * 10
    edges = {120: B, 130: B - 1, 305: E - 1, 310: E}  # both edges, stored away from them
    if i in edges:
        return edges[i]
    if i % 37 == 36:
        return store - FAR
    return store + rng.randint(-300, 200)  # producer clocks behind and ahead of the broker's


def seed(root: Path) -> None:
    """400 messages stored 10 ms apart over 4 queues, each with a born time and (mostly) a
    property ``biz_ts`` = born time + 7."""
    cluster = MockCluster.create(root, version="5.3.3")
    cluster.create_topic("B", 2)
    rng = random.Random(11)
    targets = [(b, q) for b in cluster.brokers.values() for q in range(2)]
    for i in range(400):
        broker, qid = targets[i % 4]
        born = born_of(i, rng)
        props = {"TAGS": "t", "KEYS": f"k{i}"}
        if i % 13 == 0:
            pass  # no property: never kept by property:biz_ts
        elif i % 17 == 0:
            props[PROP] = "x"
        else:
            props[PROP] = str(born + 7)
        msg = Message(topic="B", body=f"m{i}".encode(), properties=props, queue_id=qid, born_timestamp=born)
        broker.put_message(msg, store_timestamp=T0 + i * 10)
    cluster.close()


@pytest.fixture(scope="module", params=["embedded", "tcp"])
def door(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp(f"timefield-{request.param}") / "store"
    seed(root)
    with store_address(root, request.param) as address:
        yield address


@pytest.fixture(scope="module")
def stored(door: str) -> list[Message]:
    admin = connect(door, read_only=True)
    try:
        out: list[Message] = []
        for mq in admin.topic_route("B").message_queues():
            out += admin.pull(mq, 0, 100_000).messages
        return sorted(out, key=lambda m: (m.broker_name, m.queue_id, m.queue_offset))
    finally:
        admin.close()


def prop_of(m: Message) -> int | None:
    try:
        return int(m.properties[PROP])
    except (KeyError, ValueError):
        return None


def expect(stored: list[Message], of: Callable[[Message], int | None], slack: int) -> tuple[list[Key], int, int]:
    """The messages kept (field in [B, E), read by store time in [B - slack, E + slack)), how
    many of those read have a field further than the slack from their store time, and how many
    were read."""
    read = [m for m in stored if B - slack <= m.store_timestamp < E + slack]
    kept = [(m.broker_name, m.queue_id, m.queue_offset) for m in read if (t := of(m)) is not None and B <= t < E]
    outside = sum(1 for m in read if (t := of(m)) is not None and abs(t - m.store_timestamp) > slack)
    return kept, outside, len(read)


def keys(path: Path) -> list[Key]:
    return [(r["broker"], r["queue_id"], r["queue_offset"]) for r in read_records(path)]


def args(door: str, *extra: str) -> tuple[str, ...]:
    return ("rangeReplay", "-n", door, "-t", "B", "-b", str(B), "-e", str(E), "--slice-size", "25", *extra)


def born(m: Message) -> int:
    return m.born_timestamp


def test_born_window_is_exact_at_both_edges_and_warns_of_stragglers(
    door: str, stored: list[Message], tmp_path: Path, cli: Run
) -> None:
    out = tmp_path / "b.jsonl"
    r = cli(*args(door, "--time-field", "born", "--slack", f"{SLACK}ms", "--to", f"jsonl:{out}", "--json"))
    assert r.code == 0, r.stderr
    want, outside, read = expect(stored, born, SLACK)
    got = keys(out)
    assert got == want
    by_key = {(m.broker_name, m.queue_id, m.queue_offset): m for m in stored}
    borns = {by_key[k].born_timestamp for k in got}
    assert B in borns and E - 1 in borns and B - 1 not in borns and E not in borns
    stores = [by_key[k].store_timestamp for k in got]
    assert min(stores) < B and max(stores) >= E  # found beyond the store-time window
    assert [by_key[k].born_timestamp for k in got] != sorted(borns)  # not in born order: in queue order
    doc = json.loads(r.stdout)
    assert (doc["time_field"], doc["slack_ms"], doc["begin"], doc["end"]) == ("born", SLACK, B, E)
    assert doc["written"] == doc["matched"] == len(want) and doc["total_messages"] == read
    assert doc["outside_slack"] == outside > 0
    # the stragglers the narrow slack missed are exactly the far-born ones stored beyond it
    every = [(m.broker_name, m.queue_id, m.queue_offset) for m in stored if B <= m.born_timestamp < E]
    missed = set(every) - set(got)
    assert missed and all(by_key[k].store_timestamp - by_key[k].born_timestamp == FAR for k in missed)
    table = cli(*args(door, "--time-field", "born", "--slack", f"{SLACK}ms", "--to", f"jsonl:{tmp_path / 't'}"))
    assert table.code == 0 and f"Read {read} message(s) stored within --slack" in table.stdout
    assert f"Warning: {outside} message(s) read have a born time more than --slack 0.5s" in table.stdout
    # the stragglers, and only they: jitter within the slack at the edges is no warning
    assert outside == sum(
        1 for m in stored if B - SLACK <= m.store_timestamp < E + SLACK and m.born_timestamp == m.store_timestamp - FAR
    )


def test_a_slack_wide_enough_reads_every_message_and_warns_of_none(
    door: str, stored: list[Message], tmp_path: Path, cli: Run
) -> None:
    out = tmp_path / "w.jsonl"
    r = cli(*args(door, "--time-field", "born", "--slack", "3s", "--to", f"jsonl:{out}", "--json"))
    assert r.code == 0, r.stderr
    every = [(m.broker_name, m.queue_id, m.queue_offset) for m in stored if B <= m.born_timestamp < E]
    assert keys(out) == every and json.loads(r.stdout)["outside_slack"] == 0
    assert "Warning" not in cli(*args(door, "--time-field", "born", "--slack", "3s", "--dry-run")).stdout


def test_property_window_and_dry_run_counts(door: str, stored: list[Message], tmp_path: Path, cli: Run) -> None:
    extra = ("--time-field", f"property:{PROP}", "--slack", "0.5s")
    dry = cli(*args(door, *extra, "--dry-run", "--json"))
    out = tmp_path / "p.jsonl"
    real = cli(*args(door, *extra, "--to", f"jsonl:{out}", "--json"))
    assert dry.code == real.code == 0, dry.stderr + real.stderr
    want, outside, _ = expect(stored, prop_of, SLACK)
    assert keys(out) == want and len(want) > 100
    d, w = json.loads(dry.stdout), json.loads(real.stdout)
    assert d["would_write"] == w["written"] == len(want)
    assert d["outside_slack"] == w["outside_slack"] == outside > 0
    assert d["time_field"] == w["time_field"] == f"property:{PROP}"
    # --dedup reads messages rather than rows: the same window, the same straggler count
    dedup = cli(*args(door, *extra, "--dedup", "--to", f"jsonl:{tmp_path / 'd.jsonl'}", "--json"))
    assert keys(tmp_path / "d.jsonl") == want and json.loads(dedup.stdout)["outside_slack"] == outside
    # with a tag filter too, the dry run still counts what is written
    tagged = cli(*args(door, *extra, "--tag", "t", "--dry-run", "--json"))
    assert json.loads(tagged.stdout)["would_write"] == len(want)


def test_killed_born_replay_resumes_exactly(door: str, stored: list[Message], tmp_path: Path, cli_proc: Run) -> None:
    out, cp, clean = tmp_path / "r.jsonl", tmp_path / "cp", tmp_path / "clean.jsonl"
    base = args(door, "--time-field", "born", "--slack", f"{SLACK}ms")
    assert cli_proc(*base, "--to", f"jsonl:{clean}").code == 0
    run = (*base, "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": "replay-slice-recorded"})
    assert killed.code == -signal.SIGKILL and cp.read_text().count('"slice"') == 1
    other = cli_proc(*args(door, "--time-field", "born", "--to", f"jsonl:{out}", "--checkpoint", str(cp)))
    assert other.code == 2 and "differs in: slack_ms" in other.stderr  # a resume keeps its slack
    resumed = cli_proc(*run, "--json")
    assert resumed.code == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["resumed_slices"] == 1 and doc["written"] == len(keys(clean)) > 0
    assert (doc["begin"], doc["end"]) == (B, E) and doc["outside_slack"] == expect(stored, born, SLACK)[1] > 0
    assert out.read_bytes() == clean.read_bytes()


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--slack", "5m"), "--slack widens a --time-field born or property:NAME window"),
        (("--time-field", "born", "--slack", "soon"), "cannot read duration 'soon'"),
        (("--time-field", "property:"), "--time-field property:NAME needs the property's name"),
        (("--time-field", "arrival"), "--time-field must be store, born or property:NAME"),
    ],
)
def test_bad_time_field_options_are_usage_errors(door: str, cli: Run, extra: tuple[str, ...], says: str) -> None:
    r = cli(*args(door, *extra))
    assert r.code == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr
