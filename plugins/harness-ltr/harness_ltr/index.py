"""What the structural retrievers read of an SKB, built once per SKB (the text part cached):

* :class:`Graph` — one binary CSR matrix per relation and direction (``scipy.sparse``), the
  schema's one- and two-hop meta-paths ending at a candidate type, and a row-normalised
  adjacency of every relation for propagation (PPR, score propagation);
* :class:`TextIndex` — BM25 weights per field (the name, the SKB's most common text fields,
  and, for each relation and direction, the names of the neighbours along it: BM25F-style
  fields made with one sparse product), column-sliced per query term.

Relations, node types and fields come from the SKB and its schema (``harness.Schema``), never
from a dataset's names."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

import harness

INDEX_VERSION = "1"
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Lucene's English stopwords and a few more question words
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with which what who whose where when how i me my we our you your is are any some can could "
    "would should does do did has have had its from than also other others".split()
)


@lru_cache(maxsize=500_000)
def _stem(word: str) -> str:
    from harness_bm25.porter import stem

    return stem(word)


def tokens(text: str) -> list[str]:
    """Lower-cased, stopwords out, Porter-stemmed word tokens."""
    return [_stem(w) for w in _WORD.findall(text.casefold()) if w not in STOPWORDS]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return " ".join(map(str, value))
    return str(value)


@dataclass(frozen=True)
class Step:
    """A relation followed one way: ``direction`` "out" (source to target) or "in"; a symmetric
    relation (or an undirected SKB) has the one direction "both"."""

    relation: int
    direction: str
    name: str  # "depends>", "depends<", "same_source="

    @property
    def label(self) -> str:
        return self.name


class Graph:
    """Binary CSR matrices per :class:`Step`; meta-paths from the schema."""

    def __init__(self, skb: harness.SKB) -> None:
        n = skb.num_nodes
        self.n = n
        self.node_types = np.asarray(skb.node_types, dtype=np.int64)
        self.type_names = list(skb.node_type_names)
        self.candidate_mask = np.zeros(n, dtype=bool)
        self.candidate_mask[skb.candidate_ids] = True
        self.candidate_type_ids = sorted({int(t) for t in self.node_types[skb.candidate_ids]})
        self.steps: list[Step] = []
        self.matrices: list[sp.csr_matrix] = []
        src, dst, kind = np.asarray(skb.src), np.asarray(skb.dst), np.asarray(skb.edge_type)
        for r, edge_type in enumerate(skb.edge_types):
            chosen = kind == r
            if not chosen.any():
                continue
            ones = np.ones(int(chosen.sum()), dtype=np.float32)
            forward = sp.csr_matrix((ones, (src[chosen], dst[chosen])), shape=(n, n))
            forward.data[:] = 1.0  # a multi-edge counts once
            forward.sum_duplicates()
            forward.data[:] = 1.0
            if skb.undirected or edge_type.symmetric:
                both = (forward + forward.T).tocsr()
                both.data[:] = 1.0
                self._add(Step(r, "both", f"{edge_type.name}="), both)
            else:
                self._add(Step(r, "out", f"{edge_type.name}>"), forward)
                self._add(Step(r, "in", f"{edge_type.name}<"), forward.T.tocsr())
        # which steps lead from which node type to which (from the edges, as harness.Schema)
        self.step_types: list[tuple[set[int], set[int]]] = []
        for matrix in self.matrices:
            coo = matrix.tocoo()
            self.step_types.append(
                (
                    {int(t) for t in np.unique(self.node_types[coo.row])},
                    {int(t) for t in np.unique(self.node_types[coo.col])},
                )
            )
        total = sum(self.matrices, sp.csr_matrix((n, n), dtype=np.float32)) if self.matrices else sp.csr_matrix((n, n))
        total = sp.csr_matrix(total)
        total.data[:] = 1.0
        undirected = (total + total.T).tocsr()
        undirected.data[:] = 1.0
        self.adjacency = undirected
        self.degree = np.asarray(undirected.sum(axis=1)).ravel()
        inverse = np.divide(1.0, self.degree, out=np.zeros_like(self.degree), where=self.degree > 0)
        #: row-stochastic transition matrix, transposed (x_next = transition_t @ x)
        self.transition_t = (sp.diags(inverse.astype(np.float32)) @ undirected).T.tocsr().astype(np.float32)
        self.step_degree = [np.asarray(m.sum(axis=1)).ravel().astype(np.float32) for m in self.matrices]

    def _add(self, step: Step, matrix: sp.csr_matrix) -> None:
        self.steps.append(step)
        self.matrices.append(matrix.astype(np.float32))

    def one_hop_paths(self) -> list[tuple[int, ...]]:
        """Every step that ends at a candidate type: paths of one step."""
        wanted = set(self.candidate_type_ids)
        return [(i,) for i, (_, targets) in enumerate(self.step_types) if targets & wanted]

    def two_hop_paths(self) -> list[tuple[int, int]]:
        """Every pair of steps that ends at a candidate type (the middle type shared)."""
        wanted = set(self.candidate_type_ids)
        paths = []
        for i, (_, middle) in enumerate(self.step_types):
            for j, (sources, targets) in enumerate(self.step_types):
                if middle & sources and targets & wanted:
                    paths.append((i, j))
        return paths

    def path_name(self, path: tuple[int, ...]) -> str:
        return "/".join(self.steps[i].name for i in path)

    def starts(self, path: tuple[int, ...]) -> set[int]:
        return self.step_types[path[0]][0]

    def step(self, frontier: np.ndarray, i: int) -> np.ndarray:
        """The nodes one step ``i`` leads to from ``frontier`` (sorted, unique)."""
        matrix = self.matrices[i]
        return np.unique(gather(matrix.indices, matrix.indptr[frontier], matrix.indptr[frontier + 1]))


class TextIndex:
    """BM25 weights (node × term, CSC) per field; fields: ``name``, the SKB's text fields, and
    one per :class:`Step` holding the names of the neighbours along it."""

    def __init__(self, fields: list[str], vocabulary: dict[str, int], weights: list[sp.csc_matrix]) -> None:
        self.fields, self.vocabulary, self.weights = fields, vocabulary, weights

    def query_terms(self, text: str) -> np.ndarray:
        found = [self.vocabulary[t] for t in tokens(text) if t in self.vocabulary]
        return np.asarray(sorted(set(found)), dtype=np.int64)

    def scores(self, field: int, terms: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """BM25 of every node (or of ``rows``) in ``field`` for the query's ``terms``."""
        matrix = self.weights[field]
        n = matrix.shape[0]
        if not len(terms):
            return np.zeros(n if rows is None else len(rows), dtype=np.float32)
        starts, ends = matrix.indptr[terms], matrix.indptr[terms + 1]
        hit = gather(matrix.indices, starts, ends)
        total = np.bincount(hit, weights=gather(matrix.data, starts, ends), minlength=n).astype(np.float32)
        return total if rows is None else total[rows]

    # -- building ----------------------------------------------------------------------
    @classmethod
    def load_or_build(
        cls,
        skb: harness.SKB,
        graph: Graph,
        cache_dir: Path,
        max_fields: int,
        k1: float,
        b: float,
        context: harness.BuildContext | None = None,
    ) -> TextIndex:
        key = harness.stable_hash([INDEX_VERSION, skb.fingerprint, max_fields, k1, b])
        entry = Path(cache_dir) / "ltr" / f"text-{key}"
        if not (entry / "meta.json").exists():
            with harness.atomic_dir(entry) as tmp:
                fields, vocabulary, counts = cls._counts(skb, graph, max_fields, context)
                for i, matrix in enumerate(counts):
                    sp.save_npz(tmp / f"field-{i}.npz", matrix, compressed=False)
                harness.write_json(tmp / "meta.json", {"fields": fields, "vocabulary": list(vocabulary)})
        meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
        vocabulary = {t: i for i, t in enumerate(meta["vocabulary"])}
        weights = []
        for i, field in enumerate(meta["fields"]):
            counts = sp.load_npz(entry / f"field-{i}.npz").tocsr()
            # neighbour fields: a little less length normalisation (hubs list thousands of names)
            weights.append(_bm25(counts, k1, b if not field.startswith("rel:") else b * 0.5, graph.candidate_mask))
        return cls(meta["fields"], vocabulary, weights)

    @staticmethod
    def _counts(
        skb: harness.SKB, graph: Graph, max_fields: int, context: harness.BuildContext | None
    ) -> tuple[list[str], dict[str, int], list[sp.csr_matrix]]:
        n = skb.num_nodes
        candidates = skb.candidate_ids
        seen: Counter[str] = Counter()
        for node in candidates[:: max(1, len(candidates) // 2000)]:  # a sample says which fields are common
            for key, value in skb.fields[int(node)].items():
                if isinstance(value, str | list | tuple) and _text(value).strip():
                    seen[key] += 1
        sampled = len(candidates[:: max(1, len(candidates) // 2000)]) or 1
        text_fields = [k for k, c in seen.most_common() if c >= 0.05 * sampled][:max_fields]
        vocabulary: dict[str, int] = {}

        def matrix(rows: list[list[str]], nodes: np.ndarray) -> sp.csr_matrix:
            indptr, indices = [0], list[int]()
            for words in rows:
                indices.extend(vocabulary.setdefault(w, len(vocabulary)) for w in words)
                indptr.append(len(indices))
            data = np.ones(len(indices), dtype=np.float32)
            local = sp.csr_matrix((data, np.asarray(indices, dtype=np.int64), np.asarray(indptr)), shape=(len(rows), 1))
            return local, nodes

        names = [tokens(str(skb.names[i])) for i in range(n)]
        parts = [matrix(names, np.arange(n))]
        for field in text_fields:
            rows = [tokens(_text(skb.fields[int(i)].get(field))) for i in candidates]
            parts.append(matrix(rows, candidates))
        size = len(vocabulary)
        counts = []
        for local, nodes in parts:
            local = sp.csr_matrix((local.data, local.indices, local.indptr), shape=(local.shape[0], size))
            local.sum_duplicates()
            full = local if len(nodes) == n else _place(local, nodes, n)
            counts.append(full.astype(np.float32))
        name_counts = counts[0]
        fields = ["name", *text_fields]
        cand = sp.diags(graph.candidate_mask.astype(np.float32))
        for step, adjacency in zip(graph.steps, graph.matrices, strict=True):
            # the names of a candidate's neighbours along the step, as one field
            fields.append(f"rel:{step.name}")
            counts.append((cand @ adjacency @ name_counts).tocsr().astype(np.float32))
        return fields, vocabulary, counts


def gather(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``values[starts[i]:ends[i]]`` for every i, concatenated (CSR rows or CSC columns at once)."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return values[:0]
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return values[np.arange(total) + offsets]


def _place(local: sp.csr_matrix, nodes: np.ndarray, n: int) -> sp.csr_matrix:
    """Rows of ``local`` put at rows ``nodes`` of an n-row matrix."""
    coo = local.tocoo()
    return sp.csr_matrix((coo.data, (nodes[coo.row], coo.col)), shape=(n, local.shape[1]))


def _bm25(counts: sp.csr_matrix, k1: float, b: float, candidates: np.ndarray) -> sp.csc_matrix:
    """Lucene-style BM25 weights of a count matrix; document frequencies and lengths over the candidates."""
    counts = counts.tocsr()
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    inside = candidates & (lengths > 0)
    docs = max(int(inside.sum()), 1)
    average = float(lengths[inside].mean()) if inside.any() else 1.0
    present = counts.copy()
    present.data[:] = 1.0
    df = np.asarray(present[np.flatnonzero(candidates)].sum(axis=0)).ravel()
    idf = np.log1p((docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    norm = k1 * (1 - b + b * lengths[rows] / average)
    tf = counts.data
    data = idf[counts.indices] * tf * (k1 + 1) / (tf + norm)
    weights = sp.csr_matrix((data.astype(np.float32), counts.indices, counts.indptr), shape=counts.shape)
    return weights.tocsc()
