"""Seeded fuzz inputs for the remoting codec and the mock server (stdlib only, importable by scripts).

Inputs come in four families, so a run covers what a hostile or broken peer sends: random
bytes; real frames (JSON and binary headers, requests the server handles) with bytes flipped,
cut or duplicated; well-formed frames whose header is nasty (deep nesting, huge numbers,
wrong types, invalid UTF-8, path-like names); and frames whose length words lie.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Iterator

#: request codes the mock server handles, with header fields a real client sends
REQUESTS: tuple[tuple[int, dict[str, str]], ...] = (
    (105, {"topic": "TopicTest"}),  # GET_ROUTEINFO_BY_TOPIC
    (106, {}),  # GET_BROKER_CLUSTER_INFO
    (206, {}),  # GET_ALL_TOPIC_LIST_FROM_NAMESERVER
    (101, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest"}),
    (310, {"a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "i": ""}),
    (10, {"producerGroup": "pg", "topic": "TopicTest", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1"}),
    (11, {"consumerGroup": "g1", "topic": "TopicTest", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32"}),
    (14, {"consumerGroup": "g1", "topic": "TopicTest", "queueId": "0"}),
    (15, {"consumerGroup": "g1", "topic": "TopicTest", "queueId": "0", "commitOffset": "1"}),
    (17, {"topic": "Fuzzed", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}),
    (28, {}),  # GET_BROKER_RUNTIME_INFO
    (29, {"topic": "TopicTest", "queueId": "0", "timestamp": "0"}),
    (30, {"topic": "TopicTest", "queueId": "0"}),
    (31, {"topic": "TopicTest", "queueId": "0"}),
    (32, {"topic": "TopicTest", "queueId": "0"}),
    (33, {"offset": "0"}),  # VIEW_MESSAGE_BY_ID
    (34, {}),  # HEART_BEAT (body)
    (35, {"clientID": "c1", "consumerGroup": "g1"}),
    (36, {"group": "g1", "offset": "0", "delayLevel": "0", "originTopic": "TopicTest"}),
    (38, {"consumerGroup": "g1"}),
    (41, {}),
    (42, {}),
    (43, {}),
    (200, {}),
    (201, {}),
    (202, {"topic": "TopicTest"}),
    (203, {"consumerGroup": "g1"}),
    (208, {"consumerGroup": "g1", "topic": "TopicTest"}),
    (222, {"topic": "TopicTest", "group": "g1", "timestamp": "0", "isForce": "true"}),
    (300, {"topic": "TopicTest"}),
    (351, {"topic": "TopicTest"}),
)

_NASTY_VALUES: tuple[object, ...] = (
    "",
    "-1",
    "-9223372036854775809",
    "9223372036854775808",
    "2147483648",
    "-2147483649",
    "99999999999999999999999999",
    "1e9",
    "NaN",
    " 1",
    "0x10",
    "../../../../escaped",
    "x/../../../../escaped_by_group",
    "%RETRY%../../x",
    ".",
    "..",
    "a" * 300,
    "\u00e9\u4e2d\ud800",
    "\x00",
    "true",
    None,
    [],
    {},
    [[[[]]]],
    1.5,
    2**70,
    -(2**70),
    True,
)

_BODIES: tuple[bytes, ...] = (
    b"",
    b"{",
    b"[" * 5000,
    b'{"clientID":"c","consumerDataSet":[{"groupName":"../../x","subscriptionDataSet":[{"topic":"../y"}]}]}',
    b'{"groupName":"../../../escaped_group"}',
    b'{"clientId":"c","consumerGroup":"g1","mqSet":[{"topic":"t","brokerName":"b","queueId":"x"}]}',
    b"\xff\xfe\x00",
    b'{"a":' * 300 + b"1" + b"}" * 300,
    struct.pack(">iiiii", 30, 0, 0, 0, 2**31 - 1),
    struct.pack(">iiiii", -5, 0, 0, 0, -1),
)


def frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    """One frame with honest length words."""
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def json_header(code: int, ext: dict[str, object], opaque: int = 1, extra: dict[str, object] | None = None) -> bytes:
    doc: dict[str, object] = {"code": code, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque}
    doc["version"] = 479
    doc.update(extra or {})
    return json.dumps(doc).encode()


def binary_header(code: int, ext: dict[str, str], opaque: int = 1) -> bytes:
    pairs = [(k.encode("utf-8", "surrogatepass"), v.encode("utf-8", "surrogatepass")) for k, v in ext.items()]
    block = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in pairs)
    return struct.pack(">hbhii", code, 0, 479, opaque, 0) + struct.pack(">i", 0) + struct.pack(">i", len(block)) + block


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if not buf:
            buf += rng.randbytes(rng.randint(1, 8))
            continue
        i = rng.randrange(len(buf))
        if op == 0:
            buf[i] = rng.randrange(256)
        elif op == 1:
            del buf[i : i + rng.randint(1, 16)]
        elif op == 2:
            buf[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 3:
            buf[i:i] = buf[i : i + rng.randint(1, 32)]
        else:
            buf = buf[: rng.randint(0, len(buf))]
    return bytes(buf)


def _nasty_ext(rng: random.Random, base: dict[str, str]) -> dict[str, object]:
    ext: dict[str, object] = dict(base)
    for _ in range(rng.randint(1, 3)):
        key = (
            rng.choice([*base, "topic", "consumerGroup", "group", "queueId", "offset", "commitOffset"]) if base else "x"
        )
        ext[key] = rng.choice(_NASTY_VALUES)
    return ext


def valid_frame(rng: random.Random, opaque: int) -> bytes:
    code, ext = rng.choice(REQUESTS)
    if rng.random() < 0.3:
        return frame(binary_header(code, ext, opaque), rng.choice(_BODIES[:1] + _BODIES[3:6]), 1)
    return frame(json_header(code, dict(ext), opaque), rng.choice(_BODIES[:1] + _BODIES[3:6]))


def nasty_frame(rng: random.Random, opaque: int) -> bytes:
    """A frame with honest lengths and a hostile header or body: the server must answer it."""
    code, ext = rng.choice(REQUESTS)
    kind = rng.randrange(6)
    body = rng.choice(_BODIES)
    if kind == 0:
        return frame(json_header(code, _nasty_ext(rng, ext), opaque), body)
    if kind == 1:
        bad = {k: str(v) for k, v in _nasty_ext(rng, ext).items() if isinstance(v, str)}
        return frame(binary_header(code, bad, opaque), body, 1)
    if kind == 2:
        extra = {rng.choice(["flag", "version", "language", "remark", "code"]): rng.choice(_NASTY_VALUES)}
        return frame(json_header(code, dict(ext), opaque, extra), body)
    if kind == 3:
        return frame(b"[" * rng.randint(50, 3000), body)
    if kind == 4:
        return frame(json_header(code, dict(ext), opaque)[:-1] + b"\xff\xfe}", body)
    return frame(json_header(rng.randint(-(2**15), 2**15), dict(ext), opaque), body)


def codec_inputs(seed: int, count: int) -> Iterator[bytes]:
    """``count`` byte strings for a FrameDecoder: random, mutated and nasty, reproducible from ``seed``."""
    rng = random.Random(seed)
    for i in range(count):
        family = rng.randrange(4)
        if family == 0:
            yield rng.randbytes(rng.randint(0, 64))
        elif family == 1:
            yield _mutate(rng, valid_frame(rng, i))
        elif family == 2:
            yield nasty_frame(rng, i)
        else:  # a frame body with random header-type and length words around real header bytes
            header = json_header(*rng.choice(REQUESTS)) if rng.random() < 0.5 else binary_header(*rng.choice(REQUESTS))
            word = rng.choice([0, 1, 2, 0xFF]) << 24 | rng.randint(0, len(header) + 8)
            yield struct.pack(">iI", rng.randint(4, len(header) + 12), word) + header
