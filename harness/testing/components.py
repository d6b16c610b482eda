"""Plugins for tests: a plugin manager with the kit's datasets and your components, the
process-wide one afresh, and a trivial first stage to put under a reranker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from harness.options import Options as BaseOptions
from harness.plugins import PluginManager, get_plugin_manager, reset_plugin_manager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query
from harness.retriever import BuildContext, Ranking, Retriever
from harness.skb import SKB
from harness.testing.data import TinyDataset, TinyTrainDataset


class OverlapRetriever(Retriever):
    """A trivial lexical retriever, the first stage to test a reranker over: it scores each
    candidate by the number of distinct query words (split on whitespace, lower-cased) its
    document contains, ties in id order, and leaves out candidates sharing fewer than
    ``min_overlap`` words. Not registered by :func:`plugin_manager`: pass it where it is used
    (``also=[OverlapRetriever]``); its name is ``overlap``."""

    name = "overlap"
    version = "1"

    class Options(BaseOptions):
        with_relations: bool = Field(False, description="score documents with their relations")
        min_overlap: int = Field(1, ge=0, description="leave out candidates sharing fewer words")

    options: Options

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        relations = self.options.with_relations
        self.docs = [set(skb.document(int(i), with_relations=relations).lower().split()) for i in self.ids]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        rankings = []
        for query in queries:
            words = set(query.text.lower().split())
            scores = np.array([len(words & doc) for doc in self.docs], dtype=np.float64)
            order = np.lexsort((self.ids, -scores))
            order = order[scores[order] >= max(self.options.min_overlap, 0)][:k]
            rankings.append(Ranking(self.ids[order], scores[order]))
        return rankings


class _TinyPlugin:
    @hookimpl
    def register_datasets(self, register: Any) -> None:
        register(TinyDataset)
        register(TinyTrainDataset)


class Components:
    """A plugin registering the retrievers (and datasets) it is given."""

    def __init__(self, retrievers: Sequence[type[Retriever]] = (), datasets: Sequence[type[Any]] = ()) -> None:
        self.retrievers, self.datasets = list(retrievers), list(datasets)

    @hookimpl
    def register_retrievers(self, register: Any) -> None:
        for retriever in self.retrievers:
            register(retriever)

    @hookimpl
    def register_datasets(self, register: Any) -> None:
        for dataset in self.datasets:
            register(dataset)


def plugin_manager(*plugins: object, entry_points: bool = False) -> PluginManager:
    """A plugin manager with the built-ins, the tiny datasets and ``plugins`` (modules or objects
    with ``@harness.hookimpl`` methods); installed plugins too when ``entry_points``."""
    manager = PluginManager(load_entry_points=entry_points)
    if not manager.pm.has_plugin("harness-testing-tiny"):
        manager.register(_TinyPlugin(), "harness-testing-tiny")
    for i, plugin in enumerate(plugins):
        manager.register(plugin, f"harness-testing-{i}")
    return manager


def installed_plugins(*plugins: object) -> PluginManager:
    """The process-wide plugin manager, loaded afresh (so that ``$HARNESS_PLUGINS`` and
    ``$HARNESS_PLUGINS_DIR`` as they are now apply), with ``plugins`` registered on it: what the
    ``harness`` command (:func:`harness.testing.invoke`), ``harness.load_dataset`` and
    ``harness.lookup`` then use. The root conftest resets it after every test."""
    reset_plugin_manager()
    manager = get_plugin_manager()
    for i, plugin in enumerate(plugins):
        manager.register(plugin, f"harness-testing-installed-{i}")
    return manager
