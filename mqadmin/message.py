"""RocketMQ's stored-message record: the commit-log encoding, also used in pull bodies.

One codec for the mock store, the remoting client's pull decoding and the offline store
reader, so all three agree byte for byte (layout: docs/protocol.md "Message record").
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

from mqadmin.model import Message

MAGIC_V1 = -626843481  # topic length is one signed byte
MAGIC_V2 = -626843477  # topic length is a short
MAGIC_BLANK = -875286124  # end-of-file filler in a commit-log file

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
COMPRESSION_MASK = 0x700
COMPRESSION_ZLIB = 0x300

PROPERTY_NAME_SEP = "\x01"
PROPERTY_PAIR_SEP = "\x02"

_HEAD = struct.Struct(">iiiiiqqiq")  # size, magic, crc, qid, flag, qoffset, phyoffset, sysflag, born ts
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")

# Offsets of fixed fields, valid whatever the hosts' IP version (they precede BORNHOST).
QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28


class MessageDecodeError(ValueError):
    """A record is truncated or not a RocketMQ message."""


def parse_properties(text: str) -> dict[str, str]:
    """name\\x01value\\x02 pairs; malformed pairs are skipped, as the Java decoder does."""
    props: dict[str, str] = {}
    for pair in text.split(PROPERTY_PAIR_SEP):
        name, sep, value = pair.partition(PROPERTY_NAME_SEP)
        if sep and name:
            props[name] = value
    return props


def format_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}{PROPERTY_NAME_SEP}{v}{PROPERTY_PAIR_SEP}" for k, v in props.items())


@functools.lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, int overflow): the consume-queue tags code.
    Cached: a store sees few distinct tags, each on many messages."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def tags_code(props: dict[str, str]) -> int:
    tags = props.get("TAGS")
    return java_string_hash(tags) if tags else 0


def pack_host(host: str) -> tuple[bytes, bool]:
    """``host:port`` as a record stores it (IP bytes + port), and whether it is IPv6."""
    addr, _, port = host.rpartition(":")
    addr = addr.strip("[]")
    ip = ipaddress.ip_address(addr or "127.0.0.1")
    return ip.packed + _INT.pack(int(port or 0)), ip.version == 6


def _unpack_host(buf: bytes, pos: int, v6: bool) -> tuple[str, int]:
    n = 16 if v6 else 4
    ip = ipaddress.ip_address(buf[pos : pos + n])
    (port,) = _INT.unpack_from(buf, pos + n)
    text = f"[{ip}]:{port}" if v6 else f"{ip}:{port}"
    return text, pos + n + 4


def offset_msg_id(store_host: str, commitlog_offset: int) -> str:
    """The broker's msgId: store host IP + port + physical offset, upper-case hex."""
    packed, _ = pack_host(store_host)
    return (packed + _LONG.pack(commitlog_offset)).hex().upper()


_uniq_lock = threading.Lock()
_uniq_counter = 0


def _local_ip() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return bytes([127, 0, 0, 1])


_UNIQ_PREFIX = _local_ip() + struct.pack(">h", os.getpid() & 0x7FFF) + struct.pack(">i", id(_uniq_lock) & 0x7FFFFFFF)


def new_uniq_key(now_ms: int | None = None) -> str:
    """A client-side message id (UNIQ_KEY): ip, pid, class-loader-ish hash, ms in month, counter."""
    global _uniq_counter
    now = time.time() if now_ms is None else now_ms / 1000
    t = time.gmtime(now)
    month_start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, 0)) - time.timezone
    with _uniq_lock:
        _uniq_counter = (_uniq_counter + 1) & 0xFFFF
        counter = _uniq_counter
    since = int((now - month_start) * 1000) & 0xFFFFFFFF
    return (_UNIQ_PREFIX + struct.pack(">I", since) + struct.pack(">H", counter)).hex().upper()


def encode_message(msg: Message) -> bytes:
    """One commit-log record. Uses v1 magic unless the topic needs v2 (> 127 bytes)."""
    born, born_v6 = pack_host(msg.born_host)
    store, store_v6 = pack_host(msg.store_host)
    sys_flag = msg.sys_flag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    sys_flag |= (SYSFLAG_BORNHOST_V6 if born_v6 else 0) | (SYSFLAG_STOREHOST_V6 if store_v6 else 0)
    return encode_record(
        msg.topic.encode(),
        format_properties(msg.properties).encode(),
        msg.body,
        msg.queue_id,
        msg.flag,
        msg.queue_offset,
        msg.commitlog_offset,
        sys_flag,
        msg.born_timestamp,
        born,
        msg.store_timestamp,
        store,
        msg.reconsume_times,
        msg.prepared_transaction_offset,
    )


