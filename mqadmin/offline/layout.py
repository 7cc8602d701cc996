"""Finding broker stores on disk: the ``store:`` address, store roots, names, versions, locks.

A store root is the folder a broker was started with as ``storePathRootDir``: it holds
``commitlog/``, ``consumequeue/`` and ``config/``. The address may name one store root, a
folder of them (``<name>/`` or ``<name>/store/`` per broker, the name being the broker's),
a mock cluster folder, or several roots separated by ``;``. Nothing here writes a file.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from mqadmin.errors import UsageError

DEFAULT_CLUSTER = "DefaultCluster"
#: what a store answers as when its layout shows the major version only: the newest release of
#: that major, so a 5.x store gets every 5.x behaviour (the 5.1.1 time search, the 5.2 reset...;
#: docs/protocol.md "Version-dependent behaviour")
VERSION_4 = "4.9.8"
VERSION_5 = "5.3.3"
_PARAMS = ("broker", "version", "cluster")
_CONFIG_SUFFIXES = (".properties", ".conf")
_CONFIG_MAX_BYTES = 256 * 1024
# struct flock on Linux: l_type, l_whence, (pad), l_start, l_len, l_pid, (pad)
_FLOCK = struct.Struct("hhqqi4x")


@dataclass(frozen=True)
class StoreAddress:
    paths: tuple[Path, ...]
    broker: str | None = None
    version: str | None = None
    cluster: str | None = None


@dataclass(frozen=True)
class StoreSpec:
    """One broker's store: where, under which name, and whose behaviour it answers with."""

    name: str
    root: Path
    version: str
    cluster: str


def parse_address(address: str) -> StoreAddress:
    """``store:///abs/path[;/other][?broker=NAME&version=X.Y.Z&cluster=NAME]``."""
    if not address.startswith("store:"):
        raise UsageError(f"not a store address: {address!r}")
    rest = address[len("store:") :]
    if rest.startswith("//"):
        rest = rest[2:]
    query = ""
    head, sep, tail = rest.rpartition("?")
    if sep and all("=" in part for part in tail.split("&") if part):
        rest, query = head, tail
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = sorted(set(params) - set(_PARAMS))
    if unknown:
        raise UsageError(f"unknown store address parameter {unknown[0]!r} (known: {', '.join(_PARAMS)})")
    paths = tuple(Path(unquote(p)).expanduser() for p in rest.split(";") if p.strip())
    if not paths:
        raise UsageError("store: needs a path, e.g. store:///var/lib/rocketmq/store")
    if params.get("broker") and len(paths) > 1:
        raise UsageError("?broker= names one store; with several paths each is named by its folder")
    return StoreAddress(
        paths, params.get("broker") or None, params.get("version") or None, params.get("cluster") or None
    )


def looks_like_store(folder: Path) -> bool:
    return (folder / "commitlog").is_dir() or (folder / "consumequeue").is_dir()


def discover(addr: StoreAddress) -> list[StoreSpec]:
    """Every broker store the address names, checked to be whole enough to read."""
    specs: list[StoreSpec] = []
    for path in addr.paths:
        if not path.exists():
            raise UsageError(f"{path} does not exist")
        if not path.is_dir():
            raise UsageError(
                f"{path} is not a folder: store:// takes a broker's store root (the folder holding commitlog/)"
            )
        specs.extend(_stores_in(path, addr))
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"two stores are both named {dup[0]!r}: name them apart (one path each, ?broker=NAME)")
    for spec in specs:
        check_whole(spec)
    return specs


def _stores_in(path: Path, addr: StoreAddress) -> list[StoreSpec]:
    if looks_like_store(path):
        return [_spec(path, addr.broker, addr)]
    mock = _mock_meta(path)
    if mock is not None:
        return [_spec(path / str(b), str(b), addr) for b in mock.get("brokers", [])]
    found = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if looks_like_store(child):
            found.append(_spec(child, child.name, addr))
        elif looks_like_store(child / "store"):
            found.append(_spec(child / "store", child.name, addr))
    if not found:
        raise UsageError(
            f"{path} is not a RocketMQ broker store: no commitlog/ or consumequeue/ in it or in its sub-folders"
        )
    return found


