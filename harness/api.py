"""The library API: evaluate or train a retriever from Python, as ``harness run`` and
``harness train`` do from the command line (they are thin layers over these functions)::

    import harness

    outcome = harness.evaluate("bm25", "debian", "test")
    print(outcome.row.metrics["mrr"], outcome.run_dir)

    class Mine(harness.Retriever):          # defined in a notebook
        name = "mine"
        def build(self, skb, context): ...
        def search(self, queries, k, top_ranked=None): ...

    outcome = harness.evaluate(Mine(), "debian", "val", metrics=["hit@1", "mrr"])

Names resolve through the registry (the installed plugins' presets and the user's
``registry.yaml``), exactly as on the command line; a retriever or dataset object the caller
constructed is used as it is and recorded by its ``name`` and parameters. Every run writes its
run directory (resumable, the row in ``row.json``) under ``output_dir``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.dataset import Dataset
from harness.executors import Executor
from harness.plugins import PluginManager, get_plugin_manager
from harness.retriever import ProgressFactory, Retriever
from harness.run.registry import Registry, load_registry
from harness.run.resolve import RunSpec, resolve
from harness.run.runner import Runner, RunOutcome
from harness.run.seeds import run_seeds
from harness.training import TrainingInfo

__all__ = ["evaluate", "plan", "runner", "train"]


def plan(
    retriever: str | Retriever | None = None,
    dataset: str | Dataset | None = None,
    split: str | None = None,
    *,
    k: int | None = None,
    metrics: Sequence[str] | None = None,
    params: dict[str, Any] | None = None,
    sample: float | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    train_split: str = "train",
    registry: str | Path | Registry | None = None,
    plugins: PluginManager | None = None,
) -> RunSpec:
    """What :func:`evaluate` would run, resolved and checked, nothing built or read: every name
    looked up in the registry (defaults filled in from it), every component constructed with its
    validated parameters (``params`` override the retriever's, ``data_dir`` the dataset's)."""
    plugins = plugins or get_plugin_manager()
    found = registry if isinstance(registry, Registry) else load_registry(registry, plugins)
    return resolve(
        found,
        plugins,
        retriever=retriever,
        dataset=dataset,
        split=split,
        k=k,
        metrics=metrics,
        sample_fraction=sample,
        seed=seed,
        dataset_params={"data_dir": data_dir} if data_dir else None,
        train_split=train_split,
        retriever_params=params or None,
    )


def runner(
    *,
    output_dir: str | Path = "runs",
    device: str = "auto",
    batch_size: int | None = None,
    cache_dir: str | Path | None = None,
    fresh: bool = False,
    train_split: str = "train",
    validation_split: str | None = "val",
    allow_training: bool = True,
    executor: Executor | None = None,
    devices: Sequence[str] = (),
    progress: ProgressFactory | None = None,
    plugins: PluginManager | None = None,
) -> Runner:
    """A runner with these settings, to run several plans (datasets are loaded once)."""
    return Runner(
        plugins or get_plugin_manager(),
        output_dir=output_dir,
        device=device,
        batch_size=batch_size,
        progress=progress,
        cache_dir=cache_dir,
        fresh=fresh,
        train_split=train_split,
        validation_split=validation_split,
        allow_training=allow_training,
        executor=executor,
        devices=devices,
    )


def evaluate(
    retriever: str | Retriever | None = None,
    dataset: str | Dataset | None = None,
    split: str | None = None,
    *,
    k: int | None = None,
    metrics: Sequence[str] | None = None,
    params: dict[str, Any] | None = None,
    sample: float | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    output_dir: str | Path = "runs",
    device: str = "auto",
    batch_size: int | None = None,
    cache_dir: str | Path | None = None,
    fresh: bool = False,
    train_split: str = "train",
    validation_split: str | None = "val",
    allow_training: bool = True,
    executor: Executor | None = None,
    registry: str | Path | Registry | None = None,
    plugins: PluginManager | None = None,
    progress: ProgressFactory | None = None,
    seeds: Sequence[int] | None = None,
) -> RunOutcome:
    """Run ``retriever`` on ``dataset``'s ``split`` and score it: ``harness run`` as a function.

    ``retriever`` and ``dataset``: registry or plugin names (the registry's defaults when left
    out), or objects the caller constructed. A trained retriever trains first on
    ``train_split`` (early stopping on ``validation_split``) unless ``allow_training`` is false
    and no checkpoint exists. Returns the :class:`RunOutcome`: ``row`` (metrics, latency, cost,
    provenance), ``run_dir`` (per-query results, TREC run and qrels), ``checks`` against the
    registry's expected scores, ``notes`` on what was healed. Running it again resumes.

    ``seeds`` (two or more): train and evaluate once per training seed, and return one row with
    each metric's mean and spread over them (a sample keeps ``seed``)."""
    spec = plan(
        retriever,
        dataset,
        split,
        k=k,
        metrics=metrics,
        params=params,
        sample=sample,
        seed=seed,
        data_dir=data_dir,
        train_split=train_split,
        registry=registry,
        plugins=plugins,
    )
    runs = runner(
        output_dir=output_dir,
        device=device,
        batch_size=batch_size,
        cache_dir=cache_dir,
        fresh=fresh,
        train_split=train_split,
        validation_split=validation_split,
        allow_training=allow_training,
        executor=executor,
        progress=progress,
        plugins=plugins,
    )
    if seeds:
        return run_seeds(runs, spec, seeds)
    return runs.run(spec)


def train(
    retriever: str | Retriever,
    dataset: str | Dataset | None = None,
    *,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    device: str = "auto",
    cache_dir: str | Path | None = None,
    train_split: str = "train",
    validation_split: str | None = "val",
    executor: Executor | None = None,
    registry: str | Path | Registry | None = None,
    plugins: PluginManager | None = None,
    progress: ProgressFactory | None = None,
) -> dict[str, TrainingInfo]:
    """Train every trained retriever of ``retriever`` (itself, and those it uses) on
    ``train_split``, or find their checkpoints: ``harness train`` as a function. Returns what
    each trained on, by name; :func:`evaluate` then loads the same checkpoints."""
    spec = plan(
        retriever,
        dataset,
        None,
        params=params,
        seed=seed,
        data_dir=data_dir,
        train_split=train_split,
        registry=registry,
        plugins=plugins,
    )
    return runner(
        device=device,
        cache_dir=cache_dir,
        train_split=train_split,
        validation_split=validation_split,
        executor=executor,
        progress=progress,
        plugins=plugins,
    ).train(spec)
