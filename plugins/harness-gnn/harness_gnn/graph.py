"""Entity linking and memory-bounded subgraphs (numpy only; no model library).

QA-GNN grounds a question in a knowledge graph by matching its n-grams against concept names,
then takes the nodes on short paths between the question's concepts and each answer choice.
Here the answer choices are a first-stage retriever's candidates, and the graph is an SKB that
may hold a million nodes with hubs of a hundred thousand neighbours: every step is bounded.

* :class:`harness.graph.EntityLinker` (core) — the query's n-grams (longest first, not
  overlapping) looked up among the normalised names of every node.
* :class:`Subgraphs` — the k-hop neighbourhood of the linked entities and the candidates, with
  at most ``max_neighbors`` neighbours per node and relation (a seeded sample, the same for a
  node whatever the query) and at most ``max_nodes`` nodes, the ones reached from the most
  seeds first (QA-GNN keeps nodes on paths between question and answer concepts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import harness
from harness import EntityLinker

__all__ = ["CANDIDATE", "CONTEXT", "ENTITY", "OTHER", "EntityLinker", "Subgraph", "Subgraphs", "relation_labels"]

#: A node's role in its subgraph (QA-GNN's node types).
ENTITY, CANDIDATE, OTHER, CONTEXT = 0, 1, 2, 3


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
