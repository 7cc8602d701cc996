"""Offsets broadcast consumers keep in their own files (--local-store): found and read as the
clients load them, rewritten each client's way, read back; a broker (-n) only adds what the
files cannot say (queue bounds, time searches, whether the clients are running)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mqadmin.commands._common import check_clients_stopped, has_broker, local_notes, store_time_at
from mqadmin.commands._plan import (
    UNVERIFIED,
    ApplyError,
    ApplyMethod,
    Method,
    PlanRow,
    ResetResult,
    outcome_applied,
)

from mqadmin import errors
from mqadmin.model import MessageQueue
from mqadmin.safety import OffsetBackup

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context
    from mqadmin.localstore import OffsetsFile

#: why a time (-s) needs a broker with local offsets
TIME_SEARCH = "the time search comes from the broker (or store:///its/store)"


@dataclass
class LocalOffsets:
    """The ``OffsetSource`` of broadcast clients' offsets files under ``path``: one offsets
    file per client (``files``), the broker (``admin``) only when -n was given.

    Reading commands use it too: ``open`` finds and reads the files as the clients load them
    and says which came from a .bak; ``files`` gives each client's offsets; ``need_broker``
    refuses what only a broker can answer; ``file_queues`` lists the queues without one;
    ``lag_time_ms`` is how far behind a client's offset is, as time."""

    path: str
    files: list[OffsetsFile]
    admin: Admin | None
    #: store time of the first unconsumed message per (queue, offset): clients at the same
    #: offset cost one read
    _oldest: dict[tuple[MessageQueue, int], int | None] = field(default_factory=dict, repr=False)
    #: Ctrl-C during the apply: no further files are written
    _stopped: bool = field(default=False, repr=False)

    @classmethod
    def open(cls, ctx: Context, path: str | Path, group: str | None, *, one_group: bool = False) -> LocalOffsets:
        """The offsets files of ``group`` (every group when None) at or under ``path``; with
        ``one_group``, refuse a path holding several groups' files when no group was named."""
        from mqadmin.localstore import find_offset_files

        files = find_offset_files(Path(path), group)
        groups = sorted({f.group for f in files})
        if one_group and group is None and len(groups) > 1:
            raise errors.UsageError(f"{path} holds offsets of several groups ({', '.join(groups)}): pass -g")
        local_notes(ctx, files)
        return cls(str(path), files, ctx.admin() if has_broker(ctx) else None)

    @property
    def group(self) -> str:
        """The group the files belong to (the first, when they hold several)."""
        return self.files[0].group

    @property
    def address(self) -> str:
        return f"local:{self.path}"

    def need_broker(self, what: str, why: str = TIME_SEARCH) -> Admin:
        """The broker, or a usage error saying ``what`` needs one, and why."""
        if self.admin is None:
            raise errors.UsageError(f"{what} needs -n: {why}")
        return self.admin

    def file_queues(self, topic: str) -> list[MessageQueue]:
        """The queues of ``topic`` any client's file has an offset for (without -n, all there is)."""
        return sorted({mq for f in self.files for mq in f.offsets if mq.topic == topic})

    def lag_time_ms(
        self, ctx: Context, mq: MessageQueue, offset: int, max_offset: int, min_offset: int | None = None
    ) -> int | None:
        """Age of the oldest message a client at ``offset`` has not consumed: 0 when caught up;
        from the queue's min offset (asked when not given) when retention deleted the ones below
        it; None when no message can be read there. Needs the broker."""
        if offset >= max_offset:
            return 0
        admin = self.need_broker("lag as time", "the messages' store times come from the broker")
        start = max(offset, admin.min_offset(mq) if min_offset is None else min_offset)
        if (mq, start) not in self._oldest:
            self._oldest[(mq, start)] = store_time_at(admin, mq, start)
        oldest = self._oldest[(mq, start)]
        return max(ctx.now - oldest, 0) if oldest else None

    def check_stopped(self, ctx: Context, group: str, while_running: bool) -> None:
        """Refuse to race running clients, which rewrite their files within seconds."""
        check_clients_stopped(ctx, self.admin, group, while_running)

    def by_client(self) -> dict[str, OffsetsFile]:
        return {f.client: f for f in self.files}

    # -- the plan flow --------------------------------------------------------------------------

    def start(self, ctx: Context, result: ResetResult) -> None:
        result.local_files, result.local_path = self.files, self.path

    def check(self, ctx: Context, result: ResetResult) -> None:
        """A folder that cannot be written refuses before the question (whether the clients run
        was checked while planning: check_stopped)."""
        from mqadmin.localstore import check_writable

        files = self.by_client()
        check_writable(files[c] for c in dict.fromkeys(q.client or "" for q in result.queues if q.changes))

    def question(self, result: ResetResult, changed: list[PlanRow]) -> str:
        clients = len({q.client for q in changed})
        return f"Rewrite the offsets files of {clients} client(s) of group {result.group}?"

    def prepare(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """All or nothing when a client wrote meanwhile (while the question waited): refuse before
        the first write."""
        from mqadmin.localstore import ensure_unchanged

        files = self.by_client()
        clients = list(dict.fromkeys(q.client or "" for q in changed))
        for c in clients:
            ensure_unchanged(files[c])

    def moved(self, ctx: Context, result: ResetResult) -> list[tuple[PlanRow, int | None]]:
        return []  # prepare refused files a client rewrote since the plan read them

    def backup(self, result: ResetResult) -> OffsetBackup:
        files = self.by_client()
        return OffsetBackup(
            group=result.group,
            topic=result.topic,
            address=self.address,
            taken_at=int(time.time() * 1000),
            reason=("restoreOffset" if result.restored_from else "resetOffsetByTime") + " (local offsets files)",
            offsets=[
                {
                    "broker": q.broker,
                    "queue_id": q.queue_id,
                    "offset": q.old_offset,
                    "client": q.client,
                    "file": str(files[q.client or ""].path),
                }
                for q in result.queues
                if q.old_offset is not None
            ],
        )

    def apply(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Rewrite each client's file the client's way. A file a client rewrote since the plan is
        left alone and reported; the others are still written (each file is its own outcome)."""
        from mqadmin.localstore import FileChanged, write_offsets

        files = self.by_client()
        for client, rows in sorted(_by_client(changed).items()):
            if self._stopped:
                return
            f = files[client]
            new = dict(f.offsets)
            for q in rows:
                new[MessageQueue(result.topic, q.broker, q.queue_id)] = q.new_offset
            try:
                write_offsets(f, new)
            except (FileChanged, errors.MqadminError) as exc:
                result.errors.append(ApplyError(client, str(exc)))

    def verify(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Read each written file back as its client would load it."""
        from mqadmin.localstore import FROM_FILE, read_offsets_file

        files = self.by_client()
        failed = {e.broker for e in result.errors}
        for client, rows in sorted(_by_client(changed).items()):
            if client in failed:
                continue
            f = files[client]
            back = read_offsets_file(f.path, f.group, f.client)
            wrong = [
                q for q in rows if back.offsets.get(MessageQueue(result.topic, q.broker, q.queue_id)) != q.new_offset
            ]
            if back.source != FROM_FILE or wrong:
                result.errors.append(ApplyError(client, f"read back of {f.path} does not match"))
                continue
            kept = (
                f"previous content in {f.previous_copy.name}" if f.previous_copy else "previous offsets in the backup"
            )
            result.method[client] = ApplyMethod(Method.FILE, f"rewrote {f.path} ({f.style} form; {kept})")
            for q in rows:
                q.outcome = outcome_applied(q.new_offset)
        for q in changed:
            if q.outcome is None:
                q.outcome = UNVERIFIED

    def interrupt(self) -> None:
        self._stopped = True

    def settle(self, ctx: Context, result: ResetResult, changed: list[PlanRow], deadline: float) -> None:
        """Local files answer at once: the read-back is the usual one, each file as written or not."""
        self.verify(ctx, result, changed)

    def failure_line(self, result: ResetResult) -> str:
        failed = ", ".join(sorted({e.broker for e in result.errors}))
        return (
            f"not written for {failed}; restore with: "
            f"mqadmin restoreOffset --from {result.backup} --local-store {self.path}"
        )


def _by_client(rows: list[PlanRow]) -> dict[str, list[PlanRow]]:
    out: dict[str, list[PlanRow]] = {}
    for q in rows:
        out.setdefault(q.client or "", []).append(q)
    return out
