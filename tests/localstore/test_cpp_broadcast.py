"""Proof on real files: the official C++ client 2.x (rocketmq-client-python) in BROADCASTING mode
writes its offsets.Json; we read it, our reset rewrites it, and the client restarted on the same
home consumes from the new offsets. And a bad file is judged as that client judges it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult

from mqadmin.admin import connect
from mqadmin.boost_archive import ArchiveHeader, boost_key, parse_boost_archive, render_boost_archive
from mqadmin.localstore import BOOST, FROM_FILE, find_offset_files
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import Message, MessageQueue
from tests.support import official_client as oc

pytestmark = pytest.mark.interop

TOPIC = "CppBroadcastTopic"
GROUP = "cpp_broadcast"
QUEUES = 3  # per broker, on two brokers
ROUNDS = 6  # messages per queue, sent round by round
RESET_TO = 2  # the round the reset goes back to


@pytest.fixture(scope="module")
def provisioned() -> oc.Provisioned:
    return oc.ensure_all()


def test_cpp_client_offsets_read_reset_and_resumed_from(
    provisioned: oc.Provisioned, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    cluster = MockCluster.create(tmp_path / "store", ("broker-a", "broker-b"))
    cluster.create_topic(TOPIC, QUEUES)
    work = tmp_path / "client"  # its home/ is the consumer's $HOME, kept across both runs
    try:
        with MockServer(cluster, namesrv_port=0) as server:
            address = server.namesrv_addr
            queues = sorted(MessageQueue(TOPIC, b, q) for b in ("broker-a", "broker-b") for q in range(QUEUES))
            sent: dict[str, tuple[MessageQueue, int]] = {}  # UNIQ_KEY -> queue, offset
            with oc.push_consumer(address, GROUP, TOPIC, workdir=work, broadcasting=True) as first:
                # a new broadcasting consumer starts at the max offset: it must pull before we send
                first.wait_for_log(f"Start to pull MessageQueue [topic={TOPIC},", timeout=30, count=len(queues))
                admin = connect(address, timeout=10)
                try:
                    for n in range(ROUNDS):
                        for mq in queues:
                            res = admin.send(TOPIC, Message(TOPIC, f"round {n}".encode(), {"TAGS": "t"}), queue=mq)
                            assert res.queue_offset == n and res.uniq_key
                            sent[res.uniq_key] = (mq, n)
                        time.sleep(0.03)  # rounds apart in store time, so a time finds a round
                finally:
                    admin.close()
                got = first.wait_for_messages(len(sent), timeout=60)
                first.stop()
            assert first.of("shutdown"), "clean shutdown: offsets persisted"
            assert sorted(_delivered(got, sent)) == sorted(sent.values())
            stored = {sent[m["properties"]["UNIQ_KEY"]]: m["store_timestamp"] for m in got}

            # the client's own file: a Boost archive, every queue at the end
            (offsets_file,) = (work / "home" / ".rocketmq_offsets").rglob("offsets.Json")
            (f,) = find_offset_files(work / "home" / ".rocketmq_offsets", GROUP)
            assert (f.path, f.style, f.source, f.note) == (offsets_file, BOOST, FROM_FILE, None)
            assert f.client.endswith("@DEFAULT") and f.archive == ArchiveHeader(library_version=17)
            assert f.offsets == dict.fromkeys(queues, ROUNDS)
            assert not offsets_file.with_name("offsets.Json.bak").exists()

            local = str(work / "home")
            q: Any = cli("queryOffset", "-t", TOPIC, "--local-store", local, "-n", address, "--json").json()
            assert {(r["broker"], r["queue_id"], r["consumer_offset"], r["lag"]) for r in q["queues"]} == {
                (mq.broker_name, mq.queue_id, ROUNDS, 0) for mq in queues
            }

            at = min(ts for (_mq, offset), ts in stored.items() if offset == RESET_TO)
            reset_run = cli(
                "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", str(at),
                "--local-store", local, "-n", address, "--json",
            )  # fmt: skip
            assert reset_run.code == 0, reset_run.stderr
            doc: Any = reset_run.json()
            assert {(q["broker"], q["queue_id"]): q["new_offset"] for q in doc["queues"]} == {
                (mq.broker_name, mq.queue_id): RESET_TO for mq in queues
            }
            (reset,) = find_offset_files(work / "home", GROUP)
            assert reset.offsets == dict.fromkeys(queues, RESET_TO) and reset.key_text == f.key_text
            assert reset.archive == f.archive and not offsets_file.with_name("offsets.Json.bak").exists()

            # the client restarted on the same home resumes exactly where the reset put it
            expected = [(mq, o) for mq in queues for o in range(RESET_TO, ROUNDS)]
            with oc.push_consumer(address, GROUP, TOPIC, workdir=work, broadcasting=True, name="restarted") as again:
                again.wait_for_messages(len(expected), timeout=60)
                time.sleep(1)  # nothing more comes
                again.stop()
            assert sorted(_delivered(again.messages, sent)) == sorted(expected)
            (after,) = find_offset_files(work / "home", GROUP)
            assert after.offsets == dict.fromkeys(queues, ROUNDS) and after.style == BOOST
            assert parse_boost_archive(offsets_file.read_bytes())[1] == ArchiveHeader(library_version=17)
    finally:
        cluster.close()


# A good archive of one queue, as the client writes it, to break in the client's eyes or not.
GOOD = render_boost_archive({boost_key(MessageQueue(TOPIC, "broker-a", 0)): 0}, ArchiveHeader())


@pytest.mark.parametrize(
    ("main", "bak", "client_starts"),
    [
        pytest.param(b"", None, False, id="empty"),
        pytest.param(GOOD[:-10], None, False, id="cut-short"),
        pytest.param(b'{"offsetTable":{}}', None, False, id="not-an-archive"),
        pytest.param(GOOD + b"junk", None, True, id="bytes-after-the-last-entry"),  # Boost reads on; we refuse
        pytest.param(None, GOOD, True, id="only-the-bak"),  # an unfinished write: never read
    ],
)
def test_a_bad_file_is_judged_as_the_client_judges_it(
    provisioned: oc.Provisioned, tmp_path: Path, main: bytes | None, bak: bytes | None, client_starts: bool
) -> None:
    """Our note says "fails to start" exactly when the real client refuses to start on the file."""
    work = tmp_path / "client"
    folder = work / "home" / ".rocketmq_offsets" / "127.0.0.1@DEFAULT" / GROUP
    folder.mkdir(parents=True)
    for file, content in (("offsets.Json", main), ("offsets.Json.bak", bak)):
        if content is not None:
            (folder / file).write_bytes(content)
    (f,) = find_offset_files(work / "home", GROUP)
    assert f.style == BOOST and f.offsets == {}
    assert ("fails to start" in (f.note or "")) is (not client_starts), f.note
    cluster = MockCluster.create(tmp_path / "store", ("broker-a",))
    cluster.create_topic(TOPIC, 1)
    try:
        with MockServer(cluster, namesrv_port=0) as server:
            peer = oc.push_consumer(server.namesrv_addr, GROUP, TOPIC, workdir=work, broadcasting=True)
            with peer:
                if client_starts:
                    peer.wait_for_event("started", timeout=30)
                else:
                    assert peer.wait(30, check=False) != 0
                    assert "restart consumer" in peer.cpp_log()  # its "cleared by operator" error
    finally:
        cluster.close()


def _delivered(
    events: list[dict[str, Any]], sent: dict[str, tuple[MessageQueue, int]]
) -> list[tuple[MessageQueue, int]]:
    """(queue, offset) of each delivery, checked against what was sent (the event has no broker)."""
    out = []
    for m in events:
        mq, offset = sent[m["properties"]["UNIQ_KEY"]]
        assert (m["queue_id"], m["queue_offset"]) == (mq.queue_id, offset)
        out.append((mq, offset))
    return out
