"""The ``daqu`` retriever: DAQu (Jeong et al., *Database-Augmented Query Representation for
Information Retrieval*) adapted to SKB retrieval.

Per query: link it to SKB entities, gather their metadata table by table (:mod:`.metadata`),
encode it with DAQu's two-level set encoding into ``q'`` and mix it into the query's own vector,
``q~ = λ q + (1 - λ) q'`` (:mod:`.model`); candidates are scored by the cosine of ``q~`` and
their document vectors. By default the candidates are the top ``candidates`` of a first stage
(``first_stage``, the dense MiniLM preset); with ``candidates: null`` every candidate of the SKB
is scored. Trained on the train split: DAQu's contrastive loss (Eq. 2) over in-batch and
first-stage hard negatives, AdamW, in the harness's training loop (``harness.EpochLoop``: early
stopping on the validation split's MRR, the untrained model competing, an epoch checkpoint after
every epoch, resumed after a kill).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness_daqu.metadata import Gatherer, Metadata
from harness_dense.embeddings import DEFAULT_MODEL, LocalEncoder, cache_for, embed_with_cache, resolve_model
from harness_dense.retrievers import top_k

CHECKPOINT, META, ENCODER = "model.pt", "daqu.json", "encoder"
CHUNK = 256  # queries made ready at a time (linking, gathering, encoding, the first stage)
SEARCH_DEPTH = 20  # first-stage results read past the hard negatives wanted (some are answers)


@dataclass
class Example:
    """A query made ready: its metadata, its vectors (the features' unless the encoder is being fine-tuned),
    the candidates to score (None: all) and, for training, answers and hard negatives."""

    query: harness.Query
    meta: Metadata
    vector: np.ndarray
    features: np.ndarray | None
    pool: np.ndarray | None
    positives: np.ndarray
    negatives: np.ndarray


#: ``model: retriever:NAME``: the base encoder is the fine-tuned one of the trained retriever NAME
BACKBONE = "retriever:"


class DAQuRetriever(harness.Retriever):
    """DAQu over an SKB: linked entities' relations as tables, neighbours' fields as features."""

    name = "daqu"
    version = "1"
    regime = "trained"
    batch_size = 32
    reranks = True  # with top_ranked (or a first stage), only the given candidates are scored

    class Options(harness.DocumentOptions):
        first_stage: str = Field(
            "dense",
            description="the retriever whose top candidates are scored (with candidates: N) and which mines "
            "hard negatives (registry entry or plugin)",
        )
        candidates: int | None = Field(
            100, gt=0, description="score the first stage's top N; null: score every candidate of the SKB"
        )
        model: str = Field(
            DEFAULT_MODEL,
            description="the base sentence-transformers encoder of queries, features and documents (frozen "
            "unless finetune_encoder): a directory, an installed model package, a hub id, or retriever:NAME - the "
            "fine-tuned encoder of the trained dense retriever NAME (dense-ft): DAQu on a fine-tuned backbone",
        )
        query_prefix: str = Field("", description='text put before each query ("query: " for E5)')
        document_prefix: str = Field("", description="text put before each document and feature")
        max_length: int | None = Field(None, gt=0, description="tokens of each text the encoder reads (null: its own)")
        encode_batch_size: int = Field(64, gt=0, description="texts per forward pass of the encoder")
        lam: float = Field(
            0.7, ge=0, le=1, description="DAQu's λ: q~ = λ q + (1-λ) q' (1: the query alone; 0: the metadata alone)"
        )
        pooling: Literal["mean", "attention"] = Field(
            "mean",
            description="the set encoding's two levels: mean (DAQu's MEAN, features then columns) or "
            "attention (query-conditioned softmax weights, starting as the mean)",
        )
        max_entities: int = Field(5, ge=0, description="linked entities per query (longest mentions first)")
        max_ngram: int = Field(5, gt=0, description="node names of more words are never linked")
        entity_types: list[str] | None = Field(
            None, min_length=1, description="link only nodes of these types (null: every type)"
        )
        max_per_relation: int = Field(
            20, gt=0, description="rows per entity and table at most (a sample seeded by entity and table: hubs)"
        )
        fields: list[str] | None = Field(
            None,
            min_length=1,
            description="the columns read from each row: 'name' and field names (null: the name and every field)",
        )
        self_table: bool = Field(True, description="the linked entities' own fields as a table of their own")
        max_chars: int = Field(1000, gt=0, description="characters of a feature's value kept")
        sample_seed: int = Field(0, description="the seed of the rows sampled from a table larger than the bound")
        train_features: int = Field(
            30, gt=0, description="training: features sampled per column and step (DAQu: 30, without gradients)"
        )
        grad_features: int = Field(
            3, ge=0, description="training: of those, how many are encoded with gradients (DAQu: 3)"
        )
        hard_negatives: int = Field(
            3, ge=0, description="per training query, the first stage's best candidates that are not answers"
        )
        train_query: bool = Field(
            False,
            description="train Enc_q too (DAQu trains it; so does the daqu-ft-64 preset); false: q is the base "
            "encoder's query vector, so "
            "lam: 1 is the dense first stage's ranking and every change comes from the metadata",
        )
        finetune_encoder: bool = Field(
            False,
            description="fine-tune the base encoder itself as Enc_r (and Enc_q with train_query); documents keep "
            "the base vectors. false: train only the adapters on top of the frozen encoder",
        )
        epochs: int = Field(10, ge=0, description="training epochs at most (0: the untrained model)")
        train_batch_size: int = Field(16, gt=0, description="queries per step (each one's negatives: the others' too)")
        lr: float = Field(1e-3, gt=0, description="AdamW's learning rate of the adapters")
        encoder_lr: float = Field(2e-5, gt=0, description="AdamW's learning rate of a fine-tuned encoder (DAQu: 2e-5)")
        weight_decay: float = Field(0.0, ge=0)
        temperature: float = Field(0.05, gt=0, description="the contrastive loss's softmax temperature on cosines")
        patience: int = Field(3, gt=0, description="epochs without a better validation MRR before stopping")
        fail_at_epoch: int | None = Field(
            None, exclude=True, description="testing: fail when this epoch starts (a kill); not recorded, not keyed"
        )

        @model_validator(mode="after")
        def _consistent(self) -> Self:
            if self.grad_features > self.train_features:
                raise ValueError(
                    f"grad_features ({self.grad_features}) must not exceed train_features ({self.train_features})"
                )
            return self

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.network: Any = None
        self.meta: dict[str, Any] = {}
        self.encoder_dir: Path | None = None  # the fine-tuned encoder of a loaded checkpoint
        self._ready_for: str | None = None
        self._snapshot: harness.HubSnapshot | None = None
        self.first_stage: harness.Retriever | None = None

    def uses(self) -> list[str]:
        o = self.options
        used = [o.first_stage] if self._needs_first_stage else []
        backbone = self._backbone
        return [*used, backbone] if backbone and backbone not in used else used

    @property
    def _needs_first_stage(self) -> bool:
        return self.options.candidates is not None or bool(self.options.hard_negatives)

    @property
    def _backbone(self) -> str | None:
        """The trained retriever whose fine-tuned encoder is the base (``model: retriever:NAME``)."""
        model = self.options.model
        return model.removeprefix(BACKBONE) if model.startswith(BACKBONE) else None

    # -- the lifecycle ---------------------------------------------------------------
    def training_identity(self) -> dict[str, Any]:
        version = _version("sentence-transformers")
        if self._backbone:  # its training (configuration, seed, data) is part of the plan's `uses`
            return {"encoder": f"{BACKBONE}{self._backbone}", "sentence-transformers": version}
        path, self._snapshot = resolve_model(self.options.model)
        return {"encoder": harness.directory_digest(path), "sentence-transformers": version}

    def provenance(self) -> dict[str, Any]:
        return self._snapshot.provenance("model") if self._snapshot else {}

    def fit(self, skb: harness.SKB, train: Sequence[harness.Query], context: harness.TrainContext) -> None:
        import torch

        from harness_daqu.model import DAQu, state

        o = self.options
        started = time.perf_counter()
        self._prepare(skb, context)
        self.query_encoder = self.feature_encoder = self.encoder
        self.first_stage = context.retriever(o.first_stage) if self._needs_first_stage else None
        live = self._live(context.device) if o.finetune_encoder else None
        examples = self._examples(train, context, "training", training=True, precompute=live is None)
        usable = [e for e in examples if len(e.positives)]
        if not usable:
            raise harness.HarnessError(
                f"daqu: none of the {len(examples)} training queries has an answer among the SKB's candidates; "
                "nothing to train on"
            )
        validation = self._examples(context.validation, context, "validation", precompute=live is None)
        prepared = time.perf_counter() - started
        self.network = DAQu(self.dimension, o.lam, o.pooling).to(context.device)
        if not o.train_query:
            self.network.query.requires_grad_(False)  # stays the identity: q is the base encoder's
        groups: list[dict[str, Any]] = [
            {"params": [p for p in self.network.parameters() if p.requires_grad], "lr": o.lr}
        ]
        if live is not None:
            groups.append({"params": list(live.parameters()), "lr": o.encoder_lr})
        optimizer = torch.optim.AdamW(groups, weight_decay=o.weight_decay)

        def snapshot() -> dict[str, Any]:
            return {**_weights(self.network, live), "optimizer": optimizer.state_dict()}

        def restore(saved: Mapping[str, Any]) -> None:
            self.network.load_state_dict(saved["network"])
            if live is not None:
                live.load_state_dict(saved["encoder"])
            optimizer.load_state_dict(saved["optimizer"])

        loop = harness.EpochLoop(
            context,
            o.epochs,
            state=snapshot,
            restore=restore,
            metric="val_mrr" if validation else None,
            patience=o.patience,
            fail_at=o.fail_at_epoch,
        )
        loop.baseline(lambda: self._mrr(validation, live, context.device))  # training must beat the untrained model
        augmented = sum(e.meta.augmented for e in usable)
        for epoch in loop:
            order = epoch.rng.permutation(len(usable))
            batches = [order[i : i + o.train_batch_size] for i in range(0, len(order), o.train_batch_size)]
            self.network.train()
            if live is not None:
                live.train()
            losses = []
            with context.task(
                f"daqu: epoch {epoch.number}/{o.epochs} ({len(usable)} queries, {augmented} with metadata)"
                f"{loop.summary()}",
                len(batches),
            ) as bar:
                for chosen in batches:
                    optimizer.zero_grad()
                    loss = self._loss([usable[i] for i in chosen], epoch.rng, live, context.device)
                    if loss.requires_grad:  # not when nothing trainable entered it (no query with metadata)
                        loss.backward()
                        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 1.0)
                        optimizer.step()
                    losses.append(float(loss.detach()))
                    bar.advance()
            scores = {"val_mrr": self._mrr(validation, live, context.device)} if validation else {}
            loop.end(epoch, loss=float(np.mean(losses)), **scores)
        loop.restore_best()
        if live is not None:
            live.save(str(context.checkpoint_dir / ENCODER))
        _torch_save(state(self.network), context.checkpoint_dir / CHECKPOINT)
        meta = {
            "dimension": self.dimension,
            "options": self.params,
            "trained": {
                "epochs": loop.epoch,
                "best_epoch": loop.kept_epoch,
                "best_val_mrr": loop.best,
                "untrained_val_mrr": loop.baseline_score,
                "queries": len(usable),
                "without_candidate_answer": len(examples) - len(usable),
                "with_metadata": augmented,
                "prepare_seconds": round(prepared, 3),
            },
        }
        harness.write_json(context.checkpoint_dir / META, meta)
        loop.report(len(usable), prepared)

    def load_checkpoint(self, path: Path) -> None:
        import torch

        from harness_daqu.model import DAQu

        meta = json.loads((path / META).read_text(encoding="utf-8"))
        self.network = DAQu(meta["dimension"], self.options.lam, self.options.pooling)
        self.network.load_state_dict(torch.load(path / CHECKPOINT, map_location="cpu", weights_only=True))
        self.meta = meta
        self.encoder_dir = path / ENCODER if self.options.finetune_encoder else None
        if self.encoder_dir is not None and not (self.encoder_dir / "modules.json").is_file():
            raise harness.HarnessError(f"daqu: checkpoint {path} holds no fine-tuned encoder in {ENCODER}/")

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        if self.network is None:
            raise harness.HarnessError("daqu: no trained model loaded (it is a trained retriever: train it first)")
        self._prepare(skb, context)
        if self.meta["dimension"] != self.dimension:
            raise harness.HarnessError(
                f"daqu: the checkpoint's vectors have {self.meta['dimension']} dimensions, the encoder "
                f"{self.options.model!r} gives {self.dimension}"
            )
        o = self.options
        self.query_encoder = self.feature_encoder = self.encoder
        if self.encoder_dir is not None:
            self.feature_encoder = LocalEncoder(
                str(self.encoder_dir),
                o.query_prefix,
                o.document_prefix,
                o.encode_batch_size,
                o.max_length,
                context.device,
            )
            if o.train_query:
                self.query_encoder = self.feature_encoder
        self.network.to(context.device).eval()
        self.device = context.device
        if o.candidates is not None:
            self.first_stage = context.retriever(o.first_stage)

    # -- health: whether the query was augmented with its entities' metadata (the paper's idea)
    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        if not details or "features" not in details:
            return {}
        return {"linked": float(bool(details.get("entities"))), "augmented": float(details["features"] > 0)}

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[harness.HealthCheck]:
        return [harness.HealthCheck("augmented", "a query augmented with its entities' metadata")]

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        o = self.options
        pools: list[np.ndarray] | None = None
        if top_ranked is not None:
            pools = [r.ids for r in top_ranked]
        elif o.candidates is not None:
            assert self.first_stage is not None
            pools = [r.ids for r in self.first_stage.search(queries, max(k, o.candidates))]
        examples = self._examples(queries, None, None, pools=pools)
        scope = "all candidates" if pools is None else ("top_ranked" if top_ranked is not None else "first stage")
        rankings = []
        for example, (ids, scores) in zip(examples, self._rank(examples, None, self.device, k), strict=True):
            details = example.meta.details(self._skb)
            details["scored"] = {
                "from": scope,
                "candidates": len(self.all_ids if example.pool is None else example.pool),
            }
            rankings.append(harness.Ranking(ids, scores, details))
        return rankings

    # -- preparing queries -----------------------------------------------------------
    def _base_model(self, context: harness.BuildContext) -> str:
        """``model``, or the fine-tuned encoder of the trained retriever it names (``retriever:NAME``)."""
        if not self._backbone:
            return self.options.model
        used = context.retriever(self._backbone)
        model_dir = getattr(getattr(used, "inner", used), "model_dir", None)
        if model_dir is None:
            raise harness.HarnessError(
                f"daqu: model {self.options.model!r}: {self._backbone!r} has no fine-tuned encoder to build on; "
                "name a trained dense retriever (dense-ft)"
            )
        return str(model_dir)

    def _prepare(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        """The gatherer, the base encoder and the documents' vectors of ``skb`` (once per SKB)."""
        if self._ready_for == skb.fingerprint:
            return
        o = self.options
        self._skb, self.cache_dir = skb, Path(context.cache_dir)
        with context.task(f"daqu: indexing the names of {skb.num_nodes} nodes"):
            self.gatherer = Gatherer(
                skb,
                max_entities=o.max_entities,
                max_ngram=o.max_ngram,
                entity_types=o.entity_types,
                max_per_relation=o.max_per_relation,
                fields=o.fields,
                self_table=o.self_table,
                max_chars=o.max_chars,
                sample_seed=o.sample_seed,
            )
        self.encoder = LocalEncoder(
            self._base_model(context),
            o.query_prefix,
            o.document_prefix,
            o.encode_batch_size,
            o.max_length,
            context.device,
        )
        self._snapshot = self.encoder.snapshot
        self.dimension = self.encoder.dimension
        self.documents = Documents(skb, self.encoder, self.cache_dir, o.with_relations, o.compact)
        self.all_ids = skb.candidate_ids
        if o.candidates is None:  # every candidate is scored: its vector, once (dense's cache when it matches)
            with context.task(f"daqu: encode {len(self.all_ids)} documents"):
                self.matrix = self.documents.get(self.all_ids, context)
        self._ready_for = skb.fingerprint

    def _examples(
        self,
        queries: Sequence[harness.Query],
        context: harness.BuildContext | None,
        what: str | None,
        pools: Sequence[np.ndarray] | None = None,
        training: bool = False,
        precompute: bool = True,
    ) -> list[Example]:
        """``queries`` linked, their metadata gathered and encoded (``precompute``), their pools
        taken from the first stage (a validation ranks what search would; training needs only its hard
        negatives), in chunks."""
        o = self.options
        examples: list[Example] = []
        bar = context.task(f"daqu: {what} queries", len(queries)) if context and what and queries else None
        with bar or contextlib.nullcontext() as task:
            for start in range(0, len(queries), CHUNK):
                chunk = list(queries[start : start + CHUNK])
                chunk_pools: Sequence[np.ndarray | None] = [None] * len(chunk)
                if pools is not None:
                    chunk_pools = pools[start : start + CHUNK]
                elif o.candidates is not None and self.first_stage is not None and not training:
                    chunk_pools = [r.ids for r in self.first_stage.search(chunk, o.candidates)]
                mined: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(chunk)
                if training and o.hard_negatives and self.first_stage is not None:
                    mined = [r.ids for r in self.first_stage.search(chunk, o.hard_negatives + SEARCH_DEPTH)]
                metas = [self.gatherer.gather(q.text) for q in chunk]
                vectors = self.query_encoder.encode([q.text for q in chunk], "query")
                features = self._feature_vectors([m.texts for m in metas]) if precompute else None
                for i, (query, meta) in enumerate(zip(chunk, metas, strict=True)):
                    answers = np.asarray(sorted(set(query.answer_ids)), dtype=np.int64)
                    negatives = mined[i][~np.isin(mined[i], answers)][: o.hard_negatives]
                    examples.append(
                        Example(
                            query=query,
                            meta=meta,
                            vector=vectors[i],
                            features=None if features is None else features[i],
                            pool=None if chunk_pools[i] is None else np.asarray(chunk_pools[i], dtype=np.int64),
                            positives=answers[self._skb.is_candidate(answers)],
                            negatives=negatives,
                        )
                    )
                if task is not None:
                    task.advance(len(chunk))
        return examples

    def _feature_vectors(self, texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Base vectors of each query's features (every distinct text encoded once, then cached)."""
        unique = sorted({t for group in texts for t in group})
        empty = np.zeros((0, self.dimension), dtype=np.float32)
        if not unique:
            return [empty for _ in texts]
        vectors = embed_with_cache(self.feature_encoder, cache_for(self.feature_encoder, self.cache_dir), unique)
        row = {t: i for i, t in enumerate(unique)}
        return [vectors[[row[t] for t in group]] if group else empty for group in texts]

    # -- the network's inputs, loss and rankings -------------------------------------
    def _inputs(
        self, examples: Sequence[Example], rng: np.random.Generator | None, live: Any, device: str
    ) -> tuple[Any, ...]:
        """The network's inputs for ``examples``. ``rng`` (training): DAQu's sampling, per column
        ``train_features`` features of which ``grad_features`` take gradients; otherwise all."""
        import torch

        o = self.options
        chosen, column, column_query = [], [], []
        grad: list[np.ndarray | list[bool]] = []
        offset = 0
        for i, example in enumerate(examples):
            columns = example.meta.columns
            count = len(example.meta.column_names)
            if rng is None:
                picked = np.arange(len(columns))
                grad.append(np.ones(len(picked), dtype=bool))
            else:
                parts = [rng.permutation(np.flatnonzero(columns == c))[: o.train_features] for c in range(count)]
                picked = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
                grad.append(np.concatenate([np.arange(len(p)) < o.grad_features for p in parts]) if parts else [])
            chosen.append(picked)
            column.append(columns[picked] + offset)
            column_query.append(np.full(count, i))
            offset += count
        column_t = torch.as_tensor(np.concatenate(column), dtype=torch.long, device=device)
        column_query_t = torch.as_tensor(np.concatenate(column_query), dtype=torch.long, device=device)
        grad_mask = np.concatenate(grad).astype(bool)
        grad_t = torch.as_tensor(grad_mask, device=device) if rng is not None else None
        if live is not None and o.train_query:
            queries = self._live_encode(live, [o.query_prefix + e.query.text for e in examples], rng is not None)
        else:
            queries = torch.as_tensor(np.stack([e.vector for e in examples]), device=device)
        if live is None:
            parts = [e.features[p] for e, p in zip(examples, chosen, strict=True)]  # type: ignore[index]
            features = torch.as_tensor(np.concatenate(parts), device=device).reshape(-1, self.dimension)
        else:
            texts = [e.meta.texts[j] for e, p in zip(examples, chosen, strict=True) for j in p]
            features = self._live_features(live, [o.document_prefix + t for t in texts], grad_mask, rng is not None)
        return queries, features, column_t, column_query_t, grad_t

    def _live_features(self, live: Any, texts: list[str], grad: np.ndarray, training: bool) -> Any:
        """A fine-tuned encoder's vectors of ``texts``: those in ``grad`` with gradients (when
        ``training``), the others without (DAQu's efficient training)."""
        import torch

        if not texts:
            return torch.zeros((0, self.dimension), device=live.device)
        order = np.concatenate([np.flatnonzero(grad), np.flatnonzero(~grad)])
        with_grad = self._live_encode(live, [texts[i] for i in np.flatnonzero(grad)], training)
        with torch.no_grad():
            without = self._live_encode(live, [texts[i] for i in np.flatnonzero(~grad)], False)
        stacked = torch.cat([with_grad, without])
        inverse = torch.as_tensor(np.argsort(order), dtype=torch.long, device=stacked.device)
        return stacked[inverse]

    def _live_encode(self, live: Any, texts: list[str], grad: bool) -> Any:
        import torch
        from torch.nn import functional as F

        if not texts:
            return torch.zeros((0, self.dimension), device=live.device)
        parts = []
        with contextlib.nullcontext() if grad else torch.no_grad():
            for start in range(0, len(texts), self.options.encode_batch_size):
                tokenize = getattr(live, "preprocess", None) or live.tokenize  # renamed in sentence-transformers 5
                batch = tokenize(texts[start : start + self.options.encode_batch_size])
                batch = {key: value.to(live.device) if hasattr(value, "to") else value for key, value in batch.items()}
                parts.append(F.normalize(live(batch)["sentence_embedding"], dim=-1))
        return torch.cat(parts)

    def _live(self, device: str) -> Any:
        """A trainable copy of the base encoder (the frozen one keeps encoding documents)."""
        from sentence_transformers import SentenceTransformer

        live = SentenceTransformer(str(self.encoder.path), device=device, local_files_only=True)
        if self.options.max_length:
            live.max_seq_length = self.options.max_length
        return live

    def _loss(self, examples: Sequence[Example], rng: np.random.Generator, live: Any, device: str) -> Any:
        """DAQu's Eq. 2: each query's sampled answer against the batch's other answers and hard
        negatives; a document that answers the query too is no negative of it (masked)."""
        import torch
        from torch.nn import functional as F

        o = self.options
        combined = self.network(*self._inputs(examples, rng, live, device))
        positives = [int(rng.choice(e.positives)) for e in examples]
        ids = np.concatenate([np.asarray(positives, dtype=np.int64), *[e.negatives for e in examples]])
        documents = torch.as_tensor(self.documents.get(ids), device=device)
        logits = combined @ documents.T / o.temperature
        answers = [set(e.query.answer_ids) for e in examples]
        blocked = np.asarray([[int(d) in answers[i] for d in ids] for i in range(len(examples))])
        blocked[np.arange(len(examples)), np.arange(len(examples))] = False
        logits = logits.masked_fill(torch.as_tensor(blocked, device=device), -torch.inf)
        return F.cross_entropy(logits, torch.arange(len(examples), device=device))

    def _rank(
        self, examples: Sequence[Example], live: Any, device: str, k: int | None = None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each example's pool (or every candidate) scored by the cosine with its ``q~``, best first."""
        import torch

        self.network.eval()
        if live is not None:
            live.eval()
        out: list[tuple[np.ndarray, np.ndarray]] = []
        with torch.no_grad():
            for start in range(0, len(examples), 64):
                chunk = examples[start : start + 64]
                combined = self.network(*self._inputs(chunk, None, live, device)).float().cpu().numpy()
                for example, vector in zip(chunk, combined, strict=True):
                    if example.pool is None:
                        depth = len(self.all_ids) if k is None else min(k, len(self.all_ids))
                        rows, scores = top_k(vector[None, :], torch.as_tensor(self.matrix), depth)
                        out.append((self.all_ids[rows[0]], scores[0].astype(np.float64)))
                        continue
                    scores = self.documents.get(example.pool) @ vector
                    order = np.argsort(-scores, kind="stable")[:k]  # ties: the first stage's order
                    out.append((example.pool[order], scores[order].astype(np.float64)))
        return out

    def _mrr(self, examples: Sequence[Example], live: Any, device: str) -> float:
        reciprocal = []
        for example, (ids, _) in zip(examples, self._rank(examples, live, device), strict=True):
            hits = np.flatnonzero(np.isin(ids, list(example.query.answer_ids)))
            reciprocal.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
        return float(np.mean(reciprocal))


class Documents:
    """The base encoder's vectors of node documents, encoded when first asked for, through
    harness-dense's embedding cache (keyed by the encoder's content and the text: the dense
    retriever with the same model and settings shares them)."""

    def __init__(self, skb: harness.SKB, encoder: LocalEncoder, cache_dir: Path, with_relations: bool, compact: bool):
        self.skb, self.encoder, self.with_relations, self.compact = skb, encoder, with_relations, compact
        self.cache = cache_for(encoder, cache_dir)
        self.row = np.full(skb.num_nodes, -1, dtype=np.int64)
        self.vectors = np.zeros((0, encoder.dimension), dtype=np.float32)

    def get(self, ids: np.ndarray, context: harness.BuildContext | None = None) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        missing = np.unique(ids[self.row[ids] < 0])
        if len(missing):
            texts = list(self.skb.documents(missing, self.with_relations, self.compact))
            bar = context.task("daqu: encode documents", len(texts)) if context else None
            with bar or contextlib.nullcontext() as task:
                advance = task.advance if task is not None else None
                fresh = embed_with_cache(self.encoder, self.cache, texts, on_progress=advance)
            self.row[missing] = len(self.vectors) + np.arange(len(missing))
            self.vectors = np.concatenate([self.vectors, fresh.reshape(len(missing), -1)])
        return self.vectors[self.row[ids]]


# -- training state ------------------------------------------------------------------
def _weights(network: Any, live: Any) -> dict[str, Any]:
    from harness_daqu.model import state

    return {"network": state(network), "encoder": state(live) if live is not None else None}


def _torch_save(value: Any, path: Path) -> None:
    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    with harness.atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
