"""One declaration per request header: what the client sends is what the mock broker reads."""

from __future__ import annotations

import dataclasses

import pytest

from mqadmin import errors
from mqadmin.protocol import headers
from mqadmin.protocol.codec import FrameDecoder, RemotingCommand, encode
from mqadmin.protocol.codes import RequestCode, ResponseCode
from mqadmin.protocol.headers import (
    V2_NAMES,
    BrokerConsumeStatsHeader,
    ConsumeStatsHeader,
    Header,
    PullMessageHeader,
    QueueHeader,
    ResetOffsetHeader,
    SendMessageHeader,
    UpdateConsumerOffsetHeader,
)


def wire(cmd: RemotingCommand) -> RemotingCommand:
    """The command as the other side decodes it from bytes."""
    (decoded,) = FrameDecoder().feed(encode(cmd))
    return decoded


def test_built_headers_parse_back_to_the_same_values() -> None:
    pull = PullMessageHeader(
        consumerGroup="G", topic="T", queueId=3, queueOffset=2**40, sysFlag=0x4, subscription="*", expressionType="TAG"
    )
    req = wire(pull.request())
    assert req.code == RequestCode.PULL_MESSAGE
    assert req.ext_fields["queueOffset"] == str(2**40) and req.ext_fields["subscription"] == "*"
    assert PullMessageHeader.parse(req) == pull
    reset = ResetOffsetHeader(topic="T", group="G", timestamp=1_700_000_000_000, isForce=True)
    assert ResetOffsetHeader.parse(wire(reset.request())) == reset


def test_none_fields_stay_off_the_wire_and_parse_as_their_default() -> None:
    req = wire(ConsumeStatsHeader(consumerGroup="G").request())
    assert req.ext_fields == {"consumerGroup": "G"}
    assert ConsumeStatsHeader.parse(req).topic is None
    assert wire(BrokerConsumeStatsHeader(isOrder=False).request()).ext_fields == {"isOrder": "false"}


def test_send_v2_goes_by_letters_and_parses_by_name() -> None:
    header = SendMessageHeader(producerGroup="P", topic="T", queueId=1, bornTimestamp=5, properties="a\x01b\x02")
    req = wire(header.request(body=b"x"))
    assert req.code == RequestCode.SEND_MESSAGE_V2
    assert req.ext_fields["b"] == "T" and req.ext_fields["e"] == "1" and "topic" not in req.ext_fields
    assert "l" not in req.ext_fields  # maxReconsumeTimes unset: left out, as Java leaves nulls out
    assert SendMessageHeader.parse_any(req) == header
    plain = wire(header.request(RequestCode.SEND_MESSAGE))
    assert plain.ext_fields["topic"] == "T" and SendMessageHeader.parse_any(plain) == header


def test_a_missing_required_field_is_the_brokers_null_field_error() -> None:
    req = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T"})
    with pytest.raises(errors.BrokerError) as info:
        UpdateConsumerOffsetHeader.parse(req)
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == "the custom field <queueId> is null"
    # V2 requests are named by their long names in the error, as the mock broker always said
    with pytest.raises(errors.BrokerError, match="<topic> is null"):
        SendMessageHeader.parse_any(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "P"}))


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [("queueId", 2**31, "int"), ("queueId", -(2**31) - 1, "int"), ("commitOffset", 2**63, "long")],
)
def test_values_outside_the_java_type_are_refused(field: str, value: int, kind: str) -> None:
    ext = {"consumerGroup": "G", "topic": "T", "queueId": 0, "commitOffset": 0, field: value}
    with pytest.raises(errors.BrokerError) as info:
        UpdateConsumerOffsetHeader.parse(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == f"the custom field <{field}> is not a Java {kind}: {value}"


def test_the_edges_of_the_java_types_are_accepted() -> None:
    ext = {"consumerGroup": "G", "topic": "T", "queueId": 2**31 - 1, "commitOffset": -(2**63)}
    parsed = UpdateConsumerOffsetHeader.parse(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert (parsed.queueId, parsed.commitOffset) == (2**31 - 1, -(2**63))


def test_a_non_numeric_value_reads_as_absent() -> None:
    req = RemotingCommand.request(RequestCode.GET_MIN_OFFSET, {"topic": "T", "queueId": "seven"})
    with pytest.raises(errors.BrokerError, match="<queueId> is null"):
        QueueHeader.parse(req)
    pull = RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"consumerGroup": "G", "topic": "T", "queueId": 0, "queueOffset": 0, "maxMsgNums": "many"},
    )
    assert PullMessageHeader.parse(pull).maxMsgNums == 32


# -- conformance: every header class, by its declarations ------------------------------------

ALL_HEADERS = sorted(
    (c for c in vars(headers).values() if isinstance(c, type) and issubclass(c, Header) and c is not Header),
    key=lambda c: c.__name__,
)
#: values at the edges of each Java type (strings: non-ASCII, separators, JSON escapes)
EDGE_VALUES: dict[str, tuple[object, ...]] = {
    "String": ('a;b=c\n"\\ é名', ""),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
    "boolean": (True, False),
}


def test_the_list_covers_every_header_the_module_exports() -> None:
    exported = {n for n in headers.__all__ if n != "Header" and issubclass(getattr(headers, n), Header)}
    assert {c.__name__ for c in ALL_HEADERS} == exported
    assert len(ALL_HEADERS) == len(exported) >= 19


def test_each_request_code_has_one_header() -> None:
    owners: dict[RequestCode, str] = {}
    for cls in ALL_HEADERS:
        assert cls.CODES, f"{cls.__name__} names no request code"
        for code in cls.CODES:
            assert owners.setdefault(code, cls.__name__) == cls.__name__, f"{code!r} in two headers"


def _parse(cls: type[Header], req: RemotingCommand) -> Header:
    return cls.parse_any(req) if cls is SendMessageHeader else cls.parse(req)  # type: ignore[attr-defined]


def _edge_instance(cls: type[Header], which: int) -> Header:
    return cls(**{f.name: EDGE_VALUES[f.metadata["java"]][which] for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("which", [0, 1], ids=["low-edge", "high-edge"])
def test_every_field_at_its_edges_survives_the_wire_for_every_code(cls: type[Header], which: int) -> None:
    header = _edge_instance(cls, which)
    for code in cls.CODES:
        req = wire(header.request(code))
        assert req.code == code
        assert _parse(cls, req) == header


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_only_the_required_fields_make_a_request(cls: type[Header]) -> None:
    required = [f for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
    sample = {f.name: EDGE_VALUES[f.metadata["java"]][0] for f in required}
    header = cls(**sample)
    parsed = _parse(cls, wire(header.request()))
    assert parsed == header
    for f in dataclasses.fields(cls):
        if f not in required:
            assert getattr(parsed, f.name) == f.default


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_each_missing_required_field_is_named(cls: type[Header]) -> None:
    full = _edge_instance(cls, 1).request()
    names = dict(V2_NAMES) if cls is SendMessageHeader else {}
    wire_name = {v: k for k, v in names.items()}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            continue
        ext = dict(full.ext_fields)
        del ext[wire_name.get(f.name, f.name)]
        with pytest.raises(errors.BrokerError, match=f"<{f.name}> is null"):
            _parse(cls, RemotingCommand.request(full.code, ext))
