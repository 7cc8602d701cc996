"""The context every command runs in: the backend's notes reach stderr whichever command opens it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CliResult, Store

from mqadmin.mock.seed import DEMO_REFRESH_MS


def _dead_broker(store: Store) -> Path:
    """A store whose broker was killed: it left its ``abort`` file behind."""
    root = store.path / "broker-a"
    (root / "abort").write_bytes(b"")
    return root


@pytest.mark.parametrize(
    "command",
    [
        ("queryOffset", "-t", "TopicTest"),
        ("consumerProgress", "-g", "g"),
        ("rangeReplay", "-t", "TopicTest", "-b", "-3h", "--dry-run", "--to", "stdout"),
    ],
    ids=lambda c: c[0],
)
def test_every_command_says_what_the_backend_notes(
    command: tuple[str, ...], make_store: Callable[..., Store], cli: Callable[..., CliResult]
) -> None:
    store = make_store(count=40, groups={"g": None})
    root = _dead_broker(store)
    r = cli(*command, "-n", f"store://{store.path}")
    assert r.code == 0, r.stderr
    line = f"{root / 'abort'} exists: the broker did not shut down cleanly"
    assert r.stderr.count(line) == 1, r.stderr
    assert "queue entries past the end of the commit log are left out" in r.stderr


def test_range_replay_says_the_stale_demo_was_seeded_again(mqadmin_home: Path, cli: Callable[..., CliResult]) -> None:
    assert cli("queryOffset", "-n", "mock://demo", "-t", "TopicTest").code == 0
    cluster = mqadmin_home / "mock" / "demo" / "cluster.json"
    doc = json.loads(cluster.read_text())
    doc["demo"]["seeded_at"] -= DEMO_REFRESH_MS + 60_000
    cluster.write_text(json.dumps(doc))
    r = cli("rangeReplay", "-n", "mock://demo", "-t", "TopicTest", "-b", "-40m", "--dry-run", "--to", "stdout")
    assert r.code == 0, r.stderr
    assert r.stderr.count("mock://demo was ") == 1 and "seeded again" in r.stderr


@pytest.mark.parametrize("door", ["embedded", "tcp"], indirect=True)
def test_a_writer_reopens_only_a_store_on_disk(make_store: Callable[..., Store], door: str) -> None:
    """An embedded store opened for reading is opened again for writing; a cluster's connections
    serve both, so a run builds one admin and looks at the cluster once."""
    from mqadmin.context import Context

    store = make_store(count=8)
    ctx = Context(address=store.address)
    try:
        reader = ctx.admin()
        writer = ctx.admin(write=True)
        assert (writer is reader) == (door == "tcp")
        assert ctx.admin() is writer and ctx.admin(write=True) is writer
    finally:
        ctx.close()


@pytest.mark.parametrize("door", ["tcp"], indirect=True)
def test_each_watch_refresh_looks_at_the_cluster_again(make_store: Callable[..., Store], door: str) -> None:
    """--watch runs the command again with the same context: tick() drops the cluster snapshot,
    so a broker added or gone shows on the next refresh."""
    from mqadmin.context import Context
    from tests.support.counting import counting

    store = make_store(count=8)
    ctx = Context(address=store.address)
    try:
        with counting() as counts:
            for _ in range(2):
                ctx.tick()
                ctx.admin().cluster_brokers()
                ctx.admin().cluster_brokers()
        assert counts.by_code["GET_BROKER_RUNTIME_INFO"] == 2 * 2, counts.summary()  # two brokers, two looks
    finally:
        ctx.close()
