"""Times on the command line → epoch milliseconds, and back out for echoing.

Every result echoes the resolved absolute time: a zone mix-up is the classic way a reset
goes wrong, so the user must see what "09:40" became.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone, tzinfo

from mqadmin.errors import UsageError

_RELATIVE = re.compile(r"^([+-])(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_JAVA_HASH = re.compile(r"^(\d{4})-(\d{2})-(\d{2})#(\d{2}):(\d{2}):(\d{2}):(\d{3})$")
_JAVA_DIGITS = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{3})$")

FORMATS_HELP = (
    "now, epoch ms (13 digits), yyyy-MM-dd#HH:mm:ss:SSS, yyyyMMddHHmmssSSS, "
    "ISO-8601 (2024-05-01T09:40:00, with or without offset), or relative -15m/-2h/-1d"
)


def resolve_tz(name: str | None) -> tzinfo | None:
    """--tz NAME (IANA zone or ±HH:MM); None means the local zone."""
    if not name:
        return None
    m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", name)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return timezone(sign * delta)
    if name.upper() in ("UTC", "Z", "GMT"):
        return timezone.utc
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:
        raise UsageError(f"unknown time zone {name!r}: use an IANA name like Asia/Shanghai, UTC, or +08:00") from None


def now_ms() -> int:
    """Now in epoch milliseconds: the wall clock, the one place it is read as such."""
    return int(time.time() * 1000)


def _local(naive: datetime, tz: tzinfo | None, warn: Callable[[str], None] | None = None) -> int:
    """A wall-clock time in ``tz`` (None: the local zone). A time the clocks skip (a DST gap) or
    show twice (the hour after DST ends) has no single meaning: the instant taken (Python's
    fold=0, i.e. read with the offset in force before the change) is said through ``warn``."""

    def aware(fold: int) -> datetime:
        moved = naive.replace(fold=fold)
        return moved.replace(tzinfo=tz) if tz is not None else moved.astimezone()

    first, second = aware(0), aware(1)
    if warn is not None and first.utcoffset() != second.utcoffset():
        zone = getattr(tz, "key", None) or (str(tz) if tz is not None else "the local time zone")
        taken = format_time(int(first.timestamp() * 1000), tz)
        wall = naive.isoformat(timespec="minutes")
        # the instant read back as a wall-clock time: another time when the wall time does not exist
        back = datetime.fromtimestamp(first.timestamp(), tz).replace(tzinfo=None)
        if back != naive:
            warn(f"{wall} does not exist in {zone} (the clocks skip it at the DST change): took {taken}")
        else:
            other = format_time(int(second.timestamp() * 1000), tz)
            warn(
                f"{wall} happens twice in {zone} (the clocks go back at the DST change): took the first, {taken} "
                f"(the second is {other}); write the offset to choose"
            )
    return int(first.timestamp() * 1000)


def parse_time(
    text: str, *, now: int | None = None, tz: tzinfo | None = None, warn: Callable[[str], None] | None = None
) -> int:
    """Epoch ms for ``text``; raises UsageError with the accepted formats on anything else.
    ``warn`` hears when a local time was ambiguous (DST) and which instant was taken."""
    value = text.strip()
    current = now_ms() if now is None else now
    if value.lower() == "now":
        return current
    m = _RELATIVE.match(value)
    if m:
        delta = int(float(m.group(2)) * _UNIT_MS[m.group(3)])
        return current - delta if m.group(1) == "-" else current + delta
    m = _JAVA_HASH.match(value) or _JAVA_DIGITS.match(value)
    if m:
        try:
            y, mo, d, h, mi, s, ms = (int(g) for g in m.groups())
            return _local(datetime(y, mo, d, h, mi, s, ms * 1000), tz, warn)
        except ValueError as exc:
            raise UsageError(f"invalid time {text!r}: {exc}") from None
    if re.fullmatch(r"-?\d+", value):
        digits = value.lstrip("-")
        if value.startswith("-"):
            raise UsageError(
                f"time {text!r}: a negative number is no time (epoch ms count from 1970); "
                "a time relative to now has a unit, e.g. -15m, -2h, -1d"
            )
        if len(digits) == 10:
            raise UsageError(
                f"time {text!r} looks like epoch seconds; mqadmin takes milliseconds (did you mean {value}000?)"
            )
        if len(digits) in (12, 13):
            return int(value)
        raise UsageError(f"cannot read time {text!r}: expected {FORMATS_HELP}")
    iso = value.replace(" ", "T", 1) if re.match(r"^\d{4}-\d{2}-\d{2} \d", value) else value
    if iso.endswith(("Z", "z")):
        iso = iso[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(iso)
    except ValueError:
        raise UsageError(f"cannot read time {text!r}: expected {FORMATS_HELP}") from None
    if parsed.tzinfo is not None:
        return int(parsed.timestamp() * 1000)
    return _local(parsed, tz, warn)


def format_time(ms: int | None, tz: tzinfo | None = None) -> str | None:
    """ISO-8601 with offset and milliseconds, in the local zone (or --tz)."""
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    dt = dt.astimezone(tz) if tz is not None else dt.astimezone()
    return dt.isoformat(timespec="milliseconds")


def format_java(ms: int, tz: tzinfo | None = None) -> str:
    """``yyyy-MM-dd HH:mm:ss`` as the Java tool prints LastTime."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    dt = dt.astimezone(tz) if tz is not None else dt.astimezone()
    return dt.strftime("%Y-%m-%d %H:%M:%S")


def format_zoned(ms: int, tz: tzinfo | None = None) -> str:
    """``yyyy-MM-dd HH:mm:ss+08:00``: the Java tool's LastTime with the zone it is in, for tables
    read by people who may not share the zone (--output java keeps the Java text)."""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    dt = dt.astimezone(tz) if tz is not None else dt.astimezone()
    return dt.isoformat(sep=" ", timespec="seconds")


def parse_duration_ms(text: str) -> int:
    """``5m``, ``30s``, ``1h``, ``1500ms`` or plain milliseconds, for --max-lag-time."""
    value = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?", value)
    if not m:
        raise UsageError(f"cannot read duration {text!r}: use e.g. 30s, 5m, 2h or milliseconds")
    return int(float(m.group(1)) * _UNIT_MS[m.group(2) or "ms"])


@functools.lru_cache(maxsize=1024)  # 10,000 groups' health reasons name a few spans again and again
def format_duration(ms: int | None) -> str:
    """A lag as every table prints it: ``0s``, ``4.2s``, ``19m57s``, ``3h05m``, ``2d04h``;
    ``-`` when unknown (JSON carries the milliseconds, or null)."""
    if ms is None:
        return "-"
    if ms == 0:
        return "0s"
    seconds = ms // 1000
    if seconds < 60:
        return f"{ms / 1000:.1f}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, mi = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{mi:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"
