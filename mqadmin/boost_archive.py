"""The Boost text archive that rocketmq-client-cpp 2.x (the library rocketmq-client-python loads)
keeps its broadcast offsets in: ``offsets.Json``, a ``std::map<std::string, int64>`` saved by
``boost::archive::text_oarchive``. Read and written exactly as that client does (docs/protocol.md,
"Client offsets files").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqadmin.model import MessageQueue


@dataclass(frozen=True)
class ArchiveHeader:
    """The numbers a Boost text archive of ``std::map<std::string, int64>`` carries besides its
    entries; kept from the file read so a rewrite is what the client's own Boost would write."""

    #: Boost's archive library version; a client refuses an archive newer than its Boost
    library_version: int = 17  # what rocketmq-client-python's librocketmq (C++ client 2.1.0) writes
    map_tracking: int = 0
    map_version: int = 0
    item_version: int = 0
    pair_tracking: int = 0
    pair_version: int = 0


# What boost::archive::text_oarchive writes for a std::map<std::string, int64>, token by token,
# one space apart (the client's LocalFileOffsetStore in rocketmq-client-cpp 2.x
# src/consumer/OffsetStore.cpp; checked against files the client wrote, and against Boost
# 1.74's text_iarchive for what it accepts or throws on):
#
#   22 serialization::archive   the signature, saved as a string: its length, a space, its bytes
#   <library version>           Boost's archive version (17 from the 2.1.0 library)
#   <tracking> <version>        the map's class information: 0 0
#   <count> <item version>      the number of entries, then the pair type's version: 0
#   <tracking> <version>        the pair's class information, 0 0, only when there are entries
#   <length> <key> <offset>     per entry, in std::map order (the keys' bytes): the key is saved as
#                               a string, its bytes verbatim (newlines included), then the offset
#   \n                          the archive's end
#
# Each key is MessageQueue::toJson().toStyledString(): jsoncpp's styled writer, members sorted,
# three-space indents, `"name" : value`, ending with a newline.

BOOST_SIGNATURE = b"serialization::archive"
_BOOST_START = re.compile(rb"\s*22 serialization::archive\s")
_WHITESPACE = b" \t\n\v\f\r"
_UNSIGNED = re.compile(rb"[0-9]+")
_SIGNED = re.compile(rb"-?[0-9]+")
_NUMBER_START = re.compile(rb"[+-]?[0-9]")
_INT64 = 1 << 63
#: the oldest archive library version with this layout (the item version came in with 4)
_MIN_LIBRARY_VERSION = 4


class ArchiveError(ValueError):
    """Content the client's Boost loader throws on: C++ client 2.x fails to start on the file.

    A plain ValueError is content Boost would let through but the client's writer never
    produces (a '+2', another class version, bytes after the last entry): refused, not guessed at.
    """


def is_boost_archive(data: bytes) -> bool:
    """Whether content starts like a Boost text archive (a copy may have any file name)."""
    return _BOOST_START.match(data) is not None


def boost_key(mq: MessageQueue) -> str:
    """The key C++ client 2.x writes for a queue: its styled JSON text."""
    return (
        "{\n"
        f'   "brokerName" : {json.dumps(mq.broker_name)},\n'
        f'   "queueId" : {mq.queue_id},\n'
        f'   "topic" : {json.dumps(mq.topic)}\n'
        "}\n"
    )


