"""The Java mqadmin, pointed at our mock server, reads what our CLI reads (5.x asks for
GET_TOPIC_CONFIG while building consume stats; 4.x does not), on each broker line the offset
commands are held to (5.5.1: the 5.5.0 tool, as Maven Central serves it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import DEMO_GROUP, seed_demo
from mqadmin.mock.server import MockServer
from tests.support import realbroker as rb

pytestmark = pytest.mark.realbroker


@pytest.mark.parametrize("version", rb.OFFSET_VERSIONS)
def test_java_consumer_progress_equals_ours(tmp_path: Path, version: str) -> None:
    cluster = MockCluster.create(tmp_path / "store", version=version)
    seed_demo(cluster)
    with MockServer(cluster, namesrv_port=0) as server:
        java = rb.check_java_mqadmin(
            version, server.namesrv_addr, "consumerProgress", "-g", DEMO_GROUP, workdir=tmp_path
        )
        ours = subprocess.run(
            [
                sys.executable,
                "-m",
                "mqadmin",
                "consumerProgress",
                "-n",
                server.namesrv_addr,
                "-g",
                DEMO_GROUP,
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    doc = json.loads(ours.stdout)
    java_rows = {
        (cols[0], cols[1], int(cols[2])): (int(cols[3]), int(cols[4]), int(cols[5]))
        for cols in (line.split() for line in java.stdout.splitlines())
        if len(cols) >= 6 and cols[0] == "TopicTest"
    }
    our_rows = {
        (q["topic"], q["broker"], q["queue_id"]): (q["broker_offset"], q["consumer_offset"], q["diff"])
        for q in doc["queues"]
        if q["topic"] == "TopicTest"
    }
    assert java_rows == our_rows and len(our_rows) == 8
    total = "Consume Diff Total" if version.startswith("5") else "Diff Total"
    assert f"{total}: {doc['diff_total']}" in java.stdout
