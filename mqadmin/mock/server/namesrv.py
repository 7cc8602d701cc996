"""The name server role: routes, cluster info, topic list; the KV store is always empty."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from mqadmin.mock.server.role import DEFAULT_TOPIC_PERM, DEFAULT_TOPIC_QUEUES, RETRY_TOPIC_QUEUES, Role, bad
from mqadmin.model import BrokerData, QueueData, TopicRoute
from mqadmin.protocol.bodies import ClusterInfo, TopicList, TopicRouteData
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import MQVersion, ResponseCode
from mqadmin.protocol.constants import DEFAULT_TOPIC, MASTER_ID, PERM_READ_WRITE, RETRY_PREFIX
from mqadmin.protocol.headers import KvConfigHeader, RouteInfoHeader

if TYPE_CHECKING:
    from mqadmin.mock.server.connection import Connection
    from mqadmin.mock.server.core import MockServer


class NamesrvRole(Role):
    """The name server listener."""

    name = "namesrv"

    def __init__(self, server: MockServer, table: Mapping[int, NamesrvHandler]) -> None:
        super().__init__(server)
        self.answers_unknown = server.v5
        self.handlers = {code: partial(handler, self) for code, handler in table.items()}


NamesrvHandler = Callable[[NamesrvRole, "Connection", RemotingCommand], RemotingCommand]


def route(role: NamesrvRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = RouteInfoHeader.parse(req)
    topic = header.topic
    with role.server.lock:
        found = role.server.cluster.topic_route(topic) or _implicit_route(role, topic)
    if found is None:
        remark = f"No topic route info in name server for the topic: {topic}"
        raise bad(ResponseCode.TOPIC_NOT_EXIST, role.server.faq(remark))
    # Standard JSON from 4.9.4 on, when the client is new enough or sets acceptStandardJsonOnly
    # (namesrv: DefaultRequestProcessor.java, getRouteInfoByTopic).
    standard = role.server.version_ordinal >= MQVersion.V4_9_4 and (
        req.version >= MQVersion.V4_9_4 or bool(header.acceptStandardJsonOnly)
    )
    return role.reply(req, body=_route_body(found, standard=standard, v5=role.server.v5))


def _implicit_route(role: NamesrvRole, topic: str) -> TopicRoute | None:
    """Routes a real cluster has before anyone asks: TBW102, and retry topics.

    Brokers create ``%RETRY%group`` on the first heartbeat (broker: ClientManageProcessor.java),
    but the C++ and ali-ons consumers subscribe to it and ask for its route before they send
    one; answering with every broker lets them start without a 30 s wait.
    """
    if topic == DEFAULT_TOPIC:
        queues, perm = DEFAULT_TOPIC_QUEUES, DEFAULT_TOPIC_PERM
    elif topic.startswith(RETRY_PREFIX) and len(topic) > len(RETRY_PREFIX):
        queues, perm = RETRY_TOPIC_QUEUES, PERM_READ_WRITE
    else:
        return None
    cluster = role.server.cluster
    brokers = tuple(BrokerData(b.name, b.cluster, {MASTER_ID: b.addr}) for b in cluster.brokers.values())
    datas = tuple(QueueData(b.name, queues, queues, perm, 0) for b in cluster.brokers.values())
    return TopicRoute(topic, brokers, datas)


def cluster_info(role: NamesrvRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    cluster = role.server.cluster
    table = {b.name: BrokerData(b.name, b.cluster, {MASTER_ID: b.addr}) for b in cluster.brokers.values()}
    names: dict[str, list[str]] = {}
    for b in cluster.brokers.values():
        names.setdefault(b.cluster, []).append(b.name)
    info = ClusterInfo(table, {c: sorted(n) for c, n in names.items()}, acting_master=role.server.v5)
    return role.reply(req, body=info.encode())


def topic_list(role: NamesrvRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    with role.server.lock:
        topics = role.server.cluster.list_topics()
    return role.reply(req, body=TopicList(topics).encode())


def kv_config(role: NamesrvRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    header = KvConfigHeader.parse(req)
    ns, key = header.namespace, header.key
    return role.reply(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")


def kv_list(role: NamesrvRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    ns = KvConfigHeader.parse(req).namespace
    return role.reply(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")


def accept(role: NamesrvRole, conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """Broker (un)registration: the cluster's brokers are fixed, so there is nothing to record."""
    return role.reply(req)


def _route_body(route: TopicRoute, *, standard: bool, v5: bool) -> bytes:
    """TopicRouteData, brokers and queues by name (standard JSON when the client asked for it)."""
    data = TopicRouteData(
        [
            BrokerData(b.broker_name, b.cluster, dict(sorted(b.addrs.items())))
            for b in sorted(route.brokers, key=lambda b: b.broker_name)
        ],
        sorted(route.queues, key=lambda q: q.broker_name),
        acting_master=v5,
    )
    return data.encode(standard=standard)
