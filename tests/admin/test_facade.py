"""The facade knows its backend: capabilities are declared, never guessed from the address."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mqadmin.admin import capabilities_of, connect
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.server import MockServer
from mqadmin.model import BROKER_STORE, EMBEDDED_STORE, LIVE_CLUSTER
from mqadmin.offline.backend import OfflineAdmin

REPO = Path(__file__).resolve().parents[2]
PACKAGE = [REPO / "mqadmin", REPO / "commands", REPO / "spark"]

#: the one place that reads an address's scheme, and the backends' parsers of their own addresses
#: (reached only after connect() chose them)
READERS = {
    "mqadmin/admin/__init__.py": {"_scheme", "connect"},
    "mqadmin/mock/backend.py": {"mock_root"},
    "mqadmin/offline/layout.py": {"parse_address"},
}

SCHEMES = ("mock", "store:")


def _names_scheme(node: ast.expr) -> bool:
    """A string literal (or a tuple of them) that is a backend's address scheme."""
    if isinstance(node, ast.Tuple):
        return any(_names_scheme(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(SCHEMES)


def _prefix_tests(tree: ast.AST) -> list[ast.expr]:
    """``x.startswith("mock...")``, ``x == "mock"``, ``x in ("mock", ...)``, ``"://" in address``."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith") and any(_names_scheme(a) for a in node.args):
                found.append(node)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_scheme(o) for o in operands):
                found.append(node)
            elif isinstance(node.left, ast.Constant) and node.left.value == "://":
                if "addr" in ast.unparse(node.comparators[0]):  # an address, not an output's URL
                    found.append(node)
    return found


def _offenders(root: Path, rel: str, source: str) -> list[str]:
    tree = ast.parse(source)
    allowed = READERS.get(rel, set())
    spans = [
        (f.lineno, f.end_lineno or f.lineno)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef) and f.name in allowed
    ]
    return [
        f"{rel}:{n.lineno}: {ast.unparse(n)}"
        for n in _prefix_tests(tree)
        if not any(a <= n.lineno <= b for a, b in spans)
    ]


def test_no_module_guesses_the_backend_from_the_address() -> None:
    """Only connect()'s helper reads an address's scheme; everyone else asks ``capabilities``."""
    offenders: list[str] = []
    for top in PACKAGE:
        for path in sorted(top.rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            text = path.read_text(encoding="utf-8")
            if any(s in text for s in ('"mock', '"store:', '"://"')):  # parse only files that may offend
                offenders += _offenders(REPO, rel, text)
    assert not offenders, "test the backend's capabilities, not its address:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        'def f(a):\n    return a.address.startswith("mock")\n',
        'def f(a):\n    return a.startswith(("mock:", "store:"))\n',
        'def f(a):\n    return a == "mock" or a.endswith("x")\n',
        'def f(a):\n    return "://" in a.address\n',
        'def f(a):\n    return a in ("mock", "store:")\n',
    ],
)
def test_the_check_sees_each_form_of_prefix_test(source: str) -> None:
    assert _offenders(REPO, "mqadmin/x.py", source)
    assert not _offenders(REPO, "mqadmin/admin/__init__.py", source.replace("def f", "def _scheme"))


def test_capabilities_by_address() -> None:
    assert capabilities_of("mock://demo") == capabilities_of(" mock ") == EMBEDDED_STORE
    assert capabilities_of("store:///var/lib/rocketmq/store") == BROKER_STORE
    assert capabilities_of("10.0.0.1:9876;10.0.0.2:9876") == LIVE_CLUSTER
    assert EMBEDDED_STORE.on_disk and not EMBEDDED_STORE.read_only and EMBEDDED_STORE.persists_on_ack
    assert BROKER_STORE.read_only and BROKER_STORE.on_disk and not BROKER_STORE.routed
    assert LIVE_CLUSTER.routed and not LIVE_CLUSTER.on_disk and not LIVE_CLUSTER.persists_on_ack


def test_each_backend_declares_what_capabilities_of_says(tmp_path: Path) -> None:
    """The opened backend and the address-only answer agree, for every backend."""
    MockCluster.create(tmp_path / "m").close()
    cluster = MockCluster(tmp_path / "m", writable=True)
    server = MockServer(cluster, namesrv_port=0).start()
    try:
        for address in (f"mock://{tmp_path / 'm'}", server.namesrv_addr):
            admin = connect(address, read_only=True)
            try:
                assert admin.capabilities == capabilities_of(address), address
            finally:
                admin.close()
    finally:
        server.stop()
        cluster.close()
    assert OfflineAdmin.capabilities == capabilities_of(f"store://{tmp_path}")
