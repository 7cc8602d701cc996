"""Real clusters shared across the integration modules.

Starting and stopping a real cluster costs 30-60 s on two cores, so modules that only read
and write offsets on their own topics and groups share one per version: ``shared_cluster``
starts it on first use; the tests of one version run back to back and its cluster stops after
the last of them (not at the end of the session, where idle JVMs would slow every module in
between, nor beside another version's). A module that
restarts or kills a broker, or needs other broker settings at start, keeps its own cluster.
"""

from __future__ import annotations

import re
import time
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
#: id of the test after whose teardown a version's cluster stops
_stop_after: dict[int, list[str]] = {}


def _stop(version: str) -> None:
    cluster = _clusters.pop(version, None)
    if cluster is not None:
        cluster.stop(check=False, grace=0)  # nobody reads a shared cluster's stores afterwards


def stop_cleanly(version: str) -> None:
    """Stop the version's shared cluster as a clean shutdown does (raising if it was not one), so
    its stores can be read: the harness's smoke test, which runs last among the version's users,
    checks what a clean stop leaves. A later user gets a fresh cluster."""
    cluster = _clusters.pop(version, None)
    if cluster is not None:
        cluster.stop()


def _stop_all() -> None:
    for version in list(_clusters):
        _stop(version)


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


def send_numbered(namesrv: str, topic: str, count: int) -> int:
    """Send ``count`` messages ``m0``, ``m1``, ... to ``topic`` (once its route has reached the
    name server, which a new topic's does with the broker's next registration); returns a time
    in ms just before the first of them."""
    from mqadmin.model import Message
    from mqadmin.remoting.backend import RemotingAdmin

    admin = RemotingAdmin(namesrv, timeout=10)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.topic_route(topic)
                break
            except Exception:
                assert time.monotonic() < deadline, f"no route for {topic}"
                time.sleep(0.5)
        before = int(time.time() * 1000) - 1000
        for i in range(count):
            admin.send(topic, Message(topic, f"m{i}".encode()))
        return before
    finally:
        admin.close()


#: a parameter value or module ``VERSION`` that names the broker version an item runs on
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def _version_of(item: pytest.Item) -> str | None:
    """The version a ``shared_cluster`` user runs on: its parameter that names one (the modules'
    version-parametrized fixtures), else its module's ``VERSION``; None if neither says."""
    callspec = getattr(item, "callspec", None)
    values = [*(callspec.params.values() if callspec else ()), getattr(getattr(item, "module", None), "VERSION", None)]
    return next((v for v in values if isinstance(v, str) and _VERSION.fullmatch(v)), None)


def _module_of(item: pytest.Item) -> object:
    return getattr(item, "module", None)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection and pytest's own grouping by parameter
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Users of one version run back to back, so each cluster lives only while its users run:
    every user whose version is known moves, in its order, to where the first user was, grouped
    by version (4.9.7's, then 5.3.3's, ...; a module's tests of one version stay together and in
    file order). Each version's cluster stops after the last test of its last user's module run,
    once that module's fixtures (consumers, settings put back) are done with it."""
    users = [item for item in items if "shared_cluster" in getattr(item, "fixturenames", ()) and _version_of(item)]
    _stop_after.clear()
    if not users:
        return
    first = items.index(users[0])
    moved = set(map(id, users))
    rest = [item for item in items if id(item) not in moved]
    versions = list(dict.fromkeys(map(_version_of, users)))
    grouped = sorted(users, key=lambda item: versions.index(_version_of(item)))
    items[:] = rest[:first] + grouped + rest[first:]
    for version in versions:
        last = max(i for i, item in enumerate(items) if id(item) in moved and _version_of(item) == version)
        while last + 1 < len(items) and _module_of(items[last + 1]) is _module_of(items[last]):
            last += 1  # a module's parametrized fixture is torn down only when the next test sets up
        _stop_after.setdefault(id(items[last]), []).append(version)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    for version in _stop_after.pop(id(item), ()):
        _stop(version)
