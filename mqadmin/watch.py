"""``--watch SECONDS``: run a read command again and again until Ctrl-C.

On a terminal the screen is redrawn with the same table layouts as a single run (so an
80-column terminal still shows every key column), plus the change since the last refresh; piped,
each refresh is one JSON document on one line (JSON lines) for a script to follow; with
``--output-file`` the file is replaced atomically on every refresh (a textfile exporter).

Each refresh is a new measurement: the context's clock is read again before the command runs,
so a lag time (now minus the oldest unconsumed message's store time) grows while a group stalls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mqadmin.output import Result, json_document, render, write_result

if TYPE_CHECKING:
    from mqadmin.context import Context

CLEAR = "\x1b[H\x1b[2J"


def watch_loop(
    ctx: Context,
    run_once: Callable[[Context], Result],
    interval: float,
    fmt: str,
    output_file: str | None,
    sleep: Callable[[float], None] = time.sleep,
    command: str = "",
) -> None:
    """Refresh until KeyboardInterrupt, which the caller turns into a quiet exit 130."""
    env = ctx.env
    ctx.watching = True
    previous: Any = None
    while True:
        started = time.monotonic()
        read_at_ms = ctx.tick()
        result = run_once(ctx)
        if previous is not None and hasattr(result, "note_previous"):
            result.note_previous(previous)
        if output_file:
            write_result(result, fmt, env, output_file, command)
        elif env.stdout_tty and fmt == "table":
            env.stdout.write(CLEAR)
            render(result, "table", env)
            stamp = time.strftime("%H:%M:%S", time.localtime(read_at_ms / 1000))
            env.stdout.write(f"\nEvery {interval:g}s, read at {stamp}; Change: since the last refresh. Ctrl-C stops.\n")
        else:
            line = {"read_at_ms": read_at_ms, **json_document(result, command)}
            env.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        env.stdout.flush()
        previous = result
        sleep(max(0.0, interval - (time.monotonic() - started)))
