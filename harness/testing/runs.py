"""Runs for tests: a retriever on a dataset through the real resolver and runner, the outcome
back; the registry the plugins' presets make and what a row records for an entry; the metrics
the harness computes for rankings; the ``harness`` command, in this process.

:func:`run` is the one place the kit starts a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np
from click.testing import CliRunner, Result

from harness.metrics import evaluate, parse_metrics
from harness.plugins import PluginManager
from harness.plugins.metric_families import BUILTIN_METRICS
from harness.queries import Query, sample
from harness.run import Registry, Runner, RunOutcome, load_registry, parse_registry, resolve
from harness.run.scoring import hit_matrix
from harness.testing.components import Components, plugin_manager

if TYPE_CHECKING:
    from harness.retriever import Ranking, Retriever

#: the registry entry :func:`run_retriever` runs the retriever under test as
UNDER_TEST = "under-test"


def registry(*plugins: object, path: str | os.PathLike[str] | None = None, entry_points: bool = False) -> Registry:
    """The registry a run resolves names in: the presets of ``plugins`` (modules or objects
    with hooks, as for :func:`plugin_manager`; a :class:`PluginManager` is used as it is), with
    the registry file ``path`` on top (else ``$HARNESS_REGISTRY``, else ``./registry.yaml``)."""
    return load_registry(path, plugins=_manager(plugins, entry_points))


def recorded_params(name: str, *plugins: object, dataset: str = "tiny", entry_points: bool = False) -> dict[str, Any]:
    """Every parameter a row records for the retriever entry ``name`` of the presets of
    ``plugins`` (its ``Options`` filled in), as ``harness run -r NAME`` resolves it."""
    manager = _manager(plugins, entry_points)
    spec = resolve(registry(manager), manager, name, dataset, "test", 3, ["hit@1"])
    return dict(spec.main.info.params)


def run(
    retriever: str,
    dataset: str = "tiny",
    split: str = "test",
    *,
    plugins: PluginManager | None = None,
    registry: Registry | str | os.PathLike[str] | Mapping[str, Any] | None = None,
    k: int = 3,
    metrics: Sequence[str] | None = ("hit@1", "mrr"),
    output_dir: str | os.PathLike[str] = "runs",
    cache_dir: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    sample: float | None = None,
    seed: int = 0,
    dataset_params: dict[str, Any] | None = None,
    retriever_params: dict[str, Any] | None = None,
    **runner_options: Any,
) -> RunOutcome:
    """Run the retriever ``retriever`` (a registry entry or a plugin's component name) on
    ``dataset``/``split`` as ``harness run`` does, and return the outcome: ``.row`` (the
    leaderboard row), ``.run_dir`` (its files), ``.notes`` (what the runner healed), ``.spec``.

    ``plugins``: the plugin manager (default: :func:`plugin_manager` with the installed plugins,
    so the ``tiny`` datasets and every installed component). ``registry``: a registry, a registry
    file, or a mapping in the registry file's format (``{"retrievers": {...}}``) used alone;
    by default the presets of ``plugins`` with ``./registry.yaml`` on top. The cache is
    ``$HARNESS_CACHE`` unless ``cache_dir`` is given. ``runner_options``: the runner's other
    settings (``fresh``, ``batch_size``, ``executor``, ``devices``, ``allow_training``, ...)."""
    manager = plugins if plugins is not None else plugin_manager(entry_points=True)
    if isinstance(registry, Mapping):
        found = parse_registry(json.dumps(registry), "<harness.testing>")
    elif registry is None or isinstance(registry, str | os.PathLike):
        found = load_registry(registry, manager)
    else:
        found = registry
    runner = Runner(manager, output_dir=output_dir, device=device, cache_dir=cache_dir, **runner_options)
    spec = resolve(
        found,
        manager,
        retriever,
        dataset,
        split,
        k,
        None if metrics is None else list(metrics),
        sample_fraction=sample,
        seed=seed,
        dataset_params=dataset_params,
        retriever_params=retriever_params,
    )
    return runner.run(spec)


def run_retriever(
    retriever: type[Retriever],
    params: dict[str, Any] | None,
    tmp_path: str | os.PathLike[str],
    *,
    k: int = 3,
    also: Iterable[type[Retriever]] = (),
    presets: dict[str, dict[str, Any]] | None = None,
    plugins: Iterable[object] = (),
    dataset: str = "tiny",
    split: str = "test",
    metrics: Sequence[str] = ("hit@1", "mrr"),
    fresh: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    allow_training: bool = True,
    seed: int = 0,
    **options: Any,
) -> RunOutcome:
    """One run of the retriever class ``retriever`` with ``params`` (as the registry entry
    ``under-test``) through the real resolver and runner; returns the outcome (``.row`` is the
    leaderboard row, ``.run_dir`` its directory, ``.notes`` what the runner healed). ``also``
    registers retrievers it uses; ``presets`` adds registry entries by name
    (``{"first": {"plugin": "bm25", "params": {...}}}``); ``plugins`` registers further plugins
    (another dataset, say). Only these are loaded, no installed plugin. Outputs live under
    ``tmp_path``, and so does the cache unless ``cache_dir`` is given. A trained retriever
    trains first (on ``tiny-train``'s train split), unless ``allow_training`` is false: then its
    checkpoint must be cached. ``options``: the other settings of :func:`run`."""
    tmp = Path(tmp_path)
    manager = plugin_manager(Components([retriever, *also]), *plugins)
    entries = {UNDER_TEST: {"plugin": retriever.name, "params": dict(params or {})}, **(presets or {})}
    return run(
        UNDER_TEST,
        dataset,
        split,
        plugins=manager,
        registry={"retrievers": entries},
        k=k,
        metrics=metrics,
        output_dir=tmp / "runs",
        cache_dir=cache_dir or tmp / "cache",
        seed=seed,
        fresh=fresh,
        allow_training=allow_training,
        **options,
    )


def score(
    rankings: Sequence[Ranking | np.ndarray | Sequence[int]],
    answers: Sequence[Sequence[int]],
    metrics: str | Sequence[str] = ("hit@1", "mrr"),
    candidates: Sequence[int] | np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The per-query values of ``metrics`` (``"hit@1,mrr"`` or a list) that a run computes for
    ``rankings`` (rankings or id arrays, one per query) against ``answers``: through the same
    hit matrix and metric definitions (trec_eval's and STaRK's). Ids outside ``candidates``
    (when given) are dropped from rankings and answers alike, as STaRK's evaluator does."""
    ids: list[Any] = [getattr(ranking, "ids", ranking) for ranking in rankings]  # id arrays or sequences
    mask = None
    if candidates is not None:
        candidate_ids = np.asarray(candidates, dtype=np.int64)
        mask = np.zeros(int(candidate_ids.max(initial=-1)) + 1, dtype=bool)
        mask[candidate_ids] = True
    hits, n_relevant = hit_matrix(ids, [list(a) for a in answers], mask)
    families = {m.family: m for m in BUILTIN_METRICS}
    return evaluate(parse_metrics(metrics, families), hits, n_relevant)


def sample_queries(queries: Sequence[Query], fraction: float, seed: int = 0) -> list[Query]:
    """The queries a run with ``--sample FRACTION --seed SEED`` evaluates, in their order."""
    return sample(queries, fraction, seed)


def run_concurrently(script: str, processes: int = 2, timeout: float = 120) -> list[str]:
    """Run the Python ``script`` in ``processes`` interpreters at once (to test what they share: a
    cache entry both build, a lock); each must exit 0. Their standard outputs, in order."""
    children = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=timeout)
        assert child.returncode == 0, err
        outputs.append(out)
    return outputs


def invoke(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
    catch_exceptions: bool = True,
) -> Result:
    """Run the ``harness`` command with ``args`` in this process, as installed (its console
    script's entry point), under click's test runner; returns its result (``exit_code``,
    ``stdout``, ``stderr``, ``output``). Plugins are those of :func:`installed_plugins`' manager
    as it is when the command starts; ``env`` sets (or with None unsets) environment variables
    for the call."""
    main = _console_script()

    @click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
    @click.argument("argv", nargs=-1, type=click.UNPROCESSED)
    def command(argv: tuple[str, ...]) -> None:
        main(list(argv))

    return CliRunner().invoke(command, list(args), env=env, input=input, catch_exceptions=catch_exceptions)


def _console_script() -> Any:
    """The ``harness`` command's entry point (``[project.scripts]``), loaded."""
    found = [e for e in entry_points(group="console_scripts", name="harness") if e.value.startswith("harness.")]
    if not found:
        raise RuntimeError("the `harness` command is not installed (pip install -e .)")
    return found[0].load()


def _manager(plugins: Sequence[object], entry_points: bool) -> PluginManager:
    if len(plugins) == 1 and isinstance(plugins[0], PluginManager):
        return plugins[0]
    return plugin_manager(*plugins, entry_points=entry_points)
