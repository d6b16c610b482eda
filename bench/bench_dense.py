"""Dense retrieval on the Debian SKB: the harness's ``dense`` retriever against sentence-transformers
alone, with the same model, documents and settings.

    python bench/bench_dense.py [--docs 2000] [--max-length 64] [--repeat 3] [--threads default,1]

Every timed run is a fresh process, alternated, once per thread setting (torch's default, and
pinned to 1 thread):

* sentence-transformers alone: load the model, ``SentenceTransformer.encode`` the first
  ``--docs`` candidate documents (batch 64, normalised), then encode the test queries and take
  the top 100 by a torch matrix product + ``topk``; documents and queries are read from a file
  written beforehand;
* harness, cold: ``DenseRetriever.build`` with an empty cache (documents, model, encoding, cache
  write), then ``search`` in the runner's batches of 64; warm: the same with the cache a cold
  run left.

Compared: the harness's build with sentence-transformers' load + encode; search with search.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any

import timing
from references import write_inputs
from timing import Sample, Series

K = 100
BATCH = 64


def inputs_child(docs: str, out: str) -> dict[str, Any]:
    from harness_debian.dataset import DebianDataset

    dataset = DebianDataset()
    skb = dataset.load_skb()
    documents = list(skb.documents(skb.candidate_ids[: int(docs)]))
    return write_inputs(out, documents, [q.text for q in dataset.load_queries().split("test")])


def sentence_transformers_child(model_path: str, inputs: str, max_length: str) -> dict[str, Any]:
    clock = timing.Clock()
    timing.pin_torch()
    import torch
    from sentence_transformers import SentenceTransformer

    clock.lap("import")
    with open(inputs, "rb") as handle:
        data = pickle.load(handle)
    clock.lap("read")
    model = SentenceTransformer(model_path, device="cpu", local_files_only=True)
    model.max_seq_length = int(max_length)
    clock.lap("load")
    encode = {"batch_size": BATCH, "normalize_embeddings": True, "convert_to_numpy": True}
    matrix = torch.from_numpy(model.encode(data["documents"], **encode))
    clock.lap("encode")
    queries = torch.from_numpy(model.encode(data["queries"], **encode))
    torch.topk(queries @ matrix.T, min(K, len(matrix)), dim=1)
    clock.lap("search")
    return {"phases": clock.phases, "threads": torch.get_num_threads()}


def harness_child(docs: str, max_length: str) -> dict[str, Any]:
    clock = timing.Clock()
    timing.pin_torch()
    import os

    import sentence_transformers  # noqa: F401  # imported in build otherwise; the reference's import is not compared

    from harness.retriever import BuildContext
    from harness_debian.dataset import DebianDataset
    from harness_dense.retrievers import DenseRetriever

    clock.lap("import")
    dataset = DebianDataset()
    skb = dataset.load_skb()
    skb.candidate_ids = skb.candidate_ids[: int(docs)]
    queries = dataset.load_queries().split("test")
    clock.lap("load")
    retriever = DenseRetriever(max_length=int(max_length))
    retriever.build(skb, BuildContext(cache_dir=Path(os.environ["HARNESS_CACHE"]), device="cpu"))
    clock.lap("build")
    for start in range(0, len(queries), BATCH):
        retriever.search(queries[start : start + BATCH], K)
    clock.lap("search")
    return {"phases": clock.phases}


class Bench:
    def __init__(self, work: Path, args: argparse.Namespace, model_path: str) -> None:
        self.work, self.args, self.model_path = work, args, model_path
        self.script = str(Path(__file__).resolve())
        self.inputs = work / "inputs.pkl"

    def reference(self, threads: str) -> Sample:
        argv = [self.script, "--child", "st", self.model_path, str(self.inputs), str(self.args.max_length)]
        return timing.of_phases(timing.run_child(argv, timing.environment(threads)), ("load", "encode"))

    def harness(self, threads: str) -> timing.ColdWarm:
        """Cold and warm builds with one thread setting."""

        def run(cache: Path) -> Sample:
            argv = [self.script, "--child", "harness", str(self.args.docs), str(self.args.max_length)]
            return timing.of_phases(timing.run_child(argv, timing.environment(threads, cache=cache)), ("build",))

        return timing.ColdWarm(self.work / "caches", run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each kind, alternated")
    parser.add_argument("--threads", default="default,1", help="thread settings, each run separately")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    from harness_dense.embeddings import DEFAULT_MODEL, resolve_model_path

    work, cleanup = timing.workdir(args.workdir, "bench-dense-")
    bench = Bench(work, args, str(resolve_model_path(DEFAULT_MODEL)))
    try:
        made = timing.run_child(
            [bench.script, "--child", "inputs", str(args.docs), str(bench.inputs)], timing.environment()
        )
        print(
            f"{made.info['documents']:,} Debian documents, {made.info['queries']} test queries, {DEFAULT_MODEL}, "
            f"max_length {args.max_length}, CPU; {args.repeat} runs of each, alternated"
        )
        for threads in args.threads.split(","):
            harness = bench.harness(threads)
            runs = {
                f"sentence-transformers, threads={threads}": lambda t=threads: bench.reference(t),
                f"harness cold, threads={threads}": harness.cold,
                f"harness warm, threads={threads}": harness.warm,
            }
            try:
                report(list(timing.alternate(runs, args.repeat).values()), made.info["documents"])
            finally:
                harness.close()
    finally:
        cleanup()


def report(series: list[Series], documents: int) -> None:
    reference, cold, warm = series
    print(f"\n{reference.samples[0].info['threads']} torch threads (compared: build; reference load + encode)")
    timing.table(series, ("import", "read", "load", "encode", "build", "search"))
    print(f"  sentence-transformers alone: {documents / reference.phase('encode'):.0f} documents/s encoding")
    print(timing.ratio_line(cold, reference, " (build)"))
    print(timing.ratio_line(warm, cold, " (build)"))
    searches = [Series(s.label, [Sample(x.phases["search"]) for x in s.samples]) for s in (reference, cold)]
    print(timing.ratio_line(searches[1], searches[0], " (search, query encoding included)"))


if __name__ == "__main__":
    timing.child_main({"inputs": inputs_child, "st": sentence_transformers_child, "harness": harness_child})
    main()
