"""A consumer that is only online: what ``mockBroker --consumer GROUP`` keeps connected, so the
commands that need a client (consumerConnection, consumerProgress -s true, a reset with the group
online) can be tried on the demo.

It heartbeats to every broker as a push consumer of the topics the group has offsets on (the
Java client heartbeats every 30 s; the broker drops a client silent for 120 s), answers the
broker's GET_CONSUMER_RUNNING_INFO with every queue of those topics as held, and applies a reset
the broker pushes (RESET_CONSUMER_CLIENT_OFFSET, 4.x) by committing the offsets it was given, as
the Java client does. It consumes nothing.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from mqadmin import errors
from mqadmin.model import MessageQueue
from mqadmin.protocol.bodies import ConsumerRunningInfoBody, ResetOffsetBody
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.remoting.backend import RemotingAdmin
from mqadmin.remoting.client import RemotingClient

HEARTBEAT_S = 20.0


class SimulatedConsumer:
    def __init__(
        self,
        namesrv: str,
        group: str,
        *,
        client_id: str = "127.0.0.1@simulated",
        timeout: float = 5.0,
        access_key: str | None = None,
        secret_key: str | None = None,
    ):
        self.group, self.client_id = group, client_id
        self.admin = RemotingAdmin(namesrv, timeout=timeout, access_key=access_key, secret_key=secret_key)
        self.client = RemotingClient(namesrv, timeout=timeout, access_key=access_key, secret_key=secret_key)
        try:
            offsets = self.admin.consume_stats(group).offsets
        except errors.TopicNotExist:
            offsets = {}
        topics = sorted({mq.topic for mq in offsets if not mq.topic.startswith(RETRY_PREFIX)})
        if not topics:
            self.close()
            raise errors.UsageError(f"--consumer {group}: the group has no offsets on any topic of the store")
        self.topics = topics
        self.queues = [mq for t in topics for mq in self.admin.topic_route(t).message_queues()]
        self._brokers = sorted({self.admin._broker_addr(mq.broker_name) for mq in self.queues})
        self._stop = threading.Event()
        self.client.register_handler(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self.client.register_handler(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset)
        self._heartbeat()
        self._thread = threading.Thread(target=self._loop, name=f"consumer-{group}", daemon=True)
        self._thread.start()

    def _heartbeat(self) -> None:
        subscriptions = [
            {
                "classFilterMode": False,
                "codeSet": [],
                "expressionType": "TAG",
                "subString": "*",
                "subVersion": int(time.time() * 1000),
                "tagsSet": [],
                "topic": topic,
            }
            for topic in [*self.topics, RETRY_PREFIX + self.group]
        ]
        consumer = {
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY",
            "groupName": self.group,
            "messageModel": "CLUSTERING",
            "subscriptionDataSet": subscriptions,
            "unitMode": False,
        }
        body = json.dumps({"clientID": self.client_id, "consumerDataSet": [consumer], "producerDataSet": []})
        for addr in self._brokers:
            self.client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body.encode()))

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._heartbeat()
            except errors.MqadminError:
                pass  # the broker is going away or busy: the next beat tries again

    def _on_running_info(self, cmd: RemotingCommand) -> RemotingCommand:
        table: dict[MessageQueue, dict[str, Any]] = {}
        for mq in self.queues:
            try:
                offset = self.admin.consumer_offset(self.group, mq) or 0
            except errors.MqadminError:
                offset = 0
            table[mq] = {"cachedMsgCount": 0, "commitOffset": offset, "droped": False, "locked": False}
        info = ConsumerRunningInfoBody(
            table,
            properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "0"},
            subscription_set=[{"subString": "*", "topic": t} for t in self.topics],
        )
        return cmd.reply(body=info.encode())

    def _on_reset(self, cmd: RemotingCommand) -> None:
        for mq, offset in ResetOffsetBody.decode(cmd.body).offset_table.items():
            try:
                self.admin.update_consumer_offset(self.group, mq, int(offset))
            except errors.MqadminError:
                pass  # as a client whose commit fails: the reset's read-back says so
        return None

    def close(self) -> None:
        self._stop.set()
        self.client.close()
        self.admin.close()
