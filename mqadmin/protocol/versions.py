"""RocketMQ versions: ordinals (the ``version`` header field), their Java names, and the
release from which each behaviour we depend on changed (named predicates over a version).

Neutral ground: the remoting codec sends ordinals, commands print client versions with them,
and the client, the mock broker and the commands ask the predicates rather than compare tuples.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Final


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
ORDINALS: Final[dict[str, int]] = {name: i for i, name in enumerate(VERSION_NAMES)}


class MQVersion(enum.IntEnum):
    """Version ordinals that change behaviour somewhere (the comment on each says what).

    Any other ordinal can be named with :func:`version_name`.
    """

    V3_0_6_SNAPSHOT = ORDINALS["V3_0_6_SNAPSHOT"]
    # Brokers refuse consumer pushes (reset, status) to clients older than this.
    V3_0_7_SNAPSHOT = ORDINALS["V3_0_7_SNAPSHOT"]
    # Brokers refuse to forward admin requests (GET_CONSUMER_RUNNING_INFO) to clients older than this.
    V3_1_8_SNAPSHOT = ORDINALS["V3_1_8_SNAPSHOT"]
    # ali-ons hard-codes this; CONSUMER_SEND_MSG_BACK honours maxReconsumeTimes from here.
    V3_4_9 = ORDINALS["V3_4_9"]
    # Sent by rocketmq-client-cpp, hence rocketmq-client-python.
    V4_6_0 = ORDINALS["V4_6_0"]
    # Last version whose QUERY_MESSAGE ACL signature leaves out _UNIQUE_KEY_QUERY on 5.x servers.
    V4_9_3 = ORDINALS["V4_9_3"]
    # From here the namesrv returns standard-JSON route data.
    V4_9_4 = ORDINALS["V4_9_4"]
    V4_9_8 = ORDINALS["V4_9_8"]
    V5_0_0 = ORDINALS["V5_0_0"]
    V5_1_4 = ORDINALS["V5_1_4"]
    V5_3_1 = ORDINALS["V5_3_1"]
    V5_3_3 = ORDINALS["V5_3_3"]
    HIGHER_VERSION = ORDINALS["HIGHER_VERSION"]


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
    if name in ORDINALS:
        return ORDINALS[name]
    m = _VERSION_TEXT_RE.fullmatch(name.strip())
    if m:
        key = f"V{m.group(1)}_{m.group(2)}_{m.group(3)}" + ("_SNAPSHOT" if m.group(4) else "")
        if key in ORDINALS:
            return ORDINALS[key]
    raise ValueError(f"unknown RocketMQ version: {name!r}")


def version_desc(ordinal: int) -> str:
    """What the Java tool prints for a client version (``MQVersion.getVersionDesc``)."""
    return version_name(ordinal)


# -- release versions ("5.3.3", "4.9.8-SNAPSHOT") and what changed when ------------------------

#: a release as text (what a broker reports) or as the tuple ``version_tuple`` makes of it
Version = str | tuple[int, ...]


def version_tuple(version: str) -> tuple[int, ...]:
    """``"5.3.3"`` -> ``(5, 3, 3)``; stops at the first non-numeric part (``"4.9.8-SNAPSHOT"``
    -> ``(4, 9, 8)``); an empty or unknown version is ``()``, older than any release."""
    parts = []
    for p in version.replace("-", ".").split("."):
        if not p.isdigit():
            break
        parts.append(int(p))
    return tuple(parts)


def _at_least(version: Version, since: tuple[int, ...]) -> bool:
    v = version_tuple(version) if isinstance(version, str) else version
    return v >= since


def is_v5(version: Version) -> bool:
    """5.0+: the 5.x broker line (wording, reply fields and ACL differ from 4.x)."""
    return _at_least(version, (5,))


def query_offset_not_found_strict(version: Version) -> bool:
    """5.0+: QUERY_CONSUMER_OFFSET with setZeroIfNotFound=false answers QUERY_NOT_FOUND instead
    of 0 (broker: ConsumerManageProcessor.java)."""
    return _at_least(version, (5, 0))


def consume_stats_pull_offset(version: Version) -> bool:
    """5.1+: consume stats carry each queue's pullOffset (remoting: admin/OffsetWrapper.java)."""
    return _at_least(version, (5, 1))


def zero_offset_needs_first_message(version: Version) -> bool:
    """5.1+: a group with no commit on a queue whose min offset is 0 gets offset 0 only while
    the queue's first message is still stored, else QUERY_NOT_FOUND; older brokers answer 0
    for any such queue (broker: ConsumerManageProcessor.java, checkInMemByConsumeOffset)."""
    return _at_least(version, (5, 1))


def lower_boundary_search(version: Version) -> bool:
    """5.1.1+: a time search lands on the first message at or after the time (the LOWER
    boundary); older brokers answer the nearest message (store: DefaultMessageStore.java)."""
    return _at_least(version, (5, 1, 1))


def heartbeat_v2(version: Version) -> bool:
    """5.1.3+: the broker answers heartbeats with IS_SUPPORT_HEART_BEAT_V2 and IS_SUB_CHANGE
    (broker: ClientManageProcessor.java)."""
    return _at_least(version, (5, 1, 3))


def search_boundary_type(version: Version) -> bool:
    """5.1.4+: SEARCH_OFFSET_BY_TIMESTAMP reads a boundaryType header field (LOWER or UPPER)
    (remoting: header/SearchOffsetRequestHeader.java)."""
    return _at_least(version, (5, 1, 4))


def server_side_reset(version: Version) -> bool:
    """The default of ``useServerSideResetOffset`` (off in 5.1, on from 5.2; 4.x and 5.0 lack it):
    on, INVOKE_BROKER_TO_RESET_OFFSET resets on the broker, which then serves the new offsets to
    consumers; off, the broker pushes a time to online clients and answers CONSUMER_NOT_ONLINE
    without them (common: BrokerConfig.java; broker: AdminBrokerProcessor.java, Broker2Client.java)."""
    return _at_least(version, (5, 2))


#: the broker setting that decides the reset path (5.1+; common: BrokerConfig.java)
SERVER_SIDE_RESET_KEY: Final = "useServerSideResetOffset"


def resets_on_broker(version: Version, config: Mapping[str, str] | None) -> bool:
    """Whether a broker resets offsets itself, from its configuration (GET_BROKER_CONFIG) when
    known: a broker without the setting (4.x, 5.0) never does; the version's default only when
    the configuration could not be read."""
    if config is None:
        return server_side_reset(version)
    return config.get(SERVER_SIDE_RESET_KEY, "false").strip().lower() == "true"


def checks_group_on_commit(version: Version) -> bool:
    """5.3+: UPDATE_CONSUMER_OFFSET refuses a group the broker does not know
    (broker: ConsumerManageProcessor.java)."""
    return _at_least(version, (5, 3))


def subscription_group_total(version: Version) -> bool:
    """After 5.3.3: GET_ALL_SUBSCRIPTIONGROUP_CONFIG answers totalGroupNum in its header. No
    release up to 5.3.3 has it; the development branch after it does (broker:
    AdminBrokerProcessor.java, read back in BrokerOuterAPI.java)."""
    return _at_least(version, (5, 3, 4))


def invalid_parameter_for_names(version: Version) -> bool:
    """5.3.2+: a bad topic name, or a missing queueId/commitOffset, is INVALID_PARAMETER rather
    than SYSTEM_ERROR (common: TopicValidator.java, broker: ConsumerManageProcessor.java)."""
    return _at_least(version, (5, 3, 2))
