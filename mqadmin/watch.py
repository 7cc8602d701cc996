"""``--watch SECONDS``: run a read command again and again until Ctrl-C.

On a terminal the screen is redrawn with the same table layouts as a single run (so an
80-column terminal still shows every key column), plus the change since the last refresh; piped,
each refresh is one JSON document on one line (JSON lines) for a script to follow; with
``--output-file`` the file is replaced atomically on every refresh (a textfile exporter).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from mqadmin.output import Env, Result, render, write_result

CLEAR = "\x1b[H\x1b[2J"


def watch_loop(run_once: Callable[[], Result], interval: float, fmt: str, env: Env, output_file: str | None) -> None:
    """Refresh until KeyboardInterrupt, which the caller turns into a quiet exit 130."""
    previous: Any = None
    while True:
        started = time.monotonic()
        result = run_once()
        if previous is not None and hasattr(result, "note_previous"):
            result.note_previous(previous)
        read_at_ms = int(time.time() * 1000)
        if output_file:
            write_result(result, fmt, env, output_file)
        elif env.stdout_tty and fmt == "table":
            env.stdout.write(CLEAR)
            render(result, "table", env)
            stamp = time.strftime("%H:%M:%S", time.localtime(read_at_ms / 1000))
            env.stdout.write(f"\nEvery {interval:g}s, read at {stamp}; Change: since the last refresh. Ctrl-C stops.\n")
        else:
            env.stdout.write(json.dumps({"read_at_ms": read_at_ms, **result.to_json()}, ensure_ascii=False) + "\n")
        env.stdout.flush()
        previous = result
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
