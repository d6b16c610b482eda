"""The hook this plugin offers other plugins (added to the harness through ``add_hookspecs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import harness


@harness.hookspec
def register_llms(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness_llm.api.LLM` subclasses (providers), one per provider name:
    ``register(MyProvider)``; users then name ``MyProvider.name:MODEL``."""


def offer(manager: Any) -> None:
    """Add the hook and the ``llm`` component kind to ``manager``, once: both this plugin and
    :func:`harness_llm.testing.provider_plugin` offer them, and a hook specified twice is an error."""
    if "register_llms" in manager.component_hooks:
        return
    import harness_llm.hookspecs

    manager.add_hookspecs(harness_llm.hookspecs)
    manager.add_component_kind("register_llms", "harness_llm.api:LLM", "llm")
