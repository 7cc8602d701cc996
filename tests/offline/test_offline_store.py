"""``-n store:///path``: a stopped broker's store answers as the broker did, and is never modified."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, Store

from mqadmin import fastjson
from mqadmin.admin import connect
from mqadmin.errors import UsageError
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.model import MessageQueue
from mqadmin.replay.planner import plan_window
from mqadmin.replay.worker import MessageFilter, run_slice

MQ = MessageQueue("TopicTest", "broker-a", 1)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for folders): equal snapshots, unchanged tree."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")}


def store_address(path: Path, query: str = "") -> str:
    return f"store://{path}{query}"


def without_tps(doc: Any) -> Any:
    doc = dict(doc)
    doc.pop("tps", None)
    return doc


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_store_answers_exactly_what_the_broker_answers(
    version: str, make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """The same store seen through the broker (mock://) and offline (store://): same JSON."""
    now = int(time.time() * 1000)
    store = make_store(version, count=800, groups={"g": None, "lagging": now - HOUR_MS}, now_ms=now)
    half = store.start_ms + HOUR_MS
    for args in (
        ("queryOffset", "-t", "TopicTest", "-g", "g", "-s", str(half)),
        ("queryOffset", "-t", "TopicTest", "-s", str(store.start_ms - 5000)),
        ("queryOffset", "-t", "TopicTest", "-s", str(store.end_ms + 5000)),
        ("queryOffset", "-t", "TopicTest", "-s", str(store.start_ms + 37 * 72_000 + 1)),
        ("resetOffsetByTime", "-g", "g", "-t", "TopicTest", "-s", str(half), "--dry-run"),
    ):
        live = cli(*args, "-n", store.address, "--json")
        offline = cli(*args, "-n", store_address(store.path), "--json")
        assert live.code == offline.code == 0, offline.stderr
        assert offline.json() == live.json(), args
    live_p: Any = cli("consumerProgress", "-g", "g", "-n", store.address, "--json").json()
    offline_p: Any = cli("consumerProgress", "-g", "g", "-n", store_address(store.path), "--json").json()
    assert offline_p["tps"] is None and without_tps(offline_p) == without_tps(live_p)
    table = cli("consumerProgress", "-g", "g", "-n", store_address(store.path)).stdout
    assert "Consume TPS: n/a (offline store)" in table
    groups: Any = cli("consumerProgress", "-n", store_address(store.path), "--json").json()
    assert {g["group"] for g in groups["groups"]} == {"g", "lagging"}
    assert all(g["version"] == "OFFLINE" for g in groups["groups"])


@pytest.mark.parametrize("version", BROKER_VERSIONS)
def test_replay_window_reads_the_same_messages(version: str, make_store: Callable[..., Store]) -> None:
    """What rangeReplay does (plan the window, pull its slices) gives the same messages offline."""
    store = make_store(version, count=800)
    begin, end = store.start_ms + HOUR_MS // 3, store.start_ms + HOUR_MS
    got: dict[str, list[tuple[str, int, int, bytes]]] = {}
    for name, address in (("live", store.address), ("offline", store_address(store.path))):
        admin = connect(address, read_only=True)
        try:
            queues = admin.topic_route("TopicTest").message_queues()
            plan = plan_window(admin, queues, begin, end, slice_size=7)
            flt = MessageFilter(begin, end)
            got[name] = [
                (m.broker_name, m.queue_id, m.queue_offset, m.body)
                for s in plan.slices
                for m in run_slice(admin, s, flt)[0]
            ]
        finally:
            admin.close()
    assert got["offline"] == got["live"]
    assert 255 <= len(got["offline"]) <= 278  # 800 messages over 2 h: a third of them in 40 min


def test_the_store_is_never_modified(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], mqadmin_home: Path
) -> None:
    store = make_store(count=400, groups={"g": int(time.time() * 1000) - HOUR_MS})
    root = store.path
    (root / "broker-a" / "config" / "consumerOffset.json").write_text("{ torn")  # makes the reader use the .bak
    before = snapshot(root)
    address = store_address(root)
    runs = [
        cli("queryOffset", "-n", address, "-t", "TopicTest", "-g", "g", "-s", "-1h", "--json"),
        cli("consumerProgress", "-n", address, "-g", "g", "--json"),
        cli("consumerProgress", "-n", address, "--max-lag", "0"),
        cli("resetOffsetByTime", "-n", address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "--dry-run"),
        cli("resetOffsetByTime", "-n", address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "--yes"),
    ]
    assert [r.code for r in runs] == [0, 0, 3, 0, 2]
    admin = connect(address)  # read_only=False still opens read-only
    try:
        for mq in admin.topic_route("TopicTest").message_queues():
            assert admin.pull(mq, 0, 32).messages
        with pytest.raises(UsageError, match="read-only"):
            admin.update_consumer_offset("g", MQ, 0)
    finally:
        admin.close()
    assert snapshot(root) == before
    assert not (mqadmin_home / "backups").exists()


