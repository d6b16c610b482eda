"""ColBERTv2 for stark-harness: colbert-ai's PLAID indexing and late-interaction search.

The retriever is :class:`ColBERTRetriever` (``harness_colbert.retriever``); this module only
registers it and the presets, so that loading the plugin costs the command line nothing
(colbert-ai and torch are imported when an index is built).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness


@harness.hookimpl
def register_retrievers(register: Any) -> None:
    register("harness_colbert.retriever:ColBERTRetriever", name="colbertv2")


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
