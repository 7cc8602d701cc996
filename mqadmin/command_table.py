"""The built-in commands as ``--help`` lists them, without importing any command module.

``mqadmin --help`` reads this table (and ``registry.lookup`` imports only the module of the
command that runs); tests/test_registry.py checks every row against the class it names, so the
table cannot drift from the commands. Plain data, cheap to import.
"""

from __future__ import annotations

import os
import sys

ENTRY_POINT_GROUP = "mqadmin.commands"

#: the top-level texts: entry prints them on the fast path, cli hands them to click
PROG = "mqadmin"
HELP = (
    "See, move and replay Apache RocketMQ consumer offsets, safely.\n\n"
    "Options of each command follow the command, as in the Java mqadmin: "
    "'mqadmin queryOffset -n 127.0.0.1:9876 -t TopicTest'. "
    "Exit codes: 0 done, 1 failure, 2 usage error, 3 check failed, 4 cancelled at the prompt."
)
VERSION_HELP = "Show the version and exit."
HELP_HELP = "Show this message and exit."

#: name -> (module, class, kebab alias, summary = the first line of the class docstring)
BUILTIN: dict[str, tuple[str, str, str, str]] = {
    "cloneGroupOffset": (
        "mqadmin.commands.clone_group_offset",
        "CloneGroupOffsetCommand",
        "clone-group-offset",
        "Copy a group's offsets on a topic to another group (e.g. a blue/green consumer deploy).",
    ),
    "consumerConnection": (
        "mqadmin.commands.consumer_connection",
        "ConsumerConnectionCommand",
        "consumer-connection",
        "Show a group's online clients: id, address, language, version, subscriptions.",
    ),
    "consumerProgress": (
        "mqadmin.commands.consumer_progress",
        "ConsumerProgressCommand",
        "consumer-progress",
        "Show consume progress: per queue for one group (-g), or one line per group.",
    ),
    "history": (
        "mqadmin.commands.history",
        "HistoryCommand",
        "history",
        "List the changes mqadmin made (journal), show or undo one, prune old backups (mqadmin extension).",
    ),
    "mockBroker": (
        "mqadmin.commands.mock_broker",
        "MockBrokerCommand",
        "mock-broker",
        "Serve a mock broker store over TCP: a name server plus one port per broker (mqadmin extension).",
    ),
    "queryOffset": (
        "mqadmin.commands.query_offset",
        "QueryOffsetCommand",
        "query-offset",
        "Show each queue's min/max offset, a group's offset and lag, and where a time lands.",
    ),
    "rangeReplay": (
        "mqadmin.commands.range_replay",
        "RangeReplayCommand",
        "range-replay",
        "Replay the messages stored in [begin, end) to a file, stdout, a topic, or one group only.",
    ),
    "resetOffsetByTime": (
        "mqadmin.commands.reset_offset_by_time",
        "ResetOffsetByTimeCommand",
        "reset-offset-by-time",
        "Reset a consumer group's offsets on a topic to a point in time.",
    ),
    "skipAccumulatedMessage": (
        "mqadmin.commands.skip_accumulated_message",
        "SkipAccumulatedMessageCommand",
        "skip-accumulated-message",
        "Skip a group's backlog on a topic: move its offset to the max offset of every queue.",
    ),
    "restoreOffset": (
        "mqadmin.commands.restore_offset",
        "RestoreOffsetCommand",
        "restore-offset",
        "Put a group's offsets back from a backup file (mqadmin extension).",
    ),
}


def command_rows() -> list[tuple[str, str, str]]:
    """(name, kebab alias, summary) of every command in name order; plugin commands are loaded
    (through the registry) only when an installed distribution declares some."""
    rows = {name.lower(): (name, e[2], e[3]) for name, e in BUILTIN.items()}
    if has_plugins():
        from mqadmin.registry import commands

        for cls in commands():
            rows.setdefault(cls.name.lower(), (cls.name, cls.kebab(), cls.summary()))
    return [rows[k] for k in sorted(rows)]


def has_plugins() -> bool:
    """Whether a distribution on ``sys.path`` declares an entry point in our group.

    Reads the ``entry_points.txt`` files of the ``.dist-info``/``.egg-info`` folders itself:
    ``importlib.metadata`` would cost more than the rest of ``--help`` (it imports ``email``).
    """
    header = f"[{ENTRY_POINT_GROUP}]"
    for folder in dict.fromkeys(p or "." for p in sys.path):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            if header in text and _declares(text, header):
                return True
    return False


def _declares(text: str, header: str) -> bool:
    """Whether the ``header`` section of an entry_points.txt has at least one entry."""
    inside = False
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            inside = line == header
        elif inside and line and not line.startswith(("#", ";")):
            return True
    return False
