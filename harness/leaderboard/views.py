"""What a published leaderboard shows of a row: its name, metric columns, LLM, cost, marks,
its p-value against the best row of its split, and the order rows are listed in."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.compare import load_per_query, paired_test
from harness.leaderboard.rows import LeaderboardRow, display_name, run_dir_of

__all__ = ["display_name"]

TEXT_COLUMNS = {"retriever", "regime", "LLM", "date", "harness"}
MARKER = ".harness-site"  # marks a directory publish may replace
SAMPLE_MARK, LLM_MARK = "†", "‡"
FOOTNOTE = (
    f"{SAMPLE_MARK} evaluated on a seeded random sample of the split (cheaper, noisier); "
    f"{LLM_MARK} an LLM runs at query time (cost and latency per query). Metrics ×100."
)


def metric_columns(rows: list[LeaderboardRow], metrics: list[str] | None) -> list[str]:
    if metrics:
        return metrics
    found: list[str] = []
    for row in rows:
        found.extend(m for m in row.metrics if m not in found)
    return found


def llm_of(row: LeaderboardRow) -> str | None:
    """The LLM a row used at query time, if any."""
    for info in (row.retriever, *row.uses):
        if isinstance(info.params.get("llm"), str):
            return info.params["llm"]
    value = row.usage.get("llm")
    return value if isinstance(value, str) else None


def cost_of(row: LeaderboardRow) -> float | None:
    """API cost in USD over the run; None when nothing was priced or a cost is unknown
    (``cost_unknown`` tells them apart)."""
    if cost_unknown(row):
        return None  # a sum of the known part would understate it
    costs = [v for k, v in row.usage.items() if k.endswith("cost_usd") and isinstance(v, int | float)]
    return float(sum(costs)) if costs else None


def cost_unknown(row: LeaderboardRow) -> bool:
    """Something was spent at a price nobody knew: a ``cost_usd`` recorded as null."""
    return any(k.endswith("cost_usd") and v is None for k, v in row.usage.items())


def record(row: LeaderboardRow) -> dict[str, Any]:
    """The row as the page's script sees it."""
    return {
        "split": row.split,
        "retriever": display_name(row),
        "metrics": row.metrics,
        "p50_ms": row.latency.p50_ms,
        "p95_ms": row.latency.p95_ms,
        "sample": row.sample,
        "llm_at_query_time": row.regime == "llm-at-query-time",
    }


def versus_best(rows: list[LeaderboardRow], metrics: list[str], root: Path) -> dict[str, float | str]:
    """For one dataset/split: each row's paired randomization p-value against the best row on
    the first metric (queries both evaluated), by config hash; ``"best"`` for the best row.
    Rows whose per-query results are not at hand are left out."""
    if not metrics:
        return {}

    order = ranked(rows, metrics)
    best = next((r for r in order if not r.sample), order[0])
    found = {}
    for row in rows:
        directory = run_dir_of(root, row.run_dir)
        if directory is not None and (directory / "per_query.jsonl").is_file():
            found[row.config_hash] = load_per_query(directory)
    if best.config_hash not in found:
        return {}
    result: dict[str, float | str] = {best.config_hash: "best"}
    reference = found[best.config_hash]
    for row in rows:
        values = found.get(row.config_hash)
        if row is best or values is None:
            continue
        shared = sorted(set(values) & set(reference))
        if len(shared) < 2 or any(metrics[0] not in values[q] or metrics[0] not in reference[q] for q in shared):
            continue
        a = np.array([reference[q][metrics[0]] for q in shared])
        b = np.array([values[q][metrics[0]] for q in shared])
        result[row.config_hash] = paired_test(a, b, resamples=10_000, seed=0)["p_randomization"]
    return result


def versus_text(value: float | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    return f"{value:.3f}" + ("*" if value < 0.05 else "")


def splits(rows: list[LeaderboardRow]) -> list[tuple[str, list[LeaderboardRow]]]:
    order = {"test": 0, "val": 1, "human_generated_eval": 2, "train": 3}
    grouped: dict[str, list[LeaderboardRow]] = defaultdict(list)
    for row in rows:
        grouped[row.split].append(row)
    return sorted(grouped.items(), key=lambda item: (order.get(item[0], 9), item[0]))


def ranked(rows: list[LeaderboardRow], metrics: list[str]) -> list[LeaderboardRow]:
    first = metrics[0] if metrics else ""
    return sorted(rows, key=lambda r: (-r.metrics.get(first, float("-inf")), display_name(r)))


def cost_text(row: LeaderboardRow) -> str:
    """``$1.23``; ``unknown`` for a cost recorded as null (never ``$0.00``); ``–`` for none."""
    if cost_unknown(row):
        return "unknown"
    cost = cost_of(row)
    return "–" if cost is None else f"${cost:.2f}"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def page_name(dataset: str) -> str:
    return f"{slug(dataset)}.html"


def versus_note(columns: list[str]) -> str:
    if not columns:
        return ""
    return (
        f"p vs best: paired randomization test of each row's per-query {columns[0]} against the best "
        "full-split row's, on the queries both evaluated (* p < 0.05)."
    )
