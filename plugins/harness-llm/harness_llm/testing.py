"""For tests of components that ask an LLM: register a scripted provider like a plugin would.

::

    from harness_llm.testing import provider_plugin

    class Scripted(harness_llm.LLM):
        name = "scripted"
        def complete(self, prompt, max_tokens=256, temperature=0.0): ...

    get_plugin_manager().register(provider_plugin(Scripted), "scripted-llm")
    # components now find it as "scripted:MODEL"
"""

from __future__ import annotations

from typing import Any

import harness
from harness_llm.api import LLM

__all__ = ["provider_plugin"]


class _Providers:
    def __init__(self, providers: tuple[type[LLM], ...]) -> None:
        self.providers = providers

    @harness.hookimpl
    def register_llms(self, register: Any) -> None:
        for provider in self.providers:
            register(provider)


def provider_plugin(*providers: type[LLM]) -> object:
    """A plugin object registering ``providers`` through ``register_llms``."""
    return _Providers(providers)
