"""A counting transport: what one command costs on the wire (requests by code, connections, admins).

``counting()`` swaps the remoting client's plain transport for one that decodes every frame it
sends, so a test can bound the requests and TCP connections a command needs: on a remote
cluster each is a round trip and a way to fail, and the bound keeps them from growing back.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mqadmin.protocol.codec import FrameDecoder
from mqadmin.protocol.codes import RequestCode
from mqadmin.remoting import backend, client


@dataclass
class Counts:
    """What the client sent while counting: requests by code name, and per address."""

    connections: int = 0
    admins: int = 0
    by_code: Counter[str] = field(default_factory=Counter)
    by_addr: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def requests(self) -> int:
        return sum(self.by_code.values())

    def summary(self) -> str:
        codes = ", ".join(f"{c} {n}" for c, n in sorted(self.by_code.items()))
        return f"{self.requests} requests, {self.connections} connections, {self.admins} admins ({codes})"


def _name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


@contextlib.contextmanager
def counting() -> Iterator[Counts]:
    """Count, in this process, every request frame the remoting client writes, every connection it
    opens and every RemotingAdmin built (answers to the server's own requests are not counted)."""
    counts = Counts()
    plain = client.PlainTransport

    class CountingTransport(plain):  # type: ignore[valid-type,misc]
        def __init__(self, sock: Any) -> None:
            super().__init__(sock)
            self._decoder = FrameDecoder()
            peer = sock.getpeername()
            self._addr = f"{peer[0]}:{peer[1]}"
            with counts.lock:
                counts.connections += 1

        def send(self, data: bytes) -> None:
            frames = [f for f in self._decoder.feed(data) if not f.is_response]
            with counts.lock:
                for f in frames:
                    counts.by_code[_name(f.code)] += 1
                    counts.by_addr[self._addr] += 1
            super().send(data)

    own_init = "__init__" in vars(backend.RemotingAdmin)
    admin_init = backend.RemotingAdmin.__init__

    def counted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        with counts.lock:
            counts.admins += 1
        admin_init(self, *args, **kwargs)

    client.PlainTransport = CountingTransport  # type: ignore[misc]
    backend.RemotingAdmin.__init__ = counted_init  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        client.PlainTransport = plain  # type: ignore[misc]
        if own_init:
            backend.RemotingAdmin.__init__ = admin_init  # type: ignore[method-assign]
        else:
            del backend.RemotingAdmin.__init__
