"""Messages over the remoting protocol: pull (as the Java tool reads), send, and send back."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Final

from mqadmin import errors
from mqadmin.message import MessageDecodeError, format_properties, iter_messages, new_uniq_key
from mqadmin.model import Message, MessageQueue, PullResult, RawPull, SendResult
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode
from mqadmin.protocol.constants import (
    DEFAULT_MAX_RECONSUME_TIMES,
    DEFAULT_TOPIC,
    DEFAULT_TOPIC_QUEUE_NUMS,
    EXPRESSION_TAG,
    PERM_WRITE,
    PULL_SUBSCRIPTION,
    SUBSCRIBE_ALL,
    TOOLS_CONSUMER_GROUP,
)
from mqadmin.protocol.headers import ConsumerSendMsgBackHeader, PullMessageHeader, SendMessageHeader
from mqadmin.remoting import replies
from mqadmin.remoting.client import PendingReply
from mqadmin.remoting.replies import MalformedReply
from mqadmin.remoting.session import BrokerSession

__all__ = ["MessageSession", "PendingPull"]

log = logging.getLogger("mqadmin.remoting")

#: the producer group our sends are attributed to (only statistics use it)
TOOLS_PRODUCER_GROUP: Final = "MQADMIN_TOOLS_PRODUCER"
#: how long a topic's writable queues are reused for round-robin sends (the Java client's route refresh)
SEND_ROUTE_TTL_S: Final = 30.0


#: what a broker's request dispatcher answers (SYSTEM_BUSY) when a processor rejects the request
_REJECTED = "[REJECTREQUEST]"


def _pull_refusal(reply: RemotingCommand) -> str:
    """The remark of a failed pull, said plainly where the broker's is misleading: a 5.x slave
    rejects every pull unless ``slaveReadEnable=true`` (PullMessageProcessor.rejectRequest),
    answering "system busy, start flow control" although it is idle (4.x slaves serve them)."""
    remark = reply.remark or ""
    if reply.code == ResponseCode.SYSTEM_BUSY and remark.startswith(_REJECTED):
        return (
            f"{_REJECTED} this is a slave that serves no messages (5.x slaves need slaveReadEnable=true); "
            "messages can be read again once its master is back"
        )
    return remark


class MessageSession(BrokerSession):
    """The message calls of the admin facade, over a :class:`BrokerSession`."""

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PullResult:
        """Read messages as the Java tool does: group TOOLS_CONSUMER (or ``group``), no commit,
        no long poll.

        ``status`` is the broker's store status from the reply's remark (FOUND, NO_MATCHED_MESSAGE,
        OFFSET_TOO_SMALL, OFFSET_OVERFLOW_ONE, NO_MESSAGE_IN_QUEUE...), as the mock reports it;
        a reply without one gets the Java client's PullStatus name for its code.
        """
        raw = self.pull_raw(mq, offset, max_nums, group=group).result()
        messages: list[Message] = []
        for body in raw.records:
            try:
                messages += iter_messages(bytes(body))
            except MessageDecodeError as exc:
                addr = self._broker_addr(mq.broker_name)
                raise MalformedReply(f"cannot decode the messages pulled from {addr} ({mq}): {exc}", addr) from None
        for m in messages:
            m.broker_name = mq.broker_name
        return PullResult(raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset, messages)

    def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, group: str | None = None) -> PendingPull:
        """``pull`` sent without waiting, its body left encoded: a replay keeps several in flight
        over the one pipelined connection and decodes each body in bulk."""
        addr = self._broker_addr(mq.broker_name)
        return PendingPull(self, addr, self._client.submit(addr, _pull_request(mq, offset, max_nums, group)))

    def pull_raw_many(
        self, mq: MessageQueue, ranges: Sequence[tuple[int, int]], *, group: str | None = None
    ) -> list[PendingPull]:
        """``pull_raw`` of each (offset, max_nums) of ``ranges``, written to the broker at once:
        one system call for a whole window of pulls instead of one each."""
        addr = self._broker_addr(mq.broker_name)
        requests = [_pull_request(mq, offset, n, group) for offset, n in ranges]
        return [PendingPull(self, addr, p) for p in self._client.submit_many(addr, requests)]

    def _pull_result(self, addr: str, pending: PendingReply) -> RawPull:
        try:
            reply = self._client.wait(pending, idempotent=True)
        except errors.ConnectError as exc:
            self._lost(addr, exc)
            raise
        status = replies.pull_status(reply)
        if status is None:
            raise errors.BrokerError.for_code(reply.code, _pull_refusal(reply), addr)
        records: list[bytes | memoryview] = []
        if reply.code == ResponseCode.SUCCESS and reply.body:
            records.append(reply.body)
        return RawPull(
            status,
            replies.ext_int(addr, reply, "nextBeginOffset"),
            replies.ext_int(addr, reply, "minOffset"),
            replies.ext_int(addr, reply, "maxOffset"),
            records,
        )

    def _writable_queues(self, topic: str) -> list[MessageQueue]:
        now = time.monotonic()
        with self._lock:
            cached = self._send_queues.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        route = self.topic_route(topic)
        queues = [
            MessageQueue(topic, q.broker_name, i)
            for q in route.queues
            if q.perm & PERM_WRITE and route.broker(q.broker_name) is not None
            for i in range(q.write_queue_nums)
        ]
        if not queues:
            raise errors.NoPermission(f"topic {topic} has no writable queue", self.address)
        with self._lock:
            self._send_queues[topic] = (now + SEND_ROUTE_TTL_S, queues)
        return queues

    def send(self, topic: str, message: Message, queue: MessageQueue | None = None) -> SendResult:
        """SEND_MESSAGE_V2 to ``queue`` or the next writable queue (round-robin over the route).

        The message gets a UNIQ_KEY when it has none, as Java producers do; the caller's
        object is left untouched.
        """
        if queue is None:
            queues = self._writable_queues(topic)
            queue = queues[next(self._round_robin) % len(queues)]
        addr = self._broker_addr(queue.broker_name)
        props = dict(message.properties)
        props.setdefault("UNIQ_KEY", new_uniq_key())
        header = SendMessageHeader(
            producerGroup=TOOLS_PRODUCER_GROUP,
            topic=topic,
            defaultTopic=DEFAULT_TOPIC,
            defaultTopicQueueNums=DEFAULT_TOPIC_QUEUE_NUMS,
            queueId=queue.queue_id,
            sysFlag=0,  # plain body, no transaction
            bornTimestamp=int(time.time() * 1000),
            flag=message.flag,
            properties=format_properties(props),
            reconsumeTimes=0,
            unitMode=False,
            batch=False,
            brokerName=queue.broker_name,
        )
        reply = self._invoke(addr, header.request(body=message.body), idempotent=False)
        self._check(addr, reply, replies.SEND_STORED)
        if reply.code != ResponseCode.SUCCESS:
            log.warning("%s stored the message but answered %s", addr, ResponseCode(reply.code).name)
        msg_id = reply.ext_str("msgId") or ""
        qid = reply.ext_int("queueId", queue.queue_id)
        return SendResult(
            msg_id,
            MessageQueue(topic, queue.broker_name, queue.queue_id if qid is None else qid),
            replies.ext_int(addr, reply, "queueOffset"),
            props["UNIQ_KEY"],
        )

    def send_back(self, group: str, message: Message, delay_level: int = 0) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker copies the stored message to ``%RETRY%group``."""
        if not message.broker_name:
            raise errors.UsageError("send_back needs a message pulled from a broker (broker_name is empty)")
        addr = self._broker_addr(message.broker_name)
        header = ConsumerSendMsgBackHeader(
            offset=message.commitlog_offset,
            group=group,
            delayLevel=delay_level,
            originMsgId=message.uniq_key or message.msg_id,
            originTopic=message.topic,
            unitMode=False,
            maxReconsumeTimes=DEFAULT_MAX_RECONSUME_TIMES,
        )
        self._broker_call(addr, header.request(), idempotent=False)


def _pull_request(mq: MessageQueue, offset: int, max_nums: int, group: str | None) -> RemotingCommand:
    """A PULL_MESSAGE as the Java tool sends it: no commit, no long poll, every tag."""
    header = PullMessageHeader(
        consumerGroup=group or TOOLS_CONSUMER_GROUP,
        topic=mq.topic,
        queueId=mq.queue_id,
        queueOffset=offset,
        maxMsgNums=max_nums,
        sysFlag=PULL_SUBSCRIPTION,
        commitOffset=0,
        suspendTimeoutMillis=0,
        subscription=SUBSCRIBE_ALL,
        subVersion=0,
        expressionType=EXPRESSION_TAG,
    )
    return header.request()


class PendingPull:
    """A PULL_MESSAGE in flight; ``result()`` waits for it as ``pull`` would."""

    def __init__(self, session: MessageSession, addr: str, pending: PendingReply):
        self._session, self._addr, self._pending = session, addr, pending

    def result(self) -> RawPull:
        return self._session._pull_result(self._addr, self._pending)
