"""restoreOffset: put a group's offsets back from a backup that resetOffsetByTime wrote."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqadmin.commands._broker_offsets import BrokerOffsets
from mqadmin.commands._common import (
    fan_out,
    group_offsets,
    has_broker,
    refuse_offline_write,
    route_of,
)
from mqadmin.commands._lite import is_lite_queue, lite_current
from mqadmin.commands._local_offsets import LocalOffsets
from mqadmin.commands._options import BACKUP, DRY_RUN, GROUP, LOCAL_STORE, REASON, TOPIC, WHILE_RUNNING, YES
from mqadmin.commands._plan import PlanRow, ResetResult
from mqadmin.commands._reset import FORCE_STALE, NO_WAIT, current_rows, run_plan
from mqadmin.commands._reset_path import PARTIAL

from mqadmin import errors
from mqadmin.admin import capabilities_of
from mqadmin.context import Context
from mqadmin.model import MessageQueue
from mqadmin.registry import Opt, SubCommand, register
from mqadmin.safety import OffsetBackup, read_text_file

if TYPE_CHECKING:
    from mqadmin.admin import Admin


CLAMP = Opt(
    "clamp",
    ("--clamp",),
    "Move a backup offset that lies outside the queue's [min, max] today (e.g. retention deleted the "
    "messages) to the nearest bound; without it such a backup is refused",
    kind=bool,
    default=False,
)
OTHER_CLUSTER = Opt(
    "other_cluster",
    ("--other-cluster",),
    "Restore a backup taken from another cluster (another name server and other broker addresses); "
    "without it such a backup is refused",
    kind=bool,
    default=False,
)


@dataclass(frozen=True)
class RestoreOffsetParams:
    """restoreOffset's options (the defaults are the Opt declarations')."""

    from_: str
    group: str | None
    topic: str | None
    clamp: bool
    other_cluster: bool
    no_wait: bool
    force_stale: bool
    partial: bool
    dry_run: bool
    yes: bool
    backup: str | None
    local_store: str | None
    while_running: bool


@register
class RestoreOffsetCommand(SubCommand):
    """Put a group's offsets back from a backup file (mqadmin extension).

    Every resetOffsetByTime and restoreOffset writes one before it changes anything; this
    validates the whole backup first (its shape, the group, topic and every queue on the
    target, offsets >= 0 and inside today's [min, max] unless --clamp; the cluster it came from
    unless --other-cluster) and changes nothing when any check fails; then it shows the plan
    (--dry-run shows only that), backs up the current offsets again, applies and reads back.
    Without -n it uses the address recorded in the backup. -g/-t are optional checks that the
    backup is the one you mean.
    """

    name = "restoreOffset"
    options = (
        Opt(
            "from_",
            ("--from",),
            "Backup file to restore, or a plan written by --export (CSV: known by its .csv name or its header line; "
            "-n required)",
            required=True,
            metavar="BACKUP",
        ),
        GROUP,
        TOPIC,
        CLAMP,
        OTHER_CLUSTER,
        NO_WAIT,
        FORCE_STALE,
        PARTIAL,
        DRY_RUN,
        YES,
        BACKUP,
        REASON,
        LOCAL_STORE,
        WHILE_RUNNING,
    )

    params_type = RestoreOffsetParams

    def execute(self, ctx: Context, params: RestoreOffsetParams) -> ResetResult:
        path = str(params.from_)
        plan = is_plan_csv(Path(path))
        backup = read_plan_csv(Path(path), params.group) if plan else OffsetBackup.read(path)
        for opt, value, have in (("-g", params.group, backup.group), ("-t", params.topic, backup.topic)):
            if value is not None and value != have:
                raise errors.UsageError(
                    f"backup {path} is for group {backup.group!r} on topic {backup.topic!r}, not {opt} {value!r}"
                )
        from mqadmin.localstore import backup_rows

        rows_with_clients = [] if plan else [r for r in backup_rows(Path(path)) if r.get("client")]
        if params.local_store:
            return _local(ctx, params, backup, rows_with_clients)
        if rows_with_clients:
            raise errors.UsageError(
                f"backup {path} holds broadcast clients' local offsets ({backup.address}): "
                "restore it with --local-store PATH"
            )
        if not has_broker(ctx):
            if plan:
                raise errors.UsageError(f"{path} is a plan (CSV), which records no broker address: give one with -n")
            if not backup.address or backup.address.startswith("local:"):
                raise errors.UsageError(f"backup {path} records no broker address: give one with -n")
            ctx.address = backup.address
            ctx.env.note(f"restoring to {backup.address}, the address recorded in the backup")
        if not params.dry_run:
            refuse_offline_write(ctx, "restoreOffset")
        admin = ctx.admin()
        _check_cluster(ctx, admin, backup, path, params.other_cluster, params.dry_run)
        rows = _broker_rows(ctx, admin, backup, params.clamp)
        result = ResetResult(
            backup.group,
            backup.topic,
            None,
            params.dry_run,
            rows,
            restored_from=path,
            tz=ctx.tz,
            action="restoreOffset",
        )
        source = BrokerOffsets(no_wait=params.no_wait, partial=params.partial)
        return run_plan(ctx, result, source, backup_path=params.backup, force_stale=params.force_stale)


def _broker_rows(ctx: Context, admin: Admin, backup: OffsetBackup, clamp: bool) -> list[PlanRow]:
    """The backup's queues with their offsets now and the backup's as targets; refused whole when
    a queue is gone, the group unknown, or an offset outside today's [min, max] without --clamp."""
    wanted = {
        MessageQueue(o.get("topic") or backup.topic, o["broker"], o["queue_id"]): o["offset"] for o in backup.offsets
    }
    current = lite_current(admin, backup.group, wanted)  # a 5.5 lite group's lite topics, by their parent
    for topic in sorted({mq.topic for mq in wanted if not is_lite_queue(mq)}):  # several topics restore together
        known = set(route_of(admin, topic).message_queues())
        missing = sorted(mq for mq in wanted if mq.topic == topic and mq not in known)
        if missing:
            raise errors.UsageError(
                f"backup names queues topic {topic} does not have on {admin.address}: "
                f"{', '.join(f'{mq.broker_name} queue {mq.queue_id}' for mq in missing)}; nothing was changed"
            )
        try:
            current |= {mq: w.consumer_offset for mq, w in group_offsets(admin, backup.group, topic).items()}
        except errors.UsageError:
            if backup.group not in {*admin.list_groups(), *admin.list_groups(subscribed=True)}:
                raise errors.UsageError(
                    f"unknown consumer group {backup.group!r} on {admin.address}: it has no offsets on topic "
                    f"{topic} and no subscription; nothing was changed"
                ) from None
    rows = current_rows(admin, sorted(wanted), current)
    outside = []
    for r in rows:
        r.new_offset = wanted[MessageQueue(r.topic, r.broker, r.queue_id)]
        lo, hi = r.min_offset, r.max_offset
        if lo is not None and hi is not None and not lo <= r.new_offset <= hi:
            outside.append(f"{r.broker} queue {r.queue_id}: {r.new_offset} not in [{lo}, {hi}]")
            if clamp:
                r.new_offset = min(max(r.new_offset, lo), hi)
    if outside and not clamp:
        raise errors.UsageError(
            f"backup offsets lie outside today's [min, max] ({'; '.join(outside)}): retention may have deleted "
            "the messages; --clamp moves them to the nearest bound; nothing was changed"
        )
    for line in outside:
        ctx.env.warn(f"clamped {line}")
    return rows


