"""Golden frames: bytes laid out by hand (remoting: RemotingCommand.java, RocketMQSerializable.java)
against the codec."""

from __future__ import annotations

import enum

import pytest

from mqadmin.errors import ConnectError
from mqadmin.protocol.codec import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    FRAME_MAX_LENGTH,
    BadFrame,
    FrameDecoder,
    FrameTooLarge,
    RemotingCommand,
    decode_header,
    encode,
    encode_header,
    ext_value,
)
from mqadmin.protocol.codes import (
    CURRENT_VERSION,
    VERSION_NAMES,
    LanguageCode,
    MQVersion,
    RequestCode,
    ResponseCode,
    SerializeType,
    version_name,
    version_ordinal,
)

# The doc's example request, as a Java 5.3.3 client writes it.
DOC_REQUEST_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":42,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
# length = 4 (header word) + 132 (header) = 136 = 0x88; header word = type 0 | 132 (0x84).
DOC_REQUEST_FRAME = b"\x00\x00\x00\x88" + b"\x00\x00\x00\x84" + DOC_REQUEST_HEADER

# The doc's example namesrv reply: no extFields, no remark, flag bit 0 set.
DOC_REPLY_HEADER = b'{"code":0,"flag":1,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}'
DOC_REPLY_FRAME = b"\x00\x00\x00\x64" + b"\x00\x00\x00\x60" + DOC_REPLY_HEADER

# The same request with a ROCKETMQ binary header (remoting: RocketMQSerializable.java).
BINARY_HEADER = (
    b"\x00\x69"  # code 105
    b"\x00"  # language JAVA
    b"\x01\xdf"  # version 479
    b"\x00\x00\x00\x2a"  # opaque 42
    b"\x00\x00\x00\x00"  # flag 0
    b"\x00\x00\x00\x00"  # remark length 0 (null)
    b"\x00\x00\x00\x14"  # extFields block: 20 bytes
    b"\x00\x05topic"  # key length (2) + key
    b"\x00\x00\x00\x09TopicTest"  # value length (4) + value
)
# length = 4 + 41 = 45 (0x2d); header word = type 1 << 24 | 41 (0x29).
BINARY_FRAME = b"\x00\x00\x00\x2d" + b"\x01\x00\x00\x29" + BINARY_HEADER


class _Model(enum.Enum):
    CLUSTERING = "c"


def doc_request() -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=42, version=479, language="JAVA"
    )


def test_hand_built_lengths_match_the_layout() -> None:
    assert len(DOC_REQUEST_HEADER) == 0x84
    assert len(DOC_REPLY_HEADER) == 0x60
    assert len(BINARY_HEADER) == 0x29


def test_decode_doc_request() -> None:
    (cmd,) = FrameDecoder().feed(DOC_REQUEST_FRAME)
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert cmd.language == "JAVA"
    assert cmd.version == MQVersion.V5_3_3
    assert cmd.opaque == 42
    assert cmd.flag == 0 and not cmd.is_response and not cmd.is_oneway
    assert cmd.remark is None
    assert cmd.ext_fields == {"topic": "TopicTest"}
    assert cmd.body == b""
    assert cmd.serialize_type == SerializeType.JSON


def test_encode_doc_request_byte_identical() -> None:
    assert encode(doc_request()) == DOC_REQUEST_FRAME
    assert encode_header(doc_request()) == DOC_REQUEST_HEADER


