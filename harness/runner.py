"""Running a retriever on a dataset split: resolve, build, search, evaluate, record.

A run lives in its own directory, named by the hash of its configuration::

    results.jsonl    one line per query as it completes (the resume log)
    build.json       index build time
    config.json      the configuration its name hashes
    per_query.jsonl  per-query metrics, written at the end
    run.trec         the rankings as a TREC run file
    row.json         the leaderboard row

Re-running the same configuration resumes: queries already in ``results.jsonl`` are not
searched again, and a line cut short by an interruption is discarded.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

import harness
from harness.dataset import Dataset
from harness.errors import HarnessError
from harness.io import atomic_write, exclusive, leaderboard_lock, stable_hash, write_json
from harness.leaderboard import ComponentInfo, Hardware, Latency, LeaderboardRow, Versions, write_row
from harness.metrics import DEFAULT_METRICS, METRICS_VERSION, evaluate, hit_matrix, means, parse_metrics
from harness.plugins import Components, PluginManager
from harness.queries import Query, sample
from harness.registry import Condition, DatasetEntry, Registry, RetrieverEntry
from harness.retriever import BuildContext, ProgressFactory, ProgressTask, Ranking, Reranker, Retriever
from harness.secrets import check_no_secrets, redacted
from harness.skb import SKB
from harness.trec import write_qrels, write_run


@dataclass
class RunSpec:
    """A fully resolved run: every name looked up, every default filled in."""

    retriever: str
    retriever_entry: RetrieverEntry
    dataset: str
    dataset_entry: DatasetEntry
    split: str
    k: int
    metrics: list[str]
    first_stage: str | None = None
    first_stage_entry: RetrieverEntry | None = None
    sample: float | None = None
    seed: int = 0
    condition: Condition | None = None
    #: default metrics left out because their cut-off is deeper than the ranking can be
    dropped_metrics: list[str] = field(default_factory=list)

    def describe(self) -> str:
        chain = f"{self.first_stage} → {self.retriever}" if self.first_stage else self.retriever
        extra = f", {self.sample:.0%} sample" if self.sample else ""
        return f"{chain} on {self.dataset}/{self.split} (k={self.k}{extra})"


@dataclass
class CheckResult:
    metric: str
    expected: float
    actual: float | None
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.actual is not None and abs(self.actual - self.expected) <= self.tolerance + 1e-12


@dataclass
class RunOutcome:
    spec: RunSpec
    row: LeaderboardRow
    run_dir: Path
    row_path: Path | None
    resumed_queries: int
    checks: list[CheckResult] = field(default_factory=list)
    #: What the runner healed and the user should know (ids dropped from rankings, ...).
    notes: list[str] = field(default_factory=list)


def _resolve_entry(
    kind: str, entries: Mapping[str, Any], entry_type: type[Any], components: Components, name: str
) -> Any:
    """A registry entry by name, else a plugin component of that name with default parameters."""
    if name in entries:
        components.get(kind, entries[name].plugin)  # its plugin must be installed
        return entries[name]
    plugins = components.by_kind.get(kind, {})
    if name in plugins:
        return entry_type(plugin=name)
    known = ", ".join(sorted(set(entries) | set(plugins))) or "none"
    raise HarnessError(f"unknown {kind} {name!r}; known: {known}{components.failure_hint()}")


def resolve_retriever(registry: Registry, components: Components, name: str) -> RetrieverEntry:
    return _resolve_entry("retriever", registry.retrievers, RetrieverEntry, components, name)


def resolve_dataset(registry: Registry, components: Components, name: str) -> DatasetEntry:
    return _resolve_entry("dataset", registry.datasets, DatasetEntry, components, name)


def resolve(
    registry: Registry,
    components: Components,
    retriever: str | None = None,
    dataset: str | None = None,
    split: str | None = None,
    k: int | None = None,
    metrics: Sequence[str] | None = None,
    sample_fraction: float | None = None,
    seed: int = 0,
    dataset_params: dict[str, Any] | None = None,
) -> RunSpec:
    """Fill in defaults from the registry and check every name exists. ``dataset_params``
    override the dataset entry's parameters (``--data-dir`` sets ``data_dir``)."""
    retriever = retriever or registry.defaults.retriever
    dataset = dataset or registry.defaults.dataset
    if retriever is None:
        raise HarnessError("no retriever given and the registry names no default (--retriever NAME)")
    if dataset is None:
        raise HarnessError("no dataset given and the registry names no default (--dataset NAME)")
    split = split or registry.defaults.split
    condition = registry.condition_for(retriever, dataset, split)
    k = k if k is not None else (condition.k if condition else registry.defaults.k)
    if k <= 0:
        raise HarnessError(f"k must be a positive integer, got {k}")
    if metrics is not None and not list(metrics):
        raise HarnessError("no metrics requested: give --metrics NAME[,NAME…], or leave it out for the defaults")
    if sample_fraction is not None and not 0 < sample_fraction <= 1:
        raise HarnessError(f"--sample must be a fraction in (0, 1], got {sample_fraction}")
    metric_names = list(metrics or registry.defaults.metrics or DEFAULT_METRICS)
    parsed = parse_metrics(metric_names, components.by_kind.get("metric", {}))  # fail early on typos
    if sample_fraction is None and condition is not None:
        sample_fraction = condition.sample
    entry = resolve_retriever(registry, components, retriever)
    first_stage_entry = None
    plugin = components.get("retriever", entry.plugin)
    depth, why = k, f"k={k}"
    if issubclass(plugin, Reranker):
        if entry.first_stage is None:
            raise HarnessError(f"retriever {retriever!r} is a reranker; give it a first_stage in the registry")
        first_stage_entry = resolve_retriever(registry, components, entry.first_stage)
        if entry.candidates < k:  # a reranker orders its first stage's candidates, no more
            depth, why = entry.candidates, f"{retriever!r} reranks {entry.candidates} candidates"
    deeper = [m.name for m in parsed if m.k is not None and m.k > depth]
    dropped: list[str] = []
    if deeper and metrics is None:
        # the default set: leave out what a ranking this deep cannot measure, rather than report it
        metric_names, dropped = [m.name for m in parsed if m.name not in deeper], deeper
    elif deeper:
        raise HarnessError(
            f"{', '.join(deeper)}: a cut-off deeper than the ranking ({why}) cannot be measured; "
            + (
                f"run with --k {max(m.k or 0 for m in parsed)} or drop {'it' if len(deeper) == 1 else 'them'}"
                if depth == k
                else f"drop {'it' if len(deeper) == 1 else 'them'} or rerank more candidates"
            )
        )
    return RunSpec(
        retriever=retriever,
        retriever_entry=entry,
        dataset=dataset,
        dataset_entry=_with_params(resolve_dataset(registry, components, dataset), dataset_params),
        split=split,
        k=k,
        metrics=metric_names,
        first_stage=entry.first_stage if first_stage_entry else None,
        first_stage_entry=first_stage_entry,
        sample=sample_fraction,
        seed=seed,
        condition=condition,
        dropped_metrics=dropped,
    )


