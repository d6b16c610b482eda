"""What ``harness leaderboard validate`` checks beyond the metrics: the row's component health,
recomputed from its per-query details by the retriever's own counters, and a row over several
seeds, recomputed from each seed's run."""

from __future__ import annotations

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
from harness.run.health import compare, summarize
from harness.run.record import LeaderboardRow
from harness.run.seeds import combine_rows, mean_per_query


def health_problems(
    row: LeaderboardRow,
    records: Sequence[dict[str, Any]],
    rankings: Sequence[np.ndarray],
    answers: Sequence[Sequence[int]],
    is_candidate: np.ndarray,
) -> list[str]:
    """What the row's ``health`` says that its per-query details do not; a row without ``health``
    (written before it existed) passes only when its details show no component that never ran."""
    try:
        retriever: type[Retriever] = get_plugin_manager().components.get("retriever", row.retriever.plugin)
    except HarnessError as exc:
        plugin = row.retriever.plugin
        return [f"cannot recompute the row's health: retriever plugin {plugin!r} is not available ({exc})"]
    try:
        recomputed = summarize(
            retriever, row.retriever.params, [r.get("details") for r in records], rankings, answers, is_candidate
        )
    except HarnessError as exc:
        return [f"cannot recompute the row's health: {exc}"]
    return compare(row.health, recomputed)


def check_seeded(
    row: LeaderboardRow, directory: Path, validate_run: Callable[[RunEntry], Any], problems: list[str]
) -> list[str]:
    """A row over several seeds: each seed's run (``seed-<n>/``) validates like any row, and the
    row's metrics, spreads, per-query means and configuration recompute from them. Returns the
    checks passed; appends to ``problems``."""
    seeds = row.seeds
    assert seeds is not None
    if len(seeds.runs) != len(seeds.values) or len(seeds.config_hashes) != len(seeds.values):
        problems.append("seeds: values, runs and config_hashes differ in length")
        return []
    rows: list[LeaderboardRow] = []
    for seed, run, config_hash in zip(seeds.values, seeds.runs, seeds.config_hashes, strict=True):
        where = (directory / run).resolve()
        if directory.resolve() not in where.parents:
            problems.append(f"seed {seed}: its run {run!r} is not inside the row's run directory")
            continue
        result = validate_run(RunEntry(str(directory / run), where, _read_json(where / "row.json")))
        problems += [f"seed {seed}: {p}" for p in result.problems]
        if result.row is not None:
            if result.row.config_hash != config_hash:
                problems.append(f"seed {seed}: its run's config_hash {result.row.config_hash} is not {config_hash}")
            if result.row.training is not None and result.row.training.seed != seed:
                problems.append(f"seed {seed}: its run trained with seed {result.row.training.seed}")
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


def stale_reasons(row: LeaderboardRow, config: dict[str, Any], skb: Any) -> list[str]:
    """Why the row's configuration no longer recomputes from the code installed here: each
    component constructed again from its recorded plugin and parameters (a changed version or
    default shows), and a trained row's checkpoint key planned again (a changed training
    identity shows). Empty when it recomputes."""
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
