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
    rankings: Sequence[np.ndarray],
    answers: Sequence[Sequence[int]],
    is_candidate: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Build ``hits`` (queries × longest ranking) and answer counts, vectorized.

    ``is_candidate`` is a boolean array over node ids; ids outside it are dropped from
    rankings and answers alike (STaRK's rule). Without it every id is a candidate.
    """
    n = len(rankings)
    if n != len(answers):
        raise ValueError("rankings and answers differ in length")
    lengths = np.fromiter((len(r) for r in rankings), dtype=np.int64, count=n)
    ranked = np.concatenate([np.asarray(r, dtype=np.int64) for r in rankings]) if n else np.empty(0, np.int64)
    row_of_rank = np.repeat(np.arange(n), lengths)
    answer_lengths = np.fromiter((len(a) for a in answers), dtype=np.int64, count=n)
    gold = np.concatenate([np.asarray(a, dtype=np.int64) for a in answers]) if n else np.empty(0, np.int64)
    row_of_gold = np.repeat(np.arange(n), answer_lengths)

    keep = ranked >= 0
    gold_keep = gold >= 0
    if is_candidate is not None:
        keep &= ranked < len(is_candidate)
        keep[keep] = is_candidate[ranked[keep]]
        gold_keep &= gold < len(is_candidate)
        gold_keep[gold_keep] = is_candidate[gold[gold_keep]]
    ranked, row_of_rank = ranked[keep], row_of_rank[keep]
    gold, row_of_gold = gold[gold_keep], row_of_gold[gold_keep]

    # Encode (query, node) pairs as one integer so set operations run in numpy.
    width = int(max(ranked.max(initial=0), gold.max(initial=0))) + 1
    ranked_keys = row_of_rank * width + ranked
    gold_keys = np.unique(row_of_gold * width + gold)
    n_relevant = np.bincount(gold_keys // width, minlength=n).astype(np.int64)

    # A repeated id keeps its first position only.
    _, first = np.unique(ranked_keys, return_index=True)
    first_mask = np.zeros(len(ranked_keys), dtype=bool)
    first_mask[first] = True
    ranked_keys, row_of_rank = ranked_keys[first_mask], row_of_rank[first_mask]

    counts = np.bincount(row_of_rank, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if n else np.empty(0, np.int64)
    position = np.arange(len(ranked_keys)) - np.repeat(starts, counts)
    hits = np.zeros((n, int(counts.max(initial=0))), dtype=bool)
    hits[row_of_rank, position] = np.isin(ranked_keys, gold_keys)
    return hits, n_relevant


def evaluate(metrics: Sequence[Metric], hits: np.ndarray, n_relevant: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query values of every metric."""
    return {m.name: m.per_query(hits, n_relevant) for m in metrics}


def means(per_query: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {name: float(values.mean()) if len(values) else 0.0 for name, values in per_query.items()}
