"""The official Python client as a test peer: provisioning, loading, and a real-broker round trip.

These tests prove the peers themselves (``peers/producer.py``, ``peers/push_consumer.py``), so
later interop tests can trust them: what the producer reports was stored, what the push
consumer reports was delivered, and its offsets reach the broker as the Java tool sees them.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mqadmin import localstore

from . import official_client as oc
from . import realbroker as rb

pytestmark = pytest.mark.interop

TOPIC = "PeerTopic"
GROUP = "PeerGroup"
COUNT = 50
TAGS = ("TagA", "TagB")


@pytest.fixture(scope="module")
def provisioned() -> oc.Provisioned:
    """Download/install once per module; a failure here is loud (PyPI down = red, not skipped)."""
    return oc.ensure_all()


def _closed_port() -> str:
    """A loopback address nobody listens on: the client must fail fast, not hang."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


# --------------------------------------------------------------------------------------
# Provisioning and loading (no broker, no network after the first download)
# --------------------------------------------------------------------------------------


def test_provisioning_is_idempotent_and_fast(provisioned: oc.Provisioned) -> None:
    started = time.monotonic()
    again = oc.ensure_all(provisioned.venv)
    assert time.monotonic() - started < 0.5
    assert again.library == provisioned.library == provisioned.venv / "rocketmq-native" / "librocketmq.so"
    data = again.library.read_bytes()
    assert data.startswith(b"\x7fELF") and b"CPP CORE VERSION: 2.1.0" in data
    # Downloaded, never installed: the sdist's own 'rocketmq' package must not shadow the wrapper's.
    assert not list(again.site_packages.glob("rocketmq_python_cvs*"))
    assert (again.site_packages / oc.CLIENT_DIST_INFO).is_dir()


def test_producer_starts_without_broker(provisioned: oc.Provisioned, tmp_path: Path) -> None:
    """Library loads, Producer('G').start()/shutdown() work with nothing listening."""
    peer = oc.producer(_closed_port(), TOPIC, 0, workdir=tmp_path, group="G").start()
    peer.wait(30)
    assert [e["event"] for e in peer.events] == ["started", "done", "shutdown"]
    # The C++ log went to the test's directory, named after the pid.
    pid = peer.of("started")[0]["pid"]
    assert (tmp_path / "logs" / f"{pid}_rocketmq-cpp.log.0").is_file()
    assert "CPP CORE VERSION: 2.1.0" in peer.cpp_log()


def test_send_without_namesrv_fails_fast(provisioned: oc.Provisioned, tmp_path: Path) -> None:
    peer = oc.producer(_closed_port(), TOPIC, 3, workdir=tmp_path).start()
    assert peer.wait(30, check=False) == 1
    (error,) = peer.of("error")
    assert error["i"] == 0 and error["error"] == "ProducerSendSyncFailed"
    assert "No route info of this topic" in error["message"]
    assert peer.of("done")[0]["sent"] == 0 and peer.of("shutdown")


