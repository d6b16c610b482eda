"""End-to-end `harness run` with BM25 on the Debian SKB versus the raw libraries on the same corpus.

    python bench/bench_bm25.py [--repeat 3]

References (measured in the same run): bm25s by hand — build the candidate documents,
tokenize with bm25s's tokenizer, index, tokenize the queries, retrieve the top 100 — and,
when Pyserini is installed, Lucene by hand (index the same documents, batch-search). Harness:
the runner doing the same through the plugin, including loading the SKB and queries,
evaluation, and writing the per-query results, TREC run and leaderboard row; `bm25` (Lucene's
analysis in Python, compared with Lucene) and `bm25` with ``analyzer: bm25s`` (compared with
bm25s). Cold = empty index cache; warm = the cached index is loaded (a second `harness run`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import bm25s
import Stemmer

from harness.errors import HarnessError
from harness.plugins import get_plugin_manager
from harness.run import Runner, resolve
from harness.run.registry import RetrieverEntry, load_registry
from harness_debian.dataset import DebianDataset


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


def raw_lucene(split: str, tmp: Path) -> float | None:
    try:
        from harness_lucene.retriever import start_jvm

        start_jvm()
        from pyserini.index.lucene import LuceneIndexer
        from pyserini.search.lucene import LuceneSearcher
    except (ImportError, HarnessError):  # Pyserini (or the plugin) is optional here
        return None
    started = time.perf_counter()
    dataset = DebianDataset()
    skb, queries = dataset.load_skb(), dataset.load_queries().split(split)
    indexer = LuceneIndexer(str(tmp / "lucene"), threads=1)
    documents = zip(skb.candidate_ids, skb.documents(), strict=True)
    indexer.add_batch_dict([{"id": str(i), "contents": d} for i, d in documents])
    indexer.close()
    searcher = LuceneSearcher(str(tmp / "lucene"))
    searcher.set_bm25(0.9, 0.4)
    searcher.batch_search([q.text for q in queries], [str(i) for i in range(len(queries))], k=100, threads=1)
    return time.perf_counter() - started


BM25S_ANALYSIS = RetrieverEntry(
    plugin="bm25", params={"analyzer": "bm25s", "stopwords": "en", "stemmer": "english", "length_norms": "exact"}
)


def harness_run(split: str, cache: Path, out: Path, retriever: str = "bm25") -> tuple[float, float]:
    started = time.perf_counter()
    manager = get_plugin_manager()
    registry = load_registry()
    registry.retrievers["bm25-bm25s-analysis"] = BM25S_ANALYSIS
    spec = resolve(registry, manager, retriever=retriever, dataset="debian", split=split)
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
    raw, lucene, cold, warm, latency, cold_bm25s = [], [], [], [], [], []
    for _ in range(args.repeat):
        raw.append(raw_bm25s(args.split))
        with tempfile.TemporaryDirectory() as tmp:
            lucene.append(raw_lucene(args.split, Path(tmp)))
            cold.append(harness_run(args.split, Path(tmp) / "cache", Path(tmp))[0])
            seconds, ms = harness_run(args.split, Path(tmp) / "cache", Path(tmp))
            warm.append(seconds)
            latency.append(ms)
            cold_bm25s.append(harness_run(args.split, Path(tmp) / "cache", Path(tmp), "bm25-bm25s-analysis")[0])
    r, c, w = statistics.median(raw), statistics.median(cold), statistics.median(warm)
    b = statistics.median(cold_bm25s)
    print(f"bm25s alone (build + search)               {r:7.2f} s")
    print(f"harness bm25 analyzer=bm25s, cold cache    {b:7.2f} s   ratio {b / r:5.2f}x vs bm25s alone")
    if all(x is not None for x in lucene):
        l_ = statistics.median(x for x in lucene if x is not None)
        print(f"Lucene alone via Pyserini (build + search) {l_:7.2f} s")
        print(f"harness bm25 (Lucene analysis), cold cache {c:7.2f} s   ratio {c / l_:5.2f}x vs Lucene alone")
    else:
        print(f"harness bm25 (Lucene analysis), cold cache {c:7.2f} s   ratio {c / r:5.2f}x vs bm25s alone")
    print(f"harness bm25, warm index cache             {w:7.2f} s   ratio {w / r:5.2f}x vs bm25s alone")
    print(f"search latency per query (harness bm25)    {statistics.median(latency):6.2f} ms")


if __name__ == "__main__":
    main()
