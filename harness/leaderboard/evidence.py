"""What ``harness leaderboard validate`` checks beyond the metrics: the row's component health,
recomputed from its per-query details by the retriever's own counters, and a row over several
seeds, recomputed from each seed's run."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.io import stable_hash
from harness.leaderboard.bundles import RunEntry
from harness.leaderboard.reproduce import differences, spec_from_row
from harness.plugins import get_plugin_manager
from harness.retriever import Retriever
from harness.run.build import Builder
from harness.run.checks import candidate_mask
from harness.run.health import compare, summarize
from harness.run.record import LeaderboardRow
from harness.run.seeds import combine_rows, mean_per_query
from harness.trec import write_qrels


def after_metrics(
    row: LeaderboardRow,
    config: dict[str, Any],
    records: Sequence[dict[str, Any]],
    rankings: Sequence[np.ndarray],
    queries: Sequence[Any],
    skb: Any,
    directory: Path,
    result: Any,
) -> None:
    """What validation checks once the metrics recompute: the health, the qrels the run ships,
    whether the configuration is stale (into ``result``'s problems, checks and stale)."""
    mask = candidate_mask(skb)
    answers = [q.answer_ids for q in queries]
    result.problems += health_problems(row, records, rankings, answers, mask, result.checks)
    result.problems += qrels_problems(directory, queries, mask)
    result.stale = stale_reasons(row, config, skb, result.checks)


def qrels_problems(directory: Path, queries: Sequence[Any], is_candidate: np.ndarray) -> list[str]:
    """A run's ``qrels.trec``, when it ships one, must be the evaluated queries' answers as the
    runner writes them: ``trec_eval`` on the published files then gives the row's numbers."""
    path = directory / "qrels.trec"
    if not path.is_file():
        return []
    expected = io.StringIO()
    write_qrels(
        expected,
        [
            (
                str(q.id),
                [str(a) for a in sorted({int(a) for a in q.answer_ids}) if is_candidate[a]],
                [str(a) for a in sorted({int(a) for a in q.answer_ids}) if not is_candidate[a]],
            )
            for q in queries
        ],
    )
    try:
        shipped = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [f"qrels.trec is not readable: {exc}"]
    if shipped != expected.getvalue():
        return ["qrels.trec is not the evaluated queries' answers (trec_eval on it would not give the row's numbers)"]
    return []


def health_problems(
    row: LeaderboardRow,
    records: Sequence[dict[str, Any]],
    rankings: Sequence[np.ndarray],
    answers: Sequence[Sequence[int]],
    is_candidate: np.ndarray,
    notes: list[str],
) -> list[str]:
    """What the row's ``health`` says that its per-query details do not; a row without ``health``
    (written before it existed) passes only when its details show no component that never ran.
    Without the retriever's plugin here the counters cannot be recomputed: ``notes`` says so."""
    missing = _missing_plugins(row)
    if ("retriever", row.retriever.plugin) in missing:
        notes.append(f"health not recomputed: retriever plugin {row.retriever.plugin!r} is not installed here")
        return []
    retriever: type[Retriever] = get_plugin_manager().components.get("retriever", row.retriever.plugin)
    try:
        details = [r.get("details") for r in records]
        recomputed = summarize(retriever, row.retriever.params, details, rankings, answers, is_candidate, row.training)
    except HarnessError as exc:
        return [f"cannot recompute the row's health: {exc}"]
    problems = compare(row.health, recomputed)
    notes += [] if problems else ["health recomputed from the per-query details"]
    return problems


def _missing_plugins(row: LeaderboardRow) -> list[tuple[str, str]]:
    """The (kind, plugin) of the row's components that this installation cannot load."""
    found = []
    components = get_plugin_manager().components
    for kind, info in [("retriever", row.retriever), *(("retriever", u) for u in row.uses), ("dataset", row.dataset)]:
        try:
            components.get(kind, info.plugin)
        except HarnessError:
            found.append((kind, info.plugin))
    return found


#: what a seeded row says of itself that must be its seeds' (the first seed's, all being equal)
_IDENTITY = (
    "retriever",
    "uses",
    "dataset",
    "dataset_fingerprint",
    "split",
    "queries_digest",
    "num_queries",
    "queries_without_candidate_answers",
    "sample",
    "k",
    "regime",
    "training",
)


def check_seeded(
    row: LeaderboardRow,
    directory: Path,
    validate_run: Callable[[RunEntry], Any],
    problems: list[str],
    stale: list[str],
) -> list[str]:
    """A row over several seeds: each seed's run (``seed-<n>/``) validates like any row (a stale
    seed makes the row stale), and the row's identity, metrics, spreads, per-query means and
    configuration recompute from them. Returns the checks passed; appends to ``problems``."""
    seeds = row.seeds
    assert seeds is not None
    if len(seeds.runs) != len(seeds.values) or len(seeds.config_hashes) != len(seeds.values):
        problems.append("seeds: values, runs and config_hashes differ in length")
        return []
    if len(set(seeds.values)) != len(seeds.values) or len(set(seeds.config_hashes)) != len(seeds.config_hashes):
        problems.append("seeds: a seed or a run is given twice (each seed trains its own model)")
        return []
    if row.regime != "trained":
        problems.append(f"seeds: a {row.regime} row trains nothing; its seeds would be one run repeated")
        return []
    rows: list[LeaderboardRow] = []
    for seed, run, config_hash in zip(seeds.values, seeds.runs, seeds.config_hashes, strict=True):
        where = (directory / run).resolve()
        if directory.resolve() not in where.parents:
            problems.append(f"seed {seed}: its run {run!r} is not inside the row's run directory")
            continue
        result = validate_run(RunEntry(str(directory / run), where, _read_json(where / "row.json")))
        problems += [f"seed {seed}: {p}" for p in result.problems]
        stale += [f"seed {seed}: {reason}" for reason in result.stale]
        if result.row is not None:
            if result.row.config_hash != config_hash:
                problems.append(f"seed {seed}: its run's config_hash {result.row.config_hash} is not {config_hash}")
            trained = result.row.training.seed if result.row.training is not None else None
            if trained != seed:
                problems.append(f"seed {seed}: its run trained with seed {trained}")
            rows.append(result.row)
    if problems:
        return []
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"config.json is not readable JSON: {exc}")
        return []
    if config != {"seeds": seeds.values, "runs": seeds.config_hashes} or stable_hash(config) != row.config_hash:
        problems.append("config.json does not name the seeds' runs, or does not hash to the row's config_hash")
    expected = combine_rows(rows, seeds.values, row.config_hash, row.run_dir or "")
    assert expected.seeds is not None
    said, derived = row.model_dump(include=set(_IDENTITY)), expected.model_dump(include=set(_IDENTITY))
    problems += [f"{key}: the row's is not its seeds' runs'" for key in _IDENTITY if said[key] != derived[key]]
    for name, value in expected.seeds.metrics.items():
        claimed = seeds.metrics.get(name)
        if claimed is None or any(
            abs(getattr(claimed, part) - getattr(value, part)) > 1e-9 for part in ("mean", "std", "min", "max")
        ):
            problems.append(f"seeds: {name}'s mean and spread do not recompute from the seeds' rows")
        if abs(row.metrics.get(name, np.nan) - value.mean) > 1e-9 or not np.isfinite(row.metrics.get(name, np.nan)):
            problems.append(f"{name}: the row says {row.metrics.get(name)}, the seeds' mean is {value.mean}")
    if set(row.metrics) != set(expected.metrics):
        problems.append("the row's metrics are not the seeds' metrics")
    if expected.health != row.health:
        problems.append("health: the row's does not sum the seeds' health")
    try:
        means = mean_per_query([directory / run for run in seeds.runs])
        records = [json.loads(line) for line in (directory / "per_query.jsonl").read_text().splitlines() if line]
    except (OSError, ValueError, KeyError, HarnessError) as exc:
        problems.append(f"per_query.jsonl cannot be checked against the seeds': {exc}")
        return []
    if len(records) != len(means) or any(
        r.get("qid") != m["qid"] or any(abs(r["metrics"].get(k, np.nan) - v) > 1e-9 for k, v in m["metrics"].items())  # type: ignore[attr-defined]
        for r, m in zip(records, means, strict=False)
    ):
        problems.append("per_query.jsonl is not the per-query mean of the seeds' runs")
    if problems:
        return []
    return [f"{len(rows)} seeds' runs validated", "seeds' means, spreads and per-query means recomputed"]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def stale_reasons(row: LeaderboardRow, config: dict[str, Any], skb: Any, notes: list[str]) -> list[str]:
    """Why the row's configuration no longer recomputes from the code installed here: each
    component constructed again from its recorded plugin and parameters (a changed version or
    default shows), and a trained row's checkpoint key planned again (a changed training
    identity shows). Empty when it recomputes, or when a plugin it needs is not installed here
    (``notes`` says so: not stale, unchecked)."""
    missing = _missing_plugins(row)
    if missing:
        notes.append(
            "configuration not recomputed: " + ", ".join(f"{k} plugin {p!r}" for k, p in missing) + " not here"
        )
        return []
    plugins = get_plugin_manager()
    seed = row.training.seed if row.training is not None else 0
    try:
        spec = spec_from_row(row, plugins, seed=seed)
    except HarnessError as exc:
        return [f"its components cannot be constructed from the code installed here: {exc}"]
    found = differences(
        {
            "retriever": row.retriever.configuration(),
            "uses": [info.configuration() for info in row.uses],
            "dataset": row.dataset.configuration(),
        },
        {
            "retriever": spec.main.info.configuration(),
            "uses": [c.info.configuration() for c in spec.uses],
            "dataset": spec.dataset_component.info.configuration(),
        },
    )
    if not found and row.training is not None and isinstance(config.get("training"), dict):
        builder = Builder(
            cache_dir=Path("."),
            device=row.training.device,
            train_split=row.training.split,
            validation_split=row.training.validation_split,
        )
        try:
            plans = builder.plan(spec, spec.dataset_component.instance, skb, row.split)
        except HarnessError as exc:
            return [f"its training cannot be planned again: {exc}"]
        found = differences(
            config["training"], {name: plan.configuration() for name, plan in plans.items()}, "training"
        )
    return found
