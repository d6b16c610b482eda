"""For tests of components that ask an LLM: register a scripted provider like a plugin would.

::

    from harness_llm.api import LLM
    from harness_llm.testing import provider_plugin

    class Scripted(LLM):
        name = "scripted"
        def complete(self, prompt, max_tokens=256, temperature=0.0): ...

    check_retriever(MyReranker, {"llm": "scripted:m", ...}, tmp_path, plugins=[provider_plugin(Scripted)])
    # components in that run find it as "scripted:m"
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
    def add_hookspecs(self, manager: Any) -> None:
        # the llm kind, for managers that do not load this plugin (harness.testing's)
        from harness_llm.hookspecs import offer

        offer(manager)

    @harness.hookimpl
    def register_llms(self, register: Any) -> None:
        for provider in self.providers:
            register(provider)


def provider_plugin(*providers: type[LLM]) -> object:
    """A plugin object offering the ``llm`` kind and registering ``providers`` through
    ``register_llms``: pass it to ``harness.testing.check_retriever(..., plugins=[...])``."""
    return _Providers(providers)
