"""--rate: one schedule that every message of a run passes (the local writer, or each Spark task
with its share of the rate)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mqadmin.errors import UsageError

T = TypeVar("T")


class RateLimiter:
    """``--rate``: messages go out no faster than ``per_second``, paced by a schedule (message n
    not before start + n / rate), so the long-run rate is exact and nothing bursts after a pause.
    One per run, in the writer, which every message passes in plan order."""

    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic):
        self.per_second = per_second
        self.clock = clock
        self.start: float | None = None
        self.count = 0
        #: messages per pacing step: about fifty steps a second, one message at low rates
        self.batch = max(1, int(per_second / 50))

    def wait(self, n: int) -> None:
        """Block until the next ``n`` messages may go out, then count them."""
        now = self.clock()
        if self.start is None:
            self.start = now
        due = self.start + self.count / self.per_second
        if due > now:
            time.sleep(due - now)
        self.count += n


def parse_rate(text: str) -> float:
    """``--rate``: ``N`` or ``N/s`` messages a second, ``N/min`` a minute."""
    value, _, unit = text.strip().lower().partition("/")
    try:
        n = float(value)
    except ValueError:
        n = -1.0
    per = {"": 1.0, "s": 1.0, "sec": 1.0, "min": 60.0}.get(unit.strip())
    if per is None or not n > 0 or n == float("inf"):
        raise UsageError(f"--rate takes messages per second like 50 or 50/s, or per minute like 3000/min; got {text!r}")
    return n / per


def paced(pace: RateLimiter | None, items: Sequence[T], write: Callable[[Sequence[T]], Any]) -> int:
    """Hand ``items`` to ``write`` in the limiter's steps, each when it is due (all at once
    without a limiter); the sum of what ``write`` returned."""
    if pace is None:
        return int(write(items))
    done = 0
    for i in range(0, len(items), pace.batch):
        step = items[i : i + pace.batch]
        pace.wait(len(step))
        done += int(write(step))
    return done
