"""The one scoring path: rankings and answers → the hit matrix every metric reads. ``harness
run``, ``harness evaluate`` and ``harness leaderboard validate`` all score through it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def hit_matrix(
    rankings: Sequence[np.ndarray | Sequence[int]],
    answers: Sequence[Sequence[int]],
    is_candidate: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Build ``hits`` (queries × longest ranking) and answer counts, vectorized.

    ``is_candidate`` is a boolean array over node ids; ids outside it are dropped from
    rankings and answers alike (STaRK's rule). Without it every id is a candidate.
    A repeated id in a ranking keeps its first position only.
    """
    n = len(rankings)
    if n != len(answers):
        raise ValueError("rankings and answers differ in length")
    ranked = _padded(rankings)
    valid = ranked >= 0
    if is_candidate is not None:
        inside = valid & (ranked < len(is_candidate))
        valid = inside & is_candidate[np.where(inside, ranked, 0)]
    _drop_repeats(ranked, valid)
    if not valid.all():
        ranked = _compact(ranked, valid)
        valid = ranked >= 0

    gold_rows = np.repeat(np.arange(n), [len(a) for a in answers])
    gold = np.fromiter((g for a in answers for g in a), dtype=np.int64, count=len(gold_rows))
    keep = gold >= 0
    if is_candidate is not None:
        keep &= gold < len(is_candidate)
        keep[keep] = is_candidate[gold[keep]]
    gold, gold_rows = gold[keep], gold_rows[keep]

    # Encode (query, node) pairs as one integer so that membership is one sorted search.
    width = int(max(ranked.max(initial=0), gold.max(initial=0))) + 1
    gold_keys = np.unique(gold_rows * width + gold)  # duplicate answers count once
    n_relevant = np.bincount(gold_keys // width, minlength=n).astype(np.int64)
    keys = np.arange(n, dtype=np.int64)[:, None] * width + ranked
    position = np.searchsorted(gold_keys, keys)
    if len(gold_keys):
        found = gold_keys[np.minimum(position, len(gold_keys) - 1)] == keys
    else:
        found = np.zeros_like(valid)
    return found & valid, n_relevant


def _padded(rankings: Sequence[np.ndarray | Sequence[int]]) -> np.ndarray:
    """Rankings as one int64 matrix, padded with -1."""
    lengths = [len(r) for r in rankings]
    width = max(lengths, default=0)
    if lengths and min(lengths) == width:
        return np.asarray(rankings, dtype=np.int64).reshape(len(rankings), width)
    out = np.full((len(rankings), width), -1, dtype=np.int64)
    for row, ranking in enumerate(rankings):
        out[row, : len(ranking)] = ranking
    return out


def _compact(ranked: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Move each row's valid ids to the front, in order; pad the rest with -1."""
    order = np.argsort(~valid, axis=1, kind="stable")
    out = np.take_along_axis(np.where(valid, ranked, -1), order, axis=1)
    width = int(valid.sum(axis=1).max(initial=0))
    return out[:, :width]


def _drop_repeats(ranked: np.ndarray, valid: np.ndarray) -> None:
    """Mark every occurrence of an id after its first as invalid (only rows with repeats
    are visited; they are rare)."""
    ordered = np.sort(ranked, axis=1)
    repeated = ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1)
    for row in np.flatnonzero(repeated):
        _, first = np.unique(ranked[row], return_index=True)
        later = np.ones(ranked.shape[1], dtype=bool)
        later[first] = False
        valid[row, later] = False
