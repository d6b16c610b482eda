"""The one training loop (harness.EpochLoop), proved once for every trained retriever: a training
SIGKILLed after an epoch checkpoint resumes from its last complete epoch and ends with exactly
the weights of one never interrupted; epoch checkpoints are checked against their digests before
a resume (a damaged one is discarded with a warning, an earlier one resumed); early stopping,
the best epoch put back, the untrained baseline, failure injection, the curve and the fit report.

The test file doubles as the killed child process (``python test_training_loop.py OUT CACHE``)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import Field

import harness
from harness import SKB, BuildContext, EpochLoop, HarnessError, Query, Ranking, TrainContext
from harness.caches import MANIFEST
from harness.testing import checkpoint_entry, require, run_retriever

torch = require("torch", install="pip install torch (see the README)")

PAUSE_AT = "LOOP_TEST_PAUSE_AT"  # the child stops (to be killed) when this epoch starts
PAUSE_WRITING = "LOOP_TEST_PAUSE_WRITING"  # ... or while it writes this epoch's checkpoint
MARKER = "LOOP_TEST_MARKER"  # the file it creates once stopped there
PARAMS = {"epochs": 5}


def _terms(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _pause() -> None:
    Path(os.environ[MARKER]).touch()
    time.sleep(600)  # until the test kills it


class TorchOverlap(harness.Retriever):
    """Term overlap with a learned weight per term, trained in the loop: random initial weights,
    dropout on the query's terms (torch's random numbers), shuffled queries (the epoch's NumPy
    generator), Adam (a state beyond the weights), early stopping on the validation MRR. A resume
    that missed any of these would end with other weights."""

    name = "torch-overlap"
    regime = "trained"
    trained: ClassVar[list[int]] = []  # the epochs trained in this process

    class Options(harness.Options):
        epochs: int = Field(5, ge=0)
        rate: float = Field(0.3, gt=0)
        patience: int | None = Field(None, gt=0)
        fail_at_epoch: int | None = Field(None, exclude=True, description="testing: fail when this epoch starts")

    options: Options

    def _vocabulary(self, skb: SKB) -> None:
        self.ids = skb.candidate_ids
        documents = [_terms(skb.document(int(i))) for i in self.ids]
        self.vocabulary = {t: j for j, t in enumerate(sorted({t for d in documents for t in d}))}
        self.documents = torch.zeros((len(self.ids), len(self.vocabulary)))
        for row, document in enumerate(documents):
            for term in document:
                self.documents[row, self.vocabulary[term]] = 1.0

    def _query(self, text: str) -> Any:
        vector = torch.zeros(len(self.vocabulary))
        for term in _terms(text):
            if term in self.vocabulary:
                vector[self.vocabulary[term]] = 1.0
        return vector

    def _scores(self, text: str) -> Any:
        return self.documents @ (self.weights.detach() * self._query(text))

    def _mrr(self, queries: Sequence[Query]) -> float:
        reciprocal = []
        for query in queries:
            order = torch.argsort(-self._scores(query.text), stable=True).tolist()
            ranks = [rank for rank, row in enumerate(order) if int(self.ids[row]) in query.answer_ids]
            reciprocal.append(1.0 / (ranks[0] + 1) if ranks else 0.0)
        return float(np.mean(reciprocal))

    def fit(self, skb: SKB, train: Sequence[Query], context: TrainContext) -> None:
        self._vocabulary(skb)
        self.weights = torch.nn.Parameter(torch.rand(len(self.vocabulary)))
        optimizer = torch.optim.Adam([self.weights], lr=self.options.rate)
        position = {int(n): row for row, n in enumerate(self.ids)}
        examples = [(q, [position[a] for a in q.answer_ids if a in position]) for q in train]
        examples = [(q, gold) for q, gold in examples if gold]

        def restore(saved: Mapping[str, Any]) -> None:
            with torch.no_grad():
                self.weights.copy_(saved["weights"])
            optimizer.load_state_dict(saved["optimizer"])

        validation = list(context.validation)
        loop = EpochLoop(
            context,
            self.options.epochs,
            state=lambda: {"weights": self.weights.detach().clone(), "optimizer": optimizer.state_dict()},
            restore=restore,
            metric="val_mrr" if validation else None,
            patience=self.options.patience,
            fail_at=self.options.fail_at_epoch,
        )
        for epoch in loop:
            if os.environ.get(PAUSE_AT) == str(epoch.number):
                _pause()
            losses = []
            for i in epoch.rng.permutation(len(examples)):
                query, gold = examples[i]
                logits = self.documents @ (self.weights * torch.nn.functional.dropout(self._query(query.text), 0.3))
                target = torch.zeros(len(self.ids))
                target[gold] = 1.0 / len(gold)
                loss = -(target * torch.log_softmax(logits, 0)).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(float(loss.detach()))
            TorchOverlap.trained.append(epoch.number)
            loop.end(epoch, loss=float(np.mean(losses)), **({"val_mrr": self._mrr(validation)} if validation else {}))
        loop.restore_best()
        torch.save({"weights": self.weights.detach().clone()}, context.checkpoint_dir / "weights.pt")
        loop.report(len(examples), 0.0)

    def load_checkpoint(self, path: Path) -> None:
        self.weights = torch.load(path / "weights.pt", weights_only=True)["weights"]

    def build(self, skb: SKB, context: BuildContext) -> None:
        self._vocabulary(skb)

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        rankings = []
        for query in queries:
            scores = self._scores(query.text).numpy().astype(np.float64)
            order = np.argsort(-scores, kind="stable")[:k]
            rankings.append(Ranking(self.ids[order], scores[order]))
        return rankings


def _run(out: Path, cache: Path, **params: Any) -> Any:
    return run_retriever(TorchOverlap, {**PARAMS, **params}, out, dataset="tiny-train", cache_dir=cache)


def _child(out: str, cache: str) -> None:
    """The process the kill test kills: a training that stops where the environment says."""
    writing = os.environ.get(PAUSE_WRITING)
    if writing:  # stop after the epoch's state is written, before its manifest
        import harness.training.loop as loop_module

        write = loop_module.write_manifest

        def paused(directory: str | os.PathLike[str], ignore: tuple[str, ...] = ()) -> None:
            if f".epoch-{int(writing):03d}." in Path(directory).name:
                _pause()
            write(directory, ignore)

        loop_module.write_manifest = paused  # type: ignore[assignment]
    _run(Path(out), Path(cache))


def _kill_during_training(tmp_path: Path, cache: Path, where: dict[str, str]) -> None:
    marker, log = tmp_path / "paused", tmp_path / "child.log"
    env = {**os.environ, **where, MARKER: str(marker)}
    with open(log, "wb") as output:
        child = subprocess.Popen(
            [sys.executable, __file__, str(tmp_path / "killed"), str(cache)], env=env, stdout=output, stderr=output
        )
        deadline = time.monotonic() + 300
        while not marker.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                child.kill()
                pytest.fail(f"the child never paused:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL


def _weights(outcome: Any, cache: Path) -> Any:
    return torch.load(checkpoint_entry(outcome, cache) / "weights.pt", weights_only=True)["weights"]


def _curve(outcome: Any, cache: Path) -> list[dict[str, Any]]:
    lines = (checkpoint_entry(outcome, cache) / "curve.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _same_as_uninterrupted(resumed: Any, cache: Path, tmp_path: Path) -> None:
    TorchOverlap.trained.clear()
    uninterrupted = _run(tmp_path / "uninterrupted", tmp_path / "fresh")
    assert TorchOverlap.trained == [1, 2, 3, 4, 5]
    assert resumed.row.training.checkpoint == uninterrupted.row.training.checkpoint
    assert torch.equal(_weights(resumed, cache), _weights(uninterrupted, tmp_path / "fresh"))
    assert _curve(resumed, cache) == _curve(uninterrupted, tmp_path / "fresh")
    assert [p["epoch"] for p in _curve(resumed, cache)] == [1, 2, 3, 4, 5]
    assert resumed.row.metrics == uninterrupted.row.metrics


@pytest.mark.slow
@pytest.mark.parametrize(
    "where", [{PAUSE_AT: "3"}, {PAUSE_WRITING: "3"}], ids=["in-epoch-3", "writing-epoch-3-checkpoint"]
)
def test_a_training_killed_with_sigkill_resumes_from_its_last_complete_epoch(
    tmp_path: Path, where: dict[str, str]
) -> None:
    cache = tmp_path / "cache"
    _kill_during_training(tmp_path, cache, where)
    [work] = (cache / "checkpoints").glob("*.work")
    assert sorted(p.name for p in (work / "epochs").glob("epoch-*")) == ["epoch-001", "epoch-002"]
    assert (work / "epochs" / "epoch-002" / MANIFEST).is_file()
    assert not [p for p in (cache / "checkpoints").iterdir() if p.is_dir() and not p.name.endswith(".work")]
    TorchOverlap.trained.clear()
    resumed = _run(tmp_path / "resumed", cache)
    assert TorchOverlap.trained == [3, 4, 5], "the resumed training did not start after epoch 2"
    assert not work.exists(), "the work directory outlived the finished training"
    fit = json.loads((checkpoint_entry(resumed, cache) / "fit.json").read_text())
    assert fit["epochs"] == 3  # this attempt's
    _same_as_uninterrupted(resumed, cache, tmp_path)


@pytest.mark.slow
def test_a_sigkilled_training_whose_last_epoch_checkpoint_is_damaged_resumes_from_the_one_before(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The fault campaign's case, for real: a kill -9 after epoch 3's checkpoint is complete,
    then a byte of that checkpoint's state flipped on disk (its size and manifest untouched)."""
    cache = tmp_path / "cache"
    _kill_during_training(tmp_path, cache, {PAUSE_AT: "4"})
    [work] = (cache / "checkpoints").glob("*.work")
    state = work / "epochs" / "epoch-003" / "state.pt"
    assert (state.parent / MANIFEST).is_file(), "epoch 3's checkpoint was not complete when killed"
    resumed = _damaged_and_resumed(state, 0x01, tmp_path, cache, capfd)
    assert json.loads((checkpoint_entry(resumed, cache) / "fit.json").read_text())["epochs"] == 3
    _same_as_uninterrupted(resumed, cache, tmp_path)


