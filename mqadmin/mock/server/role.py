"""What a listener answers: the role base class, and what both roles' handlers share.

A role holds its request handlers by code (bound from the tables in ``handlers``); a handler
raises ``bad(...)`` for an error reply, and the dispatcher turns it into the response.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from mqadmin import errors
from mqadmin.protocol import headers
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

#: digits of the largest Java long: a number with more cannot be any header field's value
MAX_NUMBER_DIGITS: Final = 19
_INTEGER: Final = re.compile(r"[-+]?0*([0-9]*)")


def _numeric_fields() -> dict[str, str]:
    """Wire name -> Java type of every int/long field a request header declares (long names and
    the one-letter SEND_MESSAGE_V2 names)."""
    out: dict[str, str] = {}
    pending: list[type[headers.Header]] = [headers.Header]
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if cls is headers.Header:
            continue
        for f in dataclasses.fields(cls):
            if f.metadata["java"] in headers.JAVA_RANGES:
                out[f.name] = f.metadata["java"]
                if f.metadata["v2"]:
                    out[f.metadata["v2"]] = f.metadata["java"]
    return out


NUMERIC_FIELDS: Final = _numeric_fields()


def oversized_number(req: RemotingCommand) -> str | None:
    """The refusal of a number field too long to be a Java int or long, checked before any
    handler parses it (Python would refuse thousands of digits with its own words); None when
    every number field is of a sane length. A long run of leading zeros is dropped here, as
    Java's parser ignores it. Range checks stay with the header parser."""
    for name, value in req.ext_fields.items():
        java = NUMERIC_FIELDS.get(name)
        if java is None or not isinstance(value, str) or len(value) <= MAX_NUMBER_DIGITS:
            continue
        match = _INTEGER.fullmatch(value)
        if not match:
            continue
        digits = match.group(1)
        if len(digits) > MAX_NUMBER_DIGITS:
            return f"the custom field <{name}> is not a Java {java}: a number of {len(digits)} digits"
        req.ext_fields[name] = ("-" if value.startswith("-") else "") + (digits or "0")
    return None


def bad(code: int, remark: str) -> errors.BrokerError:
    """An error reply raised from inside a handler; the dispatcher turns it into a response."""
    return errors.BrokerError.for_code(int(code), remark)


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
