"""Options shared by several commands, so every command uses the Java tool's letters."""

from __future__ import annotations

import dataclasses

from mqadmin.errors import UsageError
from mqadmin.registry import Opt
from mqadmin.replay import DEFAULT_SLICE_SIZE
from mqadmin.timeparse import FORMATS_HELP

GROUP = Opt("group", ("-g", "--group", "--groupName"), "Consumer group", metavar="GROUP", names="group")
TOPIC = Opt("topic", ("-t", "--topic", "--topicName"), "Topic", metavar="TOPIC", names="topic")
TIMESTAMP = Opt("timestamp", ("-s", "--timestamp"), f"Time: {FORMATS_HELP}", metavar="TIME")
YES = Opt("yes", ("--yes", "-y"), "Do not ask for confirmation (mqadmin extension)", kind=bool, default=False)
DRY_RUN = Opt(
    "dry_run", ("--dry-run",), "Print the plan only; change nothing (mqadmin extension)", kind=bool, default=False
)
BACKUP = Opt(
    "backup",
    ("--backup",),
    "Where to write the backup of the current offsets (default: $MQADMIN_HOME/backups/...; mqadmin extension)",
    metavar="FILE",
)

REASON = Opt(
    "reason",
    ("--reason",),
    "Why this change is made (e.g. an incident id): recorded in the journal that 'mqadmin history' lists "
    "(mqadmin extension)",
    metavar="TEXT",
)


def required(opt: Opt) -> Opt:
    return dataclasses.replace(opt, required=True)


def parse_now(params: object, *names: str) -> None:
    """Parse the named options of ``params`` (its cached properties) at once, so that a bad value
    is a usage error before any broker work; later reads reuse what was parsed here."""
    for name in names:
        getattr(params, name)


def parse_bool(text: str, flag: str) -> bool:
    """The Java tool reads only "true" as true and anything else as false; so that a typo never
    means the opposite of what was meant, only true and false are accepted."""
    value = text.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise UsageError(f"{flag} takes true or false, not {text!r}")


LOCAL_STORE = Opt(
    "local_store",
    ("--local-store",),
    "Broadcast consumers' local offsets instead of the broker's: one offsets.json, a client's offsets folder, "
    "or a tree collected from many hosts (one row per client); with -n the broker adds min/max offsets and lag "
    "(mqadmin extension)",
    metavar="PATH",
)
WHILE_RUNNING = Opt(
    "while_running",
    ("--while-running",),
    "UNSAFE: write local offsets even though -n shows the group's clients online (a running broadcast consumer "
    "rewrites its offsets.json every few seconds and will likely undo the change; mqadmin extension)",
    kind=bool,
    default=False,
)

# -- the engine options: where the work runs (rangeReplay, queryOffset) --------------------------

ENGINES = ("local", "spark", "auto")
ENGINE = Opt(
    "engine", ("--engine",), "Run locally, on Spark, or pick by the size of the work", default="local", choices=ENGINES
)
SPARK_MASTER = Opt("spark_master", ("--spark-master",), "Spark master URL", default="local[*]", metavar="URL")
SPARK_CONF = Opt("spark_conf", ("--spark-conf",), "Spark setting (repeatable)", kind=list[str], metavar="K=V")


def spark_conf(pairs: list[str] | None) -> dict[str, str]:
    """--spark-conf KEY=VALUE pairs as a dict; anything else is a usage error."""
    conf: dict[str, str] = {}
    for pair in pairs or []:
        k, sep, v = pair.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--spark-conf takes KEY=VALUE, got {pair!r}")
        conf[k.strip()] = v
    return conf


def spark_unavailable() -> str | None:
    """Why the Spark engine cannot run here (one line saying what to install), or None; asked
    before anything starts a JVM, and without importing pyspark."""
    try:
        from mqadmin.spark import unavailable_reason
    except ImportError:
        return "the mqadmin.spark package is not installed: pip install 'mqadmin[spark]'"
    return unavailable_reason()


def require_spark(address: str, master: str) -> None:
    """--engine spark that cannot run is one line and exit 2, before any work starts."""
    reason = spark_unavailable()
    if reason:
        raise UsageError(f"--engine spark: {reason}")
    from mqadmin.spark import check_master

    check_master(address, master)


#: what --consumer-group says on 5.x, whatever the command's default
_READ_GROUP_ON_V5 = (
    "On 5.x a read becomes the group's pull offset and takes over its pending reset: name a group kept "
    "for reading, not one that consumers use"
)
CONSUMER_GROUP = Opt(
    "consumer_group",
    ("--consumer-group",),
    "Read messages as this consumer group; under ACL the account needs SUB on it instead of on "
    "TOOLS_CONSUMER (mqadmin extension). Default: TOOLS_CONSUMER, as the Java tool reads; when every "
    "broker is 4.x and the account may not read as TOOLS_CONSUMER, the group of -g (such a read commits "
    f"nothing, but shows in the group's consume TPS for a minute). {_READ_GROUP_ON_V5}",
    metavar="GROUP",
)
REPLAY_CONSUMER_GROUP = Opt(
    "consumer_group",
    ("--consumer-group",),
    "Read messages as this consumer group (default TOOLS_CONSUMER, as the Java tool reads); under ACL "
    f"the account needs SUB on it instead of on TOOLS_CONSUMER (mqadmin extension). {_READ_GROUP_ON_V5}",
    metavar="GROUP",
)
SLICE_SIZE = Opt(
    "slice_size",
    ("--slice-size",),
    "Messages per slice: the unit of work of either engine (one Spark partition each)",
    kind=int,
    default=DEFAULT_SLICE_SIZE,
    metavar="N",
)