class _ArchiveReader:
    """text_iarchive's reading rules: numbers are whitespace-separated tokens; a string is its
    length, one separating byte, then exactly that many bytes. Only the writer's form is taken."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _token(self, what: str) -> tuple[bytes, int]:
        data, i = self.data, self.pos
        while i < len(data) and data[i] in _WHITESPACE:
            i += 1
        j = i
        while j < len(data) and data[j] not in _WHITESPACE:
            j += 1
        if i == j:
            raise ArchiveError(f"it ends before {what}")
        self.pos = j
        return data[i:j], i

    def number(self, what: str, *, signed: bool = False) -> int:
        token, at = self._token(what)
        if not (_SIGNED if signed else _UNSIGNED).fullmatch(token):
            # istream >> fails unless the token starts like a number; past that, Boost reads on
            # from wherever the number stopped, which mqadmin does not follow
            error = ValueError if _NUMBER_START.match(token) else ArchiveError
            raise error(f"{what} at byte {at} is {token[:20]!r}, not a number as the client writes it")
        value = int(token)
        if not -_INT64 <= value < _INT64:
            raise ArchiveError(f"{what} at byte {at} ({value}) does not fit in 64 bits")
        return value

    def string(self, what: str) -> bytes:
        size = self.number(f"the length of {what}")
        if self.pos >= len(self.data):
            raise ArchiveError(f"it ends before {what}")
        if self.data[self.pos : self.pos + 1] != b" ":
            raise ValueError(f"the length of {what} is not followed by a space (byte {self.pos})")
        start = self.pos + 1
        if start + size > len(self.data):
            raise ArchiveError(f"{what} is cut short: {size} bytes announced, {len(self.data) - start} left")
        self.pos = start + size
        return self.data[start : self.pos]

    def expect(self, what: str, allowed: int, error: type[ValueError] = ValueError) -> int:
        value = self.number(what)
        if value != allowed:
            raise error(f"{what} is {value}, not {allowed} as rocketmq-client-cpp 2.x writes it")
        return value


def parse_boost_archive(data: bytes) -> tuple[list[tuple[bytes, int]], ArchiveHeader]:
    """The entries (key bytes, offset; in file order) and header of an offsets.Json.

    Raises ArchiveError where the client's Boost throws (signature, numbers, counts, string
    lengths, an archive cut short) and ValueError where Boost is lenient only by accident: any
    other tracking or version than the client writes, or bytes after the last entry.
    """
    r = _ArchiveReader(data)
    try:
        signature = r.string("the signature")
    except ArchiveError:
        raise ArchiveError(f"it does not start with '22 {BOOST_SIGNATURE.decode()}'") from None
    if signature != BOOST_SIGNATURE:
        raise ArchiveError(f"its signature is {signature[:40]!r}, not {BOOST_SIGNATURE.decode()!r}")
    version = r.number("the library version")
    if version < _MIN_LIBRARY_VERSION:
        raise ArchiveError(f"library version {version} predates the layout read here ({_MIN_LIBRARY_VERSION} or later)")
    map_tracking = r.expect("the map's tracking level", 0)
    map_version = r.expect("the map's class version", 0)
    count = r.number("the entry count")
    item_version = r.expect("the entries' item version", 0)
    pair_tracking = pair_version = 0
    if count:
        # a tracked pair carries an object id Boost then fails to find: the load throws
        pair_tracking = r.expect("the entries' tracking level", 0, ArchiveError)
        pair_version = r.expect("the entries' class version", 0)
    entries: list[tuple[bytes, int]] = []
    for n in range(1, count + 1):
        key = r.string(f"key {n} of {count}")
        entries.append((key, r.number(f"the offset of key {n} of {count}", signed=True)))
    rest = data[r.pos :]
    if rest.strip(_WHITESPACE):
        raise ValueError(f"{len(rest.strip(_WHITESPACE))} bytes follow the last of the {count} entries")
    header = ArchiveHeader(version, map_tracking, map_version, item_version, pair_tracking, pair_version)
    return entries, header


def parse_boost_offsets(data: bytes) -> tuple[dict[MessageQueue, int], dict[MessageQueue, str], ArchiveHeader]:
    """(offsets, key text, header) of an offsets.Json, as the client loads it: a repeated key
    keeps its first offset (std::map insert), and the map is applied in key order."""
    entries, header = parse_boost_archive(data)
    table: dict[bytes, int] = {}
    for key, offset in entries:
        table.setdefault(key, offset)
    offsets: dict[MessageQueue, int] = {}
    key_text: dict[MessageQueue, str] = {}
    for key, offset in sorted(table.items()):
        try:
            text = key.decode("utf-8")
            mq = _queue_of_key(json.loads(text))
        except ValueError:
            raise ValueError(f"key {key[:60]!r} is not a message queue's JSON") from None
        offsets[mq] = offset
        key_text[mq] = text
    return offsets, key_text, header


def _queue_of_key(doc: Any) -> MessageQueue:
    if isinstance(doc, dict):
        topic, broker, qid = doc.get("topic"), doc.get("brokerName"), doc.get("queueId")
        if isinstance(topic, str) and isinstance(broker, str) and isinstance(qid, int) and not isinstance(qid, bool):
            return MessageQueue(topic, broker, qid)
    raise ValueError("not a message queue")


def render_boost_archive(entries: Mapping[str, int], header: ArchiveHeader) -> bytes:
    """The archive text_oarchive writes for these entries: keys in std::map (byte) order."""
    h = header
    tokens = [
        b"%d %s %d %d %d %d %d"
        % (
            len(BOOST_SIGNATURE),
            BOOST_SIGNATURE,
            h.library_version,
            h.map_tracking,
            h.map_version,
            len(entries),
            h.item_version,
        )
    ]
    if entries:
        tokens.append(b"%d %d" % (h.pair_tracking, h.pair_version))
    for key, offset in sorted((k.encode(), int(v)) for k, v in entries.items()):
        tokens.append(b"%d %s %d" % (len(key), key, offset))
    return b" ".join(tokens) + b"\n"
