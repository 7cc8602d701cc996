"""RocketMQ version ordinals (the ``version`` header field) and their Java names.

Neutral ground: the remoting codec sends them, commands print client versions with them.
"""

from __future__ import annotations

import enum
import re
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
    """Version ordinals that change behaviour somewhere (protocol doc's version table).

    Any other ordinal can be named with :func:`version_name`.
    """

    V3_0_6_SNAPSHOT = ORDINALS["V3_0_6_SNAPSHOT"]
    # Brokers refuse consumer pushes (reset, status) to clients older than this.
    V3_0_7_SNAPSHOT = ORDINALS["V3_0_7_SNAPSHOT"]
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
