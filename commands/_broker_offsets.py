"""Offsets the brokers keep, moved through the admin facade: the broker-side reset where a broker
serves one, direct offset updates otherwise, then every planned queue read back."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from mqadmin.commands import _reset as flow
from mqadmin.commands._common import fan_out
from mqadmin.commands._plan import (
    ACKED,
    INTERRUPTED_UNKNOWN,
    UNKNOWN,
    ApplyError,
    ApplyMethod,
    Method,
    Outcome,
    PlanRow,
    ResetResult,
    applied,
    outcome_applied,
    outcome_elsewhere,
    outcome_taken,
    outcome_unchanged,
    outcome_undone,
)
from mqadmin.commands._reset_path import broker_path, check_reset_path, durability_line

from mqadmin import errors
from mqadmin.model import BrokerInfo, MessageQueue
from mqadmin.safety import OffsetBackup

if TYPE_CHECKING:
    from mqadmin.admin import Admin
    from mqadmin.context import Context
    from mqadmin.model import ConsumerConnection

#: a queue of the plan: (topic, broker name, queue id)
Key = tuple[str, str, int]

#: the consume type of pull consumers (DefaultLitePullConsumer and the like)
PULL = "CONSUME_ACTIVELY"


class BrokerOffsets:
    """The ``OffsetSource`` of offsets the brokers keep.

    ``reset_ts``: the time a broker-side reset is asked for (-1: each queue's max offset; None:
    exact targets only). ``explicit``: the targets are exact (restore, -o, --exact, a copy), so
    no time-based reset is pushed to the consumers. ``cplus``: ask brokers for the C++ reset
    body (None: when a C++ consumer is online). ``no_wait``: skip the second read-back after
    the online clients' commit interval.
    """

    def __init__(
        self,
        *,
        reset_ts: int | None = None,
        force: bool = True,
        explicit: bool = True,
        cplus: bool | None = None,
        no_wait: bool = False,
        partial: bool = False,
    ) -> None:
        self.reset_ts, self.force, self.explicit, self.cplus, self.no_wait = reset_ts, force, explicit, cplus, no_wait
        self.partial = partial
        self._reader: Admin | None = None
        self._writer: Admin | None = None
        self._online: ConsumerConnection | None = None
        self.infos: dict[str, BrokerInfo] = {}
        #: per queue, the offset it should read back at (a pushed reset's table may say otherwise)
        self.expected: dict[Key, int] = {}
        #: brokers that pushed the reset to online consumers; queues whose write a broker acknowledged
        self.pushed: set[str] = set()
        self.acked: set[Key] = set()
        #: brokers that took a server-side reset: until the group's next pull or pop takes it the
        #: broker ignores commits, then it serves from the reset offset (ConsumerManageProcessor,
        #: PullMessageProcessor, PopMessageProcessor.resetPopOffset)
        self.server_side: set[str] = set()
        #: the group pulled messages in the last minute (consume stats): a client commits offsets,
        #: whether or not the broker lists it (one that sends no heartbeats)
        self.committing = False
        #: set by Ctrl-C: no further writes
        self._stop = threading.Event()

    @property
    def address(self) -> str:
        assert self._reader is not None, "start() first"
        return self._reader.address

    @property
    def admin(self) -> Admin:
        assert self._writer is not None, "prepare() first"
        return self._writer

    def start(self, ctx: Context, result: ResetResult) -> None:
        self._reader = ctx.admin()
        for q in result.queues:
            q.topic = q.topic or result.topic
        if not result.versions:
            result.versions = _versions(self._reader)

    def check(self, ctx: Context, result: ResetResult) -> None:
        """Refuse while every broker still holds what the plan read (before the question and the
        backup) when a planned broker cannot take the write (the store in use by a server, no
        master); warn about pull consumers."""
        admin = self._writer = ctx.admin(write=True)
        self.infos = {b.broker_name: b for b in admin.cluster_brokers()}
        result.versions = {name: b.version for name, b in self.infos.items()}
        result.address = admin.address
        require_masters(admin, [q for q in result.queues if q.changes])
        online = self._online = _online(ctx.admin(), result.group)
        check_reset_path(ctx, result, online, explicit=self.explicit, reset_ts=self.reset_ts, partial=self.partial)
        if online is not None and online.consume_type == PULL:
            ctx.env.warn(
                f"group {result.group} has pull consumers online ({_ids(online)}): such clients (e.g. "
                "DefaultLitePullConsumer) keep their offsets themselves, ignore a pushed reset and commit their own "
                "offsets back, so they usually undo this change; stop them first"
            )

    def question(self, result: ResetResult, changed: list[PlanRow]) -> str:
        clusters = ",".join(sorted({b.cluster for b in self.infos.values()}))
        return (
            f"Apply to {len(changed)} queue(s) of group {result.group} on cluster {clusters or '?'} at {self.address}?"
        )

    def prepare(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        pass  # opened for writing in check(), before the question

    @property
    def consumers_active(self) -> bool:
        """Consumers may move the group's offsets on their own: clients online, or commits seen."""
        return self._online is not None or self.committing

    def moved(self, ctx: Context, result: ResetResult) -> list[tuple[PlanRow, int | None]]:
        """The offsets now against the plan's: a queue the consumers moved forward takes its offset
        now as the old one; any other move is returned (another writer's). A queue that cannot be
        read now keeps the plan's offset (the apply and read-back will say)."""
        self.committing = self._pulled_lately(result)
        now = self._read(result.group, [q.mq_key for q in result.queues], strict=True)
        stale: list[tuple[PlanRow, int | None]] = []
        for q in result.queues:
            if q.mq_key not in now or now[q.mq_key] == q.old_offset:
                continue
            if now[q.mq_key] is None and q.old_offset in (None, q.min_offset):
                continue  # still no offset: the plan showed the queue's min for it (current_rows)
            got = now[q.mq_key]
            if got is not None and (q.old_offset is None or got > q.old_offset) and self.consumers_active:
                if not q.changes:
                    q.new_offset = got  # not planned to move: it stays where the consumers are
                q.old_offset = got
            else:
                stale.append((q, got))
        return stale

    def _pulled_lately(self, result: ResetResult) -> bool:
        """Whether the consume stats show the group pulling (consumeTps over the last minute). The
        stats' lastTimestamp is a message's store time, not a commit's, so it is not used."""
        for topic in sorted({q.topic for q in result.queues}):
            try:
                if self.admin.consume_stats(result.group, topic, partial=True).consume_tps > 0:
                    return True
            except errors.MqadminError:
                continue
        return False

    def backup(self, result: ResetResult) -> OffsetBackup:
        return OffsetBackup(
            group=result.group,
            topic=result.topic,
            address=self.admin.address,
            taken_at=int(time.time() * 1000),
            reason=result.action,
            offsets=[
                {**({"topic": q.topic} if result.multi_topic else {}), "broker": q.broker, "queue_id": q.queue_id}
                | {"offset": q.old_offset}
                for q in result.queues
            ],
            clusters=sorted({b.cluster for b in self.infos.values()}),
            brokers={name: b.addr for name, b in sorted(self.infos.items())},
        )

    def apply(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        by_broker: dict[str, list[PlanRow]] = {}
        for q in changed:
            by_broker.setdefault(q.broker, []).append(q)
        self.expected = {q.mq_key: q.new_offset for q in changed}

        def apply(item: tuple[str, list[PlanRow]]) -> None:
            broker, rows = item
            try:
                how, table = self._apply_broker(result.group, broker, rows)
                if self._stop.is_set():
                    return  # interrupted: the read-back after it reports
                result.method[broker] = how
                if table is not None:
                    self.pushed.add(broker)
                    for mq, off in table.items():
                        if (mq.topic, broker, mq.queue_id) in self.expected:
                            self.expected[(mq.topic, broker, mq.queue_id)] = off
                            self.acked.add((mq.topic, broker, mq.queue_id))
            except _Stopped:
                return
            except errors.MqadminError as exc:
                if not self._stop.is_set():
                    result.errors.append(self._error(broker, str(exc), getattr(exc, "code", None)))

        flow.daemon_map(apply, sorted(by_broker.items()))
        if not self.admin.capabilities.persists_on_ack:
            result.durability = durability_line(self.infos, {b: m.code for b, m in result.method.items()})

    def _apply_broker(
        self, group: str, broker: str, rows: list[PlanRow]
    ) -> tuple[ApplyMethod, dict[MessageQueue, int] | None]:
        """Apply one broker's rows (of one or more topics): how, and a pushed reset's table."""
        admin, info, reset_ts = self.admin, self.infos.get(broker), self.reset_ts
        path = broker_path(info, self._online)
        if info is not None and path == "broker":
            for q in rows:
                self._check_stop()
                admin.reset_offset_by_time(
                    q.topic,
                    group,
                    reset_ts if reset_ts is not None else 0,
                    True,
                    broker_name=broker,
                    queue_id=q.queue_id,
                    offset=q.new_offset,
                )
                self.acked.add(q.mq_key)
            self.server_side.add(broker)
            return ApplyMethod(Method.SERVER_SIDE, f"broker-side reset (server-side, broker {info.version})"), None
        if path == "push" and not self.explicit and reset_ts is not None:
            try:
                cpp = self.cplus if self.cplus is not None else _cpp_consumer_online(admin, group)
                table: dict[MessageQueue, int] = {}
                for topic in sorted({q.topic for q in rows}):  # a pushed reset names one topic
                    self._check_stop()
                    table |= admin.reset_offset_by_time(
                        topic, group, reset_ts, self.force, broker_name=broker, cplus=cpp
                    )
                return ApplyMethod(Method.PUSHED, "broker-side reset (pushed to the online consumers)"), table
            except errors.ConsumerNotOnline:
                how = "direct offset update (no consumer online)"
            except errors.SystemError_ as exc:
                # A client-push broker refuses when the group lacks an offset on one of its queues
                # ("THe consumer group <g> not exist"); the plan still has a target for every queue.
                if "consumer group" not in exc.remark.lower() or "not exist" not in exc.remark.lower():
                    raise
                how = "direct offset update (the group had no offset on some queues of this broker)"
        else:
            how = "direct offset update" + (" (stored at once by configManagerVersion=v2)" if path == "direct" else "")
        for q in rows:
            self._check_stop()
            admin.update_consumer_offset(group, MessageQueue(q.topic, broker, q.queue_id), q.new_offset)
            self.acked.add(q.mq_key)
        return ApplyMethod(Method.DIRECT, how), None

    def verify(self, ctx: Context, result: ResetResult, changed: list[PlanRow]) -> None:
        """Read back every planned queue, on every broker (a failed apply may still have moved
        some); with clients online, once more after their commit interval. Errors the read-back
        shows to be harmless (a lost reply after the last write) are dropped with a warning."""
        seen = self._watch(result)
        self._record(result, seen)
        if self.consumers_active and not self.no_wait and result.verified:
            self._recheck(ctx, result, self._online)
        if result.errors and result.verified == result.planned:
            lost = ApplyMethod(Method.REPLY_LOST, "applied (the broker's reply was lost; verified by read-back)")
            for e in result.errors:
                ctx.env.warn(f"{self._where(e.broker)}: {e.message}; the read-back shows its queues applied")
                result.method.setdefault(e.broker, lost)
            result.errors = []

    def _read(self, group: str, keys: list[Key], *, strict: bool = False) -> dict[Key, int | None]:
        """Each queue's committed offset (None: none, or it could not be read; ``strict``: the
        queues that could not be read are left out)."""
        failed: set[Key] = set()

        def read(k: Key) -> int | None:
            try:
                return self.admin.consumer_offset(group, MessageQueue(*k))
            except errors.MqadminError:
                failed.add(k)  # unreachable, or it answered with an error: we cannot know
                return None

        done = flow.daemon_map(read, keys)  # not left holding the process open by a Ctrl-C
        got = {k: done[i] for i, k in enumerate(keys)}
        return {k: v for k, v in got.items() if k not in failed} if strict else got

    def _watch(self, result: ResetResult) -> tuple[dict[Key, int | None], set[Key]]:
        """(where every planned queue is now, the queues seen taking a pushed reset). Pushed
        resets get time for the clients to apply and commit them."""
        old = {q.mq_key: q.old_offset for q in result.queues}

        def taken(k: Key, v: int | None) -> bool:
            """A reset the consumers take (pushed to them, or served by the broker at their next
            pull or pop) is taken when the committed offset went to the target: seen at it, or
            (re-delivering) between it and where the consumers were, on their way forward again."""
            want, was = self.expected[k], old.get(k)
            if v is None:
                return False
            if v == want:
                return True
            if was is not None and want < was:
                return want <= v < was
            return v >= want

        deadline = time.monotonic() + (flow.PUSH_VERIFY_TIMEOUT_S if self.pushed else 0)
        keys = list(self.expected)
        actual = self._read(result.group, keys)
        # a server-side reset with consumers at work is served at their next pull or pop, which
        # moves the offset on from it at once (a POP group acks as it goes): that is taking it
        takers = self.pushed | (self.server_side if self.consumers_active else set())
        seen = {k for k, v in actual.items() if k[1] in takers and taken(k, v)}
        waiting = [k for k in keys if k[1] in self.pushed and k not in seen]
        if waiting:
            while waiting and time.monotonic() < deadline:  # watch only the queues not seen taken yet
                time.sleep(flow.PUSH_POLL_S)
                seen |= {k for k, v in self._read(result.group, waiting).items() if taken(k, v)}
                waiting = [k for k in waiting if k not in seen]
            actual = self._read(result.group, keys)  # where everything is now
        return actual, seen

    def _record(self, result: ResetResult, read: tuple[dict[Key, int | None], set[Key]]) -> None:
        """Each planned row's outcome from the read-back; an error per row not applied (unless
        its broker failed already)."""
        actual, seen = read
        old = {q.mq_key: q.old_offset for q in result.queues}
        failed_brokers = {e.broker for e in result.errors}
        for q in result.queues:
            k = q.mq_key
            if k not in self.expected:
                continue
            got, want = actual[k], self.expected[k]
            if k in seen and got != want:
                q.outcome = outcome_taken(got)
            elif got == want:
                q.outcome = outcome_applied(want)
            elif got is None:
                q.outcome = ACKED if k in self.acked else UNKNOWN
            elif got == old.get(k):
                q.outcome = outcome_unchanged(got)
            else:
                q.outcome = outcome_elsewhere(got, want, consumers=self.consumers_active)
            if applied(q):
                q.new_offset = want
            elif q.broker not in failed_brokers:
                result.errors.append(self._error(q.broker, f"{result.where(q)}queue {q.queue_id}: {q.detail}", None))

    def _recheck(self, ctx: Context, result: ResetResult, online: ConsumerConnection | None) -> None:
        """Read the applied queues again once the clients' commit interval has passed: a client
        that keeps its own offsets commits them back and undoes the change. Clients the broker
        does not list (no heartbeats) cannot take a pushed reset: any commit of theirs undoes it."""
        clients = (
            f"the {len(online.connections)} online client(s)"
            if online is not None
            else "the clients (the broker lists none, but the group pulled messages in the last minute)"
        )
        ctx.env.note(
            f"waiting {flow.COMMIT_WAIT_S:.0f} s for {clients} of group {result.group} to commit (their interval is "
            "5 s by default), then reading back again; --no-wait skips this"
        )
        time.sleep(flow.COMMIT_WAIT_S)
        rows = [q for q in result.queues if applied(q)]
        now = self._read(result.group, [q.mq_key for q in rows])
        for q in rows:
            got = now[q.mq_key]
            if got is None or got == q.new_offset:
                continue
            old = q.old_offset if q.old_offset is not None else q.new_offset
            # A server-side reset reaches every client through its next pull or pop (a POP group,
            # through a proxy, has no client the broker lists): moving on from it is consuming.
            keeps_own = (online is None or online.consume_type == PULL) and q.broker not in self.server_side
            if q.new_offset < old:
                # re-delivering: consumers that took the reset move forward from it, not past where they were
                undone = got < q.new_offset or (keeps_own and got >= old)
            else:
                undone = got < q.new_offset
            if undone:
                who = _ids(online) if online is not None else "a client the broker does not list"
                q.outcome = outcome_undone(got, who)
                result.errors.append(self._error(q.broker, f"{result.where(q)}queue {q.queue_id}: {q.detail}", None))

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise _Stopped()

    def interrupt(self) -> None:
        self._stop.set()

    def settle(self, ctx: Context, result: ResetResult, changed: list[PlanRow], deadline: float) -> None:
        keys = [q.mq_key for q in changed]

        def read(k: Key) -> int | None:
            return self.admin.consumer_offset(result.group, MessageQueue(*k))

        try:
            done = flow.daemon_map(read, keys, deadline=deadline)
        except errors.MqadminError:
            done = {}
        if len(done) < len(keys):
            ctx.env.warn(f"{len(keys) - len(done)} queue(s) did not answer the read-back: their outcome is unknown")
        for i, q in enumerate(changed):
            got = done.get(i, _MISSING)
            if got is _MISSING or not isinstance(got, int | None):
                q.outcome = INTERRUPTED_UNKNOWN
            elif got == q.new_offset:
                q.outcome = outcome_applied(got)
            elif got == q.old_offset:
                q.outcome = outcome_unchanged(got)
            else:
                q.outcome = outcome_elsewhere(got, q.new_offset, consumers=True)

    def failure_line(self, result: ResetResult) -> str:
        """Per broker, what is true now (brokers with every queue applied left out), and how to undo."""
        counts: dict[str, dict[str, int]] = {}
        for q in result.queues:
            if q.outcome is not None:
                word = q.outcome.code.word
                per = counts.setdefault(q.broker, {})
                per[word] = per.get(word, 0) + 1
        done = sum(
            1 for q in result.queues if q.outcome is not None and q.outcome.code in (Outcome.APPLIED, Outcome.ACKED)
        )
        parts = [
            f"{self._where(b)}: " + ", ".join(f"{n} {w}" for w, n in sorted(per.items()))
            for b, per in sorted(counts.items())
            if set(per) != {"applied"}
        ]
        head = "partly applied" if done else "not applied"
        if result.interrupted and not parts:
            return f"interrupted after every queue was applied; restore with: {result.undo}"
        return (
            f"{'interrupted: ' if result.interrupted else ''}{head} ({'; '.join(parts)}); restore with: {result.undo}"
        )

    def _where(self, broker: str) -> str:
        """A broker's name with its address: operators know brokers by name, networks by address."""
        info = self.infos.get(broker)
        return f"{broker} ({info.addr})" if info is not None and info.addr else broker

    def _error(self, broker: str, message: str, code: int | None) -> ApplyError:
        info = self.infos.get(broker)
        return ApplyError(broker, message, info.addr if info else None, code)


class _Stopped(Exception):
    """The apply was interrupted before this write."""


#: a read that did not answer in time
_MISSING = object()

#: the broker id of a master in a route's addresses (slaves have 1, 2, ...)
MASTER_ID = 0


def require_masters(admin: Admin, rows: list[PlanRow]) -> None:
    """Offsets live on each broker's master: a slave accepts an update, but the master's copy
    overwrites it when the master is back (broker: ConsumerOffsetManager, synced to slaves by
    SlaveSynchronize). So a planned broker whose route lists no master (brokerId 0), or whose
    master does not answer one read now, refuses the whole change before anything is written."""
    from mqadmin.commands._lite import route_topic  # a lite topic's queue is on its parent's brokers

    routes = {t: admin.topic_route(route_topic(t)) for t in sorted({q.topic for q in rows})}
    firsts: dict[str, PlanRow] = {}
    for q in rows:
        firsts.setdefault(q.broker, q)
    for name, q in sorted(firsts.items()):
        data = routes[q.topic].broker(name)
        addrs = data.addrs if data is not None else {}
        if addrs and MASTER_ID not in addrs:
            slaves = ", ".join(addrs[i] for i in sorted(addrs))
            raise errors.ConnectError(
                f"{name} has no master online (the name server lists only its slave {slaves}): offsets live on the "
                "master, so they cannot be changed until it is back; nothing was changed"
            )

    def probe(q: PlanRow) -> str | None:
        try:
            admin.max_offset(MessageQueue(q.topic, q.broker, q.queue_id))
        except errors.MqadminError as exc:
            return f"{q.broker} did not answer ({exc}): its offsets cannot be changed now; nothing was changed"
        return None

    refused = [line for line in fan_out(probe, [firsts[n] for n in sorted(firsts)]) if line]
    if refused:
        raise errors.ConnectError(refused[0])


def _versions(admin: Admin) -> dict[str, str]:
    """Broker name -> version (empty when the cluster cannot say)."""
    try:
        return {b.broker_name: b.version for b in admin.cluster_brokers()}
    except errors.MqadminError:
        return {}


def _online(admin: Admin, group: str) -> ConsumerConnection | None:
    """The group's online clients, None when nobody is online (or it cannot be asked)."""
    try:
        conn = admin.consumer_connections(group)
    except errors.MqadminError:
        return None
    return conn if conn.connections else None


def _ids(online: ConsumerConnection) -> str:
    return ", ".join(sorted(c.client_id for c in online.connections))


def _cpp_consumer_online(admin: Admin, group: str) -> bool:
    """C++ consumers decode only the array form of a pushed reset, which brokers send when the
    admin request says it comes from C++; so ask for it when one of them is online."""
    try:
        return any(c.language == "CPP" for c in admin.consumer_connections(group).connections)
    except errors.BrokerError:
        return False
