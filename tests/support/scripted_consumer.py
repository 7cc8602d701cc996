"""A consumer a test drives over mqadmin's own remoting client, for resets with clients online.

``kind="push"`` behaves as a push consumer: it heartbeats as CONSUME_PASSIVELY and, when a broker
pushes a reset (RESET_CONSUMER_CLIENT_OFFSET), commits the reset offsets after ``apply_delay_s``
(the Java client pauses before it applies; a dict gives a delay per broker), holds them ``hold_s``, then "re-consumes" to the end
of each queue and commits that, as a fast consumer does. ``kind="pull"`` behaves as a
DefaultLitePullConsumer: it heartbeats as CONSUME_ACTIVELY, ignores pushed resets and commits the
offsets it keeps itself every ``commit_interval_s``, which undoes a reset written to the broker.
``kind="pop"`` only heartbeats as CONSUME_POP, unless ``acks_every_s`` is set: then every so often it
pops the next message of each queue from where the broker holds the group (as the group: it takes a
pending server-side reset) and acks it, moving the committed offset on, until the queue's end.
Asked for its running info (GET_CONSUMER_RUNNING_INFO, forwarded by the broker) it answers with a
ConsumerRunningInfo whose mqTable holds ``owned`` (default: every queue of the topic), or not at
all with ``answers_running_info=False`` (a hung client).
Every thread is a daemon and stops on ``close()``; every wait is bounded.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from mqadmin import fastjson
from mqadmin.model import MessageQueue
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode
from mqadmin.remoting.backend import RemotingAdmin
from mqadmin.remoting.client import RemotingClient

#: ``kind`` -> the consume type its heartbeat declares ("pop": a POP consumer, which only heartbeats here)
CONSUME_TYPES = {"push": "CONSUME_PASSIVELY", "pull": "CONSUME_ACTIVELY", "pop": "CONSUME_POP"}


class ScriptedConsumer:
    def __init__(
        self,
        namesrv: str,
        group: str,
        topic: str,
        *,
        kind: str = "push",
        client_id: str = "127.0.0.1@scripted",
        commit_interval_s: float = 0.5,
        apply_delay_s: float | dict[str, float] = 0.5,
        hold_s: float = 0.3,
        owned: list[MessageQueue] | None = None,
        answers_running_info: bool = True,
        acks_every_s: float | None = None,
    ) -> None:
        self.group, self.topic, self.kind, self.client_id = group, topic, kind, client_id
        self.commit_interval_s, self.apply_delay_s, self.hold_s = commit_interval_s, apply_delay_s, hold_s
        self.admin = RemotingAdmin(namesrv, timeout=5)
        self.client = RemotingClient(namesrv, timeout=5)
        self.queues = self.admin.topic_route(topic).message_queues()
        self.owned = list(self.queues if owned is None else owned)
        self.answers_running_info = answers_running_info
        self.acks_every_s = acks_every_s
        self.running_info_asked = threading.Event()
        #: the offsets this consumer keeps itself (what it commits)
        self.offsets: dict[MessageQueue, int] = {mq: self.admin.consumer_offset(group, mq) or 0 for mq in self.queues}
        self.resets: list[dict[MessageQueue, int]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.client.register_handler(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset)
        self.client.register_handler(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self._brokers = sorted({self.admin._broker_addr(mq.broker_name) for mq in self.queues})
        self._heartbeat()
        self._threads = [threading.Thread(target=self._loop, daemon=True)]
        if acks_every_s is not None:
            self._threads.append(threading.Thread(target=self._ack_loop, daemon=True))
        for t in self._threads:
            t.start()

    def _heartbeat(self) -> None:
        body = {
            "clientID": self.client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "consumeType": CONSUME_TYPES[self.kind],
                    "groupName": self.group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "codeSet": [],
                            "expressionType": "TAG",
                            "subString": "*",
                            "subVersion": int(time.time() * 1000),
                            "tagsSet": [],
                            "topic": self.topic,
                        }
                    ],
                    "unitMode": False,
                }
            ],
            "producerDataSet": [],
        }
        for addr in self._brokers:
            self.client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(body).encode()))

    def _on_reset(self, cmd: RemotingCommand) -> None:
        data: Any = fastjson.loads(cmd.body.decode())
        table = {mq: int(o) for mq, o in fastjson.mq_table(data.get("offsetTable") or {}).items()}
        with self._lock:
            self.resets.append(table)
        if self.kind == "push":
            threading.Thread(target=self._take, args=(table,), daemon=True).start()
        return None

    def _on_running_info(self, cmd: RemotingCommand) -> RemotingCommand | None:
        """ConsumerRunningInfo as the Java client writes it: mqTable keyed by queue objects."""
        self.running_info_asked.set()
        if not self.answers_running_info:
            return None  # no answer at all: the broker's wait runs out
        with self._lock:
            table = {
                mq: {"cachedMsgCount": 0, "commitOffset": self.offsets.get(mq, 0), "droped": False, "locked": False}
                for mq in self.owned
            }
        info = {
            "mqTable": table,
            "properties": {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "0"},
            "statusTable": {},
            "subscriptionSet": [{"subString": "*", "topic": self.topic}],
        }
        return cmd.reply(body=fastjson.dumps(info).encode())

    def _take(self, table: dict[MessageQueue, int]) -> None:
        delay = self.apply_delay_s
        if isinstance(delay, dict):  # per broker: each broker pushes its own queues
            delay = max(delay.get(mq.broker_name, 0.5) for mq in table) if table else 0.0
        if self._stop.wait(delay):
            return
        try:
            for mq, offset in table.items():
                self.admin.update_consumer_offset(self.group, mq, offset)
            if self._stop.wait(self.hold_s):
                return
            for mq in table:  # re-consumed everything there is
                self.admin.update_consumer_offset(self.group, mq, self.admin.max_offset(mq))
        except Exception:  # closed under it: the test is over
            if not self._stop.is_set():
                raise

    def _loop(self) -> None:
        while not self._stop.wait(self.commit_interval_s):
            if self.kind != "pull":
                continue
            with self._lock:
                offsets = dict(self.offsets)
            for mq, offset in offsets.items():
                try:
                    self.admin.update_consumer_offset(self.group, mq, offset)
                except Exception:  # a commit that fails is retried next interval
                    pass

    def _ack_loop(self) -> None:
        assert self.acks_every_s is not None
        while not self._stop.wait(self.acks_every_s):
            for mq in self.owned:
                try:
                    at = self.admin.consumer_offset(self.group, mq)
                    if at is not None and at < self.admin.max_offset(mq):
                        # the pop: a 5.x broker serves a pending reset to it (and refuses
                        # commits until then), so the ack goes on from the reset offset
                        got = self.admin.pull(mq, at, 1, group=self.group).messages
                        if got:
                            self.admin.update_consumer_offset(self.group, mq, got[0].queue_offset + 1)
                except Exception:  # closed under it, or a broker busy: the next round tries again
                    if self._stop.is_set():
                        return

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self.client.close()
        self.admin.close()

    def __enter__(self) -> ScriptedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
