"""The plugin hooks. Every hook is documented in ``docs/plugin-hooks.md``.

Each ``register_*`` hook receives a ``register`` callable; call it once per component
class your plugin provides. Hooks are called once per process, when the harness first
needs the components.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("harness")
hookimpl = pluggy.HookimplMarker("harness")


@hookspec
def register_datasets(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness.dataset.Dataset` subclasses: ``register(MyDataset)``."""


@hookspec
def register_retrievers(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness.retriever.Retriever` (or ``Reranker``) subclasses."""


@hookspec
def register_metrics(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness.metrics.Metric` subclasses (one per metric family)."""


@hookspec
def register_llms(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness.llm.LLM` subclasses, one per provider."""


@hookspec
def register_synthesis_stages(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness.synthesis.SynthesisStage` subclasses."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``harness`` command line; ``cli`` is its ``click.Group``."""