def test_a_damaged_epoch_checkpoint_is_discarded_and_an_earlier_one_resumed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    TorchOverlap.trained.clear()
    with pytest.raises(HarnessError, match="failed to train: RuntimeError: failure injected at epoch 4"):
        _run(tmp_path / "failed", cache, fail_at_epoch=4)
    assert TorchOverlap.trained == [1, 2, 3]
    [work] = (cache / "checkpoints").glob("*.work")
    state = work / "epochs" / "epoch-003" / "state.pt"
    resumed = _damaged_and_resumed(state, 0xFF, tmp_path, cache, capfd)
    _same_as_uninterrupted(resumed, cache, tmp_path)


def _damaged_and_resumed(state: Path, flip: int, tmp_path: Path, cache: Path, capfd: pytest.CaptureFixture[str]) -> Any:
    """Epoch 3's ``state`` with one byte flipped (the size unchanged), then training resumed:
    it warns, drops that checkpoint and trains epochs 3-5 again from epoch 2's."""
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= flip
    state.write_bytes(bytes(data))
    capfd.readouterr()
    TorchOverlap.trained.clear()
    resumed = _run(tmp_path / "resumed", cache)
    warning = capfd.readouterr().err
    assert f"warning: epoch checkpoint {state.parent} is damaged (state.pt does not match its digest)" in warning
    assert TorchOverlap.trained == [3, 4, 5], "not resumed from epoch 2, the last good checkpoint"
    return resumed


