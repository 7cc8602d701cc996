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
