"""Proof on real files: the Java client (from Maven Central) in BROADCASTING mode writes its
offsets.json; we read it, our reset rewrites it, and the client restarted on it consumes from
the new offsets."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

from mqadmin.admin import connect
from mqadmin.localstore import FROM_FILE, JAVA, find_offset_files
from mqadmin.model import Message, MessageQueue
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker

TOPIC = "BroadcastTopic"
GROUP = "broadcast_sms"
QUEUES = 4
PER_QUEUE = 8
SOURCE = Path(__file__).with_name("java") / "BroadcastConsumer.java"


@dataclass
class Setup:
    version: str
    cluster: rb.RealCluster
    work: Path
    classes: Path
    lib: Path
    offsets_dir: Path
    store_times: dict[MessageQueue, list[int]]

    def consume(self, expected: int) -> list[tuple[str, int, int]]:
        """Run the Java broadcast consumer until it saw ``expected`` messages; (broker, queue, offset) each."""
        java = rb.java_binary()
        cmd = [
            java,
            f"-Duser.home={self.work / 'client-home'}",
            f"-Drocketmq.client.localOffsetStoreDir={self.offsets_dir}",
            "-Drocketmq.client.logRoot=" + str(self.work / "client-logs"),
            "-cp",
            f"{self.classes}{os.pathsep}{self.lib}/*",
            "BroadcastConsumer",
            self.cluster.namesrv_addr,
            GROUP,
            TOPIC,
            str(expected),
            "60000",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
        rows = [line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("MSG ")]
        return [(b, int(q), int(o)) for b, q, o in rows]


@pytest.fixture(scope="module", params=rb.VERSIONS)
def setup(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    shared_cluster: Callable[[str], rb.RealCluster],
) -> Iterator[Setup]:
    """The cluster shared with other modules, the topic on its first broker only (one broker's
    queues, as a single-broker cluster routes them)."""
    version: str = request.param
    work = tmp_path_factory.mktemp(f"broadcast-{version}")
    lib = rb.ensure_dist(version)
    classes = work / "classes"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", f"{lib}/*", str(SOURCE)], check=True, capture_output=True, timeout=120
    )
    cluster = shared_cluster(version)
    cluster.mqadmin("updateTopic", "-b", cluster.broker_addrs[0], "-t", TOPIC, "-r", str(QUEUES), "-w", str(QUEUES))
    admin = connect(cluster.namesrv_addr, timeout=10)
    times: dict[MessageQueue, list[int]] = {}
    try:
        for i in range(QUEUES * PER_QUEUE):
            admin.send(TOPIC, Message(TOPIC, f"sms-{i}".encode(), {"TAGS": "sms"}))
            time.sleep(0.01)
        for mq in admin.topic_route(TOPIC).message_queues():
            times[mq] = [m.store_timestamp for m in admin.pull(mq, 0, 64).messages]
    finally:
        admin.close()
    yield Setup(version, cluster, work, classes, lib, work / "offsets", times)


def test_java_client_offsets_read_reset_and_resumed_from(setup: Setup, cli: Callable[..., CliResult]) -> None:
    total = QUEUES * PER_QUEUE
    first = setup.consume(total)
    assert len(set(first)) == total

    (f,) = find_offset_files(setup.offsets_dir, GROUP)
    assert (f.style, f.source, f.group) == (JAVA, FROM_FILE, GROUP)
    assert f.path.name == "offsets.json" and f.path.parent.parent.parent == setup.offsets_dir
    assert f.offsets == {mq: PER_QUEUE for mq in setup.store_times}
    assert f.main_bytes is not None and f.main_bytes.startswith(b'{\n\t"offsetTable":{{')

    address = setup.cluster.namesrv_addr
    progress: Any = cli(
        "consumerProgress", "-g", GROUP, "--local-store", str(setup.offsets_dir), "-n", address, "--json"
    ).json()
    assert progress["diff_total"] == 0 and len(progress["queues"]) == QUEUES

    # re-consume from the middle of each queue: the time of its 4th message, as the broker finds it
    at = max(ts[3] for ts in setup.store_times.values())
    r = cli(
        "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(at),
        "--local-store", str(setup.offsets_dir), "-n", address, "--json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    doc: Any = r.json()
    targets = {(q["broker"], q["queue_id"]): q["new_offset"] for q in doc["queues"]}
    assert all(0 < o < PER_QUEUE for o in targets.values())
    assert f.path.with_name("offsets.json.bak").read_bytes() == f.main_bytes

    again = setup.consume(sum(PER_QUEUE - o for o in targets.values()))
    starts: dict[tuple[str, int], int] = {}
    for broker, qid, offset in again:
        starts[(broker, qid)] = min(offset, starts.get((broker, qid), offset))
    assert starts == targets  # the client resumed exactly where the reset put it
    assert len(again) == len(set(again)) == sum(PER_QUEUE - o for o in targets.values())
    (after,) = find_offset_files(setup.offsets_dir, GROUP)
    assert set(after.offsets.values()) == {PER_QUEUE} and after.style == JAVA
