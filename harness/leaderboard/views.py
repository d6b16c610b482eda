"""What a published leaderboard shows of a row: its name, metric columns, LLM, cost, marks,
its tests against the best row of each column of its split, the evidence behind it (its
configuration, training, seeds, health, how to reproduce it) and the order rows are listed in."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.compare import load_per_query, paired_test
from harness.analysis.stats import holm
from harness.leaderboard.reproduce import reproduce_command
from harness.leaderboard.rows import (
    LeaderboardRow,
    display_name,
    flags_of,
    health_of,
    run_dir_of,
    seeds_of,
    spread_of,
)

__all__ = ["display_name"]

TEXT_COLUMNS = {"retriever", "regime", "LLM", "date", "harness"}
MARKER = ".harness-site"  # marks a directory publish may replace
SAMPLE_MARK, LLM_MARK = "†", "‡"
BELOW_MARK = "▼"  # a cell significantly below its column's best row, after the correction
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
        "flagged": bool(flags_of(row)),
        "seeds": len((seeds_of(row) or {}).get("values") or []) or None,
    }


def seeded_text(row: LeaderboardRow, metric: str) -> str | None:
    """``mean ± std (n seeds)`` ×100 for a row averaged over seeds, else None."""
    spread = spread_of(row, metric)
    if spread is None or metric not in row.metrics:
        return None
    count = len((seeds_of(row) or {}).get("values") or [])
    return f"{100 * row.metrics[metric]:.2f} ± {100 * spread['std']:.2f} ({count} seeds)"


def _reproduce_command(row: LeaderboardRow) -> str:
    """The one command that reproduces the row, from the repository's root."""
    return reproduce_command(row)


def sample_seed(row: LeaderboardRow, root: Path) -> int | None:
    """The seed a sampled row drew its queries with: the row does not record it, its run
    directory's ``config.json`` does."""
    directory = run_dir_of(root, row.run_dir)
    try:
        seed = json.loads((directory / "config.json").read_text(encoding="utf-8")).get("seed") if directory else None
    except (OSError, ValueError, AttributeError):
        return None
    return seed if isinstance(seed, int) else None


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in params.items()) or "–"


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


Evidence = list[tuple[str, list[tuple[str, str]]]]


