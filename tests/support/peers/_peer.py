"""What both official-client peers share: JSON-line events and loading the client library.

The peers run as scripts, so their own folder is on ``sys.path`` and they import this directly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
import threading
from typing import Any

LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}
_print_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """One flushed JSON line: the harness reads events as they happen."""
    line = json.dumps({"event": event, **fields}, default=str)
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def load_client() -> Any:
    """Import ``rocketmq.client`` with the library named by ``MQADMIN_LIBROCKETMQ``.

    The wrapper resolves the library with ``ctypes.util.find_library``, which on Linux sees
    ``LD_LIBRARY_PATH`` only through binutils (``ld``, ``objdump``); a fresh machine may have
    neither, so answer that one lookup with the known path.
    """
    path = os.environ.get("MQADMIN_LIBROCKETMQ")
    if path:
        original = ctypes.util.find_library

        def find_library(name: str) -> str | None:
            return path if name == "rocketmq" else original(name)

        ctypes.util.find_library = find_library
    import rocketmq.client

    return rocketmq.client


def text(value: bytes | str | None) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value
