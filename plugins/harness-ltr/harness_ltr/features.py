"""Candidates and features of (query, candidate) pairs for the learning-to-rank retriever.

Per query: the text retrievers' rankings (``first_stages``), the anchors (entities the query
names, ``harness.EntityLinker``, and the best nodes by BM25 on the name field), the candidates
reached from the anchors along the schema's one- and two-hop meta-paths, and personalized
PageRank from the anchors and the first stage's best. Each candidate then gets: its text
scores (first stages, BM25 per field, BM25F-style per relation neighbour field), how many
anchors reach it along each meta-path (and weighted by a relation classifier's belief in that
path), PPR, its degree per relation, an optional frozen-encoder cosine, and query-side values
(anchors, length, the classifier's probabilities)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import harness
from harness_ltr.index import Graph, TextIndex

#: a ranking's score for a candidate it did not return, and its rank then
MISSING_RANK = 1000.0


@dataclass
class Switches:
    """What the feature set holds (the ablations)."""

    paths: bool = True
    ppr: bool = True
    relation_classifier: bool = True
    dense: bool = True
    graph_candidates: bool = True  # candidates from anchors' meta-paths and PPR, not only the first stages


@dataclass
class Prepared:
    """One query's candidates and features."""

    ids: np.ndarray
    features: np.ndarray  # (len(ids), F) float32
    order: np.ndarray  # a tie-break: position in the candidate list (first stages first)
    details: dict[str, Any] = field(default_factory=dict)
    priority: np.ndarray | None = None  # the best position a candidate had in any list that proposed it


class RelationClassifier:
    """Which meta-paths a query asks for: TF-IDF of its words, one logistic regression per path
    (scikit-learn), labels from the train split (a path from a linked anchor that reaches a gold)."""

    def __init__(self, classes: int, seed: int) -> None:
        self.classes, self.seed = classes, seed
        self.model: Any = None
        self.present: list[int] = []

    def fit(self, texts: Sequence[str], labels: np.ndarray) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.multiclass import OneVsRestClassifier
        from sklearn.pipeline import make_pipeline

        # a path no training query takes (or every one) has nothing to learn: constant probability
        positive = labels.mean(axis=0) if len(labels) else np.zeros(self.classes)
        self.prior = positive.astype(np.float32)
        self.present = [j for j in range(self.classes) if 0 < labels[:, j].sum() < len(labels)]
        if not self.present:
            return
        self.model = make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=50000),
            OneVsRestClassifier(LogisticRegression(C=4.0, max_iter=300, random_state=self.seed)),
        )
        self.model.fit(list(texts), labels[:, self.present])

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        out = np.tile(getattr(self, "prior", np.zeros(self.classes, dtype=np.float32)), (len(texts), 1))
        if self.model is not None and len(texts):
            out[:, self.present] = self.model.predict_proba(list(texts))
        return out.astype(np.float32)


