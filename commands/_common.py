"""Look-ups several commands share, with the usage errors a user should see."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from mqadmin import errors
from mqadmin.model import MessageQueue, OffsetWrapper, TopicRoute
from mqadmin.protocol import versions
from mqadmin.protocol.constants import LMQ_PREFIX
from mqadmin.timeparse import format_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context
    from mqadmin.localstore import OffsetsFile

T = TypeVar("T")
R = TypeVar("R")

#: concurrent broker calls per command; the remoting client pipelines them on its connections
FAN_OUT = 32


def fan_out(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``fn`` over ``items`` concurrently, results in input order; the first error propagates."""
    todo = list(items)
    if len(todo) <= 1:
        return [fn(x) for x in todo]
    from concurrent.futures import ThreadPoolExecutor  # with logging, a tenth of a query's start-up

    with ThreadPoolExecutor(max_workers=min(FAN_OUT, len(todo))) as pool:
        return list(pool.map(fn, todo))


def route_of(admin: Admin, topic: str) -> TopicRoute:
    try:
        return admin.topic_route(topic)
    except errors.TopicNotExist:
        raise errors.UsageError(f"unknown topic {topic!r}: no route on the name server {admin.address}") from None


def group_offsets(admin: Admin, group: str, topic: str | None = None) -> dict[MessageQueue, OffsetWrapper]:
    """The group's consume-stats rows (optionally of one topic); a usage error when the group has
    no offsets there and no client online — that is an unknown group."""
    try:
        stats = admin.consume_stats(group)
        rows = {mq: w for mq, w in stats.offsets.items() if topic is None or mq.topic == topic}
    except errors.TopicNotExist:
        rows = {}
    from mqadmin.commands._lite import refuse_lite  # imports this module

    if not rows:
        where = f" for topic {topic!r}" if topic else ""
        if topic is not None:
            _refused_topic(admin, group, topic)
        refuse_lite(admin, group, rows)
        raise errors.UsageError(
            f"unknown consumer group {group!r}: it has no offsets{where} on any broker{_subscribed(admin, group)}"
        )
    refuse_lite(admin, group, rows)
    return rows


def _subscribed(admin: Admin, group: str) -> str:
    """The hint for a group the brokers hold a subscription for that never committed an offset (made by
    updateSubGroup, or its consumer never got far): "unknown" alone would send the reader looking
    for a typo. Nothing when the brokers cannot be asked."""
    try:
        known = group in admin.list_groups(subscribed=True)
    except errors.MqadminError:
        return ""
    return " (a subscription group of that name exists, but no consumer has committed an offset yet)" if known else ""


def _refused_topic(admin: Admin, group: str, topic: str) -> None:
    """A broker reports a group's offsets without checking the topic's grant (4.9: GET_CONSUME_STATS
    is not among the requests its PlainAccessValidator checks; 5.3: the request names no topic),
    so an account refused the topic sees "no offsets" as an admin would. Ask the broker whether the
    account may read the topic: a max offset (5.3 checks it), and on 4.x a pull as the group
    (what 4.9 checks; harmless there, see read_group). A refusal is the error to show."""
    try:
        queues = admin.topic_route(topic).message_queues()
        if queues:
            admin.max_offset(queues[0])
        if queues and not _v5_brokers(admin):
            admin.pull(queues[0], 0, 1, group=group)
    except errors.BrokerError as exc:
        if exc.permission_denied:
            raise errors.MqadminError(f"{exc}; group {group!r} shows no offsets for topic {topic!r}") from None
    except errors.MqadminError:
        pass  # the offsets are missing whatever this probe meets


def queue_bounds(admin: Admin, queues: list[MessageQueue]) -> list[tuple[int, int]]:
    """(min, max) offset of each queue, in order: one topic-stats request per topic and broker."""
    stats = admin.queue_stats(queues)
    return [(stats[mq].min_offset, stats[mq].max_offset) for mq in queues]


def read_group(admin: Admin, inspected: str | None, chosen: str | None, probe: MessageQueue | None) -> str | None:
    """The group messages are read as (None: TOOLS_CONSUMER, as the Java tool reads).

    --consumer-group wins. Otherwise TOOLS_CONSUMER, unless every broker is 4.x and the account
    may not read as TOOLS_CONSUMER (a pull of one message of ``probe`` is refused): then the
    inspected group (-g), which an account that consumes the group may read as. On 4.x a pull
    without the commit flag, with its own subscription, neither commits nor stores anything for
    the group (broker: PullMessageProcessor.java), but the broker counts what it returns in the
    group's consume TPS for a minute, which dashboards and a following reset's "pulled lately"
    check see: so the group is read as only when it has to be. A 5.x broker keeps more: the pull
    becomes the group's pull offset and takes over the group's pending server-side reset (broker:
    ConsumerOffsetManager.queryThenEraseResetOffset), so there the inspected group is read only
    when asked for, and naming it is refused.
    """
    if chosen is None and inspected is None:
        return None
    v5 = _v5_brokers(admin)
    if chosen is not None:
        if chosen == inspected and v5:
            raise errors.UsageError(
                f"--consumer-group {chosen} is the group inspected: on a 5.x broker ({v5[0]}) a read as it "
                "would take over its pending offset reset; name a group of its own for reading"
            )
        return chosen
    if v5 or probe is None:
        return None
    try:
        admin.pull(probe, 0, 1)
    except errors.BrokerError as exc:
        return inspected if exc.permission_denied else None
    except errors.MqadminError:
        pass  # what the probe meets, the reads meet and report
    return None