def _with_params(entry: DatasetEntry, params: dict[str, Any] | None) -> DatasetEntry:
    if not params:
        return entry
    return entry.model_copy(update={"params": {**entry.params, **params}})


def load_dataset(name: str, data_dir: str | None = None, registry_path: str | None = None) -> Dataset:
    """The dataset plugin instance for a registry (or plugin) name, with ``data_dir`` if given:
    what commands use to reach a dataset's SKB and queries outside a run."""
    from harness.plugins import get_plugin_manager
    from harness.registry import load_registry

    components = get_plugin_manager().components
    entry = _with_params(
        resolve_dataset(load_registry(registry_path), components, name), {"data_dir": data_dir} if data_dir else None
    )
    return _construct(components.get("dataset", entry.plugin), entry.params, f"dataset {name!r}")


def dataset_from_row(info: ComponentInfo, data_dir: str | None = None) -> Dataset:
    """The dataset a leaderboard row was evaluated on, rebuilt from its plugin and parameters
    (``data_dir`` overrides where the files are)."""
    from harness.plugins import get_plugin_manager

    params = {**info.params, **({"data_dir": data_dir} if data_dir else {})}
    cls = get_plugin_manager().components.get("dataset", info.plugin)
    return _construct(cls, params, f"dataset {info.name!r}")


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``."""
    if device not in ("auto", "cpu", "cuda"):
        raise HarnessError(f"--device must be auto, cpu or cuda, not {device!r}")
    if device == "cpu":
        return device
    try:
        import torch

        available = torch.cuda.is_available()
    except ImportError:
        available = False
    if device == "cuda" and not available:
        raise HarnessError("--device cuda: no CUDA device is available (torch missing or no GPU)")
    return "cuda" if available else "cpu"


def check_answers(skb: SKB, queries: Sequence[Query], where: str) -> int:
    """Refuse answer ids that are not nodes; return how many queries have no candidate answer."""
    bad = [(q.id, a) for q in queries for a in q.answer_ids if not 0 <= a < skb.num_nodes]
    if bad:
        shown = ", ".join(f"query {qid}: {aid}" for qid, aid in bad[:5])
        raise HarnessError(f"{where}: {len(bad)} answer ids are not nodes of SKB {skb.name!r} ({shown})")
    return sum(1 for q in queries if not skb.is_candidate(np.asarray(q.answer_ids)).any())


class Runner:
    """Executes :class:`RunSpec`s; holds loaded datasets so ``--all`` loads each once."""

    def __init__(
        self,
        plugins: PluginManager,
        output_dir: str | Path = "runs",
        leaderboard_dir: str | Path | None = None,
        device: str = "auto",
        batch_size: int | None = None,
        progress: ProgressFactory | None = None,
        cache_dir: str | Path | None = None,
        fresh: bool = False,
        registry: Registry | None = None,
    ) -> None:
        from harness.io import cache_root

        self.plugins = plugins
        self.output_dir = Path(output_dir)
        self.leaderboard_dir = Path(leaderboard_dir) if leaderboard_dir is not None else None
        if self.leaderboard_dir is not None and (self.leaderboard_dir / "CHANGELOG.md").exists():
            raise HarnessError(
                f"{self.leaderboard_dir} is a curated leaderboard (it has a CHANGELOG.md): it changes only through "
                f"`harness submit RUN_DIR -o run.tar.gz` and `harness leaderboard merge run.tar.gz --into "
                f"{self.leaderboard_dir}`"
            )
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.progress: ProgressFactory = progress or (lambda description, total: ProgressTask())
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.fresh = fresh
        self.registry = registry or Registry()
        self._datasets: dict[str, Dataset] = {}
        if batch_size is not None and batch_size <= 0:
            raise HarnessError(f"--batch-size must be positive, got {batch_size}")

    # -- components ------------------------------------------------------------------
    def dataset(self, name: str, entry: DatasetEntry) -> Dataset:
        if name not in self._datasets:
            cls = self.plugins.components.get("dataset", entry.plugin)
            self._datasets[name] = _construct(cls, entry.params, f"dataset {name!r}")
        return self._datasets[name]

    def _component_info(self, kind: str, name: str, plugin: str, params: dict[str, Any]) -> ComponentInfo:
        components = self.plugins.components
        cls = components.get(kind, plugin)
        owner = components.owner[(kind, plugin)]
        check_no_secrets(params, f"{kind} {name!r}")
        full = effective_params(cls, params)
        info = ComponentInfo(
            name=name,
            plugin=plugin,
            params=redacted(full),  # what is recorded: URL credentials as ***
            version=str(getattr(cls, "version", "0")),
            package=self.plugins.distributions.get(owner),
        )
        if info.params != full:
            info._runtime_params = full
        return info

    # -- running ---------------------------------------------------------------------
    def run(self, spec: RunSpec) -> RunOutcome:
        started = time.perf_counter()
        dataset = self.dataset(spec.dataset, spec.dataset_entry)
        queries = dataset.load_queries().split(spec.split)
        if spec.sample:
            queries = sample(queries, spec.sample, spec.seed)
        if not queries:
            raise HarnessError(f"dataset {spec.dataset!r}, split {spec.split!r} has no queries")
        skb = dataset.load_skb()
        no_candidate_answer = check_answers(skb, queries, f"dataset {spec.dataset!r}, split {spec.split!r}")

        retriever_info = self._component_info(
            "retriever", spec.retriever, spec.retriever_entry.plugin, spec.retriever_entry.params
        )
        first_info = None
        if spec.first_stage and spec.first_stage_entry:
            first_info = self._component_info(
                "retriever", spec.first_stage, spec.first_stage_entry.plugin, spec.first_stage_entry.params
            )
        dataset_info = self._component_info(
            "dataset", spec.dataset, spec.dataset_entry.plugin, spec.dataset_entry.params
        )
        uses = self._uses(retriever_info)
        config = {
            "retriever": retriever_info.model_dump(),
            "first_stage": first_info.model_dump() if first_info else None,
            "uses": [info.model_dump() for info in uses],
            "candidates": spec.retriever_entry.candidates if first_info else None,
            "dataset": dataset_info.model_dump(),
            "skb": skb.fingerprint,
            # the evaluated queries themselves: an edited query must never reuse old results
            "queries": stable_hash([[q.id, q.text, list(q.answer_ids)] for q in queries]),
            "split": spec.split,
            "sample": spec.sample,
            "seed": spec.seed if spec.sample else None,
            "k": spec.k,
            "metrics_version": METRICS_VERSION,
        }
        config_hash = stable_hash(config)
        run_dir = self.output_dir / f"{spec.dataset}-{spec.split}-{spec.retriever}-{config_hash}"
        run_dir.mkdir(parents=True, exist_ok=True)
        # One process per configuration: a second run of it waits, then resumes from the first's
        # results instead of searching the same queries into the same log.
        with exclusive(run_dir / ".lock", f"another process is running {run_dir.name}; waiting for it"):
            write_json(run_dir / "config.json", config)
            results_path = run_dir / "results.jsonl"
            if self.fresh and results_path.exists():
                results_path.unlink()
            notes: list[str] = []
            done = _read_results(results_path, {q.id for q in queries}, notes)
            pending = [q for q in queries if q.id not in done]

            build_path = run_dir / "build.json"
            build_seconds = _read_build_seconds(build_path)
            retriever_obj: Retriever | None = None
            usage: dict[str, Any] = {}
            if spec.dropped_metrics:
                notes.append(f"left out {', '.join(spec.dropped_metrics)}: deeper than the ranking can be")
            if pending:
                context = BuildContext(cache_dir=self.cache_dir, device=self.device, progress=self.progress)
                context.build_retriever = lambda name: self._build(self._info_for(name), skb, dataset, context)
                build_started = time.perf_counter()
                first_obj = None
                if first_info and spec.first_stage_entry:
                    first_obj = self._build(first_info, skb, dataset, context)
                retriever_obj = self._build(retriever_info, skb, dataset, context)
                build_seconds = time.perf_counter() - build_started
                write_json(build_path, {"seconds": build_seconds})
                notes += self._search(spec, retriever_obj, first_obj, pending, results_path, candidate_mask(skb))
                usage = retriever_obj.usage()
                if first_obj is not None:
                    for key, value in first_obj.usage().items():
                        usage.setdefault(f"first_stage.{key}", value)
                done = _read_results(results_path, {q.id for q in queries})

            missing = [q.id for q in queries if q.id not in done]
            if missing:
                raise HarnessError(f"run {run_dir}: {len(missing)} queries have no results (first: {missing[:5]})")
            ordered = [done[q.id] for q in queries]
            metric_objs = parse_metrics(spec.metrics, self.plugins.components.by_kind["metric"])
            mask = candidate_mask(skb)
            hits, n_relevant = hit_matrix(
                [np.asarray(r["ids"], dtype=np.int64) for r in ordered], [q.answer_ids for q in queries], mask
            )
            per_query = evaluate(metric_objs, hits, n_relevant)
            gold = [
                (
                    sorted({int(a) for a in q.answer_ids if mask[a]}),
                    sorted({int(a) for a in q.answer_ids if not mask[a]}),
                )
                for q in queries
            ]
            self._write_outputs(run_dir, spec, queries, ordered, per_query, gold)

            latencies = np.asarray([r["latency_ms"] for r in ordered], dtype=np.float64)
            regime = (retriever_obj or self.plugins.components.get("retriever", spec.retriever_entry.plugin)).regime
            row = LeaderboardRow(
                retriever=retriever_info,
                first_stage=first_info,
                uses=uses,
                dataset=dataset_info,
                dataset_fingerprint=skb.fingerprint,
                split=spec.split,
                num_queries=len(queries),
                queries_without_candidate_answers=no_candidate_answer,
                sample=spec.sample,
                k=spec.k,
                metrics=means(per_query),
                latency=Latency(
                    mean_ms=float(latencies.mean()),
                    p50_ms=float(np.percentile(latencies, 50)),
                    p95_ms=float(np.percentile(latencies, 95)),
                    batch_size=int(ordered[0].get("batch_size", 1)),
                ),
                index_build_seconds=round(build_seconds, 4),
                total_seconds=round(time.perf_counter() - started, 4),
                regime=regime,
                usage=usage,
                hardware=hardware(self.device),
                versions=versions(),
                config_hash=config_hash,
                timestamp=datetime.now(UTC),
                run_dir=os.path.relpath(run_dir) if not run_dir.is_absolute() else str(run_dir),
            )
            # The run directory is self-contained (row, configuration, per-query results, TREC run):
            # what `harness submit` bundles and `harness leaderboard validate` recomputes.
            write_json(run_dir / "row.json", row.model_dump(mode="json"))
            path = None
            if self.leaderboard_dir is not None:
                # the lock `harness leaderboard merge` takes: a merge never swaps in a copy without this row
                with exclusive(leaderboard_lock(self.leaderboard_dir), "waiting for a merge into the leaderboard"):
                    path = write_row(self.leaderboard_dir, row)
            checks = []
            if spec.condition is not None:
                for metric, expected in spec.condition.expected.items():
                    checks.append(CheckResult(metric, expected, row.metrics.get(metric), spec.condition.tolerance))
            return RunOutcome(spec, row, run_dir, path, len(queries) - len(pending), checks, notes)

    def _info_for(self, name: str) -> ComponentInfo:
        entry = resolve_retriever(self.registry, self.plugins.components, name)
        return self._component_info("retriever", name, entry.plugin, entry.params)

    def _uses(self, info: ComponentInfo, seen: tuple[str, ...] = ()) -> list[ComponentInfo]:
        """The retrievers a composite builds on, recursively, resolved through the registry."""
        cls = self.plugins.components.get("retriever", info.plugin)
        names = _construct(cls, info.runtime_params, f"retriever {info.name!r}").uses()
        found: list[ComponentInfo] = []
        for name in names:
            if name in seen or name == info.name:
                raise HarnessError(f"retriever {info.name!r} uses {name!r} in a cycle")
            used = self._info_for(name)
            found += [used, *self._uses(used, (*seen, info.name))]
        return found

    def _build(self, info: ComponentInfo, skb: SKB, dataset: Dataset, context: BuildContext) -> Retriever:
        cls = self.plugins.components.get("retriever", info.plugin)
        retriever: Retriever = _construct(cls, info.runtime_params, f"retriever {info.name!r}")
        try:
            if retriever.regime == "trained":
                queries = dataset.load_queries()
                if "train" not in queries.split_names:
                    raise HarnessError(f"retriever {info.name!r} needs a train split; {dataset.name!r} has none")
                retriever.fit(skb, queries.split("train"), context)
            retriever.build(skb, context)
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(f"retriever {info.name!r} failed to build: {type(exc).__name__}: {exc}") from exc
        return retriever

    def _search(
        self,
        spec: RunSpec,
        retriever: Retriever,
        first_stage: Retriever | None,
        pending: list[Query],
        results_path: Path,
        is_candidate: np.ndarray,
    ) -> list[str]:
        batch_size = self.batch_size or (first_stage or retriever).batch_size
        task = self.progress(f"search {spec.retriever}", len(pending))
        dropped = {"non-candidate": 0, "repeated": 0}
        with results_path.open("a", encoding="utf-8") as log:
            for start in range(0, len(pending), batch_size):
                batch = pending[start : start + batch_size]
                began = time.perf_counter()
                try:
                    if first_stage is not None and isinstance(retriever, Reranker):
                        depth = spec.retriever_entry.candidates
                        first = _check_rankings(spec.first_stage or "", batch, first_stage.search(batch, depth), depth)
                        candidates = [
                            clean_ranking(spec.first_stage or "", q, r, is_candidate, dropped)
                            for q, r in zip(batch, first, strict=True)
                        ]
                        rankings = retriever.rerank(batch, candidates, spec.k)
                    else:
                        rankings = retriever.search(batch, spec.k)
                except HarnessError:
                    raise
                except Exception as exc:
                    raise HarnessError(
                        f"retriever {spec.retriever!r} failed on queries {[q.id for q in batch][:5]}: "
                        f"{type(exc).__name__}: {exc}. Completed queries are kept in {results_path}; "
                        "run the same command again to resume."
                    ) from exc
                rankings = _check_rankings(spec.retriever, batch, rankings, spec.k)
                per_query_ms = 1000 * (time.perf_counter() - began) / len(batch)
                for query, ranking in zip(batch, rankings, strict=True):
                    ranking = clean_ranking(spec.retriever, query, ranking, is_candidate, dropped).top(spec.k)
                    record = {
                        "qid": query.id,
                        "ids": ranking.ids.tolist(),
                        # full precision: rounding would turn distinct scores into ties
                        "scores": ranking.scores.tolist(),
                        "latency_ms": per_query_ms,
                        "batch_size": len(batch),
                    }
                    log.write(json.dumps(record) + "\n")
                log.flush()
                os.fsync(log.fileno())
                task.advance(len(batch))
        return [
            f"dropped {count} {what} ids from the rankings (STaRK's evaluator ignores them)"
            for what, count in dropped.items()
            if count
        ]

    def _write_outputs(
        self,
        run_dir: Path,
        spec: RunSpec,
        queries: list[Query],
        ordered: list[dict[str, Any]],
        per_query: dict[str, np.ndarray],
        qrels: list[tuple[list[int], list[int]]],
    ) -> None:
        with atomic_write(run_dir / "per_query.jsonl") as out:
            for i, query in enumerate(queries):
                values = {name: float(v[i]) for name, v in per_query.items()}
                out.write(
                    json.dumps({"qid": query.id, "latency_ms": ordered[i]["latency_ms"], "metrics": values}) + "\n"
                )
        with atomic_write(run_dir / "run.trec") as out:
            for query, result in zip(queries, ordered, strict=True):
                write_run(out, str(query.id), map(str, result["ids"]), result["scores"], spec.retriever)
        # The gold answers as trec_eval reads them — candidates relevant (each once), other
        # answers judged not relevant so that a query without a candidate answer still counts —
        # so that `trec_eval -c qrels.trec run.trec` reproduces the row from the run directory.
        with atomic_write(run_dir / "qrels.trec") as out:
            write_qrels(
                out,
                [
                    (str(q.id), map(str, relevant), map(str, other))
                    for q, (relevant, other) in zip(queries, qrels, strict=True)
                ],
            )


def effective_params(cls: type[Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` plus the defaults of the component's constructor: the configuration that
    actually runs, so a plugin release that changes a default never reuses old results."""
    try:
        bound = inspect.signature(cls).bind_partial(**params)
    except (TypeError, ValueError):
        return dict(params)  # bad parameters are reported when the component is constructed
    bound.apply_defaults()
    full: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        kind = bound.signature.parameters[key].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            full.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            full[key] = list(value) if isinstance(value, tuple) else value
    return full


