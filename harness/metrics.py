"""Ranking metrics, vectorized, with the definitions of STaRK's official evaluator.

STaRK's ``stark_qa/evaluator.py`` scores every candidate with torchmetrics' retrieval
functions. This module computes the same numbers from the returned rankings alone:

* Answer ids outside the SKB's candidate set are dropped; duplicate answers count once.
  Returned ids outside the candidate set are dropped too (the official evaluator never
  sees them), and a repeated id keeps its first position.
* ``recall@k`` = |top-k ∩ answers| / |answers|; ``precision@k`` = |top-k ∩ answers| / k;
  ``hit@k`` = 1 if any answer is in the top k; ``mrr`` = 1 / rank of the first answer;
  ``map@k`` = mean, over the answers found in the top k, of the precision at their rank
  (torchmetrics divides by the answers *found*, not by |answers|); ``ndcg@k`` with binary
  gains and ideal DCG over min(|answers|, k) positions; ``rprecision`` = precision at
  R = |answers|. Queries with no candidate answer score 0 on every metric.
* One documented difference: the official evaluator ranks *all* candidates, giving
  those a retriever did not return the lowest score. An answer outside the returned list
  still earns a little MRR/MAP/R-precision there; here it counts as not retrieved. With
  rankings at least as long as every cut-off, ``@k`` metrics are identical.

A metric receives a boolean matrix ``hits`` (queries × ranks: is the id at that rank an
answer?) and the number of answers per query, and returns one value per query.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from harness.errors import HarnessError

#: Bump when a definition changes; leaderboard rows record it.
METRICS_VERSION = "1"


class Metric(ABC):
    """One metric family ("recall"), instantiated with a cut-off ("recall@20").

    Subclass, set ``family`` (and ``takes_k = False`` for metrics without a cut-off), and
    implement ``per_query``. Register the class with the ``register_metrics`` hook.
    """

    family: ClassVar[str]
    takes_k: ClassVar[bool] = True
    requires_k: ClassVar[bool] = True

    def __init__(self, k: int | None = None) -> None:
        if k is not None and k <= 0:
            raise HarnessError(f"{self.family}@{k}: the cut-off must be a positive integer")
        if k is None and self.requires_k:
            raise HarnessError(f"metric {self.family!r} needs a cut-off, e.g. {self.family}@10")
        if k is not None and not self.takes_k:
            raise HarnessError(f"metric {self.family!r} takes no cut-off")
        self.k = k

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"

    def top(self, hits: np.ndarray) -> np.ndarray:
        """The first ``k`` ranks of ``hits`` (all of them without a cut-off)."""
        return hits if self.k is None else hits[:, : self.k]

    @abstractmethod
    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        """One float per query from ``hits`` (bool, queries × ranks) and answer counts."""


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(len(num), dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _no_answers_to_zero(values: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    values[n_relevant == 0] = 0.0
    return values


class HitRate(Metric):
    family = "hit"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        return self.top(hits).any(axis=1).astype(np.float64)


class Recall(Metric):
    family = "recall"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        return _safe_div(self.top(hits).sum(axis=1), n_relevant)


class Precision(Metric):
    family = "precision"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        assert self.k is not None
        values = self.top(hits).sum(axis=1) / self.k
        return _no_answers_to_zero(values, n_relevant)


class ReciprocalRank(Metric):
    family = "mrr"
    requires_k = False

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        top = self.top(hits)
        found = top.any(axis=1)
        first = top.argmax(axis=1)
        return np.where(found, 1.0 / (first + 1.0), 0.0)


class AveragePrecision(Metric):
    family = "map"
    requires_k = False

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        top = self.top(hits).astype(np.float64)
        ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
        precision_at_hit = np.cumsum(top, axis=1) / ranks * top
        return _safe_div(precision_at_hit.sum(axis=1), top.sum(axis=1))


class NDCG(Metric):
    family = "ndcg"
    requires_k = False

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        top = self.top(hits)
        dcg = (top * _discounts(top.shape[1])).sum(axis=1)
        # Without a cut-off the official evaluator ranks every candidate, so the ideal
        # list holds every answer.
        ideal_len = n_relevant if self.k is None else np.minimum(n_relevant, self.k)
        ideal = np.concatenate([[0.0], np.cumsum(_discounts(int(ideal_len.max(initial=0))))])
        return _safe_div(dcg, ideal[ideal_len])


def _discounts(length: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, length + 2, dtype=np.float64))


class RPrecision(Metric):
    family = "rprecision"
    takes_k = False
    requires_k = False

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        ranks = np.arange(hits.shape[1])
        within_r = ranks[None, :] < n_relevant[:, None]
        return _safe_div((hits & within_r).sum(axis=1), n_relevant)


BUILTIN_METRICS: tuple[type[Metric], ...] = (
    HitRate,
    Recall,
    Precision,
    ReciprocalRank,
    AveragePrecision,
    NDCG,
    RPrecision,
)

#: The metrics a run reports unless told otherwise (STaRK's table plus a few).
DEFAULT_METRICS = ("hit@1", "hit@5", "recall@20", "recall@100", "mrr", "map@100", "ndcg@10")

_SPEC = re.compile(r"^([a-z_][a-z0-9_]*)(?:@(-?\d+))?$")


def parse_metrics(specs: Sequence[str] | str, families: Mapping[str, type[Metric]]) -> list[Metric]:
    """Turn ``"hit@1,mrr"`` (or a list) into metric instances, with clear errors."""
    if isinstance(specs, str):
        specs = [s for s in specs.split(",") if s.strip()]
    metrics: list[Metric] = []
    for spec in specs:
        match = _SPEC.match(spec.strip().lower())
        if not match:
            raise HarnessError(f"bad metric {spec!r}: expected NAME or NAME@K, e.g. recall@20")
        family, k = match.group(1), match.group(2)
        if family not in families:
            raise HarnessError(f"unknown metric {family!r}; known: {', '.join(sorted(families))}")
        metrics.append(families[family](None if k is None else int(k)))
    if not metrics:
        raise HarnessError("no metrics requested")
    return metrics


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


def evaluate(metrics: Sequence[Metric], hits: np.ndarray, n_relevant: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query values of every metric."""
    return {m.name: m.per_query(hits, n_relevant) for m in metrics}


def means(per_query: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {name: float(values.mean()) if len(values) else 0.0 for name, values in per_query.items()}
