"""stark-harness: evaluate retrieval on semi-structured knowledge bases.

This module is the whole plugin API: plugins, docs and examples import only from here::

    import harness

    class MyRetriever(harness.Retriever):
        name = "mine"

        class Options(harness.Options):
            depth: int = Field(10, description="...")

        def build(self, skb: harness.SKB, context: harness.BuildContext) -> None: ...
        def search(self, queries, k, top_ranked=None) -> list[harness.Ranking]: ...

    @harness.hookimpl
    def register_retrievers(register):
        register(MyRetriever)
        # or by path, imported only when a run uses it:
        # register("my_plugin.retriever:MyRetriever", name="mine")

    outcome = harness.evaluate(MyRetriever(depth=5), "debian", "val")   # `harness run` as a function
    print(outcome.row.metrics)

Names are loaded on first use, so ``import harness`` stays cheap for the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.version import __version__

#: public name -> module it lives in
_EXPORTS: dict[str, str] = {
    # hooks
    "hookimpl": "harness.plugins.hookspecs",
    "hookspec": "harness.plugins.hookspecs",
    "Register": "harness.plugins.hookspecs",
    "lookup": "harness.plugins",
    "lazy_command": "harness.plugins.commands",
    # errors and parameters
    "HarnessError": "harness.errors",
    "KeptWork": "harness.errors",
    "Options": "harness.options",
    "DocumentOptions": "harness.options",
    "parse_options": "harness.options",
    # the knowledge base and the queries
    "SKB": "harness.skb",
    "EdgeType": "harness.skb",
    "compact_text": "harness.skb",
    "sort_edges": "harness.skb",
    "row_offsets": "harness.skb",
    "Query": "harness.queries",
    "QuerySet": "harness.queries",
    "load_stark_layout": "harness.queries",
    "read_stark_csv": "harness.queries",
    "write_stark_csv": "harness.queries",
    "Dataset": "harness.dataset",
    "DirectoryDataset": "harness.dataset",
    "load_dataset": "harness.run.resolve",
    # retrieval
    "Retriever": "harness.retriever",
    "Reranker": "harness.retriever",
    "Ranking": "harness.retriever",
    "HealthCheck": "harness.retriever",
    # structure shared by graph-aware retrievers: entity linking, typed relation paths
    "EntityLinker": "harness.graph",
    "RelationPath": "harness.graph",
    "Hop": "harness.graph",
    "reach": "harness.graph",
    "Schema": "harness.graph",
    "normalize_name": "harness.graph",
    "BuildContext": "harness.retriever",
    "ProgressTask": "harness.retriever",
    # where work runs: this process, or an executor plugin's workers (harness-ray)
    "Executor": "harness.executors",
    "LocalExecutor": "harness.executors",
    "Limiter": "harness.executors",
    "make_executor": "harness.plugins.executors",
    "executor_options": "harness.plugins.executors",
    "executor_from_options": "harness.plugins.executors",
    "TrainContext": "harness.retriever",
    "TrainingInfo": "harness.training",
    "EpochLoop": "harness.training.loop",
    "Epoch": "harness.training.loop",
    # evaluation
    "Metric": "harness.metrics",
    # the library API: `harness run` and `harness train` as functions
    "evaluate": "harness.api",
    "train": "harness.api",
    "RunOutcome": "harness.run.outcome",
    # statistics of a query set (what `harness stats` reports)
    "query_set_statistics": "harness.analysis.stats",
    # files (atomic writes, locks, hashing) and caches keyed by content (harness.caches)
    "cache_root": "harness.io",
    "stable_hash": "harness.io",
    "atomic_write": "harness.io",
    "atomic_dir": "harness.io",
    "replace_dir": "harness.io",
    "write_json": "harness.io",
    "exclusive": "harness.io",
    "file_digest": "harness.caches",
    "sha256_file": "harness.caches",
    "directory_digest": "harness.caches",
    "documents_identity": "harness.caches",
    "entry_lock": "harness.caches",
    "verified_entry": "harness.caches",
    "write_manifest": "harness.caches",
    "discard_entry": "harness.caches",
    # calling remote APIs
    "RetryPolicy": "harness.retry",
    "Retryable": "harness.retry",
    "classify_failure": "harness.retry",
    "describe_failure": "harness.retry",
    # the Hugging Face hub: models by hub id, dataset files (huggingface_hub imported on use)
    "HubSnapshot": "harness.hub",
    "hub_file": "harness.hub",
    "hub_snapshot": "harness.hub",
    "hub_unreachable": "harness.hub",
    "parse_hub_id": "harness.hub",
}
_RENAMED = {"classify_failure": "classify", "describe_failure": "describe"}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and IDEs; at runtime the names load on first use
    from harness.analysis.stats import query_set_statistics
    from harness.api import evaluate, train
    from harness.caches import (
        directory_digest,
        discard_entry,
        documents_identity,
        entry_lock,
        file_digest,
        sha256_file,
        verified_entry,
        write_manifest,
    )
    from harness.dataset import Dataset, DirectoryDataset
    from harness.errors import HarnessError, KeptWork
    from harness.executors import Executor, Limiter, LocalExecutor
    from harness.graph import EntityLinker, Hop, RelationPath, Schema, normalize_name, reach
    from harness.hub import HubSnapshot, hub_file, hub_snapshot, hub_unreachable, parse_hub_id
    from harness.io import atomic_dir, atomic_write, cache_root, exclusive, replace_dir, stable_hash, write_json
    from harness.metrics import Metric
    from harness.options import DocumentOptions, Options, parse_options
    from harness.plugins import lookup
    from harness.plugins.commands import lazy_command
    from harness.plugins.executors import executor_from_options, executor_options, make_executor
    from harness.plugins.hookspecs import Register, hookimpl, hookspec
    from harness.queries import Query, QuerySet, load_stark_layout, read_stark_csv, write_stark_csv
    from harness.retriever import (
        BuildContext,
        HealthCheck,
        ProgressTask,
        Ranking,
        Reranker,
        Retriever,
        TrainContext,
    )
    from harness.retry import Retryable, RetryPolicy
    from harness.retry import classify as classify_failure
    from harness.retry import describe as describe_failure
    from harness.run.outcome import RunOutcome
    from harness.run.resolve import load_dataset
    from harness.skb import SKB, EdgeType, compact_text, row_offsets, sort_edges
    from harness.training import TrainingInfo
    from harness.training.loop import Epoch, EpochLoop
