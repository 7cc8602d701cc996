"""RocketMQ remoting frames: commands to bytes and bytes to commands, with no I/O.

A frame is ``length(4) | type<<24 | headerLen (4) | header | body`` (big-endian; remoting:
NettyEncoder.java, RemotingCommand.java). The header is JSON text as Java's fastjson writes it,
or the ROCKETMQ binary layout (remoting: RocketMQSerializable.java). Sockets live elsewhere; this module is tested with byte strings alone, like
kafka-python's protocol parser.
"""

from __future__ import annotations

import enum
import json
import re
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from mqadmin import fastjson
from mqadmin.errors import ConnectError
from mqadmin.protocol.codes import (
    CURRENT_VERSION,
    LanguageCode,
    ResponseCode,
    SerializeType,
)

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "FRAME_MAX_LENGTH",
    "BadFrame",
    "FrameDecoder",
    "FrameTooLarge",
    "RemotingCommand",
    "decode_header",
    "encode",
    "encode_header",
    "ext_value",
]

# Java's default frame limit (com.rocketmq.remoting.frameMaxLength), length field included.
FRAME_MAX_LENGTH: Final = 16 * 1024 * 1024
LENGTH_FIELD_SIZE: Final = 4
HEADER_WORD_SIZE: Final = 4
HEADER_LENGTH_MASK: Final = 0xFFFFFF
SERIALIZE_TYPE_SHIFT: Final = 24
SERIALIZE_TYPE_MASK: Final = 0xFF

# flag bits of the header (remoting: RemotingCommand.java, RPC_TYPE and RPC_ONEWAY)
FLAG_RESPONSE: Final = 1 << 0
FLAG_ONEWAY: Final = 1 << 1

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_INT16_MIN: Final = -(2**15)
_INT16_MAX: Final = 2**15 - 1
_INT8_MIN: Final = -(2**7)
_INT8_MAX: Final = 2**7 - 1

# ROCKETMQ binary header: code short, language byte, version short, opaque int, flag int.
_BINARY_FIXED: Final = struct.Struct(">hbhii")
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
_FRAME_PREFIX: Final = struct.Struct(">iI")
_UNSIGNED_INT: Final = struct.Struct(">I")
_TWO_INTS: Final = struct.Struct(">II")

# What Java's Integer.parseInt/Long.parseLong accept (no spaces, no underscores).
_JAVA_INTEGER_RE: Final = re.compile(r"[-+]?[0-9]+")

DEFAULT_LANGUAGE: Final = LanguageCode.PYTHON.name
# What a Java server puts in its replies' language field.
SERVER_LANGUAGE: Final = LanguageCode.JAVA.name


class BadFrame(ConnectError):
    """The peer sent bytes that are not a RocketMQ frame; the connection cannot be trusted."""


class FrameTooLarge(BadFrame):
    """A frame announced a length above the limit (Java rejects these too)."""


