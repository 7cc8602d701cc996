"""The broker role: one broker's state on the wire, and the checks its handlers share.

The handlers themselves live by area (``messages``, ``offsets``, ``clients``, ``admin``) and are
bound to request codes in ``handlers``.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from mqadmin import errors, names
from mqadmin.mock import lite
from mqadmin.mock.model import MockBroker
from mqadmin.mock.server.role import Role, bad
from mqadmin.mock.store import StoreWriteFailed
from mqadmin.model import MessageQueue
from mqadmin.protocol import acl as acl_sign
from mqadmin.protocol import versions
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode
from mqadmin.protocol.headers import QueueHeader
from mqadmin.timeparse import now_ms

if TYPE_CHECKING:
    from mqadmin.mock.server.connection import Connection
    from mqadmin.mock.server.core import MockServer

log = logging.getLogger("mqadmin.mock.server")

#: read/write queue numbers UPDATE_AND_CREATE_TOPIC accepts. A real broker has no cap (only
#: auto-created topics are capped, at defaultTopicQueueNums); the mock caps them so that one
#: request cannot make every later stats or route request slow (an mqadmin limit).
MAX_QUEUE_NUMS: Final = 1024


class BrokerRole(Role):
    """One broker of the cluster: every broker request a client or admin tool sends."""

    def __init__(self, server: MockServer, broker: MockBroker, table: Mapping[int, BrokerHandler]) -> None:
        super().__init__(server)
        self.broker = broker
        self.name = broker.name
        #: (group, queue) -> (client id, monotonic time of the last lock)
        self.locks: dict[tuple[str, MessageQueue], tuple[str, float]] = {}
        #: (group, client id) -> topic -> SubscriptionData as the heartbeat described it
        self.subscriptions: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        #: (timestamp, ForC body) of the reset being handled, for the pushes it makes
        self.reset_request: tuple[int, bool] = (-1, False)
        self.handlers = {code: partial(handler, self) for code, handler in table.items()}

    @property
    def lock(self) -> threading.RLock:
        return self.server.lock

    def check_access(self, req: RemotingCommand) -> str | None:
        acl = self.server.acl
        if acl is None:
            return None
        access_key, secret_key = acl
        sent = req.ext_fields.get(acl_sign.ACCESS_KEY)
        major = self.server.v[0] if self.server.v else 5
        # the refusals as a 4.9 PlainAccessValidator and a 5.3 DefaultAuthenticationHandler word them
        if not sent:
            return "No accessKey is configured" if major < 5 else "username cannot be null."
        if sent != access_key:
            return f"No acl config for {sent}" if major < 5 else f"User:{sent} is not found."
        exclude = acl_sign.server_unsigned_fields(req.version, server_major=major)
        if not acl_sign.verify(req.ext_fields, req.body, secret_key, exclude=exclude):
            return f"Check signature failed for accessKey={sent}" if major < 5 else "check signature failed."
        return None

    # -- checks ------------------------------------------------------------------------------

    def check_topic(self, topic: str, *, queue: bool = False) -> None:
        """TopicValidator.validateTopic as the send and create-topic paths apply it
        (AbstractSendMessageProcessor.msgCheck, AdminBrokerProcessor.updateAndCreateTopic):
        SYSTEM_ERROR up to 5.3.1, INVALID_PARAMETER from 5.3.2. ``queue``: the topic of a
        queue read or commit, which with lite topics on may also be a lite topic's LMQ."""
        problem = lite.queue_name_problem(topic, queue and self.broker.lite_on)
        if problem:
            invalid = versions.invalid_parameter_for_names(self.server.v)
            code = ResponseCode.INVALID_PARAMETER if invalid else ResponseCode.SYSTEM_ERROR
            raise bad(code, problem)

    def check_group(self, group: str, remark: str) -> None:
        """A group name that fails TopicValidator.validateGroup is a group that cannot exist:
        SubscriptionGroupManager.findSubscriptionGroupConfig will not create it, so the broker
        answers SUBSCRIPTION_GROUP_NOT_EXIST with the handler's own ``remark``."""
        if names.group_problem(group):
            raise bad(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, self.server.faq(remark))

    def check_queue_id(self, topic: str, queue_id: int) -> None:
        if not 0 <= queue_id < MAX_QUEUE_NUMS:
            code = ResponseCode.INVALID_PARAMETER if self.server.v5 else ResponseCode.SYSTEM_ERROR
            raise bad(code, f"queueId[{queue_id}] is illegal, topic:[{topic}]")

    def existing_topic_config(self, topic: str) -> dict[str, Any]:
        cfg = self.broker.queue_config(topic)
        if cfg is None:
            raise bad(ResponseCode.TOPIC_NOT_EXIST, self.server.faq(f"topic[{topic}] not exist, apply first please!"))
        return cfg

    def check_queue(self, topic: str, queue_id: int) -> None:
        """The queue of an offset request. Brokers do not check these names; a name that could
        not be a folder is refused here instead of reaching the store (an mqadmin check)."""
        self.check_topic(topic, queue=True)
        self.check_queue_id(topic, queue_id)

    def check_queue_of(self, header: QueueHeader) -> tuple[str, int]:
        """``check_queue`` of a one-queue request; its (topic, queueId)."""
        self.check_queue(header.topic, header.queueId)
        return header.topic, header.queueId

    # -- the store ---------------------------------------------------------------------------

    def store_unavailable(self, exc: StoreWriteFailed) -> errors.BrokerError:
        """What a put that the store could not write answers: SERVICE_NOT_AVAILABLE with the
        disk-full remark (SendMessageProcessor.handlePutMessageResult); the store has rolled
        back to its last whole record, so the next send may succeed."""
        log.warning("broker %s could not store a message: %s", self.name, exc)
        try:
            usage = shutil.disk_usage(self.broker.store.root)
            used = 100.0 * (usage.total - usage.free) / usage.total if usage.total else 100.0
        except OSError:
            used = 100.0
        ratios = f"CL: {used:5.2f} CQ: {used:5.2f} INDEX: {used:5.2f}"
        return bad(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full [{ratios}], messages are put to the slave, message store has been shut down, etc.",
        )

    def persist_offsets(self, version: int) -> None:
        """Offsets on disk before the acknowledgement (outside the server lock: concurrent
        commits share one write). A failed write is the request's failure, not a silent loss."""
        try:
            self.broker.persist_offsets(version)
        except (OSError, errors.MqadminError) as exc:
            log.error("cannot persist consumer offsets of %s: %s", self.name, exc)
            raise bad(ResponseCode.SYSTEM_ERROR, f"cannot persist consumer offsets: {exc}") from None

    def persist_configs(self) -> None:
        """Topics and groups on disk before the acknowledgement of a creation; a failed write
        (a full disk) is the request's failure, and the periodic flush retries it."""
        try:
            self.broker.persist_configs()
        except (OSError, errors.MqadminError) as exc:
            log.error("cannot persist the topics and groups of %s: %s", self.name, exc)
            raise bad(ResponseCode.SYSTEM_ERROR, f"cannot persist the topic and group configs: {exc}") from None


BrokerHandler = Callable[[BrokerRole, "Connection", RemotingCommand], "RemotingCommand | None"]


def data_version() -> dict[str, int]:
    """A DataVersion as the broker's config managers write it."""
    return {"counter": 1, "stateVersion": 0, "timestamp": now_ms()}
