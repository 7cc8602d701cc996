"""What a command gets besides its own options: the broker, the terminal, the clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from mqadmin.output import Env
from mqadmin.timeparse import now_ms, parse_time

if TYPE_CHECKING:
    from mqadmin.admin import Admin


_WARN_LOCK = threading.Lock()


@dataclass
class Context:
    address: str | None = None
    timeout: float = 3.0
    tz: tzinfo | None = None
    env: Env = field(default_factory=Env)
    assume_yes: bool = False
    #: the --output format: a command may fetch what only that format shows (e.g. java, prometheus)
    output: str = "table"
    connect_options: dict[str, Any] = field(default_factory=dict)
    #: epoch ms; every figure of one measurement is taken at this one instant
    now: int = field(default_factory=now_ms)
    #: --reason: why a change is made (an incident id), for the journal
    reason: str | None = None
    #: where ``now`` comes from (tests inject a clock); ``tick`` reads it again
    clock: Callable[[], int] = field(default=now_ms, repr=False)
    #: set by --watch: the command runs again with this context, so it may keep state in memory
    watching: bool = False
    #: what a command keeps from one --watch refresh to the next (the health samples); it goes
    #: with this context, so two watch loops in one process never share it
    kept: dict[str, Any] = field(default_factory=dict)
    _admin: Admin | None = None
    _admin_ro: bool = True
    _warned: set[str] = field(default_factory=set)

    def admin(self, *, write: bool = False) -> Admin:
        """Open the backend once per run (a writer re-opens a store on disk opened for reading; a
        cluster's connections serve both) and say what the backend has to say about its data, once."""
        if self._admin is not None and not (write and self._admin_ro and self._admin.capabilities.on_disk):
            return self._admin
        from mqadmin.admin import connect

        if self._admin is not None:
            self._admin.close()
        self._admin = connect(self.address, timeout=self.timeout, read_only=not write, **self.connect_options)
        self._admin_ro = not write
        for note in self._admin.notes:
            self.warn_once(str(note))
        from mqadmin import seen

        for gone in seen.vanished(self._admin, self.now):
            self.warn_once(seen.missing_line(gone, self._admin.address, self.now))
        return self._admin

    def warn_once(self, message: str) -> None:
        """A warning that many threads of one run may hit (e.g. a refused read per queue), said once."""
        with _WARN_LOCK:
            if message in self._warned:
                return
            self._warned.add(message)
        self.env.warn(message)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def tick(self) -> int:
        """A new measurement (each --watch refresh): ``now`` is read again, never reused, and the
        cluster is looked at again."""
        if self._admin is not None:
            self._admin.refresh()
        self.now = self.clock()
        return self.now

    def time(self, text: str) -> int:
        return parse_time(text, now=self.now, tz=self.tz, warn=self.env.warn)

    def confirm(self, question: str) -> bool:
        """Ask on a terminal; scripts (stdin not a terminal) and --yes proceed, as the Java tool."""
        if self.assume_yes or not self.env.stdin_tty:
            return True
        self.env.stderr.write(f"{question} [y/N] ")
        self.env.stderr.flush()
        assert self.env.stdin is not None
        answer = self.env.stdin.readline().strip().lower()
        return answer in ("y", "yes")
