"""The hook this plugin offers other plugins (added to the harness through ``add_hookspecs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import harness


@harness.hookspec
def register_llms(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness_llm.LLM` subclasses (providers), one per provider name:
    ``register(MyProvider)``; users then name ``MyProvider.name:MODEL``."""
