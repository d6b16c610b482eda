"""Paired comparison of runs from their per-query results.

For two runs over the same queries: the difference of means, a paired randomization test
(sign flips of the per-query differences; exact when 2^n ≤ resamples, n counting the
queries whose values differ) and a paired t-test,
and a bootstrap 95% confidence interval of the difference. scipy's ``permutation_test``,
``ttest_rel`` and ``bootstrap`` do the statistics: the per-query values are already computed by
the harness, so a toolkit that recomputes metrics from runs and qrels (ranx) would add a second
metric implementation without adding a test.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError, require
from harness.queries import sample
from harness.run import dataset_from_row
from harness.run.record import ComponentInfo, queries_digest

__all__ = ["compare_runs", "load_per_query", "paired_test", "query_groups"]


def load_per_query(path: str | Path) -> dict[int, dict[str, float]]:
    """``per_query.jsonl`` of a run directory (or the file itself): query id → metric values."""
    path = Path(path)
    file = path / "per_query.jsonl" if path.is_dir() else path
    if not file.exists():
        raise HarnessError(
            f"compare: no per-query results at {file} (a run directory holds per_query.jsonl)" + _hint(path)
        )
    rows: dict[int, dict[str, float]] = {}
    for number, line in enumerate(file.read_text().splitlines(), 1):
        try:
            row = json.loads(line)
            rows[int(row["qid"])] = {k: float(v) for k, v in row["metrics"].items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"compare: {file}:{number} is not a per-query result ({exc})") from None
    return rows


def _hint(path: Path) -> str:
    """What `harness compare` can do instead when ``path`` has no per-query results."""
    qrels = path / "qrels.trec" if path.is_dir() else None
    example = f", e.g. {qrels}" if qrels is not None and qrels.is_file() else ""
    return (
        f"; or give --qrels FILE (TREC qrels{example}): compare then computes each run's per-query values from "
        "the qrels and its run file (TREC, MS MARCO, ranx JSON) or its directory's run.trec"
    )


def paired_test(a: np.ndarray, b: np.ndarray, resamples: int = 10_000, seed: int = 0) -> dict[str, float]:
    """Statistics of ``b − a`` over paired per-query values."""
    stats = require("scipy.stats", "the paired tests")
    difference = b - a
    mean = lambda x, axis=-1: np.mean(x, axis=axis)  # noqa: E731 - scipy wants a callable with axis
    if np.allclose(difference, 0):
        return {
            "mean_a": float(a.mean()),
            "mean_b": float(b.mean()),
            "difference": 0.0,
            "p_randomization": 1.0,
            "p_ttest": 1.0,
            "ci95_low": 0.0,
            "ci95_high": 0.0,
        }
    # Zero differences are unchanged by a sign flip, so leaving them out changes no p-value and
    # often makes the test exact (scipy enumerates all 2^n flips when n is small enough).
    changed = difference[difference != 0]
    p_randomization = 1.0  # one differing query: both flips are equally extreme
    if len(changed) > 1:
        p_randomization = stats.permutation_test(
            (changed,),
            mean,
            permutation_type="samples",
            n_resamples=resamples,
            alternative="two-sided",
            random_state=seed,
        ).pvalue
    with warnings.catch_warnings():
        # differences (nearly) all equal: scipy warns of catastrophic cancellation; the p-value
        # it returns stands, and the randomization test above is the one tables report
        warnings.simplefilter("ignore", RuntimeWarning)
        ttest = stats.ttest_rel(b, a)
    interval = stats.bootstrap(
        (difference,), mean, n_resamples=resamples, confidence_level=0.95, method="percentile", random_state=seed
    ).confidence_interval
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "difference": float(difference.mean()),
        "p_randomization": float(p_randomization),
        "p_ttest": float(ttest.pvalue),
        "ci95_low": float(interval.low),
        "ci95_high": float(interval.high),
    }


#: the fewest queries a group is tested on (a bootstrap interval needs two)
MIN_GROUP = 2


def query_groups(run: str | Path, field: str, data_dir: str | None = None, option: str = "--by") -> dict[int, str]:
    """Query id → the value of ``metadata[field]`` of the queries the run evaluated, read from
    the dataset its ``config.json`` names (rebuilt from its plugin and parameters). Refuses when
    the dataset's queries are no longer the ones the run evaluated, or no query has the field."""

    path = Path(run)
    try:
        config = json.loads((path / "config.json").read_text())
        info = ComponentInfo.model_validate(config["dataset"])
        split, digest, fraction, seed = config["split"], config["queries"], config.get("sample"), config.get("seed")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"compare {option}: {path} has no readable config.json naming its dataset ({exc})") from None
    queries = dataset_from_row(info, data_dir).load_queries().split(split)
    if fraction:  # the run's seeded sample, drawn again as the runner drew it
        queries = sample(queries, fraction, seed)
    if queries_digest(queries) != digest:
        raise HarnessError(
            f"compare {option}: the queries of {info.name}/{split} are not the ones {path} evaluated (digest "
            f"{queries_digest(queries)}, the run's {digest}): the dataset changed since the run"
        )
    groups = {q.id: q.metadata[field] for q in queries if field in q.metadata}
    if not groups:
        known = sorted({key for q in queries for key in q.metadata})
        raise HarnessError(
            f"compare {option}: no query of {info.name}/{split} has {field!r} in its metadata "
            f"(they have: {', '.join(known) or 'none'})"
        )
    unusable = sorted({type(v).__name__ for v in groups.values() if not isinstance(v, str | int | float | bool)})
    if unusable:
        raise HarnessError(f"compare {option}: {field!r} holds {', '.join(unusable)} values, not one value per query")
    return {qid: str(value) for qid, value in groups.items()}


