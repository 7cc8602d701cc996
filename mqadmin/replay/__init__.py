"""Replaying a store-time window of messages: plan, slice worker, sinks and the local engine.

Layers, each importing only those below it: ``local`` runs slices on threads with checkpoints
(through ``pool``); ``search`` answers born-time and property searches by scanning slices;
``sinks`` write or send; ``worker`` reads one slice (both engines use it); ``planner`` turns a
window into plain-data slices; ``records`` encodes and decodes rows. The Spark engine lives in
``mqadmin.spark`` and reuses the same planner, worker, search and records.
Nothing here imports pyspark or pyarrow at module level.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mqadmin.errors import UsageError

#: what to install for the optional engines and formats
SPARK_EXTRA = "pip install 'mqadmin[spark]'"
#: messages per slice: the unit of work, of checkpointing and of Spark partitions
DEFAULT_SLICE_SIZE = 8192
#: the time fields a time→offset search compares with the time (command help reads these
#: without importing the planner, to keep start-up light)
STORE_TIME = "store"
BORN_TIME = "born"
PROPERTY_PREFIX = "property:"
TIME_FIELDS_HELP = "store, born or property:NAME"


def require(module: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or fail with one line saying how to install it (exit 2)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise UsageError(f"{purpose} needs {top}, which is not installed: {SPARK_EXTRA}") from None