# GET_BROKER_CONSUME_STATS as the Java admin sends it (GetConsumeStatsInBrokerHeader: one boolean
# field, isOrder), laid out by hand: length 4 + 129 = 133 (0x85), header word 129 (0x81).
BROKER_STATS_HEADER = (
    b'{"code":317,"extFields":{"isOrder":"false"},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
BROKER_STATS_FRAME = b"\x00\x00\x00\x85" + b"\x00\x00\x00\x81" + BROKER_STATS_HEADER


def test_broker_consume_stats_request_frame() -> None:
    assert len(BROKER_STATS_HEADER) == 0x81
    cmd = RemotingCommand.request(
        RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": False}, opaque=7, version=479, language="JAVA"
    )
    assert encode(cmd) == BROKER_STATS_FRAME
    (back,) = FrameDecoder().feed(BROKER_STATS_FRAME)
    assert back.code == 317 and back.ext_bool("isOrder") is False


def test_doc_reply_both_ways() -> None:
    request = doc_request()
    reply = request.reply(ResponseCode.SUCCESS, version=479)
    assert reply.opaque == 42 and reply.is_response and reply.language == "JAVA"
    assert encode(reply) == DOC_REPLY_FRAME
    (decoded,) = FrameDecoder().feed(DOC_REPLY_FRAME)
    assert decoded == reply
    assert decoded.flag == FLAG_RESPONSE


def test_binary_header_decodes() -> None:
    (cmd,) = FrameDecoder().feed(BINARY_FRAME)
    assert cmd == doc_request()
    assert cmd.serialize_type == SerializeType.ROCKETMQ


def test_binary_header_encodes_byte_identical() -> None:
    assert encode(doc_request(), SerializeType.ROCKETMQ) == BINARY_FRAME


def test_binary_header_with_remark_body_and_two_fields() -> None:
    header = (
        b"\x00\x16"  # code 22 QUERY_NOT_FOUND
        b"\x01"  # CPP
        b"\x01\x4d"  # version 333
        b"\xff\xff\xff\xfe"  # opaque -2 (Java counters wrap negative)
        b"\x00\x00\x00\x01"  # response
        b"\x00\x00\x00\x03not"  # remark
        b"\x00\x00\x00\x0f"  # 15 bytes of fields
        b"\x00\x01a\x00\x00\x00\x01x"  # a=x
        b"\x00\x01b\x00\x00\x00\x00"  # b="" (empty value)
    )
    body = b"\x00\x01payload"
    frame = (4 + len(header) + len(body)).to_bytes(4, "big") + (0x01000000 | len(header)).to_bytes(4, "big")
    (cmd,) = FrameDecoder().feed(frame + header + body)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (22, "CPP", 333, -2, 1)
    assert cmd.remark == "not"
    assert cmd.ext_fields == {"a": "x", "b": ""}
    assert cmd.body == body
    assert encode(cmd, SerializeType.ROCKETMQ) == frame + header + body


def test_type_byte_is_masked_off_the_header_length() -> None:
    # A 24-bit header length with high bits set must not leak into the type, and vice versa.
    header = b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"remark":"' + b"x" * 70000 + b'","version":0}'
    assert len(header) > 0xFFFF
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.remark == "x" * 70000


def test_body_and_remark_round_trip() -> None:
    cmd = RemotingCommand.response(
        ResponseCode.SYSTEM_ERROR, 'bad "quote" \\ é\n', {"k": "v"}, b"\x00\xffbody", opaque=-5
    )
    frame = encode(cmd)
    assert b'"remark":"bad \\"quote\\" \\\\ \xc3\xa9\\n"' in frame
    (back,) = FrameDecoder().feed(frame)
    assert back == cmd


def test_split_feeds_byte_by_byte() -> None:
    stream = DOC_REQUEST_FRAME + BINARY_FRAME + DOC_REPLY_FRAME
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for i in range(len(stream)):
        got += decoder.feed(stream[i : i + 1])
        # Nothing is emitted until a frame's last byte arrives.
        done = sum(1 for end in _frame_ends(stream) if end <= i + 1)
        assert len(got) == done
    assert [c.code for c in got] == [105, 105, 0]
    assert decoder.buffered == 0


def _frame_ends(stream: bytes) -> list[int]:
    ends, pos = [], 0
    while pos < len(stream):
        pos += 4 + int.from_bytes(stream[pos : pos + 4], "big")
        ends.append(pos)
    return ends


def test_partial_then_many_in_one_feed() -> None:
    decoder = FrameDecoder()
    cut = 10
    assert decoder.feed(DOC_REQUEST_FRAME[:cut]) == []
    assert decoder.buffered == cut
    out = decoder.feed(DOC_REQUEST_FRAME[cut:] + DOC_REPLY_FRAME + BINARY_FRAME[:3])
    assert [c.is_response for c in out] == [False, True]
    assert decoder.buffered == 3
    assert decoder.feed(BINARY_FRAME[3:])[0].serialize_type == SerializeType.ROCKETMQ


