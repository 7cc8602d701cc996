"""A mock cluster: a folder holding one RocketMQ-layout store per broker, plus a name server view.

``<root>/cluster.json`` names the brokers and the broker version whose behaviour the mock
follows; ``<root>/<brokerName>/`` is that broker's store root; ``<root>/lock`` keeps a second
writer out (readers never take it, so queries work while a server is running).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from mqadmin.errors import StoreError, UsageError
from mqadmin.mock.model import MockBroker
from mqadmin.mock.store import DEFAULT_COMMITLOG_FILE_SIZE, DEFAULT_CQ_FILE_SIZE, BrokerStore
from mqadmin.model import BrokerData, QueueData, TopicRoute
from mqadmin.protocol.constants import RETRY_PREFIX
from mqadmin.safety import atomic_write

CLUSTER_FILE = "cluster.json"
DEFAULT_VERSION = "5.3.3"
DEFAULT_CLUSTER = "DefaultCluster"


class MockCluster:
    def __init__(self, root: Path, *, writable: bool = False):
        self.root = root
        self.writable = writable
        self._lock_fd: int | None = None
        meta_path = root / CLUSTER_FILE
        try:
            meta = json.loads(meta_path.read_text())
        except FileNotFoundError:
            raise UsageError(f"{root} is not a mock broker store (no {CLUSTER_FILE})") from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"{meta_path} is not readable: {exc}") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("brokers"), list) or not meta["brokers"]:
            raise UsageError(f"{meta_path} is not a mock broker store description")
        self.meta: dict[str, Any] = meta
        self.cluster_name = str(meta.get("cluster", DEFAULT_CLUSTER))
        self.version = str(meta.get("broker_version", DEFAULT_VERSION))
        if writable:
            self._acquire_lock()
        self.brokers: dict[str, MockBroker] = {}
        for name in meta["brokers"]:
            if str(name) in ("", ".", "..") or "/" in str(name) or "\\" in str(name):
                raise UsageError(f"{meta_path}: broker name {name!r} cannot be a folder of the store")
            store_root = root / str(name)
            if not store_root.is_dir():
                raise UsageError(f"{root} is not a complete mock store: broker folder {name!r} is missing")
            store = BrokerStore(
                store_root,
                writable=writable,
                commitlog_file_size=int(meta.get("commitlog_file_size", DEFAULT_COMMITLOG_FILE_SIZE)),
                cq_file_size=int(meta.get("cq_file_size", DEFAULT_CQ_FILE_SIZE)),
            )
            settings = {str(k): str(v) for k, v in (meta.get("broker_config") or {}).items()}
            broker = MockBroker(str(name), self.cluster_name, store, self.version, settings=settings)
            # RocketMQ's default listen port, one block of ports per broker as on a real host
            broker.default_store_host = f"127.0.0.1:{10911 + 100 * len(self.brokers)}"
            self.brokers[str(name)] = broker

    @staticmethod
    def create(
        root: Path,
        brokers: tuple[str, ...] = ("broker-a", "broker-b"),
        *,
        version: str = DEFAULT_VERSION,
        cluster: str = DEFAULT_CLUSTER,
        commitlog_file_size: int = DEFAULT_COMMITLOG_FILE_SIZE,
        cq_file_size: int = DEFAULT_CQ_FILE_SIZE,
        broker_config: dict[str, str] | None = None,
    ) -> MockCluster:
        """Make an empty store folder (which must be empty or absent) and open it for writing.
        ``broker_config``: broker.conf settings every broker runs with (see MockBroker.settings)."""
        if root.exists() and any(root.iterdir()):
            raise UsageError(f"{root} is not empty and not a mock broker store")
        root.mkdir(parents=True, exist_ok=True)
        for name in brokers:
            for sub in ("commitlog", "consumequeue", "config"):
                (root / name / sub).mkdir(parents=True, exist_ok=True)
        meta = {
            "cluster": cluster,
            "brokers": list(brokers),
            "broker_version": version,
            "commitlog_file_size": commitlog_file_size,
            "cq_file_size": cq_file_size,
        }
        if broker_config:
            meta["broker_config"] = dict(broker_config)
        atomic_write(root / CLUSTER_FILE, json.dumps(meta, indent=2) + "\n")
        return MockCluster(root, writable=True)

    # ---- locking ----
    def _acquire_lock(self) -> None:
        path = self.root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreError(
                f"mock store {self.root} is in use by {holder}; stop it, or use the address it serves"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def close(self) -> None:
        if self.writable:
            self.flush()
        for broker in self.brokers.values():
            broker.store.close()
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def flush(self) -> None:
        for broker in self.brokers.values():
            broker.flush()

    # ---- name server view ----
    def create_topic(self, topic: str, queues_per_broker: int = 4, brokers: list[str] | None = None) -> None:
        for name in brokers or list(self.brokers):
            self.brokers[name].create_topic(topic, queues_per_broker)

    def topic_route(self, topic: str) -> TopicRoute | None:
        """What GET_ROUTEINFO_BY_TOPIC answers: the brokers having the topic."""
        queues, brokers = [], []
        for name, broker in self.brokers.items():
            cfg = broker.topic_config(topic)
            if cfg is None:
                continue
            queues.append(
                QueueData(
                    name,
                    int(cfg["readQueueNums"]),
                    int(cfg["writeQueueNums"]),
                    int(cfg.get("perm", 6)),
                    int(cfg.get("topicSysFlag", 0)),
                )
            )
            brokers.append(BrokerData(name, self.cluster_name, {0: broker.addr}))
        if not queues:
            return None
        return TopicRoute(topic, tuple(brokers), tuple(queues))

    def list_topics(self) -> list[str]:
        return sorted({t for b in self.brokers.values() for t in b.topics})

    def list_groups(self) -> list[str]:
        """Groups as the Java tool finds them: from the %RETRY% topics."""
        return sorted(t[len(RETRY_PREFIX) :] for t in self.list_topics() if t.startswith(RETRY_PREFIX))