def test_library_found_without_binutils(provisioned: oc.Provisioned, tmp_path: Path) -> None:
    """``find_library`` needs ld/objdump to honour LD_LIBRARY_PATH; the peers' shim does not.

    An empty PATH stands in for a machine without binutils: the bare wrapper cannot load
    there, the peer still can.
    """
    env = oc.peer_env(tmp_path / "bare", extra={"PATH": ""})
    del env["MQADMIN_LIBROCKETMQ"]
    proc = subprocess.run(
        [str(provisioned.python), "-c", "import rocketmq.client"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and "rocketmq dynamic library not found" in proc.stderr

    peer = oc.producer(_closed_port(), TOPIC, 0, workdir=tmp_path / "shim")
    peer.env_extra = {"PATH": ""}
    peer.start().wait(30)
    assert peer.of("shutdown")


def test_crashed_peer_fails_with_its_output(provisioned: oc.Provisioned, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import json, os, signal\n"
        "print(json.dumps({'event': 'started'}), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    peer = oc.Peer(script, [], tmp_path, name="crash").start()
    with pytest.raises(oc.PeerFailed) as info:
        peer.wait(30)
    text = str(info.value)
    assert "SIGSEGV (exit 139)" in text and '"event": "started"' in text
    assert "Fatal Python error: Segmentation fault" in text  # faulthandler's stack, from stderr


# --------------------------------------------------------------------------------------
# Real broker: produce with the peer, consume with the peer, check with the Java tool
# --------------------------------------------------------------------------------------


def _progress_rows(stdout: str) -> dict[int, tuple[int, int]]:
    """``consumerProgress -g`` rows of TOPIC as {queue id: (broker offset, consumer offset)}."""
    rows = {}
    for line in stdout.splitlines():
        cols = line.split()
        if cols[:1] == [TOPIC]:
            rows[int(cols[2])] = (int(cols[3]), int(cols[4]))
    return rows


def _wait_committed(cluster: rb.RealCluster, group: str, expected: dict[int, int], timeout: float) -> float:
    """Poll the Java tool until every queue's consumer offset equals its max; returns seconds waited.

    4.x fails the command until something is committed, 5.x prints an empty table with
    "Diff Total: 0", so only the per-queue rows count.
    """
    started = time.monotonic()
    rows: dict[int, tuple[int, int]] = {}
    out = ""
    while time.monotonic() - started < timeout:
        proc = cluster.mqadmin("consumerProgress", "-g", group, check=False)
        out = proc.stdout + proc.stderr
        rows = _progress_rows(proc.stdout)
        if rows and all(rows.get(q) == (n, n) for q, n in expected.items()):
            return time.monotonic() - started
        time.sleep(0.5)
    raise AssertionError(f"offsets of {group} not committed within {timeout}s; want {expected}, got {rows}\n{out}")


def _local_offsets_total(folder: Path, group: str) -> int | None:
    """The sum of a broadcast consumer's offsets in its offsets.Json, None before it is written."""
    if not folder.exists() or not any(folder.rglob(localstore.BOOST_FILE)):
        return None
    files = localstore.find_offset_files(folder, group)
    return sum(sum(f.offsets.values()) for f in files) if files else None


def _check_delivery(sent: list[dict[str, Any]], got: list[dict[str, Any]]) -> dict[int, int]:
    """Every sent message delivered once with its fields; returns {queue id: message count}."""
    by_id = {m["msg_id"]: m for m in got}
    assert len(by_id) == len(got) == len(sent), "duplicate or missing deliveries"
    for s in sent:
        m = by_id[s["msg_id"]]
        assert (m["topic"], m["tags"], m["keys"], m["body"]) == (TOPIC, s["tags"], s["keys"], s["body"])
        assert m["reconsume_times"] == 0 and m["status"] == "CONSUME_SUCCESS"
        assert m["properties"]["UNIQ_KEY"] == s["msg_id"]  # the send result's id is the client's UNIQ_KEY
    per_queue: dict[int, list[int]] = defaultdict(list)
    for m in got:
        per_queue[m["queue_id"]].append(m["queue_offset"])
    for offsets in per_queue.values():  # each queue delivered densely from 0
        assert sorted(offsets) == list(range(len(offsets)))
    # The send result's offset is the queue offset the broker assigned.
    assert sorted(s["offset"] for s in sent) == sorted(m["queue_offset"] for m in got)
    return {q: len(offsets) for q, offsets in per_queue.items()}


@pytest.mark.realbroker
@pytest.mark.parametrize("version", rb.VERSIONS)
def test_real_broker_round_trip(
    version: str, provisioned: oc.Provisioned, tmp_path: Path, shared_cluster: Callable[[str], rb.RealCluster]
) -> None:
    """On the cluster shared with other modules, the topic on its first broker only: one
    broker's four queues, as a single-broker cluster would route them."""
    timings: dict[str, float] = {}  # printed at the end: `pytest -rP` shows them
    cluster = shared_cluster(version)
    timings["broker_start_s"] = round(cluster.timings["start"], 2)
    cluster.mqadmin("updateTopic", "-b", cluster.broker_addrs[0], "-t", TOPIC, "-r", "4", "-w", "4")

    t0 = time.monotonic()
    sent = oc.produce(
        cluster.namesrv_addr,
        TOPIC,
        COUNT,
        workdir=tmp_path / "producer",
        tags=TAGS,
        keys="key-{i}",
        body="body-{i}",
    )
    timings["produce_s"] = round(time.monotonic() - t0, 2)
    assert [s["i"] for s in sent] == list(range(COUNT))
    assert {s["status"] for s in sent} == {"OK"}
    assert [s["tags"] for s in sent[:3]] == ["TagA", "TagB", "TagA"]

    consumer = oc.push_consumer(cluster.namesrv_addr, GROUP, TOPIC, workdir=tmp_path / "consumer")
    with consumer:
        got = consumer.wait_for_messages(COUNT, timeout=60)
        timings["first_message_s"] = got[0]["t"]
        timings["all_messages_s"] = got[-1]["t"]
        per_queue = _check_delivery(sent, got)
        assert sum(per_queue.values()) == COUNT
        # Committed while online: the C++ client pushes offsets every 5 s (oneway, logged),
        # so wait for its log line before paying for JVM-based polls.
        consumer.wait_for_log("updateConsumeOffsetToBroker", timeout=15)
        timings["commit_logged_s"] = round(time.monotonic() - consumer.started_at, 2)
        timings["commit_online_s"] = round(_wait_committed(cluster, GROUP, per_queue, 30), 2)
        # one more persist round (a line per queue) after the commit was seen: the consumer
        # kept pulling from the committed offsets, and nothing came twice
        logged = consumer.cpp_log().count("updateConsumeOffsetToBroker")
        consumer.wait_for_log("updateConsumeOffsetToBroker", timeout=15, count=logged + len(per_queue))
        assert len(consumer.messages) == COUNT, "redelivery after commit"
        consumer.stop()
    assert consumer.of("stopping")[0]["reason"] == "signal"
    assert consumer.of("shutdown"), "clean shutdown (persist offsets, unregister)"
    _wait_committed(cluster, GROUP, per_queue, 5)
    assert "unregisterClient to:" in consumer.cpp_log()

    # BROADCASTING with a tag filter on another group.  A new broadcasting consumer starts
    # at the queue's max offset (no local offset yet), so it must be pulling before we send.
    bgroup = GROUP + "_bc"
    bworkdir = tmp_path / "broadcast"
    with oc.push_consumer(
        cluster.namesrv_addr, bgroup, TOPIC, workdir=bworkdir, expression="TagA", broadcasting=True
    ) as bcast:
        bcast.wait_for_log(f"Start to pull MessageQueue [topic={TOPIC},", timeout=30, count=4)
        more = oc.produce(
            cluster.namesrv_addr,
            TOPIC,
            10,
            workdir=tmp_path / "producer2",
            tags=TAGS,
            keys="more-{i}",
            body="more-{i}",
        )
        tag_a = bcast.wait_for_messages(5, timeout=60)
        # its own offsets (persisted every 5 s) pass all it was sent, TagB included
        offsets_dir = bworkdir / "home" / ".rocketmq_offsets"
        deadline = time.monotonic() + 15
        while (total := _local_offsets_total(offsets_dir, bgroup)) != COUNT + len(more):
            assert time.monotonic() < deadline, f"broadcast offsets at {total}, want {COUNT + len(more)}"
            time.sleep(0.5)
        assert len(bcast.messages) == 5
        assert {m["msg_id"] for m in tag_a} == {s["msg_id"] for s in more if s["tags"] == "TagA"}
        assert bcast.of("started")[0]["model"] == "BROADCASTING"
    assert bcast.of("shutdown")
    (offsets_file,) = (bworkdir / "home" / ".rocketmq_offsets").rglob("offsets.Json")
    assert bgroup in str(offsets_file)
    # Not JSON despite the name: a boost text archive of {MessageQueue JSON: offset}.
    assert f'"topic" : "{TOPIC}"' in offsets_file.read_text()
    print(json.dumps({"version": version, **timings}))
