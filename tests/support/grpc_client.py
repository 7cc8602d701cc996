"""Provision and drive ``rocketmq-python-client``, the RocketMQ 5 gRPC client, as a test peer.

It talks gRPC to a ``rocketmq-proxy`` (see ``realbroker.RealProxy``); its SimpleConsumer
consumes by POP.  It installs a top-level ``rocketmq`` package, as rocketmq-client-python
(the C++-based peer of ``official_client``) does, so it lives in a venv of its own, made with
the running interpreter and filled from PyPI by pip on first use; a stamp file makes later
calls stat-only.  Nothing is installed by hand::

    python tests/support/grpc_client.py ensure      # provision, print the venv and timing

``MQADMIN_GRPC_CLIENT_VENV`` overrides where that venv lives (default ``<repo venv>/grpc-client``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # run as a script: make ``tests`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.official_client import PEERS_DIR, Peer, ProvisionError, _file_lock, _pip, default_venv

PEER_SCRIPT = PEERS_DIR / "grpc_client.py"
# 5.1.2 is the version the by-hand run against 5.3.3 used; it pulls grpcio and protobuf wheels
# (binary wheels exist for CPython 3.8-3.13 on Linux x86_64, so no compiler is needed).
CLIENT_SPEC = "rocketmq-python-client==5.1.2"


def client_venv() -> Path:
    env = os.environ.get("MQADMIN_GRPC_CLIENT_VENV")
    return Path(env).expanduser().resolve() if env else default_venv().resolve() / "grpc-client"


def ensure_client(venv_dir: str | Path | None = None) -> Path:
    """Return the venv holding ``CLIENT_SPEC``, creating and filling it once."""
    venv = Path(venv_dir).resolve() if venv_dir else client_venv()
    stamp = venv / ".mqadmin-provisioned"
    if stamp.is_file() and stamp.read_text() == CLIENT_SPEC + "\n":
        return venv
    with _file_lock(venv.parent / f".{venv.name}.lock"):
        if stamp.is_file() and stamp.read_text() == CLIENT_SPEC + "\n":
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # half-made or another version: start clean
        try:
            subprocess.run(
                [sys.executable, "-m", "venv", str(venv)],
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ProvisionError(f"cannot create a venv at {venv}: {exc}") from exc
        _pip(venv, "install", "-q", CLIENT_SPEC)
        check = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "from rocketmq import SimpleConsumer, Producer"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        if check.returncode != 0:
            raise ProvisionError(f"{CLIENT_SPEC} installed but does not import:\n{check.stderr[-2000:]}")
        stamp.write_text(CLIENT_SPEC + "\n")
    return venv


def _peer(args: Sequence[str], workdir: str | Path, name: str, venv_dir: Path | None) -> Peer:
    return Peer(PEER_SCRIPT, list(args), Path(workdir), venv_dir or client_venv(), name=name)


def produce(
    endpoint: str,
    topic: str,
    count: int,
    *,
    workdir: str | Path,
    prefix: str = "m",
    timeout: float = 60,
    venv_dir: Path | None = None,
) -> list[dict[str, object]]:
    """Send ``count`` messages through the proxy; returns the ``sent`` events (body, queue, offset)."""
    args = ["produce", "--endpoint", endpoint, "--topic", topic, "--count", str(count), "--prefix", prefix]
    peer = _peer(args, workdir, f"producer-{prefix}", venv_dir).start()
    peer.wait(timeout)
    sent = peer.of("sent")
    if len(sent) != count:
        raise AssertionError(f"producer sent {len(sent)}/{count}\n" + peer.diagnostics())
    return sent


def simple_consumer(
    endpoint: str,
    group: str,
    topic: str,
    *,
    workdir: str | Path,
    hold: int = 0,
    invisible_s: int = 20,
    name: str = "simple_consumer",
    venv_dir: Path | None = None,
) -> Peer:
    """A SimpleConsumer peer (not started); ``hold`` first messages are received and never acked."""
    args = ["consume", "--endpoint", endpoint, "--group", group, "--topic", topic]
    args += ["--hold", str(hold), "--invisible", str(invisible_s)]
    return _peer(args, workdir, name, venv_dir)


def _main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", choices=["ensure"])
    parser.add_argument("--venv", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.monotonic()
    venv = ensure_client(args.venv)
    print(json.dumps({"venv": str(venv), "spec": CLIENT_SPEC, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
