"""Entity linking and memory-bounded subgraphs (numpy only; no model library).

QA-GNN grounds a question in a knowledge graph by matching its n-grams against concept names,
then takes the nodes on short paths between the question's concepts and each answer choice.
Here the answer choices are a first-stage retriever's candidates, and the graph is an SKB that
may hold a million nodes with hubs of a hundred thousand neighbours: every step is bounded.

* :class:`EntityLinker` — the query's n-grams (longest first, not overlapping) looked up among
  the normalised names of every node.
* :class:`Subgraphs` — the k-hop neighbourhood of the linked entities and the candidates, with
  at most ``max_neighbors`` neighbours per node and relation (a seeded sample, the same for a
  node whatever the query) and at most ``max_nodes`` nodes, the ones reached from the most
  seeds first (QA-GNN keeps nodes on paths between question and answer concepts).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

import harness

_WORD = re.compile(r"\w+")
#: Words that alone never name an entity ("the", "for"): an n-gram made only of them is skipped.
STOPWORDS = frozenset(
    "a an and are as at be by for from has have i in is it its me my of on or that the this to was what which who "
    "with any some can could would should do does you your our we they them there their these those not no".split()
)

#: A node's role in its subgraph (QA-GNN's node types).
ENTITY, CANDIDATE, OTHER, CONTEXT = 0, 1, 2, 3


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (NFKC, case-folded): what names and queries are matched on."""
    return _WORD.findall(unicodedata.normalize("NFKC", str(text)).casefold())


class EntityLinker:
    """Exact matching of a query's n-grams against node names.

    The index holds a 64-bit hash of each normalised name and the node it names, in two sorted
    arrays (16 bytes a name: 30 MB for MAG's 1.9M nodes, where a dict of strings would take
    hundreds); a query's n-grams are looked up all at once.

    Args:
        names: one name per node (``SKB.names``).
        max_ngram: names of more words are never matched (long product titles are not mentioned
            verbatim, and leaving them out keeps the index small).
        min_chars: shorter names are left out ("a", "x").
        max_per_name: a name shared by more nodes links to the first of them only (ids ascending).
    """

    def __init__(self, names: Sequence[str], max_ngram: int = 5, min_chars: int = 3, max_per_name: int = 3) -> None:
        self.max_ngram = max_ngram
        keys, ids = [], []
        for node in range(len(names)):
            tokens = words(names[node])
            if not tokens or len(tokens) > max_ngram or all(t in STOPWORDS for t in tokens):
                continue
            key = " ".join(tokens)
            if len(key) >= min_chars:
                keys.append(_hash(key))
                ids.append(node)
        keys_array, ids_array = np.asarray(keys, dtype=np.uint64), np.asarray(ids, dtype=np.int64)
        order = np.lexsort((ids_array, keys_array))
        keys_array, ids_array = keys_array[order], ids_array[order]
        starts = np.flatnonzero(np.r_[True, keys_array[1:] != keys_array[:-1]]) if len(keys_array) else np.zeros(0, int)
        rank = np.arange(len(keys_array)) - np.repeat(starts, np.diff(np.r_[starts, len(keys_array)]))
        keep = rank < max_per_name
        self.keys, self.ids = keys_array[keep], ids_array[keep]

    def link(self, text: str, limit: int) -> np.ndarray:
        """Up to ``limit`` node ids named in ``text``: longer mentions first, then left to right;
        a word belongs to one mention at most."""
        tokens = words(text)
        spans = [
            (start, start + n)
            for n in range(min(self.max_ngram, len(tokens)), 0, -1)
            for start in range(len(tokens) - n + 1)
        ]
        if not spans or not len(self.keys):
            return np.zeros(0, dtype=np.int64)
        hashes = np.asarray([_hash(" ".join(tokens[a:b])) for a, b in spans], dtype=np.uint64)
        lo = np.searchsorted(self.keys, hashes, side="left")
        hi = np.searchsorted(self.keys, hashes, side="right")
        taken = np.zeros(len(tokens), dtype=bool)
        linked: list[int] = []
        for (a, b), first, last in zip(spans, lo.tolist(), hi.tolist(), strict=True):
            if first == last or taken[a:b].any():
                continue
            taken[a:b] = True
            linked.extend(int(i) for i in self.ids[first:last] if int(i) not in linked)
        return np.asarray(linked[:limit], dtype=np.int64)


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass
class Subgraph:
    """One query's subgraph. ``nodes``: SKB ids (seeds first); ``roles``: ENTITY, CANDIDATE or
    OTHER per node; ``edges``: (2, E) local indices, source then target; ``types``: relation
    label index per edge."""

    nodes: np.ndarray
    roles: np.ndarray
    edges: np.ndarray
    types: np.ndarray


