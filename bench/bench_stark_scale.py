"""Load a synthetic SKB of STaRK-Amazon's size, written in the official processed format.

    python bench/bench_stark_scale.py [--products 957192] [--meta 78350] [--edges 9443802]
                                      [--tokens-per-product 600] [--workdir DIR]

STaRK-Amazon has 1,035,542 nodes (957,192 products; brands, categories and colours), 9.4M
edges and about 592M tokens of text. This writes ``node_info.pkl`` (products with titles,
descriptions, features, reviews and Q&A drawn from a random vocabulary), the edge tensors and
the type dictionaries, then times ``harness_stark`` loading it and building documents, and
reports peak memory (goal: under 8 GiB). Reference in the same run: ``pickle.load`` of the
same ``node_info.pkl`` alone — the floor any loader of the official format pays.
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LOADER = """
import resource, sys, time
started = time.perf_counter()
from harness_stark.datasets import StarkAmazon
skb = StarkAmazon(data_dir=sys.argv[1]).load_skb()
loaded = time.perf_counter() - started
started = time.perf_counter()
n = 0
for doc in skb.documents(skb.candidate_ids[:20000], with_relations=True):
    n += len(doc)
docs = time.perf_counter() - started
print(loaded, docs / 20000, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, skb.num_nodes, skb.num_edges)
started = time.perf_counter()
StarkAmazon(data_dir=sys.argv[1]).load_skb()
print(time.perf_counter() - started)
"""

PICKLE_ONLY = """
import pickle, resource, sys, time
started = time.perf_counter()
with open(sys.argv[1], "rb") as handle:
    pickle.load(handle)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def write_synthetic(root: Path, products: int, meta: int, edges: int, tokens: int, seed: int = 0) -> Path:
    import torch

    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(50_000)])
    pool = " ".join(rng.choice(vocabulary, size=2_000_000))  # slices of it make the texts
    words_per_char = 1 / 7

    def text(n_tokens: int) -> str:
        length = int(n_tokens / words_per_char)
        start = int(rng.integers(0, len(pool) - length - 1))
        return pool[start : start + length]

    node_info: dict[int, dict] = {}
    brands = meta // 3
    for i in range(products):
        n_reviews = int(rng.integers(0, 12))
        review_tokens = max(tokens - 120, 0) // max(n_reviews, 1)
        node_info[i] = {
            "asin": f"B{i:09d}",
            "title": text(12),
            "brand": f"brand {i % brands}",
            "details": {"product_dimensions": "10 x 5 x 2 inches ; 1 pounds"},
            "description": [text(40)],
            "feature": [text(10) for _ in range(3)],
            "review": [
                {"summary": text(6), "reviewText": text(review_tokens), "vote": str(int(rng.integers(0, 50)))}
                for _ in range(n_reviews)
            ],
            "qa": [{"question": text(10), "answer": text(15)} for _ in range(int(rng.integers(0, 3)))],
        }
    kinds = ["brand", "category", "color"]
    for j in range(meta):
        kind = kinds[0] if j < brands else kinds[1 + j % 2]
        node_info[products + j] = {f"{kind}_name": f"{kind} {j}"}
    node_types = [0] * products + [1 if j < brands else 2 + j % 2 for j in range(meta)]
    half = edges // 2  # the official files hold both directions
    src = rng.integers(0, products, half)
    dst = np.where(
        rng.random(half) < 0.8, rng.integers(0, products, half), rng.integers(products, products + meta, half)
    )
    meta_kind = np.where(np.arange(meta) < brands, 0, 1 + np.arange(meta) % 2)  # brand, category, colour
    types = np.where(dst < products, rng.integers(0, 2, half), 2 + meta_kind[np.clip(dst - products, 0, meta - 1)])
    edge_index = torch.from_numpy(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]))
    directory = root / "skb" / "amazon" / "processed" / "cache" / "brand-category-color"
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "node_info.pkl").open("wb") as handle:
        pickle.dump(node_info, handle, protocol=pickle.HIGHEST_PROTOCOL)
    del node_info
    gc.collect()
    torch.save(edge_index, directory / "edge_index.pt")
    torch.save(torch.from_numpy(np.concatenate([types, types])), directory / "edge_types.pt")
    torch.save(torch.LongTensor(node_types), directory / "node_types.pt")
    for name, value in (
        ("edge_type_dict", {0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"}),
        ("node_type_dict", {0: "product", 1: "brand", 2: "category", 3: "color"}),
    ):
        with (directory / f"{name}.pkl").open("wb") as handle:
            pickle.dump(value, handle)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--products", type=int, default=957_192)
    parser.add_argument("--meta", type=int, default=78_350)
    parser.add_argument("--edges", type=int, default=9_443_802)
    parser.add_argument("--tokens-per-product", type=int, default=600)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true", help="keep files already written in --workdir")
    args = parser.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="stark-scale-"))
    started = time.perf_counter()
    directory = root / "skb" / "amazon" / "processed" / "cache" / "brand-category-color"
    if not (args.reuse and (directory / "node_types.pt").exists()):
        directory = write_synthetic(root, args.products, args.meta, args.edges, args.tokens_per_product)
    size = sum(f.stat().st_size for f in directory.iterdir()) / 2**30
    print(
        f"synthetic SKB in the official format: {directory} ({size:.1f} GiB), "
        f"ready in {time.perf_counter() - started:.0f} s"
    )
    shutil.rmtree(root / "cache", ignore_errors=True)  # measure the first load, conversion included
    env = {**os.environ, "HARNESS_CACHE": str(root / "cache")}
    floor = subprocess.run(
        [sys.executable, "-c", PICKLE_ONLY, str(directory / "node_info.pkl")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    out = subprocess.run(
        [sys.executable, "-c", LOADER, str(root)], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    loaded, per_doc, peak, nodes, n_edges = float(out[0]), float(out[1]), float(out[2]), int(out[3]), int(out[4])
    reload = float(out[5])
    print(f"{nodes:,} nodes, {n_edges:,} edges")
    print(f"pickle.load(node_info.pkl) alone   {float(floor[0]):7.1f} s   peak {float(floor[1]) / 1024:5.2f} GiB")
    print(
        f"harness_stark first load (converts){loaded:7.1f} s   peak {peak / 1024:5.2f} GiB"
        f"   ratio {loaded / float(floor[0]):4.2f}x   goal < 8 GiB: {'met' if peak / 1024 < 8 else 'MISSED'}"
    )
    print(f"harness_stark reload (cached store) {reload:6.1f} s")
    print(f"document with relations            {1e3 * per_doc:7.3f} ms/document")


if __name__ == "__main__":
    main()