def evidence(row: LeaderboardRow, versus: Versus | None = None, seed: int | None = None) -> Evidence:
    """What a row's details show, section by section as (heading, [(label, text)]): its
    configuration, training, seeds, health, tests against the best rows, the run, and the
    command that reproduces it. Everything a narrow screen leaves out of the table is here."""
    sections: Evidence = []
    sample = f"{row.sample:.0%} of the split" + (f", seed {seed}" if seed is not None else "") if row.sample else "full"
    config = [
        (
            f"retriever {row.retriever.name}",
            f"{row.retriever.plugin} v{row.retriever.version}: " + _params(row.retriever.params),
        )
    ]
    config += [(f"uses {info.name}", f"{info.plugin} v{info.version}: {_params(info.params)}") for info in row.uses]
    config += [
        (f"dataset {row.dataset.name}", f"{row.dataset.plugin} v{row.dataset.version}: {_params(row.dataset.params)}"),
        ("split", f"{row.split}, {row.num_queries} queries"),
        ("sample", sample),
        ("k", str(row.k)),
        ("config hash", row.config_hash),
    ]
    sections.append(("configuration", config))
    seeds = seeds_of(row)
    if row.training is not None:
        t = row.training
        seed_text = ", ".join(map(str, seeds.get("values") or [])) if seeds else str(t.seed)
        sections.append(
            (
                "training",
                [
                    (
                        "split",
                        f"{t.split}, {t.queries} queries" + (f" ({t.subset_queries} used)" if t.subset_queries else ""),
                    ),
                    ("validation", t.validation_split or "–"),
                    ("seeds" if seeds else "seed", seed_text),
                    ("checkpoint", t.checkpoint),
                    ("seconds", f"{t.seconds:.1f}"),
                    ("device", f"{t.device} ({t.hardware})"),
                ],
            )
        )
    if seeds:
        spread = [
            (
                metric,
                f"{100 * s['mean']:.2f} ± {100 * s['std']:.2f} (min {100 * s['min']:.2f}, max {100 * s['max']:.2f})",
            )
            for metric, s in (seeds.get("metrics") or {}).items()
        ]
        runs = [
            (f"seed {value}", f"{row.run_dir}/{run}" if row.run_dir else str(run))
            for value, run in zip(seeds.get("values") or [], seeds.get("runs") or [], strict=False)
        ]
        sections.append(("seeds (×100)", spread + runs))
    health = health_of(row)
    if health:
        items = [("queries", str(health.get("queries", "–")))]
        items += [(name, _number(value)) for name, value in (health.get("counters") or {}).items()]
        first_stage = health.get("first_stage") or {}
        items += [(f"first stage {m}", f"{100 * v:.2f}") for m, v in first_stage.items()]
        items += [(f"flag: {flag.get('component')}", str(flag.get("reason"))) for flag in flags_of(row)]
        sections.append(("health", items))
    if versus is not None:
        tests = []
        for metric in versus.metrics:
            key = (row.config_hash, metric)
            if versus.best.get(metric) == row.config_hash:
                tests.append((metric, "best"))
            elif key in versus.p:
                mark = " (significantly below)" if versus.below(*key) else ""
                tests.append(
                    (
                        metric,
                        f"{100 * versus.difference[key]:+.2f} vs {versus.best_name[metric]}: p = {versus.p[key]:.3f}, "
                        f"Holm-adjusted {versus.adjusted[key]:.3f}{mark}",
                    )
                )
        if tests:
            sections.append(("against the best row", tests))
    run = [
        (
            "latency",
            f"mean {row.latency.mean_ms:.2f} ms, p50 {row.latency.p50_ms:.2f}, p95 {row.latency.p95_ms:.2f} "
            f"(batches of {row.latency.batch_size})",
        ),
        ("index build", f"{row.index_build_seconds:.1f} s (total {row.total_seconds:.1f} s)"),
        ("regime", row.regime),
        ("LLM", llm_of(row) or "–"),
        ("cost", cost_text(row)),
        ("hardware", row.hardware.gpu or row.hardware.cpu or row.hardware.device),
        ("date", row.timestamp.date().isoformat()),
        ("harness", row.versions.harness),
        ("run", row.run_dir or "–"),
    ]
    sections.append(("run", run))
    sections.append(("reproduce", [("command", _reproduce_command(row))]))
    return sections


#: the family-wise error rate the site's marks keep, over all the tests of a split
ALPHA = 0.05


@dataclass
class Versus:
    """A split's paired tests: each row against the best row of each metric column, by
    (config hash, metric); ``adjusted`` holds the Holm–Bonferroni-adjusted p-values over every
    test of the split (rows × metrics), so that a mark means the same however many columns a
    page shows."""

    metrics: list[str] = field(default_factory=list)
    best: dict[str, str] = field(default_factory=dict)  # metric → config hash of its best row
    best_name: dict[str, str] = field(default_factory=dict)  # metric → that row's display name
    p: dict[tuple[str, str], float] = field(default_factory=dict)
    adjusted: dict[tuple[str, str], float] = field(default_factory=dict)
    difference: dict[tuple[str, str], float] = field(default_factory=dict)  # row − best, on shared queries

    def first(self, config_hash: str) -> float | str | None:
        """The row's unadjusted p against the best row on the first metric (``"best"`` for it):
        the Markdown tables' "p vs best", which is what `harness compare` says for the pair."""
        if not self.metrics:
            return None
        if self.best.get(self.metrics[0]) == config_hash:
            return "best"
        return self.p.get((config_hash, self.metrics[0]))

    def first_adjusted(self, config_hash: str) -> float | str | None:
        """As :meth:`first`, Holm-adjusted: the site's "p vs best"."""
        value = self.first(config_hash)
        return value if not isinstance(value, float) else self.adjusted[(config_hash, self.metrics[0])]

    def below(self, config_hash: str, metric: str) -> bool:
        """Significantly below the column's best row after the correction."""
        key = (config_hash, metric)
        return key in self.adjusted and self.adjusted[key] < ALPHA and self.difference[key] < 0


