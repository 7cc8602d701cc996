"""Lite groups (RocketMQ 5.5, RIP-83) in consumerProgress, and the offset commands' refusal.

A lite parent topic keeps each lite topic's messages in an LMQ of its own (``%LMQ%$parent$lite``,
one queue) and a lite group (bound to the parent) commits one offset per lite topic. A group's
ordinary consume stats show those LMQs as raw queues, and only the ones with a committed offset;
the broker's GET_LITE_GROUP_INFO tells the group's total lag and its lite topics by lag, which is
what a person asks about (the Java tool's getLiteGroupInfo).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any

from mqadmin.commands._common import fan_out, missing_brokers_json, time_fields
from mqadmin.commands._progress import lag_line, max_lag

from mqadmin import errors
from mqadmin.admin import Admin
from mqadmin.context import Context
from mqadmin.model import LiteGroupInfo, Message, MessageQueue, OffsetWrapper
from mqadmin.output import ResultBase, Table
from mqadmin.protocol import versions
from mqadmin.protocol.constants import LITE_PREFIX
from mqadmin.timeparse import format_duration, format_zoned

log = logging.getLogger(__name__)

#: the Java tool's getLiteGroupInfo shows the top 20 lite topics by lag of each broker
TOP_K = 20
#: --all: the broker sizes a heap by topK, so "every lite topic" is a large bound, not 2^31
ALL_TOP_K = 100_000


def is_lite_queue(mq: MessageQueue) -> bool:
    return mq.topic.startswith(LITE_PREFIX)


def _not_lite(exc: errors.MqadminError) -> bool:
    """What a broker answers when it holds no lite group by that name: an ordinary group
    (INVALID_PARAMETER), a group it does not know, or a request it does not know (before 5.5)."""
    return isinstance(exc, errors.InvalidParameter | errors.SubscriptionGroupNotExist | errors.RequestCodeNotSupported)


@dataclass
class LiteRow:
    """One lite topic of the group on one broker."""

    lite_topic: str
    broker: str
    broker_offset: int
    consumer_offset: int
    last_timestamp: int | None
    #: age of the oldest unconsumed message: 0 when caught up, None when the broker knows no time
    lag_time_ms: int | None

    @property
    def diff(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass
class LiteGroupProgress(ResultBase):
    """consumerProgress -g of a lite group: one row per lite topic, the broker's total lag."""

    group: str
    parent_topic: str
    rows: list[LiteRow]
    #: the brokers' total lag over every lite topic of the group (shown or not)
    total_lag: int
    #: how many lite topics each broker was asked for (None: --all, or one lite topic with -t)
    top_k: int | None
    tz: tzinfo | None = None
    missing_brokers: dict[str, str] = field(default_factory=dict)
    check_failure: str | None = None

    @property
    def diff_total(self) -> int:
        return self.total_lag

    @property
    def lag_time_ms(self) -> int | None:
        return max_lag([r.lag_time_ms for r in self.rows])

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "group": self.group,
            "lite": True,
            "parent_topic": self.parent_topic,
            "top_k": self.top_k,
            "diff_total": self.diff_total,
            "lag_time_ms": self.lag_time_ms,
            "lite_topics": [
                {
                    "lite_topic": r.lite_topic,
                    "queue": lmq_name(self.parent_topic, r.lite_topic),
                    "broker": r.broker,
                    "broker_offset": r.broker_offset,
                    "consumer_offset": r.consumer_offset,
                    "diff": r.diff,
                    **time_fields("last_timestamp", r.last_timestamp, self.tz),
                    "lag_time_ms": r.lag_time_ms,
                }
                for r in self.rows
            ],
        }
        if self.missing_brokers:
            doc["missing_brokers"] = missing_brokers_json(self.missing_brokers)
        return doc

    def table(self) -> Table:
        columns = ["Lite Topic", "Broker Name", "Broker Offset", "Consumer Offset", "Diff", "LastTime", "Lag Time"]
        rows: list[list[Any]] = [
            [
                r.lite_topic,
                r.broker,
                r.broker_offset,
                r.consumer_offset,
                r.diff,
                format_zoned(r.last_timestamp, self.tz) if r.last_timestamp else "N/A",
                format_duration(r.lag_time_ms),
            ]
            for r in self.rows
        ]
        footer = [f"Consume Diff Total: {self.diff_total} (every lite topic of the group)", lag_line(self.lag_time_ms)]
        if self.top_k is not None:
            # two lines that fit 80 columns: a footer line is plain text, not wrapped by words
            footer += [
                f"Shown: the top {self.top_k} lite topics by lag per broker (--all: every one that lags).",
                "The broker lists none without lag: queryOffset -t PARENT -g GROUP shows each.",
            ]
        footer += [
            f"Missing: {b} did not answer ({e}); its lite topics are not shown"
            for b, e in sorted(self.missing_brokers.items())
        ]
        title = f"Lite consumer group {self.group} (parent topic {self.parent_topic})"
        return Table(columns, rows, title=title, footer=footer)


