"""Smoke test of the real-broker harness: each supported version boots, serves Java mqadmin,
and leaves a consistent store behind after stop."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import realbroker as rb
from tests.support import shared_clusters

pytestmark = pytest.mark.realbroker

TOPIC = "SmokeTopic"
GROUP = "SmokeGroup"


def _rows(stdout: str, first: str) -> list[list[str]]:
    """Whitespace-split table rows whose first column is ``first``."""
    return [line.split() for line in stdout.splitlines() if line.split()[:1] == [first]]


def test_ensure_dist_is_cached() -> None:
    """The cache marker makes later resolutions free (no Maven run)."""
    for version in rb.VERSIONS:
        rb.ensure_dist(version)
        started = time.monotonic()
        lib = rb.ensure_dist(version)
        assert time.monotonic() - started < 0.5
        assert any(lib.glob(f"org.apache.rocketmq.rocketmq-tools-{version}.jar"))


@pytest.mark.parametrize("version", rb.VERSIONS)
def test_real_cluster_smoke(version: str, shared_cluster: Callable[[str], rb.RealCluster]) -> None:
    """On the version's shared cluster (the harness started it), then stopped here: the last of
    its users, so what the others left behind must not spoil a clean stop either."""
    cluster = shared_cluster(version)
    name, addr = cluster.brokers[0]
    assert cluster.namesrv_addr.startswith("127.0.0.1:")
    assert all(a.startswith("127.0.0.1:") for a in cluster.broker_addrs)

    out = cluster.mqadmin("clusterList").stdout
    rows = sorted(r[:5] for r in _rows(out, cluster.cluster_name))
    tag = "V" + version.replace(".", "_")
    assert rows == sorted([cluster.cluster_name, n, "0", a, tag] for n, a in cluster.brokers)

    out = cluster.mqadmin("updateTopic", "-c", cluster.cluster_name, "-t", TOPIC, "-r", "4", "-w", "4").stdout
    assert all(f"create topic to {a} success." in out for a in cluster.broker_addrs)
    assert f"topicName={TOPIC}, readQueueNums=4, writeQueueNums=4, perm=RW-" in out

    out = cluster.mqadmin("updateSubGroup", "-c", cluster.cluster_name, "-g", GROUP).stdout
    assert all(f"create subscription group to {a} success." in out for a in cluster.broker_addrs)
    assert f"groupName={GROUP}, consumeEnable=true" in out

    out = cluster.mqadmin("sendMessage", "-t", TOPIC, "-p", "hello", "-b", name, "-i", "2").stdout
    assert _rows(out, name)[0][1:3] == ["2", "SEND_OK"]

    out = cluster.mqadmin("topicStatus", "-t", TOPIC).stdout
    for broker in cluster.broker_names:
        offsets = {int(r[1]): (int(r[2]), int(r[3])) for r in _rows(out, broker)}
        assert offsets == {0: (0, 0), 1: (0, 0), 2: (0, 1 if broker == name else 0), 3: (0, 0)}

    # Failures exit 0 with a stack trace; the checked wrapper must notice.
    with pytest.raises(rb.MQAdminError):
        cluster.mqadmin("topicStatus", "-t", "NoSuchTopic")

    rb.commit_offset(addr, GROUP, TOPIC, 2, 1)
    head, _ = rb.remoting_call(addr, rb.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 2})
    assert head["code"] == 0 and head["extFields"]["offset"] == "1"

    # A clean stop removes the abort marker and persists the committed offset.
    shared_clusters.stop_cleanly(version)
    assert cluster.unclean_stops == []
    assert not any((store / "abort").exists() for store in cluster.store_dirs)
    store = cluster.store_dirs[0]
    table = rb.parse_fastjson(cluster.consumer_offset_file().read_bytes())["offsetTable"]
    assert table[f"{TOPIC}@{GROUP}"] == {"2": 1}
    assert (store / "commitlog" / "00000000000000000000").stat().st_size == 16 * 1024 * 1024


def test_proxy_dist_is_cached_apart() -> None:
    """The proxy's closure lives beside the version's lib dir, never mixed into it."""
    lib = rb.ensure_dist("5.3.3", rb.PROXY_COMPONENT)
    started = time.monotonic()
    assert rb.ensure_dist("5.3.3", rb.PROXY_COMPONENT) == lib
    assert time.monotonic() - started < 0.5
    assert lib.parent.name == "5.3.3-proxy"
    assert any(lib.glob("org.apache.rocketmq.rocketmq-proxy-5.3.3.jar"))
    assert not any(rb.ensure_dist("5.3.3").glob("org.apache.rocketmq.rocketmq-proxy-*.jar"))


def test_proxy_refuses_clusters_it_cannot_front(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="from 5.0 on"):
        rb.RealProxy(rb.RealCluster("4.9.7", tmp_path / "a"))
    with pytest.raises(ValueError, match="plain clusters only"):
        rb.RealProxy(rb.RealCluster("5.3.3", tmp_path / "b", credentials=("admin", "secret"), auth=True))


def test_split_release_auth_and_proxy(tmp_path: Path) -> None:
    """A 5.5.1 cluster from Central cannot run the auth model (no rocketmq-auth 5.5.1); its
    proxy is the 5.5.0 release's."""
    with pytest.raises(ValueError, match="no matching rocketmq-auth"):
        rb.RealCluster("5.5.1", tmp_path / "a", credentials=("admin", "secret"), auth=True)
    assert "5.5.1" not in rb.AUTH_VERSIONS and "5.5.0" in rb.AUTH_VERSIONS
    assert rb.RealProxy(rb.RealCluster("5.5.1", tmp_path / "b")).version == "5.5.0"
    assert rb.RealProxy(rb.RealCluster("5.3.3", tmp_path / "c")).version == "5.3.3"
