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
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from mqadmin.errors import UsageError

if TYPE_CHECKING:
    from mqadmin.model import Message

#: what to install for the optional engines and formats
SPARK_EXTRA = "pip install 'mqadmin[spark]'"
#: messages per slice: the unit of work, of checkpointing and of Spark partitions
DEFAULT_SLICE_SIZE = 8192
#: the time fields a time→offset search compares with the time (command help and option
#: checks read these and ``TimeField`` without importing the planner, to keep start-up light)
STORE_TIME = "store"
BORN_TIME = "born"
PROPERTY_PREFIX = "property:"
TIME_FIELDS_HELP = "store, born or property:NAME"


@dataclass(frozen=True)
class TimeField:
    """What a time→offset search compares with the time: the store time, which the broker's index
    answers, or the born time or an epoch-ms user property, which only a scan can answer."""

    kind: str
    name: str = ""

    @staticmethod
    def parse(text: str) -> TimeField:
        text = text.strip()
        if text in (STORE_TIME, BORN_TIME):
            return TimeField(text)
        if text.startswith(PROPERTY_PREFIX):
            name = text[len(PROPERTY_PREFIX) :].strip()
            if name:
                return TimeField("property", name)
            raise UsageError("--time-field property:NAME needs the property's name, e.g. property:ORDER_TIME")
        raise UsageError(f"--time-field must be {TIME_FIELDS_HELP}, not {text!r}")

    def __str__(self) -> str:
        return PROPERTY_PREFIX + self.name if self.kind == "property" else self.kind

    @property
    def scans(self) -> bool:
        """Whether the search reads messages (the broker can search store time only)."""
        return self.kind != STORE_TIME

    @property
    def label(self) -> str:
        return {STORE_TIME: "Store Time", BORN_TIME: "Born Time"}.get(self.kind, f"Property {self.name}")

    def of(self, msg: Message) -> int | None:
        """The field's epoch ms in ``msg``; None for a property that is absent or not an integer."""
        if self.kind == STORE_TIME:
            return msg.store_timestamp
        if self.kind == BORN_TIME:
            return msg.born_timestamp
        try:
            return int(msg.properties[self.name].strip())
        except (KeyError, ValueError):
            return None


def require(module: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or fail with one line saying how to install it (exit 2)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise UsageError(f"{purpose} needs {top}, which is not installed: {SPARK_EXTRA}") from None
