"""Structure-aware retrievers for stark-harness, on the public API only:

* ``ltr-structural`` — learning to rank (LightGBM lambdarank, trained on the train split) over
  candidates from BM25, graph expansion from linked anchors and personalized PageRank, with
  text, meta-path, PPR, degree, relation-classifier and frozen-encoder features;
* ``propagate`` — a zero-shot baseline: first-stage scores passed to neighbours over one or
  two hops with decay and degree normalisation.

Importing this module loads no heavy library (scipy, LightGBM, scikit-learn load at build)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import harness


@harness.hookimpl
def register_retrievers(register: harness.Register) -> None:
    register("harness_ltr.retriever:LTRRetriever", name="ltr-structural")
    register("harness_ltr.retriever:PropagateRetriever", name="propagate")


@harness.hookimpl
def register_presets(register: Callable[[Path | str], None]) -> None:
    register(Path(__file__).with_name("presets.yaml"))
