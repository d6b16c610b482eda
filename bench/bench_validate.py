"""Validating a STaRK-sized submission: 10,000 queries x top 100 over 129,375 candidates.

    python bench/bench_validate.py [--queries 10000] [--candidates 129375] [--k 100] [--repeat 3]

A synthetic dataset plugin and a seeded retriever go through the real runner, so the run
directory is exactly what ``harness run`` writes. Then, alternated in this process:

* ``harness leaderboard validate`` on the run directory (schema, configuration hash, per-query
  means, and the metrics recomputed from ``run.trec`` against the dataset's answers);
* trec_eval (pytrec_eval) recomputing the same metrics from the run directory's ``run.trec`` and
  ``qrels.trec`` (read with its own parsers), as ``trec_eval -c qrels.trec run.trec`` would;
* ir_measures doing the same with its own TREC readers;
* ``harness submit``'s bundling (validation included) of the run directory.

The row's metrics are checked against pytrec_eval's means.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import timing
from references import installed, pytrec_eval_spec, trec_eval_measures
from timing import Sample

from harness.dataset import Dataset
from harness.leaderboard.bundles import collect
from harness.leaderboard.submit import bundle
from harness.leaderboard.validate import validate
from harness.plugins import get_plugin_manager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query, QuerySet
from harness.retriever import BuildContext, Ranking, Retriever
from harness.run import Runner, resolve
from harness.run.registry import parse_registry
from harness.skb import SKB

SIZE = {"queries": 10_000, "candidates": 129_375}


class SyntheticDataset(Dataset):
    name = "synthetic"

    def load_skb(self) -> SKB:
        n = SIZE["candidates"]
        return SKB(
            name="synthetic",
            node_type_names=["item"],
            node_types=np.zeros(n, dtype=np.int64),
            names=[f"item {i}" for i in range(n)],
            fields=[{} for _ in range(n)],
            edge_types=[],
            src=np.zeros(0),
            dst=np.zeros(0),
            edge_type=np.zeros(0),
        )

    def load_queries(self) -> QuerySet:
        rng = np.random.default_rng(0)
        queries = [
            Query(i, f"query {i}", tuple(int(a) for a in rng.choice(SIZE["candidates"], rng.integers(1, 20))))
            for i in range(SIZE["queries"])
        ]
        return QuerySet("synthetic", {"test": queries})


class SeededRetriever(Retriever):
    """Random rankings with about half of each query's answers planted in them."""

    name = "seeded"
    batch_size = 1000

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.answers = {q.id: q.answer_ids for q in SyntheticDataset().load_queries().split("test")}

    def search(self, queries: Sequence[Query], k: int) -> list[Ranking]:
        out = []
        for query in queries:
            rng = np.random.default_rng(query.id)
            ids = rng.choice(SIZE["candidates"], size=k, replace=False)
            planted = [a for a in query.answer_ids if rng.random() < 0.5][:k]
            ids[rng.choice(k, size=len(planted), replace=False)] = planted
            ids = np.asarray(list(dict.fromkeys(ids.tolist())), dtype=np.int64)
            out.append(Ranking(ids, np.linspace(1.0, 0.0, len(ids))))
        return out


class BenchPlugin:
    @hookimpl
    def register_datasets(self, register):  # type: ignore[no-untyped-def]
        register(SyntheticDataset)

    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register(SeededRetriever)


def timed(func: Any) -> Sample:
    started = time.perf_counter()
    func()
    return Sample(time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=129_375)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternated")
    args = parser.parse_args()
    SIZE.update(queries=args.queries, candidates=args.candidates)
    plugins = get_plugin_manager()
    plugins.register(BenchPlugin(), "bench-validate")
    metrics = ["hit@1", "hit@5", "recall@20", "mrr"]
    trec = trec_eval_measures(metrics)
    registry = parse_registry(
        "datasets: {synthetic: {plugin: synthetic, splits: [test]}}\nretrievers: {seeded: {plugin: seeded}}\n",
        "bench",
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = resolve(registry, plugins, "seeded", "synthetic", "test", args.k, metrics)
        outcome = Runner(plugins, output_dir=work / "runs", device="cpu").run(spec)
        run_dir = outcome.run_dir
        print(
            f"{args.queries:,} queries x top {args.k} over {args.candidates:,} candidates "
            f"({(run_dir / 'run.trec').stat().st_size / 1e6:.1f} MB TREC run), metrics {', '.join(metrics)}; "
            f"{args.repeat} runs of each, alternated"
        )
        computed: dict[str, Any] = {}

        def validate_run() -> None:
            results = validate(collect(run_dir, work / "unpacked"))
            assert results[0].ok, results[0].problems

        runs: dict[str, Any] = {"harness leaderboard validate": lambda: timed(validate_run)}
        if installed("pytrec_eval"):
            import pytrec_eval

            spec = pytrec_eval_spec(trec.values())

            def pytrec_side() -> None:
                with (run_dir / "run.trec").open() as run, (run_dir / "qrels.trec").open() as qrels:
                    evaluator = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(qrels), spec)
                    computed["pytrec_eval"] = evaluator.evaluate(pytrec_eval.parse_run(run))

            runs["pytrec_eval (read + evaluate)"] = lambda: timed(pytrec_side)
        if installed("ir_measures"):
            import ir_measures

            measures = [m for measure in trec.values() for m in ir_measures.parse_trec_measure(measure)]

            def ir_measures_side() -> None:
                run = ir_measures.read_trec_run(str(run_dir / "run.trec"))
                qrels = ir_measures.read_trec_qrels(str(run_dir / "qrels.trec"))
                list(ir_measures.iter_calc(measures, qrels, run))

            runs["ir_measures (read + evaluate)"] = lambda: timed(ir_measures_side)
        archive = work / "submission.tar.gz"
        runs["harness submit (validate + bundle)"] = lambda: timed(lambda: bundle([run_dir], archive))
        series = timing.alternate(runs, args.repeat)
        timing.table(series.values())
        ours = series["harness leaderboard validate"]
        for name, s in series.items():
            if name.startswith(("pytrec_eval", "ir_measures")):
                print(timing.ratio_line(ours, s))
        print(timing.ratio_line(series["harness submit (validate + bundle)"], ours))
        print(f"archive {archive.stat().st_size / 1e6:.1f} MB")
        if "pytrec_eval" in computed:
            row = json.loads((run_dir / "row.json").read_text())["metrics"]
            per_query = computed["pytrec_eval"].values()
            worst = max(abs(np.mean([q[m] for q in per_query]) - row[name]) for name, m in trec.items())
            print(f"row metrics vs pytrec_eval means: largest difference {worst:.2e}")


if __name__ == "__main__":
    main()
