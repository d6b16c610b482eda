"""The contracts a plugin's tests check: a retriever's (:func:`check_retriever`) and a trained
retriever's resume after a failed training (:func:`check_training_resumes`)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.caches import verify_manifest
from harness.errors import HarnessError
from harness.retriever import Retriever
from harness.testing.runs import UNDER_TEST, run_retriever


def check_retriever(
    retriever: type[Retriever],
    params: dict[str, Any] | None,
    tmp_path: str | os.PathLike[str],
    **options: Any,
) -> list[dict[str, Any]]:
    """Run ``retriever`` with ``params`` twice and check the retriever contract; return the
    rankings (``{"qid", "ids", "scores"}`` per query). The first run starts from an empty
    cache, the second reads what the first cached (fresh outputs both times): both must rank
    alike. Takes the keyword arguments of :func:`run_retriever`."""
    results, outcomes = [], []
    cache = Path(tmp_path) / "cache"
    for attempt in ("first", "second"):
        outcome = run_retriever(retriever, params, Path(tmp_path) / attempt, cache_dir=cache, **options)
        healed = [note for note in outcome.notes if note.startswith("dropped") and f"'{UNDER_TEST}'" in note]
        assert not healed, f"the runner had to clean the rankings: {healed}"
        outcomes.append(outcome)
        results.append(_rankings(outcome.run_dir / "results.jsonl"))
    dataset = next(iter(outcomes)).spec.dataset_component.instance
    split = outcomes[0].spec.split
    k = outcomes[0].spec.k
    candidates = set(dataset.load_skb().candidate_ids.tolist())
    first, second = results
    assert [r["qid"] for r in first] == [q.id for q in dataset.load_queries().split(split)]
    for ranking in first:
        ids, scores = ranking["ids"], ranking["scores"]
        assert len(ids) <= k, f"query {ranking['qid']}: {len(ids)} results for k={k}"
        assert len(set(ids)) == len(ids), f"query {ranking['qid']}: repeated ids {ids}"
        assert set(ids) <= candidates, f"query {ranking['qid']}: non-candidate ids {set(ids) - candidates}"
        assert all(np.isfinite(scores)), f"query {ranking['qid']}: scores {scores}"
        assert all(a >= b for a, b in itertools.pairwise(scores)), f"not sorted: {scores}"
    assert [(r["ids"], r["scores"]) for r in first] == [(r["ids"], r["scores"]) for r in second], (
        "a run from the cache ranked differently from the run that filled it"
    )
    assert outcomes[0].row.config_hash == outcomes[1].row.config_hash, "one configuration, two hashes"
    return first


def checkpoint_entry(outcome: Any, cache_dir: str | os.PathLike[str]) -> Path:
    """The cache entry holding the checkpoint a :func:`run_retriever` outcome trained or loaded."""
    return Path(cache_dir) / "checkpoints" / f"{UNDER_TEST}-{outcome.row.training.checkpoint}"


def check_training_resumes(
    retriever: type[Retriever],
    params: dict[str, Any],
    tmp_path: str | os.PathLike[str],
    *,
    fail_at: int,
    weights: Callable[[Path], dict[str, Any]],
    fail_param: str = "fail_at_epoch",
    **options: Any,
) -> tuple[Any, Any]:
    """Check a trained retriever's resume contract and return (resumed, uninterrupted) outcomes.

    A training is made to fail when epoch ``fail_at`` starts (through the hidden ``fail_param``
    option, which must not enter the checkpoint key or the row); training again must resume
    after the last finished epoch (every epoch once in the curve), leave no work directory
    behind, and end with the checkpoint key, the curve, the weights (``weights(entry)``: name ->
    array-like, compared exactly) and the metrics of a training never interrupted. Takes the
    keyword arguments of :func:`run_retriever`."""
    tmp = Path(tmp_path)
    cache, fresh = tmp / "cache", tmp / "fresh"
    try:
        run_retriever(retriever, {**params, fail_param: fail_at}, tmp / "failed", cache_dir=cache, **options)
    except HarnessError as exc:
        assert "failed to train" in str(exc) and f"epoch {fail_at}" in str(exc), str(exc)
    else:
        raise AssertionError(f"{fail_param}={fail_at} did not stop the training")
    [work] = (cache / "checkpoints").glob("*.work")
    assert any(work.iterdir()), "the failed training left no epoch checkpoint to resume from"
    resumed = run_retriever(retriever, params, tmp / "resumed", cache_dir=cache, **options)
    assert work.name == f"{checkpoint_entry(resumed, cache).name}.work", "the hidden option changed the key"
    assert not work.exists(), "the work directory outlived the finished training"
    assert fail_param not in resumed.row.retriever.params
    uninterrupted = run_retriever(retriever, params, tmp / "uninterrupted", cache_dir=fresh, **options)
    assert uninterrupted.row.training is not None and resumed.row.training is not None
    assert uninterrupted.row.training.checkpoint == resumed.row.training.checkpoint

    def curve(outcome: Any, where: Path) -> list[tuple[Any, Any]]:
        lines = (checkpoint_entry(outcome, where) / "curve.jsonl").read_text(encoding="utf-8").splitlines()
        return [(point.get("epoch"), point.get("loss")) for point in map(json.loads, lines)]

    epochs = [epoch for epoch, _ in curve(resumed, cache) if epoch is not None]
    assert epochs == sorted(set(epochs)), f"epochs trained twice after the resume: {epochs}"
    assert curve(resumed, cache) == curve(uninterrupted, fresh)
    ours, theirs = weights(checkpoint_entry(resumed, cache)), weights(checkpoint_entry(uninterrupted, fresh))
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert np.array_equal(np.asarray(ours[name]), np.asarray(theirs[name])), f"{name} differs after the resume"
    assert resumed.row.metrics == uninterrupted.row.metrics
    return resumed, uninterrupted


def _rankings(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{"qid": r["qid"], "ids": r["ids"], "scores": r["scores"]} for r in rows]


def entry_problem(entry: str | os.PathLike[str]) -> str | None:
    """What is wrong with the cache entry ``entry`` (no manifest, a file missing or changed since
    its manifest was written), in a few words; None when it is intact. What the harness checks
    before it uses an entry it cached."""
    return verify_manifest(entry)
