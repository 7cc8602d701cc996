"""The group queryOffset reads messages as, and "no offsets" on a topic the account may not read."""

from __future__ import annotations

import pytest
from mqadmin.commands._common import group_offsets, read_group

from mqadmin import errors
from mqadmin.model import BrokerData, BrokerInfo, ConsumeStats, MessageQueue, PullResult, QueueData, TopicRoute


class Brokers:
    """An admin that only says which brokers there are and their versions, and answers a pull
    (refused as TOOLS_CONSUMER with ``tools_refused``: an ACL account without that grant)."""

    def __init__(self, *versions: str, tools_refused: bool = False):
        self.asked = 0
        self.brokers = [BrokerInfo(f"broker-{i}", f"127.0.0.1:{10911 + i}", "c", v) for i, v in enumerate(versions)]
        self.tools_refused = tools_refused
        self.pulled_as: list[str | None] = []

    def cluster_brokers(self) -> list[BrokerInfo]:
        self.asked += 1
        return self.brokers

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult:
        self.pulled_as.append(group)
        if group is None and self.tools_refused:
            raise errors.NoPermission("no permission for group TOOLS_CONSUMER", "127.0.0.1:10911")
        return PullResult("FOUND", 1, 0, 3, [])


PROBE = MessageQueue("T", "broker-0", 0)


def test_on_4x_brokers_tools_consumer_reads_when_the_account_may() -> None:
    """A read as the group shows in its consume TPS: only when TOOLS_CONSUMER is refused."""
    admin = Brokers("4.9.7", "4.9.8")
    assert read_group(admin, "G", None, PROBE) is None  # type: ignore[arg-type]
    assert admin.pulled_as == [None]  # the probe, as TOOLS_CONSUMER
    refused = Brokers("4.9.7", tools_refused=True)
    assert read_group(refused, "G", None, PROBE) == "G"  # type: ignore[arg-type]


@pytest.mark.parametrize("versions", [("5.3.3",), ("4.9.7", "5.1.0"), ("4.9.7", "")], ids=["5x", "mixed", "silent"])
def test_a_5x_or_unknown_broker_keeps_tools_consumer(versions: tuple[str, ...]) -> None:
    """A 5.x pull as the group would become its pull offset and take its pending reset."""
    admin = Brokers(*versions, tools_refused=True)
    assert read_group(admin, "G", None, PROBE) is None  # type: ignore[arg-type]
    assert admin.pulled_as == []


def test_the_option_wins_and_nothing_asked_without_a_group() -> None:
    admin = Brokers("5.3.3")
    assert read_group(admin, None, None, PROBE) is None and admin.asked == 0  # type: ignore[arg-type]
    assert read_group(admin, "G", "READER", PROBE) == "READER"  # type: ignore[arg-type]
    assert read_group(Brokers("4.9.7"), "G", "G", PROBE) == "G"  # type: ignore[arg-type]


def test_reading_as_the_inspected_group_on_5x_is_refused() -> None:
    with pytest.raises(errors.UsageError, match="pending offset reset"):
        read_group(Brokers("5.3.3"), "G", "G", PROBE)  # type: ignore[arg-type]


class NoOffsets(Brokers):
    """A group without offsets on a topic; the broker refuses (or not) what reads the topic."""

    def __init__(self, version: str, refuse: str | None):
        super().__init__(version)
        self.refuse = refuse
        self.pulled_as: list[str | None] = []

    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        return ConsumeStats({}, 0.0)

    def lite_group_info(self, group: str, lite_topic: str | None, top_k: int) -> dict[str, object]:
        return {"broker-0": errors.InvalidParameter(f"Group [{group}] is not a LITE group.")}

    def list_groups(self, *, subscribed: bool = False) -> list[str]:
        if self.refuse == "groups":
            raise errors.NoPermission("no permission to list subscription groups", "127.0.0.1:10911")
        return ["Subscribed"] if subscribed else []

    def topic_route(self, topic: str) -> TopicRoute:
        return TopicRoute(topic, (BrokerData("broker-0", "c", {0: "127.0.0.1:10911"}),), (QueueData("broker-0", 1, 1),))

    def max_offset(self, mq: MessageQueue) -> int:
        if self.refuse == "max":
            raise errors.NoPermission(f"no permission to access Topic:{mq.topic}", "127.0.0.1:10911")
        return 3

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult:
        self.pulled_as.append(group)
        if self.refuse == "pull":
            raise errors.NoPermission(f"No default permission for topic:{mq.topic}", "127.0.0.1:10911")
        return PullResult("FOUND", 1, 0, 3, [])


@pytest.mark.parametrize(("version", "refuse"), [("4.9.7", "pull"), ("5.3.3", "max")])
def test_no_offsets_on_a_refused_topic_is_permission_denied(version: str, refuse: str) -> None:
    admin = NoOffsets(version, refuse)
    with pytest.raises(errors.MqadminError) as err:
        group_offsets(admin, "G", "T")  # type: ignore[arg-type]
    assert type(err.value) is errors.MqadminError and err.value.exit_code == 1
    assert str(err.value).startswith("permission denied by 127.0.0.1:10911:")
    assert str(err.value).endswith("group 'G' shows no offsets for topic 'T'")
    assert admin.pulled_as == (["G"] if version == "4.9.7" else [])  # 5.x: no pull as the group


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_no_offsets_on_a_readable_topic_is_an_unknown_group(version: str) -> None:
    with pytest.raises(errors.UsageError, match="unknown consumer group 'G': it has no offsets for topic 'T'"):
        group_offsets(NoOffsets(version, None), "G", "T")  # type: ignore[arg-type]


@pytest.mark.parametrize("refuse", [None, "groups"])
def test_a_subscription_group_that_never_committed_is_named_as_such(refuse: str | None) -> None:
    """Still unknown to the offsets (exit 2, as the broker's reset says "not exist"), but the reader
    learns the group is there and simply never committed, rather than hunting a typo; when the
    brokers will not list their subscription groups, the plain message."""
    with pytest.raises(errors.UsageError) as err:
        group_offsets(NoOffsets("5.3.3", refuse), "Subscribed")  # type: ignore[arg-type]
    hint = "a subscription group of that name exists, but no consumer has committed an offset yet"
    assert str(err.value).startswith("unknown consumer group 'Subscribed': it has no offsets on any broker")
    assert (hint in str(err.value)) is (refuse is None)
