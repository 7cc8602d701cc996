"""Values both sides of the wire agree on: topic names, perm bits, flag bits, defaults.

The client (``mqadmin.remoting``), the mock broker (``mqadmin.mock``) and the commands read them
from here; each names the upstream Java file it mirrors.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_MAX_RECONSUME_TIMES",
    "DEFAULT_TOPIC",
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "DLQ_PREFIX",
    "EXPRESSION_SQL92",
    "EXPRESSION_TAG",
    "MASTER_ID",
    "PERM_READ",
    "LITE_PREFIX",
    "LMQ_PREFIX",
    "PERM_READ_WRITE",
    "PERM_WRITE",
    "PULL_COMMIT_OFFSET",
    "PULL_SUBSCRIPTION",
    "PULL_SUSPEND",
    "RETRY_PREFIX",
    "SUBSCRIBE_ALL",
    "TOOLS_CONSUMER_GROUP",
]

# -- topic and group names (common: MixAll.java, TopicValidator.java) -------------------------

#: a group's retry topic is this prefix + the group name
RETRY_PREFIX: Final = "%RETRY%"
#: a group's dead-letter topic is this prefix + the group name
DLQ_PREFIX: Final = "%DLQ%"
#: a light message queue's topic (common: MixAll.LMQ_PREFIX); a 5.5 lite topic's queue is
#: LITE_PREFIX + parent + "$" + lite topic
LMQ_PREFIX: Final = "%LMQ%"
LITE_PREFIX: Final = LMQ_PREFIX + "$"
#: the topic new topics are modelled on when a producer sends to an unknown one (AUTO_CREATE_TOPIC_KEY_TOPIC)
DEFAULT_TOPIC: Final = "TBW102"
#: the group the Java admin tool pulls with; every broker creates it at start-up (TOOLS_CONSUMER_GROUP)
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
#: the broker id of a master in a broker set's address table (MASTER_ID)
MASTER_ID: Final = 0

# -- topic permissions (common: constant/PermName.java) ---------------------------------------

PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_READ_WRITE: Final = PERM_READ | PERM_WRITE

# -- PULL_MESSAGE sysFlag bits (common: sysflag/PullSysFlag.java) -----------------------------

#: the pull carries the consumer's committed offset (commitOffset)
PULL_COMMIT_OFFSET: Final = 0x1
#: the broker may hold the pull until a message arrives (long polling, suspendTimeoutMillis)
PULL_SUSPEND: Final = 0x2
#: the pull carries its subscription expression (otherwise the broker uses the group's heartbeat)
PULL_SUBSCRIPTION: Final = 0x4

# -- subscriptions (remoting: heartbeat/SubscriptionData.java, common: filter/ExpressionType.java)

SUBSCRIBE_ALL: Final = "*"
EXPRESSION_TAG: Final = "TAG"
EXPRESSION_SQL92: Final = "SQL92"

# -- defaults -------------------------------------------------------------------------------

#: a producer's queue count for a topic the broker auto-creates (client: DefaultMQProducer.java)
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
#: retries before a message goes to the DLQ when the consumer set none
#: (remoting: subscription/SubscriptionGroupConfig.java retryMaxTimes)
DEFAULT_MAX_RECONSUME_TIMES: Final = 16