def test_frames_cut_anywhere_decode_the_same() -> None:
    """Big bodies fed in chunks cut at random places (mid-length, mid-header, mid-body), reused
    buffers included: the same commands as fed whole."""
    import random

    bodies = [bytes(random.Random(n).randbytes(n)) for n in (0, 1, 5000, 300_000)]
    frames = [encode(RemotingCommand(code=11, opaque=i, remark=f"r{i}", body=b)) for i, b in enumerate(bodies)]
    stream = b"".join(frames) + DOC_REPLY_FRAME
    rng = random.Random(7)
    for _ in range(20):
        decoder, got, pos = FrameDecoder(), [], 0
        while pos < len(stream):
            step = rng.choice((1, 3, 7, 4096, 65536, 262144))
            chunk = stream[pos : pos + step]
            got += decoder.feed(bytearray(chunk) if rng.random() < 0.3 else chunk)
            pos += step
        assert [(c.opaque, c.remark, c.body) for c in got[:-1]] == [(i, f"r{i}", b) for i, b in enumerate(bodies)]
        assert got[-1].is_response and decoder.buffered == 0


def test_a_frame_over_many_chunks_is_copied_once() -> None:
    """A 4 MiB pull reply arriving in 256 KiB reads: reassembling it allocates the body once
    (a growing buffer plus a copy out of it took twice the frame and more)."""
    import tracemalloc

    body = bytes(range(256)) * (16 * 1024)
    frame = encode(RemotingCommand(code=0, flag=FLAG_RESPONSE, body=body))
    chunks = [frame[i : i + 256 * 1024] for i in range(0, len(frame), 256 * 1024)]
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        got = [cmd for chunk in chunks for cmd in decoder.feed(chunk)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [c.body for c in got] == [body]
    assert peak < len(body) * 1.2, peak


def test_empty_feed() -> None:
    assert FrameDecoder().feed(b"") == []


def test_oversize_frame_rejected_from_its_length_alone() -> None:
    decoder = FrameDecoder()
    announced = FRAME_MAX_LENGTH - 4 + 1  # one byte over, counting the length field like Java
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(announced.to_bytes(4, "big"))
    assert isinstance(info.value, ConnectError) and isinstance(info.value, BadFrame)
    # The stream is out of step for good.
    with pytest.raises(FrameTooLarge):
        decoder.feed(DOC_REQUEST_FRAME)


def test_frame_at_limit_and_custom_limit() -> None:
    limit = len(DOC_REQUEST_FRAME)
    assert len(FrameDecoder(max_frame_length=limit).feed(DOC_REQUEST_FRAME)) == 1
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_length=limit - 1).feed(DOC_REQUEST_FRAME)
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(b"\xff\xff\xff\xff")  # not a negative length: a huge one


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(b"\x00\x00\x00\x02\x00\x00", id="length-below-header-word"),
        pytest.param(b"\x00\x00\x00\x06\x00\x00\x00\x09{}", id="header-longer-than-frame"),
        pytest.param(b"\x00\x00\x00\x07\x00\x00\x00\x03{x}", id="unparsable-json"),
        pytest.param(b"\x00\x00\x00\x06\x00\x00\x00\x02[]", id="json-not-object"),
        pytest.param(b"\x00\x00\x00\x06\x00\x00\x00\x02{}", id="json-without-code"),
        pytest.param(b'\x00\x00\x00\x10\x00\x00\x00\x0c{"code":"x"}', id="code-not-int"),
        pytest.param(b'\x00\x00\x00\x18\x00\x00\x00\x14{"code":0,"flag":[]}', id="flag-not-int"),
        pytest.param(b"\x00\x00\x00\x06\x02\x00\x00\x02{}", id="unknown-serialize-type"),
        pytest.param(b"\x00\x00\x00\x07\x01\x00\x00\x03\x00\x01\x00", id="binary-truncated"),
        pytest.param(
            b"\x00\x00\x00\x23\x01\x00\x00\x1f"
            + BINARY_HEADER[:17]
            + b"\x00\x00\x00\x0a"
            + b"\x00\x05topic\x00\x00\x00",
            id="binary-ext-block-truncated",
        ),
        pytest.param(
            b"\x00\x00\x00\x1d\x01\x00\x00\x19" + BINARY_HEADER[:17] + b"\x00\x00\x00\x30" + b"\x00" * 4,
            id="binary-ext-length-past-header",
        ),
    ],
)
def test_bad_frames(frame: bytes) -> None:
    decoder = FrameDecoder()
    with pytest.raises(BadFrame):
        decoder.feed(frame)
    with pytest.raises(BadFrame):
        decoder.feed(b"")


