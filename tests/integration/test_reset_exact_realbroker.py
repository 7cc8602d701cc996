"""On a real Apache RocketMQ 4.9.7 the time search picks the nearest message, which may be
stored before the time: the plan marks it with the stored time, and --exact moves the queue to
the first message at or after the time (read back from the broker)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.cli import main
from mqadmin.model import Message, MessageQueue
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.integration]

VERSION = "4.9.7"
TOPIC, GROUP = "ExactTopic", "exact_group"
MESSAGES = 30


@pytest.fixture(scope="module")
def real4(shared_cluster: Callable[[str], rb.RealCluster]) -> Iterator[tuple[str, list[int]]]:
    """One queue of messages sent ~15 ms apart on the first broker of the shared 4.9.7 cluster;
    (namesrv, store times)."""
    cluster = shared_cluster(VERSION)
    c = cluster.cluster_name
    cluster.mqadmin("updateTopic", "-b", cluster.broker_addrs[0], "-t", TOPIC, "-r", "1", "-w", "1")
    cluster.mqadmin("updateSubGroup", "-c", c, "-g", GROUP)
    admin = RemotingAdmin(cluster.namesrv_addr, timeout=10)
    try:
        route = admin.topic_route(TOPIC)
        mq = route.message_queues()[0]
        for i in range(MESSAGES):
            admin.send(TOPIC, Message(TOPIC, f"m{i}".encode()), mq)
            time.sleep(0.015)
        admin.update_consumer_offset(GROUP, mq, MESSAGES)
        got = admin.pull(mq, 0, 32).messages
        times = [m.store_timestamp for m in sorted(got, key=lambda m: m.queue_offset)]
        assert len(times) == MESSAGES
    finally:
        admin.close()
    yield cluster.namesrv_addr, times


def cli(*args: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
    return code, json.loads(out.getvalue()) if out.getvalue().startswith("{") else out.getvalue(), err.getvalue()


def test_nearest_search_lands_before_and_exact_moves_forward(
    real4: tuple[str, list[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namesrv, times = real4
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))
    # a gap of several ms after message k: 2 ms after k is nearer k than k+1
    k = next(i for i in range(5, MESSAGES - 1) if times[i + 1] - times[i] >= 8)
    ts = times[k] + 2
    base = ["resetOffsetByTime", "-n", namesrv, "-g", GROUP, "-t", TOPIC, "-s", str(ts), "--output", "json"]
    code, plan, err = cli(*base, "--dry-run")
    assert code == 0, err
    q = plan["queues"][0]
    assert q["new_offset"] == k and q["lands_before_ms"] == 2  # the broker's own answer, marked

    code, done, err = cli(*base, "--exact", "--yes")
    assert code == 0, err
    q = done["queues"][0]
    assert q["exact_from"] == k and q["new_offset"] == k + 1 and q["outcome"] == "applied"
    assert times[k + 1] >= ts > times[k]
    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        mq = MessageQueue(TOPIC, q["broker"], 0)
        assert admin.consumer_offset(GROUP, mq) == k + 1
    finally:
        admin.close()