def ext_value(value: object) -> str:
    """An extFields value as Java's ``toString`` would write it: decimal ints, true/false, enum names.

    ``IntEnum`` members are numbers here (Java has no int-valued enums; ours stand for codes).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):  # IntEnum members included: they stand for numbers
        return str(int(value))
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, float):
        return fastjson.java_double(value)
    raise TypeError(f"extFields value must be str, int, bool, float or enum, not {type(value).__name__}")


def _ext_fields(fields: Mapping[str, object] | None) -> dict[str, str]:
    """Coerce a header mapping to strings; None values are dropped, as Java drops null fields."""
    if not fields:
        return {}
    return {str(k): ext_value(v) for k, v in fields.items() if v is not None}


@dataclass
class RemotingCommand:
    """One request or response. ``ext_fields`` is the string map Java calls the custom header."""

    code: int
    language: str = DEFAULT_LANGUAGE
    version: int = int(CURRENT_VERSION)
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # How the header arrived; 4.9.4-4.9.x servers answer in the request's type.
    serialize_type: SerializeType = field(default=SerializeType.JSON, compare=False)
    # Java writes "extFields":{} when a header object without fields was attached (e.g. the
    # UPDATE_CONSUMER_OFFSET reply); set this to reproduce that. Decoding sets it when present.
    keep_empty_ext_fields: bool = field(default=False, compare=False)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        opaque: int = 0,
        version: int = int(CURRENT_VERSION),
        language: str = DEFAULT_LANGUAGE,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A request; header values may be ints/bools/enums and are turned into Java strings."""
        return cls(
            code=int(code),
            language=language,
            version=version,
            opaque=opaque,
            flag=FLAG_ONEWAY if oneway else 0,
            ext_fields=_ext_fields(ext_fields),
            body=bytes(body),
        )

    @classmethod
    def response(
        cls,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        opaque: int = 0,
        version: int = int(CURRENT_VERSION),
        language: str = SERVER_LANGUAGE,
    ) -> RemotingCommand:
        """A response (flag bit 0 set); ``reply`` is the usual way to answer a request."""
        return cls(
            code=int(code),
            language=language,
            version=version,
            opaque=opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=_ext_fields(ext_fields),
            body=bytes(body),
        )

    def reply(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: Mapping[str, object] | None = None,
        body: bytes = b"",
        *,
        version: int = int(CURRENT_VERSION),
        language: str = SERVER_LANGUAGE,
    ) -> RemotingCommand:
        """The response to this request: same opaque, so the sender can match it."""
        return RemotingCommand.response(
            code, remark, ext_fields, body, opaque=self.opaque, version=version, language=language
        )

    # Readers that parse header values the way Java's header decoding does: a missing or bad
    # value keeps the default instead of failing.

    def ext_str(self, name: str, default: str | None = None) -> str | None:
        return self.ext_fields.get(name, default)

    def ext_int(self, name: str, default: int | None = None) -> int | None:
        raw = self.ext_fields.get(name)
        if raw is None:
            return default
        return int(raw) if _JAVA_INTEGER_RE.fullmatch(raw) else default

    def ext_bool(self, name: str, default: bool | None = None) -> bool | None:
        """Java's ``Boolean.parseBoolean``: only "true" (any case) is true."""
        raw = self.ext_fields.get(name)
        if raw is None:
            return default
        return raw.lower() == "true"


# ---------------------------------------------------------------------------------------------
# Encoding


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} does not fit the header field ({low}..{high})")


def _json_header(cmd: RemotingCommand) -> bytes:
    """The header as fastjson writes a RemotingCommand bean: properties alphabetical, nulls left out.

    Java keeps extFields in a HashMap, so its entry order is arbitrary; we sort the entries so
    our output is reproducible (no reader depends on the order).
    """
    for name, value in (("code", cmd.code), ("opaque", cmd.opaque), ("flag", cmd.flag), ("version", cmd.version)):
        _check_range(name, value, _INT32_MIN, _INT32_MAX)
    bean: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields or cmd.keep_empty_ext_fields:
        bean["extFields"] = {k: ext_value(cmd.ext_fields[k]) for k in sorted(cmd.ext_fields, key=_java_order)}
    bean["flag"] = cmd.flag
    bean["language"] = cmd.language
    bean["opaque"] = cmd.opaque
    if cmd.remark is not None:
        bean["remark"] = cmd.remark
    bean["serializeTypeCurrentRPC"] = SerializeType.JSON.name
    bean["version"] = cmd.version
    # The C encoder writes these ints and strings exactly as fastjson does, except a control
    # character or DEL (fastjson: \u00XX upper case, and DEL escaped): only then take the slow
    # writer. A replay sends thousands of pull requests a second.
    text = json.dumps(bean, ensure_ascii=False, separators=(",", ":"))
    if "\\u00" in text or "\x7f" in text:
        text = fastjson.dumps(bean)
    # A lone surrogate (sent to us as "\ud800") becomes "?", as Java's String.getBytes(UTF_8) writes it.
    return text.encode("utf-8", "replace")


def _java_order(key: str) -> bytes:
    """Sort key giving Java's String order (UTF-16 code units), which TreeMap uses."""
    return key.encode("utf-16-be", "surrogatepass")


def _language_byte(language: str) -> int:
    if language in LanguageCode.__members__:
        return int(LanguageCode[language])
    try:
        return int(language)  # a byte we could not name when decoding
    except ValueError:
        pass
    raise ValueError(f"unknown language {language!r} for the binary header")


