"""Numbers of the RocketMQ remoting protocol: request/response codes, languages, versions.

Values follow the Java broker (``RequestCode``, ``ResponseCode``, ``LanguageCode``,
``MQVersion.Version``); see docs/rocketmq-protocol.md §1-§2 for what each one does.
"""

from __future__ import annotations

import enum
import re
from typing import Final

__all__ = [
    "CURRENT_VERSION",
    "VERSION_NAMES",
    "LanguageCode",
    "MQVersion",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "version_name",
    "version_ordinal",
]


class RequestCode(enum.IntEnum):
    """Request codes we send, serve in the mock, or receive from brokers."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_KV_CONFIG = 101
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    GET_CONSUME_STATS = 208
    # The C++ client and ali-ons still call 217 GET_KV_CONFIG_BY_VALUE.
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    # 5.x; its mqadmin asks for it while building consume stats
    GET_TOPIC_CONFIG = 351


class ResponseCode(enum.IntEnum):
    """Response codes (``ResponseCode`` and ``RemotingSysResponseCode`` in Java)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    BROADCAST_CONSUMPTION = 213
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501
    ILLEGAL_OPERATION = 604
    GO_AWAY = 1500


class LanguageCode(enum.IntEnum):
    """Sender language: the header carries the name (JSON) or this value as one byte (ROCKETMQ).

    RUST and NODE_JS exist only in 5.x brokers; older brokers cannot resolve them, so never
    send them to an unknown server (JAVA or PYTHON are safe everywhere).
    """

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class SerializeType(enum.IntEnum):
    """Header encoding, carried in the top byte of the frame's header-length word."""

    JSON = 0
    ROCKETMQ = 1


def _build_version_names() -> tuple[str, ...]:
    """Rebuild Java's ``MQVersion.Version`` constant list in ordinal order.

    The enum is append-only (its ordinals are on the wire) and regular: a 3.0.0 pre-release
    run, then ``_SNAPSHOT``/release pairs for each patch, then HIGHER_VERSION.
    """
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"]
    names += [f"V3_0_0_BETA{i}" for i in range(1, 6)]
    for beta in range(6, 10):
        names += [f"V3_0_0_BETA{beta}_SNAPSHOT", f"V3_0_0_BETA{beta}"]
    names.append("V3_0_0_FINAL")

    def pairs(major: int, minor: int, patches: range) -> list[str]:
        out: list[str] = []
        for patch in patches:
            out += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
        return out

    names += pairs(3, 0, range(1, 16))
    names += pairs(3, 1, range(10)) + pairs(3, 2, range(10))
    for minor in range(3, 10):  # 3.3 to 3.9 have no .0 patch
        names += pairs(3, minor, range(1, 10))
    for major in (4, 5):
        for minor in range(10):
            names += pairs(major, minor, range(10))
    names.append("HIGHER_VERSION")
    return tuple(names)


VERSION_NAMES: Final[tuple[str, ...]] = _build_version_names()
_ORDINALS: Final[dict[str, int]] = {name: i for i, name in enumerate(VERSION_NAMES)}


class MQVersion(enum.IntEnum):
    """Version ordinals that change behaviour somewhere (protocol doc's version table).

    Any other ordinal can be named with :func:`version_name`.
    """

    V3_0_6_SNAPSHOT = _ORDINALS["V3_0_6_SNAPSHOT"]
    # Brokers refuse consumer pushes (reset, status) to clients older than this.
    V3_0_7_SNAPSHOT = _ORDINALS["V3_0_7_SNAPSHOT"]
    # ali-ons hard-codes this; CONSUMER_SEND_MSG_BACK honours maxReconsumeTimes from here.
    V3_4_9 = _ORDINALS["V3_4_9"]
    # Sent by rocketmq-client-cpp, hence rocketmq-client-python.
    V4_6_0 = _ORDINALS["V4_6_0"]
    # Last version whose QUERY_MESSAGE ACL signature leaves out _UNIQUE_KEY_QUERY on 5.x servers.
    V4_9_3 = _ORDINALS["V4_9_3"]
    # From here the namesrv returns standard-JSON route data.
    V4_9_4 = _ORDINALS["V4_9_4"]
    V4_9_8 = _ORDINALS["V4_9_8"]
    V5_0_0 = _ORDINALS["V5_0_0"]
    V5_1_4 = _ORDINALS["V5_1_4"]
    V5_3_1 = _ORDINALS["V5_3_1"]
    V5_3_3 = _ORDINALS["V5_3_3"]
    HIGHER_VERSION = _ORDINALS["HIGHER_VERSION"]


# What Java master sends as its own version.
CURRENT_VERSION: Final = MQVersion.V5_3_3

_VERSION_TEXT_RE: Final = re.compile(r"v?(\d+)[._](\d+)[._](\d+)(?:[-_](SNAPSHOT))?", re.IGNORECASE)


def version_name(ordinal: int) -> str:
    """The Java constant for a header ``version`` (e.g. 479 → ``V5_3_3``).

    Like Java's ``getVersionDesc``: ordinals past the end name the last constant. Negative
    ordinals (a sender that never set one) have no name in Java; we answer ``UNKNOWN(n)``.
    """
    if ordinal < 0:
        return f"UNKNOWN({ordinal})"
    return VERSION_NAMES[min(ordinal, len(VERSION_NAMES) - 1)]


def version_ordinal(name: str) -> int:
    """The ordinal of a version given as ``V4_9_8``, ``4.9.8`` or ``5.3.3-SNAPSHOT``."""
    if name in _ORDINALS:
        return _ORDINALS[name]
    m = _VERSION_TEXT_RE.fullmatch(name.strip())
    if m:
        key = f"V{m.group(1)}_{m.group(2)}_{m.group(3)}" + ("_SNAPSHOT" if m.group(4) else "")
        if key in _ORDINALS:
            return _ORDINALS[key]
    raise ValueError(f"unknown RocketMQ version: {name!r}")
