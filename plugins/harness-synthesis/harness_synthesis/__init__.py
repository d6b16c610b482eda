"""STaRK's query-synthesis stages as plugins (paper §2.4), and ``harness synthesize``.

Offers other plugins the ``register_synthesis_stages`` hook and the interface
(``SynthesisStage``, ``Draft``). Stages: ``relational`` (stage 1: relational requirements
from metapath templates; ``harness_synthesis.relational``), then ``textual``, ``fuse`` and
``filter``, which ask an LLM through ``harness_llm`` (``harness_synthesis.llm_stages``).

This module is the entry point: it imports only the interface (``harness_synthesis.stage``: the
standard library, needed to add the hook); the stages and the command load when their hooks are
called.
"""

from __future__ import annotations

from typing import Any

import harness
from harness_synthesis.stage import Draft, SynthesisStage

__all__ = ["Draft", "SynthesisStage"]


@harness.hookimpl
def add_hookspecs(manager: Any) -> None:
    from harness_synthesis import hookspecs

    manager.add_hookspecs(hookspecs)
    manager.add_component_kind("register_synthesis_stages", SynthesisStage, "synthesis stage")


@harness.hookimpl
def register_synthesis_stages(register: Any) -> None:
    from harness_synthesis.llm_stages import Filter, Fuse, TextualProperties
    from harness_synthesis.relational import RelationalRequirement

    for stage in (RelationalRequirement, TextualProperties, Fuse, Filter):
        register(stage)


@harness.hookimpl
def register_commands(cli: Any) -> None:
    from harness_synthesis.cli import add_command

    add_command(cli)
