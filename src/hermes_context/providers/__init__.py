"""External memory providers (SPEC 6): the built-in ``local`` one and plugins.

``memory.provider`` names one: ``local``, ``mem0`` (the ``[mem0]`` extra) or a
name registered under the entry point group ``hermes_context.memory_providers``
(the entry point is a ``MemoryProvider`` class or a factory taking no argument).
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from ..errors import ConfigError
from ..memory import MemoryProvider

ENTRY_POINT_GROUP = "hermes_context.memory_providers"
# Built in: name -> "module:attribute" (imported only when chosen).
BUILTIN = {
    "local": "hermes_context.providers.local:LocalMemoryProvider",
    "mem0": "hermes_context.providers.mem0:Mem0Provider",
}


def provider_names() -> dict[str, str]:
    """Every provider that can be chosen: name -> where it comes from."""
    names = dict.fromkeys(BUILTIN, "built in")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        names.setdefault(ep.name, f"plugin {ep.value}")
    return names


def load_provider(name: str, **kwargs: Any) -> MemoryProvider:
    """An instance of the provider called ``name``; ``ConfigError`` when there is none."""
    target: Any = None
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        target = getattr(import_module(module), attr)
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            known = ", ".join(sorted(provider_names())) or "none"
            raise ConfigError(
                f"memory.provider {name!r} is not installed (known: {known}); install its "
                f"package or pick another",
                key="memory.provider",
            )
        target = found[0].load()
    provider = target(**kwargs)
    if not isinstance(provider, MemoryProvider):
        raise ConfigError(
            f"memory.provider {name!r} did not give a MemoryProvider (got {type(provider).__name__})",
            key="memory.provider",
        )
    return provider


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "load_provider", "provider_names"]