def _spec(root: Path, name: str | None, addr: StoreAddress) -> StoreSpec:
    conf = _broker_config(root)
    mock = _mock_meta(root.parent)
    version = addr.version
    if version is None and mock is not None:
        version = str(mock.get("broker_version") or "") or None
    cluster = addr.cluster or conf.get("brokerClusterName") or (str(mock.get("cluster")) if mock else None)
    return StoreSpec(
        name=name or conf.get("brokerName") or _folder_name(root),
        root=root,
        version=version or detect_version(root),
        cluster=cluster or DEFAULT_CLUSTER,
    )


def _folder_name(root: Path) -> str:
    """The default store root is ``~/store``: then the folder above names it better."""
    resolved = root.resolve()
    if resolved.name == "store" and resolved.parent.name:
        return resolved.parent.name
    return resolved.name or "broker"


def _mock_meta(folder: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and isinstance(meta.get("brokers"), list) else None


def _broker_config(root: Path) -> dict[str, str]:
    """brokerName/brokerClusterName from a broker config file kept beside the store, if one
    is there and does not point at another store root."""
    resolved = root.resolve()
    for folder in (root, root.parent):
        try:
            candidates = sorted(p for p in folder.iterdir() if p.suffix in _CONFIG_SUFFIXES and p.is_file())
        except OSError:
            continue
        for path in candidates:
            props = _properties(path)
            store_dir = props.get("storePathRootDir")
            if "brokerName" not in props:
                continue
            if store_dir and Path(store_dir).expanduser().resolve() != resolved:
                continue
            return props
    return {}


def _properties(path: Path) -> dict[str, str]:
    try:
        if path.stat().st_size > _CONFIG_MAX_BYTES:
            return {}
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def detect_version(root: Path) -> str:
    """4.x or 5.x from what only 5.x brokers leave behind (timer wheel, stateVersion)."""
    if (root / "timerwheel").exists() or (root / "config" / "timercheck").exists():
        return VERSION_5
    for name in ("topics.json", "consumerOffset.json"):
        try:
            head = (root / "config" / name).read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            continue
        if '"stateVersion"' in head or '"attributes"' in head:
            return VERSION_5
    return VERSION_4


def check_whole(spec: StoreSpec) -> None:
    """Refuse half a store: consume queues whose commit log is missing, or the reverse."""
    root = spec.root
    has_cq_entries = any(_queue_files(root / "consumequeue"))
    commitlog = root / "commitlog"
    has_log = commitlog.is_dir() and any(p.name.isdigit() for p in commitlog.iterdir())
    if has_cq_entries and not has_log:
        raise UsageError(
            f"{root} is half a store: it has consume queues but no commit log (commitlog/ is missing or empty); "
            "copy the whole store root"
        )
    if has_log and not (root / "consumequeue").is_dir():
        raise UsageError(
            f"{root} is half a store: it has a commit log but no consumequeue/ (a 5.x broker with "
            "storeType=defaultRocksDB keeps consume queues in RocksDB, which mqadmin cannot read offline)"
        )


def _queue_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    for topic in folder.iterdir():
        if not topic.is_dir():
            continue
        for queue in topic.iterdir():
            if queue.is_dir():
                for f in queue.iterdir():
                    if f.is_file() and f.stat().st_size > 0:
                        return [f]
    return []


def lock_holder(root: Path) -> int | None:
    """Pid of the process holding the broker's lock on ``<root>/lock`` (0: held, pid unknown);
    None when nobody holds it. Only asks: opens the file read-only and takes no lock."""
    try:
        fd = os.open(root / "lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        if sys.platform.startswith("linux"):
            query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            try:
                answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
            except OSError:
                return None
            l_type, _, _, _, pid = _FLOCK.unpack(answer)
            return None if l_type == fcntl.F_UNLCK else pid
        try:  # elsewhere: a shared lock on the read-only descriptor, released at once
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return 0
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
