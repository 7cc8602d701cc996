"""Topic and group names as a broker accepts them (RocketMQ's TopicValidator).

One rule for every door: the mock server's handlers, the mock store's path building, the
embedded backend and the commands' ``-g``/``-t``. A name that passes can be a folder name
(no ``/``, ``.`` or ``..``), so checking here is also what keeps files inside the store.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ALLOWED",
    "GROUP_MAX_LENGTH",
    "TOPIC_MAX_LENGTH",
    "group_problem",
    "is_valid_group",
    "is_valid_topic",
    "safe_path_part",
    "topic_problem",
]

#: the characters TopicValidator's bit map allows: ^[%|a-zA-Z0-9_-]+$
_LEGAL: Final = re.compile(r"[%|a-zA-Z0-9_-]+")
ALLOWED: Final = "^[%|a-zA-Z0-9_-]+$"
#: every topic, retry and DLQ topics included, in the brokers we emulate (4.9.8, 5.3.3)
TOPIC_MAX_LENGTH: Final = 127
#: 120 so that %RETRY%group fits a topic; released brokers (<= 5.3.3) do not check groups at
#: all, later upstream ones do (TopicValidator.validateGroup); we always do, since groups name
#: folders (their retry and DLQ topics)
GROUP_MAX_LENGTH: Final = 120


def topic_problem(topic: str) -> str | None:
    """None for a legal topic name, else the broker's remark (TopicValidator.validateTopic,
    same text in 4.9.8 and 5.3.3)."""
    if not topic.strip():
        return "The specified topic is blank."
    if not _LEGAL.fullmatch(topic):
        return f"The specified topic contains illegal characters, allowing only {ALLOWED}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def group_problem(group: str) -> str | None:
    """None for a legal group name, else the remark of upstream's TopicValidator.validateGroup."""
    if not group.strip():
        return "The specified group is blank."
    if not _LEGAL.fullmatch(group):
        return f"The specified group: {group}, contains illegal characters, allowing only {ALLOWED}"
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None


def is_valid_topic(topic: str) -> bool:
    return topic_problem(topic) is None


def is_valid_group(group: str) -> bool:
    return group_problem(group) is None


def safe_path_part(name: str) -> str:
    """``name`` when it may be joined into a store path; ValueError otherwise (defence in depth)."""
    if not _LEGAL.fullmatch(name):
        raise ValueError(f"{name!r} cannot be a store folder name (allowed: {ALLOWED})")
    return name