def _construct(cls: type[Any], params: dict[str, Any], what: str) -> Any:
    try:
        return cls(**params)
    except TypeError as exc:
        raise HarnessError(f"{what}: bad parameters {params}: {exc}") from exc


def candidate_mask(skb: SKB) -> np.ndarray:
    """Boolean array over node ids: True for the nodes a retriever may return."""
    mask = np.zeros(skb.num_nodes, dtype=bool)
    mask[skb.candidate_ids] = True
    return mask


def _check_rankings(name: str, batch: Sequence[Query], rankings: Any, k: int) -> list[Ranking]:
    if not isinstance(rankings, Sequence) or len(rankings) != len(batch):
        count = len(rankings) if isinstance(rankings, Sequence) else type(rankings).__name__
        raise HarnessError(f"retriever {name!r} returned {count} rankings for {len(batch)} queries")
    for query, ranking in zip(batch, rankings, strict=True):
        if not isinstance(ranking, Ranking):
            raise HarnessError(f"retriever {name!r} returned {type(ranking).__name__}, not a Ranking")
        if len(ranking.ids) > k:
            raise HarnessError(
                f"retriever {name!r}, query {query.id}: {len(ranking.ids)} results, asked for at most {k}"
            )
    return list(rankings)


#: The largest score magnitude a ranking may carry: 32-bit floats reach 3.4e38, and ties are
#: written one float32 step apart, so scores stay clear of the top of that range.
MAX_SCORE = 1e37


