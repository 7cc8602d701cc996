"""consumerConnection: the clients a group has online, in our table/JSON and the Java tool's text."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from conftest import CliResult, Store

from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.versions import version_desc, version_ordinal
from mqadmin.remoting.client import RemotingClient

GROUP = "sms_consumer"
JAVA_V4_9_7 = version_ordinal("V4_9_7")


def heartbeat(client_id: str, tags: str) -> bytes:
    consumer = {
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "consumeType": "CONSUME_PASSIVELY",
        "groupName": GROUP,
        "messageModel": "CLUSTERING",
        "subscriptionDataSet": [
            {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": tags, "subVersion": 1}
            | {"tagsSet": [], "topic": "TopicTest"}
        ],
        "unitMode": False,
    }
    return json.dumps({"clientID": client_id, "consumerDataSet": [consumer], "producerDataSet": []}).encode()


@contextmanager
def online(store: Store, client_ids: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """Each client heartbeats to every broker over its own connection and stays connected."""
    clients = {cid: RemotingClient(store.address, timeout=5) for cid in client_ids}
    try:
        for cid, client in clients.items():
            for addr in store.server.broker_addrs.values():
                body = heartbeat(cid, "TagA || TagB")
                req = RemotingCommand.request(RequestCode.HEART_BEAT, body=body, version=JAVA_V4_9_7, language="JAVA")
                assert client.invoke(addr, req).code == ResponseCode.SUCCESS
        yield store.server.broker_addrs
    finally:
        for client in clients.values():
            client.close()


def test_lists_online_clients(door: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=8, groups={GROUP: -1})
    if door == "embedded":  # an embedded store has no connections, so nobody can be online
        r = cli("consumerConnection", "-n", store.address, "-g", GROUP)
        assert r.code == 1 and r.stdout == ""
        assert r.stderr.strip() == f"mqadmin: error: no client of consumer group '{GROUP}' is online"
        return
    with online(store, ("10.0.0.8@111", "10.0.0.9@222")) as addrs:
        doc: Any = cli("consumerConnection", "-n", store.address, "-g", GROUP, "--json").json()
        table = cli("consumerConnection", "-n", store.address, "-g", GROUP)
        java = cli("consumerConnection", "-n", store.address, "-g", GROUP, "--output", "java")
        one: Any = cli("consumerConnection", "-n", store.address, "-g", GROUP, "-b", addrs["broker-b"], "--json").json()
        nobody = cli("consumerConnection", "-n", store.address, "-g", "nobody", "-b", addrs["broker-b"])
        nosuch = cli("consumerConnection", "-n", store.address, "-g", GROUP, "-b", "127.0.0.1:1")
    assert one["broker_addr"] == addrs["broker-b"] and len(one["clients"]) == 2
    # an unknown group and a -b that is no broker are named as such, not as "no client online"
    assert nobody.code == 2 and nobody.stderr == (
        "mqadmin: error: unknown consumer group 'nobody': it has no offsets on any broker\n"
    )
    known = ", ".join(f"{name} {addr}" for name, addr in sorted(addrs.items()))
    assert nosuch.code == 2 and nosuch.stderr == (
        f"mqadmin: error: -b 127.0.0.1:1 is no broker of {store.address} (brokers: {known})\n"
    )
    assert [c["client_id"] for c in doc["clients"]] == ["10.0.0.8@111", "10.0.0.9@222"]
    assert all(c["language"] == "JAVA" and c["version_desc"] == version_desc(JAVA_V4_9_7) for c in doc["clients"])
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", c["client_addr"]) for c in doc["clients"])
    assert doc["subscriptions"] == {"TopicTest": "TagA || TagB"}
    assert (doc["consume_type"], doc["message_model"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
    assert doc["consume_from_where"] == "CONSUME_FROM_FIRST_OFFSET"

    assert table.code == 0
    assert "2 client(s) online" in table.stdout and "Consume Type: CONSUME_PASSIVELY (PUSH)" in table.stdout
    assert "10.0.0.9@222" in table.stdout and "Subscriptions: TopicTest (TagA || TagB)" in table.stdout

    lines = java.stdout.splitlines()
    assert lines[0] == f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version"
    row = lines[1].split()
    assert row[0] == "10.0.0.8@111" and row[2:] == ["JAVA", version_desc(JAVA_V4_9_7)]
    assert lines[3:6] == ["", "Below is subscription:", f"{'#Topic':<20} #SubExpression"]
    assert lines[6] == f"{'TopicTest':<20} TagA || TagB"
    assert lines[-3:] == [
        "ConsumeType: CONSUME_PASSIVELY",
        "MessageModel: CLUSTERING",
        "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET",
    ]


def test_bad_input(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=8, groups={GROUP: -1})
    r = cli("consumerConnection", "-n", store.address)
    assert r.code == 2 and r.stdout == "" and "-g" in r.stderr
    r = cli("queryOffset", "-n", store.address, "-t", "TopicTest", "--output", "java")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "mqadmin: error: --output java is not available for queryOffset (it is for: cloneGroupOffset, "
        "consumerConnection, consumerProgress, resetOffsetByTime, skipAccumulatedMessage)"
    )
