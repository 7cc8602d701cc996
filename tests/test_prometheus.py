"""consumerProgress figures as Prometheus text: parsed back by Prometheus' own parser."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from mqadmin.prometheus import Exposition, group_exposition, groups_exposition


def _q(topic: str, broker: str, qid: int, broker_offset: int, consumer_offset: int, lag_ms: int) -> dict[str, Any]:
    return {
        "topic": topic,
        "broker": broker,
        "queue_id": qid,
        "broker_offset": broker_offset,
        "consumer_offset": consumer_offset,
        "diff": broker_offset - consumer_offset,
        "lag_time_ms": lag_ms,
    }


DOC = {
    "group": "sms",
    "tps": 12.5,
    "diff_total": 35,
    "lag_time_ms": 90_000,
    "queues": [
        _q("%RETRY%sms", "broker-a", 0, 3, 1, 5_000),
        _q("SmsTopic", "broker-a", 0, 100, 90, 90_000),
        _q("SmsTopic", "broker-a", 1, 100, 95, 30_000),
        _q("SmsTopic", "broker-b", 0, 50, 32, 1_000),
    ],
}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_one_group_in_the_exporters_names() -> None:
    text = group_exposition(
        DOC, online=2, model="CLUSTERING", clusters={"broker-a": "c1"}, read_at_ms=1_700_000_000_123
    ).text()
    got = samples(text)
    diff = ("countOfOnlineConsumers", "2"), ("group", "sms"), ("msgModel", "1")
    assert got[("rocketmq_group_diff", (*diff[:2], *diff[2:], ("topic", "SmsTopic")))] == 33
    assert got[("rocketmq_group_retrydiff", (*diff, ("topic", "%RETRY%sms")))] == 2
    a = (("broker", "broker-a"), ("cluster", "c1"), ("group", "sms"), ("topic", "SmsTopic"))
    b = (("broker", "broker-b"), ("cluster", ""), ("group", "sms"), ("topic", "SmsTopic"))
    assert got[("rocketmq_consumer_offset", a)] == 185 and got[("rocketmq_consumer_offset", b)] == 32
    assert got[("rocketmq_group_get_latency_by_storetime", a)] == 90_000  # the largest on the broker
    queue = (("broker", "broker-a"), ("group", "sms"), ("queue_id", "1"), ("topic", "SmsTopic"))
    assert got[("mqadmin_queue_diff", queue)] == 5 and got[("mqadmin_queue_lag_seconds", queue)] == 30
    assert got[("mqadmin_group_lag_seconds", (("group", "sms"),))] == 90
    assert got[("mqadmin_group_consume_tps", (("group", "sms"),))] == 12.5
    assert got[("mqadmin_progress_read_timestamp_seconds", (("group", "sms"),))] == 1_700_000_000.123
    assert text.count("# TYPE rocketmq_group_diff gauge") == 1 and text.endswith("\n")


def test_all_groups_and_unknown_lag() -> None:
    groups = [
        {"group": "a", "count": 1, "tps": 0.0, "diff_total": 0, "lag_time_ms": 0},
        {"group": "b", "count": 0, "tps": None, "diff_total": 80, "lag_time_ms": None},
    ]
    got = samples(groups_exposition(groups, read_at_ms=0).text())
    assert got[("mqadmin_group_diff", (("group", "b"),))] == 80
    assert got[("mqadmin_group_online_clients", (("group", "a"),))] == 1
    assert ("mqadmin_group_lag_seconds", (("group", "b"),)) not in got  # unknown is left out, never 0
    assert got[("mqadmin_group_lag_seconds", (("group", "a"),))] == 0


def test_escaping_survives_the_parser() -> None:
    exp = Exposition()
    exp.add("m", "help with \\ and\nnewline", {"label": 'quote " back \\ nl \n end'}, 1.5)
    family = next(text_string_to_metric_families(exp.text()))
    assert family.documentation == "help with \\ and\nnewline"
    assert family.samples[0].labels == {"label": 'quote " back \\ nl \n end'} and family.samples[0].value == 1.5
