"""The served mock against real clients: our remoting admin, per-version quirks, and the
official C++ client (rocketmq-client-python) producing, consuming, committing and being reset.

Each test starts a MockServer on loopback port 0 over a fresh store and speaks to it with raw
frames (tests/mock/server/wire.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from mqadmin.message import iter_messages
from mqadmin.mock.server import MockServer
from mqadmin.model import Message, MessageQueue
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import (
    CPP_VERSION,
    GROUP,
    QUEUES,
    REPLY_TIMEOUT_S,
    TOPIC,
    Clients,
    RawClient,
    Serve,
    cpp_heartbeat,
    java_heartbeat,
    pull,
    seed,
    send_v2,
)

pytestmark = pytest.mark.integration

# the fixtures of wire.py: a started server over a fresh store, raw clients closed after the test
serve = wire.serve
clients = wire.clients


# ---------------------------------------------------------------------------------------------
# Our own remoting backend against the served mock (the second door, end to end)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_remoting_admin_against_the_server(serve: Serve, clients: Clients, version: str) -> None:
    backend = pytest.importorskip("mqadmin.remoting.backend")
    server = serve(version)
    seed(server, 6, qid=0, broker="broker-a")
    seed(server, 4, qid=1, broker="broker-b")
    consumers = [clients(addr) for addr in server.broker_addrs.values()]
    for c in consumers:
        c.call(RequestCode.HEART_BEAT, body=cpp_heartbeat("cpp-1"), version=CPP_VERSION, language="CPP")
        for qid in range(QUEUES):
            c.call(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": GROUP, "topic": TOPIC, "queueId": qid, "commitOffset": 1},
            )
    admin = backend.RemotingAdmin(server.namesrv_addr, timeout=5)
    try:
        assert {b.version for b in admin.cluster_brokers()} == {version}
        assert len(admin.topic_route(TOPIC).message_queues()) == 2 * QUEUES
        assert TOPIC in admin.list_topics() and GROUP in admin.list_groups()
        mq = MessageQueue(TOPIC, "broker-a", 0)
        assert (admin.min_offset(mq), admin.max_offset(mq), admin.consumer_offset(GROUP, mq)) == (0, 6, 1)
        admin.update_consumer_offset(GROUP, mq, 4)
        stats = admin.consume_stats(GROUP, TOPIC)
        assert stats.offsets[mq].consumer_offset == 4 and stats.offsets[mq].broker_offset == 6
        connections = admin.consumer_connections(GROUP)
        assert [(c.client_id, c.language, c.version) for c in connections.connections] == [
            ("cpp-1", "CPP", CPP_VERSION)
        ]
        pulled = admin.pull(mq, 0, 3)
        assert pulled.status == "FOUND" and [m.queue_offset for m in pulled.messages] == [0, 1, 2]
        sent = admin.send(TOPIC, Message(topic=TOPIC, body=b"via backend"), MessageQueue(TOPIC, "broker-b", 0))
        assert sent.queue_offset == 0
        admin.send_back(GROUP, pulled.messages[0])
        table = admin.reset_offset_by_time(TOPIC, GROUP, 0, True, cplus=True)
        assert table[mq] == 0
        if version == "4.9.8":  # client push: every broker told the consumer, in the C++ form
            pushed: list[RemotingCommand] = []
            for c in consumers:
                while (r := c.requests.get(timeout=REPLY_TIMEOUT_S)).code != RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                    pass
                pushed.append(r)
            assert all(json.loads(r.body)["offsetTable"][0]["offset"] == 0 for r in pushed)
        else:  # server side: written at once
            assert admin.consumer_offset(GROUP, mq) == 0
    finally:
        admin.close()


def test_four_x_quirks_seen_on_a_real_4_9_8(serve: Serve, clients: Clients) -> None:
    """What a real 4.9.8 does differently (checked side by side): a name server that ignores
    unknown codes, no transactionId in send replies, CLUSTER added and WAIT dropped on store."""
    server = serve("4.9.8")
    ns = clients(server.namesrv_addr)
    with pytest.raises(AssertionError, match="no reply"):
        ns.call(9999, timeout=0.5)
    missing = ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert (missing.remark or "").endswith("\nSee http://rocketmq.apache.org/docs/faq/ for further details.")
    broker = clients(server.broker_addrs["broker-a"])
    sent = send_v2(broker, TOPIC, 0, b"x", tags="TagA")
    assert sorted(sent.ext_fields) == ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"]
    (stored,) = iter_messages(pull(broker, 0).body)
    assert stored.properties == {"UNIQ_KEY": "KEY0" + b"x".hex(), "TAGS": "TagA", "CLUSTER": "DefaultCluster"}
    hb = broker.call(RequestCode.HEART_BEAT, body=cpp_heartbeat("c1"), version=CPP_VERSION, language="CPP")
    assert hb.ext_fields == {}


def test_five_x_stamps_and_heartbeat_v2_flags(serve: Serve, clients: Clients) -> None:
    server = serve("5.3.3")
    broker = clients(server.broker_addrs["broker-a"])
    send_v2(broker, TOPIC, 0, b"x", tags="TagA")
    (stored,) = iter_messages(pull(broker, 0).body)
    assert {k: stored.properties[k] for k in ("CLUSTER", "MSG_REGION", "TRACE_ON", "WAIT")} == {
        "CLUSTER": "DefaultCluster",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
        "WAIT": "true",
    }
    first = broker.call(RequestCode.HEART_BEAT, body=java_heartbeat("c1"))
    assert first.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}
    again = broker.call(RequestCode.HEART_BEAT, body=java_heartbeat("c1"))
    assert again.ext_fields["IS_SUB_CHANGE"] == "false"
    lite = json.dumps(
        {"clientID": "c2", "consumerDataSet": [{"groupName": GROUP, "subscriptionDataSet": []}], "withoutSub": True}
    )
    assert broker.call(RequestCode.HEART_BEAT, body=lite.encode()).ext_fields["IS_SUB_CHANGE"] == "true"


# ---------------------------------------------------------------------------------------------
# The official C++ client (rocketmq-client-python) against the served mock


@pytest.fixture(scope="module")
def official() -> Any:
    from tests.support import official_client

    official_client.ensure_all()
    return official_client


def _committed(server: MockServer, group: str, topic: str) -> dict[tuple[str, int], int]:
    with server.lock:
        return {
            (b.name, q): o
            for b in server.cluster.brokers.values()
            for q, o in b.offsets.get(f"{topic}@{group}", {}).items()
        }


@pytest.mark.interop
@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_official_client_produces_consumes_commits_and_is_reset(
    official: Any, tmp_path: Path, serve: Serve, version: str
) -> None:
    """C++ producer and push consumer end to end, then a reset while the consumer is online.

    5.x resets on the broker: the next pull answers OFFSET_MOVED and everything is redelivered.
    4.x pushes RESET_CONSUMER_CLIENT_OFFSET in the C++ form; the C++ client 2.1.0 applies and
    commits it but stops pulling those queues until it restarts (the same against a real 4.9.8).
    """
    count, group = 20, "PeerGroup"
    server = serve(version)
    sent = official.produce(server.namesrv_addr, TOPIC, count, workdir=tmp_path / "producer", tags=("TagA", "TagB"))
    assert {s["status"] for s in sent} == {"OK"}
    assert sorted(s["offset"] for s in sent) == sorted(
        o for b in server.cluster.brokers.values() for q in range(QUEUES) for o in range(b.max_offset(TOPIC, q))
    )
    with official.push_consumer(server.namesrv_addr, group, TOPIC, workdir=tmp_path / "consumer") as consumer:
        got = consumer.wait_for_messages(count, timeout=60)
        assert {m["msg_id"] for m in got} == {s["msg_id"] for s in sent}
        full = {(b.name, q): b.max_offset(TOPIC, q) for b in server.cluster.brokers.values() for q in range(QUEUES)}
        deadline = time.monotonic() + 30
        while _committed(server, group, TOPIC) != full and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _committed(server, group, TOPIC) == full, "the client commits every 5 s"

        admin = RawClient(server.broker_addrs["broker-a"])
        try:
            reset = admin.call(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                {"topic": TOPIC, "group": group, "timestamp": 0, "isForce": True, "queueId": -1, "offset": -1},
                language="CPP",  # so a client-push broker sends the body C++ consumers decode
            )
        finally:
            admin.close()
        assert reset.code == ResponseCode.SUCCESS, reset.remark
        if version == "5.3.3":
            again = consumer.wait_for_messages(count + sum(full[("broker-a", q)] for q in range(QUEUES)), 60)
            assert sorted(m["queue_offset"] for m in again[count:]) == sorted(
                o for q in range(QUEUES) for o in range(full[("broker-a", q)])
            )
        else:
            consumer.wait_for_log("ResetOffsetBody brokerName:broker-a", timeout=10, count=QUEUES)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if all(o == 0 for (b, _), o in _committed(server, group, TOPIC).items() if b == "broker-a"):
                    break
                time.sleep(0.2)
            assert all(o == 0 for (b, _), o in _committed(server, group, TOPIC).items() if b == "broker-a")
        consumer.stop()
    assert consumer.of("shutdown")
    assert "unregisterClient to:" in consumer.cpp_log()
