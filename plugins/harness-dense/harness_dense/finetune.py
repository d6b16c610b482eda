"""The ``dense-ft`` retriever: a sentence-transformers bi-encoder fine-tuned on a dataset's train
split, DPR-style, then searched exactly as ``dense`` searches.

Training is sentence-transformers' own: ``SentenceTransformerTrainer`` with
``MultipleNegativesRankingLoss`` (each query against its answer, the other answers in the batch
and its hard negatives: the first stage's best candidates that are not its answers, mined once
before training). A query with several answers gives one example per answer; batches are drawn
so that no example's documents answer another query of its batch (an in-batch "negative" that
is right would teach the model to push a right answer away). Each epoch ends in a checkpoint in
``context.work_dir`` (the trainer's own: weights, optimizer, scheduler, RNG states), marked
complete only once written, so a killed training resumes after its last finished epoch. With a
validation split, every epoch is scored (``eval_metric`` over a pool of candidates: each
validation query's answers and the first stage's top ``eval_pool``), the best epoch is kept and
training stops early after ``patience`` epochs without improvement.

The final model goes to ``context.checkpoint_dir / "model"``; ``build`` encodes the candidates
with it through ``dense``'s encoder and embedding cache, which keys vectors by the model's
bytes: another checkpoint never reads this one's vectors.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness_dense.embeddings import LocalEncoder, _version, resolve_model
from harness_dense.retrievers import DenseRetriever

COMPLETE = "complete.json"  # written into a trainer checkpoint once the trainer has finished writing it


class FineTuneOptions(DenseRetriever.Options):
    """``dense``'s parameters (``model`` is the base to fine-tune) and the training's."""

    epochs: int = Field(3, gt=0, description="passes over the training examples (fewer when early stopping ends it)")
    batch_size: int = Field(
        32, gt=1, description="training examples per step; each one's in-batch negatives are the others' documents"
    )
    learning_rate: float = Field(2e-5, gt=0, description="AdamW's peak learning rate (linear decay)")
    warmup: float = Field(0.1, ge=0, lt=1, description="fraction of the steps the learning rate warms up over")
    hard_negatives: int = Field(
        1, ge=0, description="per example, the first stage's best candidates that are not the query's answers"
    )
    first_stage: str = Field(
        "bm25", description="the retriever that mines hard negatives and pools validation candidates"
    )
    eval_metric: str = Field(
        "mrr",
        pattern=r"^[a-z_][a-z0-9_]*(@[0-9]+)?$",
        description="the validation metric that selects the best epoch and stops early (any harness metric)",
    )
    eval_pool: int | None = Field(
        100,
        gt=0,
        description="validation ranks each query's answers among the first stage's top eval_pool for every "
        "validation query (pooled); null: among every candidate (an encoding of the whole SKB per epoch)",
    )
    patience: int | None = Field(
        2, gt=0, description="stop after this many epochs without a better validation score (null: never)"
    )
    precision: Literal["auto", "fp32", "fp16", "bf16"] = Field(
        "auto",
        description="training precision: fp16 and bf16 on cuda only; auto = bf16 (fp16 where unsupported) "
        "on cuda, fp32 on cpu",
    )
    log_steps: int = Field(10, gt=0, description="record the training loss in the curve every this many steps")

    @model_validator(mode="after")
    def _local_model(self) -> Self:
        if self.provider != "local":
            raise ValueError("provider: dense-ft fine-tunes a local sentence-transformers model (provider local)")
        return self


class FineTunedDenseRetriever(DenseRetriever):
    """``dense`` on a model fine-tuned on the train split (STaRK's DPR baseline, any base model)."""

    name = "dense-ft"
    version = "1"
    regime = "trained"
    Options = FineTuneOptions
    options: FineTuneOptions

    def uses(self) -> list[str]:
        return [self.options.first_stage] if self.options.hard_negatives or self.options.eval_pool else []

    def training_identity(self) -> dict[str, Any]:
        """The base model's bytes (a path or hub id names, not identifies, weights) and the
        training library's version."""
        path, self._base_snapshot = resolve_model(self.options.model)
        return {
            "base_model": harness.directory_digest(path),
            "sentence-transformers": _version("sentence-transformers"),
        }

    def provenance(self) -> dict[str, Any]:
        """For a base model named by hub id, its repository and the commit trained from."""
        snapshot = getattr(self, "_base_snapshot", None)
        return snapshot.provenance("model") if snapshot is not None else {}

    def load_checkpoint(self, path: Path) -> None:
        self.model_dir = path / "model"
        if not (self.model_dir / "modules.json").is_file():
            raise harness.HarnessError(f"dense-ft: checkpoint {path} holds no sentence-transformers model in model/")

    def _encoder(self, context: harness.BuildContext) -> Any:
        # the fine-tuned model, through dense's encoder: its vectors are cached by the model's bytes
        o = self.options
        return LocalEncoder(
            str(self.model_dir), o.query_prefix, o.document_prefix, o.encode_batch_size, o.max_length, context.device
        )

    def fit(self, skb: harness.SKB, train: Sequence[harness.Query], context: Any) -> None:
        from harness_dense.finetune_training import train_model

        o = self.options
        started = time.perf_counter()
        metric = _metric(o.eval_metric)  # a misspelt metric fails before anything is mined
        precision = _precision(o.precision, context.device)
        examples = Examples.mine(self, skb, train, context)
        validation = Validation.pool(self, skb, context.validation, metric, context)
        train_model(self, examples, validation, precision, context, time.perf_counter() - started)


def _metric(spec: str) -> harness.Metric:
    family, _, k = spec.partition("@")
    return harness.lookup("metric", family)(int(k) if k else None)


def _precision(precision: str, device: str) -> str:
    if precision in ("fp16", "bf16") and device != "cuda":
        raise harness.HarnessError(f"dense-ft: precision {precision} needs a GPU (--device cuda); on a CPU use fp32")
    if precision != "auto":
        return precision
    if device != "cuda":
        return "fp32"
    import torch

    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def _answers(skb: harness.SKB, query: harness.Query) -> list[int]:
    """The query's answers that are candidates (only those can be retrieved), in order."""
    ids = np.asarray(query.answer_ids, dtype=np.int64)
    return sorted(set(ids[skb.is_candidate(ids)].tolist())) if len(ids) else []


def _top(first_stage: Any, queries: Sequence[harness.Query], depth: Sequence[int]) -> Iterator[list[int]]:
    """The first stage's top ``depth[i]`` ids of each query, searched in batches of 64."""
    for start in range(0, len(queries), 64):
        batch = queries[start : start + 64]
        k = max(depth[start : start + 64])
        for ranking in first_stage.search(batch, k):
            yield ranking.ids.tolist()


@dataclass
class Examples:
    """The training examples: one row per (query, answer), each with the query's hard negatives,
    and what the batch sampler needs to keep false negatives out of a batch."""

    anchors: list[str]
    positives: list[str]
    negatives: list[list[str]]  # hard_negatives columns of len(anchors) texts
    groups: list[tuple[int, frozenset[int], frozenset[int]]]  # (query, its documents, its answers) per row
    queries: int
    skipped: int

    @classmethod
    def mine(cls, retriever: FineTunedDenseRetriever, skb: harness.SKB, train: Sequence[Any], context: Any) -> Self:
        o = retriever.options
        answered = [(q, a) for q in train if (a := _answers(skb, q))]
        if not answered:
            raise harness.HarnessError(
                f"dense-ft: none of the {len(train)} training queries has an answer among the candidates"
            )
        candidates = skb.candidate_ids
        rng = np.random.default_rng(context.seed)
        negatives: list[list[int]] = [[] for _ in answered]
        if o.hard_negatives:
            first_stage = context.retriever(o.first_stage)
            depth = [o.hard_negatives + len(a) for _, a in answered]
            with context.task(f"dense-ft: mine hard negatives ({o.first_stage})", len(answered)) as task:
                for i, top in enumerate(_top(first_stage, [q for q, _ in answered], depth)):
                    wrong = set(answered[i][1])
                    negatives[i] = [n for n in top if n not in wrong][: o.hard_negatives]
                    task.advance()
            for i, (_, right) in enumerate(answered):  # too few first-stage hits: random non-answers fill in
                while len(negatives[i]) < o.hard_negatives and len(candidates) > len(right):
                    pick = int(candidates[rng.integers(len(candidates))])
                    if pick not in right:
                        negatives[i].append(pick)
        usable = [i for i in range(len(answered)) if len(negatives[i]) == o.hard_negatives]
        needed = sorted({n for i in usable for n in [*answered[i][1], *negatives[i]]})
        text = dict(zip(needed, skb.documents(needed, o.with_relations, o.compact), strict=True))
        rows = cls([], [], [[] for _ in range(o.hard_negatives)], [], len(usable), len(answered) - len(usable))
        for i in usable:
            query, right = answered[i]
            documents = frozenset([*right, *negatives[i]])
            for answer in right:
                rows.anchors.append(o.query_prefix + query.text)
                rows.positives.append(o.document_prefix + text[answer])
                for column, negative in zip(rows.negatives, negatives[i], strict=True):
                    column.append(o.document_prefix + text[negative])
                rows.groups.append((i, documents, frozenset(right)))
        return rows

    def dataset(self) -> Any:
        from datasets import Dataset

        columns = {"anchor": self.anchors, "positive": self.positives}
        columns.update({f"negative_{j + 1}": column for j, column in enumerate(self.negatives)})
        return Dataset.from_dict(columns)


@dataclass
class Validation:
    """Validation queries and the candidates they are ranked among."""

    queries: list[str]
    answers: list[frozenset[int]]
    ids: np.ndarray
    documents: list[str]
    metric: harness.Metric

    @classmethod
    def pool(
        cls,
        retriever: FineTunedDenseRetriever,
        skb: harness.SKB,
        queries: Sequence[harness.Query],
        metric: harness.Metric,
        context: Any,
    ) -> Self | None:
        o = retriever.options
        answered = [(q, a) for q in queries if (a := _answers(skb, q))]
        if not answered:
            return None  # no validation: every epoch trains, the last one is kept
        if o.eval_pool is None:
            ids = skb.candidate_ids
        else:
            pooled = {n for _, a in answered for n in a}
            first_stage = context.retriever(o.first_stage)
            for top in _top(first_stage, [q for q, _ in answered], [o.eval_pool] * len(answered)):
                pooled.update(top)
            ids = np.array(sorted(pooled), dtype=np.int64)
        texts = [o.document_prefix + d for d in skb.documents(ids, o.with_relations, o.compact)]
        return cls(
            [o.query_prefix + q.text for q, _ in answered], [frozenset(a) for _, a in answered], ids, texts, metric
        )

    def score(self, model: Any, batch_size: int) -> float:
        """The metric of ``model``'s ranking of the pool, averaged over the queries."""
        encode = {"batch_size": batch_size, "normalize_embeddings": True, "convert_to_numpy": True}
        queries = model.encode(self.queries, show_progress_bar=False, **encode)
        documents = model.encode(self.documents, show_progress_bar=False, **encode)
        order = np.argsort(-(queries @ documents.T), axis=1, kind="stable")
        ranked = self.ids[order]
        hits = np.array([np.isin(row, list(answers)) for row, answers in zip(ranked, self.answers, strict=True)])
        relevant = np.array([len(answers) for answers in self.answers])
        return float(np.mean(self.metric.per_query(hits, relevant)))


def batches(
    groups: Sequence[tuple[int, frozenset[int], frozenset[int]]], order: Sequence[int], size: int, drop_last: bool
) -> list[list[int]]:
    """Rows in ``order`` cut into exactly ``ceil(n / size)`` batches (``floor`` with
    ``drop_last``), a row deferred to a later batch while it would meet, in its batch, a row of
    the same query, a row whose documents answer its query, or one whose query its documents
    answer. What no batch could take without a conflict fills the batches with room last. The
    count never depends on the order: the trainer counts steps per epoch before it iterates."""
    count = len(order) // size if drop_last else math.ceil(len(order) / size)
    pending, out = deque(order), []
    for _ in range(count):
        batch: list[int] = []
        queries: set[int] = set()
        documents: set[int] = set()
        answers: set[int] = set()
        deferred = []
        while pending and len(batch) < size:
            row = pending.popleft()
            query, docs, right = groups[row]
            if query in queries or not docs.isdisjoint(answers) or not right.isdisjoint(documents):
                deferred.append(row)
                continue
            batch.append(row)
            queries.add(query)
            documents.update(docs)
            answers.update(right)
        pending.extendleft(reversed(deferred))  # the deferred go first into the next batch
        out.append(batch)
    for batch in out:
        while pending and len(batch) < size:
            batch.append(pending.popleft())
    return out
