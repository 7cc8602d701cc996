"""Provision and drive the official Apache Python client (``rocketmq-client-python``) as a test peer.

The client is a ctypes wrapper over the C++ client and PyPI ships it without the native
library.  ``rocketmq-python-cvs`` 2.1.0.3 has a matching ``librocketmq.so`` (C++ client 2.1.0)
inside its *sdist*; we download that sdist with pip, extract only the library into the venv
and point the peer processes at it.  Nothing is installed by hand, only PyPI is used, and the
second call costs a stat or two.

The peers (``peers/producer.py``, ``peers/push_consumer.py``) always run in a subprocess: the
C++ client can segfault on shutdown, which must fail a test with the peer's output attached,
not kill pytest.  Stdlib only, so benchmarks and scripts can import it too::

    python tests/support/official_client.py ensure      # provision, print paths and timings
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = Path(__file__).resolve().parent / "peers"
PRODUCER_SCRIPT = PEERS_DIR / "producer.py"
PUSH_CONSUMER_SCRIPT = PEERS_DIR / "push_consumer.py"

CLIENT_SPEC = "rocketmq-client-python==2.0.0"
CLIENT_DIST_INFO = "rocketmq_client_python-2.0.0.dist-info"
NATIVE_SPEC = "rocketmq-python-cvs==2.1.0.3"
NATIVE_SDIST = "rocketmq-python-cvs-2.1.0.3.tar.gz"
# Pinned so a re-uploaded or tampered sdist is refused rather than loaded into a test process.
NATIVE_SDIST_SHA256 = "99e4ce8008554a74193a3ad94b60f939a4666c48ffabbf4c4417a109daf1419d"
NATIVE_MEMBER = "rocketmq-python-cvs-2.1.0.3/rocketmq/librocketmq.so"
NATIVE_VERSION_MARK = b"CPP CORE VERSION: 2.1.0"
NATIVE_DIRNAME = "rocketmq-native"
LIBRARY_NAME = "librocketmq.so"

# Other distributions that install a top-level ``rocketmq`` package over the same files.
_CLASHING_DISTS = ("rocketmq-*.dist-info", "rocketmq_python_cvs-*.dist-info", "rocketmq_client_python-*.dist-info")

# Variables that would reroute a peer or its C++ logging away from the test's directories.
_SCRUBBED_ENV = ("NAMESRV_ADDR", "ROCKETMQ_HOME", "ROCKETMQ_CLIENT_LOG_DIR", "PYTHONPATH", "PYTHONHOME")


class ProvisionError(RuntimeError):
    """The official client could not be provisioned (pip failed, PyPI unreachable, bad file)."""


# --------------------------------------------------------------------------------------
# Provisioning
# --------------------------------------------------------------------------------------


def default_venv() -> Path:
    """The venv running us, else the repository's ``.venv`` (where ``make`` installs)."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    return REPO_ROOT / ".venv"


def venv_python(venv_dir: str | Path | None = None) -> Path:
    return Path(venv_dir or default_venv()) / "bin" / "python"


