"""Hold an Amazon-sized graph (1.0M nodes, 9.4M edges) in the core SKB.

    python bench/bench_skb_scale.py [--nodes 1000000] [--edges 9400000] [--repeat 3]

Names and fields are lazy sequences (as a loader backed by files would provide), so this
measures the graph side: CSR construction, neighbour look-ups, document building, and peak
memory. Reference, alternated with it in this process: scipy.sparse's CSR construction over
the same edges, in both directions (what the SKB's two CSRs hold, less its grouping by
relation).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import timing

from harness.skb import SKB, EdgeType


class LazyNames(Sequence[str]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        return f"node {i}"


class LazyFields(Sequence[dict]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        return {"description": f"synthetic description of node {i}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=9_400_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternated")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    src = rng.integers(0, args.nodes, args.edges, dtype=np.int64)
    dst = rng.integers(0, args.nodes, args.edges, dtype=np.int64)
    etype = rng.integers(0, 4, args.edges, dtype=np.int32)
    node_types = (rng.random(args.nodes) < 0.95).astype(np.int32)
    before = timing.peak_mib()
    built: list[SKB] = []

    def harness_csr() -> float:
        started = time.perf_counter()
        skb = SKB(
            "synthetic",
            ["brand", "product"],
            node_types,
            LazyNames(args.nodes),
            LazyFields(args.nodes),
            [EdgeType(f"r{i}", f"rel {i}", f"inverse {i}") for i in range(4)],
            src,
            dst,
            etype,
            candidate_types=["product"],
            fingerprint="synthetic",
        )
        skb.neighbors(0)  # builds both CSRs
        built[:] = [skb]
        return time.perf_counter() - started

    def scipy_csr() -> float:
        import scipy.sparse

        started = time.perf_counter()
        ones = np.ones(args.edges, dtype=np.int8)
        scipy.sparse.csr_matrix((ones, (src, dst)), shape=(args.nodes, args.nodes))
        scipy.sparse.csr_matrix((ones, (dst, src)), shape=(args.nodes, args.nodes))
        return time.perf_counter() - started

    series = timing.alternate({"harness SKB (both CSRs)": harness_csr, "scipy.sparse CSR x2": scipy_csr}, args.repeat)
    skb = built[0]
    started = time.perf_counter()
    for node in rng.integers(0, args.nodes, 10_000):
        skb.neighbors(int(node), "r1", "out")
    lookups = (time.perf_counter() - started) / 10_000
    started = time.perf_counter()
    for node in range(1000):
        skb.document(node, with_relations=True)
    documents = (time.perf_counter() - started) / 1000

    print(f"{args.nodes:,} nodes, {args.edges:,} edges, {len(skb.candidate_ids):,} candidates")
    timing.table(series.values())
    harness, scipy = series.values()
    print(timing.ratio_line(harness, scipy))
    print(f"neighbours by relation   {1e6 * lookups:6.1f} µs/lookup")
    print(f"document with relations  {1e3 * documents:6.2f} ms/document")
    print(f"peak RSS {timing.peak_mib():,.0f} MiB (edges alone: {before:,.0f} MiB before the SKB)")


if __name__ == "__main__":
    main()
