"""The one training loop of trained retrievers (``harness.EpochLoop``).

It gives every epoch the same random numbers on every attempt (torch seeded, NumPy's generator
made from the seed and the epoch), keeps a checkpoint of every finished epoch in
``context.work_dir`` (its digests written last and checked before a resume: a damaged one is
dropped with a warning and an earlier one resumed), resumes after a kill from the last good
one, stops early on a validation score and puts the best epoch back, fails on purpose where the
tests ask it to, and writes the fit report. A ``fit`` hands it two functions: one returning what
must survive between epochs (weights, optimizer state: tensors, numbers, strings and containers
of them), one putting such a state back::

    loop = harness.EpochLoop(
        context, options.epochs, state=snapshot, restore=restore,
        metric="val_mrr" if validation else None, patience=options.patience, fail_at=options.fail_at_epoch,
    )
    for epoch in loop:                               # the epochs no earlier attempt finished
        loss = train_one_epoch(epoch.rng)            # torch is seeded already
        loop.end(epoch, loss=loss, val_mrr=validate())
    loop.restore_best()
    ...                                              # write the model to context.checkpoint_dir
    loop.report(len(train), prepare_seconds)

Why one loop: the same seed must give the same model whether training was interrupted or not,
and what makes that true (seeding per epoch, verified checkpoints, the curve cut back to the
epoch resumed) is easy to get subtly wrong in each plugin.
"""

from __future__ import annotations

import io
import math
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.caches import verify_manifest, write_manifest
from harness.errors import HarnessError
from harness.io import atomic_dir, atomic_write

if TYPE_CHECKING:
    from harness.training import TrainContext

__all__ = ["Epoch", "EpochLoop"]

#: The layout of an epoch checkpoint; a checkpoint of another is never resumed (it is trained again).
FORMAT = 1
STATE = "state.pt"
#: Each epoch seeds torch with ``seed * TORCH_SEED_STRIDE + epoch`` (dropout: the same after a resume).
TORCH_SEED_STRIDE = 100_003


@dataclass(frozen=True)
class Epoch:
    """One epoch to train: its number (from 1) and NumPy's generator of ``(seed, number)``, which
    draws the same numbers whether or not the epochs before it ran in this process."""

    number: int
    rng: np.random.Generator


