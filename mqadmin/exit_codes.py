"""Process exit codes: the contract scripts, cron jobs and CI checks rely on."""

from __future__ import annotations

import os
import sys
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    #: broker or network failure, partial apply, verification mismatch
    FAILURE = 1
    #: bad option, bad time, unknown group or topic: nothing was changed
    USAGE = 2
    #: a check (e.g. ``consumerProgress --max-lag``) was breached
    CHECK_FAILED = 3
    #: a confirmation was declined at the prompt: nothing was changed
    CANCELLED = 4
    #: interrupted by Ctrl-C (shell convention 128 + SIGINT)
    INTERRUPTED = 130
    #: the reader of stdout went away (``| head``): what a shell reports for ``seq | head -1``
    BROKEN_PIPE = 141


def silence_stdout() -> None:
    """After the reader of stdout went away (``| head``): stdout to /dev/null, so that the
    interpreter's final flush does not complain about the closed pipe a second time."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
