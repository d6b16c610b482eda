"""Validating a STaRK-sized submission: 10,000 queries × top-100 over 129,375 candidates.

    python bench/bench_validate.py [--queries 10000] [--candidates 129375] [--k 100]

A synthetic dataset plugin and a seeded retriever go through the real runner, so the run
directory is exactly what `harness run` writes; then `harness submit`'s bundling and
`harness leaderboard validate` are timed. References measured in the same run:
* reading the TREC run alone (`harness.trec.read_run`): the floor any recomputation pays;
* `harness evaluate`'s path: TREC run + TREC qrels → the same metrics, no other checks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.dataset import Dataset
from harness.leaderboard.bundles import bundle, collect
from harness.leaderboard.validate import validate
from harness.metrics import evaluate, parse_metrics
from harness.plugins import get_plugin_manager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query, QuerySet
from harness.retriever import BuildContext, Ranking, Retriever
from harness.run import Runner, resolve
from harness.run.registry import parse_registry
from harness.run.scoring import hit_matrix
from harness.skb import SKB
from harness.trec import read_run

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


def timed(label: str, func, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    print(f"  {label:<48} {best:8.2f} s")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=129_375)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    SIZE.update(queries=args.queries, candidates=args.candidates)
    plugins = get_plugin_manager()
    plugins.register(BenchPlugin(), "bench-validate")
    metrics = ["hit@1", "hit@5", "recall@20", "mrr"]
    registry = parse_registry(
        "datasets: {synthetic: {plugin: synthetic, splits: [test]}}\nretrievers: {seeded: {plugin: seeded}}\n",
        "bench",
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = resolve(registry, plugins, "seeded", "synthetic", "test", args.k, metrics)
        outcome = Runner(plugins, output_dir=work / "runs", leaderboard_dir=None, device="cpu").run(spec)
        run_dir = outcome.run_dir
        queries = SyntheticDataset().load_queries().split("test")
        with (work / "qrels.txt").open("w") as handle:
            for q in queries:
                handle.writelines(f"{q.id} 0 {a} 1\n" for a in set(q.answer_ids))
        print(
            f"{args.queries:,} queries × top-{args.k} over {args.candidates:,} candidates "
            f"({(run_dir / 'run.trec').stat().st_size / 1e6:.1f} MB TREC run); best of {args.repeat}"
        )

        floor = timed("reference: read the TREC run", lambda: read_run(run_dir / "run.trec"), args.repeat)

        def evaluate_path() -> None:
            from harness.trec import read_qrels

            run, qrels = read_run(run_dir / "run.trec"), read_qrels(work / "qrels.txt")
            qids = sorted(qrels)
            vocab: dict[str, int] = {}
            encode = lambda docs: [vocab.setdefault(d, len(vocab)) for d in docs]  # noqa: E731
            hits, n_rel = hit_matrix([encode(run.get(q, [])) for q in qids], [encode(qrels[q]) for q in qids])
            evaluate(parse_metrics(metrics, plugins.components.by_kind["metric"]), hits, n_rel)

        reference = timed("reference: harness evaluate (run + qrels)", evaluate_path, args.repeat)

        def validate_run() -> None:
            results = validate(collect(run_dir, work / "unpacked"))
            assert results[0].ok, results[0].problems

        checked = timed("harness leaderboard validate (run directory)", validate_run, args.repeat)
        archive = work / "submission.tar.gz"
        packed = timed("harness submit (validate + bundle)", lambda: bundle([run_dir], archive), 1)
        print(f"  archive {archive.stat().st_size / 1e6:.1f} MB; bundling alone ≈ {packed - checked:.2f} s")
        print(
            f"validate / read run alone: {checked / floor:.2f}×; validate / evaluate path: {checked / reference:.2f}×"
        )


if __name__ == "__main__":
    main()
