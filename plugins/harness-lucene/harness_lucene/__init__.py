"""Lucene BM25 for stark-harness, through Pyserini (Anserini's Lucene), in-process.

The retriever is :class:`LuceneBM25` (``harness_lucene.retriever``); this module only
registers it and the presets, so that loading the plugin costs the command line nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness


@harness.hookimpl
def register_retrievers(register: Any) -> None:
    register("harness_lucene.retriever:LuceneBM25", name="bm25-lucene")


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
