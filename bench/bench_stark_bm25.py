"""``harness run -r bm25-stark -d stark-prime`` on a Prime-sized SKB, against bm25s alone and the
official STaRK loop on the same release.

    python bench/bench_stark_bm25.py [--root DIR] [--repeat 3] [--official-queries 100]
                                     [--official-threads default,1] [--documents harness|official]

The release is ``--root`` (``skb/prime/processed`` and ``qa/prime`` in the official layout); when
it does not hold one, a synthetic Prime-sized one is written there first (``stark_synthetic``,
with the real query set from ``--qa``). Every timed run is a fresh process, alternated:

* harness, cold: ``harness run`` with an empty ``HARNESS_CACHE`` (what a first run pays: load and
  convert the SKB, build documents, index, search, evaluate, write);
* harness, warm: the same with the cache a cold run left and a new output directory;
* bm25s alone: ``bm25s.tokenize`` + ``BM25().index`` + ``retrieve`` top 100 of the test queries,
  bm25s's defaults as ``stark_qa.models.BM25`` uses them, on the same documents (``--documents``:
  the harness SKB's, or the official ``get_doc_info``'s), read from a file written beforehand;
* the official loop (stark-qa 1.1.0, as its ``eval.py``): ``PrimeSKB(root,
  download_processed=False)``, ``BM25(skb)``, then for every test query ``model.forward(query,
  qid)`` and ``Evaluator(candidate_ids)(pred, answers, metrics)`` with its 14 metrics (with the
  one fix every user needs: the model's bm25s index is told to return positions). Its
  per-query part is timed on ``--official-queries`` queries spread over the split and
  extrapolated to the whole split (marked ``*``); setup is measured in full. Torch's thread
  count changes its cost several-fold, so it runs with each of ``--official-threads``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any

import timing
from references import bm25s_alone, write_inputs
from timing import Goals, Sample, Series

SPLIT = "test"
K = 100


def documents_child(root: str, kind: str, out: str) -> dict[str, Any]:
    """Write the candidate documents and the split's query texts for bm25s alone."""
    if kind == "official":
        from references import local_qa, stark_qa

        stark_qa()
        from stark_qa.skb import PrimeSKB

        skb = PrimeSKB(str(Path(root) / "skb" / "prime"), download_processed=False)
        documents = [skb.get_doc_info(i) for i in skb.candidate_ids]
        qa = local_qa("prime", str(Path(root) / "qa"))
        queries = [qa[int(i)][0] for i in qa.get_idx_split()[SPLIT]]
    else:
        from harness_stark.datasets import StarkPrime

        dataset = StarkPrime(data_dir=root)
        harness_skb = dataset.load_skb()
        documents = list(harness_skb.documents(harness_skb.candidate_ids))
        queries = [q.text for q in dataset.load_queries().split(SPLIT)]
    return write_inputs(out, documents, queries)


def bm25s_child(inputs: str) -> dict[str, Any]:
    """bm25s alone with its defaults, as ``stark_qa.models.BM25`` calls it (batch retrieval)."""
    return bm25s_alone(inputs, K, {})


def official_child(root: str, queries: str) -> dict[str, Any]:
    """The official loop; the per-query part on ``queries`` queries spread over the split."""
    clock = timing.Clock()
    timing.pin_torch()
    import torch
    from references import STARK_METRICS, local_qa, stark_qa

    stark_qa()
    from stark_qa.models import BM25
    from stark_qa.skb import PrimeSKB

    clock.lap("import")
    skb = PrimeSKB(str(Path(root) / "skb" / "prime"), download_processed=False)
    clock.lap("load")
    model = BM25(skb)
    # stark_qa passes ``corpus=`` to ``bm25s.BM25``, so ``retrieve`` returns document texts where
    # ``forward`` expects positions (a KeyError on every query); without it, the positions.
    model.retriever.corpus = None
    clock.lap("index")
    qa = local_qa("prime", str(Path(root) / "qa"))
    split = qa.get_idx_split()[SPLIT].tolist()
    clock.lap("queries")
    n = min(int(queries), len(split))
    chosen = sorted({split[round(i * (len(split) - 1) / max(n - 1, 1))] for i in range(n)})
    for index in chosen:
        query, query_id, answer_ids, _ = qa[index]
        clock.lap("read query")
        pred_dict = model.forward(query, query_id)
        clock.lap("search")
        model.evaluator(pred_dict, torch.LongTensor(answer_ids), metrics=STARK_METRICS)
        clock.lap("evaluate")
    per_query = sum(clock.phases[p] for p in ("read query", "search", "evaluate")) / len(chosen)
    return {
        "phases": clock.phases,
        "measured": len(chosen),
        "split": len(split),
        "per_query": per_query,
        "threads": torch.get_num_threads(),
    }