# -- the loop alone ------------------------------------------------------------------------
def _context(tmp_path: Path) -> TrainContext:
    (tmp_path / "work").mkdir(parents=True, exist_ok=True)
    (tmp_path / "checkpoint").mkdir(exist_ok=True)
    return TrainContext(cache_dir=tmp_path, seed=7, work_dir=tmp_path / "work", checkpoint_dir=tmp_path / "checkpoint")


def _train(
    tmp_path: Path,
    scores: Sequence[float],
    baseline: float | None = None,
    **loop: Any,
) -> tuple[EpochLoop, Any, list[int]]:
    """Train a model of three numbers for ``len(scores)`` epochs, the validation scores given;
    each epoch adds torch's random numbers and its NumPy generator's, so epochs differ."""
    weights, ran = torch.zeros(3, dtype=torch.float64), []

    def state() -> dict[str, Any]:
        return {"weights": weights.clone()}

    def restore(saved: Mapping[str, Any]) -> None:
        weights.copy_(saved["weights"])

    epochs = EpochLoop(_context(tmp_path), len(scores), state=state, restore=restore, metric="val", **loop)
    if baseline is not None:
        epochs.baseline(lambda: baseline)
    for epoch in epochs:
        weights += torch.rand(3, dtype=torch.float64) + torch.as_tensor(epoch.rng.random(3))
        ran.append(epoch.number)
        epochs.end(epoch, loss=1.0 / epoch.number, val=scores[epoch.number - 1])
    epochs.restore_best()
    return epochs, weights, ran


