"""The brokers last seen per cluster address, kept in ``$MQADMIN_HOME/state/brokers.json``.

A broker that crashes drops out of the name server's route at once, and every answer after that
covers only the brokers still routed, with no word of the missing one (the Java tool is no
different). Remembering what each address showed lets mqadmin name a broker seen recently that
is missing now. The file is small, written atomically; a lost update between two concurrent runs
only forgets one sighting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqadmin import errors
from mqadmin.config import default_home
from mqadmin.safety import atomic_write

if TYPE_CHECKING:
    from mqadmin.admin import Admin

#: a broker seen within this long and missing now is reported; older sightings are forgotten
RECENT_MS: Final = 7 * 24 * 3600 * 1000


@dataclass(frozen=True)
class Vanished:
    """A broker the address routed recently and does not route now."""

    name: str
    addr: str
    seen_ms: int

    def where(self, now_ms: int) -> str:
        ago = max(0, now_ms - self.seen_ms) // 1000
        when = f"{ago // 3600} h" if ago >= 3600 else f"{ago // 60} min" if ago >= 60 else f"{ago} s"
        return f"{self.addr}, seen {when} ago"

    def describe(self, now_ms: int) -> str:
        return f"{self.name} ({self.where(now_ms)})"


def state_path(home: str | None = None) -> Path:
    return Path(home or default_home()) / "state" / "brokers.json"


def _key(address: str) -> str:
    """One entry per cluster, however its name servers are listed."""
    return ";".join(sorted(a.strip() for a in address.split(";") if a.strip()))


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def compare_and_record(
    address: str, brokers: Mapping[str, str], now_ms: int | None = None, home: str | None = None
) -> list[Vanished]:
    """Record ``brokers`` (name -> address) as seen on ``address`` now; return the brokers seen
    there within :data:`RECENT_MS` that are not among them."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    path = state_path(home)
    state = _load(path)
    entry = state.get(_key(address))
    entry = dict(entry) if isinstance(entry, dict) else {}
    missing: list[Vanished] = []
    for name, seen in sorted(entry.items()):
        try:
            addr, seen_ms = str(seen["addr"]), int(seen["seen_ms"])
        except (KeyError, TypeError, ValueError):
            entry.pop(name)
            continue
        if now - seen_ms > RECENT_MS:
            entry.pop(name)
        elif name not in brokers:
            missing.append(Vanished(name, addr, seen_ms))
    entry |= {name: {"addr": addr, "seen_ms": now} for name, addr in brokers.items()}
    state[_key(address)] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(state, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only home must not stop a query
    return missing


def vanished(admin: Admin, now_ms: int, routed: Mapping[str, str] | None = None) -> list[Vanished]:
    """Brokers the admin's name server routed recently and not now (and the sighting recorded);
    ``routed``: the brokers routed now, when the caller has them. Stores and mock addresses have
    no name server, so nothing vanishes there."""
    if not admin.capabilities.routed:
        return []
    if routed is None:
        try:
            routed = {b.broker_name: b.addr for b in admin.cluster_brokers(probe=False)}
        except errors.MqadminError:
            return []  # the command itself will say what is wrong
    return compare_and_record(admin.address, routed, now_ms)


def missing_line(gone: Vanished, address: str, now_ms: int) -> str:
    return (
        f"broker {gone.describe(now_ms)} is missing from the route of {address} (crashed, stopped or cut off?): "
        "what follows covers only the brokers routed now"
    )
