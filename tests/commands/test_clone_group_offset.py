from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store

from tests.commands.test_consumer_connection import GROUP as ONLINE_GROUP
from tests.commands.test_consumer_connection import online
from tests.commands.test_reset_offset_by_time import offsets

CLONE = "cloneGroupOffset"


def at(hours_ago: float) -> int:
    return int(time.time() * 1000 - hours_ago * HOUR_MS)


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_clone_copies_the_source_offsets_and_the_undo_restores_the_destination(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(version, count=800, groups={"blue": at(1.5), "green": at(0.5), "other": None})
    blue, green, other = offsets(store, "blue"), offsets(store, "green"), offsets(store, "other")
    assert blue != green
    r = cli(CLONE, "-n", store.address, "-s", "blue", "-d", "green", "-t", "TopicTest", "-o", "true", "--json")
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert doc["group"] == "green" and doc["source_group"] == "blue"
    assert {(q["broker"], q["queue_id"]): (q["old_offset"], q["new_offset"]) for q in doc["queues"]} == {
        k: (green[k], blue[k]) for k in blue
    }
    assert all(q["outcome"] == "applied" for q in doc["queues"])
    assert len(doc["method"]) == 2
    assert offsets(store, "green") == blue and offsets(store, "blue") == blue
    saved = json.loads(Path(doc["backup"]).read_text())
    assert saved["group"] == "green" and saved["reason"] == CLONE
    back = cli(*shlex.split(doc["undo"])[1:], "--yes")
    assert back.code == 0, back.stderr
    assert offsets(store, "green") == green and offsets(store, "other") == other


def test_dry_run_and_the_java_text(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=800, groups={"blue": at(1.5), "green": at(0.5)})
    green = offsets(store, "green")
    dry = cli(CLONE, "-n", store.address, "-s", "blue", "-d", "green", "-t", "TopicTest", "--dry-run")
    assert dry.code == 0 and "Clone plan for group green from group blue on topic TopicTest" in dry.stdout
    assert "re-delivers" in dry.stdout and "Dry run: nothing was changed." in dry.stdout
    assert offsets(store, "green") == green
    r = cli(CLONE, "-n", store.address, "-s", "blue", "-d", "green", "-t", "TopicTest", "--output", "java")
    assert r.code == 0, r.stderr
    assert r.stdout == "clone group offset success. srcGroup[blue], destGroup=[green], topic[TopicTest]\n"
    assert offsets(store, "green") == offsets(store, "blue")


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_new_destination_group(version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    """A group the brokers never saw: 4.x takes its offsets; 5.3+ refuses them without a
    subscription group, so mqadmin refuses up front and says how to create it."""
    store = make_store(version, count=800, groups={"blue": at(1.5)})
    r = cli(CLONE, "-n", store.address, "-s", "blue", "-d", "fresh", "-t", "TopicTest", "--json")
    if version.startswith("5"):
        assert r.code == 2 and "does not exist on broker-a, broker-b" in r.stderr and "updateSubGroup" in r.stderr
        assert offsets(store, "fresh") == {}
        return
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    assert all(q["old_offset"] == q["min_offset"] == 0 for q in doc["queues"])  # backed up at the min offset
    assert offsets(store, "fresh") == offsets(store, "blue")


def test_bad_input_is_one_line_exit_2_and_nothing_changes(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=800, groups={"blue": at(1.5), "green": at(0.5)})
    green = offsets(store, "green")
    cases = [
        (("-s", "nosuch", "-d", "green", "-t", "TopicTest"), "unknown consumer group 'nosuch'"),
        (("-s", "blue", "-d", "green", "-t", "NoTopic"), "unknown topic 'NoTopic'"),
        (("-s", "blue", "-d", "blue", "-t", "TopicTest"), "name the same group"),
        (("-d", "green", "-t", "TopicTest"), "-s"),
        (("-s", "blue", "-t", "TopicTest"), "-d"),
    ]
    for args, message in cases:
        r = cli(CLONE, "-n", store.address, *args)
        assert r.code == 2 and message in r.stderr and r.stdout == "", (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert offsets(store, "green") == green and not (mqadmin_home / "backups").exists()


def test_refuses_a_destination_with_consumers_online_unless_told(
    door: str, make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    if door == "embedded":
        pytest.skip("an embedded store has no connections, so nobody can be online")
    store = make_store(count=800, groups={"blue": at(1.5), ONLINE_GROUP: at(0.5)})
    before = offsets(store, ONLINE_GROUP)
    args = (CLONE, "-n", store.address, "-s", "blue", "-d", ONLINE_GROUP, "-t", "TopicTest", "--no-wait")
    with online(store, ("10.0.0.8@111",)):
        r = cli(*args)
        assert r.code == 2 and "1 consumer(s) online (10.0.0.8@111)" in r.stderr and "--while-online" in r.stderr
        assert offsets(store, ONLINE_GROUP) == before and not (mqadmin_home / "backups").exists()
        assert cli(*args, "--dry-run").code == 0  # a plan is only a look
        r = cli(*args, "--while-online", "--json")
        assert r.code == 0, r.stderr
        assert "copying anyway (--while-online)" in r.stderr
    assert offsets(store, ONLINE_GROUP) == offsets(store, "blue")


def test_a_group_made_by_update_sub_group_is_found(
    door: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """The blue/green flow: updateSubGroup makes the green group (a subscription group, no
    %RETRY% topic), then its offsets are cloned before any consumer starts."""
    store = make_store("5.5.1", count=800, groups={"blue": at(1.5)})
    if store.server is not None:
        from tests.support.realbroker import create_group

        for addr in store.server.broker_addrs.values():
            create_group(addr, "green")
    else:
        cluster = store.open(writable=True)
        try:
            for broker in cluster.brokers.values():
                broker.ensure_group("green", retry_topic=False)
        finally:
            cluster.close()
    r = cli(CLONE, "-n", store.address, "-s", "blue", "-d", "green", "-t", "TopicTest", "--json")
    assert r.code == 0, r.stderr
    assert offsets(store, "green") == offsets(store, "blue")
    backup = json.loads(Path(r.json()["backup"]).read_text())
    restored = cli("restoreOffset", "--from", r.json()["backup"], "--yes")
    assert restored.code == 0, restored.stderr
    assert backup["group"] == "green"
