"""One broker of two gone from a real 5.5.1 cluster: the name server drops its route at once and
every answer covers only the live broker. mqadmin names the missing broker on every command,
refuses a reset unless --partial, and then changes only the live broker's queues."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

TOPIC, GROUP, QUEUES, COUNT = "VanishTopic", "G_vanish", 4, 80


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*args, "--json"], env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else text, err.getvalue()


def test_a_broker_gone_from_the_route_is_named_and_resets_wait_for_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    with rb.RealCluster("5.5.1", tmp_path / "rmq", brokers=2) as cluster:
        cluster.create_topic(TOPIC, QUEUES)
        cluster.create_group(GROUP)
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
        try:
            deadline = time.monotonic() + 30
            while len({mq.broker_name for mq in admin.topic_route(TOPIC).message_queues()}) < 2:
                assert time.monotonic() < deadline, "the topic never reached both brokers' routes"
                time.sleep(0.5)
            for i in range(COUNT):
                admin.send(TOPIC, Message(TOPIC, f"m{i}".encode()))
            queues = admin.topic_route(TOPIC).message_queues()
            for mq in queues:
                admin.update_consumer_offset(GROUP, mq, admin.max_offset(mq))
        finally:
            admin.close()
        ns = cluster.namesrv_addr
        code, doc, err = cli("queryOffset", "-n", ns, "-t", TOPIC, "-g", GROUP)
        assert code == 0 and "missing" not in err, err
        broker_b = dict(cluster.brokers)["broker-b"]

        cluster.stop_broker("broker-b")  # gone from the route, as a crashed broker is
        code, _, err = cli("queryOffset", "-n", ns, "-t", TOPIC, "-g", GROUP)
        assert code == 0, err
        assert f"broker broker-b ({broker_b}, seen " in err and "is missing from the route" in err
        reset = ("resetOffsetByTime", "-n", ns, "-g", GROUP, "-t", TOPIC, "--to-earliest", "--yes")
        code, _, err = cli(*reset)
        assert code == 2 and "--partial" in err and "nothing was changed" in err, err
        code, doc, err = cli(*reset, "--partial")
        assert code == 0, err
        assert doc["verified"] == QUEUES and {q["broker"] for q in doc["queues"]} == {"broker-a"}
