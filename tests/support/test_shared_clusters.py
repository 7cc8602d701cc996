"""The shared clusters' schedule: the tests of one version run back to back, and each version's
cluster stops after its last user's module is done with it (no JVM, no broker)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import shared_clusters as sc


@pytest.fixture(autouse=True)
def own_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """This session's own schedule stays as collected."""
    monkeypatch.setattr(sc, "_stop_after", {})


def _item(name: str, module: Any, version: str | None = None, uses: bool = True) -> Any:
    params = {"world": version} if version else {}
    return SimpleNamespace(
        name=name,
        module=module,
        callspec=SimpleNamespace(params=params) if params else None,
        fixturenames=("shared_cluster",) if uses else ("tmp_path",),
    )


def _names(items: list[Any]) -> list[str]:
    return [item.name for item in items]


def _schedule(items: list[Any]) -> dict[str, list[str]]:
    sc.pytest_collection_modifyitems(items)
    by_id = {id(item): item.name for item in items}
    return {by_id[key]: versions for key, versions in sc._stop_after.items()}


def test_users_run_grouped_by_version_where_the_first_one_was() -> None:
    diff, other, parity, mock, path, peers = (SimpleNamespace(name=n) for n in "DXJMRS")
    path.VERSION = "5.5.1"  # a module on one version says so in its VERSION
    items = [
        _item("pre", other, uses=False),
        *(_item(f"d{v}", diff, v) for v in ("4.9.7", "5.3.3", "5.5.1")),
        _item("x", other, uses=False),
        _item("j4.9.7", parity, "4.9.7"),
        _item("j5.3.3", parity, "5.3.3"),
        _item("mock", mock, "mock-4.9.7"),  # no version it names: stays where it was
        _item("r1", path),
        _item("r2", path),
        _item("s4.9.7", peers, "4.9.7"),
        _item("s-unit", peers, uses=False),
    ]
    stops = _schedule(items)
    assert _names(items) == [
        "pre",
        *("d4.9.7", "j4.9.7", "s4.9.7"),
        *("d5.3.3", "j5.3.3"),
        *("d5.5.1", "r1", "r2"),
        *("x", "mock", "s-unit"),
    ]
    assert stops == {"s4.9.7": ["4.9.7"], "j5.3.3": ["5.3.3"], "r2": ["5.5.1"]}


def test_a_cluster_outlives_its_last_test_while_that_module_runs_on() -> None:
    """A parametrized module fixture is torn down only when the next test sets up: a module's
    4.9.7 cluster stops once the module is done, not under its 4.9.7 fixture's teardown."""
    alone = SimpleNamespace(name="B")
    items = [_item("b4.9.7-1", alone, "4.9.7"), _item("b4.9.7-2", alone, "4.9.7"), _item("b5.3.3", alone, "5.3.3")]
    assert _schedule(items) == {"b5.3.3": ["4.9.7", "5.3.3"]}
    assert _schedule([_item("unit", alone, uses=False)]) == {}


def test_teardown_stops_the_versions_due(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[tuple[str, float]] = []

    def cluster(version: str) -> Any:
        return SimpleNamespace(stop=lambda check, grace: stopped.append((version, grace)))

    monkeypatch.setattr(sc, "_clusters", {"4.9.7": cluster("4.9.7"), "5.3.3": cluster("5.3.3")})
    mod = SimpleNamespace(name="M")
    first, last = _item("a", mod, "4.9.7"), _item("b", SimpleNamespace(name="N"), "5.3.3")
    sc.pytest_collection_modifyitems([first, last])
    sc.pytest_runtest_teardown(first, last)  # type: ignore[arg-type]
    assert stopped == [("4.9.7", 0)] and list(sc._clusters) == ["5.3.3"]
    sc.pytest_runtest_teardown(last, None)  # type: ignore[arg-type]
    assert stopped == [("4.9.7", 0), ("5.3.3", 0)] and not sc._clusters
