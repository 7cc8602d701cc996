"""consumerProgress's results: one group per queue, or one line per group, as a table, JSON,
the Java tool's text and Prometheus exposition."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

from mqadmin.commands._common import missing_brokers_json, time_fields

from mqadmin.health import (
    STATUS_NAMES,
    GroupHealth,
    queue_key,
    status_cell,
    verdict_json,
    window_brief,
    worst_queue,
)
from mqadmin.output import ResultBase, Table
from mqadmin.protocol.constants import DLQ_PREFIX
from mqadmin.timeparse import format_duration, format_java, format_zoned

CONSUME_TYPES = {"CONSUME_PASSIVELY": "PUSH", "CONSUME_ACTIVELY": "PULL", "CONSUME_POP": "POP"}
#: the Java tool's printf layouts (ConsumerProgressSubCommand, tools 4.9.7 and 5.3.3), kept as its
#: format strings so --output java can be checked against them by eye
JAVA_GROUPS_HEAD = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s"
JAVA_GROUPS_ROW = "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d"
#: ``-g``: (5.x layout?, -s true?) -> (header, row); 4.x has no #Inflight, -s true adds #Client IP
JAVA_QUEUE_LAYOUTS = {
    (True, False): (
        "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s",
        "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s",
    ),
    (True, True): (
        "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s",
        "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d %-20d %s",
    ),
    (False, False): ("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s", "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s"),
    (False, True): (
        "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s",
        "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d  %s",
    ),
}


@dataclass
class ProgressRow:
    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int
    #: age of the oldest unconsumed message: 0 when caught up, None when it cannot be read
    lag_time_ms: int | None
    #: -s true: the IP of the client holding the queue now (None: no client holds it)
    client_ip: str | None = None

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    @property
    def inflight(self) -> int:
        return max(self.pull_offset - self.consumer_offset, 0)


@dataclass
class GroupProgress(ResultBase):
    group: str
    tps: float
    queues: list[ProgressRow]
    tz: tzinfo | None = None
    check_failure: str | None = None
    #: read from a stopped broker's store: there is no consume rate to show
    offline: bool = False
    #: fetched only for --output java/prometheus: the Java tool's layout generation, clients, clusters
    extra: ProgressExtra | None = None
    #: --watch: each queue's Diff at the previous refresh
    previous: dict[tuple[str, str, int], int] | None = None
    #: -s true: each row's client_ip is shown (the Java tool's #Client IP column)
    show_client_ip: bool = False
    #: brokers that did not answer (name -> why): the queues and totals are the others'
    missing_brokers: dict[str, str] = field(default_factory=dict)
    #: --health: the group's and each queue's status over the window
    health: GroupHealth | None = None
    #: messages in the group's dead-letter topic (%DLQ%GROUP): 0 when it has none, None when unread
    dlq_depth: int | None = 0

    @property
    def diff_total(self) -> int:
        return sum(q.diff for q in self.queues)

    def note_previous(self, before: GroupProgress) -> None:
        self.previous = {(q.topic, q.broker, q.queue_id): q.diff for q in before.queues}

    def _change(self, q: ProgressRow) -> int | None:
        if self.previous is None or (q.topic, q.broker, q.queue_id) not in self.previous:
            return None
        return q.diff - self.previous[(q.topic, q.broker, q.queue_id)]

    def _key(self, q: ProgressRow) -> str:

        return queue_key(self.group, q.topic, q.broker, q.queue_id)

    def java_text(self) -> str:
        """The Java tool's ``consumerProgress -g`` text (4.x layout on 4.x brokers, else 5.x)."""
        v5 = self.extra is None or self.extra.v5
        head, row = JAVA_QUEUE_LAYOUTS[(v5, self.show_client_ip)]
        names: tuple[str, ...] = ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset")
        names += ("#Client IP",) if self.show_client_ip else ()
        names += ("#Diff", "#Inflight") if v5 else ("#Diff",)
        lines = [head % (*names, "#LastTime")]
        for q in self.queues:
            last = format_java(q.last_timestamp, self.tz) if q.last_timestamp else "N/A"
            values: tuple[object, ...] = (q.topic[:64], q.broker[:32], q.queue_id, q.broker_offset, q.consumer_offset)
            values += (q.client_ip or "N/A",) if self.show_client_ip else ()
            lines.append(row % (*values, q.diff, *((q.inflight,) if v5 else ()), last))
        lines += ["", f"Consume TPS: {self.tps:.2f}"]
        if v5:
            lines += [
                f"Consume Diff Total: {self.diff_total}",
                f"Consume Inflight Total: {sum(q.inflight for q in self.queues)}",
            ]
        else:
            lines.append(f"Diff Total: {self.diff_total}")
        return "\n".join(lines) + "\n"

    def prometheus_text(self) -> str:
        from mqadmin.prometheus import group_exposition

        extra = self.extra or ProgressExtra()
        return group_exposition(
            self.to_json(), online=extra.online, model=extra.model, clusters=extra.clusters, read_at_ms=extra.read_at_ms
        ).text()

    @property
    def lag_time_ms(self) -> int | None:
        return max_lag([q.lag_time_ms for q in self.queues])

    def to_json(self) -> dict[str, Any]:
        doc = self._json()
        if self.health is not None:
            doc["health"] = verdict_json(self.health.verdict)
            for q, out in zip(self.queues, doc["queues"], strict=True):
                out["health"] = self.health.queues[self._key(q)].to_json()
        if self.missing_brokers:
            doc["missing_brokers"] = missing_brokers_json(self.missing_brokers)
        return doc

    def _json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "tps": None if self.offline else round(self.tps, 2),
            "diff_total": self.diff_total,
            "lag_time_ms": self.lag_time_ms,
            "dlq_depth": self.dlq_depth,
            "queues": [
                {
                    "topic": q.topic,
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "broker_offset": q.broker_offset,
                    "consumer_offset": q.consumer_offset,
                    "diff": q.diff,
                    "inflight": q.inflight,
                    **time_fields("last_timestamp", q.last_timestamp or None, self.tz),
                    "lag_time_ms": q.lag_time_ms,
                    **({"client_ip": q.client_ip} if self.show_client_ip else {}),
                    **({"diff_change": self._change(q)} if self.previous is not None else {}),
                }
                for q in self.queues
            ],
        }

    def table(self) -> Table:
        ip = self.show_client_ip
        columns = ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset"] + (["Client IP"] if ip else [])
        columns += ["Diff", "Inflight", "LastTime", "Lag Time"] + (["Change"] if self.previous is not None else [])
        columns += ["Status"] if self.health is not None else []
        rows = [
            [q.topic, q.broker, q.queue_id, q.broker_offset, q.consumer_offset]
            + ([q.client_ip or "N/A"] if ip else [])
            + [
                q.diff,
                q.inflight,
                format_zoned(q.last_timestamp, self.tz) if q.last_timestamp else "N/A",
                format_duration(q.lag_time_ms),
            ]
            + ([signed(self._change(q))] if self.previous is not None else [])
            + ([self._status(q)] if self.health is not None else [])
            for q in self.queues
        ]
        footer = [
            "Consume TPS: n/a (offline store)" if self.offline else f"Consume TPS: {self.tps:.2f}",
            f"Consume Diff Total: {self.diff_total}",
            f"Consume Inflight Total: {sum(q.inflight for q in self.queues)}",
            lag_line(self.lag_time_ms),
        ]
        if self.dlq_depth:
            footer.append(f"Dead letters: {self.dlq_depth} message(s) in {DLQ_PREFIX}{self.group}")
        if self.health is not None:
            footer.append(health_line(self.health))
        footer += [
            f"Missing: {b} did not answer ({e}); its queues are not shown"
            for b, e in sorted(self.missing_brokers.items())
        ]
        return Table(columns, rows, title=f"Consumer group {self.group}", footer=footer)

    def _status(self, q: ProgressRow) -> str:
        assert self.health is not None
        return status_cell(self.health.queues[self._key(q)].verdict)


