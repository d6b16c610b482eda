"""``harness run`` with BM25 on the Debian SKB, against Lucene (Pyserini) and bm25s alone on the
same documents, and a second run against the first.

    python bench/bench_bm25.py [--repeat 3] [--split test]

Every timed run is a fresh process, all pinned to one thread, alternated:

* harness ``-r bm25`` (Lucene's analysis and scoring in Python), cold: the ``harness`` CLI with
  an empty ``HARNESS_CACHE``; then warm: a second run with the cache the cold one left (the
  index cached) and a new output directory;
* Lucene alone via Pyserini: index the same documents (``LuceneIndexer``, 1 thread), then
  ``batch_search`` the split's queries (1 thread), BM25 k1 0.9, b 0.4, top 100;
* harness ``bm25`` with ``analyzer: bm25s`` (English stopwords, Snowball stemmer), cold, and
  bm25s alone with the same settings (tokenize + index + retrieve top 100).

The references read the documents (the harness SKB's candidate documents) and query texts
from a file written beforehand, so they pay for no loader; they report what their calls cost.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

import timing
from references import bm25s_alone, installed, write_inputs
from timing import Goals, Sample, Series

K = 100
BM25S_REGISTRY = """\
retrievers:
  bm25-bm25s-analysis:
    plugin: bm25
    params: {analyzer: bm25s, stopwords: en, stemmer: english, length_norms: exact}
"""


def documents_child(split: str, out: str) -> dict[str, Any]:
    from harness_debian.dataset import DebianDataset

    dataset = DebianDataset()
    skb = dataset.load_skb()
    queries = [q.text for q in dataset.load_queries().split(split)]
    return write_inputs(out, list(skb.documents(skb.candidate_ids)), queries)


def bm25s_child(inputs: str) -> dict[str, Any]:
    """bm25s alone as the harness's ``analyzer: bm25s`` entry configures it."""
    params = {"method": "lucene", "k1": 0.9, "b": 0.4, "stopwords": "en"}
    return bm25s_alone(inputs, K, params, stemmer="english")


def pyserini_child(inputs: str, index_dir: str) -> dict[str, Any]:
    """Lucene via Pyserini: index the documents, then batch-search the queries, one thread each."""
    import pickle

    clock = timing.Clock()
    from harness_lucene.retriever import start_jvm

    start_jvm()
    from pyserini.index.lucene import LuceneIndexer
    from pyserini.search.lucene import LuceneSearcher

    clock.lap("start")
    with open(inputs, "rb") as handle:
        data = pickle.load(handle)
    clock.lap("read")
    indexer = LuceneIndexer(index_dir, threads=1)
    indexer.add_batch_dict([{"id": str(i), "contents": d} for i, d in enumerate(data["documents"])])
    indexer.close()
    clock.lap("index")
    searcher = LuceneSearcher(index_dir)
    searcher.set_bm25(0.9, 0.4)
    queries = data["queries"]
    searcher.batch_search(queries, [str(i) for i in range(len(queries))], k=K, threads=1)
    clock.lap("search")
    return {"phases": clock.phases}


class Bench:
    def __init__(self, work: Path, split: str) -> None:
        self.work, self.split = work, split
        self.script = str(Path(__file__).resolve())
        self.inputs = work / "inputs.pkl"
        self.registry = work / "registry.yaml"
        self.registry.write_text(BM25S_REGISTRY)
        self.bm25 = timing.ColdWarm(work / "caches", lambda cache: self.harness("bm25", cache))
        self.analysis = timing.ColdWarm(work / "caches", lambda cache: self.harness("bm25-bm25s-analysis", cache))

    def env(self, cache: Path) -> dict[str, str]:
        return timing.environment("1", cache=cache)

    def harness(self, retriever: str, cache: Path) -> Sample:
        out = timing.fresh_dir(self.work / "runs", "out")
        args = ["run", "-r", retriever, "-d", "debian", "-s", self.split, "--output", str(out), "--device", "cpu"]
        try:
            return timing.harness_cli([*args, "--registry", str(self.registry)], self.env(cache))
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def reference(self, name: str, *args: str) -> Sample:
        sample = timing.run_child([self.script, "--child", name, *args], self.env(self.work / "scratch-cache"))
        return timing.of_phases(sample, ("tokenize", "index", "search"))

    def pyserini(self) -> Sample:
        index = timing.fresh_dir(self.work / "lucene", "index")
        try:
            return self.reference("pyserini", str(self.inputs), str(index))
        finally:
            shutil.rmtree(index, ignore_errors=True)

    def close(self) -> None:
        self.bm25.close()
        self.analysis.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each kind, alternated")
    parser.add_argument("--split", default="test")
    parser.add_argument("--workdir", type=Path, default=None, help="keep inputs, caches and runs here")
    args = parser.parse_args()
    work, cleanup = timing.workdir(args.workdir, "bench-bm25-")
    bench = Bench(work, args.split)
    try:
        started = time.perf_counter()
        made = timing.run_child(
            [bench.script, "--child", "documents", args.split, str(bench.inputs)], bench.env(work / "scratch-cache")
        )
        print(
            f"Debian SKB: {made.info['documents']:,} candidate documents, {made.info['queries']} {args.split} "
            f"queries (inputs prepared in {time.perf_counter() - started:.0f} s); top {K}; every process pinned "
            f"to 1 thread; {args.repeat} runs of each, alternated"
        )
        runs: dict[str, Any] = {"harness bm25 cold": bench.bm25.cold}
        if installed("pyserini"):
            runs["Pyserini alone"] = bench.pyserini
        runs["harness bm25 warm"] = bench.bm25.warm
        runs["bm25s alone"] = lambda: bench.reference("bm25s", str(bench.inputs))
        runs["harness bm25 (bm25s analysis) cold"] = bench.analysis.cold
        report(timing.alternate(runs, args.repeat))
    finally:
        bench.close()
        cleanup()


def report(series: dict[str, Series]) -> None:
    cold, warm = series["harness bm25 cold"], series["harness bm25 warm"]
    analysis, raw = series["harness bm25 (bm25s analysis) cold"], series["bm25s alone"]
    lucene = series.get("Pyserini alone")
    print("\nharness CLI, whole process (other: start, imports, plugins; then the runner's phases)")
    timing.table([cold, warm, analysis], timing.HARNESS_COLUMNS)
    print("\nreferences (compared: index + search; bm25s: tokenize + index + search)")
    references = [s for s in (lucene, raw) if s is not None]
    timing.table(references, ("start", "import", "read", "tokenize", "index", "search"))
    print()
    goals = Goals()
    goals.ratio("first run / second run (index cached, new output dir), end to end", cold, warm, at_least=10)
    if lucene is not None:
        build_search = Series(
            "harness bm25 cold (build + search)", [timing.of_phases(s, ("build", "search")) for s in cold.samples]
        )
        figure = "harness bm25 (Lucene analysis) / Pyserini, index + search, 1 thread each"
        goals.ratio(figure, build_search, lucene, at_most=1.5)
        print(timing.ratio_line(cold, lucene, " (harness end to end, Pyserini index + search)"))
    print(timing.ratio_line(analysis, raw, " (harness end to end, bm25s tokenize + index + search)"))
    goals.summary()


if __name__ == "__main__":
    timing.child_main({"documents": documents_child, "bm25s": bm25s_child, "pyserini": pyserini_child})
    main()
