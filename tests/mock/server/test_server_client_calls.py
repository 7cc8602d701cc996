"""Requests the mock broker forwards to a client and relays back (GET_CONSUMER_RUNNING_INFO, 307).

As a real broker (broker: AdminBrokerProcessor.java, callConsumer): the request goes to the client
over the client's own connection, the client's answer comes back to the asker as it is; a client
not online or too old is SYSTEM_ERROR, one that does not answer in time CONSUME_MSG_TIMEOUT, one
whose connection closes meanwhile SYSTEM_ERROR at once. Clients are scripted consumers speaking
our protocol over TCP.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin import errors
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.headers import ConsumerRunningInfoHeader
from mqadmin.remoting.backend import RemotingAdmin
from mqadmin.remoting.client import RemotingClient
from tests.support.scripted_consumer import ScriptedConsumer

pytestmark = pytest.mark.integration

TOPIC, START, END = "T", 1_700_000_000_000, 1_700_000_800_000
#: the mock's wait for a silent client in these tests (a broker waits 10 s)
CALL_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockServer]:
    root: Path = tmp_path_factory.mktemp("forward") / "store"
    cluster = MockCluster.create(root, ("broker-a", "broker-b"), version="5.3.3")
    fill_topic(cluster, TOPIC, 16, START, END)
    cluster.flush()
    with MockServer(cluster, namesrv_port=0) as s:
        s.call_client_timeout = CALL_TIMEOUT_S
        yield s


@pytest.fixture
def admin(server: MockServer) -> Iterator[RemotingAdmin]:
    a = RemotingAdmin(server.namesrv_addr, timeout=5)
    yield a
    a.close()


def test_the_client_answers_and_its_queues_come_back(server: MockServer, admin: RemotingAdmin) -> None:
    queues = admin.topic_route(TOPIC).message_queues()
    with (
        ScriptedConsumer(server.namesrv_addr, "fwd", TOPIC, client_id="10.1.1.1@one", owned=queues[:3]) as one,
        ScriptedConsumer(server.namesrv_addr, "fwd", TOPIC, client_id="10.1.1.2@two", owned=queues[3:]),
    ):
        assert admin.consumer_running_queues("fwd", "10.1.1.1@one") == frozenset(queues[:3])
        assert admin.consumer_running_queues("fwd", "10.1.1.2@two") == frozenset(queues[3:])
        assert one.running_info_asked.is_set()


def test_the_reply_is_the_clients_own(server: MockServer) -> None:
    """Code, remark and body are relayed unchanged; the header reaches the client as sent."""
    seen: list[RemotingCommand] = []

    def answer(cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        return cmd.reply(ResponseCode.SYSTEM_ERROR, "the client's own refusal", body=b'{"x":1}')

    with ScriptedConsumer(server.namesrv_addr, "own", TOPIC, client_id="10.1.1.3@own") as c:
        c.client.register_handler(RequestCode.GET_CONSUMER_RUNNING_INFO, answer)
        asker = RemotingClient(server.namesrv_addr, timeout=5)
        try:
            header = ConsumerRunningInfoHeader(consumerGroup="own", clientId="10.1.1.3@own", jstackEnable=True)
            reply = asker.invoke(server.broker_addrs["broker-a"], header.request())
        finally:
            asker.close()
    assert (reply.code, reply.remark, json.loads(reply.body)) == (
        ResponseCode.SYSTEM_ERROR,
        "the client's own refusal",
        {"x": 1},
    )
    assert seen[0].ext_fields == {"consumerGroup": "own", "clientId": "10.1.1.3@own", "jstackEnable": "true"}
    assert not seen[0].is_oneway


def test_a_silent_client_times_out_with_the_brokers_code(server: MockServer, admin: RemotingAdmin) -> None:
    with ScriptedConsumer(server.namesrv_addr, "mute", TOPIC, client_id="10.1.1.4@mute", answers_running_info=False):
        t0 = time.monotonic()
        with pytest.raises(errors.BrokerError) as caught:
            admin.consumer_running_queues("mute", "10.1.1.4@mute")
        took = time.monotonic() - t0
    assert caught.value.code == ResponseCode.CONSUME_MSG_TIMEOUT
    assert "consumer <mute> <10.1.1.4@mute> Timeout" in str(caught.value)
    assert CALL_TIMEOUT_S <= took < CALL_TIMEOUT_S + 3


def test_others_are_served_while_a_client_is_awaited(server: MockServer, admin: RemotingAdmin) -> None:
    """The wait holds one worker, not the server: another asker is answered meanwhile."""
    queues = admin.topic_route(TOPIC).message_queues()
    with ScriptedConsumer(
        server.namesrv_addr, "slow", TOPIC, client_id="10.1.1.5@slow", answers_running_info=False
    ) as c:
        failure: list[BaseException] = []

        def ask() -> None:
            try:
                admin.consumer_running_queues("slow", "10.1.1.5@slow")
            except errors.MqadminError as exc:
                failure.append(exc)

        waiter = threading.Thread(target=ask, daemon=True)
        waiter.start()
        assert c.running_info_asked.wait(5)
        other = RemotingAdmin(server.namesrv_addr, timeout=5)
        try:
            t0 = time.monotonic()
            assert other.max_offset(queues[0]) == 2  # 16 messages over 8 queues
            assert time.monotonic() - t0 < CALL_TIMEOUT_S / 2
        finally:
            other.close()
        waiter.join(CALL_TIMEOUT_S + 5)
        assert not waiter.is_alive() and failure


def test_a_client_that_goes_away_fails_the_call_at_once(server: MockServer, admin: RemotingAdmin) -> None:
    consumer = ScriptedConsumer(
        server.namesrv_addr, "gone", TOPIC, client_id="10.1.1.6@gone", answers_running_info=False
    )
    closer = threading.Thread(target=lambda: consumer.running_info_asked.wait(5) and consumer.close(), daemon=True)
    closer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(errors.BrokerError) as caught:
            admin.consumer_running_queues("gone", "10.1.1.6@gone")
    finally:
        closer.join(10)
        consumer.close()
    assert time.monotonic() - t0 < CALL_TIMEOUT_S
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    assert "invoke consumer <gone> <10.1.1.6@gone> Exception" in str(caught.value)


def test_a_client_not_online_is_refused(server: MockServer, admin: RemotingAdmin) -> None:
    with ScriptedConsumer(server.namesrv_addr, "here", TOPIC, client_id="10.1.1.7@here"):
        with pytest.raises(errors.BrokerError) as caught:
            admin.consumer_running_queues("here", "10.1.1.8@elsewhere")
    assert caught.value.code == ResponseCode.SYSTEM_ERROR
    assert "The Consumer <here> <10.1.1.8@elsewhere> not online" in str(caught.value)


def test_a_header_without_the_client_id_is_refused(server: MockServer) -> None:
    asker = RemotingClient(server.namesrv_addr, timeout=5)
    try:
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g"})
        reply = asker.invoke(server.broker_addrs["broker-a"], request)
    finally:
        asker.close()
    assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <clientId> is null")
