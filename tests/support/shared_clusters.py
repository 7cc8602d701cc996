"""Real clusters shared across the integration modules.

Starting and stopping a real cluster costs 30-60 s on two cores, so modules that only read
and write offsets on their own topics and groups share one per version: ``shared_cluster``
starts it on first use and it stops after the last test that asked for the fixture (not at
the end of the session, where idle JVMs would slow every module in between). A module that
restarts or kills a broker, or needs other broker settings at start, keeps its own cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support import realbroker as rb

#: how many masters a shared cluster has (the Java-parity modules' topology)
SHARED_BROKERS = 2
#: the first broker line with lite topics, and the broker.conf settings they need. Neither
#: touches ordinary topics and groups (upstream: an LMQ is a ``%LMQ%`` name, multi-dispatch
#: acts on messages that carry INNER_MULTI_DISPATCH); the one visible change is that the
#: broker persists all consumer offsets to config/lmqConsumerOffset.json (LmqConsumerOffsetManager)
LITE_SINCE = (5, 5)
LITE_SETTINGS = {"enableLmq": True, "enableMultiDispatch": True}


def settings(version: str) -> dict[str, object]:
    """The settings a shared cluster of ``version`` starts with beyond the harness's defaults."""
    return dict(LITE_SETTINGS) if tuple(map(int, version.split(".")[:2])) >= LITE_SINCE else {}


_clusters: dict[str, rb.RealCluster] = {}
_last_user: list[pytest.Item] = []


def _stop_all() -> None:
    while _clusters:
        _, cluster = _clusters.popitem()
        cluster.stop(check=False, grace=0)  # nobody reads a shared cluster's stores afterwards


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], rb.RealCluster]]:
    """``get(version)``: a running two-master cluster of that version with default settings,
    plus lite topics on 5.5+ (:func:`settings`).

    Users create their own topics and groups (names unique to the module) and leave broker
    settings as they found them."""

    def get(version: str) -> rb.RealCluster:
        if version not in _clusters:
            work = tmp_path_factory.mktemp(f"shared-{version}") / "rmq"
            cluster = rb.RealCluster(version, work, SHARED_BROKERS, extra_broker_conf=settings(version))
            cluster.start()
            _clusters[version] = cluster
        return _clusters[version]

    yield get
    _stop_all()


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    users = [item for item in items if "shared_cluster" in getattr(item, "fixturenames", ())]
    _last_user[:] = users[-1:]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _last_user and item is _last_user[0]:
        _stop_all()
