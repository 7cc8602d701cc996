"""Raw remoting peers, store helpers and fixtures for the mock server tests: frames as a client of any
language sends them, through the codec only, so the tests check the wire, not our client."""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from mqadmin.message import format_properties, java_string_hash
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import Message
from mqadmin.protocol.codec import FrameDecoder, RemotingCommand, encode
from mqadmin.protocol.codes import MQVersion, RequestCode

TOPIC = "TopicTest"
GROUP = "g1"
QUEUES = 2
CPP_VERSION = int(MQVersion.V4_6_0)  # what rocketmq-client-python sends
JAVA_VERSION = int(MQVersion.V5_3_3)
REPLY_TIMEOUT_S = 10.0
PULL_SUBSCRIPTION_SUSPEND = 0x4 | 0x2
PULL_COMMIT = 0x1
PULL_SUBSCRIPTION = 0x4


Serve = Callable[..., MockServer]


class RawClient:
    """A bare remoting peer: sends frames, matches replies by opaque, queues server requests."""

    def __init__(self, addr: str, *, wrap: Callable[[socket.socket], socket.socket] | None = None) -> None:
        peer_host, peer_port = addr.rsplit(":", 1)
        sock = socket.create_connection((peer_host, int(peer_port)), timeout=REPLY_TIMEOUT_S)
        self.sock = wrap(sock) if wrap else sock
        self.sock.settimeout(None)
        host, port = self.sock.getsockname()[:2]
        self.local = f"{host}:{port}"
        self._decoder = FrameDecoder()
        self._replies: dict[int, RemotingCommand] = {}
        self._cond = threading.Condition()
        self.requests: queue.Queue[RemotingCommand] = queue.Queue()
        self.eof = threading.Event()
        self._opaque = 100
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                for cmd in self._decoder.feed(data):
                    if cmd.is_response:
                        with self._cond:
                            self._replies[cmd.opaque] = cmd
                            self._cond.notify_all()
                    else:
                        self.requests.put(cmd)
        except OSError:
            pass
        finally:
            self.eof.set()
            with self._cond:
                self._cond.notify_all()

    def send(self, cmd: RemotingCommand) -> int:
        self._opaque += 1
        cmd.opaque = self._opaque
        self.sock.sendall(encode(cmd))
        return cmd.opaque

    def wait(self, opaque: int, timeout: float = REPLY_TIMEOUT_S) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        with self._cond:
            while opaque not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.eof.is_set():
                    raise AssertionError(f"no reply to opaque {opaque} (eof={self.eof.is_set()})")
                self._cond.wait(left)
            return self._replies.pop(opaque)

    def call(
        self,
        code: int,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        version: int = JAVA_VERSION,
        language: str = "JAVA",
        timeout: float = REPLY_TIMEOUT_S,
    ) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext, body, version=version, language=language)
        return self.wait(self.send(cmd), timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._reader.join(5)


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for state the server shows, instead of sleeping for it."""
    deadline = time.monotonic() + REPLY_TIMEOUT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def held_watermarks(server: MockServer) -> list[int]:
    """The offsets the held pulls wait past, one per held pull."""
    with server.long_polling._arrival:
        return [h.watermark for held in server.long_polling._held.values() for h in held]


def make_cluster(root: Path, version: str) -> MockCluster:
    """Two brokers with TOPIC; GROUP exists (5.3 refuses offset updates for unknown groups)."""
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version=version)
    cluster.create_topic(TOPIC, QUEUES)
    for broker in cluster.brokers.values():
        broker.ensure_group(GROUP)
    return cluster


Clients = Callable[..., RawClient]


def send_v2(broker: RawClient, topic: str, qid: int, body: bytes, tags: str | None = None) -> RemotingCommand:
    props = {"UNIQ_KEY": f"KEY{qid}{body.hex()}", "WAIT": "true"}
    if tags:
        props["TAGS"] = tags
    ext: dict[str, object] = {
        "a": "pg",
        "b": topic,
        "c": "TBW102",
        "d": 4,
        "e": qid,
        "f": 0,
        "g": int(time.time() * 1000),
        "h": 0,
        "i": format_properties(props),
        "j": 0,
        "k": False,
        "m": False,
    }
    return broker.call(RequestCode.SEND_MESSAGE_V2, ext, body)


def pull(
    broker: RawClient,
    offset: int,
    *,
    qid: int = 0,
    sys_flag: int = PULL_SUBSCRIPTION,
    suspend_ms: int = 0,
    subscription: str = "*",
    commit: int = 0,
    group: str = GROUP,
    timeout: float = REPLY_TIMEOUT_S,
) -> RemotingCommand:
    ext: dict[str, object] = {
        "consumerGroup": group,
        "topic": TOPIC,
        "queueId": qid,
        "queueOffset": offset,
        "maxMsgNums": 32,
        "sysFlag": sys_flag,
        "commitOffset": commit,
        "suspendTimeoutMillis": suspend_ms,
        "subscription": subscription,
        "subVersion": 0,
    }
    return broker.call(RequestCode.PULL_MESSAGE, ext, timeout=timeout)


def cpp_heartbeat(client_id: str, group: str = GROUP, topic: str = TOPIC) -> bytes:
    """A heartbeat as the C++ client writes it: enum ordinals, subVersion as a string
    (rocketmq-client-cpp's HeartbeatData; Java's ConsumerData.java sends enum names)."""
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": 0,
                    "consumeType": 1,
                    "groupName": group,
                    "messageModel": 1,
                    "subscriptionDataSet": [{"subString": "*", "subVersion": "1700000000000", "topic": topic}],
                }
            ],
            "producerDataSet": [],
        }
    ).encode()


def java_heartbeat(client_id: str, group: str = GROUP, topic: str = TOPIC) -> bytes:
    return json.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "consumeType": "CONSUME_PASSIVELY",
                    "groupName": group,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "codeSet": [java_string_hash("TagA")],
                            "expressionType": "TAG",
                            "subString": "TagA",
                            "subVersion": 1700000000000,
                            "tagsSet": ["TagA"],
                            "topic": topic,
                        }
                    ],
                    "unitMode": False,
                }
            ],
            "heartbeatFingerprint": 0,
            "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
        }
    ).encode()


def seed(server: MockServer, count: int, qid: int = 0, broker: str = "broker-a", tags: str = "TagA") -> None:
    with server.lock:
        for i in range(count):
            msg = Message(topic=TOPIC, body=f"m{i}".encode(), properties={"TAGS": tags}, queue_id=qid)
            server.cluster.brokers[broker].put_message(msg)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., MockServer]]:
    """serve(version="5.3.3", **server_kwargs) -> a started server over a fresh two-broker store."""
    started: list[tuple[MockServer, MockCluster]] = []

    def start(version: str = "5.3.3", **kwargs: Any) -> MockServer:
        cluster = make_cluster(tmp_path / f"store{len(started)}", version)
        server = MockServer(cluster, namesrv_port=0, **kwargs).start()
        started.append((server, cluster))
        return server

    yield start
    for server, cluster in started:
        server.stop()
        cluster.close()


@pytest.fixture
def clients() -> Iterator[Callable[..., RawClient]]:
    made: list[RawClient] = []

    def connect(addr: str, **kwargs: Any) -> RawClient:
        client = RawClient(addr, **kwargs)
        made.append(client)
        return client

    yield connect
    for c in made:
        c.close()