def _saved(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "work" / "epochs").iterdir())


def test_early_stopping_puts_the_best_epoch_back(tmp_path: Path) -> None:
    loop, weights, ran = _train(tmp_path / "a", [0.2, 0.5, 0.4, 0.3, 0.9], patience=2)
    assert ran == [1, 2, 3, 4] and loop.stopped and (loop.best, loop.best_epoch, loop.kept_epoch) == (0.5, 2, 2)
    _, after_two, _ = _train(tmp_path / "b", [0.2, 0.5])
    assert torch.equal(weights, after_two), "not the weights of epoch 2"
    assert _saved(tmp_path / "a") == ["epoch-002", "epoch-003", "epoch-004"]  # the best and the last two
    assert "val 0.300 (best 0.500 at epoch 2)" in loop.summary()
    loop.report(10, 0.5, note="x")
    fit = json.loads((tmp_path / "a" / "checkpoint" / "fit.json").read_text())
    assert (fit["epochs"], fit["examples"], fit["note"], fit["seconds"]["prepare"]) == (4, 10, "x", 0.5)
    assert (fit["kept_epoch"], fit["trained_epochs"]) == (2, 4)  # what the row's training says it kept


def test_the_untrained_baseline_competes_and_is_not_asked_again_after_a_resume(tmp_path: Path) -> None:
    loop, weights, _ = _train(tmp_path, [0.5, 0.6], baseline=0.9)
    assert (loop.best_epoch, loop.baseline_score) == (0, 0.9) and not weights.any(), "the untrained weights"
    loop.report(4, 0.0)
    assert json.loads((tmp_path / "checkpoint" / "fit.json").read_text())["kept_epoch"] == 0
    resumed = EpochLoop(_context(tmp_path), 2, state=dict, restore=lambda saved: None, metric="val")
    resumed.baseline(lambda: pytest.fail("the baseline was asked again"))
    assert (resumed.resumed_from, resumed.baseline_score, list(resumed)) == (2, 0.9, [])


def test_a_nan_score_is_never_the_best(tmp_path: Path) -> None:
    loop, _, _ = _train(tmp_path, [math.nan, 0.1, math.nan])
    assert (loop.best, loop.best_epoch, loop.stale) == (0.1, 2, 1)