class Bench:
    """The runs of one invocation and the directories they share."""

    def __init__(self, root: Path, work: Path, args: argparse.Namespace) -> None:
        self.root, self.work, self.args = root, work, args
        self.script = str(Path(__file__).resolve())
        self.harness = timing.ColdWarm(work / "caches", self.run_harness)

    def run_harness(self, cache: Path) -> Sample:
        out = timing.fresh_dir(self.work / "runs", "out")
        args = ["run", "-r", "bm25-stark", "-d", "stark-prime", "-s", SPLIT, "--data-dir", str(self.root)]
        args += ["--output", str(out), "--device", "cpu", "-m", ",".join(self.args.metrics)]
        try:
            return timing.harness_cli(args, timing.environment(cache=cache))
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def bm25s(self) -> Sample:
        sample = timing.run_child([self.script, "--child", "bm25s", str(self.work / "inputs.pkl")], self.env())
        return timing.of_phases(sample, ("tokenize", "index", "search"))

    def official(self, threads: str) -> Sample:
        argv = [self.script, "--child", "official", str(self.root), str(self.args.official_queries)]
        sample = timing.run_child(argv, self.env(threads))
        left = sample.info["split"] - sample.info["measured"]
        return Sample(sample.seconds + left * sample.info["per_query"], sample.phases, sample.info)

    def env(self, threads: str = "default") -> dict[str, str]:
        return timing.environment(threads, cache=self.work / "scratch-cache")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp/prime"), help="the release (written when missing)")
    parser.add_argument(
        "--qa", type=Path, default=Path(os.environ.get("STARK_DATA_DIR", "/work/shared/stark")) / "qa" / "prime"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each kind, alternated")
    parser.add_argument("--official-queries", type=int, default=100, help="queries the official loop is timed on")
    parser.add_argument("--official-threads", default="default,1", help="torch thread settings to run it with")
    parser.add_argument("--documents", choices=["harness", "official"], default="harness")
    parser.add_argument("--no-official", action="store_true", help="leave the official loop out")
    parser.add_argument("--workdir", type=Path, default=None, help="keep inputs, caches and runs here")
    args = parser.parse_args()
    from references import HARNESS_METRICS
    from stark_synthetic import prime_ready, write_prime

    args.metrics = HARNESS_METRICS
    if not prime_ready(args.root):
        started = time.perf_counter()
        write_prime(args.root, qa=args.qa)
        print(f"wrote a synthetic Prime-sized release to {args.root} in {time.perf_counter() - started:.0f} s")
    work, cleanup = timing.workdir(args.workdir, "bench-stark-")
    bench = Bench(args.root, work, args)
    try:
        started = time.perf_counter()
        made = timing.run_child(
            [bench.script, "--child", "documents", str(args.root), args.documents, str(work / "inputs.pkl")],
            bench.env(),
        )
        print(
            f"release {args.root}: {made.info['documents']:,} candidate documents ({args.documents} "
            f"documents for bm25s alone, prepared in {time.perf_counter() - started:.0f} s), "
            f"{made.info['queries']:,} {SPLIT} queries, top {K}, {len(args.metrics)} metrics; "
            f"{os.cpu_count()} CPUs; {args.repeat} runs of each, alternated"
        )
        runs: dict[str, Any] = {
            "harness cold": bench.harness.cold,
            "bm25s alone": bench.bm25s,
            "harness warm": bench.harness.warm,
        }
        thread_settings = [] if args.no_official else args.official_threads.split(",")
        for threads in thread_settings:
            runs[f"official, threads={threads}"] = lambda threads=threads: bench.official(threads)
        series = timing.alternate(runs, args.repeat)
        report(series, thread_settings)
    finally:
        bench.harness.close()
        cleanup()


def report(series: dict[str, Series], thread_settings: list[str]) -> None:
    cold, warm, raw = series["harness cold"], series["harness warm"], series["bm25s alone"]
    print("\nharness CLI, whole process (other: start, imports, plugins; then the runner's phases)")
    timing.table([cold, warm], timing.HARNESS_COLUMNS)
    print("\nbm25s alone (compared: tokenize + index + search)")
    timing.table([raw], ("read", "tokenize", "index", "search"))
    print(f"  process wall (start, import, read documents included): {raw.info('process'):.2f} s (median)")
    official = [series[f"official, threads={t}"] for t in thread_settings if f"official, threads={t}" in series]
    if official:
        first = official[0].samples[0].info
        print(
            f"\nofficial loop (* extrapolated: setup measured in full, the per-query part on "
            f"{first['measured']} of {first['split']} queries, whose phases are shown)"
        )
        for s in official:
            s.mark = "*"
        timing.table(official, ("import", "load", "index", "queries", "read query", "search", "evaluate"))
        for s in official:
            threads = s.samples[0].info["threads"]
            print(f"  {s.label}: {1e3 * s.info('per_query'):.0f} ms/query (torch threads {threads})")

    print()
    goals = Goals()
    goals.ratio("cold harness run / bm25s alone", cold, raw, at_most=1.2)
    if official:
        best = min(official, key=lambda s: s.median)
        goals.ratio(f"official loop at its best ({best.label}) / cold harness run", best, cold, at_least=8)
    search = warm.phase("search")
    limit = 1.1 * search + 5
    goals.check(
        "warm harness run",
        f"{warm.median:.2f} s (median; search {search:.2f} s, limit search + 10% + 5 s = {limit:.2f} s)",
        "<= search + 10% + 5 s",
        warm.median <= limit,
    )
    print(timing.ratio_line(cold, warm))
    goals.summary()


if __name__ == "__main__":
    timing.child_main({"documents": documents_child, "bm25s": bm25s_child, "official": official_child})
    main()
