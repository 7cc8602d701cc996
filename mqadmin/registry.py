"""The strategy registry: every subcommand is a SubCommand class registered by name.

Built-in commands are the modules of ``mqadmin.commands``, listed in ``mqadmin.command_table``
so that ``--help`` imports none of them and running a command imports only its own;
third-party packages add theirs through the ``mqadmin.commands`` entry-point group. Command
modules must stay light at import time (heavy libraries are imported inside ``execute``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from mqadmin.command_table import BUILTIN, ENTRY_POINT_GROUP
from mqadmin.errors import UsageError

if TYPE_CHECKING:
    from mqadmin.context import Context
    from mqadmin.output import Result


@dataclass(frozen=True)
class Opt:
    """One option of a command, declared once: the CLI, completions and tests read it.
    No ``flags``: a positional argument (e.g. ``history show ID``)."""

    dest: str
    flags: tuple[str, ...]
    help: str
    kind: type = str  # str, int, float, or bool for a flag
    default: Any = None
    required: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    #: "topic" or "group": the value is checked with the broker's name rule before any request
    names: str | None = None
    #: the value may list several names, comma-separated
    several: bool = False

    @property
    def short(self) -> str | None:
        return next((f for f in self.flags if re.fullmatch(r"-[A-Za-z]", f)), None)


class SubCommand:
    """Base of every subcommand: a name, an alias, a summary (first docstring line), options,
    and ``execute``, which talks to brokers only through the admin facade and returns a result.
    """

    name: ClassVar[str]
    alias: ClassVar[str | None] = None
    options: ClassVar[tuple[Opt, ...]] = ()
    #: False for commands that never reach a broker (no -n option is added)
    uses_broker: ClassVar[bool] = True
    #: output formats beyond table/json/csv that the result can print: "java" (the Java tool's
    #: own text, ``java_text()``), "prometheus" (text exposition, ``prometheus_text()``)
    extra_formats: ClassVar[tuple[str, ...]] = ()
    #: the command's parameters: a dataclass with one field per option (named by ``Opt.dest``,
    #: without a default: the ``Opt`` holds it) whose ``__post_init__`` checks ranges and rules
    #: between options (a UsageError, exit 2); ``execute`` gets one instance. Every command,
    #: plugins too, declares one (a plugin without is not loaded).
    params_type: ClassVar[type[Any] | None] = None

    @classmethod
    def summary(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else ""

    @classmethod
    def description(cls) -> str:
        return (cls.__doc__ or "").strip()

    @classmethod
    def kebab(cls) -> str:
        return cls.alias or kebab_case(cls.name)

    def execute(self, ctx: Context, params: Any) -> Result:
        raise NotImplementedError

    @classmethod
    def bind(cls, values: dict[str, Any]) -> Callable[[Context], Result]:
        """``execute`` over the parsed option values, to call with a context (again, for
        --watch); the parameters object is built, and so checked, here, before anything runs."""
        if cls.params_type is None:
            raise TypeError(f"command {cls.name} declares no params_type")
        params = cls.params_type(**values)
        return lambda ctx: cls().execute(ctx, params)


def kebab_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower()


_REGISTRY: dict[str, type[SubCommand]] = {}
_loaded = False

C = TypeVar("C", bound=type[SubCommand])


def register(cls: C) -> C:
    """Class decorator: make a SubCommand known under its name and kebab alias."""
    for key in (cls.name, cls.kebab()):
        other = _REGISTRY.get(key.lower())
        if other is not None and other is not cls:
            raise RuntimeError(f"command name {key!r} of {cls.__qualname__} is taken by {other.__qualname__}")
    _REGISTRY[cls.name.lower()] = cls
    _REGISTRY[cls.kebab().lower()] = cls
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module, _cls, _kebab, _summary in BUILTIN.values():
        importlib.import_module(module)
    _load_plugins()


def _load_plugins() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin must not take the built-in commands down
            import sys

            print(f"mqadmin: warning: command plugin {ep.name!r} ({ep.value}) failed to load: {exc}", file=sys.stderr)
            continue
        if not (isinstance(obj, type) and issubclass(obj, SubCommand)) or obj.name.lower() in _REGISTRY:
            continue
        if obj.params_type is None:
            import sys

            print(
                f"mqadmin: warning: command plugin {ep.name!r} ({ep.value}) declares no params_type"
                " (a dataclass of its options): not loaded",
                file=sys.stderr,
            )
            continue
        register(obj)


def commands() -> list[type[SubCommand]]:
    """Every registered command once, in name order."""
    _load()
    unique = {id(c): c for c in _REGISTRY.values()}
    return sorted(unique.values(), key=lambda c: c.name.lower())


def lookup(name: str) -> type[SubCommand]:
    """By mqadmin name or kebab alias, ignoring case as the Java tool does; imports only the
    module of a built-in command, and everything (plugins too) only for any other name."""
    cls = _REGISTRY.get(name.lower())
    if cls is not None:
        return cls
    module = next((e[0] for n, e in BUILTIN.items() if name.lower() in (n.lower(), e[2])), None)
    if module is not None:
        importlib.import_module(module)  # its @register fills the registry
        cls = _REGISTRY.get(name.lower())
        if cls is not None:
            return cls
    _load()
    cls = _REGISTRY.get(name.lower())
    if cls is not None:
        return cls
    raise UnknownCommand(name, suggestions(name))


class UnknownCommand(UsageError):
    """No command has this name; ``suggested`` are the commands it most likely meant."""

    def __init__(self, name: str, suggested: list[str]) -> None:
        self.suggested = suggested
        hint = f" (did you mean {' or '.join(repr(s) for s in suggested)}?)" if suggested else ""
        super().__init__(f"unknown command {name!r}{hint}; 'mqadmin --help' lists the commands")


def suggestions(name: str) -> list[str]:
    """The commands a mistyped name means: those it begins (``reset`` -> resetOffsetByTime, ``skip``,
    ``clone``), else the closest spelling (``consumerProgres``)."""
    canonical = {k: c.name for c in commands() for k in (c.name.lower(), c.kebab().lower())}
    key = name.lower()
    begun = sorted({c for k, c in canonical.items() if len(key) >= 3 and k.startswith(key)})
    if begun:
        return begun
    import difflib

    close = difflib.get_close_matches(key, list(canonical), n=1, cutoff=0.5)
    return [canonical[close[0]]] if close else []
