"""Options shared by several commands, so every command uses the Java tool's letters."""

from __future__ import annotations

from mqadmin.registry import Opt
from mqadmin.timeparse import FORMATS_HELP

GROUP = Opt("group", ("-g", "--group", "--groupName"), "Consumer group", metavar="GROUP")
TOPIC = Opt("topic", ("-t", "--topic", "--topicName"), "Topic", metavar="TOPIC")
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


def required(opt: Opt) -> Opt:
    return Opt(opt.dest, opt.flags, opt.help, opt.kind, opt.default, True, opt.metavar, opt.choices)


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
