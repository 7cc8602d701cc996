"""Serving a store from the command line: what ``mqadmin mockBroker`` calls."""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mqadmin import errors
from mqadmin.mock.backend import DEMO_NAME, mock_root
from mqadmin.mock.cluster import CLUSTER_FILE, DEFAULT_VERSION, MockCluster
from mqadmin.mock.server.core import DEFAULT_BIND, DEFAULT_NAMESRV_PORT, MockServer
from mqadmin.mock.server.ioloop import (
    DEFAULT_FRAME_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_UNSENT_BYTES,
    DEFAULT_REPLY_TIMEOUT_S,
)
from mqadmin.protocol.codes import version_ordinal

DEFAULT_BROKER_COUNT: Final = 2
#: how often serve_store looks at its stop event (x5)
ACCEPT_POLL_S: Final = 0.2


@dataclass(frozen=True)
class ServerReady:
    """What ``serve_store`` tells its caller once the ports are open."""

    address: str
    store: str
    namesrv_addr: str
    brokers: dict[str, str]
    broker_version: str
    created: bool


@dataclass(frozen=True)
class ServeReport:
    """What was served, for the command's result."""

    ready: ServerReady
    seconds: float
    stats: dict[str, int] = field(default_factory=dict)
    topics: int = 0
    groups: int = 0


def _broker_names(count: int) -> tuple[str, ...]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    if not 1 <= count <= len(letters):
        raise errors.UsageError(f"--brokers must be between 1 and {len(letters)}, not {count}")
    return tuple(f"broker-{letters[i]}" for i in range(count))


def open_store(
    address: str, *, brokers: int | None = None, version: str | None = None, demo: bool = False
) -> tuple[MockCluster, bool]:
    """Open a mock store for writing, creating it first if needed; (cluster, created).

    ``mock://demo`` is seeded on creation, as the embedded backend does; ``demo`` seeds any
    new store. ``brokers``/``version`` only shape a new store.
    """
    root, name = mock_root(address)
    created = False
    if not (root / CLUSTER_FILE).exists():
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise errors.UsageError(f"{root} is not a mock broker store (no {CLUSTER_FILE})")
        names = _broker_names(DEFAULT_BROKER_COUNT if brokers is None else brokers)
        chosen = version or DEFAULT_VERSION
        try:
            version_ordinal(chosen)
        except ValueError:
            raise errors.UsageError(f"unknown broker version {chosen!r} (e.g. 4.9.8, 5.3.3)") from None
        _create_store(root, names, chosen, demo=demo or name == DEMO_NAME)
        created = True
    return MockCluster(root, writable=True), created


def _create_store(root: Path, brokers: tuple[str, ...], version: str, *, demo: bool) -> None:
    """Build beside the final place and rename it in, so a racing process never sees half a store."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    try:
        shutil.rmtree(tmp)
        cluster = MockCluster.create(tmp, brokers, version=version)
        try:
            if demo:
                from mqadmin.mock.seed import seed_demo

                seed_demo(cluster)
        finally:
            cluster.close()
        try:
            os.rename(tmp, root)
        except OSError:
            if not (root / CLUSTER_FILE).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tls_context(cert: str, key: str | None = None) -> ssl.SSLContext:
    """A server context from a PEM certificate (and key, unless the certificate file holds it)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise errors.UsageError(f"cannot load the TLS certificate {cert}: {exc}") from None
    return context


def serve_store(
    address: str,
    *,
    stop: threading.Event,
    port: int = DEFAULT_NAMESRV_PORT,
    bind: str = DEFAULT_BIND,
    brokers: int | None = None,
    broker_version: str | None = None,
    demo: bool = False,
    acl: tuple[str, str] | None = None,
    tls: ssl.SSLContext | None = None,
    on_ready: Callable[[ServerReady], None] | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
    frame_timeout: float = DEFAULT_FRAME_TIMEOUT_S,
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT_S,
    max_unsent: int = DEFAULT_MAX_UNSENT_BYTES,
) -> ServeReport:
    """Open (or create) the store at a ``mock://`` address and serve it until ``stop`` is set.

    The one entry point for ``mqadmin mockBroker``; the store is flushed and unlocked on return.
    """
    cluster, created = open_store(address, brokers=brokers, version=broker_version, demo=demo)
    try:
        server = MockServer(
            cluster,
            bind=bind,
            namesrv_port=port,
            acl=acl,
            tls=tls,
            idle_timeout=idle_timeout,
            frame_timeout=frame_timeout,
            reply_timeout=reply_timeout,
            max_unsent=max_unsent,
        )
        with server:
            ready = ServerReady(
                address=address,
                store=str(cluster.root),
                namesrv_addr=server.namesrv_addr,
                brokers=server.broker_addrs,
                broker_version=cluster.version,
                created=created,
            )
            if on_ready is not None:
                on_ready(ready)
            started = time.monotonic()
            while not stop.wait(ACCEPT_POLL_S * 5):
                pass
            seconds = time.monotonic() - started
        return ServeReport(
            ready=ready,
            seconds=seconds,
            stats=server.stats(),
            topics=len(cluster.list_topics()),
            groups=len(cluster.list_groups()),
        )
    finally:
        cluster.close()