def test_incoming_ext_values_are_coerced_to_strings() -> None:
    # The C++ client and ali-ons send numbers, booleans (and sometimes nulls) as JSON values.
    header = (
        b'{"code":11,"extFields":{"queueId":3,"isForce":true,"unitMode":false,"gone":null,'
        b'"ratio":1.5,"topic":"T"},"flag":0,"language":"CPP","opaque":7,"version":333}'
    )
    cmd = decode_header(header, SerializeType.JSON)
    assert cmd.ext_fields == {"queueId": "3", "isForce": "true", "unitMode": "false", "ratio": "1.5", "topic": "T"}
    assert cmd.language == "CPP" and cmd.version == MQVersion.V4_6_0


def test_lenient_json_header_defaults() -> None:
    # Missing optional fields take Java's defaults; an integer language is named.
    cmd = decode_header(b'{"code":34,"language":3}', SerializeType.JSON)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (34, "PYTHON", 0, 0, 0)
    assert cmd.ext_fields == {} and not cmd.keep_empty_ext_fields


def test_empty_ext_fields_kept_when_present() -> None:
    header = b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}'
    cmd = decode_header(header, SerializeType.JSON)
    assert cmd.ext_fields == {} and cmd.keep_empty_ext_fields
    assert encode_header(cmd) == header
    cmd.keep_empty_ext_fields = False
    assert b"extFields" not in encode_header(cmd)


def test_request_builder_coerces_header_values() -> None:
    cmd = RemotingCommand.request(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        {"topic": "T", "group": "g", "timestamp": 1700000000000, "isForce": False, "queueId": -1, "offset": None},
        oneway=True,
    )
    assert cmd.ext_fields == {
        "topic": "T",
        "group": "g",
        "timestamp": "1700000000000",
        "isForce": "false",
        "queueId": "-1",
    }
    assert cmd.flag == FLAG_ONEWAY and cmd.is_oneway and not cmd.is_response
    assert cmd.language == "PYTHON" and cmd.version == CURRENT_VERSION
    # JSON header keys alphabetical, extFields sorted, values always strings.
    assert encode_header(cmd) == (
        b'{"code":222,"extFields":{"group":"g","isForce":"false","queueId":"-1","timestamp":"1700000000000",'
        b'"topic":"T"},"flag":2,"language":"PYTHON","opaque":0,"serializeTypeCurrentRPC":"JSON","version":479}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("s", "s"),
        (0, "0"),
        (-12, "-12"),
        (True, "true"),
        (False, "false"),
        (LanguageCode.CPP, "1"),
        (SerializeType.ROCKETMQ, "1"),
        (_Model.CLUSTERING, "CLUSTERING"),
        (0.5, "0.5"),
    ],
)
def test_ext_value(value: object, text: str) -> None:
    assert ext_value(value) == text


def test_ext_value_rejects_other_types() -> None:
    with pytest.raises(TypeError):
        ext_value(b"bytes")


def test_ext_readers_follow_java_parsing() -> None:
    cmd = RemotingCommand(code=15, ext_fields={"queueId": "3", "bad": "x", "isForce": "TRUE", "no": "yes"})
    assert cmd.ext_int("queueId") == 3
    assert cmd.ext_int("bad", -1) == -1
    assert RemotingCommand(code=0, ext_fields={"n": "1_000"}).ext_int("n") is None
    assert RemotingCommand(code=0, ext_fields={"n": "+7"}).ext_int("n") == 7
    assert cmd.ext_int("missing") is None
    assert cmd.ext_bool("isForce") is True
    assert cmd.ext_bool("no") is False
    assert cmd.ext_bool("missing", True) is True
    assert cmd.ext_str("queueId") == "3"


def test_binary_header_limits() -> None:
    with pytest.raises(ValueError):
        encode(RemotingCommand(code=200001), SerializeType.ROCKETMQ)  # 5.x POP codes need JSON
    with pytest.raises(ValueError):
        encode(RemotingCommand(code=1, language="KLINGON"), SerializeType.ROCKETMQ)
    # JSON has room for them.
    assert FrameDecoder().feed(encode(RemotingCommand(code=200001)))[0].code == 200001


