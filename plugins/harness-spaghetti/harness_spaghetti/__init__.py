"""SPAGHETTI for stark-harness.

* ``spaghetti`` — SPAGHETTI (hybrid retrieval + semantic parsing + verification) adapted to
  ranking SKB nodes: an LLM writes a structured query (anchored typed relation paths) against
  the SKB's schema, executed by the harness with an error fed back once; a text retriever
  over documents and one over linearized relations ("tables and infoboxes"); the candidate
  sets fused, then verified by an LLM. An LLM at query time: rows record its tokens and cost.

Importing this module loads nothing heavy: the retriever loads when first named.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import harness


@harness.hookimpl
def register_retrievers(register: harness.Register) -> None:
    register("harness_spaghetti.retriever:SpaghettiRetriever", name="spaghetti")


@harness.hookimpl
def register_presets(register: Callable[[Path | str], None]) -> None:
    register(Path(__file__).with_name("presets.yaml"))