def lmq_name(parent: str, lite_topic: str) -> str:
    return f"{LITE_PREFIX}{parent}${lite_topic}"


def lite_progress(ctx: Context, group: str, lite_topic: str | None, every: bool) -> LiteGroupProgress | None:
    """The group's lite topics, or None when no broker holds it as a lite group (an ordinary
    group, an unknown one, brokers before 5.5). ``lite_topic`` (-t): that one only."""
    admin = ctx.admin()
    top_k = ALL_TOP_K if every else TOP_K
    answers = _held_group_info(admin, group, top_k)
    infos = {b: a for b, a in answers.items() if isinstance(a, LiteGroupInfo)}
    if not infos:
        return None
    missing: dict[str, str] = {}
    for broker, answer in answers.items():
        if isinstance(answer, errors.MqadminError) and not _not_lite(answer):
            if isinstance(answer, errors.BrokerError) and answer.permission_denied:
                raise answer
            missing[broker] = str(answer)
    parent = next(iter(infos.values())).parent_topic
    if lite_topic == parent:
        lite_topic = None
    if lite_topic is not None and lite_topic.startswith(LITE_PREFIX):
        lite_topic = lite_topic.rsplit("$", 1)[-1]
    if lite_topic is not None:
        places = [(b, lite_topic) for b in sorted(infos)]
    else:
        places = [(b, lag.lite_topic) for b, info in sorted(infos.items()) for lag in info.top]
    rows = [r for r in fan_out(lambda place: _row(ctx, group, *place), places) if r is not None]
    rows.sort(key=lambda r: (-r.diff, r.lite_topic, r.broker))
    if lite_topic is not None and not rows and not missing:
        raise errors.UsageError(
            f"lite group {group!r} has no offset for lite topic {lite_topic!r} of {parent!r} on any broker"
        )
    total = sum(max(i.total_lag, 0) for i in infos.values())
    if lite_topic is not None:
        total = sum(r.diff for r in rows)
    shown_k = None if every or lite_topic is not None else top_k
    return LiteGroupProgress(group, parent, rows, total, shown_k, ctx.tz, missing_brokers=missing)


def _row(ctx: Context, group: str, broker: str, lite_topic: str) -> LiteRow | None:
    """One lite topic's offsets on ``broker`` (None: the broker holds no offset for it)."""
    answer = ctx.admin().lite_group_info(group, lite_topic, 1).get(broker)
    if isinstance(answer, errors.MqadminError):
        raise answer
    if answer is None or answer.offsets is None:
        return None
    w: OffsetWrapper = answer.offsets
    behind = w.broker_offset > w.consumer_offset
    oldest = answer.earliest_unconsumed_ms
    lag_ms = (max(ctx.now - oldest, 0) if oldest is not None else None) if behind else 0
    return LiteRow(lite_topic, broker, w.broker_offset, w.consumer_offset, w.last_timestamp or None, lag_ms)


