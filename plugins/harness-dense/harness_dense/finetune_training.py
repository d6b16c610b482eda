"""The training loop of ``dense-ft``: sentence-transformers' trainer, with the harness's progress
bars, curve and resumable epoch checkpoints. Imported only when a model is trained (it loads
torch, transformers and datasets)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from transformers.trainer_callback import (
    EarlyStoppingCallback,
    PrinterCallback,
    ProgressCallback,
    TrainerCallback,
)

import harness
from harness_dense.embeddings import resolve_model
from harness_dense.finetune_data import COMPLETE, Examples, Validation, batches

try:  # where sentence-transformers 5 keeps them (the old paths still work there, with a warning)
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
except ImportError:  # pragma: no cover - sentence-transformers 3 and 4 (mypy sees the installed 5)
    from sentence_transformers.evaluation import SentenceEvaluator  # type: ignore[import-not-found, no-redef]
    from sentence_transformers.losses import MultipleNegativesRankingLoss  # type: ignore[import-not-found, no-redef]
    from sentence_transformers.sampler import DefaultBatchSampler  # type: ignore[import-not-found, no-redef]


class _Batches(DefaultBatchSampler):
    """Shuffled by the seed and the epoch (a resumed epoch draws the same batches), cut by
    :func:`harness_dense.finetune_data.batches`."""

    def __init__(self, dataset: Any, groups: Any, **kwargs: Any) -> None:
        super().__init__(dataset, **kwargs)
        self.groups = groups

    def __len__(self) -> int:
        n = len(self.groups)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Any:
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.groups), generator=generator).tolist()
        return iter(batches(self.groups, order, self.batch_size, self.drop_last))


class _Trainer(SentenceTransformerTrainer):
    def __init__(self, groups: Any, **kwargs: Any) -> None:
        self.groups = groups
        super().__init__(**kwargs)

    # the parameters after drop_last differ between sentence-transformers releases: passed on as they come
    def get_batch_sampler(self, dataset: Any, batch_size: int, drop_last: bool, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["seed"] = self.args.seed  # the trainer leaves it at 0: another seed must draw other batches
        return _Batches(dataset, self.groups, batch_size=batch_size, drop_last=drop_last, **kwargs)

    def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
        """No model card: the checkpoint's training.json and curve say how it was trained."""


class _Evaluator(SentenceEvaluator):
    """The validation metric, named ``val_<metric>`` (the trainer adds ``eval_``)."""

    primary_metric: str

    def __init__(self, validation: Validation, batch_size: int) -> None:
        super().__init__()
        self.validation, self.batch_size = validation, batch_size
        self.primary_metric = f"val_{validation.metric.name}"

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        return {self.primary_metric: self.validation.score(model, self.batch_size)}


class _Report(TrainerCallback):
    """A progress bar per epoch (its title: the last epoch's loss and validation score), the
    curve (``context.log``: the loss every ``log_steps`` steps, each epoch's mean loss and
    validation score), and the mark that makes an epoch checkpoint resumable. A step or epoch
    the curve already holds (logged before a kill) is not logged again."""

    def __init__(self, context: Any, epochs: int, log_steps: int, metric: str | None) -> None:
        self.context, self.epochs, self.log_steps, self.metric = context, epochs, log_steps, metric
        curve = context.curve()
        self.logged_steps = {p["step"] for p in curve if "epoch" not in p and "step" in p}
        self.logged_epochs = {p["epoch"] for p in curve if "epoch" in p}
        last = next((p for p in reversed(curve) if "epoch" in p), None)
        self.summary = _summary(last, metric) if last else ""
        self.losses: list[float] = []
        self.score: float | None = None
        self.task: Any = None

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        epoch = round(state.epoch or 0) + 1
        title = f"dense-ft: epoch {epoch}/{self.epochs}" + (f" (last: {self.summary})" if self.summary else "")
        self.task = self.context.progress(title, state.max_steps // self.epochs)
        self.losses, self.score = [], None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.task is not None:
            self.task.advance()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        if not logs or "loss" not in logs:
            return
        self.losses.append(float(logs["loss"]))
        step = state.global_step
        if step % self.log_steps == 0 and step not in self.logged_steps:
            self.context.log(step=step, loss=float(logs["loss"]))
            self.logged_steps.add(step)

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: dict[str, float] | None = None, **kw: Any
    ) -> None:
        if metrics and self.metric and f"eval_val_{self.metric}" in metrics:
            self.score = float(metrics[f"eval_val_{self.metric}"])

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.task is not None:
            self.task.end(True)
            self.task = None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        epoch = round(state.epoch or 0)
        harness.write_json(checkpoint / COMPLETE, {"epoch": epoch, "step": state.global_step})  # resumable now
        if epoch in self.logged_epochs:
            return
        point: dict[str, float | int] = {"epoch": epoch, "step": state.global_step}
        if self.losses:
            point["train_loss"] = sum(self.losses) / len(self.losses)
        if self.score is not None and self.metric:
            point[f"val_{self.metric}"] = self.score
        self.context.log(**point)
        self.logged_epochs.add(epoch)
        self.summary = _summary(point, self.metric)


