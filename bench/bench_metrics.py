"""Metric computation for 10,000 queries × top-100, against per-query references.

    python bench/bench_metrics.py [--queries 10000] [--candidates 129375]

References measured in the same run:
* a per-query Python loop over the same definitions (always);
* STaRK's official evaluator (`stark_qa/evaluator.py`, torchmetrics), when `stark-qa` and
  `torch` are installed — timed on a subset of queries and reported per query.
The candidate count defaults to STaRK-Prime's (129,375): the official evaluator scores every
candidate for every query, so its cost grows with the SKB.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.metrics import evaluate, parse_metrics
from harness.plugins.metric_families import BUILTIN_METRICS
from harness.run.scoring import hit_matrix

METRICS = ["hit@1", "hit@5", "recall@20", "recall@100", "precision@10", "mrr", "stark_map@100", "ndcg@10", "rprecision"]


def make_data(n_queries: int, n_candidates: int, seed: int = 0) -> tuple[list[np.ndarray], list[list[int]]]:
    rng = np.random.default_rng(seed)
    rankings, answers = [], []
    for _ in range(n_queries):
        gold = rng.choice(n_candidates, size=int(rng.integers(1, 20)), replace=False)
        ranking = rng.choice(n_candidates, size=100, replace=False)
        hits = rng.random(len(gold)) < 0.5
        positions = rng.choice(100, size=int(hits.sum()), replace=False)
        ranking[positions] = gold[hits]
        rankings.append(ranking)
        answers.append(gold.tolist())
    return rankings, answers


def loop_reference(rankings: list[np.ndarray], answers: list[list[int]]) -> None:
    for ranking, gold in zip(rankings, answers, strict=True):
        relevant = set(gold)
        flags = [int(r) in relevant for r in ranking]
        first = next((i for i, f in enumerate(flags) if f), None)
        _ = (
            any(flags[:1]),
            any(flags[:5]),
            sum(flags[:20]) / len(relevant),
            sum(flags) / len(relevant),
            sum(flags[:10]) / 10,
            0 if first is None else 1 / (first + 1),
        )
        found = [i for i, f in enumerate(flags) if f]
        _ = sum((j + 1) / (i + 1) for j, i in enumerate(found)) / len(found) if found else 0
        dcg = sum(1 / np.log2(i + 2) for i, f in enumerate(flags[:10]) if f)
        idcg = sum(1 / np.log2(i + 2) for i in range(min(len(relevant), 10)))
        _ = dcg / idcg, sum(flags[: len(relevant)]) / len(relevant)


def best_of(func: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def official_evaluator() -> type | None:
    spec = importlib.util.find_spec("stark_qa")
    if spec is None or importlib.util.find_spec("torch") is None:
        return None
    path = Path(spec.submodule_search_locations[0]) / "evaluator.py"
    module_spec = importlib.util.spec_from_file_location("stark_official_evaluator", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.Evaluator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=129_375)
    parser.add_argument("--official-queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5, help="timings are the best of this many runs")
    args = parser.parse_args()
    rankings, answers = make_data(args.queries, args.candidates)
    families = {m.family: m for m in BUILTIN_METRICS}
    metrics = parse_metrics(METRICS, families)

    mask = np.ones(args.candidates, dtype=bool)

    def ours_once() -> None:
        hits, n_relevant = hit_matrix(rankings, answers, mask)
        evaluate(metrics, hits, n_relevant)

    ours = best_of(ours_once, args.repeat)
    loop = best_of(lambda: loop_reference(rankings, answers), args.repeat)
    print(f"{args.queries:,} queries × top-100, {len(METRICS)} metrics, {args.candidates:,} candidates")
    print(f"harness (vectorized numpy)     {ours:8.3f} s   {1e6 * ours / args.queries:8.1f} µs/query")
    print(
        f"per-query Python loop          {loop:8.3f} s   {1e6 * loop / args.queries:8.1f} µs/query"
        f"   ratio {loop / ours:6.1f}x slower"
    )

    evaluator_cls = official_evaluator()
    if evaluator_cls is None:
        print("official STaRK evaluator: not installed (pip install stark-qa torch) — skipped")
        return
    import torch

    evaluator = evaluator_cls(list(range(args.candidates)))
    n = min(args.official_queries, args.queries)
    started = time.perf_counter()
    for ranking, gold in zip(rankings[:n], answers[:n], strict=True):
        pred = {int(node): float(100 - i) for i, node in enumerate(ranking)}
        evaluator(pred, torch.LongTensor(gold), metrics=METRICS)
    official = (time.perf_counter() - started) / n
    print(
        f"official evaluator (torch)     {official * args.queries:8.3f} s*  {1e6 * official:8.1f} µs/query"
        f"   ratio {official * args.queries / ours:6.1f}x slower   (*extrapolated from {n} queries)"
    )


if __name__ == "__main__":
    main()
