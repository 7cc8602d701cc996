"""rangeReplay's content options (--sql) against the mock, through both doors: the embedded
store (mock://PATH) and mockBroker over TCP. Expected sets are computed here from what is stored."""

from __future__ import annotations

import json
import random
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliResult, store_address

from mqadmin.admin import connect
from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message
from mqadmin.replay.records import read_records

T0 = 1_700_000_000_000
Run = Callable[..., CliResult]
KINDS = ("sms", "email", "push")
SQL = "kind = 'sms' AND retries > 3"


def seed(root: Path) -> None:
    """600 messages over 60 ms on 4 queues, with user properties (kind, retries, region); one in
    twelve is stored again on another queue, as a producer's retry (after a lost answer) stores it."""
    cluster = MockCluster.create(root, version="5.3.3")
    cluster.create_topic("S", 2)
    cluster.create_topic("SCopy", 2)
    rng = random.Random(5)
    targets = [(b, q) for b in cluster.brokers.values() for q in range(2)]
    for i in range(600):
        broker, qid = targets[i % 4]
        props = {"TAGS": rng.choice(KINDS), "KEYS": f"order-{i}", "UNIQ_KEY": new_uniq_key()}
        props["kind"] = props["TAGS"]
        retries = rng.choice([*(str(n) for n in range(8)), "x", "2.5", None])
        if retries is not None:
            props["retries"] = retries
        props["region"] = rng.choice(("cn", "us"))
        msg = Message(topic="S", body=f"sms {i}".encode(), properties=props, queue_id=qid)
        broker.put_message(msg, store_timestamp=T0 + i // 10)
        if i % 12 == 5:
            again_broker, again_q = targets[(i + 1 + i // 12) % 4]
            again = Message(topic="S", body=msg.body, properties=dict(props), queue_id=again_q)
            again_broker.put_message(again, store_timestamp=T0 + i // 10)  # store times stay monotonic
    cluster.close()


@pytest.fixture(scope="module", params=["embedded", "tcp"])
def door(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp(f"filters-{request.param}") / "store"
    seed(root)
    with store_address(root, request.param) as address:
        yield address


def stored(address: str) -> list[Message]:
    admin = connect(address, read_only=True)
    try:
        out: list[Message] = []
        for mq in admin.topic_route("S").message_queues():
            out += admin.pull(mq, 0, 100_000).messages
        return sorted(out, key=lambda m: (m.broker_name, m.queue_id, m.queue_offset))
    finally:
        admin.close()


def keys(path: Path) -> list[tuple[str, int, int]]:
    return [(r["broker"], r["queue_id"], r["queue_offset"]) for r in read_records(path)]


def sms_with_retries_above_3(m: Message) -> bool:
    """SQL by hand: an int constant makes the broker parse the property with Integer.valueOf."""
    r = m.properties.get("retries")
    return m.properties.get("kind") == "sms" and r is not None and bool(re.fullmatch(r"[+-]?\d+", r)) and int(r) > 3


def window_args(address: str, begin: int = T0 + 5, end: int = T0 + 55) -> tuple[str, ...]:
    return ("rangeReplay", "-n", address, "-t", "S", "-b", str(begin), "-e", str(end), "--slice-size", "25")


def test_sql_selects_what_the_expression_says(door: str, tmp_path: Path, cli_proc: Run) -> None:
    out = tmp_path / "o.jsonl"
    r = cli_proc(*window_args(door), "--sql", SQL, "--to", f"jsonl:{out}", "--json")
    assert r.code == 0, r.stderr
    want = [
        (m.broker_name, m.queue_id, m.queue_offset)
        for m in stored(door)
        if T0 + 5 <= m.store_timestamp < T0 + 55 and sms_with_retries_above_3(m)
    ]
    assert keys(out) == want and 20 < len(want) < 200
    doc = json.loads(r.stdout)
    assert doc["sql"] == SQL and doc["written"] == doc["matched"] == len(want)


def test_sql_and_tag_combine(door: str, cli: Run, cli_proc: Run) -> None:
    r = cli_proc(*window_args(door), "--tag", "sms || push", "--sql", "region = 'us' OR retries IS NULL")
    assert r.code == 0, r.stderr
    got = [json.loads(line)["queue_offset"] for line in r.stdout.splitlines()]
    want = [
        m.queue_offset
        for m in stored(door)
        if T0 + 5 <= m.store_timestamp < T0 + 55
        and m.tags in ("sms", "push")
        and (m.properties["region"] == "us" or "retries" not in m.properties)
    ]
    assert sorted(got) == sorted(want) and len(want) > 50


@pytest.mark.parametrize(
    ("expr", "column"), [("kind = 'sms' AND", 17), ("retries > 'x'", 9), ("kind = 'sms' region = 'us'", 14)]
)
def test_bad_sql_is_a_usage_error_with_its_column(door: str, cli_proc: Run, expr: str, column: int) -> None:
    r = cli_proc(*window_args(door), "--sql", expr)
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"column {column})" in r.stderr and "Traceback" not in r.stderr


def test_killed_sql_replay_resumes_exactly(door: str, tmp_path: Path, cli_proc: Run) -> None:
    out, cp, clean = tmp_path / "r.jsonl", tmp_path / "cp", tmp_path / "clean.jsonl"
    args = (*window_args(door), "--sql", SQL)
    assert cli_proc(*args, "--to", f"jsonl:{clean}").code == 0
    run = (*args, "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": "replay-slice-recorded"})
    assert killed.code == -signal.SIGKILL and cp.read_text().count('"slice"') == 1
    other = cli_proc(*window_args(door), "--sql", "kind = 'push'", "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    assert other.code == 2 and "differs in: sql" in other.stderr  # a resume keeps its filter
    resumed = cli_proc(*run, "--json")
    assert resumed.code == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    assert doc["resumed_slices"] == 1 and doc["written"] == len(keys(clean)) > 0
    assert out.read_bytes() == clean.read_bytes()


# ---- --dedup ----


def first_by_uniq_key(messages: list[Message], begin: int, end: int) -> tuple[list[tuple[str, int, int]], int]:
    """The window in queue order, each UNIQ_KEY's first occurrence only; and how many were dropped."""
    seen: set[str] = set()
    kept, dropped = [], 0
    for m in messages:
        if not begin <= m.store_timestamp < end:
            continue
        if m.uniq_key in seen:
            dropped += 1
            continue
        seen.add(m.uniq_key or "")
        kept.append((m.broker_name, m.queue_id, m.queue_offset))
    return kept, dropped


def test_dedup_keeps_the_first_in_queue_order(door: str, tmp_path: Path, cli_proc: Run) -> None:
    out = tmp_path / "d.jsonl"
    want, dropped = first_by_uniq_key(stored(door), T0 + 5, T0 + 55)
    assert dropped > 20
    dry = cli_proc(*window_args(door), "--dedup", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert json.loads(dry.stdout)["would_write"] == len(want) and not out.exists()
    r = cli_proc(*window_args(door), "--dedup", "--to", f"jsonl:{out}", "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert keys(out) == want
    assert doc["duplicates_dropped"] == dropped == json.loads(dry.stdout)["duplicates_dropped"]
    assert doc["written"] == len(want) and doc["matched"] == len(want) + dropped
    table = cli_proc(*window_args(door), "--dedup", "--sql", SQL, "--to", f"jsonl:{tmp_path / 't.jsonl'}")
    assert table.code == 0 and "Dropped " in table.stdout and "duplicate(s) by UNIQ_KEY" in table.stdout


@pytest.mark.parametrize("fault", ["replay-slice-written", "replay-slice-recorded"])
def test_killed_dedup_replay_resumes_exactly(door: str, tmp_path: Path, cli_proc: Run, fault: str) -> None:
    """The set of written keys survives the kill exactly: what the killed run recorded is not
    written again, and keys of a slice it wrote but did not record are not taken as seen."""
    out, cp, clean = tmp_path / "r.jsonl", tmp_path / "cp", tmp_path / "clean.jsonl"
    args = (*window_args(door), "--dedup")
    assert cli_proc(*args, "--to", f"jsonl:{clean}").code == 0
    run = (*args, "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": fault})
    assert killed.code == -signal.SIGKILL and (tmp_path / "cp.dedup").exists()
    assert cp.read_text().count('"slice"') == (0 if fault == "replay-slice-written" else 1)
    resumed = cli_proc(*run, "--json")
    assert resumed.code == 0, resumed.stderr
    assert out.read_bytes() == clean.read_bytes()
    assert json.loads(resumed.stdout)["duplicates_dropped"] == first_by_uniq_key(stored(door), T0 + 5, T0 + 55)[1]
    assert not (tmp_path / "cp.dedup").exists()  # the set goes once the replay is finished


def test_dry_run_counts_what_a_filtered_run_writes(door: str, cli_proc: Run, tmp_path: Path) -> None:
    extra = ("--sql", SQL, "--tag", "sms || email", "--limit", "30")
    dry = cli_proc(*window_args(door), *extra, "--dry-run", "--json")
    real = cli_proc(*window_args(door), *extra, "--to", f"jsonl:{tmp_path / 'x.jsonl'}", "--json")
    assert dry.code == real.code == 0, dry.stderr + real.stderr
    assert json.loads(dry.stdout)["would_write"] == json.loads(real.stdout)["written"] > 0


# ---- --rate ----


def test_rate_paces_sends_and_the_dry_run_says_how_long(door: str, cli_proc: Run) -> None:
    args = window_args(door, T0 + 20, T0 + 35)  # about 160 messages
    dry = cli_proc(*args, "--rate", "6000/min", "--dry-run")
    total = len([m for m in stored(door) if T0 + 20 <= m.store_timestamp < T0 + 35])
    assert dry.code == 0 and f"At --rate 100 msg/s that takes {round(total / 100)} s" in dry.stdout
    r = cli_proc(*args, "--rate", "100", "--to", "topic:SCopy", "--yes", "--json")
    assert r.code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["written"] == total > 100
    # message n goes out at n / rate: never faster; slower only by what the machine adds
    assert (total - 1) / 100 <= doc["elapsed_ms"] / 1000 < total / 100 * 1.5


def test_killed_paced_replay_resumes_exactly(door: str, tmp_path: Path, cli_proc: Run) -> None:
    out, cp, clean = tmp_path / "r.jsonl", tmp_path / "cp", tmp_path / "clean.jsonl"
    assert cli_proc(*window_args(door), "--to", f"jsonl:{clean}").code == 0
    run = (*window_args(door), "--rate", "5000", "--to", f"jsonl:{out}", "--checkpoint", str(cp))
    killed = cli_proc(*run, env={"MQADMIN_FAULT_POINT": "replay-slice-written"})
    assert killed.code == -signal.SIGKILL
    resumed = cli_proc(*run, "--rate", "20000")  # another rate on resume is fine: it is not the output's
    assert resumed.code == 0, resumed.stderr
    assert out.read_bytes() == clean.read_bytes()


@pytest.mark.parametrize("rate", ["0", "-5", "fast", "10/h", "inf"])
def test_bad_rate_is_a_usage_error(door: str, cli: Run, rate: str) -> None:
    r = cli(*window_args(door), "--rate", rate)
    assert r.code == 2 and "--rate takes messages per second" in r.stderr


def test_max_inflight_keeps_the_output(door: str, tmp_path: Path, cli_proc: Run, cli: Run) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert cli_proc(*window_args(door), "--to", f"jsonl:{a}").code == 0
    r = cli_proc(*window_args(door), "--max-inflight", "2", "--to", f"jsonl:{b}")
    assert r.code == 0, r.stderr
    assert a.read_bytes() == b.read_bytes()
    bad = cli(*window_args(door), "--max-inflight", "0")
    assert bad.code == 2 and "--max-inflight must be at least 1" in bad.stderr