@dataclass
class GroupsProgress(ResultBase):
    """Several groups named with -g G1,G2: each group's per-queue view, in the order named."""

    results: list[GroupProgress]
    check_failure: str | None = None

    @property
    def missing_brokers(self) -> dict[str, str]:
        return {b: e for r in self.results for b, e in r.missing_brokers.items()}

    def note_previous(self, before: GroupsProgress) -> None:
        earlier = {r.group: r for r in before.results}
        for r in self.results:
            if r.group in earlier:
                r.note_previous(earlier[r.group])

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"results": [r.to_json() for r in self.results]}
        if self.missing_brokers:
            doc["missing_brokers"] = missing_brokers_json(self.missing_brokers)
        return doc

    def table(self) -> Table:
        """One table with a Group column; each group's totals (and status) under it, by name."""
        tables = [(r.group, r.table()) for r in self.results]
        rows = [[g, *row] for g, t in tables for row in t.rows]
        footer = [f"{g}: {line}" for g, t in tables for line in t.footer if not line.startswith("Missing: ")]
        footer += [
            f"Missing: {b} did not answer ({e}); its queues are not shown"
            for b, e in sorted(self.missing_brokers.items())
        ]
        title = f"{len(self.results)} consumer groups"
        return Table(["Group", *tables[0][1].columns], rows, title=title, footer=footer)

    def java_text(self) -> str:
        """The Java tool's text of each group in turn, each under a ``#Consumer Group: G`` line (the
        Java tool takes one group and does not name it)."""
        return "\n".join(f"#Consumer Group: {r.group}\n{r.java_text()}" for r in self.results)

    def prometheus_text(self) -> str:
        from mqadmin.prometheus import Exposition, group_exposition

        exp = Exposition()
        for r in self.results:
            extra = r.extra or ProgressExtra()
            group_exposition(
                r.to_json(),
                online=extra.online,
                model=extra.model,
                clusters=extra.clusters,
                read_at_ms=extra.read_at_ms,
                out=exp,
            )
        return exp.text()