def _binary_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ layout: fixed fields, then remark and extFields as length-prefixed blocks."""
    _check_range("code", cmd.code, _INT16_MIN, _INT16_MAX)
    _check_range("version", cmd.version, _INT16_MIN, _INT16_MAX)
    _check_range("opaque", cmd.opaque, _INT32_MIN, _INT32_MAX)
    _check_range("flag", cmd.flag, _INT32_MIN, _INT32_MAX)
    lang = _language_byte(cmd.language)
    _check_range("language", lang, _INT8_MIN, _INT8_MAX)
    parts = [_BINARY_FIXED.pack(cmd.code, lang, cmd.version, cmd.opaque, cmd.flag)]
    remark = (cmd.remark or "").encode("utf-8", "replace")  # Java writes an empty remark as length 0
    parts += [_INT.pack(len(remark)), remark]
    entries: list[bytes] = []
    for key in sorted(cmd.ext_fields, key=_java_order):
        kb, vb = key.encode("utf-8", "replace"), ext_value(cmd.ext_fields[key]).encode("utf-8", "replace")
        _check_range("extFields key length", len(kb), 0, _INT16_MAX)
        entries += [_SHORT.pack(len(kb)), kb, _INT.pack(len(vb)), vb]
    block = b"".join(entries)
    parts += [_INT.pack(len(block)), block]
    return b"".join(parts)


def encode_header(cmd: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    """Only the header bytes (no length words)."""
    if serialize_type == SerializeType.ROCKETMQ:
        return _binary_header(cmd)
    return _json_header(cmd)


def encode(cmd: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    """One complete frame. Send JSON (the default) to anything but a Java peer that asked for binary:
    the C++ client and ali-ons cannot read a type byte of 1.
    """
    header = encode_header(cmd, serialize_type)
    if len(header) > HEADER_LENGTH_MASK:
        raise ValueError(f"header of {len(header)} bytes does not fit 24 bits")
    body = bytes(cmd.body)
    length = HEADER_WORD_SIZE + len(header) + len(body)
    _check_range("frame length", length, 0, _INT32_MAX)
    word = (int(serialize_type) << SERIALIZE_TYPE_SHIFT) | len(header)
    return _FRAME_PREFIX.pack(length, word) + header + body


# ---------------------------------------------------------------------------------------------
# Decoding


def _coerce_ext(value: Any) -> str | None:
    """Non-Java clients send numbers and booleans; Java would see their text. Null means absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _int_field(header: Mapping[str, Any], name: str, default: int) -> int:
    value = header.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadFrame(f"header field {name} is not an integer: {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise BadFrame(f"header field {name} is not an integer: {value!r}") from None
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise BadFrame(f"header field {name} out of range: {number}")
    return number


def _decode_json_header(data: bytes) -> RemotingCommand:
    try:
        header = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:  # the C parser bounds its own nesting with RecursionError
        raise BadFrame(f"unparsable JSON header: {exc}") from None
    if not isinstance(header, dict) or "code" not in header:
        raise BadFrame("JSON header is not an object with a code")
    language = header.get("language", SERVER_LANGUAGE)
    if isinstance(language, int) and not isinstance(language, bool):
        language = _language_name(language)
    elif not isinstance(language, str):
        raise BadFrame(f"header field language is not a name: {language!r}")
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = _coerce_ext(remark)
    raw_ext = header.get("extFields")
    if raw_ext is not None and not isinstance(raw_ext, dict):
        raise BadFrame("header field extFields is not an object")
    ext: dict[str, str] = {}
    for key, value in (raw_ext or {}).items():
        text = _coerce_ext(value)
        if text is not None:
            ext[key] = text
    return RemotingCommand(
        code=_int_field(header, "code", 0),
        language=language,
        version=_int_field(header, "version", 0),
        opaque=_int_field(header, "opaque", 0),
        flag=_int_field(header, "flag", 0),
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
        keep_empty_ext_fields=raw_ext is not None,
    )


def _language_name(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return str(code)  # keep the number; encoding the binary header accepts it back


class _Reader:
    """Bounds-checked cursor over a binary header."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise BadFrame(f"binary header truncated reading {what} ({n} bytes at {self.pos} of {len(self.data)})")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int32(self, what: str) -> int:
        value: int = _INT.unpack(self.take(_INT.size, what))[0]
        return value

    def int16(self, what: str) -> int:
        value: int = _SHORT.unpack(self.take(_SHORT.size, what))[0]
        return value


def _decode_binary_header(data: bytes) -> RemotingCommand:
    r = _Reader(data)
    code, lang, version, opaque, flag = _BINARY_FIXED.unpack(r.take(_BINARY_FIXED.size, "fixed fields"))
    remark_len = r.int32("remark length")
    remark = r.take(remark_len, "remark").decode("utf-8", "replace") if remark_len > 0 else None
    ext_len = r.int32("extFields length")
    ext: dict[str, str] = {}
    if ext_len > 0:
        m = _Reader(r.take(ext_len, "extFields"))
        while m.pos < len(m.data):
            key = m.take(m.int16("key length"), "key").decode("utf-8", "replace")
            ext[key] = m.take(m.int32("value length"), "value").decode("utf-8", "replace")
    return RemotingCommand(
        code=code,
        language=_language_name(lang),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_header(data: bytes, serialize_type: int) -> RemotingCommand:
    """A command (without body) from header bytes of the given type."""
    if serialize_type == SerializeType.JSON:
        try:
            return _decode_json_header(data)
        except RecursionError:  # a nested value re-encoded for extFields or remark (_coerce_ext)
            raise BadFrame("JSON header nests too deep") from None
    if serialize_type == SerializeType.ROCKETMQ:
        return _decode_binary_header(data)
    raise BadFrame(f"unknown serialize type {serialize_type}")


class FrameDecoder:
    """Turns a byte stream into commands; feed it whatever the socket returned.

    Received chunks are kept as they came, and each frame's header and body are cut out of them
    with one copy of every byte (a slice of the chunk holding it, or one join of the pieces of a
    frame that spans chunks): a pull reply is up to megabytes, so appending to a buffer, copying
    out and deleting from its front would copy each byte three times.

    After a BadFrame the stream is out of step for good, so every later ``feed`` raises the
    same error: the caller must close the connection.
    """

    def __init__(self, max_frame_length: int = FRAME_MAX_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._chunks: deque[bytes] = deque()
        self._pos = 0  # where the first chunk's unread bytes start
        self._size = 0  # unread bytes in all chunks
        self._error: BadFrame | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return self._size

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if self._error is not None:
            raise self._error
        if data:
            # a caller's reusable buffer is copied; bytes are kept as they are
            chunk = data if type(data) is bytes else bytes(data)
            self._chunks.append(chunk)
            self._size += len(chunk)
        out: list[RemotingCommand] = []
        try:
            while (cmd := self._next()) is not None:
                out.append(cmd)
        except BadFrame as exc:
            self._error = exc
            self._chunks.clear()
            self._pos = self._size = 0
            raise
        return out

    def _take(self, start: int, stop: int) -> bytes:
        """Unread bytes [start, stop), copied once."""
        first, pos = self._chunks[0], self._pos
        if pos + stop <= len(first):
            return first[pos + start : pos + stop]
        parts: list[memoryview] = []
        start, stop = start + pos, stop + pos
        for chunk in self._chunks:
            if start < len(chunk):
                parts.append(memoryview(chunk)[max(start, 0) : stop])
            start, stop = start - len(chunk), stop - len(chunk)
            if stop <= 0:
                break
        return b"".join(parts)

    def _drop(self, count: int) -> None:
        self._size -= count
        count += self._pos
        chunks = self._chunks
        while chunks and count >= len(chunks[0]):
            count -= len(chunks.popleft())
        self._pos = count

    def _next(self) -> RemotingCommand | None:
        if self._size < LENGTH_FIELD_SIZE + HEADER_WORD_SIZE:
            if self._size >= LENGTH_FIELD_SIZE:
                self._check(_UNSIGNED_INT.unpack(self._take(0, LENGTH_FIELD_SIZE))[0])
            return None
        length, word = _TWO_INTS.unpack(self._take(0, LENGTH_FIELD_SIZE + HEADER_WORD_SIZE))
        self._check(length)  # before waiting for the rest: never buffer an oversized frame
        end = LENGTH_FIELD_SIZE + length
        if self._size < end:
            return None
        stype = (word >> SERIALIZE_TYPE_SHIFT) & SERIALIZE_TYPE_MASK
        header_len = word & HEADER_LENGTH_MASK
        if header_len > length - HEADER_WORD_SIZE:
            raise BadFrame(f"header length {header_len} exceeds frame length {length}")
        header_end = LENGTH_FIELD_SIZE + HEADER_WORD_SIZE + header_len
        header = self._take(LENGTH_FIELD_SIZE + HEADER_WORD_SIZE, header_end)
        body = self._take(header_end, end)
        self._drop(end)
        cmd = decode_header(header, stype)
        cmd.body = body
        return cmd

    def _check(self, length: int) -> None:
        if length + LENGTH_FIELD_SIZE > self.max_frame_length:
            raise FrameTooLarge(f"frame of {length + LENGTH_FIELD_SIZE} bytes exceeds {self.max_frame_length}")
        if length < HEADER_WORD_SIZE:
            raise BadFrame(f"frame length {length} leaves no room for the header word")
