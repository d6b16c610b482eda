"""BM25 for stark-harness: bm25s with Lucene's scoring (k1=0.9, b=0.4), pure Python.

By default text is analyzed as Lucene's English analyzer does (see ``analysis``), so the
scores are Lucene's without a JVM; ``analyzer: bm25s`` uses bm25s's own tokenizer with
optional stopwords and a Snowball stemmer instead (STaRK's baseline uses it with bm25s's
default English stopwords and no stemmer). The retriever is :class:`BM25Retriever`
(``harness_bm25.retriever``); this module only registers it and the presets, so that loading
the plugin costs the command line nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness


@harness.hookimpl
def register_retrievers(register: Any) -> None:
    register("harness_bm25.retriever:BM25Retriever", name="bm25")


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