def is_plan_csv(path: Path) -> bool:
    """An exported plan (--export) rather than a JSON backup: by its extension, else by its first
    line (a JSON backup starts with "{", a plan with its CSV header)."""
    if path.suffix.lower() == ".csv":
        return True
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            first = f.readline().strip()
    except OSError:
        return False
    return first.startswith("group,") or first.startswith("topic,")


def read_plan_csv(path: Path, group: str | None) -> OffsetBackup:
    """An exported (maybe edited) plan, validated whole before anything moves: the header names
    topic, broker, queue and offset (group too, or -g); every row has them, a queue id and an
    offset that are integers >= 0, one group, and no queue twice. The rest of restoreOffset's
    checks (queues exist, offsets inside [min, max]) follow as for a backup."""
    import csv

    text = read_text_file(path, "plan file")
    reader = csv.DictReader(line for line in text.splitlines() if line.strip() and not line.startswith("#"))
    header = [h.strip() for h in reader.fieldnames or []]
    need = ["topic", "broker", "queue", "offset"] + ([] if group else ["group"])
    missing = [c for c in need if c not in header]
    if missing:
        raise errors.UsageError(
            f"plan file {path}: the header lacks {', '.join(missing)} (it has: {', '.join(header) or 'nothing'}); "
            "nothing was changed"
        )
    groups: set[str] = set()
    offsets: list[dict[str, Any]] = []
    seen: set[tuple[str, str, int]] = set()
    for n, raw in enumerate(reader, start=2):
        # queue and offset as written: " 7", "+8", "1_000" are not what an export writes
        row = {str(k).strip(): (v or "") for k, v in raw.items() if k is not None}
        row = {k: v if k in ("queue", "offset") else v.strip() for k, v in row.items()}
        o = _plan_row(row, need, f"plan file {path} line {n}")
        key = (o["topic"], o["broker"], o["queue_id"])
        if key in seen:
            raise errors.UsageError(
                f"plan file {path} line {n}: {key[0]} {key[1]} queue {key[2]} is named twice; nothing was changed"
            )
        seen.add(key)
        groups.add(row.get("group") or str(group))
        offsets.append(o)
    if not offsets:
        raise errors.UsageError(f"plan file {path} has no rows; nothing was changed")
    if group is not None:
        groups.add(group)
    if len(groups) > 1:
        raise errors.UsageError(
            f"plan file {path} names several groups ({', '.join(sorted(groups))}): one plan, one group"
        )
    topics = sorted({o["topic"] for o in offsets})
    if len(topics) == 1:
        for o in offsets:
            del o["topic"]
    return OffsetBackup(
        group=groups.pop(), topic=",".join(topics), address="", taken_at=0, reason="plan file", offsets=offsets
    )


