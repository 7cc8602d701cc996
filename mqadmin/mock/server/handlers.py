"""Every request code the mock server answers, and the function that answers it.

A new request goes here: write its handler in the module of its area (``namesrv``, or for a
broker ``messages``, ``offsets``, ``clients``, ``admin``) and add one line below. A code missing
from a table is answered REQUEST_CODE_NOT_SUPPORTED (a 4.x name server stays silent instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from mqadmin.mock.server import admin, clients, messages, namesrv, offsets
from mqadmin.mock.server.broker import BrokerHandler
from mqadmin.mock.server.namesrv import NamesrvHandler
from mqadmin.protocol.codes import RequestCode

NAMESRV_HANDLERS: Final[Mapping[int, NamesrvHandler]] = {
    RequestCode.GET_ROUTEINFO_BY_TOPIC: namesrv.route,
    RequestCode.GET_BROKER_CLUSTER_INFO: namesrv.cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: namesrv.topic_list,
    RequestCode.GET_KV_CONFIG: namesrv.kv_config,
    RequestCode.GET_KVLIST_BY_NAMESPACE: namesrv.kv_list,
    RequestCode.REGISTER_BROKER: namesrv.accept,
    RequestCode.UNREGISTER_BROKER: namesrv.accept,
}

BROKER_HANDLERS: Final[Mapping[int, BrokerHandler]] = {
    # messages
    RequestCode.SEND_MESSAGE: messages.send,
    RequestCode.SEND_MESSAGE_V2: messages.send,
    RequestCode.SEND_BATCH_MESSAGE: messages.send,
    RequestCode.PULL_MESSAGE: messages.pull,
    RequestCode.VIEW_MESSAGE_BY_ID: messages.view_message,
    RequestCode.CONSUMER_SEND_MSG_BACK: messages.send_back,
    # offsets
    RequestCode.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset,
    RequestCode.GET_MAX_OFFSET: offsets.max_offset,
    RequestCode.GET_MIN_OFFSET: offsets.min_offset,
    RequestCode.GET_EARLIEST_MSG_STORETIME: offsets.earliest_store_time,
    RequestCode.GET_ALL_CONSUMER_OFFSET: offsets.all_consumer_offsets,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: offsets.reset_offset,
    # clients
    RequestCode.HEART_BEAT: clients.heartbeat,
    RequestCode.UNREGISTER_CLIENT: clients.unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: clients.consumer_connections,
    RequestCode.LOCK_BATCH_MQ: clients.lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: clients.unlock_batch,
    RequestCode.GET_CONSUMER_RUNNING_INFO: clients.running_info,
    # admin
    RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.create_group,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.subscription_groups,
    RequestCode.GET_TOPIC_CONFIG: admin.topic_config,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: admin.consume_by_who,
    RequestCode.GET_TOPIC_STATS_INFO: admin.topic_stats,
    RequestCode.GET_CONSUME_STATS: admin.consume_stats,
    RequestCode.GET_BROKER_CONSUME_STATS: admin.broker_consume_stats,
    RequestCode.GET_BROKER_RUNTIME_INFO: admin.runtime_info,
    RequestCode.GET_BROKER_CONFIG: admin.broker_config,
    RequestCode.GET_LITE_GROUP_INFO: admin.lite_group_info,
}
