"""The training loop of ``dense-ft``: sentence-transformers' trainer, with the harness's progress
bars, curve and resumable epoch checkpoints. Imported only when a model is trained (it loads
torch, transformers and datasets).

The trainer's epoch checkpoints are verified as the harness's own are (``harness.EpochLoop``'s,
the caches'): a manifest of digests (``harness.write_manifest``) is written into each once the
trainer has finished it, last; before a resume every checkpoint is checked against it
(``harness.verified_entry``), and one cut short by a kill or damaged on disk is deleted with a
warning, the trainer resuming from the last good one (or from scratch)."""

from __future__ import annotations

import contextlib
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
from harness_dense.finetune_data import Examples, Validation, batches

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
    validation score), and the manifest that makes an epoch checkpoint resumable. A step or
    epoch the curve already holds (logged before a kill) is not logged again."""

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
        epoch = round(state.epoch or 0)
        if epoch not in self.logged_epochs:
            point: dict[str, float | int] = {"epoch": epoch, "step": state.global_step}
            if self.losses:
                point["train_loss"] = sum(self.losses) / len(self.losses)
            if self.score is not None and self.metric:
                point[f"val_{self.metric}"] = self.score
            self.context.log(**point)
            self.logged_epochs.add(epoch)
            self.summary = _summary(point, self.metric)
        # Last, after the epoch's point (a kill before it leaves the epoch to train and log again):
        # the trainer has written the checkpoint whole, and its digests make it resumable.
        harness.write_manifest(Path(args.output_dir) / f"checkpoint-{state.global_step}")


def _summary(point: dict[str, Any], metric: str | None) -> str:
    parts = [f"loss {point['train_loss']:.4f}"] if "train_loss" in point else []
    if metric and f"val_{metric}" in point:
        parts.append(f"val {metric} {point[f'val_{metric}']:.4f}")
    return ", ".join(parts)


def _step(checkpoint: Path) -> int:
    return int(checkpoint.name.removeprefix("checkpoint-"))


def _best(checkpoint: Path) -> str | None:
    """The name of the checkpoint the trainer holds as the best one at ``checkpoint`` (None: none)."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        best = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))["best_model_checkpoint"]
        return Path(best).name if best else None
    return None


def _resumable(output: Path) -> Path | None:
    """The last trainer checkpoint that matches its manifest and whose best checkpoint (which the
    trainer puts back at the end) does too. One without a manifest (cut short by a kill) or
    damaged on disk is deleted with a warning (``harness.verified_entry``), and so are those
    after the one resumed: their epochs train again. None: training starts from scratch."""
    found = [c for c in output.glob("checkpoint-*") if c.is_dir() and c.name.removeprefix("checkpoint-").isdigit()]
    found.sort(key=_step)
    resumed = None
    for checkpoint in reversed(found):
        if not checkpoint.exists() or not harness.verified_entry(checkpoint):
            continue  # gone as another's damaged best, or damaged: deleted with a warning
        best = _best(checkpoint)
        if best is None or best == checkpoint.name or harness.verified_entry(output / best):
            resumed = checkpoint
            break
    for checkpoint in found:
        if resumed is None or _step(checkpoint) > _step(resumed):
            shutil.rmtree(checkpoint, ignore_errors=True)
    return resumed


def _cut_curve(context: Any, step: int) -> None:
    """Drop the curve's points after ``step`` (an earlier attempt logged them past the checkpoint
    resumed): the resumed training logs them again, so the curve is that of the model kept."""
    curve = context.curve()
    kept = [point for point in curve if point.get("step", 0) <= step]
    if len(kept) < len(curve):
        with harness.atomic_write(Path(context.work_dir) / "curve.jsonl") as handle:
            handle.write("".join(json.dumps(point) + "\n" for point in kept))


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
    # before the curve is read (the report's): a resume from an earlier checkpoint cuts it back
    resume = _resumable(output)
    _cut_curve(context, _step(resume) if resume else 0)
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
        # the last two (the best as well, with load_best_model_at_end): a damaged last one
        # leaves an earlier one to resume from
        save_total_limit=2,
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
