"""Numbers of the RocketMQ remoting protocol: request/response codes, languages, versions.

Values follow the Java broker (``RequestCode``, ``ResponseCode``, ``LanguageCode``,
``MQVersion.Version``; remoting: RequestCode.java, ResponseCode.java, RemotingSysResponseCode.java,
LanguageCode.java; common: MQVersion.java).
"""

from __future__ import annotations

import enum

from mqadmin.protocol.versions import CURRENT_VERSION, VERSION_NAMES, MQVersion, version_name, version_ordinal

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
    GET_BROKER_CONFIG = 26
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
    # every group's consume stats in one reply (the Java tool's brokerConsumeStats)
    GET_BROKER_CONSUME_STATS = 317
    SEND_BATCH_MESSAGE = 320
    # 5.x; its mqadmin asks for it while building consume stats
    GET_TOPIC_CONFIG = 351
    # 5.5 (lite topics): a lite group's lag, overall (top K lite topics by lag) or of one lite topic
    GET_LITE_GROUP_INFO = 200078


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
