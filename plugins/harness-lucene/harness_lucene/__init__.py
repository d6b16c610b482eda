"""Lucene BM25 for stark-harness, through Pyserini (Anserini's Lucene), in-process.

The retriever is :class:`LuceneBM25` (``harness_lucene.retriever``); this module only
registers it and the presets, so that loading the plugin costs the command line nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness

if TYPE_CHECKING:
    from harness_lucene.retriever import LuceneBM25, start_jvm

__all__ = ["LuceneBM25", "start_jvm"]


def __getattr__(name: str) -> Any:
    if name in __all__:  # imported on use: the retriever needs numpy and pydantic
        from harness_lucene import retriever

        return getattr(retriever, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@harness.hookimpl
def register_retrievers(register: Any) -> None:
    from harness_lucene.retriever import LuceneBM25

    register(LuceneBM25)


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