def encode_record(
    topic: bytes,
    props: bytes,
    body: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commitlog_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born: bytes,
    store_timestamp: int,
    store: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """One commit-log record from encoded parts (hosts packed, ``sys_flag`` saying which are
    IPv6): what a batch append calls per message, without a ``Message``."""
    v2 = len(topic) > 127
    if len(props) > 32767:
        raise ValueError("message properties exceed 32767 bytes")
    size = (
        _HEAD.size + len(born) + 8 + len(store) + 4 + 8 + 4 + len(body) + (2 if v2 else 1) + len(topic) + 2 + len(props)
    )
    return b"".join(
        (
            _HEAD.pack(
                size,
                MAGIC_V2 if v2 else MAGIC_V1,
                zlib.crc32(body) & 0x7FFFFFFF,
                queue_id,
                flag,
                queue_offset,
                commitlog_offset,
                sys_flag,
                born_timestamp,
            ),
            born,
            _LONG.pack(store_timestamp),
            store,
            _INT.pack(reconsume_times),
            _LONG.pack(prepared_transaction_offset),
            _INT.pack(len(body)),
            body,
            _SHORT.pack(len(topic)) if v2 else bytes((len(topic),)),
            topic,
            _SHORT.pack(len(props)),
            props,
        )
    )


def decode_message(buf: bytes | memoryview, pos: int = 0, *, decompress: bool = True) -> tuple[Message, int]:
    """Decode the record at ``pos``; returns the message and the position after it."""
    buf = bytes(buf) if isinstance(buf, memoryview) else buf
    if len(buf) - pos < _HEAD.size:
        raise MessageDecodeError(f"truncated record at {pos}")
    size, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts = _HEAD.unpack_from(buf, pos)
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise MessageDecodeError(f"bad magic code {magic:#x} at {pos}")
    end = pos + size
    if size <= _HEAD.size or end > len(buf):
        raise MessageDecodeError(f"record at {pos} claims {size} bytes, {len(buf) - pos} available")
    p = pos + _HEAD.size
    born_host, p = _unpack_host(buf, p, bool(sys_flag & SYSFLAG_BORNHOST_V6))
    (store_ts,) = _LONG.unpack_from(buf, p)
    store_host, p = _unpack_host(buf, p + 8, bool(sys_flag & SYSFLAG_STOREHOST_V6))
    (reconsume,) = _INT.unpack_from(buf, p)
    (prepared,) = _LONG.unpack_from(buf, p + 4)
    (body_len,) = _INT.unpack_from(buf, p + 12)
    p += 16
    body = buf[p : p + body_len]
    p += body_len
    if magic == MAGIC_V2:
        (topic_len,) = _SHORT.unpack_from(buf, p)
        p += 2
    else:
        topic_len = buf[p]
        p += 1
    topic = buf[p : p + topic_len].decode("utf-8", "replace")
    p += topic_len
    (props_len,) = _SHORT.unpack_from(buf, p)
    p += 2
    props = parse_properties(buf[p : p + props_len].decode("utf-8", "replace"))
    if p + props_len > end:
        raise MessageDecodeError(f"record at {pos} overruns its size")
    if decompress and sys_flag & SYSFLAG_COMPRESSED:
        body = _decompress(body, sys_flag)
        sys_flag &= ~SYSFLAG_COMPRESSED
    msg = Message(
        topic=topic,
        body=body,
        properties=props,
        flag=flag,
        queue_id=qid,
        queue_offset=qoff,
        commitlog_offset=phy,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=store_host,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body_crc=crc,
        msg_id=offset_msg_id(store_host, phy),
    )
    return msg, end


def _decompress(body: bytes, sys_flag: int) -> bytes:
    kind = sys_flag & COMPRESSION_MASK
    if kind in (0, COMPRESSION_ZLIB):
        return zlib.decompress(body)
    if kind == 0x100:
        lz4: Any = _optional_codec("lz4.frame")
        return bytes(lz4.decompress(body))
    if kind == 0x200:
        zstd: Any = _optional_codec("zstandard")
        return bytes(zstd.ZstdDecompressor().decompress(body))
    raise MessageDecodeError(f"unknown compression type {kind >> 8}")


def _optional_codec(name: str) -> object:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MessageDecodeError(
            f"message body compressed with {name.split('.')[0]}; pip install {name.split('.')[0]}"
        ) from exc


def iter_messages(buf: bytes | memoryview, *, decompress: bool = True) -> Iterator[Message]:
    """Concatenated records, as in a PULL or QUERY body."""
    buf = bytes(buf) if isinstance(buf, memoryview) else buf
    pos = 0
    while pos < len(buf):
        msg, pos = decode_message(buf, pos, decompress=decompress)
        yield msg


def read_store_timestamp(record_head: bytes) -> int:
    """Store time from a record's first bytes, whatever the born host's IP version."""
    (sys_flag,) = _INT.unpack_from(record_head, 36)
    pos = 48 + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8)
    (ts,) = _LONG.unpack_from(record_head, pos)
    return int(ts)
