"""Header values no client sends (numbers of thousands of digits, offsets at the end of a Java long)
are refused up front: every request gets a broker-worded reply, none carries Python's exception
text, and the server logs no handler traceback."""

from __future__ import annotations

import builtins
import dataclasses
import logging
import random
import re

import pytest

from mqadmin.protocol import headers
from mqadmin.protocol.codec import RemotingCommand
from mqadmin.protocol.codes import RequestCode, ResponseCode
from tests.mock.server import wire
from tests.mock.server.wire import GROUP, TOPIC, Clients, Serve
from tests.support.fuzz import REQUESTS

pytestmark = pytest.mark.integration

serve = wire.serve
clients = wire.clients

#: names of Python's own exceptions: a remark naming one leaks the server's internals
PYTHON_ERRORS = re.compile(
    r"\b(" + "|".join(n for n in dir(builtins) if n.endswith(("Error", "Exception", "Exit", "Interrupt"))) + r")\b"
)
#: every int/long header field, by its wire names (long and SEND_MESSAGE_V2 letters)
NUMERIC_FIELDS = sorted(
    {
        name
        for cls in vars(headers).values()
        if isinstance(cls, type) and issubclass(cls, headers.Header) and cls is not headers.Header
        for f in dataclasses.fields(cls)
        if f.metadata["java"] in ("int", "long")
        for name in (f.name, f.metadata["v2"])
        if name
    }
)
HUGE = "9" * 4301
EXTREMES = (
    HUGE,
    "-" + HUGE,
    "0" * 5000 + "1",  # leading zeros: Java parses it as 1
    str(2**63 - 1),
    str(-(2**63)),
    str(2**63),
    str(2**31 - 1),
    "1" * 40,
    "+" + "7" * 30,
)


def _leaks(reply: RemotingCommand) -> bool:
    return bool(reply.remark and PYTHON_ERRORS.search(reply.remark))


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info]


def test_oversized_numbers_and_far_offsets_get_broker_answers(
    serve: Serve, clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve()
    caplog.set_level(logging.INFO, logger="mqadmin.mock.server")
    broker = clients(server.broker_addrs["broker-a"])
    query = broker.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": HUGE})
    assert query.code == ResponseCode.SYSTEM_ERROR
    assert query.remark == "the custom field <queueId> is not a Java int: a number of 4301 digits"
    for offset in (2**63 - 1, 2**62, 10**12):
        view = broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        assert (view.code, view.remark) == (ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        back = broker.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": GROUP, "offset": offset, "delayLevel": 0})
        assert (back.code, back.remark) == (ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
    # a leading-zero number is still the number it spells, as Java's Long.parseLong reads it
    padded = broker.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0" * 5000 + "1"})
    assert padded.code == ResponseCode.SUCCESS, padded
    assert not _tracebacks(caplog)


def test_fuzzed_number_fields_cause_no_traceback_and_no_python_text(
    serve: Serve, clients: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    """Every numeric field of every request the server handles, set to each extreme, then
    random combinations: count the handler tracebacks in the log (zero) and look at each reply."""
    server = serve()
    caplog.set_level(logging.INFO, logger="mqadmin.mock.server")
    broker = clients(server.broker_addrs["broker-a"])
    namesrv = clients(server.namesrv_addr)
    rng = random.Random(21)
    cases: list[tuple[int, dict[str, object]]] = []
    for code, base in REQUESTS:
        numeric = [k for k in base if k in NUMERIC_FIELDS] or ["queueId", "offset"]
        for name in numeric:
            cases += [(code, {**base, name: value}) for value in EXTREMES]
    for _ in range(1500):
        code, base = rng.choice(REQUESTS)
        ext: dict[str, object] = dict(base)
        for name in rng.sample(NUMERIC_FIELDS, rng.randint(1, 4)):
            ext[name] = rng.choice(EXTREMES)
        cases.append((code, ext))
    leaked: list[tuple[int, str | None]] = []
    for code, ext in cases:
        peer = namesrv if code in (RequestCode.GET_ROUTEINFO_BY_TOPIC, 106, 206, 101) else broker
        reply = peer.call(code, ext, b"", timeout=30)
        if _leaks(reply):
            leaked.append((code, reply.remark))
    assert not leaked, leaked[:5]
    traces = _tracebacks(caplog)
    assert len(traces) == 0, f"{len(traces)} handler tracebacks, first: {traces[:3]}"
    assert not broker.eof.is_set() and not namesrv.eof.is_set()