def clean_ranking(
    name: str, query: Query, ranking: Ranking, is_candidate: np.ndarray, dropped: dict[str, int]
) -> Ranking:
    """A retriever's ranking as the harness records it, or one clear error.

    The order is the retriever's, so its scores must be finite and never increase (equal
    scores keep the retriever's order: that is the tie rule everywhere in the harness). Ids
    must be nodes. Non-candidate ids and repeats are dropped here, counted in ``dropped``,
    so that the metrics, the per-query file and the TREC run all see the same list.
    """
    ids, scores = ranking.ids, ranking.scores
    where = f"retriever {name!r}, query {query.id}"
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        raise HarnessError(f"{where}: score {float(scores[bad[0]])!r} at rank {bad[0] + 1} is not a finite number")
    huge = np.flatnonzero(np.abs(scores) > MAX_SCORE)
    if len(huge):
        raise HarnessError(
            f"{where}: score {float(scores[huge[0]])!r} at rank {huge[0] + 1} is beyond ±{MAX_SCORE:g}: run files "
            "carry scores as 32-bit floats (trec_eval reads them so); leave out masked candidates instead"
        )
    rising = np.flatnonzero(np.diff(scores) > 0)
    if len(rising):
        i = int(rising[0])
        raise HarnessError(
            f"{where}: scores must not increase down a ranking (best first), but rank {i + 1} has "
            f"{float(scores[i])!r} and rank {i + 2} has {float(scores[i + 1])!r}"
        )
    outside = np.flatnonzero((ids < 0) | (ids >= len(is_candidate)))
    if len(outside):
        raise HarnessError(f"{where}: id {ids[outside[0]]} is not a node of the SKB (0..{len(is_candidate) - 1})")
    keep = is_candidate[ids]
    dropped["non-candidate"] += int((~keep).sum())
    _, first = np.unique(ids, return_index=True)
    unique = np.zeros(len(ids), dtype=bool)
    unique[first] = True
    dropped["repeated"] += int((keep & ~unique).sum())
    keep &= unique
    return ranking if keep.all() else Ranking(ids[keep], scores[keep])