#: an integer cell of a plan: digits with an optional minus, nothing else (int() takes more)
_CSV_INT = re.compile(r"-?[0-9]+")


def _plan_row(row: dict[str, str], need: list[str], where: str) -> dict[str, Any]:
    """One plan row as a backup's offset row, refused unless every needed cell is there and the
    queue and offset are integers >= 0."""
    if any(not row.get(c) for c in need):
        raise errors.UsageError(f"{where}: empty {', '.join(c for c in need if not row.get(c))}; nothing was changed")
    if not all(_CSV_INT.fullmatch(row[c]) for c in ("queue", "offset")):
        raise errors.UsageError(
            f"{where}: queue and offset must be integers, not {row['queue']!r}, {row['offset']!r}; nothing was changed"
        )
    queue, offset = int(row["queue"]), int(row["offset"])
    if queue < 0 or offset < 0:
        raise errors.UsageError(f"{where}: a negative queue or offset ({queue}, {offset}); nothing was changed")
    return {"topic": row["topic"], "broker": row["broker"], "queue_id": queue, "offset": offset}


def _addresses(address: str) -> set[str]:
    return {a.strip() for a in address.split(";") if a.strip()}


def _check_cluster(ctx: Context, admin: Admin, backup: OffsetBackup, path: str, allowed: bool, dry_run: bool) -> None:
    """Refuse a backup taken from another cluster: same cluster names, and the same name server
    or at least one broker address in common (another name server of the same cluster). A dry
    run changes nothing, so it only warns and shows the plan."""
    if backup.clusters is None and backup.brokers is None:
        return  # an older backup records only the address it was taken through
    infos = admin.cluster_brokers()
    clusters = sorted({b.cluster for b in infos})
    same_names = backup.clusters is None or set(backup.clusters) == set(clusters)
    same_namesrv = bool(_addresses(admin.address) & _addresses(backup.address))
    # broker addresses of a routed cluster are on the network; an embedded store's only name its brokers
    recorded = set((backup.brokers or {}).values()) if capabilities_of(backup.address).routed else set()
    shared_brokers = bool(recorded & {b.addr for b in infos})
    if same_names and (same_namesrv or shared_brokers):
        return
    there = f"cluster {','.join(clusters) or '?'} at {admin.address}"
    taken = f"cluster {','.join(backup.clusters or []) or '?'} at {backup.address}"
    message = f"backup {path} was taken from {taken}, not {there}"
    if dry_run and not allowed:
        ctx.env.warn(f"{message}: applying this plan there needs --other-cluster")
        return
    if not allowed:
        raise errors.UsageError(f"{message}: pass --other-cluster to restore it there; nothing was changed")
    ctx.env.warn(f"{message}: restoring there (--other-cluster)")