def test_failure_injection_stops_the_loop_and_the_next_attempt_ends_as_if_uninterrupted(tmp_path: Path) -> None:
    scores = [0.1, 0.2, 0.3, 0.4, 0.5]
    with pytest.raises(RuntimeError, match="failure injected at epoch 3"):
        _train(tmp_path / "a", scores, fail_at=3)
    curve = tmp_path / "a" / "work" / "curve.jsonl"
    with open(curve, "a") as handle:  # logged after the last checkpoint by an attempt that then died
        handle.write('{"epoch": 3, "loss": 9.0}\n{"epoch": 3, "lo')
    _, weights, ran = _train(tmp_path / "a", scores)
    assert ran == [3, 4, 5]
    _, uninterrupted, _ = _train(tmp_path / "b", scores)
    assert torch.equal(weights, uninterrupted)
    points = [json.loads(line) for line in curve.read_text().splitlines()]
    assert [p["epoch"] for p in points] == [1, 2, 3, 4, 5] and points[2]["loss"] == 1 / 3


def test_a_damaged_best_epoch_sends_the_resume_back_before_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    scores = [0.9, 0.1, 0.2, 0.3]
    with pytest.raises(RuntimeError, match="epoch 4"):
        _train(tmp_path / "a", scores, fail_at=4)
    assert _saved(tmp_path / "a") == ["epoch-001", "epoch-002", "epoch-003"]
    best = tmp_path / "a" / "work" / "epochs" / "epoch-001" / "state.pt"
    best.write_bytes(best.read_bytes()[:-1] + bytes([best.read_bytes()[-1] ^ 1]))
    capfd.readouterr()
    _, weights, ran = _train(tmp_path / "a", scores)
    assert "epoch-001 is damaged (state.pt does not match its digest); discarding it" in capfd.readouterr().err
    assert ran == [1, 2, 3, 4], "epochs 2 and 3 keep epoch 1 as their best: nothing to resume from"
    _, uninterrupted, _ = _train(tmp_path / "b", scores)
    assert torch.equal(weights, uninterrupted)


def test_what_is_not_a_complete_epoch_checkpoint_of_this_format_is_never_resumed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _train(tmp_path, [0.1, 0.2])
    epochs = tmp_path / "work" / "epochs"
    (epochs / "epoch-002" / MANIFEST).unlink()  # cut short before its manifest
    (tmp_path / "work" / "epoch-002.pt").write_bytes(b"a plugin's own checkpoint, of before the loop")
    other = {"format": 0, "loop": {}, "state": {}}
    (epochs / "epoch-001" / "state.pt").unlink()
    torch.save(other, epochs / "epoch-001" / "state.pt")
    harness.write_manifest(epochs / "epoch-001")
    capfd.readouterr()
    _, _, ran = _train(tmp_path, [0.1, 0.2])
    err = capfd.readouterr().err
    assert (
        "epoch-002 is damaged (no manifest" in err
        and "epoch-001 is damaged (not an epoch checkpoint of format 1)" in err
    )
    assert ran == [1, 2]


def test_misuse_is_one_clear_error(tmp_path: Path) -> None:
    loop = EpochLoop(_context(tmp_path), 2, state=dict, restore=lambda saved: None, metric="val_mrr")
    epoch = next(iter(loop))
    with pytest.raises(HarnessError, match="end\\(\\) of epoch 1 lacks the metric 'val_mrr'"):
        loop.end(epoch, loss=1.0)
    forgetful = iter(EpochLoop(_context(tmp_path / "b"), 2, state=dict, restore=lambda saved: None))
    next(forgetful)
    with pytest.raises(HarnessError, match="epoch 1 was not ended"):
        next(forgetful)
    with pytest.raises(HarnessError, match="keep must be at least 1"):
        EpochLoop(_context(tmp_path / "c"), 2, state=dict, restore=lambda saved: None, keep=0)


if __name__ == "__main__":
    _child(*sys.argv[1:3])
