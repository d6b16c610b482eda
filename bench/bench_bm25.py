"""End-to-end `harness run` with BM25 on the Debian SKB versus bm25s alone on the same corpus.

    python bench/bench_bm25.py [--repeat 3]

Reference (measured in the same run): bm25s by hand — build the candidate documents,
tokenize, index, tokenize the queries, retrieve the top 100. Harness: the runner doing the
same through the plugin, including loading the SKB and queries, evaluation, and writing the
per-query results, TREC run and leaderboard row. Cold = empty index cache; warm = the cached
index is loaded (a second `harness run`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import bm25s
import Stemmer

from harness.plugins import get_plugin_manager
from harness.registry import load_registry
from harness.runner import Runner, resolve
from harness_debian import DebianDataset


def raw_bm25s(split: str) -> float:
    started = time.perf_counter()
    dataset = DebianDataset()
    skb, queries = dataset.load_skb(), dataset.load_queries().split(split)
    stemmer = Stemmer.Stemmer("english")
    corpus = list(skb.documents())
    index = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    index.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([q.text for q in queries], stopwords="en", stemmer=stemmer, show_progress=False)
    index.retrieve(tokens, k=100, show_progress=False, n_threads=1)
    return time.perf_counter() - started


def harness_run(split: str, cache: Path, out: Path) -> tuple[float, float]:
    started = time.perf_counter()
    manager = get_plugin_manager()
    spec = resolve(load_registry(), manager.components, retriever="bm25", dataset="debian", split=split)
    runner = Runner(
        manager, output_dir=out / "runs", leaderboard_dir=out / "lb", device="cpu", cache_dir=cache, fresh=True
    )
    outcome = runner.run(spec)
    return time.perf_counter() - started, outcome.row.latency.mean_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    raw, cold, warm, latency = [], [], [], []
    for _ in range(args.repeat):
        raw.append(raw_bm25s(args.split))
        with tempfile.TemporaryDirectory() as tmp:
            cold.append(harness_run(args.split, Path(tmp) / "cache", Path(tmp))[0])
            seconds, ms = harness_run(args.split, Path(tmp) / "cache", Path(tmp))
            warm.append(seconds)
            latency.append(ms)
    r, c, w = statistics.median(raw), statistics.median(cold), statistics.median(warm)
    print(f"bm25s alone (build + search)      {r:7.2f} s")
    print(f"harness run, cold index cache     {c:7.2f} s   ratio {c / r:5.2f}x")
    print(f"harness run, warm index cache     {w:7.2f} s   ratio {w / r:5.2f}x")
    print(f"search latency per query (harness) {statistics.median(latency):6.2f} ms")


if __name__ == "__main__":
    main()
