"""RnG-KBQA (rank-and-generate) adapted to retrieval over an SKB, for stark-harness.

* ``rng-kbqa`` — Ye et al., *RnG-KBQA: Generation Augmented Iterative Ranking for Knowledge Base
  Question Answering* (ACL 2022): candidate logical forms (typed relation paths of up to two
  hops from the query's linked entities, and intersections of two) enumerated and executed, a
  contrastive cross-encoder ranking them (trained on the train split), a generator composing
  the final form (an LLM through harness-llm, or the top-ranked form), its answers ordered by a
  text retriever, which also answers when no form does.

Importing this module loads no model library: torch and sentence-transformers load when the
retriever trains or builds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import harness


@harness.hookimpl
def register_retrievers(register: harness.Register) -> None:
    register("harness_rng.retriever:RnGRetriever", name="rng-kbqa")


@harness.hookimpl
def register_presets(register: Callable[[Path | str], None]) -> None:
    register(Path(__file__).with_name("presets.yaml"))