@dataclass
class GroupSummary:
    group: str
    count: int
    version: str
    type: str
    model: str
    tps: float
    diff_total: int
    lag_time_ms: int | None = None


@dataclass
class ProgressExtra:
    """What only --output java/prometheus show, read only when asked for."""

    v5: bool = True
    online: int = 0
    model: str = "CLUSTERING"
    clusters: dict[str, str] = field(default_factory=dict)
    read_at_ms: int = 0


@dataclass
class AllGroupsProgress(ResultBase):
    groups: list[GroupSummary] = field(default_factory=list)
    check_failure: str | None = None
    read_at_ms: int = 0
    #: --watch: each group's Diff Total at the previous refresh
    previous: dict[str, int] | None = None
    #: brokers that did not answer (name -> why): each group's figures are the others'
    missing_brokers: dict[str, str] = field(default_factory=dict)
    #: False (--no-clients): no group's clients were read, so count/version/type/model are not
    #: shown at all (a 0 would say "offline", which nobody checked)
    clients: bool = True
    #: --health: each group's status over the window
    health: dict[str, GroupHealth] | None = None

    def note_previous(self, before: AllGroupsProgress) -> None:
        self.previous = {g.group: g.diff_total for g in before.groups}

    def _change(self, g: GroupSummary) -> int | None:
        if self.previous is None or g.group not in self.previous:
            return None
        return g.diff_total - self.previous[g.group]

    def java_text(self) -> str:
        """The Java tool's ``consumerProgress`` (all groups) text; TPS as a whole number, as it prints."""
        lines = [JAVA_GROUPS_HEAD % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")]
        for g in self.groups:
            values = (g.group[:64], g.count, g.version, g.type, g.model, int(g.tps), g.diff_total)
            lines.append(JAVA_GROUPS_ROW % values)
        return "\n".join(lines) + "\n"

    def prometheus_text(self) -> str:
        from mqadmin.prometheus import groups_exposition

        return groups_exposition(self.to_json()["groups"], read_at_ms=self.read_at_ms).text()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "groups": [
                {
                    "group": g.group,
                    **(
                        {"count": g.count, "version": g.version, "type": g.type, "model": g.model}
                        if self.clients
                        else {}
                    ),
                    "tps": round(g.tps, 2),
                    "diff_total": g.diff_total,
                    "lag_time_ms": g.lag_time_ms,
                    **({"diff_change": self._change(g)} if self.previous is not None else {}),
                    **({"health": group_health_json(self.health[g.group])} if self.health is not None else {}),
                }
                for g in self.groups
            ]
        }
        if self.missing_brokers:
            doc["missing_brokers"] = missing_brokers_json(self.missing_brokers)
        return doc

    def table(self) -> Table:
        clients = ["Count", "Version", "Type", "Model"] if self.clients else []
        columns = ["Group", *clients, "TPS", "Diff Total", "Lag Time"]
        columns += ["Change"] if self.previous is not None else []
        columns += ["Status"] if self.health is not None else []
        rows: list[list[Any]] = [
            [g.group]
            + ([g.count, g.version, g.type, g.model] if self.clients else [])
            + [int(g.tps), g.diff_total, format_duration(g.lag_time_ms)]
            + ([signed(self._change(g))] if self.previous is not None else [])
            + ([self._status(g)] if self.health is not None else [])
            for g in self.groups
        ]
        footer = health_lines(self.health) if self.health is not None else []
        footer += [
            f"Missing: {b} did not answer ({e}); the figures leave its queues out"
            for b, e in sorted(self.missing_brokers.items())
        ]
        return Table(columns, rows, title="Consumer groups", footer=footer)

    def _status(self, g: GroupSummary) -> str:
        assert self.health is not None
        return status_cell(self.health[g.group].verdict)


