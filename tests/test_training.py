"""The training lifecycle (harness.training): checkpoints keyed by content, resumed after a
failure, recorded in the row; training on the evaluated split refused."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import Field

import harness
from harness import SKB, BuildContext, HarnessError, Query, Ranking
from harness.testing import run_retriever


def _terms(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class LearnedOverlap(harness.Retriever):
    """Term overlap with a learned weight per term: softmax cross-entropy over the candidates,
    plain gradient steps (a real, if small, training loop)."""

    name = "learned-overlap"
    regime = "trained"
    fits: ClassVar[list[int]] = []  # epochs trained, across instances (the tests count them)

    class Options(harness.Options):
        epochs: int = Field(4, ge=0, description="0: the untrained base")
        rate: float = Field(0.5, gt=0)
        fail_at_epoch: int | None = Field(None, description="raise during this epoch (a kill)")

    def _vocab(self, skb: SKB) -> None:
        self.ids = skb.candidate_ids
        docs = [_terms(skb.document(int(i))) for i in self.ids]
        self.vocab = sorted({t for d in docs for t in d})
        index = {t: j for j, t in enumerate(self.vocab)}
        self.doc_terms = np.zeros((len(self.ids), len(self.vocab)))
        for row, doc in enumerate(docs):
            for t in doc:
                self.doc_terms[row, index[t]] = 1.0
        self.index = index

    def _query(self, text: str) -> np.ndarray:
        vector = np.zeros(len(self.vocab))
        for t in _terms(text):
            if t in self.index:
                vector[self.index[t]] = 1.0
        return vector

    def fit(self, skb: SKB, train: Sequence[Query], context: Any) -> None:
        self._vocab(skb)
        weights, start = np.zeros(len(self.vocab)), 0  # untrained: every document ties
        done = sorted(context.work_dir.glob("epoch-*.npy"))
        if done:  # resume after the last finished epoch
            weights, start = np.load(done[-1]), int(done[-1].stem.split("-")[1])
        position = {int(n): r for r, n in enumerate(self.ids)}
        for epoch in range(start + 1, self.options.epochs + 1):
            if epoch == self.options.fail_at_epoch:
                raise RuntimeError(f"killed in epoch {epoch}")
            loss = 0.0
            for query in train:
                q = self._query(query.text)
                scores = self.doc_terms @ (weights * q)
                p = np.exp(scores - scores.max())
                p /= p.sum()
                gold = [position[a] for a in query.answer_ids if a in position]
                target = np.zeros(len(p))
                target[gold] = 1.0 / len(gold)
                loss -= float(np.sum(target * np.log(p + 1e-12)))
                weights -= self.options.rate * ((p - target) @ self.doc_terms) * q
            np.save(context.work_dir / f"epoch-{epoch:03d}.npy", weights)
            LearnedOverlap.fits.append(epoch)
            context.log(epoch=epoch, loss=loss / len(train), val_hit1=self._hit1(weights, context.validation))
        np.save(context.checkpoint_dir / "weights.npy", weights)
        context.report(self.options.epochs - start, len(train), 0.0, 0.25, vocabulary=len(self.vocab))

    def _hit1(self, weights: np.ndarray, queries: Sequence[Query]) -> float:
        if not queries:
            return 0.0
        hits = [
            int(self.ids[int(np.argmax(self.doc_terms @ (weights * self._query(q.text))))]) in q.answer_ids
            for q in queries
        ]
        return float(np.mean(hits))

    def load_checkpoint(self, path: Path) -> None:
        self.weights = np.load(path / "weights.npy")

    def build(self, skb: SKB, context: BuildContext) -> None:
        self._vocab(skb)

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        out = []
        for query in queries:
            scores = self.doc_terms @ (self.weights * self._query(query.text))
            order = np.argsort(-scores, kind="stable")[:k]
            out.append(Ranking(self.ids[order], scores[order]))
        return out


def _run(tmp_path: Path, cache: Path, **params: Any) -> Any:
    options = {k: params.pop(k) for k in ("split", "allow_training", "seed") if k in params}
    return run_retriever(LearnedOverlap, params, tmp_path / "out", dataset="tiny-train", cache_dir=cache, **options)


def test_training_improves_the_ranking_and_the_row_says_how_it_was_trained(tmp_path: Path) -> None:
    LearnedOverlap.fits.clear()
    trained = _run(tmp_path, tmp_path / "cache", epochs=6)
    untrained = _run(tmp_path, tmp_path / "cache0", epochs=0)
    assert trained.row.metrics["mrr"] > untrained.row.metrics["mrr"]
    info = trained.row.training
    assert trained.row.regime == "trained" and info.split == "train" and info.queries == 8
    assert info.validation_split == "val" and info.seed == 0 and info.device == "cpu"
    tiny = harness.testing.TinyTrainDataset().load_queries()
    assert info.digest == harness.stable_hash([[q.id, q.text, list(q.answer_ids)] for q in tiny.split("train")])
    checkpoint = tmp_path / "cache" / "checkpoints" / f"under-test-{info.checkpoint}"
    assert info.checkpoint_digest == harness.directory_digest(checkpoint, skip=("manifest.sha256.json",))
    curve = [json.loads(line) for line in (checkpoint / "curve.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in curve] == [1, 2, 3, 4, 5, 6] and curve[-1]["loss"] < curve[0]["loss"]
    png = trained.run_dir / "training-under-test.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    row = json.loads((trained.run_dir / "row.json").read_text())
    assert row["training"]["checkpoint"] == info.checkpoint
    fit = json.loads((checkpoint / "fit.json").read_text())  # what the bench reads, beside the model
    assert fit == {"epochs": 6, "examples": 8, "vocabulary": 28, "seconds": {"prepare": 0.0, "train": 0.25}}


def test_a_checkpoint_is_reused_by_content_and_retrained_when_the_content_changes(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    LearnedOverlap.fits.clear()
    first = _run(tmp_path / "a", cache)
    assert LearnedOverlap.fits == [1, 2, 3, 4]
    again = _run(tmp_path / "b", cache)  # the same training: loaded, not trained
    assert LearnedOverlap.fits == [1, 2, 3, 4] and again.row.metrics == first.row.metrics
    assert again.row.training == first.row.training
    other_seed = _run(tmp_path / "c", cache, seed=1)  # another seed is another model
    assert LearnedOverlap.fits == [1, 2, 3, 4] * 2
    assert other_seed.row.training.checkpoint != first.row.training.checkpoint
    assert other_seed.row.config_hash != first.row.config_hash
    _run(tmp_path / "d", cache, rate=0.25)  # another hyper-parameter too
    assert len(LearnedOverlap.fits) == 12
    # a damaged checkpoint is noticed, discarded and trained again
    checkpoint = cache / "checkpoints" / f"under-test-{first.row.training.checkpoint}"
    np.save(checkpoint / "weights.npy", np.zeros(3))
    _run(tmp_path / "e", cache)
    assert len(LearnedOverlap.fits) == 16


def test_training_resumes_after_the_last_finished_epoch(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    LearnedOverlap.fits.clear()
    with pytest.raises(HarnessError, match="failed to train: RuntimeError: killed in epoch 3"):
        _run(tmp_path / "a", cache, epochs=5, fail_at_epoch=3)
    assert LearnedOverlap.fits == [1, 2]
    assert not list((cache / "checkpoints").glob("under-test-*[!k]"))  # no checkpoint from a failed fit
    # fail_at_epoch is a parameter, so it keys another checkpoint: resume through the same key
    plan_dir = next((cache / "checkpoints").glob("*.work"))
    resumed_key = plan_dir.name.removesuffix(".work")
    LearnedOverlap.fits.clear()
    with pytest.raises(HarnessError, match="killed in epoch 3"):  # the same failing configuration resumes at 3
        _run(tmp_path / "b", cache, epochs=5, fail_at_epoch=3)
    assert LearnedOverlap.fits == []
    (cache / "checkpoints" / f"{resumed_key}.work" / "epoch-003.npy").write_bytes(b"")  # not a finished epoch
    LearnedOverlap.fits.clear()
    uninterrupted = _run(tmp_path / "c", cache / "fresh", epochs=5)
    assert LearnedOverlap.fits == [1, 2, 3, 4, 5]
    assert uninterrupted.row.training.checkpoint != resumed_key.removeprefix("under-test-")


def test_training_on_the_evaluated_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="would train on split 'train', the split being evaluated"):
        _run(tmp_path, tmp_path / "cache", split="train")
    # validating on the evaluated split would select the model on it: the run goes without
    outcome = _run(tmp_path, tmp_path / "cache", split="val")
    assert outcome.row.training.validation_split is None
    assert "trained without early stopping: the validation split 'val' is the evaluated one" in outcome.notes


def test_a_train_split_sharing_queries_with_the_evaluated_one_is_refused(tmp_path: Path) -> None:
    # tiny's train split is the first four of its test queries
    with pytest.raises(
        HarnessError, match=r"split 'train' shares 4 queries \(ids 1, 2, 3, 4\) with the evaluated split 'test'"
    ):
        run_retriever(LearnedOverlap, {}, tmp_path, dataset="tiny")


def test_without_training_a_missing_checkpoint_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"has no checkpoint for this training data .*`harness train -r under-test"):
        _run(tmp_path, tmp_path / "cache", allow_training=False)
    _run(tmp_path / "a", tmp_path / "cache")
    LearnedOverlap.fits.clear()
    _run(tmp_path / "b", tmp_path / "cache", allow_training=False)  # now it exists
    assert LearnedOverlap.fits == []


class ScaledOverlap(LearnedOverlap):
    """LearnedOverlap whose scores are scaled at search time: ``scale`` changes nothing ``fit`` learns."""

    name = "scaled-overlap"
    search_params = ("scale",)

    class Options(LearnedOverlap.Options):
        scale: float = Field(1.0, gt=0, description="multiplies every score (search only)")

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        return [Ranking(r.ids, r.scores * self.options.scale) for r in super().search(queries, k, top_ranked)]


def test_search_only_parameters_share_one_checkpoint(tmp_path: Path) -> None:
    LearnedOverlap.fits.clear()
    cache = tmp_path / "cache"

    def run(params: dict[str, Any], out: str) -> Any:
        return run_retriever(ScaledOverlap, params, tmp_path / out, dataset="tiny-train", cache_dir=cache)

    first = run({"scale": 1.0}, "plain")
    assert LearnedOverlap.fits == [1, 2, 3, 4]
    scaled = run({"scale": 3.0}, "scaled")
    assert LearnedOverlap.fits == [1, 2, 3, 4], "a search-only parameter trained the model again"
    assert scaled.row.training.checkpoint == first.row.training.checkpoint
    assert scaled.row.config_hash != first.row.config_hash  # another run all the same
    run({"scale": 1.0, "rate": 0.25}, "slower")  # a training parameter: trained again
    assert LearnedOverlap.fits == [1, 2, 3, 4] * 2


def test_search_params_must_name_parameters(tmp_path: Path) -> None:
    class Misnamed(ScaledOverlap):
        name = "misnamed"
        search_params = ("scael",)

    with pytest.raises(HarnessError, match="search_params names no parameter 'scael'"):
        run_retriever(Misnamed, {}, tmp_path, dataset="tiny-train")


def test_the_resume_kit_passes_a_resuming_retriever_and_catches_one_that_starts_over(tmp_path: Path) -> None:
    from harness.testing import check_training_resumes

    def weights(entry: Path) -> dict[str, Any]:
        return {"weights": np.load(entry / "weights.npy")}

    class Resumes(LearnedOverlap):
        name = "resumes"

        class Options(LearnedOverlap.Options):
            fail_at_epoch: int | None = Field(None, exclude=True, description="a kill; not recorded, not keyed")

    kit = {"fail_at": 3, "weights": weights, "dataset": "tiny-train"}
    check_training_resumes(Resumes, {"epochs": 4}, tmp_path / "good", **kit)

    class StartsOver(Resumes):
        name = "starts-over"

        def fit(self, skb: SKB, train: Sequence[Query], context: Any) -> None:
            for done in context.work_dir.glob("epoch-*.npy"):
                done.unlink()  # ignores what the failed attempt finished
            super().fit(skb, train, context)

    with pytest.raises(AssertionError, match="trained twice"):
        check_training_resumes(StartsOver, {"epochs": 4}, tmp_path / "bad", **kit)


def test_what_counts_as_sharing_queries_with_the_evaluated_split() -> None:
    from harness.testing import tiny_skb
    from harness.training import plan_training

    skb = tiny_skb()
    train = [Query(0, "a package for sound", (1,)), Query(1, "Editors  of TEXT", (2, 3))]
    val = [Query(7, "another query", (4,))]

    def plan(tested: list[Query], validation: list[Query] = val) -> Any:
        splits = {"train": train, "val": validation, "test": tested}
        return plan_training("m", LearnedOverlap(), {"params": {}}, skb, splits, "test")

    # STaRK's human-generated split numbers its own, unrelated queries from 0 again: not shared
    assert plan([Query(0, "a different question", (5,)), Query(1, "and another", (2,))]).split == "train"
    with pytest.raises(HarnessError, match=r"shares 1 query \(ids 9\)"):  # the same text, case and spacing aside
        plan([Query(9, "editors of text", (6,))])
    with pytest.raises(HarnessError, match=r"shares 1 query \(ids 0\)"):  # the same id and answers, reworded
        plan([Query(0, "sound packages", (1,))])
    # the key: the training queries, the device kind and the seed each make another checkpoint
    splits = {"train": train, "val": val, "test": [Query(5, "x", (6,))]}
    key = plan_training("m", LearnedOverlap(), {"params": {}}, skb, splits, "test").key
    reworded = {**splits, "train": [Query(0, "a package for noise", (1,)), train[1]]}
    assert plan_training("m", LearnedOverlap(), {"params": {}}, skb, reworded, "test").key != key
    assert plan_training("m", LearnedOverlap(), {"params": {}}, skb, splits, "test", device="cuda").key != key
    assert plan_training("m", LearnedOverlap(), {"params": {}}, skb, splits, "test", device="cpu").key == key
    assert plan_training("m", LearnedOverlap(), {"params": {}}, skb, splits, "test", seed=1).key != key
    # the validation split selects the model: it must not hold evaluated queries either
    with pytest.raises(HarnessError, match=r"validation split 'val' shares 1 query \(ids 3\).*--validation-split none"):
        plan([Query(3, "Another query", (8,))])


class Passthrough(harness.Retriever):
    """A zero-shot composite: the ranking of the retriever it uses, unchanged."""

    name = "passthrough"

    class Options(harness.Options):
        inner: str = "inner"

    def uses(self) -> list[str]:
        return [self.options.inner]

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.inner = context.retriever(self.options.inner)

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        return self.inner.search(queries, k)


def test_a_composite_of_a_trained_retriever_records_its_training(tmp_path: Path) -> None:
    inner = {"inner": {"plugin": "learned-overlap", "params": {"epochs": 2}}}
    outcome = run_retriever(Passthrough, {}, tmp_path, also=[LearnedOverlap], presets=inner, dataset="tiny-train", k=3)
    row = outcome.row
    assert row.regime == "trained" and row.training is not None and row.training.split == "train"
    assert (outcome.run_dir / "training-inner.png").is_file()


class Subsetting(LearnedOverlap):
    """LearnedOverlap that says it trains on part of the split (its first half, or a stranger)."""

    name = "subsetting"

    class Options(LearnedOverlap.Options):
        stranger: bool = False

    def fit(self, skb: SKB, train: Sequence[Query], context: Any) -> None:
        part = list(train[: len(train) // 2])
        context.trains_on([*part, Query(99_999, "not in the split", (0,))] if self.options.stranger else part)
        super().fit(skb, part, context)


def test_a_retriever_training_on_part_of_the_split_is_recorded_as_such(tmp_path: Path) -> None:
    outcome = run_retriever(Subsetting, {"epochs": 1}, tmp_path / "a", dataset="tiny-train")
    training = outcome.row.training
    assert (training.queries, training.subset_queries) == (8, 4) and training.subset_digest != training.digest
    with pytest.raises(HarnessError, match=r"trains_on\(\) named queries not in the train split: \[99999\]"):
        run_retriever(Subsetting, {"epochs": 1, "stranger": True}, tmp_path / "b", dataset="tiny-train")
