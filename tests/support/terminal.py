"""A program in a real pseudo-terminal, its screen read back as a person would see it.

The child gets a pty of the given size as its controlling terminal (so shells run their line
editors and programs see a tty of that width); what it writes is fed to ``pyte``, a VT100
emulator, and the screen is returned as lines of text. Every wait is bounded.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pyte


def default_sigint() -> None:
    """In a child before exec: SIGINT back to its default action. A suite started in the
    background of a non-interactive shell inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt; a test sending SIGINT plays a person's Ctrl-C, which that child must get."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        cols: int = 80,
        rows: int = 24,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        child_env = {"TERM": "xterm", "LANG": "C.UTF-8", **(env if env is not None else os.environ)}
        child_env["COLUMNS"], child_env["LINES"] = str(cols), str(rows)
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once (no Python state of the parent is used)
            try:
                if cwd is not None:
                    os.chdir(cwd)
                default_sigint()
                os.execvpe(argv[0], list(argv), child_env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.returncode: int | None = None
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def pump(self, seconds: float) -> bool:
        """Read what the program writes for up to ``seconds``; False once it has exited."""
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        self.stream.feed(data)
        return True

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display).rstrip("\n")

    def wait_for(self, done: Callable[[str], bool], timeout: float = 10.0) -> str:
        """The screen once ``done(screen)`` holds; AssertionError with the screen after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.text()
            if done(screen):
                return screen
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"terminal did not show what was awaited in {timeout} s:\n{screen}")
            if not self.pump(min(left, 0.1)):
                screen = self.text()
                if done(screen):
                    return screen
                raise AssertionError(f"the program exited before showing what was awaited:\n{screen}")

    def settle(self, quiet: float = 0.3, timeout: float = 10.0) -> str:
        """The screen once nothing new has arrived for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            before = self.text()
            alive = self.pump(quiet)
            now = self.text()
            if now == before == last or not alive:
                return now
            last = now
        return self.text()

    def wait(self, timeout: float = 10.0) -> int:
        """The program's exit code once it has ended (reading what it still writes); AssertionError
        if it is still running after ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.returncode is None:
            alive = self.pump(0.1)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise AssertionError(f"the program is still running after {timeout} s:\n{self.text()}")
            elif not alive:
                time.sleep(0.05)
        return self.returncode

    def close(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
        os.close(self.fd)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()