def _summary(point: dict[str, Any], metric: str | None) -> str:
    parts = [f"loss {point['train_loss']:.4f}"] if "train_loss" in point else []
    if metric and f"val_{metric}" in point:
        parts.append(f"val {metric} {point[f'val_{metric}']:.4f}")
    return ", ".join(parts)


def _resumable(output: Path) -> Path | None:
    """The last trainer checkpoint marked complete; unmarked ones (cut short by a kill) go."""
    found = []
    for checkpoint in output.glob("checkpoint-*"):
        if (checkpoint / COMPLETE).is_file():
            found.append((json.loads((checkpoint / COMPLETE).read_text(encoding="utf-8"))["step"], checkpoint))
        else:
            shutil.rmtree(checkpoint, ignore_errors=True)
    return max(found)[1] if found else None


def train_model(
    retriever: harness.Retriever,
    examples: Examples,
    validation: Validation | None,
    precision: str,
    context: Any,
    prepared: float,
) -> None:
    """Fine-tune the base model on ``examples`` and write it to ``context.checkpoint_dir / "model"``,
    with ``fit.json`` (what was trained, how far, from where; ``prepared``: the seconds mining
    and pooling took)."""
    o: Any = retriever.options  # the FineTunedDenseRetriever's FineTuneOptions
    path, _ = resolve_model(o.model)
    model = SentenceTransformer(str(path), device=context.device, local_files_only=True)
    if o.max_length:
        model.max_seq_length = o.max_length
    output = Path(context.work_dir) / "trainer"
    metric = validation.metric.name if validation else None
    selecting = validation is not None
    args = SentenceTransformerTrainingArguments(
        output_dir=str(output),
        num_train_epochs=o.epochs,
        per_device_train_batch_size=o.batch_size,
        learning_rate=o.learning_rate,
        warmup_ratio=o.warmup,
        lr_scheduler_type="linear",
        seed=context.seed,
        data_seed=context.seed,
        use_cpu=context.device != "cuda",
        fp16=precision == "fp16",
        bf16=precision == "bf16",
        save_strategy="epoch",
        eval_strategy="epoch" if selecting else "no",
        load_best_model_at_end=selecting,
        metric_for_best_model=f"eval_val_{metric}" if selecting else None,
        greater_is_better=True,
        save_total_limit=1,  # with load_best_model_at_end the best is kept as well
        logging_strategy="steps",
        logging_steps=1,
        report_to="none",
        disable_tqdm=True,
        dataloader_drop_last=False,
    )
    report = _Report(context, o.epochs, o.log_steps, metric)
    callbacks: list[TrainerCallback] = [report]
    if selecting and o.patience:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=o.patience))
    trainer = _Trainer(
        examples.groups,
        model=model,
        args=args,
        train_dataset=examples.dataset(),
        loss=MultipleNegativesRankingLoss(model),
        evaluator=_Evaluator(validation, o.encode_batch_size) if validation else None,
        callbacks=callbacks,
    )
    for quiet in (PrinterCallback, ProgressCallback):  # the harness draws its own bars
        trainer.remove_callback(quiet)
    resume = _resumable(output)
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    trained = time.perf_counter() - started
    state = trainer.state
    best_step = getattr(state, "best_global_step", None)  # transformers >= 4.50
    best_epoch = best_step // (state.max_steps // o.epochs) if best_step else None
    best = f"; best: epoch {best_epoch}" if best_epoch else ""
    with context.task(f"dense-ft: trained {round(state.epoch or 0)} epochs ({report.summary}{best})", 1) as task:
        task.advance()  # the last epoch's figures, which no epoch's bar title shows
    trainer.model.save(str(context.checkpoint_dir / "model"), create_model_card=False)
    context.report(
        round(state.epoch or 0),
        len(examples.anchors),
        prepared,
        trained,
        queries=examples.queries,
        skipped_queries=examples.skipped,
        steps=state.global_step,
        best_epoch=best_epoch,  # the epoch kept (null without validation: the last one)
        best_metric=state.best_metric,
        resumed_from=resume.name if resume else None,
        precision=precision,
    )