def test_unknown_language_byte_survives_round_trip() -> None:
    header = bytearray(BINARY_HEADER)
    header[2] = 99
    frame = b"\x00\x00\x00\x2d\x01\x00\x00\x29" + bytes(header)
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.language == "99"
    assert encode(cmd, SerializeType.ROCKETMQ) == frame


def test_int32_range_checked() -> None:
    with pytest.raises(ValueError):
        encode(RemotingCommand(code=1, opaque=2**31))


def test_version_table() -> None:
    # Anchors from Java's MQVersion.Version enum (common: MQVersion.java).
    assert version_ordinal("V3_0_7_SNAPSHOT") == 28
    assert version_ordinal("V3_4_9") == 121
    assert version_ordinal("V4_6_0") == 333
    assert version_ordinal("V4_9_3") == 399
    assert version_ordinal("V4_9_4") == 401
    assert version_ordinal("V5_0_0") == 413
    assert version_ordinal("V5_3_1") == 475
    assert version_ordinal("V5_3_3") == 479 == int(CURRENT_VERSION)
    assert VERSION_NAMES[0] == "V3_0_0_SNAPSHOT" and VERSION_NAMES[-1] == "HIGHER_VERSION"
    assert len(VERSION_NAMES) == len(set(VERSION_NAMES))
    assert all(version_ordinal(m.name) == m for m in MQVersion)
    assert version_name(409) == "V4_9_8"
    assert version_name(10**6) == "HIGHER_VERSION"  # clamped like getVersionDesc
    assert version_ordinal("4.9.8") == version_ordinal("v4_9_8") == 409
    assert version_ordinal("5.3.3-SNAPSHOT") == 478
    with pytest.raises(ValueError):
        version_ordinal("9.9")


def test_language_codes_are_header_bytes() -> None:
    assert [(m.name, int(m)) for m in LanguageCode][:4] == [("JAVA", 0), ("CPP", 1), ("DOTNET", 2), ("PYTHON", 3)]
    assert int(LanguageCode.NODE_JS) == 13


@pytest.mark.parametrize(
    ("member", "number"),
    [
        (RequestCode.GET_CONSUME_STATS, 208),
        (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, 222),
        (RequestCode.SEND_MESSAGE_V2, 310),
        (RequestCode.GET_BROKER_CONSUME_STATS, 317),
        (RequestCode.GET_TOPIC_STATS_INFO, 202),
        (RequestCode.GET_ALL_CONSUMER_OFFSET, 43),
        (RequestCode.REGISTER_TOPIC_IN_NAMESRV, 217),
        (ResponseCode.QUERY_NOT_FOUND, 22),
        (ResponseCode.GO_AWAY, 1500),
        (ResponseCode.CONSUMER_NOT_ONLINE, 206),
        (ResponseCode.NO_MESSAGE, 208),
    ],
)
def test_codes_from_the_doc_tables(member: int, number: int) -> None:
    assert member == number


def test_json_header_fast_path_writes_what_fastjson_writes() -> None:
    """Headers take the C encoder unless a string needs fastjson's own escapes; either way the
    bytes are fastjson's (control characters as upper-case \\u00XX, DEL escaped)."""
    import itertools

    from mqadmin import fastjson
    from mqadmin.protocol.codec import encode_header

    awkward = [
        "plain",
        "é 😀 \u2028",
        "nul\x00",
        "unit\x1f",
        "del\x7f",
        'q"uote',
        "back\\slash",
        "\\u0041",
        "\n\t\b\f\r",
    ]
    for i, (key, value) in enumerate(itertools.product(awkward, repeat=2)):
        cmd = RemotingCommand(code=11, opaque=i, remark=value if i % 2 else None, ext_fields={key: value, "b": "1"})
        bean = {"code": 11, "extFields": dict(sorted({key: value, "b": "1"}.items())), "flag": 0}
        bean.update({"language": cmd.language, "opaque": i})
        if i % 2:
            bean["remark"] = value
        bean.update({"serializeTypeCurrentRPC": "JSON", "version": cmd.version})
        assert encode_header(cmd) == fastjson.dumps(bean).encode("utf-8"), (key, value)
