"""Dead letters back home: rangeReplay from a %DLQ% topic --to origin and --to group:GROUP, against
the mock through both doors (embedded store, mockBroker over TCP). The dead letters are made the
way the broker makes them: a consumer's send-back whose retries have run out."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import CliResult, store_address

from mqadmin.admin import connect
from mqadmin.message import new_uniq_key
from mqadmin.mock.cluster import MockCluster
from mqadmin.model import Message

Run = Callable[..., CliResult]
GROUP, OTHER = "sms_group", "billing_group"
DLQ, RETRY = f"%DLQ%{GROUP}", f"%RETRY%{GROUP}"
HOMES = ("SmsTopic", "OrderTopic")


def seed(root: Path) -> None:
    """60 messages on two topics; every third one consumed by GROUP without success (dead-lettered)."""
    cluster = MockCluster.create(root, version="5.3.3")
    for topic in HOMES:
        cluster.create_topic(topic, 2)
    for broker in cluster.brokers.values():
        broker.ensure_group(GROUP)
        broker.ensure_group(OTHER)
    brokers = list(cluster.brokers.values())
    for i in range(60):
        broker = brokers[i % 2]
        props = {"TAGS": f"tag{i % 3}", "KEYS": f"phone-{i}", "UNIQ_KEY": new_uniq_key(), "template": f"t{i % 4}"}
        msg = broker.put_message(Message(HOMES[i % 2], f"sms {i}".encode(), props, queue_id=i % 2))
        if i % 3 == 0:
            broker.send_back(GROUP, msg.commitlog_offset, -1)  # retries used up: straight to the DLQ
    cluster.close()


@pytest.fixture(params=["embedded", "tcp"])
def door(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store per test: these tests send, and each asserts what arrived."""
    root = tmp_path / "store"
    seed(root)
    with store_address(root, request.param) as address:
        yield address


def messages(address: str, topic: str) -> list[Message]:
    admin = connect(address, read_only=True)
    try:
        return [m for mq in admin.topic_route(topic).message_queues() for m in admin.pull(mq, 0, 10_000).messages]
    finally:
        admin.close()


def replay(cli_proc: Run, address: str, *args: str) -> CliResult:
    return cli_proc("rangeReplay", "-n", address, "-t", DLQ, "-b", "-1h", *args, "--yes", "--json")


def test_origin_sends_each_dead_letter_to_its_first_topic(door: str, cli_proc: Run) -> None:
    dead = messages(door, DLQ)
    r = replay(cli_proc, door, "--to", "origin")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["written"] == len(dead) == 20
    for topic in HOMES:
        copies = [m for m in messages(door, topic) if "MQADMIN_ORIGIN_TOPIC" in m.properties]
        originals = [m for m in dead if m.properties["RETRY_TOPIC"] == topic]
        assert sorted(c.body for c in copies) == sorted(m.body for m in originals) and copies
        for c in copies:
            assert c.properties["MQADMIN_ORIGIN_TOPIC"] == DLQ
            assert c.properties["template"] and c.keys and c.tags  # user properties, keys, tags kept
            assert "RETRY_TOPIC" not in c.properties and c.reconsume_times == 0


def test_group_redelivers_dead_letters_to_that_group_only(door: str, cli_proc: Run) -> None:
    dead = messages(door, DLQ)
    r = replay(cli_proc, door, "--to", f"group:{GROUP}")
    assert r.code == 0, r.stderr
    retried = messages(door, RETRY)
    assert len(retried) == len(dead) == 20
    assert len(messages(door, DLQ)) == 20  # not dead-lettered again (a send-back would have)
    by_body = {m.body: m for m in dead}
    for m in retried:
        original = by_body[m.body]
        # the group's consumers read it as a message of its first topic, with fresh retries
        assert m.properties["RETRY_TOPIC"] == original.properties["RETRY_TOPIC"]
        assert m.properties["ORIGIN_MESSAGE_ID"] == original.properties["ORIGIN_MESSAGE_ID"]
        assert m.reconsume_times == 0 and m.keys == original.keys
    assert messages(door, f"%RETRY%{OTHER}") == []  # no other group got anything


def test_origin_needs_a_retry_or_dlq_topic(door: str, cli: Run) -> None:
    r = cli("rangeReplay", "-n", door, "-t", HOMES[0], "-b", "-1h", "--to", "origin", "--yes")
    assert r.code == 2 and "read a %DLQ%GROUP or %RETRY%GROUP topic" in r.stderr
    assert cli("rangeReplay", "-n", door, "-t", DLQ, "-b", "-1h", "--to", "origin:x").code == 2
