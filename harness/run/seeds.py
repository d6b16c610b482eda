"""Rows over several training seeds (``harness run --seeds 0,1,2``).

Each seed is an ordinary run (its own model, its own run directory, resumable); the seeded row
averages them. Its run directory holds a copy of every seed's run under ``seed-<n>/`` (so a
bundle or the leaderboard carries them), ``config.json`` naming the seeds' configuration
hashes (it hashes to the row's ``config_hash``) and ``per_query.jsonl`` with each query's
metrics averaged over the seeds, which is what ``harness compare`` pairs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from harness.errors import HarnessError
from harness.io import atomic_write, replace_dir, stable_hash, write_json
from harness.run.outcome import CheckResult, RunOutcome
from harness.run.record import Health, HealthFlag, Latency, LeaderboardRow, MetricSpread, Seeds
from harness.run.resolve import RunSpec
from harness.run.runner import Runner

#: the files of a seed's run that its copy keeps (what validation and `harness evaluate` read)
SEED_FILES = ("row.json", "config.json", "per_query.jsonl", "run.trec", "qrels.trec")


def parse_seeds(text: str | None) -> list[int]:
    """``"0,1,2"`` → ``[0, 1, 2]``: at least two distinct integers."""
    if text is None:
        return []
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise HarnessError(f"--seeds takes comma-separated integers, e.g. 0,1,2; got {text!r}") from None
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise HarnessError(f"--seeds needs at least two distinct seeds, e.g. 0,1,2; got {text!r}")
    return seeds


def seeded_config(outcomes: Sequence[RunOutcome]) -> dict[str, object]:
    return {
        "seeds": [o.spec.seed for o in outcomes],
        "runs": [o.row.config_hash for o in outcomes],
    }


def spread(values: Sequence[float]) -> MetricSpread:
    array = np.asarray(values, dtype=np.float64)
    return MetricSpread(
        mean=float(array.mean()), std=float(array.std(ddof=1)), min=float(array.min()), max=float(array.max())
    )


def combine_rows(
    rows: Sequence[LeaderboardRow], seeds: Sequence[int], config_hash: str, run_dir: str
) -> LeaderboardRow:
    """The seeded row: each metric's mean (and spread), latency and build time averaged, usage
    and time summed, health summed with each seed's flags."""
    first = rows[0]
    for row in rows[1:]:
        same = (row.retriever.name, row.dataset.name, row.split, row.queries_digest, row.num_queries, row.k)
        if same != (
            first.retriever.name,
            first.dataset.name,
            first.split,
            first.queries_digest,
            first.num_queries,
            first.k,
        ):
            raise HarnessError("the seeds' runs evaluated different things; they cannot make one row")
        if list(row.metrics) != list(first.metrics):
            raise HarnessError("the seeds' runs computed different metrics; they cannot make one row")
    metrics = {name: spread([row.metrics[name] for row in rows]) for name in first.metrics}
    health = None
    if all(row.health is not None for row in rows):
        counters: dict[str, float] = {}
        flags: list[HealthFlag] = []
        for seed, row in zip(seeds, rows, strict=True):
            assert row.health is not None
            for key, value in row.health.counters.items():
                counters[key] = counters.get(key, 0) + value
            flags += [HealthFlag(component=f.component, reason=f"seed {seed}: {f.reason}") for f in row.health.flags]
        stages = [row.health.first_stage for row in rows if row.health is not None and row.health.first_stage]
        first_stage = None
        if len(stages) == len(rows):  # a reranker: its first stage beside its reranking, averaged over the seeds
            first_stage = {key: float(np.mean([stage[key] for stage in stages])) for key in stages[0]}
        health = Health(
            counters=counters,
            queries=sum(r.health.queries for r in rows if r.health),
            first_stage=first_stage,
            flags=flags,
        )
    usage: dict[str, object] = {}
    for row in rows:
        for key, value in row.usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                usage[key] = usage.get(key, 0) + value  # type: ignore[operator]
    return first.model_copy(
        update={
            "metrics": {name: value.mean for name, value in metrics.items()},
            "seeds": Seeds(
                values=list(seeds),
                config_hashes=[row.config_hash for row in rows],
                metrics=metrics,
                runs=[f"seed-{seed}" for seed in seeds],
            ),
            "latency": Latency(
                mean_ms=float(np.mean([r.latency.mean_ms for r in rows])),
                p50_ms=float(np.mean([r.latency.p50_ms for r in rows])),
                p95_ms=float(np.mean([r.latency.p95_ms for r in rows])),
                batch_size=first.latency.batch_size,
            ),
            "index_build_seconds": round(float(np.mean([r.index_build_seconds for r in rows])), 4),
            "total_seconds": round(sum(r.total_seconds for r in rows), 4),
            "usage": usage,
            "health": health,
            "config_hash": config_hash,
            "timestamp": datetime.now(UTC),
            "run_dir": run_dir,
        }
    )