def max_lag(lags: list[int | None]) -> int | None:
    """The largest known lag; None only when some queue is behind and none could be read."""
    known = [x for x in lags if x is not None]
    if known:
        return max(known)
    return None if lags else 0


def signed(change: int | None) -> str:
    return "-" if change is None else f"{change:+d}" if change else "0"


def lag_line(lag_ms: int | None) -> str:
    if lag_ms is None:
        return "Lag Time: unknown (no store time could be read for the unconsumed messages)"
    return f"Lag Time: {format_duration(lag_ms)} (age of the oldest unconsumed message)"


def breaches_of(group: str, diff: int, lag_ms: int | None, max_lag: int | None, max_lag_time: int | None) -> list[str]:
    """A lag time that cannot be read fails --max-lag-time: a check must not pass unverified."""
    out = []
    if max_lag is not None and diff > max_lag:
        out.append(f"{group}: Diff Total {diff} > --max-lag {max_lag}")
    if max_lag_time is not None and lag_ms is None:
        out.append(f"{group}: lag time unknown (no store time readable), so --max-lag-time cannot pass")
    elif max_lag_time is not None and lag_ms is not None and lag_ms > max_lag_time:
        out.append(f"{group}: lag {format_duration(lag_ms)} > --max-lag-time {format_duration(max_lag_time)}")
    return out


#: the all-groups table names at most this many groups that are not OK (JSON names all)
HEALTH_FOOTER_LINES = 20


def health_line(health: GroupHealth) -> str:
    return f"Health: {health.verdict.status.name}: {health.verdict.reason}"


def health_lines(healths: dict[str, GroupHealth]) -> list[str]:
    """The reasons of the groups that are not OK, worst first; a count of the OK ones."""
    bad = sorted(((h.verdict.status, g) for g, h in healths.items() if h.verdict.status), reverse=True)
    lines = [
        f"{g}: {healths[g].verdict.status.name}: {healths[g].verdict.reason}" for _, g in bad[:HEALTH_FOOTER_LINES]
    ]
    if len(bad) > HEALTH_FOOTER_LINES:
        lines.append(f"... and {len(bad) - HEALTH_FOOTER_LINES} more not OK (--json shows all)")
    collecting = sum(1 for h in healths.values() if h.verdict.collecting)
    ok = len(healths) - len(bad)
    return [
        f"Health: {ok} of {len(healths)} groups OK" + (f" ({collecting} still collecting)" if collecting else ""),
        *lines,
    ]


def group_health_json(health: GroupHealth) -> dict[str, Any]:
    """A group's status, how many of its queues have each status, and the window of the queue the
    status comes from, in brief: bounded by the number of groups, however many queues lag (``-g``
    shows every queue's samples)."""
    worst = health.worst or worst_queue({k: q.verdict for k, q in health.queues.items()})
    doc = verdict_json(health.verdict)
    doc["queues"] = health.status_counts()
    if worst is not None and health.queues[worst].verdict.status:
        # the window in brief (-g shows each sample): 10,000 groups' samples cost seconds to print
        v = health.queues[worst].verdict
        brief = {
            "queue": worst.split(" ", 1)[1],
            "status": STATUS_NAMES[int(v.status)],
            "reason": v.reason,
            "collecting": v.collecting is not None,
        }
        doc["worst_queue"] = window_brief(health.queues[worst].row, brief)
    return doc
