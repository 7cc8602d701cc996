"""The admin facade over a real RocketMQ cluster, spoken in the remoting protocol.

Every method builds one request (or one per broker, sent together and awaited together),
checks the response code and shapes the reply into the facade's value types, with the
semantics the embedded mock has (the broker's processors: AdminBrokerProcessor.java,
ConsumerManageProcessor.java, PullMessageProcessor.java, SendMessageProcessor.java). Broker
errors become typed ``BrokerError``s that name the broker's address; could-not-talk failures are
``ConnectError``s. Sending, addresses and routes live in :mod:`.session`, the message calls in
:mod:`.messages`, reply parsing in :mod:`.replies`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from mqadmin import errors
from mqadmin.model import (
    LIVE_CLUSTER,
    BrokerData,
    BrokerInfo,
    Capabilities,
    ConsumerConnection,
    ConsumeStats,
    LiteGroupInfo,
    MessageQueue,
    OffsetWrapper,
    QueueStats,
    in_queue_order,
)
from mqadmin.protocol.bodies import ConsumerConnectionBody
from mqadmin.protocol.codec import DEFAULT_LANGUAGE, RemotingCommand
from mqadmin.protocol.codes import LanguageCode, RequestCode, ResponseCode
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.protocol.headers import (
    BrokerConsumeStatsHeader,
    ConsumerGroupHeader,
    ConsumerRunningInfoHeader,
    ConsumeStatsHeader,
    LiteGroupInfoHeader,
    MaxOffsetHeader,
    QueryConsumerOffsetHeader,
    QueueHeader,
    ResetOffsetHeader,
    SearchOffsetHeader,
    TopicHeader,
    UpdateConsumerOffsetHeader,
)
from mqadmin.remoting import lite, replies
from mqadmin.remoting.messages import MessageSession
from mqadmin.remoting.replies import MalformedReply
from mqadmin.remoting.session import Replies

__all__ = ["MalformedReply", "RemotingAdmin"]

log = logging.getLogger("mqadmin.remoting")

#: GET_CONSUME_STATS walks every queue of every topic; the Java tool gives it three time limits
CONSUME_STATS_TIMEOUT_FACTOR: Final = 3
#: GET_BROKER_CONSUME_STATS walks every queue of every group on the broker (the Java tool waits 50 s)
BROKER_CONSUME_STATS_TIMEOUT_FACTOR: Final = 10

#: per group: its consume-stats rows and consume TPS, filled in over several brokers
_Tables = dict[str, dict[MessageQueue, OffsetWrapper]]


class RemotingAdmin(MessageSession):
    """``Admin`` against ``host:port[;host:port]`` name servers (thread-safe, see
    :class:`~mqadmin.remoting.session.BrokerSession`)."""

    capabilities: Capabilities = LIVE_CLUSTER
    #: a live cluster's answers need no caveat (the facade's notes are for stores read directly)
    notes: tuple[str, ...] = ()

    def __enter__(self) -> RemotingAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cluster ----------------------------------------------------------------------------

    def cluster_brokers(self, *, probe: bool = True) -> list[BrokerInfo]:
        """Every broker set with its version, read from GET_BROKER_RUNTIME_INFO.

        A Java broker stamps its version ordinal on every reply header, so even an error reply
        names it (a fresh 4.9.8 broker answers this request with SYSTEM_ERROR for its first
        seconds). A broker that cannot be reached is listed with an empty version, which never
        counts as a server-side-reset broker, and a warning is logged. Its settings come from
        GET_BROKER_CONFIG (None when refused). ``probe=False``: the name server's list only.
        An answer from every broker is kept for the run (the cluster snapshot).
        """
        brokers = self._all_brokers()
        if not probe:  # the name server's view only: no version, no settings
            return [BrokerInfo(b.broker_name, b.select_addr(), b.cluster, "") for b in brokers]
        with self._lock:
            known = self._infos
        if known is not None:
            return list(known)
        calls = [
            (self._read_addr(b), RemotingCommand.request(code))
            for b in brokers
            for code in (RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_CONFIG)
        ]
        answers = self._fan_out(calls, idempotent=True)
        out: list[BrokerInfo] = []
        for i, b in enumerate(brokers):
            addr, (runtime, conf) = calls[2 * i][0], answers[2 * i : 2 * i + 2]
            version = replies.runtime_version(addr, runtime) if isinstance(runtime, RemotingCommand) else ""
            if not version:
                log.warning("cannot learn the version of broker %s: %s", b.broker_name, self._error_of(addr, runtime))
            config = replies.broker_config(conf) if isinstance(conf, RemotingCommand) else None
            if config is None:  # the reset path says so where it matters
                log.debug("cannot read the configuration of broker %s: %s", b.broker_name, self._error_of(addr, conf))
            out.append(BrokerInfo(b.broker_name, addr, b.cluster, version, config))
        if all(isinstance(a, RemotingCommand) for a in answers) and all(i.version for i in out):
            with self._lock:
                if self._snapshot is not None:  # else dropped meanwhile: this look may be stale
                    self._infos = list(out)
        return out

    def list_topics(self) -> list[str]:
        addr, reply = self._namesrv(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return replies.topic_list(addr, reply)

    def list_groups(self, *, subscribed: bool = False) -> list[str]:
        """Groups as the Java tool finds them: one per ``%RETRY%group`` topic. ``subscribed``: the
        subscription groups the brokers hold instead (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), which
        includes a group made by updateSubGroup before any consumer started (no retry topic yet)."""
        if not subscribed:
            return sorted(t[len(RETRY_PREFIX) :] for t in self.list_topics() if t.startswith(RETRY_PREFIX))
        brokers = self._all_brokers()
        calls = [
            (self._read_addr(b), RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)) for b in brokers
        ]
        found: set[str] = set()
        for (addr, _), reply in zip(calls, self._fan_out(calls, idempotent=True), strict=True):
            found |= replies.subscription_group_names(addr, self._checked(addr, reply))
        return sorted(found)

    # -- queue offsets ----------------------------------------------------------------------

    def _queue_call(self, mq: MessageQueue, request: RemotingCommand, field: str) -> int:
        addr = self._broker_addr(mq.broker_name)
        reply = self._broker_call(addr, request, idempotent=True)
        return replies.ext_int(addr, reply, field)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._queue_call(mq, QueueHeader(topic=mq.topic, queueId=mq.queue_id).request(), "offset")

    def max_offset(self, mq: MessageQueue) -> int:
        # 5.x: committed=true asks for what is replicated, as the Java admin does; 4.x ignores it.
        return self._queue_call(mq, _max_offset_request(mq), "offset")

    def search_offset(self, mq: MessageQueue, ts_ms: int) -> int:
        header = SearchOffsetHeader(topic=mq.topic, queueId=mq.queue_id, timestamp=ts_ms)
        return self._queue_call(mq, header.request(), "offset")

    def earliest_store_time(self, mq: MessageQueue) -> int:
        header = QueueHeader(topic=mq.topic, queueId=mq.queue_id)
        return self._queue_call(mq, header.request(RequestCode.GET_EARLIEST_MSG_STORETIME), "timestamp")

    def queue_stats(self, queues: Sequence[MessageQueue]) -> dict[MessageQueue, QueueStats]:
        """Bounds of many queues: one GET_TOPIC_STATS_INFO per topic and broker, sent together.

        A broker that refuses it (ACL, an old or foreign server) or leaves a queue out is asked
        per queue instead (GET_MIN_OFFSET + GET_MAX_OFFSET, pipelined), as before.
        """
        by_place: dict[tuple[str, str], list[MessageQueue]] = {}
        for mq in queues:
            by_place.setdefault((mq.topic, mq.broker_name), []).append(mq)
        places = list(by_place)
        addrs = {name: self._broker_addr(name) for name in {b for _, b in places}}
        calls = [(addrs[broker], TopicHeader(topic=topic).request()) for topic, broker in places]
        out: dict[MessageQueue, QueueStats] = {}
        missing: list[MessageQueue] = []
        for place, (addr, _), reply in zip(places, calls, self._fan_out(calls, idempotent=True), strict=True):
            try:
                table = replies.topic_stats(addr, self._checked(addr, reply))
            except errors.MqadminError as exc:
                log.info("%s: no topic stats for %s (%s); asking per queue", addr, place[0], exc)
                table = {}
            for mq in by_place[place]:
                found = table.get(mq)
                if found is None:
                    missing.append(mq)
                else:
                    out[mq] = found
        if missing:
            out.update(self._queue_bounds(missing))
        return {mq: out[mq] for mq in queues}

    def _queue_bounds(self, queues: Sequence[MessageQueue]) -> dict[MessageQueue, QueueStats]:
        """GET_MIN_OFFSET and GET_MAX_OFFSET of every queue, all sent before any is awaited."""
        calls = []
        for mq in queues:
            addr = self._broker_addr(mq.broker_name)
            calls.append((addr, QueueHeader(topic=mq.topic, queueId=mq.queue_id).request()))
            calls.append((addr, _max_offset_request(mq)))
        values: list[int] = []
        for (addr, _), reply in zip(calls, self._fan_out(calls, idempotent=True), strict=True):
            values.append(replies.ext_int(addr, self._checked(addr, reply), "offset"))
        return {mq: QueueStats(values[2 * i], values[2 * i + 1]) for i, mq in enumerate(queues)}

    # -- consumer offsets -------------------------------------------------------------------

    def consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        """The committed offset, or None when the broker has none (never "0 if not found")."""
        addr = self._broker_addr(mq.broker_name)
        header = QueryConsumerOffsetHeader(
            consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, setZeroIfNotFound=False
        )
        try:
            reply = self._broker_call(addr, header.request(), idempotent=True)
        except errors.QueryNotFound:
            return None
        return replies.ext_int(addr, reply, "offset")

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        addr = self._broker_addr(mq.broker_name, write=True)
        header = UpdateConsumerOffsetHeader(
            consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, commitOffset=offset
        )
        reply = self._broker_call(addr, header.request(), idempotent=False)
        if reply.remark:  # 5.x: "Offset has been previously reset" means the update was ignored
            log.warning("%s accepted the offset update of %s for %s with a remark: %s", addr, group, mq, reply.remark)

    # -- group state ------------------------------------------------------------------------

    def consume_stats(self, group: str, topic: str | None = None, *, partial: bool = False) -> ConsumeStats:
        brokers = [b for b in self._group_brokers(group, topic) if b.addrs]
        request = ConsumeStatsHeader(consumerGroup=group, topic=topic).request()
        calls = [(self._read_addr(b), request) for b in brokers]
        answers = self._fan_out(calls, idempotent=True, timeout=self.timeout * CONSUME_STATS_TIMEOUT_FACTOR)
        missing = _unreachable(brokers, answers) if partial else {}
        if missing and len(missing) < len(brokers):  # when none answers, the first error is raised below
            keep = [i for i, b in enumerate(brokers) if b.broker_name not in missing]
            calls, answers = [calls[i] for i in keep], [answers[i] for i in keep]
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for (addr, _), reply in zip(calls, answers, strict=True):
            part_table, part_tps = replies.consume_stats(addr, self._checked(addr, reply))
            table.update(part_table)
            tps += part_tps
        return ConsumeStats(in_queue_order(table), tps, missing)

    def consume_stats_all(
        self, groups: Sequence[str], *, partial: bool = False
    ) -> dict[str, ConsumeStats | errors.MqadminError]:
        """Every group's consume stats from one GET_BROKER_CONSUME_STATS per broker.

        A broker answers for each of its subscription groups what GET_CONSUME_STATS would, but
        without pull offsets (so nothing shows in flight). A broker that refuses it (ACL: it
        needs cluster-wide read rights; a server without it) is asked group by group instead,
        as ``consume_stats`` does; a group whose per-group call fails gets that error as its
        value. A broker that cannot be reached is not asked again per group (that would wait out
        a timeout per group): with ``partial`` it is named in every group's ``missing_brokers``,
        else every group gets its error.
        """
        wanted = list(dict.fromkeys(groups))
        tables: _Tables = {g: {} for g in wanted}
        tps = dict.fromkeys(wanted, 0.0)
        brokers = [b for b in self._all_brokers() if b.addrs]
        request = BrokerConsumeStatsHeader(isOrder=False).request()
        calls = [(self._read_addr(b), request) for b in brokers]
        answers = self._fan_out(calls, idempotent=True, timeout=self.timeout * BROKER_CONSUME_STATS_TIMEOUT_FACTOR)
        unreachable = _unreachable(brokers, answers)
        if len(unreachable) == len(brokers) and brokers:
            first = next(a for a in answers if isinstance(a, errors.ConnectError))
            return dict.fromkeys(wanted, first)
        refused: set[str] = set()
        for b, (addr, _), reply in zip(brokers, calls, answers, strict=True):
            if b.broker_name in unreachable:
                continue
            try:
                parsed = replies.broker_consume_stats(addr, self._checked(addr, reply))
            except errors.MqadminError as exc:
                log.info("%s: no broker consume stats (%s); asking group by group", addr, exc)
                refused.add(b.broker_name)
                continue
            for group, (table, group_tps) in parsed.items():
                if group in tables:
                    tables[group].update(table)
                    tps[group] += group_tps
        missing = {g: dict(unreachable) for g in wanted}
        failed: dict[str, errors.MqadminError] = {}
        if refused:
            failed = self._consume_stats_per_group(wanted, refused, tables, tps, missing if partial else None)
        if unreachable and not partial:
            cause = next(a for a in answers if isinstance(a, errors.ConnectError))
            failed = {g: failed.get(g) or cause for g in wanted}
        out: dict[str, ConsumeStats | errors.MqadminError] = {}
        seen: dict[tuple[int, ...], bool] = {}  # the tables keep their queues alive
        for g in wanted:
            stats = ConsumeStats(in_queue_order(tables[g], seen), tps[g], missing[g] if partial else {})
            out[g] = failed.get(g) or stats
        return out

    def _consume_stats_per_group(
        self,
        groups: Sequence[str],
        refused: set[str],
        tables: _Tables,
        tps: dict[str, float],
        missing: dict[str, dict[str, str]] | None,
    ) -> dict[str, errors.MqadminError]:
        """GET_CONSUME_STATS of each group on the refused brokers that ``consume_stats`` would ask;
        with ``missing`` (a partial answer), a broker that cannot be reached is named there."""
        failed: dict[str, errors.MqadminError] = {}
        owners: list[tuple[str, str]] = []
        calls: list[tuple[str, RemotingCommand]] = []
        for group in groups:
            try:
                brokers = self._group_brokers(group, None)
            except errors.MqadminError as exc:
                failed[group] = exc
                continue
            request = ConsumeStatsHeader(consumerGroup=group).request()
            for b in brokers:
                if b.broker_name in refused and b.addrs:
                    owners.append((group, b.broker_name))
                    calls.append((self._read_addr(b), request))
        answers = self._fan_out(calls, idempotent=True, timeout=self.timeout * CONSUME_STATS_TIMEOUT_FACTOR)
        for (group, name), (addr, _), reply in zip(owners, calls, answers, strict=True):
            if missing is not None and isinstance(reply, errors.ConnectError):
                missing[group][name] = str(reply)
                continue
            try:
                part, part_tps = replies.consume_stats(addr, self._checked(addr, reply))
            except errors.MqadminError as exc:
                failed.setdefault(group, exc)
                continue
            tables[group].update(part)
            tps[group] += part_tps
        return failed

    # -- connections ------------------------------------------------------------------------

    def consumer_connections(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """Who is online, merged over the group's brokers (or asked of ``broker_addr`` alone, as the
        Java tool's ``-b``); ConsumerNotOnline when nobody is."""
        request = ConsumerGroupHeader(consumerGroup=group).request()
        addrs = (
            [broker_addr] if broker_addr else [self._read_addr(b) for b in self._group_brokers(group, None) if b.addrs]
        )
        calls = [(addr, request) for addr in addrs]
        return self._connections_of(group, calls, self._fan_out(calls, idempotent=True))

    def _connections_of(
        self, group: str, calls: Sequence[tuple[str, RemotingCommand]], answers: Replies
    ) -> ConsumerConnection:
        """Merge one group's GET_CONSUMER_CONNECTION_LIST replies; ConsumerNotOnline when nobody is."""
        bodies: list[ConsumerConnectionBody] = []
        first_error: errors.MqadminError | None = None
        not_online: tuple[str, RemotingCommand] | None = None
        for (addr, _), reply in zip(calls, answers, strict=True):
            if isinstance(reply, RemotingCommand):
                if reply.code == ResponseCode.SUCCESS:
                    bodies.append(replies.consumer_connection(addr, reply))
                    continue
                # "not online" on one broker is normal when others know the clients; its error
                # is built only if it is the answer (with thousands of offline groups, it mostly is not)
                if reply.code == ResponseCode.CONSUMER_NOT_ONLINE:
                    not_online = (addr, reply)
                    continue
            if first_error is None:
                first_error = self._error_of(addr, reply)
        if not bodies:
            if first_error is None and not_online is not None:
                first_error = self._error_of(*not_online)
            raise first_error or errors.ConsumerNotOnline(f"the consumer group[{group}] not online")
        return replies.merge_connections(bodies)

    def consumer_connections_all(self, groups: Sequence[str]) -> dict[str, ConsumerConnection | errors.MqadminError]:
        """``consumer_connections`` of many groups: every request sent before any is awaited.

        RocketMQ has no request for all groups' connections, so this is one request per group
        and broker; it asks every broker of the cluster (one name-server call, not one route
        per group): a broker the group never reached answers "not online", which merging
        tolerates exactly as for a broker of the group's route.
        """
        wanted = list(dict.fromkeys(groups))
        addrs = [self._read_addr(b) for b in self._all_brokers() if b.addrs]
        calls = [
            (addr, request)
            for request in (ConsumerGroupHeader(consumerGroup=g).request() for g in wanted)
            for addr in addrs  # one request per group, sent to each broker (the client copies it)
        ]
        answers = self._fan_out(calls, idempotent=True)
        out: dict[str, ConsumerConnection | errors.MqadminError] = {}
        width = len(addrs)
        for i, group in enumerate(wanted):
            part = slice(i * width, (i + 1) * width)
            try:
                out[group] = self._connections_of(group, calls[part], answers[part])
            except errors.MqadminError as exc:
                out[group] = exc
        return out

    def lite_group_info(
        self, group: str, lite_topic: str | None, top_k: int
    ) -> dict[str, LiteGroupInfo | errors.MqadminError]:
        """GET_LITE_GROUP_INFO of every broker, sent together: broker name -> its answer or error."""
        header = LiteGroupInfoHeader(group=group, liteTopic=lite_topic or "", topK=top_k)
        brokers = self._all_brokers()
        calls = [(self._read_addr(b), header.request()) for b in brokers]
        out: dict[str, LiteGroupInfo | errors.MqadminError] = {}
        for b, (addr, _), reply in zip(brokers, calls, self._fan_out(calls, idempotent=True), strict=True):
            try:
                out[b.broker_name] = lite.lite_group_info(addr, self._checked(addr, reply))
            except errors.MqadminError as exc:
                out[b.broker_name] = exc
        return out

    def consumer_running_queues(self, group: str, client_id: str) -> frozenset[MessageQueue]:
        """The queues a client of ``group`` holds now: the mqTable of its ConsumerRunningInfo,
        which the broker asks the client for over the client's own connection. Asked of the
        first broker of the group's route, as the Java tool does (tools: DefaultMQAdminExtImpl.java,
        getConsumerRunningInfo)."""
        brokers = [b for b in self._group_brokers(group, None) if b.addrs]
        if not brokers:
            raise errors.ConsumerNotOnline(f"the consumer group[{group}] not online")
        addr = self._read_addr(brokers[0])
        request = ConsumerRunningInfoHeader(consumerGroup=group, clientId=client_id, jstackEnable=False).request()
        return replies.running_queues(addr, self._broker_call(addr, request, idempotent=True))

    # -- reset ------------------------------------------------------------------------------

    def reset_offset_by_time(
        self,
        topic: str,
        group: str,
        ts_ms: int,
        force: bool = True,
        *,
        broker_name: str | None = None,
        queue_id: int = -1,
        offset: int = -1,
        cplus: bool = False,
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on each broker of the topic (or the one named).

        ``cplus`` sends the request as a C++ client would, so a client-push broker sends the
        array body C++ consumers parse (the Java tool's ``-c``).

        4.x and 5.0-5.1 brokers push the new offsets to online consumers and answer
        CONSUMER_NOT_ONLINE (raised as ``errors.ConsumerNotOnline``) when there are none; 5.2+
        brokers reset on the server side. ``queueId``/``offset`` are always sent: 5.x brokers
        honour them, 4.x ignores them. Returns the merged table the brokers answered.
        """
        if broker_name is not None:
            addrs = [self._broker_addr(broker_name, write=True)]
        else:
            addrs = [self._master_addr(b) for b in self.topic_route(topic).brokers if b.addrs]
        header = ResetOffsetHeader(
            topic=topic, group=group, timestamp=ts_ms, isForce=force, queueId=queue_id, offset=offset
        )
        request = header.request(language=LanguageCode.CPP.name if cplus else DEFAULT_LANGUAGE)
        calls = [(addr, request) for addr in addrs]
        table: dict[MessageQueue, int] = {}
        for (addr, _), reply in zip(calls, self._fan_out(calls, idempotent=False), strict=True):
            table.update(replies.reset_table(addr, self._checked(addr, reply)))
        return in_queue_order(table)


def _max_offset_request(mq: MessageQueue) -> RemotingCommand:
    """GET_MAX_OFFSET with committed=true: what is replicated, as the Java admin asks (5.x; 4.x ignores it)."""
    return MaxOffsetHeader(topic=mq.topic, queueId=mq.queue_id, committed=True).request()


def _unreachable(brokers: Sequence[BrokerData], answers: Replies) -> dict[str, str]:
    """The brokers of a fan-out that could not be reached (name -> why), in the calls' order."""
    return {
        b.broker_name: str(reply)
        for b, reply in zip(brokers, answers, strict=True)
        if isinstance(reply, errors.ConnectError)
    }
