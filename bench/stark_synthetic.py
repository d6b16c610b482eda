"""Synthetic STaRK SKBs of the real releases' sizes, written in the official processed format.

    python bench/stark_synthetic.py prime DIR [--nodes 129375] [--edges 8100498] [--words-per-node 240]
                                              [--qa QA_PRIME_DIR]
    python bench/stark_synthetic.py amazon DIR [--nodes 957192] [--meta 78350] [--edges 9443802]
                                               [--words-per-node 600]

``write_prime`` writes ``DIR/skb/prime/processed/`` (``node_info.pkl``, ``edge_index.pt``,
``edge_types.pt``, ``node_types.pt`` and the two type dictionaries) as the release lays it out:
STaRK-Prime's 129,375 nodes in PrimeKG's type proportions, 8.1M edge entries (every edge stored
both ways, as the release does, under 18 relations), and node texts shaped like Prime's
(``name``, ``type``, ``source``, ``details`` with gene fields, drug and disease descriptions,
GO definitions). Words are drawn, Zipf-like, from the real queries' vocabulary plus filler, so
the real query sets (``DIR/qa/prime``, copied from ``--qa``) match documents as real ones do.

``write_amazon`` writes ``DIR/skb/amazon/processed/cache/brand-category-color/``: STaRK-Amazon's
957,192 products (titles, descriptions, features, reviews and Q&A from a random vocabulary),
78,350 brand, category and colour nodes, and 9.4M edge entries (both ways) under the release's
five relations; about 600 tokens of text per product, as the release's 592M tokens.

The official ``stark_qa`` loaders and the harness both read the results.
"""

from __future__ import annotations

import argparse
import csv
import pickle
import re
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

PRIME_TYPES = {  # PrimeKG's node types and their counts in the release
    "gene/protein": 27_671,
    "drug": 7_957,
    "effect/phenotype": 15_311,
    "disease": 17_080,
    "biological_process": 28_642,
    "molecular_function": 11_169,
    "cellular_component": 4_176,
    "exposure": 818,
    "pathway": 2_516,
    "anatomy": 14_035,
}
PRIME_RELATIONS = [
    "ppi",
    "carrier",
    "enzyme",
    "target",
    "transporter",
    "contraindication",
    "indication",
    "off-label use",
    "synergistic interaction",
    "associated with",
    "parent-child",
    "phenotype absent",
    "phenotype present",
    "side effect",
    "interacts with",
    "linked to",
    "expression present",
    "expression absent",
]