class Subgraphs:
    """k-hop subgraphs of an SKB around seed nodes, bounded in nodes and in neighbours read.

    Relations are typed by the text that reads from a node (``EdgeType.text``): "depends on"
    and "required by" are two types, each the other's inverse, so every connection becomes two
    directed edges, as in R-GCN.
    """

    def __init__(
        self,
        skb: harness.SKB,
        hops: int = 2,
        max_nodes: int = 200,
        max_neighbors: int = 20,
        seed: int = 0,
        row_cache: int = 200_000,
    ) -> None:
        self.skb, self.hops, self.max_nodes, self.max_neighbors, self.seed = skb, hops, max_nodes, max_neighbors, seed
        self.labels = relation_labels(skb)
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        inverse = list(range(len(self.labels)))
        for edge_type in skb.edge_types:
            out, back = self.label_index[edge_type.text("out")], self.label_index[edge_type.text("in")]
            inverse[out], inverse[back] = back, out
        self.inverse = np.asarray(inverse, dtype=np.int64)
        self.row_cache = row_cache
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def row(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """``node``'s neighbours and their relation labels, at most ``max_neighbors`` per label:
        a sample seeded by (seed, node, label), so every query sees the same ones."""
        cached = self._rows.get(node)
        if cached is not None:
            return cached
        ids_parts, type_parts = [], []
        for label, ids in self.skb.relations(node).items():
            index = self.label_index.get(label)
            if index is None:
                continue
            ids = ids[ids != node]  # a self-loop: the convolutions add their own
            if len(ids) > self.max_neighbors:
                rng = np.random.default_rng([self.seed, node, index])
                ids = np.sort(rng.choice(ids, self.max_neighbors, replace=False))
            ids_parts.append(ids.astype(np.int64))
            type_parts.append(np.full(len(ids), index, dtype=np.int64))
        row = (
            (np.concatenate(ids_parts), np.concatenate(type_parts))
            if ids_parts
            else (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
        )
        if len(self._rows) >= self.row_cache:
            self._rows.clear()  # bounded memory: start again rather than grow
        self._rows[node] = row
        return row

    def build(self, entities: np.ndarray, candidates: np.ndarray) -> Subgraph:
        """The subgraph around ``entities`` (linked) and ``candidates`` (first stage, best first)."""
        seeds = _unique_in_order(np.concatenate([np.asarray(entities), np.asarray(candidates)]).astype(np.int64))
        selected = [seeds[: self.max_nodes]]
        frontier = selected[0]
        for _ in range(self.hops):
            budget = self.max_nodes - sum(len(s) for s in selected)
            if budget <= 0 or not len(frontier):
                break
            pool = np.concatenate([self.row(int(u))[0] for u in frontier])
            pool = pool[~np.isin(pool, np.concatenate(selected))]
            if not len(pool):
                break
            ids, reached = np.unique(pool, return_counts=True)
            # most seeds reached first (nodes on paths between entities and candidates), then a
            # seeded shuffle, so that no id range is favoured
            order = np.lexsort((_mix(ids, self.seed), -reached))
            frontier = ids[order[:budget]]
            selected.append(frontier)
        nodes = np.concatenate(selected)
        roles = np.full(len(nodes), OTHER, dtype=np.int64)
        roles[np.isin(nodes, entities)] = ENTITY
        roles[np.isin(nodes, candidates)] = CANDIDATE
        edges, types = self._edges(nodes)
        return Subgraph(nodes, roles, edges, types)

    def _edges(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every edge between ``nodes`` either end's sampled row holds, in both directions."""
        order = np.argsort(nodes, kind="stable")
        ordered = nodes[order]
        sources, targets, types = [], [], []
        for local, node in enumerate(nodes.tolist()):
            ids, labels = self.row(node)
            inside = np.isin(ids, ordered)
            if not inside.any():
                continue
            other = order[np.searchsorted(ordered, ids[inside])]
            sources += [np.full(len(other), local), other]
            targets += [other, np.full(len(other), local)]
            types += [labels[inside], self.inverse[labels[inside]]]
        if not sources:
            return np.empty((2, 0), dtype=np.int64), np.empty(0, dtype=np.int64)
        triples = np.unique(np.stack([np.concatenate(sources), np.concatenate(targets), np.concatenate(types)]), axis=1)
        return triples[:2].astype(np.int64), triples[2].astype(np.int64)


def relation_labels(skb: harness.SKB) -> list[str]:
    """The relation types a subgraph's edges carry: each relation's label read from either end,
    once (a symmetric relation reads alike both ways)."""
    labels: list[str] = []
    for edge_type in skb.edge_types:
        for side in ("out", "in"):
            if edge_type.text(side) not in labels:
                labels.append(edge_type.text(side))
    return labels


def _unique_in_order(ids: np.ndarray) -> np.ndarray:
    _, first = np.unique(ids, return_index=True)
    return ids[np.sort(first)]


def _mix(ids: np.ndarray, seed: int) -> np.ndarray:
    """A seeded pseudo-random key per id (a 64-bit multiplicative hash)."""
    with np.errstate(over="ignore"):
        keys = (ids.astype(np.uint64) + np.uint64(seed + 1)) * np.uint64(0x9E3779B97F4A7C15)
        return keys ^ (keys >> np.uint64(31))