def lite_parent(admin: Admin, group: str) -> str | None:
    """The parent topic ``group`` is bound to, or None when no broker holds it as a lite group."""
    answers = _held_group_info(admin, group, 1)
    return next((a.parent_topic for a in answers.values() if isinstance(a, LiteGroupInfo)), None)


def lite_offsets(admin: Admin, group: str, topic: str) -> dict[MessageQueue, OffsetWrapper] | None:
    """A lite group's committed offsets, one per lite topic's LMQ (queue 0) on each broker, for
    queryOffset -t <parent> -g <group>; None for any other group. The brokers answer an LMQ's
    min/max offset, time search and committed offset by its name as for any queue (file store
    with enableLmq: LmqTopicConfigManager), so the LMQs are read as queues. A lite topic without
    a committed offset is not in the consume stats, as in consumerProgress."""
    try:
        rows = admin.consume_stats(group).offsets
    except errors.TopicNotExist:
        rows = {}
    if rows and not any(is_lite_queue(mq) for mq in rows):
        return None
    parent = lite_parent(admin, group)
    if parent is None:
        return None
    if topic != parent:
        raise LiteGroupUnsupported(
            f"{group!r} is a lite group of parent topic {parent!r}, not of {topic!r}: "
            f"queryOffset -t {parent} -g {group} shows its lite topics"
        )
    prefix = lmq_name(parent, "")
    return {mq: rows[mq] for mq in sorted(rows) if mq.topic.startswith(prefix)}


def lmq_offset(msg: Message, lmq: str) -> int | None:
    """A message's offset in the LMQ ``lmq``: a pull from an LMQ answers the message as stored,
    with its parent queue's offset; the broker wrote the LMQs it was dispatched to and its offset
    in each into two properties, in the same order (broker: MessageConst INNER_MULTI_DISPATCH,
    INNER_MULTI_QUEUE_OFFSET)."""
    queues = msg.properties.get("INNER_MULTI_DISPATCH", "").split(",")
    offsets = msg.properties.get("INNER_MULTI_QUEUE_OFFSET", "").split(",")
    if lmq not in queues or len(offsets) != len(queues):
        return None
    text = offsets[queues.index(lmq)]
    return int(text) if text.isdigit() else None


def route_topic(topic: str) -> str:
    """The topic whose route serves ``topic``: an LMQ (``%LMQ%$parent$lite``) has no route of
    its own, it lives on the brokers of its parent (a topic name has no ``$``; a lite topic's
    may, so the parent ends at the first one)."""
    return topic[len(LITE_PREFIX) :].split("$", 1)[0] if topic.startswith(LITE_PREFIX) else topic