def _read_build_seconds(path: Path) -> float:
    """The recorded index build time; a file cut short by an interruption counts as unknown (0)."""
    try:
        seconds = json.loads(path.read_text(encoding="utf-8"))["seconds"]
        return float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else 0.0
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def _valid_record(record: Any) -> bool:
    """One resume-log line as the runner writes it (anything else is not trusted)."""
    if not isinstance(record, dict) or not isinstance(record.get("qid"), int):
        return False
    ids, scores = record.get("ids"), record.get("scores")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return False
    if not isinstance(scores, list) or len(scores) != len(ids):
        return False
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) for v in scores):
        return False
    latency = record.get("latency_ms")
    return isinstance(latency, int | float) and not isinstance(latency, bool) and latency >= 0


def _read_results(path: Path, wanted: set[int], notes: list[str] | None = None) -> dict[int, dict[str, Any]]:
    """Completed queries from the resume log. The log is cut at the first line that is torn
    (an interruption) or not what the runner writes; what followed is searched again."""
    if not path.exists():
        return {}
    results: dict[int, dict[str, Any]] = {}
    good_bytes = 0
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            try:
                record = json.loads(raw)
            except ValueError:
                break
            if not _valid_record(record):
                break  # from here on the log is not the runner's: those queries are searched again
            qid = record["qid"]
            if qid in wanted:
                results[qid] = record
            good_bytes += len(raw)
    if good_bytes != path.stat().st_size:
        if notes is not None:
            notes.append(f"{path}: cut at byte {good_bytes} (a torn or foreign line); those queries run again")
        with path.open("r+b") as handle:
            handle.truncate(good_bytes)
    return results


def hardware(device: str) -> Hardware:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = None
    if device == "cuda":
        import torch

        gpu = torch.cuda.get_device_name(0)
    return Hardware(device=device, cpu=f"{cpu} ({os.cpu_count()} cores)", gpu=gpu)


def versions() -> Versions:
    try:
        import importlib.metadata

        torch_version: str | None = importlib.metadata.version("torch")
    except Exception:
        torch_version = None
    return Versions(
        python=platform.python_version(),
        harness=harness.__version__,
        metrics=METRICS_VERSION,
        torch=torch_version,
        numpy=np.__version__,
    )
