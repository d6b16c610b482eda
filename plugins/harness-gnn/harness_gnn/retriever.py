"""The ``qagnn`` retriever: QA-GNN (Yasunaga et al., 2021) adapted to retrieval over an SKB.

For each query: link its mentions to SKB nodes (names), take a first stage's candidates
(``first_stage``, bm25 by default), build the bounded k-hop subgraph around both, add the query
as a context node linked to the entities and the candidates, run typed message passing and score
every candidate in the subgraph. Trained on the dataset's train split (softmax cross-entropy
over each query's candidates, Adam) in the harness's training loop (``harness.EpochLoop``: early
stopping on the validation split's MRR, an epoch checkpoint after every epoch, resumed after a kill).

Rankings: the scored candidates by score, then the first stage's other results in its order.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness_dense.embeddings import resolve_model
from harness_gnn.encoder import DEFAULT_MODEL, NodeVectors, TextEncoder, node_vectors, pinned_threads, version
from harness_gnn.graph import CANDIDATE, CONTEXT, ENTITY, EntityLinker, Subgraphs, relation_labels

CHECKPOINT, META = "model.pt", "qagnn.json"
CHUNK = 256  # queries made ready at a time (first stage, encoding, subgraphs)


@dataclass
class Example:
    """One query made ready for the network (numpy; the context node is local index ``len(nodes)``)."""

    vector: np.ndarray  # the query's
    nodes: np.ndarray
    roles: np.ndarray
    edges: np.ndarray  # (2, E) local, context edges included
    types: np.ndarray
    scored: np.ndarray  # local indices of the nodes scored
    features: np.ndarray  # (len(scored), 3): first-stage score (min-max), reciprocal rank, returned
    gold: np.ndarray  # (len(scored),) bool
    rest: np.ndarray  # first-stage ids not scored, in its order
    answers: frozenset[int]

    @property
    def reachable(self) -> bool:
        return bool(self.gold.any())


class QAGNNRetriever(harness.Reranker):
    """QA-GNN over an SKB: entity linking, k-hop subgraphs, typed message passing, candidate scoring."""

    name = "qagnn"
    version = "2"  # 2: node vectors encoded alone on one thread (deterministic whatever the cache held)
    regime = "trained"
    batch_size = 32
    fills = True  # the scored candidates, then the first stage's other results up to k

    class Options(harness.DocumentOptions):
        first_stage: str = Field("bm25", description="the retriever whose candidates are scored (registry or plugin)")
        candidates: int = Field(20, gt=0, description="how many first-stage results seed the subgraph and are scored")
        model: str = Field(
            DEFAULT_MODEL,
            description="the frozen text encoder of node documents and queries: a sentence-transformers directory, "
            "an installed model package or a hub id",
        )
        max_length: int | None = Field(None, gt=0, description="tokens of each text the encoder reads (null: its own)")
        encode_batch_size: int = Field(64, gt=0, description="texts per forward pass of the encoder")
        max_entities: int = Field(10, ge=0, description="linked entities per query (longest mentions first)")
        max_ngram: int = Field(5, gt=0, description="node names of more words are never linked")
        hops: int = Field(2, ge=0, le=3, description="k of the k-hop subgraph around entities and candidates")
        max_nodes: int = Field(200, gt=0, description="nodes per subgraph at most (QA-GNN: 200)")
        max_neighbors: int = Field(20, gt=0, description="neighbours read per node and relation (a seeded sample)")
        sample_seed: int = Field(0, description="the seed of neighbour sampling (the same at training and search)")
        graph_candidates: bool = Field(
            True, description="also score candidate nodes the subgraph reaches that the first stage did not return"
        )
        conv: Literal["gat", "rgcn"] = Field(
            "gat", description="gat: attention with relation embeddings as edge features; rgcn: R-GCN (basis)"
        )
        hidden: int = Field(128, gt=0, description="node state size")
        layers: int = Field(2, gt=0, description="message-passing layers")
        heads: int = Field(4, gt=0, description="attention heads (gat)")
        dropout: float = Field(0.2, ge=0, lt=1)
        epochs: int = Field(10, ge=0, description="training epochs at most (0: the untrained network)")
        train_batch_size: int = Field(16, gt=0, description="queries per gradient step")
        lr: float = Field(1e-3, gt=0, description="Adam's learning rate")
        weight_decay: float = Field(0.0, ge=0)
        patience: int = Field(3, gt=0, description="epochs without a better validation MRR before stopping")
        amp: bool = Field(True, description="bfloat16 autocast on a GPU")
        fail_at_epoch: int | None = Field(
            None, exclude=True, description="testing: fail when this epoch starts (a kill); not recorded, not keyed"
        )

        @model_validator(mode="after")
        def _consistent(self) -> Self:
            if self.max_nodes < self.candidates + self.max_entities:
                raise ValueError(
                    f"max_nodes ({self.max_nodes}) must hold the candidates and entities "
                    f"({self.candidates} + {self.max_entities})"
                )
            if self.hidden % 2 or (self.conv == "gat" and self.hidden % self.heads):
                raise ValueError(
                    f"hidden ({self.hidden}) must be even and, with gat, a multiple of heads ({self.heads})"
                )
            return self

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.network: Any = None
        self.meta: dict[str, Any] = {}
        self._ready_for: str | None = None
        self._snapshot: harness.HubSnapshot | None = None

    # -- the lifecycle ---------------------------------------------------------------
    def training_identity(self) -> dict[str, Any]:
        path, self._snapshot = resolve_model(self.options.model)
        return {"encoder": harness.directory_digest(path), "sentence-transformers": version("sentence-transformers")}

    def provenance(self) -> dict[str, Any]:
        return self._snapshot.provenance() if self._snapshot else {}

    def fit(self, skb: harness.SKB, train: Sequence[harness.Query], context: harness.TrainContext) -> None:
        import torch

        options = self.options
        started = time.perf_counter()
        self._prepare(skb, context)
        self.first_stage = context.retriever(options.first_stage)
        examples = self._examples(train, None, context, "training")
        usable = [e for e in examples if e.reachable]
        skipped = len(examples) - len(usable)
        if not usable:
            raise harness.HarnessError(
                f"qagnn: none of the {len(examples)} training queries has an answer among its candidates "
                f"({options.first_stage}'s top {options.candidates} and the subgraph); nothing to train on"
            )
        validation = self._examples(context.validation, None, context, "validation")
        prepared, stepping, stepped = time.perf_counter() - started, 0.0, 0
        self.network = self._network(skb)
        self.network.to(context.device)
        optimizer = torch.optim.Adam(self.network.parameters(), lr=options.lr, weight_decay=options.weight_decay)

        def restore(saved: Mapping[str, Any]) -> None:
            self.network.load_state_dict(saved["network"])
            optimizer.load_state_dict(saved["optimizer"])

        loop = harness.EpochLoop(
            context,
            options.epochs,
            state=lambda: {"network": _copy(self.network), "optimizer": optimizer.state_dict()},
            restore=restore,
            metric="val_mrr" if validation else None,
            patience=options.patience,
            fail_at=options.fail_at_epoch,
        )
        for epoch in loop:
            order = epoch.rng.permutation(len(usable))
            batches = [order[i : i + options.train_batch_size] for i in range(0, len(order), options.train_batch_size)]
            self.network.train()
            losses = []
            with context.task(
                f"qagnn: epoch {epoch.number}/{options.epochs} ({len(usable)} queries, {skipped} unreachable)"
                f"{loop.summary()}",
                len(batches),
            ) as bar:
                for chosen in batches:
                    step = time.perf_counter()
                    batch = self._batch([usable[i] for i in chosen], context.device)
                    optimizer.zero_grad()
                    with self._autocast(context.device):
                        loss = _set_loss(self.network(batch).float(), batch)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.network.parameters(), 1.0)
                    optimizer.step()
                    losses.append(float(loss.detach()))
                    stepping, stepped = stepping + time.perf_counter() - step, stepped + len(chosen)
                    bar.advance()
            scores = {"val_mrr": self._mrr(validation, context.device)} if validation else {}
            loop.end(epoch, loss=float(np.mean(losses)), **scores)
        loop.restore_best()
        meta = self._meta(skb)
        meta["trained"] = {
            "epochs": loop.epoch,
            "best_epoch": loop.kept_epoch,
            "best_val_mrr": loop.best,
            "queries": len(usable),
            "unreachable": skipped,
            # this attempt's: preparing the queries (first stage, encoding, subgraphs), then
            # training steps (batching included, validation not)
            "prepare_seconds": round(prepared, 3),
            "examples_per_second": round(stepped / stepping, 2) if stepping else None,
        }
        _torch_save(_copy(self.network), context.checkpoint_dir / CHECKPOINT)
        harness.write_json(context.checkpoint_dir / META, meta)
        loop.report(len(usable), prepared)  # training seconds include validation and epoch checkpoints

    def load_checkpoint(self, path: Path) -> None:
        import torch

        meta = json.loads((path / META).read_text(encoding="utf-8"))
        self.network = self._network_from(meta)
        self.network.load_state_dict(torch.load(path / CHECKPOINT, map_location="cpu", weights_only=True))
        self.meta = meta

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        super().build(skb, context)  # the first stage
        self._prepare(skb, context)
        expected = self._meta(skb)
        for key in ("relations", "node_types"):
            if self.meta.get(key) != expected[key]:
                raise harness.HarnessError(
                    f"qagnn: the checkpoint was trained on an SKB with other {key.replace('_', ' ')} "
                    f"({self.meta.get(key)}) than {skb.name!r} ({expected[key]})"
                )
        self.network.to(context.device).eval()
        self.device = context.device

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        given = top_ranked is not None
        first = (
            list(top_ranked)
            if top_ranked is not None
            else self.first_stage.search(queries, max(k, self.options.candidates))
        )
        examples = self._examples(queries, first, None, None, graph_candidates=not given)
        return self.noting_first_stage([ranking.top(k) for ranking in self._rankings(examples, self.device)], first)

    def rerank(
        self, queries: Sequence[harness.Query], candidates: Sequence[harness.Ranking], k: int
    ) -> list[harness.Ranking]:
        return self.search(queries, k, candidates)

    # -- preparing queries -----------------------------------------------------------
    def _prepare(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        """The encoder, linker, subgraph builder and node vectors of ``skb`` (once per SKB)."""
        if self._ready_for == skb.fingerprint:
            return
        options = self.options
        self._skb = skb
        self.encoder = TextEncoder(options.model, options.max_length, options.encode_batch_size, context.device)
        self._snapshot = self.encoder.snapshot
        with context.task(f"qagnn: indexing the names of {skb.num_nodes} nodes"):
            self.linker = EntityLinker(skb.names, max_ngram=options.max_ngram)
        self.subgraphs = Subgraphs(skb, options.hops, options.max_nodes, options.max_neighbors, options.sample_seed)
        self.vectors: NodeVectors = node_vectors(
            skb, self.encoder, context.cache_dir, options.with_relations, options.compact
        )
        self.node_types = np.asarray(skb.node_types, dtype=np.int64)
        self._ready_for = skb.fingerprint

    def _examples(
        self,
        queries: Sequence[harness.Query],
        first: Sequence[harness.Ranking] | None,
        context: harness.BuildContext | None,
        what: str | None,
        graph_candidates: bool | None = None,
    ) -> list[Example]:
        """``queries`` made ready: the first stage asked (unless ``first`` is given), their
        vectors encoded, entities linked, subgraphs built, the new nodes encoded; in chunks, with
        a progress bar on ``context`` (training) for ``what``."""
        options = self.options
        graph_candidates = options.graph_candidates if graph_candidates is None else graph_candidates
        examples: list[Example] = []
        bar = context.task(f"qagnn: {what} subgraphs", len(queries)) if context and what and queries else None
        with bar or contextlib.nullcontext() as task:
            for start in range(0, len(queries), CHUNK):
                chunk = list(queries[start : start + CHUNK])
                rankings = first[start : start + CHUNK] if first is not None else None
                if rankings is None:
                    rankings = self.first_stage.search(chunk, options.candidates)
                vectors = self.encoder.encode([q.text for q in chunk], "query")
                made = [
                    self._example(vector, query, ranking, graph_candidates)
                    for vector, query, ranking in zip(vectors, chunk, rankings, strict=True)
                ]
                self.vectors.get(np.unique(np.concatenate([e.nodes for e in made])), context)  # the new ones, once
                examples += made
                if task is not None:
                    task.advance(len(chunk))
        return examples

    def _example(
        self, vector: np.ndarray, query: harness.Query, ranking: harness.Ranking, graph_candidates: bool
    ) -> Example:
        options = self.options
        entities = self.linker.link(query.text, options.max_entities)
        first_ids = ranking.ids[: options.candidates]
        graph = self.subgraphs.build(entities, first_ids)
        n = len(graph.nodes)
        position = {int(node): i for i, node in enumerate(graph.nodes)}
        scored = [position[int(i)] for i in first_ids]
        if graph_candidates:
            reached = np.flatnonzero(self._skb.is_candidate(graph.nodes) & (graph.roles != CANDIDATE))
            scored += reached.tolist()
        scored_ids = graph.nodes[scored]
        features = np.zeros((len(scored), 3), dtype=np.float32)
        top = ranking.scores[: options.candidates]
        if len(top):
            low, high = float(top.min()), float(top.max())
            features[: len(top), 0] = (top - low) / (high - low) if high > low else 1.0
            features[: len(top), 1] = 1.0 / np.arange(1, len(top) + 1)
            features[: len(top), 2] = 1.0
        relations = len(self.subgraphs.labels)
        context_edges = [graph.edges]
        context_types = [graph.types]
        for role, offset in ((ENTITY, 0), (CANDIDATE, 2)):
            members = np.flatnonzero(graph.roles == role)
            context_edges += [
                np.stack([np.full(len(members), n), members]),
                np.stack([members, np.full(len(members), n)]),
            ]
            context_types += [np.full(len(members), relations + offset), np.full(len(members), relations + offset + 1)]
        answers = frozenset(int(a) for a in query.answer_ids)
        chosen = set(scored_ids.tolist())
        return Example(
            vector=vector,
            nodes=graph.nodes,
            roles=graph.roles,
            edges=np.concatenate(context_edges, axis=1).astype(np.int32),  # local: half the memory
            types=np.concatenate(context_types).astype(np.int32),
            scored=np.asarray(scored, dtype=np.int32),
            features=features,
            gold=np.asarray([int(i) in answers for i in scored_ids], dtype=bool),
            rest=np.asarray([i for i in ranking.ids.tolist() if i not in chosen], dtype=np.int64),
            answers=answers,
        )

    # -- the network -----------------------------------------------------------------
    def _meta(self, skb: harness.SKB) -> dict[str, Any]:
        """What the network's shape depends on besides the options."""
        return {
            "relations": relation_labels(skb),
            "node_types": list(skb.node_type_names),
            "text_dim": self.encoder.dimension,
            "options": self.params,
        }

    def _network(self, skb: harness.SKB) -> Any:
        return self._network_from(self._meta(skb))

    def _network_from(self, meta: dict[str, Any]) -> Any:
        from harness_gnn.model import QAGNN

        options = self.options
        return QAGNN(
            text_dim=meta["text_dim"],
            num_relations=len(meta["relations"]) + 4,  # + context→entity, entity→context, and for candidates
            num_node_types=len(meta["node_types"]),
            hidden=options.hidden,
            layers=options.layers,
            conv=options.conv,
            heads=options.heads,
            dropout=options.dropout,
        )

    def _batch(self, examples: Sequence[Example], device: str) -> Any:
        """``examples`` as one disjoint graph (the tensors of :class:`harness_gnn.model.Batch`)."""
        import torch

        from harness_gnn.model import Batch

        texts, contexts, roles, kinds, relevance, edges, types = [], [], [], [], [], [], []
        scored, graph, slot, features, gold = [], [], [], [], []
        offset = 0
        for g, example in enumerate(examples):
            query = example.vector
            nodes = self.vectors.get(example.nodes)
            similarity = nodes @ query
            n = len(example.nodes)
            texts += [nodes, query[None, :]]
            contexts.append(offset + n)
            roles += [example.roles, [CONTEXT]]
            kinds += [self.node_types[example.nodes], [len(self._skb.node_type_names)]]
            relevance += [similarity, [0.0]]
            edges.append(example.edges.astype(np.int64) + offset)
            types.append(example.types)
            scored.append(example.scored.astype(np.int64) + offset)
            graph.append(np.full(len(example.scored), g))
            slot.append(np.arange(len(example.scored)))
            features.append(np.concatenate([example.features, similarity[example.scored, None]], axis=1))
            gold.append(example.gold)
            offset += n + 1

        def tensor(parts: list[Any], dtype: Any) -> Any:
            return torch.as_tensor(np.concatenate([np.asarray(p) for p in parts]), dtype=dtype)

        batch = Batch(
            text=torch.as_tensor(np.concatenate(texts), dtype=torch.float32),
            is_context=torch.as_tensor(np.isin(np.arange(offset), contexts)),
            role=tensor(roles, torch.long),
            kind=tensor(kinds, torch.long),
            relevance=tensor(relevance, torch.float32),
            edge_index=torch.as_tensor(np.concatenate(edges, axis=1), dtype=torch.long),
            edge_type=tensor(types, torch.long),
            scored=tensor(scored, torch.long),
            graph=tensor(graph, torch.long),
            slot=tensor(slot, torch.long),
            context=torch.as_tensor(contexts, dtype=torch.long),
            features=torch.as_tensor(np.concatenate(features), dtype=torch.float32),
            gold=tensor(gold, torch.bool),
        )
        return batch.to(device)

    def _autocast(self, device: str) -> contextlib.AbstractContextManager[Any]:
        import torch

        if device == "cuda" and self.options.amp:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _scores(self, examples: Sequence[Example], device: str) -> Iterator[np.ndarray]:
        """Each example's scores of its scored nodes (the network in eval mode, no gradients)."""
        import torch

        self.network.eval()
        size = 64
        for start in range(0, len(examples), size):
            chunk = [e for e in examples[start : start + size] if len(e.scored)]
            parts: Iterator[np.ndarray] = iter(())
            if chunk:
                batch = self._batch(chunk, device)
                # on fixed threads: the same scores on any machine, in validation and in search
                with torch.no_grad(), self._autocast(device), pinned_threads():
                    scores = self.network(batch).float().cpu().numpy().astype(np.float64)
                bounds = np.cumsum([len(e.scored) for e in chunk])[:-1]
                parts = iter(np.split(scores, bounds))
            for example in examples[start : start + size]:
                yield next(parts) if len(example.scored) else np.zeros(0)

    def _rankings(self, examples: Sequence[Example], device: str) -> list[harness.Ranking]:
        rankings = []
        for example, scores in zip(examples, self._scores(examples, device), strict=True):
            order = np.argsort(-scores, kind="stable")  # ties: first-stage order
            ids = example.nodes[example.scored][order]
            ordered = scores[order]
            floor = float(ordered[-1]) if len(ordered) else 0.0
            rest_scores = floor - np.arange(1, len(example.rest) + 1, dtype=np.float64)
            rankings.append(
                harness.Ranking(np.concatenate([ids, example.rest]), np.concatenate([ordered, rest_scores]))
            )
        return rankings

    def _mrr(self, examples: Sequence[Example], device: str) -> float:
        reciprocal = []
        for example, ranking in zip(examples, self._rankings(examples, device), strict=True):
            hits = np.flatnonzero(np.isin(ranking.ids, list(example.answers)))
            reciprocal.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
        return float(np.mean(reciprocal))


# -- training state ------------------------------------------------------------------
def _set_loss(scores: Any, batch: Any) -> Any:
    from harness_gnn.model import set_loss

    return set_loss(scores, batch)


def _copy(network: Any) -> dict[str, Any]:
    return {name: value.detach().cpu().clone() for name, value in network.state_dict().items()}


def _torch_save(value: Any, path: Path) -> None:
    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    with harness.atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())
