"""What each command costs on the wire against a served two-broker cluster: requests and TCP
connections have upper bounds, so a change that asks the cluster again fails here. On a remote
cluster each request is a round trip and a way to fail."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from conftest import BROKER_VERSIONS, HOUR_MS, CliResult, store_address

from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from tests.support.counting import Counts, counting

BROKERS = ("broker-a", "broker-b")
QUEUES = 8  # 4 per broker
#: one name server and one connection per broker, reused by every step of the run
CONNECTIONS = 1 + len(BROKERS)
#: a reset's requests by broker version: a 4.x broker's time search lands near the time, so the
#: queues it lands before are read (pulls), and it writes offsets one by one
RESET_REQUESTS = {"4.9.8": 63, "5.3.3": 49}


@pytest.fixture(scope="module", params=BROKER_VERSIONS)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(broker version, name server address) of a served store, shared by the module's tests."""
    import time

    root = tmp_path_factory.mktemp("wire") / "store"
    now = int(time.time() * 1000)
    cluster = MockCluster.create(root, BROKERS, version=request.param)
    fill_topic(cluster, "TopicTest", 800, now - 2 * HOUR_MS, now - 1000, queues_per_broker=QUEUES // len(BROKERS))
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g", "TopicTest", None)
    cluster.close()
    with store_address(root, "tcp") as addr:
        yield request.param, addr


def run(cli: Callable[..., CliResult], *args: str) -> tuple[CliResult, Counts]:
    with counting() as counts:
        r = cli(*args)
    assert r.code == 0, r.stderr
    assert counts.admins == 1, counts.summary()
    assert counts.connections <= CONNECTIONS, counts.summary()
    # the cluster is looked at once per run, whoever asks
    assert counts.by_code["GET_BROKER_CLUSTER_INFO"] <= 1, counts.summary()
    for code in ("GET_BROKER_RUNTIME_INFO", "GET_BROKER_CONFIG"):
        assert counts.by_code[code] <= len(BROKERS), counts.summary()
    return r, counts


def test_reads_cost_a_handful_of_requests(served: tuple[str, str], cli: Callable[..., CliResult]) -> None:
    _, address = served
    _, query = run(cli, "queryOffset", "-n", address, "-t", "TopicTest", "-g", "g", "--json")
    assert query.requests <= 7, query.summary()
    _, progress = run(cli, "consumerProgress", "-n", address, "-g", "g", "--json")
    assert progress.requests <= 5, progress.summary()
    _, replay = run(cli, "rangeReplay", "-n", address, "-t", "TopicTest", "-b", "-1h", "--dry-run", "--json")
    assert replay.requests <= 58, replay.summary()


def test_a_reset_and_its_restore_look_at_the_cluster_once_and_read_offsets_fresh(
    served: tuple[str, str], cli: Callable[..., CliResult]
) -> None:
    """Bounds come from one topic-stats request per broker; the stale-plan check before the first
    write and the read-back after it still read every queue's offset from the brokers."""
    version, address = served
    args = ("-n", address, "-g", "g", "--yes", "--json")
    r, reset = run(cli, "resetOffsetByTime", *args, "-t", "TopicTest", "-s", "-1h")
    assert reset.requests <= RESET_REQUESTS[version], reset.summary()
    assert reset.by_code["GET_TOPIC_STATS_INFO"] <= len(BROKERS), reset.summary()
    assert reset.by_code["GET_MIN_OFFSET"] == 0, reset.summary()
    assert reset.by_code["QUERY_CONSUMER_OFFSET"] >= 2 * QUEUES, reset.summary()
    backup = json.loads(r.stdout)["backup"]
    assert backup

    _, restore = run(cli, "restoreOffset", *args, "--from", backup)
    assert restore.requests <= 41, restore.summary()
    assert restore.by_code["QUERY_CONSUMER_OFFSET"] >= 2 * QUEUES, restore.summary()