class EpochLoop:
    """Epochs ``1..epochs`` of one training, those an earlier attempt finished skipped.

    Args:
        context: the ``fit``'s context (its seed, ``work_dir`` for the epoch checkpoints, the curve).
        epochs: how many epochs at most.
        state: what to keep after an epoch (read by ``torch.load(weights_only=True)``).
        restore: puts a kept state back (when resuming, and for the best epoch at the end).
        metric: the value of :meth:`end` that selects the best epoch and stops early (higher is
            better; a NaN never is); None without validation: the last epoch is kept.
        patience: stop after this many epochs without a better ``metric`` (None: never).
        fail_at: raise when this epoch starts (the tests' stand-in for a kill; a retriever takes
            it from its hidden ``fail_at_epoch`` option, which enters neither the key nor the row).
        keep: the last epoch checkpoints kept (the best epoch's too): a damaged last one leaves
            an earlier one to resume from.
    """

    def __init__(
        self,
        context: TrainContext,
        epochs: int,
        *,
        state: Callable[[], Mapping[str, Any]],
        restore: Callable[[Mapping[str, Any]], None],
        metric: str | None = None,
        patience: int | None = None,
        fail_at: int | None = None,
        keep: int = 2,
    ) -> None:
        if keep < 1:
            raise HarnessError(f"EpochLoop: keep must be at least 1, not {keep}")
        self.context, self.epochs = context, epochs
        self.metric, self.patience, self.fail_at, self.keep = metric, patience, fail_at, keep
        self._state, self._restore = state, restore
        self.directory = Path(context.work_dir) / "epochs"
        #: the last epoch finished (0: none), the best score and its epoch, the untrained model's score
        self.epoch = 0
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.baseline_score: float | None = None
        self.stale, self.stopped = 0, False
        self.resumed_from: int | None = None  # the epoch checkpoint this attempt started from
        self._open: int | None = None
        self._resume()
        self.first_epoch, self.started = self.epoch, time.perf_counter()

    # -- the epochs --------------------------------------------------------------------
    def __iter__(self) -> Iterator[Epoch]:
        number = self.epoch + 1
        while number <= self.epochs and not self.stopped:
            if number == self.fail_at:
                raise RuntimeError(f"failure injected at epoch {number}")
            _torch().manual_seed(self.context.seed * TORCH_SEED_STRIDE + number)
            self._open = number
            yield Epoch(number, np.random.default_rng([self.context.seed, number]))
            if self._open is not None:
                raise HarnessError(f"EpochLoop: epoch {number} was not ended (call loop.end(epoch, ...))")
            number += 1

    def baseline(self, score: Callable[[], float]) -> None:
        """Let the untrained model compete with the epochs: ``score()`` (its validation score) is
        the best so far, as epoch 0, which :meth:`restore_best` puts back when no epoch beats it.
        Asked only when training starts from scratch (a resumed one has it already)."""
        if self.metric is None or self.epoch > 0 or self.resumed_from is not None:
            return
        value = float(score())
        self.baseline_score = value
        if not math.isnan(value):
            self.best, self.best_epoch = value, 0
        self._save(0)

    def end(self, epoch: Epoch, **values: float | int) -> None:
        """End ``epoch``: log its point (``epoch`` and ``values``) in the curve, update early
        stopping with ``values[metric]``, and keep its checkpoint."""
        if epoch.number != self._open:
            raise HarnessError(f"EpochLoop: end() of epoch {epoch.number}, but epoch {self._open} is the one running")
        if self.metric is not None:
            if self.metric not in values:
                raise HarnessError(f"EpochLoop: end() of epoch {epoch.number} lacks the metric {self.metric!r}")
            score = float(values[self.metric])
            if not math.isnan(score) and (self.best is None or score > self.best):
                self.best, self.best_epoch, self.stale = score, epoch.number, 0
            else:
                self.stale += 1
            self.stopped = self.patience is not None and self.stale >= self.patience
        self.context.log(epoch=epoch.number, **values)
        self.epoch, self._open = epoch.number, None
        self._save(epoch.number)

    def restore_best(self) -> bool:
        """Put the best epoch's state back when a metric chose one other than the last; True when it did."""
        if self.best_epoch is None or self.best_epoch == self.epoch:
            return False
        saved = self._read(self._path(self.best_epoch))
        if saved is None:
            raise HarnessError(f"EpochLoop: the checkpoint of the best epoch ({self.best_epoch}) is gone")
        self._restore(saved["state"])
        return True

    @property
    def kept_epoch(self) -> int:
        """The epoch whose weights training ends with: the best one, else the last."""
        return self.best_epoch if self.best_epoch is not None else self.epoch

    def summary(self) -> str:
        """How the last epoch ended, for a progress bar's title: ``, loss 0.4, val_mrr 0.610 (best …)``."""
        points = [p for p in self.context.curve() if p.get("epoch") == self.epoch and self.epoch]
        if not points:
            return ""
        parts = [f"{key} {value:.4f}" for key, value in points[-1].items() if key == "loss"]
        if self.metric is not None and self.metric in points[-1]:
            parts.append(
                f"{self.metric} {points[-1][self.metric]:.3f} (best {self.best or 0:.3f} at epoch {self.best_epoch})"
            )
        return "".join(f", {part}" for part in parts)

    def report(self, examples: int, prepare_seconds: float, **extra: Any) -> None:
        """The fit report (:meth:`TrainContext.report`): this attempt's epochs, ``examples`` per
        epoch, the seconds preparing and those since the loop started (validation and checkpoints included)."""
        seconds = time.perf_counter() - self.started
        # which weights training ended with (0: no epoch beat the untrained model), for the row
        kept = {"kept_epoch": self.kept_epoch, "trained_epochs": self.epoch}
        self.context.report(self.epoch - self.first_epoch, examples, prepare_seconds, seconds, **kept, **extra)

    # -- epoch checkpoints -------------------------------------------------------------
    def _path(self, number: int) -> Path:
        return self.directory / f"epoch-{number:03d}"

    def _saved(self) -> list[int]:
        names = (p.name for p in self.directory.glob("epoch-*") if p.is_dir())
        return sorted(int(n[6:]) for n in names if n[6:].isdigit())

    def _save(self, number: int) -> None:
        torch = _torch()
        target = self._path(number)
        if target.exists():
            shutil.rmtree(target)  # left by an attempt this one did not resume from
        loop = {
            "epoch": number,
            "best": self.best,
            "best_epoch": self.best_epoch,
            "baseline": self.baseline_score,
            "stale": self.stale,
            "stopped": self.stopped,
            "curve": len(self.context.curve()),
        }
        payload = {"format": FORMAT, "loop": loop, "state": dict(self._state())}
        # serialised in memory first: torch's writer turns a full disk into an opaque RuntimeError
        # ("unexpected pos"); atomic_write's makes it the NoSpaceError that names the file
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        with atomic_dir(target) as staging:
            with atomic_write(staging / STATE, "wb") as handle:
                handle.write(buffer.getbuffer())
            write_manifest(staging)  # last: a checkpoint without it is incomplete
        kept = set(self._saved()[-self.keep :]) | ({self.best_epoch} if self.best_epoch is not None else set())
        for older in self._saved():
            if older not in kept:
                shutil.rmtree(self._path(older), ignore_errors=True)

    def _verified(self, path: Path, problem: str | None = None) -> bool:
        """Whether the checkpoint at ``path`` matches its manifest; a damaged one is deleted with a warning."""
        problem = problem or verify_manifest(path)
        if problem is None:
            return True
        print(f"warning: epoch checkpoint {path} is damaged ({problem}); discarding it", file=sys.stderr, flush=True)
        shutil.rmtree(path, ignore_errors=True)
        return False

    def _read(self, path: Path) -> dict[str, Any] | None:
        """The verified checkpoint at ``path``, or None (a damaged one deleted)."""
        if not self._verified(path):
            return None
        try:
            saved = _torch().load(path / STATE, map_location="cpu", weights_only=True)
        except Exception as exc:  # verified yet unreadable: written by another torch, say
            self._verified(path, f"unreadable: {type(exc).__name__}: {exc}")
            return None
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            self._verified(path, f"not an epoch checkpoint of format {FORMAT}")
            return None
        return saved

    def _resume(self) -> None:
        """Restore the last good epoch checkpoint whose best epoch's checkpoint is good too, and
        delete those after it (their epochs train again); with none, start afresh."""
        self.directory.mkdir(parents=True, exist_ok=True)
        resumed: dict[str, Any] | None = None
        for number in reversed(self._saved()):
            if not self._path(number).exists():
                continue  # discarded as another's best epoch
            saved = self._read(self._path(number))
            if saved is None:
                continue
            best = saved["loop"]["best_epoch"]
            if best is None or best == number or (self._path(best).exists() and self._verified(self._path(best))):
                resumed = saved
                break
        later = [n for n in self._saved() if resumed is None or n > resumed["loop"]["epoch"]]
        for number in later:
            shutil.rmtree(self._path(number), ignore_errors=True)
        if resumed is None:
            self._cut_curve(0)
            return
        loop = resumed["loop"]
        self._restore(resumed["state"])
        self.epoch, self.best, self.best_epoch = loop["epoch"], loop["best"], loop["best_epoch"]
        self.baseline_score, self.stale, self.stopped = loop["baseline"], loop["stale"], loop["stopped"]
        self.resumed_from = loop["epoch"]
        self._cut_curve(loop["curve"])

    def _cut_curve(self, points: int) -> None:
        """Drop the curve's points logged after the checkpoint resumed (they are logged again)."""
        path = Path(self.context.work_dir) / "curve.jsonl"
        if not path.exists():
            return
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if len(lines) > points:
            with atomic_write(path) as handle:
                handle.write("".join(f"{line}\n" for line in lines[:points]))


def _torch() -> Any:
    try:
        import torch  # optional: the core does not depend on torch, the epoch checkpoints do
    except ImportError:
        raise HarnessError("the training loop keeps its epoch checkpoints with torch: pip install torch") from None
    return torch