def mean_per_query(directories: Sequence[Path]) -> list[dict[str, object]]:
    """Each query's metrics and latency averaged over the seeds' ``per_query.jsonl``."""
    runs = [
        [json.loads(line) for line in (d / "per_query.jsonl").read_text(encoding="utf-8").splitlines()]
        for d in directories
    ]
    qids = [r["qid"] for r in runs[0]]
    if any([r["qid"] for r in run] != qids for run in runs[1:]):
        raise HarnessError("the seeds' runs answered different queries; they cannot make one row")
    out: list[dict[str, object]] = []
    for i, qid in enumerate(qids):
        names = list(runs[0][i]["metrics"])
        out.append(
            {
                "qid": qid,
                "latency_ms": float(np.mean([run[i]["latency_ms"] for run in runs])),
                "metrics": {name: float(np.mean([run[i]["metrics"][name] for run in runs])) for name in names},
            }
        )
    return out


def combine(outcomes: Sequence[RunOutcome], output_dir: Path) -> RunOutcome:
    """One outcome (the seeded row, its directory) from each seed's outcome."""
    first = outcomes[0]
    if len({o.spec.seed for o in outcomes}) != len(outcomes):
        raise HarnessError(f"seeds {[o.spec.seed for o in outcomes]}: each seed once")
    config = seeded_config(outcomes)
    config_hash = stable_hash(config)
    seeds = [o.spec.seed for o in outcomes]
    spec = first.spec
    run_dir = output_dir / f"{spec.dataset}-{spec.split}-{spec.retriever}-seeds-{config_hash}"
    relative = os.path.relpath(run_dir) if not run_dir.is_absolute() else str(run_dir)
    row = combine_rows([o.row for o in outcomes], seeds, config_hash, relative)
    # the directory appears whole or not at all (a half-copied seed must not look like data);
    # combining again replaces it (the same seeds' runs, a new timestamp)
    output_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=output_dir, prefix=f".{run_dir.name}.", suffix=".tmp"))
    try:
        for seed, outcome in zip(seeds, outcomes, strict=True):
            target = staging / f"seed-{seed}"
            target.mkdir()
            for name in SEED_FILES:
                source = outcome.run_dir / name
                if source.is_file():
                    shutil.copyfile(source, target / name)
            # the copy's row names the copy, so the seeded directory checks on its own
            write_json(target / "row.json", outcome.row.model_dump(mode="json") | {"run_dir": f"seed-{seed}"})
        write_json(staging / "config.json", config)
        with atomic_write(staging / "per_query.jsonl") as out:
            for record in mean_per_query([o.run_dir for o in outcomes]):
                out.write(json.dumps(record) + "\n")
        write_json(staging / "row.json", row.model_dump(mode="json"))
        replace_dir(staging, run_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    notes = [f"seed {seed}: {note}" for seed, o in zip(seeds, outcomes, strict=True) for note in o.notes]
    phases: dict[str, float] = {}
    for o in outcomes:
        for phase, seconds in o.phases.items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    return RunOutcome(
        spec,
        row,
        run_dir,
        None,
        sum(o.resumed_queries for o in outcomes),
        [],
        notes,
        phases,
        all(o.built_earlier for o in outcomes),
    )


def run_seeds(runner: Runner, spec: RunSpec, seeds: Sequence[int]) -> RunOutcome:
    """Run ``spec`` once per training seed (on the same queries: a sample keeps ``spec.seed``)
    and combine the runs into one seeded row."""
    trained = [c.name for c in [spec.main, *spec.uses] if c.instance.regime == "trained"]
    if not trained:
        raise HarnessError(
            f"retriever {spec.retriever!r} trains nothing ({spec.main.instance.regime}): every seed would give the "
            "same row; run it without --seeds"
        )
    # each seed's own run goes one level down, so that submitting the output directory takes the
    # seeded row alone (its directory holds a copy of every seed's run)
    output = runner.output_dir
    runner.output_dir = output / "by-seed"
    try:
        outcomes = [runner.run(dataclasses.replace(spec, seed=seed, sample_seed=spec.seed)) for seed in seeds]
    finally:
        runner.output_dir = output
    combined = combine(outcomes, output)
    if spec.condition is not None:  # the registry's expected scores, against the seeds' means
        condition = spec.condition
        combined.checks = [
            CheckResult(metric, expected, combined.row.metrics.get(metric), condition.tolerance)
            for metric, expected in condition.expected.items()
        ]
    return combined
