"""Which way each broker takes a reset, decided from its own settings, and the plans a broker's
only way cannot carry (refused before anything moves).

A broker with ``useServerSideResetOffset`` on (5.2+ by default) resets each queue to the offset
it is given and serves it to the consumers. Without it (4.x, 5.0, 5.1 by default, and any 5.x
where an operator turned it off) INVOKE_BROKER_TO_RESET_OFFSET carries only a time: the broker
looks each queue up by that time and pushes the result to the online clients, ignoring any
offset in the request (broker: AdminBrokerProcessor.resetOffset, Broker2Client.resetOffset).
With consumers online such a broker can therefore carry a time-based plan, and nothing else:
an offset written directly is overwritten by the consumers' next commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mqadmin.commands._plan import Method

from mqadmin import errors, seen
from mqadmin.protocol import versions
from mqadmin.registry import Opt

if TYPE_CHECKING:
    from mqadmin.commands._plan import ResetResult

    from mqadmin.context import Context
    from mqadmin.model import BrokerInfo, ConsumerConnection

PARTIAL = Opt(
    "partial",
    ("--partial",),
    "Apply although a broker this cluster routed recently is missing from its route now (it is then left as "
    "it was; mqadmin extension)",
    kind=bool,
    default=False,
)

#: the consume type of pull consumers, which keep their offsets themselves (warned about elsewhere)
PULL = "CONSUME_ACTIVELY"


def describe(info: BrokerInfo) -> str:
    """How a broker takes a reset, in the words of its setting."""
    if info.server_side_reset:
        return f"{versions.SERVER_SIDE_RESET_KEY}=true"
    if info.config is not None and versions.SERVER_SIDE_RESET_KEY in info.config:
        return f"{versions.SERVER_SIDE_RESET_KEY}=false"
    return f"broker {info.version or 'of unknown version'} pushes resets to its clients"


def check_reset_path(
    ctx: Context,
    result: ResetResult,
    online: ConsumerConnection | None,
    *,
    explicit: bool,
    reset_ts: int | None,
    partial: bool = False,
) -> None:
    """Refuse, before the question and the backup, a plan some planned broker cannot carry: exact
    offsets (restore, a copy, --shift-by, --to-offset, -o, --exact) while push consumers are
    online on a broker that only pushes a time. Warn when a broker's settings could not be read
    (its version's default is assumed)."""
    planned = sorted({q.broker for q in result.queues if q.changes})
    if not planned:
        return
    admin = ctx.admin()
    infos = {b.broker_name: b for b in admin.cluster_brokers()}
    gone = seen.vanished(admin, ctx.now, {n: b.addr for n, b in infos.items()})
    if gone and not partial:
        names = ", ".join(v.describe(ctx.now) for v in gone)
        raise errors.UsageError(
            f"broker {names} is missing from the route of {admin.address} (crashed, stopped or cut off?): this "
            f"change would cover only the brokers routed now; pass {PARTIAL.flags[0]} to apply it to them alone; "
            "nothing was changed"
        )
    warn_memory_only(ctx, infos, planned, online)
    for name in planned:
        info = infos.get(name)
        if info is not None and info.config is None and versions.is_v5(info.version):
            default = "true" if info.server_side_reset else "false"
            ctx.env.warn(
                f"{name}: cannot read its configuration; assuming the {info.version} default "
                f"{versions.SERVER_SIDE_RESET_KEY}={default}"
            )
    if online is None or online.consume_type == PULL:
        return
    time_based = not explicit and reset_ts is not None
    pushing = [n for n in planned if n in infos and not infos[n].server_side_reset]
    if time_based or not pushing:
        return
    ids = ", ".join(sorted(c.client_id for c in online.connections))
    where = "; ".join(f"{n} ({describe(infos[n])})" for n in pushing)
    raise errors.UsageError(
        f"{where}: such a broker can only push a reset by time to the online consumers of group "
        f"{result.group} ({ids}), and an offset written directly is overwritten by their next commit; "
        "this plan names exact offsets, which no time expresses. Stop the consumers first (then the offsets "
        f"are written directly), or set {versions.SERVER_SIDE_RESET_KEY}=true on the broker; nothing was changed"
    )


#: where a broker keeps consumer offsets, from its settings (broker: BrokerController.initializeMetadata)
FILE, ROCKSDB, V2 = "file", "rocksdb", "v2"


def offset_store(info: BrokerInfo) -> str | None:
    """``v2`` (configManagerVersion=v2: ConsumerOffsetManagerV2 writes each commit into the RocksDB
    metadata store), ``rocksdb`` (storeType=defaultRocksDB: the whole table into RocksDB every
    flushConsumerOffsetInterval), ``file`` (consumerOffset.json, same interval); None if unknown."""
    if info.config is None:
        return None
    if info.config.get("configManagerVersion", "").strip().lower() == V2:
        return V2
    if info.config.get("storeType", "").strip().lower() == "defaultrocksdb":
        return ROCKSDB
    return FILE


def memory_only_reset(info: BrokerInfo) -> bool:
    """A broker-side reset a clean restart loses: ConsumerOffsetManagerV2.assignResetOffset sets the
    offset in memory and files its RocksDB write under group and topic swapped (broker:
    config/v2/ConsumerOffsetManagerV2.java), so only a later commit makes it durable."""
    return info.server_side_reset and offset_store(info) == V2


def broker_path(info: BrokerInfo | None, online: ConsumerConnection | None) -> str:
    """How to apply on one broker: ``broker`` (reset on the broker, per queue, by offset), ``push``
    (a time pushed to the online clients, direct updates without them), or ``direct`` (offset
    updates: a v2 broker persists those, and nobody online would commit a broker-side reset)."""
    if info is None or not info.server_side_reset:
        return "push"
    if memory_only_reset(info) and online is None:
        return "direct"
    return "broker"


def warn_memory_only(ctx: Context, infos: dict[str, BrokerInfo], planned: list[str], online: object) -> None:
    """Say before the apply what a v2 broker keeps of it."""
    v2 = [n for n in planned if n in infos and memory_only_reset(infos[n])]
    if not v2:
        return
    names = ", ".join(v2)
    if online is None:
        ctx.env.warn(
            f"{names}: configManagerVersion=v2 keeps a broker-side reset in memory only (a restart loses it); "
            "writing the offsets directly instead, which it stores at once"
        )
    else:
        ctx.env.warn(
            f"{names}: configManagerVersion=v2 keeps a broker-side reset in memory only until the online consumers "
            "commit offsets from it; a broker restart before then loses it (stop the consumers to have the "
            "offsets written directly, which it stores at once)"
        )


def offsets_file(info: BrokerInfo | None) -> str:
    """The file a file-store broker persists consumer offsets to: with enableLmq (lite topics)
    all of them go to lmqConsumerOffset.json (broker: LmqConsumerOffsetManager)."""
    lmq = str(((info.config or {}) if info is not None else {}).get("enableLmq", "false")).lower() == "true"
    return "lmqConsumerOffset.json" if lmq else "consumerOffset.json"


def durability_line(infos: dict[str, BrokerInfo], methods: dict[str, Method]) -> str:
    """The truth about when the applied offsets survive a broker crash or restart, per store."""
    parts: dict[str, list[str]] = {}
    for name in sorted(methods):
        info = infos.get(name)
        store = offset_store(info) if info is not None else None
        interval = (info.config or {}).get("flushConsumerOffsetInterval", "5000") if info is not None else "5000"
        every = f"every flushConsumerOffsetInterval ({interval} ms)"
        if store == V2 and methods[name] is Method.DIRECT:
            text = "wrote each offset into its RocksDB metadata store (configManagerVersion=v2) as it was applied"
        elif store == V2 and info is not None and memory_only_reset(info):
            text = (
                "keeps this broker-side reset in memory only (configManagerVersion=v2): it survives a restart "
                "once the consumers have committed offsets from it"
            )
        elif store == ROCKSDB:
            text = f"writes consumer offsets into its RocksDB offset store (storeType=defaultRocksDB) {every}"
        else:
            text = f"writes consumer offsets to config/{offsets_file(info)} {every}"
        parts.setdefault(text, []).append(name)
    if not parts:
        return ""
    lines = [f"{', '.join(names)} {text}" if len(parts) > 1 else f"the broker {text}" for text, names in parts.items()]
    lossy = any("every flushConsumerOffsetInterval" in t or "memory only" in t for t in parts)
    tail = "; a broker crash before then loses this change" if lossy else ""
    return "Durability: " + "; ".join(lines) + tail
