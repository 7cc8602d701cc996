"""The official client (C++ core behind rocketmq-client-python) against `mqadmin mockBroker`,
observed and moved with the mqadmin CLI, as an operator would (issue: interop)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import official_client

TOPIC, GROUP, COUNT = "InteropTopic", "interop_group", 40


@pytest.fixture(scope="module")
def official() -> Any:
    official_client.ensure_all()
    return official_client


@pytest.fixture
def mock_broker(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Start `mqadmin mockBroker` on a free port for a new store; returns the name server address."""
    procs: list[subprocess.Popen[str]] = []

    def start(version: str) -> str:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mqadmin",
                "mockBroker",
                "--store",
                f"mock://{tmp_path / 'store'}",
                "--port",
                "0",
                "--broker-version",
                version,
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            m = re.search(r"namesrv (\S+:\d+)", line)
            if m:
                return m.group(1)
            if not line and proc.poll() is not None:
                break
        raise AssertionError(f"mockBroker did not start (exit {proc.poll()})")

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def mqadmin(*args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "mqadmin", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.mark.interop
@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_produce_consume_observe_and_reset(
    official: Any, mock_broker: Callable[[str], str], tmp_path: Path, version: str
) -> None:
    ns = mock_broker(version)
    sent = official.produce(ns, TOPIC, COUNT, workdir=tmp_path / "producer", tags=("TagA", "TagB"), keys="order-{i}")
    assert len(sent) == COUNT

    queues = mqadmin("queryOffset", "-n", ns, "-t", TOPIC)["queues"]
    assert sum(q["max_offset"] - q["min_offset"] for q in queues) == COUNT
    first_store_time = min(
        q["store_time_at_offset"]
        for q in mqadmin("queryOffset", "-n", ns, "-t", TOPIC, "-s", "-1h")["queues"]
        if q["store_time_at_offset"] is not None
    )

    def progress() -> Any:
        return mqadmin("consumerProgress", "-n", ns, "-g", GROUP, "-t", TOPIC)

    with official.push_consumer(ns, GROUP, TOPIC, workdir=tmp_path / "consumer") as consumer:
        got = consumer.wait_for_messages(COUNT, timeout=60)
        assert {m["keys"] for m in got} == {f"order-{i}" for i in range(COUNT)}
        wait_until(lambda: progress()["queues"] and progress()["diff_total"] == 0, 30, "offsets committed")
        doc = progress()
        assert all(q["consumer_offset"] == q["broker_offset"] for q in doc["queues"])
        (row,) = [g for g in mqadmin("consumerProgress", "-n", ns)["groups"] if g["group"] == GROUP]
        assert (row["count"], row["version"], row["type"], row["model"]) == (1, "V4_6_0", "PUSH", "CLUSTERING")

        reset = mqadmin("resetOffsetByTime", "-n", ns, "-g", GROUP, "-t", TOPIC, "-s", str(first_store_time - 1000))
        assert all("broker-side reset" in how for how in reset["method"].values()), reset["method"]
        assert all(q["new_offset"] == q["min_offset"] for q in reset["queues"])
        if version.startswith("5"):  # server-side: the next pulls answer OFFSET_MOVED, all is redelivered
            again = consumer.wait_for_messages(2 * COUNT, timeout=60)
            assert sorted(m["queue_offset"] for m in again[COUNT:]) == sorted(m["queue_offset"] for m in got)
        else:  # client push: the C++ client applies and commits the reset offsets
            consumer.wait_for_log("ResetOffsetBody", timeout=15)
    if version.startswith("4"):
        # C++ client 2.1.0 stops pulling reset queues until it restarts (as against a real 4.9.x);
        # restarted, it consumes from the reset offsets.
        with official.push_consumer(ns, GROUP, TOPIC, workdir=tmp_path / "consumer2", name="again") as again_peer:
            again = again_peer.wait_for_messages(COUNT, timeout=60)
            assert sorted(m["queue_offset"] for m in again) == sorted(m["queue_offset"] for m in got)
            wait_until(lambda: progress()["diff_total"] == 0, 30, "re-consumed offsets committed")

    # the consumer is gone: 4.x answers CONSUMER_NOT_ONLINE and mqadmin updates directly
    skip = mqadmin("resetOffsetByTime", "-n", ns, "-g", GROUP, "-t", TOPIC, "-s", str(first_store_time - 1000))
    expected = "server-side" if version.startswith("5") else "direct offset update (no consumer online)"
    assert all(expected in how for how in skip["method"].values()), skip["method"]
    assert progress()["diff_total"] == COUNT
