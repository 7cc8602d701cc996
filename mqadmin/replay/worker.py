"""The slice worker: pull one slice, keep what the window and filters select.

Both engines run exactly this code (threads locally, one partition per slice on Spark), so
there is one implementation of pulling and filtering to get right. It takes a plain
``Slice`` and ``MessageFilter`` and any ``Admin``, never engine state.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqadmin.errors import MqadminError, UsageError
from mqadmin.model import Message
from mqadmin.replay.planner import Slice

if TYPE_CHECKING:
    from mqadmin.admin import Admin

#: messages asked for per pull; brokers cap it themselves (32 by default), so more is harmless
PULL_BATCH = 64
#: RocketMQ separates several keys in the KEYS property with a space
KEY_SEPARATOR = " "
_TAG = re.compile(r"^[^|\s]+$")


class PullError(MqadminError):
    """A pull answered something a replay cannot continue from (the queue shrank, or looped)."""


def parse_tag_expression(expr: str | None) -> frozenset[str] | None:
    """``A || B`` → {A, B}; ``*`` or nothing → None (every tag), as RocketMQ subscriptions read."""
    if expr is None or expr.strip() in ("", "*"):
        return None
    tags = [t.strip() for t in expr.split("||")]
    bad = [t for t in tags if not _TAG.match(t)]
    if bad:
        raise UsageError(f"bad tag expression {expr!r}: use TAG or 'TagA || TagB' (tags have no spaces or '|')")
    return frozenset(tags)


@dataclass(frozen=True)
class MessageFilter:
    """Which messages of a slice are kept: store time in ``[begin, end)``, then tag and key."""

    begin: int
    end: int
    tags: frozenset[str] | None = None
    key: str | None = None

    def matches(self, msg: Message) -> bool:
        if not self.begin <= msg.store_timestamp < self.end:
            return False
        if self.tags is not None and msg.tags not in self.tags:
            return False
        if self.key is not None and self.key not in (msg.keys or "").split(KEY_SEPARATOR):
            return False
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "begin": self.begin,
            "end": self.end,
            "tags": sorted(self.tags) if self.tags is not None else None,
            "key": self.key,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> MessageFilter:
        tags = doc.get("tags")
        return MessageFilter(
            int(doc["begin"]),
            int(doc["end"]),
            frozenset(str(t) for t in tags) if tags is not None else None,
            str(doc["key"]) if doc.get("key") is not None else None,
        )


@dataclass
class SliceStats:
    """What one slice did: offsets read, messages kept, their body bytes, and offsets lost to
    retention (deleted before they could be read)."""

    index: int
    scanned: int = 0
    matched: int = 0
    bytes: int = 0
    missing: int = 0
    written: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "index": self.index,
            "scanned": self.scanned,
            "matched": self.matched,
            "bytes": self.bytes,
            "missing": self.missing,
            "written": self.written,
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> SliceStats:
        return SliceStats(
            **{k: int(doc.get(k, 0)) for k in ("index", "scanned", "matched", "bytes", "missing", "written")}
        )


@dataclass
class SliceScan:
    """Iterate the kept messages of one slice, counting as it goes.

    ``on_progress(offsets, body_bytes)`` is called after each pull (the progress bar); ``stop``
    ends the scan early between pulls (Ctrl-C), leaving ``complete`` False.
    """

    admin: Admin
    slice: Slice
    filter: MessageFilter
    batch: int = PULL_BATCH
    stop: threading.Event | None = None
    on_progress: Callable[[int, int], None] | None = None
    stats: SliceStats = field(init=False)
    complete: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.stats = SliceStats(self.slice.index)

    def __iter__(self) -> Iterator[Message]:
        s, mq, stats = self.slice, self.slice.mq, self.stats
        offset = s.start
        while offset < s.end:
            if self.stop is not None and self.stop.is_set():
                return
            result = self.admin.pull(mq, offset, min(self.batch, s.end - offset))
            nxt = result.next_begin_offset
            if result.status == "OFFSET_TOO_SMALL":
                # retention deleted the head of the range: nothing to read there any more
                nxt = min(max(nxt, offset + 1), s.end)
                stats.missing += nxt - offset
                offset = nxt
                continue
            if result.status not in ("FOUND", "NO_MATCHED_MESSAGE"):
                raise PullError(
                    f"{mq}: pull at offset {offset} answered {result.status} "
                    f"(queue now [{result.min_offset}, {result.max_offset})); the slice ends at {s.end}"
                )
            body_bytes = 0
            for msg in result.messages:
                if not offset <= msg.queue_offset < s.end:
                    continue
                msg.broker_name = msg.broker_name or s.broker
                if self.filter.matches(msg):
                    stats.matched += 1
                    stats.bytes += len(msg.body)
                    body_bytes += len(msg.body)
                    yield msg
            if nxt <= offset:
                raise PullError(f"{mq}: pull at offset {offset} did not advance (next {nxt})")
            nxt = min(nxt, s.end)
            stats.scanned += nxt - offset
            if self.on_progress is not None:
                self.on_progress(nxt - offset, body_bytes)
            offset = nxt
        self.complete = True


def run_slice(
    admin: Admin,
    slc: Slice,
    flt: MessageFilter,
    *,
    stop: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Message], SliceStats, bool]:
    """All kept messages of a slice in offset order, its stats, and whether it ran to the end."""
    scan = SliceScan(admin, slc, flt, stop=stop, on_progress=on_progress)
    messages = list(scan)
    return messages, scan.stats, scan.complete
