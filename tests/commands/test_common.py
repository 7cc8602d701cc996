"""The group queryOffset reads messages as: --consumer-group, or -g where that changes nothing."""

from __future__ import annotations

import pytest

from mqadmin import errors
from mqadmin.commands._common import read_group
from mqadmin.model import BrokerInfo


class Brokers:
    """An admin that only says which brokers there are and their versions."""

    def __init__(self, *versions: str):
        self.asked = 0
        self.brokers = [BrokerInfo(f"broker-{i}", f"127.0.0.1:{10911 + i}", "c", v) for i, v in enumerate(versions)]

    def cluster_brokers(self) -> list[BrokerInfo]:
        self.asked += 1
        return self.brokers


def test_on_4x_brokers_the_inspected_group_reads() -> None:
    assert read_group(Brokers("4.9.7", "4.9.8"), "G", None) == "G"  # type: ignore[arg-type]


@pytest.mark.parametrize("versions", [("5.3.3",), ("4.9.7", "5.1.0"), ("4.9.7", "")], ids=["5x", "mixed", "silent"])
def test_a_5x_or_unknown_broker_keeps_tools_consumer(versions: tuple[str, ...]) -> None:
    """A 5.x pull as the group would become its pull offset and take its pending reset."""
    assert read_group(Brokers(*versions), "G", None) is None  # type: ignore[arg-type]


def test_the_option_wins_and_nothing_asked_without_a_group() -> None:
    admin = Brokers("5.3.3")
    assert read_group(admin, None, None) is None and admin.asked == 0  # type: ignore[arg-type]
    assert read_group(admin, "G", "READER") == "READER"  # type: ignore[arg-type]
    assert read_group(Brokers("4.9.7"), "G", "G") == "G"  # type: ignore[arg-type]


def test_reading_as_the_inspected_group_on_5x_is_refused() -> None:
    with pytest.raises(errors.UsageError, match="pending offset reset"):
        read_group(Brokers("5.3.3"), "G", "G")  # type: ignore[arg-type]
