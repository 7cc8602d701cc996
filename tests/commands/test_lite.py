"""Lite groups in consumerProgress and the offset commands, where no broker holds one (the mock,
a broker before 5.5): nothing changes for an ordinary group and --all is refused; the rest is
tested against a real 5.5.1 broker (tests/integration/test_lite_realbroker.py)."""

from __future__ import annotations

from collections.abc import Callable

from conftest import CliResult, Store


def test_all_is_for_lite_groups_and_an_ordinary_group_is_as_before(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80, groups={"g": None})
    r = cli("consumerProgress", "-n", store.address, "-g", "g", "--all")
    assert (
        r.code == 2
        and r.stderr.strip() == "mqadmin: error: --all is for lite groups (RocketMQ 5.5); 'g' is an ordinary group"
    )
    doc = cli("consumerProgress", "-n", store.address, "-g", "g", "--json").json()
    assert "lite" not in doc and doc["queues"]
    r = cli("queryOffset", "-n", store.address, "-g", "nosuch", "-t", "TopicTest")
    assert r.code == 2 and "unknown consumer group 'nosuch'" in r.stderr


def test_a_message_pulled_from_an_lmq_is_found_by_its_offset_there_not_its_parent_queues() -> None:
    from mqadmin.commands._lite import lmq_offset

    from mqadmin.model import Message

    props = {"INNER_MULTI_DISPATCH": "%LMQ%$P$a,%LMQ%$P$b", "INNER_MULTI_QUEUE_OFFSET": "7,3"}
    msg = Message("P", b"x", props, queue_offset=41)
    assert (lmq_offset(msg, "%LMQ%$P$a"), lmq_offset(msg, "%LMQ%$P$b")) == (7, 3)
    assert lmq_offset(msg, "%LMQ%$P$c") is None
    assert lmq_offset(Message("P", b"x", {"INNER_MULTI_DISPATCH": "%LMQ%$P$a"}), "%LMQ%$P$a") is None


def test_a_lite_topic_queue_is_routed_by_its_parent_and_named_in_the_backup() -> None:
    """An LMQ has no route of its own; a plan of a lite group's LMQs under -t <parent> has rows of
    other topics than the one named, so each row (and the backup) names its topic: restoring by
    the parent's queue 0 instead would move an ordinary queue."""
    from mqadmin.commands._lite import route_topic
    from mqadmin.commands._plan import PlanRow, ResetResult

    assert route_topic("%LMQ%$Parent$a$b") == "Parent"  # a topic has no $, a lite topic may
    assert (route_topic("%LMQ%$Parent$lt1"), route_topic("Plain")) == ("Parent", "Plain")
    lite = ResetResult("G", "Parent", None, True, [PlanRow("b", 0, 0, 5, 1, 3, topic="%LMQ%$Parent$lt1")])
    assert lite.multi_topic and lite.to_json()["queues"][0]["topic"] == "%LMQ%$Parent$lt1"
    plain = ResetResult("G", "Plain", None, True, [PlanRow("b", q, 0, 5, 1, 3, topic="Plain") for q in range(2)])
    assert not plain.multi_topic and "topic" not in plain.to_json()["queues"][0]
