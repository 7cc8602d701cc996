"""consumerProgress as Prometheus text exposition (format 0.0.4), for node_exporter's textfile
collector or any scraper.

Metric and label names follow apache/rocketmq-exporter where it has the figure, so dashboards and
alerts written for the exporter read ours too:

* ``rocketmq_group_diff`` / ``rocketmq_group_retrydiff`` / ``rocketmq_group_dlqdiff``
  {group, topic, countOfOnlineConsumers, msgModel}: messages behind, summed over a topic's queues;
  ``msgModel`` is the MessageModel ordinal as the exporter writes it (BROADCASTING 0, CLUSTERING 1);
* ``rocketmq_consumer_offset`` {cluster, broker, topic, group}: the group's offsets summed per broker;
* ``rocketmq_group_get_latency_by_storetime`` {cluster, broker, topic, group}: milliseconds since
  the oldest unconsumed message was stored, the largest over the broker's queues.

What the exporter does not have is ``mqadmin_``-prefixed: per-queue figures, the group's lag in
seconds, its consume TPS, its online clients, and the time the figures were read.

With ``--health``, ``mqadmin_group_health_status`` {group} and ``mqadmin_queue_health_status``
{group, topic, broker, queue_id} carry the status as a number (HEALTH_VALUES): 0 OK (also while
the window is still collecting), 1 WARN, 2 STALL, 3 STOP, 4 REWIND, 5 ERR; an alert on ``>= 2``
is ``--fail-on STALL``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from mqadmin.protocol.constants import DLQ_PREFIX, RETRY_PREFIX

#: the health statuses' gauge values, in rising severity (mqadmin.health.Status)
HEALTH_VALUES = {"OK": 0, "WARN": 1, "STALL": 2, "STOP": 3, "REWIND": 4, "ERR": 5}
HEALTH_HELP = "Health over the window: 0 OK, 1 WARN, 2 STALL, 3 STOP, 4 REWIND, 5 ERR (consumerProgress --health)"

#: MessageModel ordinals, as the exporter writes the msgModel label
MODEL_ORDINALS = {"BROADCASTING": "0", "CLUSTERING": "1"}

Labels = tuple[tuple[str, str], ...]


class Exposition:
    """Metric families in the order first added, each with its HELP and TYPE lines once."""

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, list[tuple[Labels, float]]]] = {}

    def add(self, name: str, help_text: str, labels: Mapping[str, object], value: float) -> None:
        family = self._families.setdefault(name, (help_text, []))
        family[1].append((tuple((k, str(v)) for k, v in labels.items()), value))

    def text(self) -> str:
        lines: list[str] = []
        for name, (help_text, samples) in self._families.items():
            lines += [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} gauge"]
            for labels, value in samples:
                inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels)
                lines.append(f"{name}{{{inner}}} {_number(value)}")
        return "\n".join(lines) + "\n" if lines else ""


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _diff_family(topic: str) -> str:
    if topic.startswith(RETRY_PREFIX):
        return "rocketmq_group_retrydiff"
    if topic.startswith(DLQ_PREFIX):
        return "rocketmq_group_dlqdiff"
    return "rocketmq_group_diff"


def group_exposition(
    doc: Mapping[str, Any],
    *,
    online: int,
    model: str,
    clusters: Mapping[str, str],
    read_at_ms: int,
    out: Exposition | None = None,
) -> Exposition:
    """One group's per-queue document (``consumerProgress -g --json``) as metrics.

    ``online``/``model``: its clients now (0 and CLUSTERING when none is online, as the exporter
    assumes); ``clusters``: broker name -> cluster name.
    """
    exp = out or Exposition()
    group = doc["group"]
    queues: list[Mapping[str, Any]] = doc["queues"]
    diff_by_topic: dict[str, int] = defaultdict(int)
    offset_by_broker: dict[tuple[str, str], int] = defaultdict(int)
    lag_by_broker: dict[tuple[str, str], int] = defaultdict(int)
    for q in queues:
        diff_by_topic[q["topic"]] += q["diff"]
        key = (q["broker"], q["topic"])
        offset_by_broker[key] += q["consumer_offset"]
        lag_by_broker[key] = max(lag_by_broker[key], q.get("lag_time_ms") or 0)
    model_label = MODEL_ORDINALS.get(model, model)
    for topic, diff in diff_by_topic.items():
        labels = {"group": group, "topic": topic, "countOfOnlineConsumers": online, "msgModel": model_label}
        exp.add(
            _diff_family(topic),
            "Messages the group is behind on the topic (rocketmq-exporter's GroupDiff)",
            labels,
            diff,
        )
    dlq = DLQ_PREFIX + group
    if doc.get("dlq_depth") is not None and dlq not in diff_by_topic:
        # the group's dead letters: nobody consumes them, so all of them are its DLQ diff
        labels = {"group": group, "topic": dlq, "countOfOnlineConsumers": online, "msgModel": model_label}
        exp.add(
            _diff_family(dlq),
            "Messages the group is behind on the topic (rocketmq-exporter's GroupDiff)",
            labels,
            doc["dlq_depth"],
        )
    for (broker, topic), offset in offset_by_broker.items():
        labels = {"cluster": clusters.get(broker, ""), "broker": broker, "topic": topic, "group": group}
        exp.add(
            "rocketmq_consumer_offset", "The group's consumer offsets summed over the broker's queues", labels, offset
        )
    for (broker, topic), lag in lag_by_broker.items():
        labels = {"cluster": clusters.get(broker, ""), "broker": broker, "topic": topic, "group": group}
        exp.add(
            "rocketmq_group_get_latency_by_storetime",
            "Milliseconds since the oldest unconsumed message on the broker was stored",
            labels,
            lag,
        )
    _queue_series(exp, group, queues)
    _group_totals(exp, group, doc.get("diff_total", 0), doc.get("lag_time_ms"), doc.get("tps"), online)
    if "health" in doc:
        _group_health(exp, group, doc["health"])
        for q in queues:
            labels = {"group": group, "topic": q["topic"], "broker": q["broker"], "queue_id": q["queue_id"]}
            exp.add("mqadmin_queue_health_status", HEALTH_HELP, labels, HEALTH_VALUES[q["health"]["status"]])
    exp.add(
        "mqadmin_progress_read_timestamp_seconds",
        "When mqadmin read these figures",
        {"group": group},
        read_at_ms / 1000,
    )
    return exp


def _queue_series(exp: Exposition, group: str, queues: Iterable[Mapping[str, Any]]) -> None:
    """mqadmin's own per-queue series, beside the exporter's per-broker sums."""
    for q in queues:
        labels = {"group": group, "topic": q["topic"], "broker": q["broker"], "queue_id": q["queue_id"]}
        exp.add("mqadmin_queue_broker_offset", "The queue's max offset", labels, q["broker_offset"])
        exp.add(
            "mqadmin_queue_consumer_offset", "The group's committed offset in the queue", labels, q["consumer_offset"]
        )
        exp.add("mqadmin_queue_diff", "Messages the group is behind in the queue", labels, q["diff"])
        exp.add(
            "mqadmin_queue_lag_seconds",
            "Age of the oldest unconsumed message in the queue (0 when caught up)",
            labels,
            (q.get("lag_time_ms") or 0) / 1000,
        )


def groups_exposition(groups: Iterable[Mapping[str, Any]], *, read_at_ms: int) -> Exposition:
    """Every group's summary line (``consumerProgress --json``) as metrics."""
    exp = Exposition()
    for g in groups:
        _group_totals(exp, g["group"], g["diff_total"], g.get("lag_time_ms"), g.get("tps"), g.get("count"))
        if "health" in g:
            _group_health(exp, g["group"], g["health"])
        exp.add(
            "mqadmin_progress_read_timestamp_seconds",
            "When mqadmin read these figures",
            {"group": g["group"]},
            read_at_ms / 1000,
        )
    return exp


def _group_totals(
    exp: Exposition, group: str, diff: int, lag_ms: int | None, tps: float | None, online: int | None
) -> None:
    labels = {"group": group}
    exp.add("mqadmin_group_diff", "Messages the group is behind, all its queues", labels, diff)
    if lag_ms is not None:  # unknown lag is left out, not reported as 0
        exp.add(
            "mqadmin_group_lag_seconds",
            "Age of the group's oldest unconsumed message (0 when caught up)",
            labels,
            lag_ms / 1000,
        )
    if tps is not None:
        exp.add("mqadmin_group_consume_tps", "The group's consume rate as the brokers report it", labels, tps)
    if online is not None:  # clients not read (--no-clients): no series, not an offline group
        exp.add("mqadmin_group_online_clients", "The group's clients online now", labels, online)


def _group_health(exp: Exposition, group: str, health: Mapping[str, Any]) -> None:
    exp.add("mqadmin_group_health_status", HEALTH_HELP, {"group": group}, HEALTH_VALUES[health["status"]])
