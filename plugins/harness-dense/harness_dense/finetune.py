"""The ``dense-ft`` retriever: a sentence-transformers bi-encoder fine-tuned on a dataset's train
split, DPR-style, then searched exactly as ``dense`` searches.

Training is sentence-transformers' own: ``SentenceTransformerTrainer`` with
``MultipleNegativesRankingLoss`` (each query against its answer, the other answers in the batch
and its hard negatives: the first stage's best candidates that are not its answers, mined once
before training). A query with several answers gives one example per answer; batches are drawn
so that no example's documents answer another query of its batch (an in-batch "negative" that
is right would teach the model to push a right answer away). Each epoch ends in a checkpoint in
``context.work_dir`` (the trainer's own: weights, optimizer, scheduler, RNG states) with a
manifest of digests written last and verified before a resume, so a killed training resumes after
its last finished epoch, and one damaged on disk is discarded with a warning for the one before. With a
validation split, every epoch is scored (``eval_metric`` over a pool of candidates: each
validation query's answers and the first stage's top ``eval_pool``), the best epoch is kept and
training stops early after ``patience`` epochs without improvement.

The final model goes to ``context.checkpoint_dir / "model"``; ``build`` encodes the candidates
with it through ``dense``'s encoder and embedding cache, which keys vectors by the model's
bytes: another checkpoint never reads this one's vectors.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, model_validator

import harness
from harness_dense.embeddings import LocalEncoder, _version, resolve_model
from harness_dense.finetune_data import Examples, Validation
from harness_dense.retrievers import DenseRetriever


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
