"""Long polling: pulls parked until a message arrives or their suspend time ends.

One thread answers every held pull, as the broker's PullRequestHoldService does
(broker: longpolling/PullRequestHoldService.java), not one thread each.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mqadmin.mock.server.messages import PullParams, pull_reply, read_held
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from mqadmin.mock.server.broker import BrokerRole
    from mqadmin.mock.server.connection import Connection
    from mqadmin.mock.server.core import MockServer

log = logging.getLogger("mqadmin.mock.server")

#: held pulls are swept for expiry and closed peers this often
HOLD_SLICE_S: Final = 0.2
#: long-polled pulls parked at once; beyond that a pull is answered at once (not found)
MAX_HELD_PULLS: Final = 10_000


@dataclass(eq=False)
class HeldPull:
    conn: Connection
    req: RemotingCommand
    role: BrokerRole
    params: PullParams
    deadline: float
    #: answer once the queue grows past this offset
    watermark: int


class LongPolling:
    """The held pulls, by (broker, topic, queue), and the queues that received messages since
    the long-polling thread last looked (both under ``_arrival``)."""

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self._held: dict[tuple[str, str, int], list[HeldPull]] = {}
        #: pulls held right now
        self.count = 0
        self._arrived: set[tuple[str, str, int]] = set()
        self._arrival = threading.Condition()

    def hold(
        self, conn: Connection, req: RemotingCommand, role: BrokerRole, params: PullParams, deadline: float
    ) -> bool:
        """Park a pull until a matching message arrives or ``deadline`` passes; False when too
        many are parked already (the caller answers at once)."""
        key = (role.name, params.topic, params.queue_id)
        with self._arrival:
            if self.count >= MAX_HELD_PULLS:
                return False
            self._held.setdefault(key, []).append(HeldPull(conn, req, role, params, deadline, params.offset))
            self.count += 1
            self._arrived.add(key)  # look once at once: a message may have come in meanwhile
            self._arrival.notify_all()
        return True

    def message_arrived(self, broker: str, topic: str, queue_id: int) -> None:
        """Tell the long-polling thread that a queue grew (every write goes through a handler)."""
        with self._arrival:
            self._arrived.add((broker, topic, queue_id))
            self._arrival.notify_all()

    def wake(self) -> None:
        """Let the thread notice a stop at once."""
        with self._arrival:
            self._arrival.notify_all()

    def run(self) -> None:
        """The thread: it looks at the queues that grew, and sweeps for expired pulls every HOLD_SLICE_S."""
        next_sweep = time.monotonic()
        while not self.server.stopping:
            with self._arrival:
                if not self._arrived:
                    self._arrival.wait(max(0.0, min(HOLD_SLICE_S, next_sweep - time.monotonic())))
                grown, self._arrived = self._arrived, set()
                #: id -> (held pull, whether its queue grew)
                candidates = {id(h): (h, True) for key in grown for h in self._held.get(key, ())}
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + HOLD_SLICE_S
                    for held in self._held.values():
                        for h in held:
                            if id(h) not in candidates and (h.deadline <= now or h.conn.closed.is_set()):
                                candidates[id(h)] = (h, False)
            done = {key for key, (h, look) in candidates.items() if self._check(h, look)}
            if done:
                self._drop(done)

    def _drop(self, done: set[int]) -> None:
        with self._arrival:
            for key in list(self._held):
                left = [h for h in self._held[key] if id(h) not in done]
                self.count -= len(self._held[key]) - len(left)
                if left:
                    self._held[key] = left
                else:
                    del self._held[key]

    def _check(self, held: HeldPull, look: bool) -> bool:
        """Answer ``held`` if it can be answered now (``look``: its queue grew); True when finished."""
        if held.conn.closed.is_set() or self.server.stopping:
            return True  # a stopping server goes away without answering, as a broker does
        try:
            params, role = held.params, held.role
            grown = False
            if look:
                with self.server.lock:
                    grown = role.broker.max_offset(params.topic, params.queue_id) > held.watermark
            expired = time.monotonic() >= held.deadline
            if not grown and not expired:
                return False
            outcome = read_held(role, params)
            if (
                not expired
                and outcome.status == "NO_MATCHED_MESSAGE"
                and outcome.next_begin_offset >= outcome.max_offset
            ):
                held.watermark = outcome.max_offset  # only unwanted tags arrived: keep holding, as the broker does
                return False
            held.conn.send(pull_reply(role, held.req, params, outcome))
        except Exception:
            log.exception("held pull from %s failed", held.conn.peer)
            held.conn.send(held.role.reply(held.req, ResponseCode.SYSTEM_ERROR, "held pull failed"))
        return True