class Featurizer:
    def __init__(
        self,
        skb: harness.SKB,
        graph: Graph,
        text: TextIndex,
        options: Any,
        switches: Switches,
        paths: list[tuple[int, ...]],
        classifier: RelationClassifier | None,
        vectors: np.ndarray | None,
        encoder: Any,
    ) -> None:
        self.skb, self.graph, self.text, self.options, self.switches = skb, graph, text, options, switches
        self.paths = paths
        self.classifier = classifier
        self.vectors, self.encoder = vectors, encoder  # vectors: one row per node (zeros off the candidates)
        self.linker = harness.EntityLinker(skb.names, max_ngram=options.max_ngram)
        # an anchor's specificity: log(candidates / (1 + its degree))
        self.specificity = np.log((1.0 + len(skb.candidate_ids)) / (1.0 + graph.degree)).astype(np.float32)
        self.name_field = text.fields.index("name")
        self.own_fields = [i for i, f in enumerate(text.fields) if not f.startswith("rel:")]
        self.names = self._feature_names()
        self._position = np.full(graph.n, -1, dtype=np.int64)

    # -- the feature layout ------------------------------------------------------------
    def _feature_names(self) -> list[str]:
        s, names = self.switches, []
        for stage in self.options.first_stages:
            names += [f"{stage}:score", f"{stage}:norm", f"{stage}:rank"]
        for f in self.text.fields:
            names += [f"bm25:{f}", f"bm25:{f}:norm"]
        names += ["bm25:own", "bm25:own:norm"]
        if s.paths:
            names += [f"path:{self.graph.path_name(p)}" for p in self.paths]
            names += ["anchors:reached", "anchors:coverage", "anchors:specific", "anchors:name_reached"]
            if s.relation_classifier:
                names += ["path:believed", "path:believed_max"]
        if s.ppr:
            names += ["ppr:log", "ppr:rank"]
        names += [f"degree:{step.name}" for step in self.graph.steps]
        if s.dense:
            names += ["dense:cos", "dense:gap"]
        names += ["query:terms", "query:linked", "query:name_anchors", "from:graph"]
        names += [f"query:linked:{t}" for t in self.graph.type_names]
        if s.relation_classifier:
            names += [f"query:p:{self.graph.path_name(p)}" for p in self.paths]
        return names

    # -- anchors -------------------------------------------------------------------------
    def anchors(self, text: str, terms: np.ndarray, name_scores: np.ndarray) -> tuple[list[int], list[int]]:
        options = self.options
        linked = [int(i) for i in self.linker.link(text, options.max_anchors)]
        by_name: list[int] = []
        if options.name_anchors and len(terms):
            top = np.argsort(-name_scores, kind="stable")[: options.name_anchors + len(linked)]
            by_name = [int(i) for i in top if name_scores[i] > 0 and int(i) not in linked][: options.name_anchors]
        return linked, by_name

    def reached(self, anchors: Sequence[int]) -> list[list[np.ndarray]]:
        """Per path, per anchor: the candidate nodes the path reaches from it (capped frontiers: none)."""
        graph, cap = self.graph, self.options.max_frontier
        out: list[list[np.ndarray]] = [[] for _ in self.paths]
        types = graph.node_types
        empty = np.zeros(0, dtype=np.int64)
        for anchor in anchors:
            kind = int(types[anchor])
            memo: dict[tuple[int, ...], np.ndarray | None] = {(): np.asarray([anchor], dtype=np.int64)}
            for p, path in enumerate(self.paths):
                if kind not in graph.starts(path):
                    out[p].append(empty)
                    continue
                frontier: np.ndarray | None = None
                for depth in range(1, len(path) + 1):
                    key = path[:depth]
                    if key not in memo:
                        before = memo[key[:-1]]
                        after = None if before is None else graph.step(before, key[-1])
                        memo[key] = None if after is None or len(after) > cap else after
                    frontier = memo[key]
                if frontier is None:
                    out[p].append(empty)
                    continue
                out[p].append(frontier[graph.candidate_mask[frontier]].astype(np.int64))
        return out

    # -- personalized PageRank, batched ---------------------------------------------------
    def ppr(self, seeds: list[dict[int, float]]) -> np.ndarray:
        """(n, len(seeds)) PPR scores: ``iterations`` power steps from each seed distribution."""
        n = self.graph.n
        restart = np.zeros((n, len(seeds)), dtype=np.float32)
        for j, seed in enumerate(seeds):
            if seed:
                total = sum(seed.values())
                for node, weight in seed.items():
                    restart[node, j] += weight / total
        alpha = self.options.ppr_alpha
        scores = restart.copy()
        for _ in range(self.options.ppr_iterations):
            scores = alpha * restart + (1 - alpha) * (self.graph.transition_t @ scores)
        return scores

    # -- one batch ------------------------------------------------------------------------
    def prepare(
        self, queries: Sequence[harness.Query], stages: Mapping[str, Sequence[harness.Ranking]]
    ) -> list[Prepared]:
        options, s = self.options, self.switches
        texts = [q.text for q in queries]
        probabilities = (
            self.classifier.predict(texts)
            if (s.relation_classifier and self.classifier is not None)
            else np.zeros((len(queries), len(self.paths)), dtype=np.float32)
        )
        query_vectors = self.encoder.encode(texts, "query") if (s.dense and self.encoder is not None) else None
        terms = [self.text.query_terms(t) for t in texts]
        name_scores = [self.text.scores(self.name_field, t) for t in terms]
        anchors = [self.anchors(text, t, ns) for text, t, ns in zip(texts, terms, name_scores, strict=True)]
        seeds = []
        for j, (linked, by_name) in enumerate(anchors):
            seed: dict[int, float] = {}
            chosen = linked + by_name
            for a in chosen:
                seed[a] = seed.get(a, 0.0) + 0.5 / len(chosen)
            ranking = stages[options.first_stages[-1]][j]
            top = ranking.ids[:10]
            if len(top):
                weights = np.exp(ranking.scores[:10] - ranking.scores[0])
                for node, w in zip(top.tolist(), (0.5 * weights / weights.sum()).tolist(), strict=True):
                    seed[node] = seed.get(node, 0.0) + w
            seeds.append(seed)
        ppr = self.ppr(seeds) if (s.ppr or s.graph_candidates) else None
        out = []
        for j, query in enumerate(queries):
            out.append(
                self._one(
                    j,
                    query,
                    stages,
                    terms[j],
                    anchors[j],
                    probabilities[j],
                    None if ppr is None else ppr[:, j],
                    None if query_vectors is None else query_vectors[j],
                )
            )
        return out

    def _one(
        self,
        j: int,
        query: harness.Query,
        stages: Mapping[str, Sequence[harness.Ranking]],
        terms: np.ndarray,
        anchors: tuple[list[int], list[int]],
        probability: np.ndarray,
        ppr: np.ndarray | None,
        query_vector: np.ndarray | None,
    ) -> Prepared:
        options, s, graph, text = self.options, self.switches, self.graph, self.text
        linked, by_name = anchors
        every = linked + by_name
        # -- candidates
        ordered: list[np.ndarray] = [stages[name][j].ids[: options.depth] for name in options.first_stages]
        reached = self.reached(every) if (s.paths or s.graph_candidates) else [[] for _ in self.paths]
        graph_ids = np.zeros(0, dtype=np.int64)
        if s.graph_candidates and every:
            # distinct anchors reaching each candidate, weighted by how specific each anchor is
            votes: dict[int, float] = {}
            for a_index, anchor in enumerate(every):
                hit = [r[a_index] for r in reached if len(r[a_index])]
                if hit:
                    for node in np.unique(np.concatenate(hit)).tolist():
                        votes[node] = votes.get(node, 0.0) + max(float(self.specificity[anchor]), 0.1)
            if votes:
                nodes = np.fromiter(votes.keys(), dtype=np.int64, count=len(votes))
                weight = np.fromiter(votes.values(), dtype=np.float64, count=len(votes))
                own = sum(text.scores(f, terms, nodes) for f in self.own_fields)
                rank = weight + 0.01 * np.asarray(own)
                graph_ids = nodes[np.argsort(-rank, kind="stable")[: options.graph_depth]]
            ordered.append(graph_ids)
        if s.graph_candidates and ppr is not None:
            masked = np.where(graph.candidate_mask, ppr, -1.0)
            depth = min(options.ppr_depth, len(masked) - 1)
            top = np.argpartition(-masked, depth)[: depth + 1]
            top = top[np.argsort(-masked[top], kind="stable")]
            ordered.append(top[masked[top] > 0].astype(np.int64))
        merged = np.concatenate(ordered) if ordered else np.zeros(0, dtype=np.int64)
        within = np.concatenate([np.arange(len(o)) for o in ordered]) if ordered else np.zeros(0, dtype=np.int64)
        _, first = np.unique(merged, return_index=True)
        keep = np.sort(first)
        ids = merged[keep]
        lowest: dict[int, int] = {}
        for node, place in zip(merged.tolist(), within.tolist(), strict=True):
            if place < lowest.get(node, 1 << 30):
                lowest[node] = place
        inside = graph.candidate_mask[ids]
        ids = ids[inside]
        priority = np.asarray([lowest[i] for i in ids.tolist()], dtype=np.int64)
        m = len(ids)
        columns: list[np.ndarray] = []
        # -- first stages
        for name in options.first_stages:
            ranking = stages[name][j]
            score = np.zeros(m, dtype=np.float32)
            rank = np.full(m, MISSING_RANK, dtype=np.float32)
            lookup = self._position
            lookup[ranking.ids] = np.arange(len(ranking.ids))
            r = lookup[ids]
            lookup[ranking.ids] = -1
            found = r >= 0
            score[found], rank[found] = ranking.scores[r[found]], r[found] + 1
            best = float(ranking.scores[0]) if len(ranking.scores) else 1.0
            columns += [score, score / best if best > 0 else score, np.log1p(rank)]
        # -- BM25 per field
        own = np.zeros(m, dtype=np.float32)
        for f in range(len(text.fields)):
            value = text.scores(f, terms, ids).astype(np.float32)
            if f in self.own_fields:
                own += value
            best = float(value.max()) if m else 0.0
            columns += [value, value / best if best > 0 else value]
        best = float(own.max()) if m else 0.0
        columns += [own, own / best if best > 0 else own]
        # -- meta-paths from the anchors
        paths_hit: np.ndarray = np.zeros(m, dtype=np.float32)
        if s.paths:
            counts = np.zeros((len(self.paths), m), dtype=np.float32)
            reached_by = np.zeros((len(every), m), dtype=bool)
            position = self._position
            position[ids] = np.arange(m)
            for p, per_anchor in enumerate(reached):
                for a_index, nodes in enumerate(per_anchor):
                    if len(nodes):
                        rows = position[nodes]
                        rows = rows[rows >= 0]
                        counts[p, rows] += 1
                        reached_by[a_index, rows] = True
            position[ids] = -1
            columns += list(counts)
            linked_hit = reached_by[: len(linked)].sum(axis=0).astype(np.float32)
            specific = (
                (reached_by * np.maximum(self.specificity[every], 0.0)[:, None]).sum(axis=0) if every else np.zeros(m)
            )
            columns += [
                linked_hit,
                linked_hit / max(len(linked), 1),
                np.asarray(specific, dtype=np.float32),
                reached_by[len(linked) :].sum(axis=0).astype(np.float32),
            ]
            paths_hit = counts.sum(axis=0)
            if s.relation_classifier:
                believed = probability[:, None] * (counts > 0)
                columns += [believed.sum(axis=0), believed.max(axis=0) if len(self.paths) else np.zeros(m)]
        # -- PPR
        if s.ppr:
            walked = ppr[ids] if ppr is not None else np.zeros(m, dtype=np.float32)
            placed = np.empty(m, dtype=np.float32)
            placed[np.argsort(-walked, kind="stable")] = np.arange(1, m + 1)
            columns += [np.log(walked + 1e-9).astype(np.float32), np.log1p(placed)]
        # -- degrees
        columns += [np.log1p(d[ids]) for d in graph.step_degree]
        # -- dense
        if s.dense:
            if self.vectors is not None and query_vector is not None:
                cos = self.vectors[ids] @ query_vector
                columns += [cos, cos - float(cos.max()) if m else cos]
            else:
                columns += [np.zeros(m), np.zeros(m)]
        # -- query side
        from_graph = ~np.isin(
            ids, np.concatenate([stages[name][j].ids[: options.depth] for name in options.first_stages])
        )
        columns += [
            np.full(m, len(terms)),
            np.full(m, len(linked)),
            np.full(m, len(by_name)),
            from_graph.astype(np.float32),
        ]
        kinds = (
            np.bincount(graph.node_types[linked], minlength=len(graph.type_names))
            if linked
            else np.zeros(len(graph.type_names))
        )
        columns += [np.full(m, float(c)) for c in kinds]
        if s.relation_classifier:
            columns += [np.full(m, float(p)) for p in probability]
        features = (
            np.stack([np.asarray(c, dtype=np.float32) for c in columns], axis=1)
            if m
            else np.zeros((0, len(self.names)), dtype=np.float32)
        )
        assert features.shape[1] == len(self.names), (features.shape, len(self.names))
        details = {
            "anchors": [[a, str(self.skb.names[a])] for a in linked[:10]],
            "name_anchors": [[a, str(self.skb.names[a])] for a in by_name],
            "candidates": int(m),
            "graph_candidates": int(from_graph.sum()),
        }
        return Prepared(ids, features, np.arange(m), details | {"_paths_hit": paths_hit}, priority)