def compare_runs(
    runs: list[str | Path],
    metric: str,
    resamples: int = 10_000,
    seed: int = 0,
    groups: dict[int, str] | None = None,
    pairs: list[dict[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """Each run after the first against the first (the baseline), on the queries all share:
    over all of them, then (with ``groups``, query id → group) within each group, whose results
    carry ``group``. Queries without a group count only in the overall result; a group of fewer
    than ``MIN_GROUP`` queries has no test of its own. ``pairs`` (one per run after the first:
    its query id → the baseline's) pairs queries of another split, such as paraphrases."""
    if len(runs) < 2:
        raise HarnessError("compare: give at least two runs")
    loaded = [load_per_query(r) for r in runs]
    for index, pairing in enumerate(pairs or [], 1):
        renamed = {pairing.get(q, q): row for q, row in loaded[index].items()}
        if len(renamed) < len(loaded[index]):
            raise HarnessError(f"compare: two queries of {runs[index]} pair with the same query of {runs[0]}")
        loaded[index] = renamed
    common = sorted(set.intersection(*(set(rows) for rows in loaded)))
    if not common:
        raise HarnessError("compare: the runs share no query ids (different datasets or splits?)")
    results = _compare(runs, loaded, common, metric, resamples, seed)
    groups = groups or {}
    for group in sorted({groups[q] for q in common if q in groups}):
        members = [q for q in common if groups.get(q) == group]
        if len(members) < MIN_GROUP:
            continue
        results += [{**r, "group": group} for r in _compare(runs, loaded, members, metric, resamples, seed)]
    return results


def _compare(
    runs: list[str | Path],
    loaded: list[dict[int, dict[str, float]]],
    common: list[int],
    metric: str,
    resamples: int,
    seed: int,
) -> list[dict[str, Any]]:
    for run, rows in zip(runs, loaded, strict=True):
        if metric not in rows[common[0]]:
            raise HarnessError(f"compare: {run} has no {metric!r} (it has {', '.join(sorted(rows[common[0]]))})")
    base = np.array([loaded[0][q][metric] for q in common])
    results = []
    for run, rows in zip(runs[1:], loaded[1:], strict=True):
        other = np.array([rows[q][metric] for q in common])
        results.append(
            {
                "baseline": str(runs[0]),
                "run": str(run),
                "metric": metric,
                "queries": len(common),
                **paired_test(base, other, resamples, seed),
            }
        )
    return results
