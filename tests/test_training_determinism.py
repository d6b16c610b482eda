"""Training at a given seed is deterministic on a CPU (issue 31): the same weights, bit for bit,
and the same rankings, whatever the process's hash seed (``PYTHONHASHSEED``) and however many
threads the machine gives torch. Float reductions split across threads sum in another order with
another thread count (LayerNorm's backward, which this test's ranker has, is one), so the harness
trains on a fixed number of threads (``harness.training.TRAINING_THREADS``, or
``$HARNESS_TRAIN_THREADS``, which then enters the checkpoint key) and records it in
``training.json``.

The test file doubles as the child process (``python test_training_determinism.py OUT CACHE``):
each training runs in a fresh interpreter, as a retraining on another machine would. The
search after it runs on the machine's threads: the same rankings, scores equal to float32's
rounding (bit for bit only where the retriever fixes its own threads, as qagnn does)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import Field

import harness
from harness import SKB, BuildContext, EpochLoop, Query, Ranking, TrainContext
from harness.testing import checkpoint_entry, require, run_retriever
from harness.training import TRAINING_THREADS

torch = require("torch", install="pip install torch (see the README)")

THREADS = "DETERMINISM_TEST_THREADS"  # the child's torch threads before training: the machine's, in effect


def _terms(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class NormedRanker(harness.Retriever):
    """A two-tower ranker over bags of words with a LayerNorm, trained with Adam and dropout in
    the training loop: small, but its backward pass sums across threads."""

    name = "normed-ranker"
    regime = "trained"

    class Options(harness.Options):
        epochs: int = Field(6, ge=0)
        hidden: int = Field(32, gt=0)
        lr: float = Field(0.05, gt=0)

    options: Options

    def _vocabulary(self, skb: SKB) -> None:
        self.ids = skb.candidate_ids
        documents = [_terms(skb.document(int(i))) for i in self.ids]
        self.vocabulary = {t: j for j, t in enumerate(sorted({t for d in documents for t in d}))}
        self.documents = self._bags(documents)

    def _bags(self, texts: Sequence[list[str]]) -> Any:
        bags = torch.zeros((len(texts), len(self.vocabulary)))
        for row, terms in enumerate(texts):
            for term in terms:
                if term in self.vocabulary:
                    bags[row, self.vocabulary[term]] += 1.0
        return bags

    def _network(self) -> Any:
        hidden = self.options.hidden
        return torch.nn.Sequential(
            torch.nn.Linear(len(self.vocabulary), hidden),
            torch.nn.LayerNorm(hidden),
            torch.nn.GELU(),
            torch.nn.Dropout(0.2),
            torch.nn.Linear(hidden, hidden),
        )

    def _scores(self, texts: Sequence[str]) -> Any:
        queries = self._bags([_terms(t) for t in texts])
        vectors = self.network(torch.cat([queries, self.documents]))  # one LayerNorm over every row
        return vectors[: len(texts)] @ vectors[len(texts) :].T

    def fit(self, skb: SKB, train: Sequence[Query], context: TrainContext) -> None:
        self._vocabulary(skb)
        self.network = self._network()
        optimizer = torch.optim.Adam(self.network.parameters(), lr=self.options.lr)
        position = {int(n): row for row, n in enumerate(self.ids)}
        examples = [(q.text, [position[a] for a in q.answer_ids if a in position]) for q in train]
        examples = [(text, gold) for text, gold in examples if gold]

        def restore(saved: Mapping[str, Any]) -> None:
            self.network.load_state_dict(saved["network"])
            optimizer.load_state_dict(saved["optimizer"])

        loop = EpochLoop(
            context,
            self.options.epochs,
            state=lambda: {"network": self.network.state_dict(), "optimizer": optimizer.state_dict()},
            restore=restore,
        )
        for epoch in loop:
            self.network.train()
            order = epoch.rng.permutation(len(examples))
            chosen = [examples[i] for i in order]
            target = torch.zeros((len(chosen), len(self.ids)))
            for row, (_, gold) in enumerate(chosen):
                target[row, gold] = 1.0 / len(gold)
            logits = self._scores([text for text, _ in chosen])
            loss = -(target * torch.log_softmax(logits, 1)).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loop.end(epoch, loss=float(loss.detach()))
        torch.save(self.network.state_dict(), context.checkpoint_dir / "model.pt")
        loop.report(len(examples), 0.0)

    def load_checkpoint(self, path: Path) -> None:
        self._state = torch.load(path / "model.pt", weights_only=True)

    def build(self, skb: SKB, context: BuildContext) -> None:
        self._vocabulary(skb)
        self.network = self._network()
        self.network.load_state_dict(self._state)
        self.network.eval()

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        with torch.no_grad():
            scores = self._scores([q.text for q in queries]).numpy().astype(np.float64)
        rankings = []
        for row in scores:
            order = np.argsort(-row, kind="stable")[:k]
            rankings.append(Ranking(self.ids[order], row[order]))
        return rankings


def _digest(state: Mapping[str, Any]) -> str:
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].numpy().tobytes())
    return digest.hexdigest()


def _child(out: str, cache: str) -> None:
    """One training in this interpreter, with the threads the environment says; prints what it made."""
    torch.set_num_threads(int(os.environ[THREADS]))
    outcome = run_retriever(NormedRanker, {}, Path(out), dataset="tiny-train", cache_dir=Path(cache), k=5)
    entry = checkpoint_entry(outcome, cache)
    results = [json.loads(line) for line in (outcome.run_dir / "results.jsonl").read_text().splitlines()]
    report = {
        "weights": _digest(torch.load(entry / "model.pt", weights_only=True)),
        "checkpoint": outcome.row.training.checkpoint,
        "threads": json.loads((entry / "training.json").read_text())["threads"],
        "rankings": [[r["qid"], r["ids"], r["scores"]] for r in results],
        "metrics": outcome.row.metrics,
        "threads_after": torch.get_num_threads(),
    }
    print(json.dumps(report))


def _train_in_a_child(tmp_path: Path, name: str, hash_seed: str, threads: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": str(threads), THREADS: str(threads)}
    env.pop("HARNESS_TRAIN_THREADS", None)
    done = subprocess.run(
        [sys.executable, __file__, str(tmp_path / name), str(tmp_path / f"{name}-cache")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["threads_after"] == threads, "training left torch's thread count changed"
    return report


def test_one_seed_trains_the_same_weights_whatever_the_hash_seed_and_the_threads(tmp_path: Path) -> None:
    one = _train_in_a_child(tmp_path, "one", hash_seed="0", threads=1)
    two = _train_in_a_child(tmp_path, "two", hash_seed="4242", threads=2)
    assert one["checkpoint"] == two["checkpoint"]
    assert one["threads"] == two["threads"] == TRAINING_THREADS
    assert one["weights"] == two["weights"], "another thread count or hash seed trained other weights"
    assert [r[:2] for r in one["rankings"]] == [r[:2] for r in two["rankings"]] and one["metrics"] == two["metrics"]
    # the search itself runs on the machine's threads (the runner's): its float32 matrix products
    # may round the last bit otherwise, from the same weights
    for (_, _, ours), (_, _, theirs) in zip(one["rankings"], two["rankings"], strict=True):
        assert np.allclose(ours, theirs, rtol=1e-6, atol=0)


def test_another_training_thread_count_is_another_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_TRAIN_THREADS", raising=False)
    default = run_retriever(NormedRanker, {"epochs": 1}, tmp_path / "a", dataset="tiny-train", cache_dir=tmp_path)
    monkeypatch.setenv("HARNESS_TRAIN_THREADS", str(TRAINING_THREADS))  # the default, said: the same checkpoint
    said = run_retriever(NormedRanker, {"epochs": 1}, tmp_path / "b", dataset="tiny-train", cache_dir=tmp_path)
    monkeypatch.setenv("HARNESS_TRAIN_THREADS", str(TRAINING_THREADS + 1))
    other = run_retriever(NormedRanker, {"epochs": 1}, tmp_path / "c", dataset="tiny-train", cache_dir=tmp_path)
    assert default.row.training is not None and said.row.training is not None and other.row.training is not None
    assert default.row.training.checkpoint == said.row.training.checkpoint != other.row.training.checkpoint
    recorded = json.loads((checkpoint_entry(other, tmp_path) / "training.json").read_text())
    assert recorded["threads"] == TRAINING_THREADS + 1
    monkeypatch.setenv("HARNESS_TRAIN_THREADS", "many")
    with pytest.raises(harness.HarnessError, match="HARNESS_TRAIN_THREADS"):
        run_retriever(NormedRanker, {"epochs": 1}, tmp_path / "d", dataset="tiny-train", cache_dir=tmp_path)


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