def _v5_brokers(admin: Admin) -> list[str]:
    """The brokers that are 5.x (or do not say their version)."""
    return [b.broker_name for b in admin.cluster_brokers() if not b.version or versions.is_v5(b.version)]


def store_time_at(admin: Admin, mq: MessageQueue, offset: int, group: str | None = None) -> int | None:
    """Store time of the message at ``offset`` (None past the end, when it is gone, or when
    the broker does not have the topic), read as ``group`` (None: TOOLS_CONSUMER)."""
    try:
        result = admin.pull(mq, offset, 1, group=group)
    except errors.TopicNotExist:
        return None
    if mq.topic.startswith(LMQ_PREFIX):  # a lite topic's queue: its messages carry their parent queue's offsets
        from mqadmin.commands._lite import lmq_offset  # imports this module

        return next((m.store_timestamp for m in result.messages if lmq_offset(m, mq.topic) == offset), None)
    for msg in result.messages:
        if msg.queue_offset == offset:
            return msg.store_timestamp
    return None


def time_fields(prefix: str, ms: int | None, tz: object = None) -> dict[str, object]:
    """``{prefix: ms, prefix_iso: "..."}``: JSON carries times as epoch ms plus ISO-8601."""
    return {prefix: ms, f"{prefix}_iso": format_time(ms, tz)}  # type: ignore[arg-type]


def has_broker(ctx: Context) -> bool:
    """Whether a broker address was given (-n or NAMESRV_ADDR)."""
    return bool(ctx.address or os.environ.get("NAMESRV_ADDR"))


def is_offline(admin: Admin) -> bool:
    """A stopped broker's store (``store:``): read-only, no clients, no TPS."""
    return admin.capabilities.read_only


def refuse_offline_write(ctx: Context, what: str) -> None:
    """Writing commands stop before planning anything when -n is a read-only store."""
    from mqadmin.admin import capabilities_of

    address = ctx.address or os.environ.get("NAMESRV_ADDR") or ""
    if address.strip() and capabilities_of(address).read_only:
        raise errors.UsageError(
            f"{address.strip()} is a broker's store, opened read-only: {what} cannot change it "
            "(--dry-run shows the plan; to apply it, start the broker and use its address)"
        )


def local_notes(ctx: Context, files: list[OffsetsFile]) -> None:
    """Say which clients' offsets came from the .bak, or from nowhere, as the client would load them."""
    for f in files:
        if f.note:
            ctx.env.warn(f"{f.client} ({f.group}): {f.note}")


def check_clients_stopped(ctx: Context, admin: Admin | None, group: str, while_running: bool) -> None:
    """A running broadcast consumer rewrites offsets.json every few seconds: refuse to race it."""
    if admin is None:
        ctx.env.warn(
            f"no -n: cannot check whether group {group}'s clients are running; a running broadcast consumer "
            "rewrites its offsets file within seconds, so stop it first"
        )
        return
    try:
        conn = admin.consumer_connections(group)
    except errors.ConsumerNotOnline:
        return
    except errors.MqadminError as exc:
        ctx.env.warn(f"could not check whether group {group} is online: {exc}")
        return
    if not conn.connections:
        return
    ids = ", ".join(sorted(c.client_id for c in conn.connections))
    online = f"group {group} has {len(conn.connections)} client(s) online ({conn.message_model}: {ids})"
    if while_running:
        ctx.env.warn(f"{online}; writing anyway (--while-running): a running client may overwrite the change")
        return
    raise errors.UsageError(
        f"{online}: a running broadcast consumer rewrites its offsets file within seconds and would undo this; "
        "stop the clients first (or pass --while-running, which is unsafe)"
    )


def silent_brokers(admin: Admin, queues: Iterable[MessageQueue]) -> dict[str, str]:
    """After a call failed with ConnectError: ask each broker of ``queues`` once (one max offset)
    and return those that do not answer (refused, reset, timed out) -> why."""
    first = {mq.broker_name: mq for mq in reversed(list(queues))}
    names = sorted(first)

    def probe(name: str) -> str | None:
        try:
            admin.max_offset(first[name])
        except errors.ConnectError as exc:
            return str(exc)
        return None

    return {n: why for n, why in zip(names, fan_out(probe, names), strict=True) if why is not None}


def missing_brokers_failure(ctx: Context, missing: dict[str, str], partial: bool) -> str | None:
    """Brokers that did not answer, named in one line: a warning on stderr with --partial (the
    answer is accepted), else the result's failure (exit 1)."""
    if not missing:
        return None
    line = "; ".join(f"{b} did not answer ({why})" for b, why in sorted(missing.items()))
    line += ": the answer covers the other broker(s) only"
    if partial:
        ctx.env.warn(f"{line} (--partial)")
        return None
    return f"{line}; --partial accepts that"


def missing_brokers_json(missing: dict[str, str]) -> list[dict[str, str]]:
    """``missing_brokers`` in JSON documents: one {"broker", "error"} per broker, by name."""
    return [{"broker": b, "error": e} for b, e in sorted(missing.items())]