def _local(
    ctx: Context, params: RestoreOffsetParams, backup: OffsetBackup, client_rows: list[dict[str, Any]]
) -> ResetResult:
    """Put clients' local offsets back. A local backup names each row's client (matched by file,
    then by client name); a broker backup is applied to every client of the group found."""
    source = LocalOffsets.open(ctx, str(params.local_store), backup.group)
    wanted = _local_targets(source, backup, client_rows)
    queues = sorted({mq for _, mq in wanted})
    if source.admin is not None:
        known = set(route_of(source.admin, backup.topic).message_queues())
        missing = sorted(set(queues) - known)
        if missing:
            raise errors.UsageError(f"backup names queues the topic no longer has: {', '.join(map(str, missing))}")
    if not params.dry_run:
        source.check_stopped(ctx, backup.group, params.while_running)
    admin = source.admin

    def bounds(mq: MessageQueue) -> tuple[int | None, int | None]:
        return (None, None) if admin is None else (admin.min_offset(mq), admin.max_offset(mq))

    limits = dict(zip(queues, fan_out(bounds, queues), strict=True))
    files = source.by_client()
    rows = []
    for (client, mq), offset in sorted(wanted.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        lo, hi = limits[mq]
        rows.append(PlanRow(mq.broker_name, mq.queue_id, lo, hi, files[client].offsets.get(mq), offset, client))
        if lo is not None and offset < lo:
            ctx.env.warn(
                f"{client}: {mq.broker_name} queue {mq.queue_id}: backup offset {offset} is below the min offset {lo} "
                f"(messages expired); the client will start at {lo}"
            )
    result = ResetResult(
        backup.group,
        backup.topic,
        None,
        params.dry_run,
        rows,
        restored_from=str(params.from_),
        tz=ctx.tz,
        action="restoreOffset",
    )
    return run_plan(ctx, result, source, backup_path=params.backup, force_stale=params.force_stale)


def _local_targets(
    source: LocalOffsets, backup: OffsetBackup, client_rows: list[dict[str, Any]]
) -> dict[tuple[str, MessageQueue], int]:
    """(client, queue) -> the offset to put back: a local backup's rows matched to the clients
    found (by file, then by client name); a broker backup's for every client."""
    by_path = {str(f.path.resolve()): f for f in source.files}
    by_client = source.by_client()
    wanted: dict[tuple[str, MessageQueue], int] = {}
    if not client_rows:
        for f in source.files:
            for o in backup.offsets:
                wanted[(f.client, MessageQueue(backup.topic, o["broker"], o["queue_id"]))] = int(o["offset"])
        return wanted
    for r in client_rows:
        found = by_path.get(str(Path(str(r.get("file", ""))).resolve())) or by_client.get(str(r["client"]))
        if found is None:
            raise errors.UsageError(
                f"the backup names client {r['client']!r} ({r.get('file')}), which {source.path} does not have"
            )
        wanted[(found.client, MessageQueue(backup.topic, str(r["broker"]), int(r["queue_id"])))] = int(r["offset"])
    return wanted