def native_dir(venv_dir: str | Path | None = None) -> Path:
    return Path(venv_dir or default_venv()) / NATIVE_DIRNAME


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise provisioning between concurrent pytest workers sharing one venv."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pip(venv_dir: Path, *args: str, timeout: float = 600) -> None:
    """Run the venv's own pip so the index/proxy configuration of the machine applies."""
    cmd = [str(venv_python(venv_dir)), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"{' '.join(cmd)} failed: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise ProvisionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{tail}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_librocketmq(venv_dir: str | Path | None = None) -> Path:
    """Return ``<venv>/rocketmq-native/librocketmq.so``, downloading and extracting it once.

    The sdist is only downloaded (never installed: it ships its own ``rocketmq`` package that
    would overwrite rocketmq-client-python's).  A stamp file makes repeat calls stat-only.
    """
    venv = Path(venv_dir or default_venv()).resolve()
    target_dir = native_dir(venv)
    lib = target_dir / LIBRARY_NAME
    stamp = target_dir / (LIBRARY_NAME + ".source")
    expected = f"{NATIVE_SPEC} sha256={NATIVE_SDIST_SHA256}\n"
    if lib.is_file() and stamp.is_file() and stamp.read_text() == expected:
        return lib
    with _file_lock(target_dir / ".lock"):
        if lib.is_file() and stamp.is_file() and stamp.read_text() == expected:
            return lib
        cache = target_dir / "sdist"
        sdist = cache / NATIVE_SDIST
        if not sdist.is_file() or _sha256(sdist) != NATIVE_SDIST_SHA256:
            sdist.unlink(missing_ok=True)
            # --no-binary keeps pip from ever picking a wheel without the library in it.
            _pip(venv, "download", "--no-deps", "--no-binary", ":all:", "-d", str(cache), NATIVE_SPEC)
            if not sdist.is_file():
                raise ProvisionError(f"pip download did not produce {sdist}")
        got = _sha256(sdist)
        if got != NATIVE_SDIST_SHA256:
            raise ProvisionError(f"{sdist} has sha256 {got}, expected {NATIVE_SDIST_SHA256}")
        with tarfile.open(sdist, "r:gz") as tar:
            member = tar.getmember(NATIVE_MEMBER)
            source = tar.extractfile(member)
            if source is None:
                raise ProvisionError(f"{NATIVE_MEMBER} in {sdist} is not a regular file")
            data = source.read()
        if not data.startswith(b"\x7fELF") or NATIVE_VERSION_MARK not in data:
            raise ProvisionError(f"{NATIVE_MEMBER} is not the expected C++ client 2.1.0 build")
        fd, tmp = tempfile.mkstemp(dir=target_dir, prefix=".librocketmq-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, lib)  # atomic: a concurrent reader never sees half a library
        stamp.write_text(expected)
    return lib


def _site_packages(venv: Path) -> list[Path]:
    return sorted(venv.glob("lib/python3*/site-packages"))


def ensure_client(venv_dir: str | Path | None = None) -> Path:
    """Pip-install rocketmq-client-python 2.0.0 into the venv unless it is already there.

    Returns the site-packages directory holding it.  Another distribution owning the
    ``rocketmq`` package is an error, not something to paper over: its ffi would load a
    different library than the one the peers are meant to test against.
    """
    venv = Path(venv_dir or default_venv()).resolve()
    for site in _site_packages(venv):
        if (site / CLIENT_DIST_INFO).is_dir():
            return site
    with _file_lock(native_dir(venv) / ".lock"):
        for site in _site_packages(venv):
            if (site / CLIENT_DIST_INFO).is_dir():
                return site
            clashes = [p.name for pattern in _CLASHING_DISTS for p in site.glob(pattern)]
            if clashes:
                raise ProvisionError(
                    f"{site} already has {', '.join(clashes)}, which owns the 'rocketmq' package; "
                    f"uninstall it so {CLIENT_SPEC} can be installed"
                )
        _pip(venv, "install", "-q", CLIENT_SPEC)
        for site in _site_packages(venv):
            if (site / CLIENT_DIST_INFO).is_dir():
                return site
    raise ProvisionError(f"pip reported success but {CLIENT_DIST_INFO} is not in {venv}")


@dataclass(frozen=True)
class Provisioned:
    venv: Path
    python: Path
    library: Path
    site_packages: Path
    seconds: float


def ensure_all(venv_dir: str | Path | None = None) -> Provisioned:
    """Both halves of the peer: the Python wrapper and the native library it loads."""
    venv = Path(venv_dir or default_venv()).resolve()
    started = time.monotonic()
    site = ensure_client(venv)
    lib = ensure_librocketmq(venv)
    return Provisioned(venv, venv_python(venv), lib, site, time.monotonic() - started)


def peer_env(
    workdir: str | Path,
    venv_dir: str | Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for a peer subprocess whose every file lands under ``workdir``.

    * ``LD_LIBRARY_PATH``: the documented way for the wrapper's ``find_library`` to see the
      library.  On Linux that lookup only honours it through ``ld`` and ``objdump`` (binutils),
      so ``MQADMIN_LIBROCKETMQ`` also names the file for the peers' loader shim.
    * ``ROCKETMQ_CLIENT_LOG_DIR``: where the C++ client writes ``<pid>_rocketmq-cpp.log.N``
      (default ``$HOME/logs/rocketmq-cpp``).
    * ``HOME``: the C++ client keeps broadcasting offsets in ``$HOME/.rocketmq_offsets`` and a
      namesrv snapshot under ``$HOME/logs``; a private home keeps tests apart.
    """
    work = Path(workdir).resolve()
    lib_dir = native_dir(venv_dir).resolve()
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    old_ld = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = f"{lib_dir}:{old_ld}" if old_ld else str(lib_dir)
    env["MQADMIN_LIBROCKETMQ"] = str(lib_dir / LIBRARY_NAME)
    env["ROCKETMQ_CLIENT_LOG_DIR"] = str(work / "logs")
    env["HOME"] = str(work / "home")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # a segfault prints the Python stack to stderr
    env.update(extra or {})
    return env


# --------------------------------------------------------------------------------------
# Running peers
# --------------------------------------------------------------------------------------


class PeerFailed(AssertionError):
    """A peer crashed, exited non-zero or timed out; the message carries its output."""


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name} (exit {128 - returncode})"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


@dataclass
class Peer:
    """One peer script in its own process; a thread collects its JSON-lines stdout.

    Lines that are not JSON (the C++ client sometimes prints) are kept as
    ``{"event": "raw", "line": ...}`` so nothing the peer said is lost.
    """

    script: Path
    args: Sequence[str]
    workdir: Path
    venv_dir: Path | None = None
    env_extra: Mapping[str, str] | None = None
    name: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    started_at: float = 0.0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _reader: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()
        self.name = self.name or self.script.stem

    @property
    def stderr_path(self) -> Path:
        return self.workdir / f"{self.name}.stderr"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def start(self) -> Peer:
        if self.proc is not None:
            raise RuntimeError("peer already started")
        (self.workdir / "home").mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        python = venv_python(self.venv_dir)
        cmd = [str(python), str(self.script), *self.args]
        with open(self.stderr_path, "w") as err:  # a file: a chatty stderr can never block the peer
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=peer_env(self.workdir, self.venv_dir, self.env_extra),
                cwd=self.workdir,
                start_new_session=True,  # a Ctrl-C in the terminal must not reach it twice
            )
        self.started_at = time.monotonic()
        self._reader = threading.Thread(target=self._read, name=f"peer-{self.name}", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if not line:
                continue
            try:
                event = json.loads(line)
                if not isinstance(event, dict):
                    raise ValueError
            except ValueError:
                event = {"event": "raw", "line": line}
            event.setdefault("t", round(time.monotonic() - self.started_at, 3))
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        self.proc.stdout.close()  # EOF: the peer is gone or closed stdout; release the pipe
        with self._cond:
            self._cond.notify_all()

    # -- queries -----------------------------------------------------------------------

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e.get("event") == kind]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.of("message")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_until(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float, what: str = "condition"
    ) -> None:
        """Block until ``predicate(events)`` holds; fail with the peer's output if it exits or times out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self.events):
                if self.proc is None or (self.proc.poll() is not None and not self._reader_alive()):
                    raise PeerFailed(
                        f"{self.name} ended ({describe_exit(self._rc())}) before {what}\n" + self.diagnostics()
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerFailed(f"{self.name}: no {what} after {timeout:.0f}s\n" + self.diagnostics())
                self._cond.wait(min(left, 0.5))

    def wait_for_messages(self, count: int, timeout: float) -> list[dict[str, Any]]:
        self.wait_until(lambda ev: sum(e.get("event") == "message" for e in ev) >= count, timeout, f"{count} messages")
        return self.messages

    def wait_for_event(self, kind: str, timeout: float) -> dict[str, Any]:
        self.wait_until(lambda ev: any(e.get("event") == kind for e in ev), timeout, f"'{kind}' event")
        return self.of(kind)[0]

    def wait_for_log(self, needle: str, timeout: float, count: int = 1) -> None:
        """Block until the C++ client's log contains ``needle`` ``count`` times.

        Some states have no callback to report them (e.g. "rebalanced, pulling"), only a log line.
        """
        deadline = time.monotonic() + timeout
        while self.cpp_log().count(needle) < count:
            if not self.running():
                raise PeerFailed(
                    f"{self.name} ended ({describe_exit(self._rc())}) before logging {needle!r}\n" + self.diagnostics()
                )
            if time.monotonic() > deadline:
                raise PeerFailed(f"{self.name}: {needle!r} not logged after {timeout:.0f}s\n" + self.diagnostics())
            time.sleep(0.1)

    def _rc(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    # -- ending --------------------------------------------------------------------------

    def wait(self, timeout: float, check: bool = True) -> int:
        """Wait for the peer to exit by itself; with ``check`` a crash or non-zero exit fails."""
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise PeerFailed(f"{self.name} did not exit within {timeout:.0f}s\n" + self.diagnostics()) from None
        if self._reader is not None:
            self._reader.join(5)
        if check and rc != 0:
            raise PeerFailed(f"{self.name} failed: {describe_exit(rc)}\n" + self.diagnostics())
        return rc

    def stop(self, timeout: float = 30, check: bool = True) -> int:
        """SIGTERM (the peers shut the client down cleanly on it) and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout, check)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no unregister, no final offset commit (a crashed consumer)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def diagnostics(self, lines: int = 40) -> str:
        """Exit status plus the tails of stdout events, stderr and the C++ client log."""
        parts = [f"--- {self.name}: {describe_exit(self._rc())}; cmd: {self.script.name} {' '.join(self.args)}"]
        with self._cond:
            tail = self.events[-lines:]
        parts.append("--- stdout (last events):")
        parts += [json.dumps(e) for e in tail]
        with contextlib.suppress(OSError):
            parts.append("--- stderr:")
            parts += self.stderr_path.read_text(errors="replace").splitlines()[-lines:]
        for log in sorted(self.log_dir.glob("*rocketmq-cpp.log*")):
            with contextlib.suppress(OSError):
                parts.append(f"--- {log.name}:")
                parts += log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(parts)

    def cpp_log(self) -> str:
        """The C++ client's whole log (all rotated files), for asserting on what it saw."""
        return "".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*rocketmq-cpp.log*")))

    def __enter__(self) -> Peer:
        return self.start() if self.proc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.running():
            try:
                self.stop(check=exc_type is None)
            finally:
                self.kill()


def _common_args(namesrv_addr: str, group: str, log_level: str | None) -> list[str]:
    args = ["--namesrv", namesrv_addr, "--group", group]
    if log_level:
        args += ["--log-level", log_level]
    return args


def producer(
    namesrv_addr: str,
    topic: str,
    count: int,
    *,
    workdir: str | Path,
    group: str = "mqadmin_peer_producer",
    tags: Sequence[str] = (),
    keys: str | None = None,
    body: str | None = None,
    sharding_key: str | None = None,
    extra_args: Sequence[str] = (),
    log_level: str | None = None,
    venv_dir: str | Path | None = None,
) -> Peer:
    """A producer peer (not started).  ``keys``/``body``/``sharding_key`` are ``str.format`` templates with ``{i}``."""
    args = [*_common_args(namesrv_addr, group, log_level), "--topic", topic, "--count", str(count)]
    for tag in tags:
        args += ["--tag", tag]
    if keys is not None:
        args += ["--keys", keys]
    if body is not None:
        args += ["--body", body]
    if sharding_key is not None:
        args += ["--sharding-key", sharding_key]
    return Peer(
        PRODUCER_SCRIPT, [*args, *extra_args], Path(workdir), Path(venv_dir) if venv_dir else None, name="producer"
    )


def produce(
    namesrv_addr: str, topic: str, count: int, *, workdir: str | Path, timeout: float = 120, **kwargs: Any
) -> list[dict[str, Any]]:
    """Run the producer peer to completion; returns its ``sent`` events, one per message."""
    peer = producer(namesrv_addr, topic, count, workdir=workdir, **kwargs).start()
    peer.wait(timeout)
    sent = peer.of("sent")
    if len(sent) != count:
        raise PeerFailed(f"producer exited 0 but reported {len(sent)}/{count} sends\n" + peer.diagnostics())
    return sent


def push_consumer(
    namesrv_addr: str,
    group: str,
    topic: str,
    *,
    workdir: str | Path,
    expression: str = "*",
    broadcasting: bool = False,
    max_messages: int | None = None,
    idle_exit: float | None = None,
    extra_args: Sequence[str] = (),
    log_level: str | None = None,
    venv_dir: str | Path | None = None,
    name: str = "push_consumer",
) -> Peer:
    """A push-consumer peer (not started); use as a context manager so it is always stopped."""
    args = [*_common_args(namesrv_addr, group, log_level), "--topic", topic, "--expression", expression]
    if broadcasting:
        args.append("--broadcasting")
    if max_messages is not None:
        args += ["--max-messages", str(max_messages)]
    if idle_exit is not None:
        args += ["--idle-exit", str(idle_exit)]
    return Peer(
        PUSH_CONSUMER_SCRIPT, [*args, *extra_args], Path(workdir), Path(venv_dir) if venv_dir else None, name=name
    )


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", choices=["ensure"])
    parser.add_argument("--venv", type=Path, default=None)
    args = parser.parse_args(argv)
    got = ensure_all(args.venv)
    print(
        json.dumps(
            {
                "venv": str(got.venv),
                "library": str(got.library),
                "site_packages": str(got.site_packages),
                "seconds": round(got.seconds, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(_main())