class Words:
    """Zipf-like word draws from a vocabulary (the real queries' words first, then filler)."""

    def __init__(self, seed_words: list[str], size: int = 60_000, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        filler = [f"w{i}" for i in range(max(size - len(seed_words), 0))]
        self.vocabulary = np.array(seed_words + filler)
        weights = 1 / np.arange(1, len(self.vocabulary) + 1) ** 0.9
        order = self.rng.permutation(len(self.vocabulary))  # query words spread over the ranks
        self.p = weights[order] / weights.sum()
        self._pool = self.rng.choice(self.vocabulary, size=4_000_000, p=self.p)
        self._at = 0

    def text(self, n: int) -> str:
        if self._at + n > len(self._pool):
            self._at = 0
        words = self._pool[self._at : self._at + n]
        self._at += n
        return " ".join(words.tolist())


def query_words(qa_dir: Path | None) -> list[str]:
    """The distinct lower-case words of a STaRK query file, if there is one."""
    if qa_dir is None:
        return []
    found: dict[str, None] = {}
    for path in sorted(qa_dir.glob("stark_qa/*.csv")):
        with path.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                for word in re.findall(r"[a-z][a-z0-9-]+", row["query"].lower()):
                    found.setdefault(word)
    return list(found)


def _details(kind: str, words: Words, rng: np.random.Generator, budget: int) -> Any:
    if kind == "gene/protein":
        return {
            "name": words.text(4),
            "type_of_gene": "protein-coding",
            "alias": [words.text(1) for _ in range(3)],
            "genomic_pos": {"chr": str(int(rng.integers(1, 23))), "start": int(rng.integers(1, 10**8)), "strand": 1},
            "generif": [{"pubmed": k, "text": words.text(budget // 6)} for k in range(4)],
            "interpro": [{"desc": words.text(5), "id": f"IPR{k}"} for k in range(2)],
            "summary": words.text(budget // 4),
            "_id": "1",
        }
    if kind == "drug":
        return {
            "description": words.text(budget // 2),
            "indication": words.text(budget // 4),
            "mechanism_of_action": words.text(budget // 4),
            "state": "solid",
            "molecular_weight": float(rng.random() * 500),
        }
    if kind == "disease":
        return {
            "mondo_definition": words.text(budget // 3),
            "umls_description": words.text(budget // 3),
            "mayo_symptoms": words.text(budget // 3),
        }
    if kind in ("biological_process", "molecular_function", "cellular_component"):
        return {"go_id": "GO:1", "go_def": words.text(budget // 2), "go_name": words.text(4)}
    if kind == "pathway":
        return {"displayName": words.text(5), "summation": [words.text(budget // 2)]}
    return None


def write_prime(
    root: Path,
    nodes: int = 129_375,
    edges: int = 8_100_498,
    words_per_node: int = 240,
    qa: Path | None = None,
    seed: int = 0,
) -> Path:
    """Write a Prime-sized SKB (and copy the real query set from ``qa``); returns the processed directory."""
    rng = np.random.default_rng(seed)
    words = Words(query_words(qa), seed=seed)
    names = list(PRIME_TYPES)
    counts = np.array(list(PRIME_TYPES.values()), dtype=np.float64)
    node_types = rng.choice(len(names), size=nodes, p=counts / counts.sum())
    node_info: dict[int, Any] = {}
    for i in range(nodes):
        kind = names[int(node_types[i])]
        info: dict[str, Any] = {"id": str(i), "type": kind, "name": words.text(3), "source": "NCBI"}
        details = _details(kind, words, rng, int(rng.integers(words_per_node // 2, words_per_node * 3 // 2)))
        if details is not None:
            info["details"] = details
        node_info[i] = info
    half = edges // 2  # the release stores every edge both ways
    src = rng.integers(0, nodes, half)
    dst = rng.integers(0, nodes, half)
    types = rng.integers(0, len(PRIME_RELATIONS), half)
    directory = root / "skb" / "prime" / "processed"
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "node_info.pkl").open("wb") as handle:
        pickle.dump(node_info, handle, protocol=pickle.HIGHEST_PROTOCOL)
    del node_info
    edge_index = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])
    _write_graph(directory, edge_index, np.concatenate([types, types]), node_types.astype(np.int64))
    _write_type_dicts(directory, dict(enumerate(PRIME_RELATIONS)), dict(enumerate(names)))
    if qa is not None:
        shutil.copytree(qa, root / "qa" / "prime", dirs_exist_ok=True)
    return directory


def prime_ready(root: Path) -> bool:
    """Whether ``root`` holds a complete synthetic (or real) Prime release with its queries."""
    processed = root / "skb" / "prime" / "processed"
    needed = ["node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt", "edge_type_dict.pkl"]
    return all((processed / name).is_file() for name in needed) and (root / "qa" / "prime" / "split").is_dir()


AMAZON_VARIANT = "brand-category-color"  # the release's processed graph with these meta links
AMAZON_RELATIONS = {0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"}
AMAZON_TYPES = {0: "product", 1: "brand", 2: "category", 3: "color"}


def write_amazon(
    root: Path,
    products: int = 957_192,
    meta: int = 78_350,
    edges: int = 9_443_802,
    words_per_node: int = 600,
    seed: int = 0,
) -> Path:
    """Write an Amazon-sized SKB (products, then brand, category and colour nodes); returns the
    processed directory."""
    import gc

    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(50_000)])
    pool = " ".join(rng.choice(vocabulary, size=2_000_000))  # slices of it make the texts
    chars_per_word = 7

    def text(words: int) -> str:
        length = words * chars_per_word
        start = int(rng.integers(0, len(pool) - length - 1))
        return pool[start : start + length]

    node_info: dict[int, dict[str, Any]] = {}
    brands = meta // 3
    for i in range(products):
        n_reviews = int(rng.integers(0, 12))
        review_words = max(words_per_node - 120, 0) // max(n_reviews, 1)
        node_info[i] = {
            "asin": f"B{i:09d}",
            "title": text(12),
            "brand": f"brand {i % brands}",
            "details": {"product_dimensions": "10 x 5 x 2 inches ; 1 pounds"},
            "description": [text(40)],
            "feature": [text(10) for _ in range(3)],
            "review": [
                {"summary": text(6), "reviewText": text(review_words), "vote": str(int(rng.integers(0, 50)))}
                for _ in range(n_reviews)
            ],
            "qa": [{"question": text(10), "answer": text(15)} for _ in range(int(rng.integers(0, 3)))],
        }
    kinds = ["brand", "category", "color"]
    for j in range(meta):
        kind = kinds[0] if j < brands else kinds[1 + j % 2]
        node_info[products + j] = {f"{kind}_name": f"{kind} {j}"}
    node_types = [0] * products + [1 if j < brands else 2 + j % 2 for j in range(meta)]
    half = edges // 2  # the release stores every edge both ways
    src = rng.integers(0, products, half)
    to_product = rng.random(half) < 0.8
    dst = np.where(to_product, rng.integers(0, products, half), rng.integers(products, products + meta, half))
    meta_kind = np.where(np.arange(meta) < brands, 0, 1 + np.arange(meta) % 2)  # brand, category, colour
    types = np.where(dst < products, rng.integers(0, 2, half), 2 + meta_kind[np.clip(dst - products, 0, meta - 1)])
    directory = root / "skb" / "amazon" / "processed" / "cache" / AMAZON_VARIANT
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "node_info.pkl").open("wb") as handle:
        pickle.dump(node_info, handle, protocol=pickle.HIGHEST_PROTOCOL)
    del node_info
    gc.collect()
    edge_index = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])
    _write_graph(directory, edge_index, np.concatenate([types, types]), np.asarray(node_types, dtype=np.int64))
    _write_type_dicts(directory, AMAZON_RELATIONS, AMAZON_TYPES)
    return directory


def _write_graph(directory: Path, edge_index: np.ndarray, edge_types: np.ndarray, node_types: np.ndarray) -> None:
    import torch

    torch.save(torch.from_numpy(edge_index), directory / "edge_index.pt")
    torch.save(torch.from_numpy(edge_types), directory / "edge_types.pt")
    torch.save(torch.from_numpy(node_types), directory / "node_types.pt")


def _write_type_dicts(directory: Path, relations: dict[int, str], types: dict[int, str]) -> None:
    for name, value in (("edge_type_dict", relations), ("node_type_dict", types)):
        with (directory / f"{name}.pkl").open("wb") as handle:
            pickle.dump(value, handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=["prime", "amazon"])
    parser.add_argument("root", type=Path)
    parser.add_argument("--nodes", type=int, help="nodes (Amazon: products); default the release's")
    parser.add_argument("--meta", type=int, default=78_350, help="Amazon: brand, category and colour nodes")
    parser.add_argument("--edges", type=int, help="edge entries, both directions; default the release's")
    parser.add_argument("--words-per-node", type=int, help="default 240 (Prime), 600 (Amazon)")
    parser.add_argument("--qa", type=Path, default=None, help="Prime: the real qa/prime directory to copy beside it")
    args = parser.parse_args()
    started = time.perf_counter()
    given = {
        key: value
        for key, value in (("nodes", args.nodes), ("edges", args.edges), ("words_per_node", args.words_per_node))
        if value is not None
    }
    if args.name == "prime":
        directory = write_prime(args.root, qa=args.qa, **given)
    else:
        if "nodes" in given:
            given["products"] = given.pop("nodes")
        directory = write_amazon(args.root, meta=args.meta, **given)
    size = sum(f.stat().st_size for f in directory.iterdir()) / 2**20
    print(f"wrote {directory} ({size:.0f} MiB) in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