def select_paths(
    featurizer: Featurizer, queries: Sequence[harness.Query], two_hop: list[tuple[int, int]], keep: int, limit: int
) -> tuple[list[tuple[int, ...]], np.ndarray, list[harness.Query]]:
    """The one-hop paths and the ``keep`` two-hop paths that most often lead from a query's
    anchors to one of its answers, over (at most ``limit`` of) ``queries``; with each query's
    labels (which of the chosen paths reach an answer) for the relation classifier."""
    one_hop = featurizer.graph.one_hop_paths()
    featurizer.paths = one_hop + list(two_hop)
    sample = list(queries)[:: max(1, len(queries) // max(limit, 1))][:limit]  # spread over the split
    hits = np.zeros((len(sample), len(featurizer.paths)), dtype=bool)
    for q_index, query in enumerate(sample):
        terms = featurizer.text.query_terms(query.text)
        linked, by_name = featurizer.anchors(query.text, terms, featurizer.text.scores(featurizer.name_field, terms))
        answers = np.asarray(sorted(query.answer_ids), dtype=np.int64)
        for p, per_anchor in enumerate(featurizer.reached(linked + by_name)):
            hits[q_index, p] = any(len(n) and np.isin(answers, n).any() for n in per_anchor)
    frequency = hits[:, len(one_hop) :].sum(axis=0)
    order = [i for i in np.argsort(-frequency, kind="stable")[:keep] if frequency[i] > 0]
    chosen = one_hop + [tuple(two_hop[i]) for i in sorted(order)]
    columns = list(range(len(one_hop))) + [len(one_hop) + i for i in sorted(order)]
    featurizer.paths = chosen
    featurizer.names = featurizer._feature_names()
    return chosen, hits[:, columns], sample


def finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
