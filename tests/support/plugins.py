"""Commands registered for one test."""

from __future__ import annotations

from collections.abc import Callable

from mqadmin import registry


def temporarily_registered(cls: type[registry.SubCommand]) -> Callable[[], None]:
    """Register ``cls`` as a plugin would be, and return the undo."""
    registry.register(cls)

    def undo() -> None:
        for key in (cls.name.lower(), cls.kebab().lower()):
            registry._REGISTRY.pop(key, None)

    return undo
