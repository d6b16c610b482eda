"""DAQu (database-augmented query representation) as a stark-harness retriever.

* ``daqu`` — Jeong et al.'s DAQu adapted to SKB retrieval: the query linked to SKB entities, the
  entities' neighbours' fields gathered per relation (DAQu's tables and columns), encoded by its
  two-level set encoding and mixed into the query's vector (``q~ = λ q + (1-λ) q'``); trained on
  the train split over a dense first stage.

Importing this module loads no model library: torch and sentence-transformers load when the
retriever trains or builds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import harness


@harness.hookimpl
def register_retrievers(register: harness.Register) -> None:
    register("harness_daqu.retriever:DAQuRetriever", name="daqu")


@harness.hookimpl
def register_presets(register: Callable[[Path | str], None]) -> None:
    register(Path(__file__).with_name("presets.yaml"))