def per_query_of(row: LeaderboardRow, root: Path) -> dict[int, dict[str, float]] | None:
    """The row's per-query results, None when they are not at hand. A row averaged over seeds
    gets each query's mean over its seeds' runs (the queries all of them evaluated), so that
    its test is of the same means its metric cells show."""
    directory = run_dir_of(root, row.run_dir)
    if directory is None:
        return None
    runs = [directory / run for run in (seeds_of(row) or {}).get("runs") or []]
    if runs and all((run / "per_query.jsonl").is_file() for run in runs):
        loaded = [load_per_query(run) for run in runs]
        shared = sorted(set.intersection(*(set(values) for values in loaded)))
        return {
            q: {
                m: float(np.mean([values[q][m] for values in loaded]))
                for m in loaded[0][q]
                if all(m in values[q] for values in loaded)
            }
            for q in shared
        }
    return load_per_query(directory) if (directory / "per_query.jsonl").is_file() else None


def versus_best(rows: list[LeaderboardRow], metrics: list[str], root: Path) -> Versus:
    """For one dataset/split: each row's paired randomization test against the best row of
    every metric in ``metrics`` (queries both evaluated), Holm-adjusted over them all. The best
    row of a metric is the highest full-split row that is not flagged (a flagged row measures
    something other than its system, so it never sets the bar); when its per-query results are
    not at hand the column has no tests, and rows whose results are not at hand are left out."""
    versus = Versus(metrics=list(metrics))
    if not metrics:
        return versus
    eligible = [r for r in rows if not flags_of(r)] or rows
    pool = [r for r in eligible if not r.sample] or eligible
    found = {}
    for row in rows:
        values = per_query_of(row, root)
        if values is not None:
            found[row.config_hash] = values
    for metric in metrics:
        best = ranked(pool, [metric])[0]
        if metric not in best.metrics or best.config_hash not in found:
            continue
        versus.best[metric], versus.best_name[metric] = best.config_hash, display_name(best)
        reference = found[best.config_hash]
        for row in rows:
            values = found.get(row.config_hash)
            if row is best or values is None:
                continue
            shared = sorted(set(values) & set(reference))
            if len(shared) < 2 or any(metric not in values[q] or metric not in reference[q] for q in shared):
                continue
            a = np.array([reference[q][metric] for q in shared])
            b = np.array([values[q][metric] for q in shared])
            test = paired_test(a, b, resamples=10_000, seed=0)
            versus.p[(row.config_hash, metric)] = test["p_randomization"]
            versus.difference[(row.config_hash, metric)] = test["difference"]
    versus.adjusted = dict(zip(versus.p, holm(list(versus.p.values())), strict=True))
    return versus


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


def site_note(columns: list[str], versus: Versus | None) -> str:
    """The page's one note on its tests and their correction."""
    if not columns:
        return ""
    tests = len(versus.p) if versus else 0
    return (
        "p vs best: paired randomization test of each row's per-query values against the best full-split row's "
        f"on the queries both evaluated, for every metric column ({BELOW_MARK}: significantly below the column's "
        "best); "
        f"p-values Holm–Bonferroni-adjusted over the {tests} tests of this split (* adjusted p < {ALPHA})."
    )


def versus_note(columns: list[str]) -> str:
    if not columns:
        return ""
    return (
        f"p vs best: paired randomization test of each row's per-query {columns[0]} against the best "
        "full-split row's, on the queries both evaluated (* p < 0.05)."
    )
