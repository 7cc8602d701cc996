"""What a listener answers: the role base class, and what both roles' handlers share.

A role holds its request handlers by code (bound from the tables in ``handlers``); a handler
raises ``bad(...)`` for an error reply, and the dispatcher turns it into the response.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from mqadmin import errors
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from mqadmin.mock.server.connection import Connection
    from mqadmin.mock.server.core import MockServer

#: brokers create the default topic (protocol.constants.DEFAULT_TOPIC) with 8 queues, perm 7,
#: and cap auto-created topics at 8 queues (broker: BrokerConfig.java defaultTopicQueueNums)
DEFAULT_TOPIC_QUEUES: Final = 8
DEFAULT_TOPIC_PERM: Final = 7
RETRY_TOPIC_QUEUES: Final = 1

Handler = Callable[["Connection", RemotingCommand], "RemotingCommand | None"]


def bad(code: int, remark: str) -> errors.BrokerError:
    """An error reply raised from inside a handler; the dispatcher turns it into a response."""
    return errors.BrokerError.for_code(int(code), remark)


def now_ms() -> int:
    return int(time.time() * 1000)


class Role:
    """A listener's personality: its request handlers, keyed by request code."""

    name: str
    handlers: dict[int, Handler]
    #: a 4.x name server answers nothing at all to a code it does not know
    answers_unknown: bool = True

    def __init__(self, server: MockServer) -> None:
        self.server = server
        self.handlers = {}

    @property
    def ordinal(self) -> int:
        return self.server.version_ordinal

    def reply(
        self,
        req: RemotingCommand,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        empty_ext: bool = False,
    ) -> RemotingCommand:
        """A reply stamped with the server's own version, as Java servers stamp theirs."""
        out = req.reply(code, remark, ext, body, version=self.ordinal)
        out.keep_empty_ext_fields = empty_ext
        return out

    def check_access(self, req: RemotingCommand) -> str | None:
        """None when the request may proceed, else the NO_PERMISSION remark."""
        return None
