"""What resetOffsetByTime prints is true: the exact plan, the verification, the time it used."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from conftest import CliResult, Store


def test_force_takes_only_true_or_false(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": None})
    base = ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h", "--dry-run"]
    for word in ("yes", "1", "no", "0", "TRUEISH"):
        r = cli(*base, "-f", word)
        assert r.code == 2 and f"-f/--force takes true or false, not {word!r}" in r.stderr, word
    for word in ("true", "false", "TRUE", "False"):
        assert cli(*base, "-f", word).code == 0, word


def test_dry_run_names_the_epoch_that_applies_exactly_that_plan(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=800, groups={"g": None})
    base = ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest"]
    dry = cli(*base, "-s", "-30m", "--dry-run")
    assert dry.code == 0, dry.stderr
    m = re.search(r"To apply exactly this plan, pass -s (\d{13})", dry.stdout)
    assert m is not None, dry.stdout
    epoch = m.group(1)
    assert f"({epoch})" in dry.stdout  # the Time: line shows the same instant
    plan = cli(*base, "-s", "-30m", "--dry-run", "--json").json()
    applied = cli(*base, "-s", epoch, "--yes", "--json")
    assert applied.code == 0, applied.stderr
    doc: Any = applied.json()
    assert doc["timestamp"] == int(epoch)
    dry_doc: Any = plan
    # The apply with the epoch lands where the dry run said (the relative one was resolved later).
    offsets_dry = {(q["broker"], q["queue_id"]): q["new_offset"] for q in dry_doc["queues"]}
    offsets_applied = {(q["broker"], q["queue_id"]): q["new_offset"] for q in doc["queues"]}
    assert offsets_applied.keys() == offsets_dry.keys()
    table = {
        (line.split()[0], int(line.split()[1])): int(line.split()[5])
        for line in dry.stdout.splitlines()
        if line.startswith("broker-")
    }
    assert offsets_applied == table


def test_every_apply_ends_with_the_verified_line_and_when_it_finished(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], door: str
) -> None:
    store = make_store(count=80, groups={"g": None})
    r = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-3h", "--yes")
    assert r.code == 0, r.stderr
    assert "Verified: 8 queues read back at their planned offsets" in r.stdout
    assert re.search(r"^Applied at: \S+ \(\d{13}\)$", r.stdout, re.M)
    assert re.search(r"^Undo: mqadmin restoreOffset --from \S+ -n \S+$", r.stdout, re.M)
    durable = "flushConsumerOffsetInterval" in r.stdout
    assert durable == (door == "tcp")  # a remote broker flushes on its own schedule; say so
    j = cli("restoreOffset", "-n", store.address, "--from", r.stdout.split("Backup: ")[1].split()[0], "--json")
    doc: Any = j.json()
    assert j.code == 0 and doc["verified"] == doc["planned"] == 8 and doc["applied_at_iso"]
    assert all(q["outcome"] == "applied" for q in doc["queues"])


@pytest.mark.parametrize("with_time", [False, True])
def test_no_time_line_when_o_decides_the_offset(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], with_time: bool
) -> None:
    store = make_store(count=80, groups={"g": None})
    args = ["resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-b", "broker-a", "-q", "1"]
    args += ["-o", "3", "--yes"] + (["-s", "-1h"] if with_time else [])
    r = cli(*args)
    assert r.code == 0, r.stderr
    assert "Time:" not in r.stdout and "Verified: 1 queues read back" in r.stdout
