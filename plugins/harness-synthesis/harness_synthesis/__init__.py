"""STaRK's query-synthesis stages as plugins (paper §2.4), and ``harness synthesize``.

Offers other plugins the ``register_synthesis_stages`` hook and the interface
(``SynthesisStage``, ``Draft``: ``harness_synthesis.stage``). Stages: ``relational`` (stage 1:
relational requirements from metapath templates; ``harness_synthesis.relational``), then
``textual``, ``fuse`` and ``filter``, which ask an LLM through ``harness_llm``
(``harness_synthesis.llm_stages``).

This module is the entry point: it holds only the hooks and imports nothing heavy. The
interface, the stages and the command live in submodules and load when first used (the
component kind is named by its dotted path).
"""

from __future__ import annotations

from typing import Any

import harness


@harness.hookimpl
def add_hookspecs(manager: Any) -> None:
    from harness_synthesis import hookspecs

    manager.add_hookspecs(hookspecs)
    manager.add_component_kind("register_synthesis_stages", "harness_synthesis.stage:SynthesisStage", "synthesis stage")


@harness.hookimpl
def register_synthesis_stages(register: Any) -> None:
    register("harness_synthesis.relational:RelationalRequirement", name="relational")
    register("harness_synthesis.llm_stages:TextualProperties", name="textual")
    register("harness_synthesis.llm_stages:Fuse", name="fuse")
    register("harness_synthesis.llm_stages:Filter", name="filter")


@harness.hookimpl
def register_commands(cli: Any) -> None:
    from harness_synthesis.cli import add_command

    add_command(cli)
