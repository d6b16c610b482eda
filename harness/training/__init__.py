"""Training a retriever: the lifecycle a ``regime = "trained"`` retriever goes through.

Before a trained retriever is built, the runner (``harness run``) or ``harness train`` calls
:func:`ensure_trained`:

1. the training queries (the dataset's ``train`` split, or ``--train-split``) and, for early
   stopping, a validation split (``val`` by default) are loaded. Training on the split being
   evaluated is refused (validating on it is dropped, with a note), and so is a train or
   validation split sharing a query with it (the same text, or the same id and answers): the
   evaluation would measure memory, not retrieval.
2. The checkpoint is keyed by content: the retriever's plugin, version and parameters, what it
   says in :meth:`Retriever.training_identity` (the base model's weights digest), the SKB's
   fingerprint, the digests of the training and validation queries, the seed, the device kind,
   torch's version and the training threads when they are not the default. A verified
   checkpoint of that key is loaded (:meth:`Retriever.load_checkpoint`) instead of training.
3. Otherwise (unless the caller forbids training) the seeds are set, ``fit`` runs with a
   :class:`TrainContext` on a fixed number of threads (:data:`TRAINING_THREADS`, see
   :func:`training_threads`), and what it wrote to ``context.checkpoint_dir`` becomes the
   checkpoint: a manifest of digests, ``training.json`` (splits, digests, seconds, hardware,
   threads) and the curve ``curve.jsonl`` (what ``context.log`` received), moved into the cache at
   once. ``context.work_dir`` survives a kill: :class:`harness.EpochLoop` (``loop.py``, the one
   training loop) keeps its epoch checkpoints there and resumes from the last one.

The row of a trained run records :class:`TrainingInfo` (``row.training``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.caches import MANIFEST, directory_digest, entry_lock, verified_entry, write_manifest
from harness.errors import HarnessError
from harness.io import atomic_write, replace_dir, stable_hash, write_json
from harness.machine import hardware
from harness.queries import Query
from harness.retriever import BuildContext, Retriever, TrainContext
from harness.skb import SKB
from harness.training.determinism import (
    THREADS_VARIABLE,
    TRAINING_THREADS,
    fixed_threads,
    seed_everything,
    training_threads,
)

__all__ = [
    "THREADS_VARIABLE",
    "TRAINING_THREADS",
    "TrainContext",
    "TrainingInfo",
    "TrainingPlan",
    "ensure_trained",
    "fixed_threads",
    "plan_training",
    "plot_curve",
    "seed_everything",
    "training_threads",
]


class TrainingInfo(BaseModel):
    """How a trained retriever was trained (a row's ``training``)."""

    model_config = ConfigDict(extra="forbid")
    split: str = Field(description="the split trained on")
    queries: int = Field(ge=0)
    digest: str = Field(description="digest of the training queries (ids, texts, answer ids)")
    validation_split: str | None = None
    validation_digest: str | None = None
    seed: int
    checkpoint: str = Field(description="the checkpoint's content key")
    checkpoint_digest: str = Field(description="digest of the checkpoint's files")
    seconds: float = Field(ge=0, description="training time, when the checkpoint was made")
    device: str = Field(description="where it was trained")
    hardware: str = Field(description="the machine it was trained on")
    subset_queries: int | None = Field(
        None, ge=0, description="when the retriever trained on part of the split (a sample): how many queries"
    )
    subset_digest: str | None = Field(None, description="digest of that part (ids, texts, answer ids)")
    kept_epoch: int | None = Field(
        None,
        description="the epoch whose weights were kept (0: no epoch beat the untrained model on validation, so the "
        "untrained model is what is evaluated); none: not recorded",
    )
    threads: int | None = Field(
        None, description="the threads it trained on (another count trains other weights); none: not recorded"
    )


@dataclass
class TrainingPlan:
    """The splits and the checkpoint key of one training, known before anything trains."""

    split: str
    train: list[Query]
    validation_split: str | None
    validation: list[Query]
    seed: int
    key: str
    threads: int = TRAINING_THREADS

    def configuration(self) -> dict[str, Any]:
        """What enters a run's configuration hash: other training data is another run."""
        return {"split": self.split, "checkpoint": self.key, "seed": self.seed}


def _shared(a: Sequence[Query], b: Sequence[Query]) -> str | None:
    """What of ``b`` is in ``a`` (its count and ids), in words, or None: the same query is the same text
    (case and spacing aside) or the same id with the same answers. An id alone says nothing:
    STaRK's human-generated split numbers its own, unrelated queries from 0 again."""
    texts = {" ".join(q.text.lower().split()) for q in a}
    pairs = {(q.id, frozenset(q.answer_ids)) for q in a}
    common = [q.id for q in b if " ".join(q.text.lower().split()) in texts or (q.id, frozenset(q.answer_ids)) in pairs]
    if not common:
        return None
    ids = ", ".join(map(str, common[:5])) + (", …" if len(common) > 5 else "")
    return f"{len(common)} {'query' if len(common) == 1 else 'queries'} (ids {ids})"


def _digest(queries: Sequence[Query]) -> str:
    return stable_hash([[q.id, q.text, list(q.answer_ids)] for q in queries])


def training_configuration(retriever: Retriever, info: dict[str, Any]) -> dict[str, Any]:
    """What of a trained retriever's configuration (plugin, version, parameters) its checkpoint
    depends on: all of it but the registry name and the retriever's ``search_params``."""
    options = type(retriever).Options.model_fields
    unknown = [p for p in retriever.search_params if p not in options]
    if unknown:
        raise HarnessError(f"retriever {retriever.name!r}: search_params names no parameter {unknown[0]!r}")
    params = {k: v for k, v in info.get("params", {}).items() if k not in retriever.search_params}
    return {**{k: v for k, v in info.items() if k != "name"}, "params": params}


def plan_training(
    name: str,
    retriever: Retriever,
    info: dict[str, Any],
    skb: SKB,
    splits: dict[str, list[Query]],
    evaluated: str | None,
    train_split: str = "train",
    validation_split: str | None = "val",
    seed: int = 0,
    device: str = "cpu",
) -> TrainingPlan:
    """Choose and check the splits; compute the checkpoint key. ``splits``: the dataset's
    query splits; ``evaluated``: the split the run evaluates (None for ``harness train``);
    ``info``: the retriever's configuration (plugin, version, parameters)."""
    known = ", ".join(splits) or "none"
    if train_split not in splits:
        raise HarnessError(
            f"retriever {name!r} trains on split {train_split!r}, which the dataset lacks (has: {known})"
        )
    if evaluated is not None and train_split == evaluated:
        raise HarnessError(
            f"retriever {name!r} would train on split {evaluated!r}, the split being evaluated; "
            "train on another split (--train-split)"
        )
    if validation_split is not None and validation_split not in splits:
        validation_split = None  # no such split: train without early stopping (recorded in the row)
    if validation_split is not None and validation_split == evaluated:
        validation_split = None  # selecting a model on the evaluated split would leak it
    if validation_split == train_split:
        raise HarnessError(f"retriever {name!r}: the validation split must differ from the train split")
    train = splits[train_split]
    if evaluated is not None:
        tested = splits[evaluated]
        shared = _shared(train, tested)
        if shared:
            raise HarnessError(
                f"split {train_split!r} shares {shared} with the evaluated split {evaluated!r}: training on it "
                "would train on the evaluation"
            )
        if validation_split is not None and (shared := _shared(splits[validation_split], tested)):
            raise HarnessError(
                f"the validation split {validation_split!r} shares {shared} with the evaluated split {evaluated!r}: "
                "early stopping on it would select the model on the evaluation (--validation-split none, or another)"
            )
    validation = splits[validation_split] if validation_split else []
    threads = training_threads()
    keyed: dict[str, Any] = {
        "retriever": info,
        "identity": retriever.training_identity(),
        "skb": skb.fingerprint,
        "train": [train_split, _digest(train)],
        "validation": [validation_split, _digest(validation)] if validation_split else None,
        "seed": seed,
        # where it trains and with which torch: a GPU trains in mixed precision with other kernels
        "device": device.split(":")[0],
        "torch": _torch_version(),
    }
    if threads != TRAINING_THREADS:
        # other threads, other sums; the default stays out, so that the keys (and the rows'
        # configuration hashes) of what trained before the count was fixed do not change
        keyed["threads"] = threads
    return TrainingPlan(train_split, train, validation_split, validation, seed, stable_hash(keyed), threads)


def _torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure_trained(
    name: str,
    retriever: Retriever,
    skb: SKB,
    plan: TrainingPlan,
    context: BuildContext,
    allow_training: bool = True,
) -> TrainingInfo:
    """Load the checkpoint of ``plan`` into ``retriever``, training it first when there is none."""

    entry = context.cache_dir / "checkpoints" / f"{name}-{plan.key}"
    with entry_lock(entry, "training"):
        if not verified_entry(entry):
            if not allow_training:
                validation = plan.validation_split or "none"
                raise HarnessError(
                    f"retriever {name!r} has no checkpoint for this training data ({entry.name}); train it with "
                    f"`harness train -r {name} -d DATASET --train-split {plan.split} --validation-split {validation} "
                    f"--seed {plan.seed}` (and the run's -p parameters and --device), or run without --no-train"
                )
            machine = hardware(context.device)
            _train(
                name,
                retriever,
                skb,
                plan,
                context,
                entry,
                f"{machine.gpu} ({machine.cpu})" if machine.gpu else machine.cpu,
            )
        recorded = json.loads((entry / "training.json").read_text(encoding="utf-8"))
        try:
            retriever.load_checkpoint(entry)
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(
                f"retriever {name!r}: loading checkpoint {entry} failed ({type(exc).__name__}: {exc})"
            ) from exc
    # the checkpoint's record, less what the row does not hold; the fit report says which epoch was kept
    fields = {key: value for key, value in recorded.items() if key in TrainingInfo.model_fields}
    with contextlib.suppress(OSError, ValueError, AttributeError):
        kept = json.loads((entry / "fit.json").read_text(encoding="utf-8")).get("kept_epoch")
        fields["kept_epoch"] = kept if isinstance(kept, int) and not isinstance(kept, bool) else None
    return TrainingInfo(**fields, checkpoint_digest=directory_digest(entry, skip=(MANIFEST,)))


def _train(
    name: str, retriever: Retriever, skb: SKB, plan: TrainingPlan, context: BuildContext, entry: Path, cpu: str
) -> None:
    work = entry.with_name(f"{entry.name}.work")  # survives a kill: epoch checkpoints, the curve so far
    work.mkdir(parents=True, exist_ok=True)
    final = work / "checkpoint"
    if final.exists():
        shutil.rmtree(final)  # a half-written final checkpoint is never reused
    final.mkdir()
    train_context = TrainContext(
        cache_dir=context.cache_dir,
        device=context.device,
        progress=context.progress,
        build_retriever=context.build_retriever,
        executor=context.executor,
        devices=context.devices,
        validation=plan.validation,
        seed=plan.seed,
        checkpoint_dir=final,
        work_dir=work,
    )
    started = time.perf_counter()
    try:
        with fixed_threads(plan.threads):
            seed_everything(plan.seed)
            retriever.fit(skb, plan.train, train_context)
    except HarnessError:
        raise
    except Exception as exc:
        raise HarnessError(f"retriever {name!r} failed to train: {type(exc).__name__}: {exc}") from exc
    seconds = time.perf_counter() - started
    subset = train_context._subset
    if subset is not None:
        known = {(q.id, q.text, tuple(q.answer_ids)) for q in plan.train}
        outside = sorted(q.id for q in subset if (q.id, q.text, tuple(q.answer_ids)) not in known)
        if outside:
            raise HarnessError(f"retriever {name!r}: trains_on() named queries not in the train split: {outside[:5]}")
    if not any(final.iterdir()):
        raise HarnessError(f"retriever {name!r}: fit() wrote nothing to context.checkpoint_dir")
    curve = work / "curve.jsonl"
    if curve.exists():
        shutil.copyfile(curve, final / "curve.jsonl")
    write_json(
        final / "training.json",
        {
            "split": plan.split,
            "queries": len(plan.train),
            "digest": _digest(plan.train),
            "validation_split": plan.validation_split,
            "validation_digest": _digest(plan.validation) if plan.validation_split else None,
            "seed": plan.seed,
            "checkpoint": plan.key,
            "seconds": round(seconds, 3),
            "device": context.device,
            "hardware": cpu,
            "threads": plan.threads,  # what the weights' arithmetic depends on besides the hardware
            "subset_queries": len(subset) if subset is not None else None,
            "subset_digest": _digest(subset) if subset is not None else None,
        },
    )
    write_manifest(final)
    replace_dir(final, entry)
    shutil.rmtree(work, ignore_errors=True)


def plot_curve(checkpoint: Path, out: Path, title: str) -> bool:
    """Draw the checkpoint's training curve (every logged value against the step or epoch) as
    a PNG; False when nothing was logged."""
    path = checkpoint / "curve.jsonl"
    points = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if not points:
        return False
    import matplotlib  # optional (the leaderboard extra), and slow to import: only to draw

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the backend

    x_key = "step" if all("step" in p for p in points) else "epoch" if all("epoch" in p for p in points) else None
    xs = [p[x_key] for p in points] if x_key else list(range(len(points)))
    series = sorted({k for p in points for k in p if k not in ("step", "epoch")})
    figure, axes = plt.subplots(len(series), 1, figsize=(6, 2.2 * len(series)), squeeze=False)
    for axis, key in zip(axes[:, 0], series, strict=True):
        pairs = [(x, p[key]) for x, p in zip(xs, points, strict=True) if key in p]
        axis.plot([a for a, _ in pairs], [b for _, b in pairs], marker="o", markersize=3)
        axis.set_ylabel(key)
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel(x_key or "point")
    axes[0, 0].set_title(title)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, "wb") as handle:
        figure.savefig(handle, format="png", dpi=100)
    plt.close(figure)
    return True


def checkpoint_path(cache_dir: Path, name: str, plan: TrainingPlan) -> Path:
    """Where the checkpoint of ``plan`` is (or will be) cached."""
    return Path(os.fspath(cache_dir)) / "checkpoints" / f"{name}-{plan.key}"
