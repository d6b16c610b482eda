"""Metrics for 10,000 queries x top 100: the harness against trec_eval (pytrec_eval), ir_measures
and STaRK's official Evaluator, on the same rankings.

    python bench/bench_metrics.py [--queries 10000] [--candidates 129375] [--repeat 3]
                                  [--official-queries 100]

Each side gets the same rankings (random, about half of each query's answers planted) in the
form it takes, built beforehand: the harness its rankings and answers (``hit_matrix`` then
``evaluate``); pytrec_eval and ir_measures TREC-style dictionaries (run: scores by rank; qrels:
the answers); the official ``stark_qa.evaluator.Evaluator`` one prediction dictionary per query,
scored against every candidate (the candidate count defaults to STaRK-Prime's, since the official
evaluator's cost grows with it). The metrics are those all four define; the harness's values
are checked against pytrec_eval's. The official evaluator is timed on ``--official-queries``
queries and extrapolated (``*``), once with torch's default threads and once with 1 thread.
All runs are in this process, alternated.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import timing
from references import installed, pytrec_eval_spec, trec_eval_measures
from timing import Sample

METRICS = ["hit@1", "hit@5", "recall@20", "recall@100", "precision@10", "mrr", "map", "ndcg@10", "rprecision"]


def make_data(n_queries: int, n_candidates: int, seed: int = 0) -> tuple[list[np.ndarray], list[list[int]]]:
    """Rankings of 100 distinct candidates with about half of each query's answers in them."""
    rng = np.random.default_rng(seed)
    rankings, answers = [], []
    for _ in range(n_queries):
        gold = rng.choice(n_candidates, size=int(rng.integers(1, 20)), replace=False)
        drawn = rng.choice(n_candidates, size=120, replace=False)
        ranking = drawn[~np.isin(drawn, gold)][:100]  # no answer twice once some are planted
        hits = rng.random(len(gold)) < 0.5
        positions = rng.choice(100, size=int(hits.sum()), replace=False)
        ranking[positions] = gold[hits]
        rankings.append(ranking)
        answers.append(gold.tolist())
    return rankings, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=129_375)
    parser.add_argument("--official-queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternated")
    args = parser.parse_args()
    from harness.metrics import evaluate, means, parse_metrics
    from harness.plugins.metric_families import BUILTIN_METRICS
    from harness.run.scoring import hit_matrix

    rankings, answers = make_data(args.queries, args.candidates)
    metrics = parse_metrics(METRICS, {m.family: m for m in BUILTIN_METRICS})
    trec = trec_eval_measures(METRICS)
    mask = np.ones(args.candidates, dtype=bool)
    run = {str(q): {str(int(d)): float(100 - i) for i, d in enumerate(r)} for q, r in enumerate(rankings)}
    qrels = {str(q): {str(a): 1 for a in gold} for q, gold in enumerate(answers)}
    computed: dict[str, Any] = {}

    def harness_side() -> None:
        hits, n_relevant = hit_matrix(rankings, answers, mask)
        computed["harness"] = means(evaluate(metrics, hits, n_relevant))

    runs: dict[str, Callable[[], Sample | float | None]] = {"harness": lambda: timed(harness_side)}
    if installed("pytrec_eval"):
        import pytrec_eval

        spec = pytrec_eval_spec(trec.values())

        def pytrec_side() -> None:
            computed["pytrec_eval"] = pytrec_eval.RelevanceEvaluator(qrels, spec).evaluate(run)

        runs["pytrec_eval"] = lambda: timed(pytrec_side)
    if installed("ir_measures"):
        import ir_measures

        parsed = [m for measure in trec.values() for m in ir_measures.parse_trec_measure(measure)]
        runs["ir_measures"] = lambda: timed(lambda: list(ir_measures.iter_calc(parsed, qrels, run)))
    official = official_runs(rankings, answers, args)
    runs.update(official)

    print(
        f"{args.queries:,} queries x top 100 over {args.candidates:,} candidates, {len(METRICS)} metrics "
        f"({', '.join(METRICS)}); {args.repeat} runs of each, alternated"
    )
    series = timing.alternate(runs, args.repeat)
    for name in official:
        if name in series:
            series[name].mark = "*"
    timing.table(series.values())
    for name in official:
        if name in series:
            print(
                f"  * {name}: {1e3 * series[name].info('per_query'):.1f} ms/query on the first "
                f"{min(args.official_queries, args.queries)} queries, extrapolated"
            )
    ours = series["harness"]
    for name, s in series.items():
        if name != "harness":
            print(timing.ratio_line(s, ours))
    if "pytrec_eval" in computed:
        per_query = computed["pytrec_eval"]
        worst = 0.0
        for name, measure in trec.items():
            reference = np.mean([per_query[str(q)][measure] for q in range(args.queries)])
            worst = max(worst, abs(reference - computed["harness"][name]))
        print(f"harness vs pytrec_eval, mean of each metric: largest difference {worst:.2e}")


def timed(func: Callable[[], Any]) -> float:
    started = time.perf_counter()
    func()
    return time.perf_counter() - started


def official_runs(rankings: list[np.ndarray], answers: list[list[int]], args: argparse.Namespace) -> dict[str, Any]:
    """The official Evaluator, once per thread setting, on the first ``--official-queries``."""
    if not (installed("stark_qa") and installed("torch")):
        print("official STaRK evaluator: not installed (stark-qa, torch) - left out")
        return {}
    import warnings

    import torch
    from references import stark_qa

    warnings.filterwarnings("ignore", message="Importing `retrieval_", category=FutureWarning)
    stark_qa()
    from stark_qa.evaluator import Evaluator

    evaluator = Evaluator(list(range(args.candidates)))
    n = min(args.official_queries, args.queries)
    predictions = [{int(d): float(100 - i) for i, d in enumerate(r)} for r in rankings[:n]]
    gold = [torch.LongTensor(a) for a in answers[:n]]
    default_threads = torch.get_num_threads()

    def run(threads: int) -> Sample:
        torch.set_num_threads(threads)
        started = time.perf_counter()
        for prediction, answer in zip(predictions, gold, strict=True):
            evaluator(prediction, answer, metrics=METRICS)
        per_query = (time.perf_counter() - started) / n
        torch.set_num_threads(default_threads)
        return Sample(per_query * args.queries, info={"per_query": per_query})

    return {
        f"official Evaluator, {default_threads} threads (default)": lambda: run(default_threads),
        "official Evaluator, 1 thread": lambda: run(1),
    }


if __name__ == "__main__":
    main()
