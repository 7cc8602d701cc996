"""Topic and group names: the broker's rule, and every door that applies it before a name can
reach a request or a path (the commands' -g/-t, the embedded backend, the store)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mqadmin import errors, names
from mqadmin.mock.backend import open_mock
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.store import BrokerStore
from mqadmin.model import Message, MessageQueue
from tests.conftest import CliResult

BAD = ["x/../../../../escaped", "..", ".", "", " ", "a b", "tab\t", "caf\u00e9", "a,b", "a.b", "a/b", "a\\b"]


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%g1", "%DLQ%g1", "a|b", "A-Z_0-9", "t" * 127])
def test_legal_topics(name: str) -> None:
    assert names.topic_problem(name) is None


@pytest.mark.parametrize("name", BAD)
def test_illegal_names_carry_the_broker_remark(name: str) -> None:
    topic = names.topic_problem(name)
    group = names.group_problem(name)
    assert topic in (
        "The specified topic is blank.",
        "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
    )
    assert group is not None and group.startswith("The specified group")


def test_length_limits() -> None:
    assert names.topic_problem("t" * 128) == "The specified topic is longer than topic max length."
    assert names.group_problem("g" * 120) is None
    assert names.group_problem("g" * 121) == f"The specified group: {'g' * 121}, is longer than group max length: 120"


@pytest.mark.parametrize(
    "args",
    [
        ["queryOffset", "-t", "../escaped"],
        ["queryOffset", "-t", "TopicTest,../escaped"],
        ["queryOffset", "-t", "TopicTest", "-g", "g1,x/../y"],
        ["consumerProgress", "-g", "x/../../escaped"],
        ["consumerProgress", "-g", "g1", "-t", "a b"],
        ["resetOffsetByTime", "-g", "x/../escaped", "-t", "TopicTest", "-s", "-1h"],
        ["resetOffsetByTime", "-g", "g1", "-t", "t" * 128, "-s", "-1h"],
        ["rangeReplay", "-t", "..", "-b", "-1h", "--to", "stdout"],
        ["resetOffsetByTime", "-g", "g1", "-t", "TopicTest,../escaped", "-s", "-1h"],
        ["skipAccumulatedMessage", "-g", "../g", "-t", "TopicTest"],
        ["cloneGroupOffset", "-s", "g1", "-d", "x/../y", "-t", "TopicTest"],
    ],
)
def test_commands_refuse_bad_names_before_any_request(cli: Callable[..., CliResult], args: list[str]) -> None:
    # 127.0.0.1:1 refuses connections: a request would be exit 1 with a connection error.
    result = cli(*args, "-n", "127.0.0.1:1", "--timeout", "1")
    assert result.code == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "The specified" in result.stderr and "Traceback" not in result.stderr


def test_commands_accept_several_good_names(cli: Callable[..., CliResult]) -> None:
    result = cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest,%RETRY%demo_group", "--json")
    assert result.code == 0, result.stderr


def test_embedded_backend_refuses_bad_names(tmp_path: Path) -> None:
    MockCluster.create(tmp_path / "store").close()
    admin = open_mock(f"mock://{tmp_path / 'store'}")
    try:
        mq = MessageQueue("../../escaped", "broker-a", 0)
        for call in (
            lambda: admin.max_offset(mq),
            lambda: admin.min_offset(mq),
            lambda: admin.search_offset(mq, 0),
            lambda: admin.consumer_offset("g1", mq),
            lambda: admin.update_consumer_offset("g1", mq, 1),
            lambda: admin.update_consumer_offset("x/../escaped", MessageQueue("T", "broker-a", 0), 1),
            lambda: admin.consume_stats("x/../escaped"),
            lambda: admin.pull(mq, 0),
            lambda: admin.send("../escaped", Message(topic="", body=b"x")),
            lambda: admin.reset_offset_by_time("TopicTest", "../escaped", 0),
        ):
            with pytest.raises(errors.InvalidParameter, match="The specified"):
                call()
    finally:
        admin.close()
    assert not [p for p in tmp_path.rglob("*") if "escaped" in p.name]


def test_the_store_never_joins_an_illegal_name_into_a_path(tmp_path: Path) -> None:
    store = BrokerStore(tmp_path / "b", writable=True)
    for topic, qid in (("../../escaped", 0), ("a/b", 0), ("..", 0), ("T", -1)):
        with pytest.raises(errors.StoreError):
            store.queue(topic, qid)
        with pytest.raises(errors.StoreError):
            store.put(Message(topic=topic, body=b"x", queue_id=qid))
    assert not [p for p in tmp_path.rglob("*") if "escaped" in p.name]


@pytest.mark.parametrize("target", ["topic:../escaped", "group:x/../escaped", "topic:" + "t" * 128])
def test_replay_send_targets_follow_the_name_rule(cli: Callable[..., CliResult], target: str) -> None:
    result = cli("rangeReplay", "-n", "127.0.0.1:1", "-t", "TopicTest", "-b", "-1h", "--to", target, "--timeout", "1")
    assert result.code == 2 and "The specified" in result.stderr, result.stderr


def test_a_store_naming_a_broker_folder_outside_itself_is_refused(tmp_path: Path) -> None:
    import json

    from mqadmin.mock.cluster import CLUSTER_FILE, MockCluster

    MockCluster.create(tmp_path / "store", ("broker-a",)).close()
    meta_path = tmp_path / "store" / CLUSTER_FILE
    meta = json.loads(meta_path.read_text())
    meta["brokers"] = ["../escaped"]
    meta_path.write_text(json.dumps(meta))
    (tmp_path / "escaped").mkdir()
    with pytest.raises(errors.UsageError, match="cannot be a folder of the store"):
        MockCluster(tmp_path / "store", writable=True)