def test_writing_commands_refuse_and_say_why(make_store: Callable[..., Store], cli: Callable[..., CliResult]) -> None:
    store = make_store(count=80, groups={"g": None})
    address = store_address(store.path)
    r = cli("resetOffsetByTime", "-n", address, "-g", "g", "-t", "TopicTest", "-s", "-1h")
    assert r.code == 2
    assert "opened read-only" in r.stderr and "--dry-run shows the plan" in r.stderr
    backup = cli("resetOffsetByTime", "-n", store.address, "-g", "g", "-t", "TopicTest", "-s", "-1h", "--json")
    path = backup.json()["backup"]  # type: ignore[index]
    r = cli("restoreOffset", "-n", address, "--from", path)
    assert r.code == 2 and "opened read-only" in r.stderr
    dry = cli("restoreOffset", "-n", address, "--from", path, "--dry-run", "--json")
    assert dry.code == 0 and dry.json()["dry_run"] is True  # type: ignore[index]


def test_one_broker_folder_a_list_and_parameters(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store("4.9.8", count=80, groups={"g": None})
    one: Any = cli("queryOffset", "-n", store_address(store.path / "broker-b"), "-t", "TopicTest", "--json").json()
    assert {q["broker"] for q in one["queues"]} == {"broker-b"}
    both = store_address(store.path / "broker-a") + ";" + str(store.path / "broker-b")
    two: Any = cli("queryOffset", "-n", both, "-t", "TopicTest", "--json").json()
    assert len(two["queues"]) == 8
    named: Any = cli(
        "queryOffset", "-n", store_address(store.path / "broker-a", "?broker=bk1"), "-t", "TopicTest", "--json"
    ).json()
    assert {q["broker"] for q in named["queues"]} == {"bk1"}
    admin = connect(store_address(store.path / "broker-a", "?version=5.3.3&cluster=C1"))
    try:
        (info,) = admin.cluster_brokers()
        assert (info.version, info.cluster, info.broker_name) == ("5.3.3", "C1", "broker-a")
        assert info.addr == f"store://{store.path / 'broker-a'}"
    finally:
        admin.close()
    bad = cli("queryOffset", "-n", store_address(store.path, "?brokr=x"), "-t", "TopicTest")
    assert bad.code == 2 and "unknown store address parameter 'brokr'" in bad.stderr


def real_layout(tmp_path: Path, version: str = "5.3.3") -> tuple[Path, int]:
    """A store laid out as a real broker leaves it: ``<work>/<name>/store`` with broker.properties
    beside it, preallocated (zero-filled) commit-log and consume-queue files, no topics.json."""
    now = int(time.time() * 1000)
    cluster = MockCluster.create(tmp_path / "m", ("broker-x",), version=version)
    fill_topic(cluster, "Orders", 60, now - HOUR_MS, now - 1000, queues_per_broker=3)
    commit_at_time(cluster.brokers["broker-x"], "billing", "Orders", now - HOUR_MS // 2)
    cluster.close()
    root = tmp_path / "work" / "broker-x" / "store"
    root.parent.mkdir(parents=True)
    shutil.move(str(tmp_path / "m" / "broker-x"), root)
    (root.parent / "broker.properties").write_text(
        f"brokerClusterName=ProdCluster\nbrokerName=broker-x\nstorePathRootDir={root}\nlistenPort=10911\n"
    )
    for f in (root / "config").glob("topics.json*"):
        f.unlink()
    for f in (root / "consumequeue").rglob("0" * 20):
        with open(f, "ab") as fh:
            fh.write(b"\0" * (6000 - f.stat().st_size))
    (log,) = (root / "commitlog").iterdir()
    with open(log, "ab") as fh:
        fh.write(b"\0" * (1 << 20))
    if version.startswith("5"):
        (root / "timerwheel").write_bytes(b"\0" * 64)
    (root / "lock").write_text("lock")
    return root, now


def test_real_layout_names_version_and_topics_from_consume_queues(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    root, now = real_layout(tmp_path)
    for address in (store_address(root), store_address(root.parent.parent)):
        admin = connect(address)
        try:
            (info,) = admin.cluster_brokers()
            assert (info.broker_name, info.cluster, info.version) == ("broker-x", "ProdCluster", "5.3.3")
            assert "Orders" in admin.list_topics()
            mq = MessageQueue("Orders", "broker-x", 2)
            assert (admin.min_offset(mq), admin.max_offset(mq)) == (0, 20)
            assert admin.search_offset(mq, now + HOUR_MS) == 20  # 5.x: after the last message → max
        finally:
            admin.close()
    doc: Any = cli("consumerProgress", "-n", store_address(root), "-g", "billing", "--json").json()
    assert {(q["queue_id"], q["broker_offset"]) for q in doc["queues"]} == {(0, 20), (1, 20), (2, 20)}
    assert 25 <= doc["diff_total"] <= 35
    old, _ = real_layout(tmp_path / "v4", "4.9.8")
    admin = connect(store_address(old))
    try:
        assert admin.cluster_brokers()[0].version == "4.9.8"
        assert admin.search_offset(MessageQueue("Orders", "broker-x", 2), now + HOUR_MS) == 19  # 4.x: max - 1
    finally:
        admin.close()


def test_expired_commit_log_files_move_the_min_offset(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    """A broker deletes old commit-log files before it trims the consume queues: entries that
    point below the first commit-log file are not there any more, as the broker's correctMinOffset says."""
    now = int(time.time() * 1000)
    cluster = MockCluster.create(tmp_path / "s", ("broker-a",), commitlog_file_size=8192)
    fill_topic(cluster, "TopicTest", 200, now - HOUR_MS, now - 1000, queues_per_broker=2)
    cluster.close()
    logs = sorted((tmp_path / "s" / "broker-a" / "commitlog").iterdir())
    assert len(logs) > 3
    for f in logs[:2]:
        f.unlink()
    first_left = int(logs[2].name)
    admin = connect(store_address(tmp_path / "s"))
    try:
        mq = MessageQueue("TopicTest", "broker-a", 0)
        lo, hi = admin.min_offset(mq), admin.max_offset(mq)
        assert 0 < lo < hi == 100
        first = admin.pull(mq, lo, 1).messages[0]
        assert first.commitlog_offset >= first_left and first.queue_offset == lo
        assert admin.pull(mq, 0, 1).status == "OFFSET_TOO_SMALL"
        assert admin.search_offset(mq, now - 2 * HOUR_MS) == lo
        assert admin.earliest_store_time(mq) == first.store_timestamp
    finally:
        admin.close()
    doc: Any = cli("queryOffset", "-n", store_address(tmp_path / "s"), "-t", "TopicTest", "-s", "-2h", "--json").json()
    assert all(q["offset_at_time"] == q["min_offset"] > 0 for q in doc["queues"])


def test_dead_broker_store_is_bounded_and_said_so(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """A killed broker leaves ``abort``, and consume-queue entries for commit-log bytes never flushed."""
    store = make_store(count=80, groups={"g": None})
    root = store.path / "broker-a"
    (root / "abort").write_bytes(b"")
    (log,) = (root / "commitlog").iterdir()
    end = log.stat().st_size
    with open(log, "ab") as fh:
        fh.write(b"\0" * 4096)  # preallocated, never written
    cq = root / "consumequeue" / "TopicTest" / "1" / ("0" * 20)
    with open(cq, "ab") as fh:
        for i in range(3):
            fh.write(struct.pack(">qiq", end + 200 * i, 200, 0))
    r = cli("queryOffset", "-n", store_address(store.path), "-t", "TopicTest", "--json")
    assert r.code == 0
    rows = {(q["broker"], q["queue_id"]): q for q in r.json()["queues"]}  # type: ignore[index]
    assert rows[("broker-a", 1)]["max_offset"] == 10
    assert "did not shut down cleanly" in r.stderr and str(root / "abort") in r.stderr


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[Callable[[Path], int]]:
    """Hold a POSIX lock on a store's ``lock`` file from another process, as a running broker does."""
    procs: list[subprocess.Popen[str]] = []

    def hold(root: Path) -> int:
        code = (
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(root / 'lock')!r}, os.O_RDWR)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)\n"
            "print('locked', flush=True)\n"
            "time.sleep(120)\n"
        )
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        return proc.pid

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def test_store_locked_by_a_running_broker_is_read_anyway(
    make_store: Callable[..., Store], cli: Callable[..., CliResult], lock_holder: Callable[[Path], int]
) -> None:
    store = make_store(count=80, groups={"g": None})
    root = store.path / "broker-a"
    (root / "lock").write_text("lock")
    (root / "abort").write_bytes(b"")  # a running broker has its abort file too
    before = snapshot(store.path)
    pid = lock_holder(root)
    r = cli("consumerProgress", "-n", store_address(store.path), "-g", "g", "--json")
    assert r.code == 0 and r.json()["diff_total"] == 0  # type: ignore[index]
    assert f"is locked by a running broker (pid {pid})" in r.stderr and "read-only anyway" in r.stderr
    assert "did not shut down cleanly" not in r.stderr
    assert snapshot(store.path) == before


def test_offsets_file_falls_back_to_bak_and_says_so(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=80, groups={"g": None})
    config = store.path / "broker-a" / "config"
    shutil.copy(config / "consumerOffset.json", config / "consumerOffset.json.bak")
    (config / "consumerOffset.json").write_text("")
    r = cli("queryOffset", "-n", store_address(store.path), "-t", "TopicTest", "-g", "g", "--json")
    assert r.code == 0 and all(q["consumer_offset"] == 10 for q in r.json()["queues"])  # type: ignore[index]
    assert "broker-a: config/consumerOffset.json is empty or corrupt; read consumerOffset.json.bak" in r.stderr
    (config / "consumerOffset.json.bak").write_text("{ torn")
    (config / "consumerOffset.json").write_text("{ torn too")
    r = cli("queryOffset", "-n", store_address(store.path), "-t", "TopicTest", "-g", "g", "--json")
    assert "neither config/consumerOffset.json nor its .bak is readable" in r.stderr


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "does not exist"),
        ("file", "is not a folder"),
        ("empty", "is not a RocketMQ broker store"),
        ("no-commitlog", "half a store: it has consume queues but no commit log"),
        ("empty-commitlog", "half a store: it has consume queues but no commit log"),
        ("no-consumequeue", "half a store: it has a commit log but no consumequeue/"),
    ],
)
def test_not_a_store(
    damage: str, message: str, make_store: Callable[..., Store], cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    store = make_store(count=40)
    target = store.path / "broker-a"
    if damage == "missing":
        target = tmp_path / "nowhere"
    elif damage == "file":
        target = target / "config" / "topics.json"
    elif damage == "empty":
        target = tmp_path / "empty"
        target.mkdir()
        (target / "README").write_text("not a store")
    elif damage == "no-commitlog":
        shutil.rmtree(target / "commitlog")
    elif damage == "empty-commitlog":
        for f in (target / "commitlog").iterdir():
            f.unlink()
    elif damage == "no-consumequeue":
        shutil.rmtree(target / "consumequeue")
    r = cli("queryOffset", "-n", store_address(target), "-t", "TopicTest")
    assert r.code == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_a_lite_enabled_brokers_offsets_file_is_read(
    make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    """A broker run with enableLmq persists every consumer offset to lmqConsumerOffset.json
    (LmqConsumerOffsetManager) and leaves consumerOffset.json as it was before: the newer file
    is the broker's, and the view says which it read."""
    store = make_store(count=80, groups={"g": None})
    config = store.path / "broker-a" / "config"
    current = fastjson.loads((config / "consumerOffset.json").read_text())
    (config / "lmqConsumerOffset.json").write_text(fastjson.dumps_pretty(current))
    for queues in current["offsetTable"].values():  # stale: from before enableLmq
        queues.update((q, 3) for q in queues)
    (config / "consumerOffset.json").write_text(fastjson.dumps_pretty(current))
    old = time.time() - 3600
    os.utime(config / "consumerOffset.json", (old, old))
    r = cli("queryOffset", "-n", store_address(store.path), "-t", "TopicTest", "-g", "g", "--json")
    assert r.code == 0 and all(q["consumer_offset"] == 10 for q in r.json()["queues"])  # type: ignore[index]
    assert "broker-a: read config/lmqConsumerOffset.json, the newer offsets file (the broker ran with enableLmq)" in (
        r.stderr
    )
    (config / "lmqConsumerOffset.json").unlink()
    r = cli("queryOffset", "-n", store_address(store.path), "-t", "TopicTest", "-g", "g", "--json")
    queues = r.json()["queues"]  # type: ignore[index]
    assert r.code == 0 and {q["consumer_offset"] for q in queues if q["broker"] == "broker-a"} == {3}
    assert "lmqConsumerOffset" not in r.stderr
