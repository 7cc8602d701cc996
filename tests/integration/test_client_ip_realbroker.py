"""consumerProgress -g G -s true beside the Java tool's on a real broker with real consumers online.

Two official (C++) push consumers share a group; each owns some queues after the rebalance. The
broker forwards GET_CONSUMER_RUNNING_INFO to each of them and relays what they report; both
tools must then name the same client IP for every queue, with one known difference: the C++
client reports a queue it has no committed offset for (a 5.x %RETRY% queue) with commitOffset
2^64-1, which the Java tool's JSON reader cannot take as a long; it then logs "parseLong error"
and stops there (that client's and every later client's queues N/A), where we still show what
the clients reported.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mqadmin import errors
from mqadmin.cli import main
from mqadmin.model import Message, MessageQueue
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.integration.test_java_parity import java_progress
from tests.support import official_client as oc
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

#: what the Java tool logs when a client's report has a commitOffset beyond a Java long
JAVA_PARSE_ERROR = "parseLong error, field : commitOffset"
TOPIC, GROUP, QUEUES = "ClientIpTopic", "ClientIpGroup", 4
WAIT = 10.0
SETTLE_S = 90.0


@dataclass
class World:
    cluster: rb.RealCluster
    admin: RemotingAdmin
    queues: list[MessageQueue]

    def ours(self, *args: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        argv = [*args, "-n", self.cluster.namesrv_addr, "--timeout", str(WAIT), "--tz", "UTC"]
        code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        assert code == 0, f"mqadmin {' '.join(args)} exited {code}: {err.getvalue()}"
        assert "could not be read" not in err.getvalue(), err.getvalue()
        return out.getvalue()


def owners(world: World) -> dict[MessageQueue, str]:
    """Each queue's holder as the clients report it (through our admin: the broker forwards)."""
    out: dict[MessageQueue, str] = {}
    for c in world.admin.consumer_connections(GROUP).connections:
        for mq in world.admin.consumer_running_queues(GROUP, c.client_id):
            out[mq] = c.client_id
    return out


def retry_queues(world: World) -> list[MessageQueue]:
    try:
        return world.admin.topic_route("%RETRY%" + GROUP).message_queues()
    except errors.TopicNotExist:
        return [MessageQueue("%RETRY%" + GROUP, "?", 0)]  # not created yet: nothing settled


def settled(world: World) -> dict[MessageQueue, str]:
    """Wait until two clients are online, every queue (the topic's, the group's %RETRY%) has one
    holder, and that holds for 2 s."""
    deadline = time.monotonic() + SETTLE_S
    last: dict[MessageQueue, str] | None = None
    while True:
        try:
            now = owners(world)
        except Exception:  # a client still starting: ask again until the deadline
            now = {}
        clients = set(now.values())
        wanted = set(world.queues) | set(retry_queues(world))  # the %RETRY% queue is rebalanced last
        if len(clients) == 2 and wanted <= set(now) and now == last:
            return now
        assert time.monotonic() < deadline, f"the group did not settle: {now}"
        last = now
        time.sleep(2.0)


@pytest.fixture(scope="module", params=rb.VERSIONS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    version: str = request.param
    workdir: Path = tmp_path_factory.mktemp(f"client-ip-{version}")
    oc.ensure_all()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "UTC")
        mp.setenv("MQADMIN_HOME", str(workdir / "mqadmin-home"))
        mp.setenv("NO_COLOR", "1")
        mp.delenv("NAMESRV_ADDR", raising=False)
        with rb.RealCluster(version, workdir / "rmq", brokers=1) as cluster:
            admin = RemotingAdmin(cluster.namesrv_addr, timeout=WAIT)
            try:
                for addr in cluster.broker_addrs:
                    rb.create_topic(addr, TOPIC, QUEUES)
                deadline = time.monotonic() + WAIT
                while len(queues := admin.topic_route(TOPIC).message_queues()) < QUEUES:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
                for i, mq in enumerate(queues * 2):
                    admin.send(TOPIC, Message(TOPIC, f"ip-{i}".encode()), queue=mq)
                peers = [
                    oc.push_consumer(cluster.namesrv_addr, GROUP, TOPIC, workdir=workdir / f"c{n}", name=f"c{n}")
                    for n in (1, 2)
                ]
                with peers[0], peers[1]:
                    yield World(cluster, admin, queues)
            finally:
                admin.close()


def test_official_client_answers_running_info(world: World) -> None:
    """The C++ client reports its queues when the broker forwards request 307 to it."""
    held = settled(world)
    topic_owners = {held[mq] for mq in world.queues}
    assert len(topic_owners) == 2, f"both consumers hold topic queues after the rebalance: {held}"


def java_errors(world: World) -> int:
    log = world.cluster.workdir / "mqadmin" / "logs" / "mqadmin.log"
    return log.read_text(errors="replace").count(JAVA_PARSE_ERROR) if log.exists() else 0


def test_client_ip_column_matches_the_java_tool(world: World) -> None:
    held = settled(world)
    errors_before = java_errors(world)
    java = java_progress(world.cluster.mqadmin("consumerProgress", "-g", GROUP, "-s", "true").stdout)
    java_failed = java_errors(world) > errors_before
    ours_text = java_progress(world.ours("consumerProgress", "-g", GROUP, "-s", "true", "--output", "java"))
    doc: Any = json.loads(world.ours("consumerProgress", "-g", GROUP, "-s", "true", "--output", "json"))
    assert owners(world) == held, "the allocation moved while the tools ran"
    ours_json = {(q["topic"], q["broker"], q["queue_id"]): q["client_ip"] for q in doc["queues"]}
    assert sorted(java) == sorted(ours_text) == sorted(ours_json)
    expected = {(mq.topic, mq.broker_name, mq.queue_id): cid.split("@")[0] for mq, cid in held.items()}
    for key, row in java.items():
        ip = expected.get(key, "N/A")
        assert ours_text[key]["Client IP"] == ip, key
        assert ours_json[key] == (None if ip == "N/A" else ip), key
        # the Java tool stops at the report it cannot read: that client's and later ones' queues N/A
        assert row["Client IP"] in ((ip, "N/A") if java_failed else (ip,)), key
    assert all(ours_json[(mq.topic, mq.broker_name, mq.queue_id)] for mq in world.queues)
    if java_failed:
        assert any(r["Client IP"] == "N/A" != ours_text[k]["Client IP"] for k, r in java.items())
    if rb.is_v4(world.cluster.version):  # a 4.x broker answers 0 for an uncommitted queue: Java reads it
        assert not java_failed