def lite_current(admin: Admin, group: str, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
    """restoreOffset of a lite group's backup: the group's offsets now on the backup's lite topic
    queues (none named: {}); refused whole when the group is no lite group of their parent, or a
    queue's broker no longer serves the parent."""
    lmqs = [mq for mq in queues if is_lite_queue(mq)]
    current: dict[MessageQueue, int] = {}
    for parent in sorted({route_topic(mq.topic) for mq in lmqs}):
        found = lite_offsets(admin, group, parent)
        if found is None:
            raise errors.UsageError(
                f"the backup names lite topics of {parent!r}, but {group!r} is no lite group on {admin.address}; "
                "nothing was changed"
            )
        brokers = {b.broker_name for b in admin.topic_route(parent).brokers}
        gone = sorted({mq.broker_name for mq in lmqs if route_topic(mq.topic) == parent} - brokers)
        if gone:
            raise errors.UsageError(
                f"backup names lite topics on {', '.join(gone)}, which no longer serve {parent!r} on "
                f"{admin.address}; nothing was changed"
            )
        current |= {mq: w.consumer_offset for mq, w in found.items()}
    return current


def lite_topic_of(mq: MessageQueue) -> str | None:
    """``lite`` of a ``%LMQ%$parent$lite`` queue (None for any other queue)."""
    return mq.topic[len(LITE_PREFIX) :].split("$", 1)[-1] if is_lite_queue(mq) else None


#: the first broker line with lite topics (RIP-83) and GET_LITE_GROUP_INFO
LITE_SINCE = (5, 5)


def _lite_cluster(admin: Admin) -> bool:
    """A cluster with a broker of the 5.5 line or later: one that may hold lite groups."""
    return any(versions.version_tuple(b.version) >= LITE_SINCE for b in admin.cluster_brokers())


def _held_group_info(admin: Admin, group: str, top_k: int) -> dict[str, LiteGroupInfo | errors.MqadminError]:
    """GET_LITE_GROUP_INFO, asked only about a group that a 5.5+ broker already holds: a broker
    asked about a group it lacks creates it (findSubscriptionGroupConfig, with the default
    autoCreateSubscriptionGroup), so a mistyped -g would leave a new group on every broker.
    An account that may not list subscription groups asks directly, as before."""
    try:
        if not _lite_cluster(admin) or group not in admin.list_groups(subscribed=True):
            return {}
    except errors.MqadminError as exc:
        log.info("subscription groups not listed (%s): asking for lite group %s directly", exc, group)
    return admin.lite_group_info(group, None, top_k)


def unlisted_lite_groups(ctx: Context, listed: Iterable[str]) -> dict[str, tuple[int, int | None]]:
    """Lite groups the all-groups view does not list (it finds groups by their %RETRY% topic, as
    the Java tool does, and a lite group need not have one): name -> (the brokers' total lag over
    its lite topics, age of its oldest unconsumed message: 0 caught up, None when the broker's
    lag-time metrics have not gathered it (LiteConsumerLagCalculator)). Asked only
    of a cluster with a 5.5+ broker: its subscription groups not listed, each GET_LITE_GROUP_INFO."""
    admin = ctx.admin()
    try:
        if not _lite_cluster(admin):
            return {}
        known = set(listed)
        candidates = [g for g in admin.list_groups(subscribed=True) if g not in known]
    except errors.MqadminError as exc:
        # a broker that did not answer is named by the view already; an account that may not list
        # subscription groups sees the view the Java tool shows
        log.info("lite groups not looked for: %s", exc)
        return {}
    out: dict[str, tuple[int, int | None]] = {}
    for group, answers in zip(
        candidates, fan_out(lambda g: admin.lite_group_info(g, None, 1), candidates), strict=True
    ):
        infos = [a for a in answers.values() if isinstance(a, LiteGroupInfo)]
        if not infos:
            continue
        lag = sum(max(i.total_lag, 0) for i in infos)
        oldest = min((i.earliest_unconsumed_ms for i in infos if i.earliest_unconsumed_ms is not None), default=None)
        out[group] = (lag, (max(ctx.now - oldest, 0) if oldest is not None else None) if lag else 0)
    return out


class LiteGroupUnsupported(errors.UsageError):
    """A lite group given to a command that reads or moves ordinary per-queue offsets."""


def refuse_lite(admin: Admin, group: str, rows: Mapping[MessageQueue, object]) -> None:
    """Offsets of a lite group are one per lite topic, which the offset commands do not address
    yet: say so in one line (exit 2) instead of calling the group unknown or acting on its raw
    %LMQ% queues. Returns for any other group; asks the brokers only when ``rows`` (the group's
    consume-stats rows) are empty or hold a lite topic's queue."""
    if rows and not any(is_lite_queue(mq) for mq in rows):
        return
    parent = lite_parent(admin, group)
    if parent is not None:
        raise LiteGroupUnsupported(
            f"lite groups (RocketMQ 5.5 lite topics) are not supported by this command yet: {group!r} is a lite "
            f"group of parent topic {parent!r}; queryOffset -t {parent} -g {group} shows its offsets, "
            f"resetOffsetByTime -t {parent} -g {group} moves them"
        )
