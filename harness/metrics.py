"""Ranking metrics, vectorized, computed from the rankings alone.

Names follow trec_eval: a metric that shares its name with a trec_eval measure has trec_eval's
definition, and the suite checks every run file against pytrec_eval and ir_measures:

===============  ==================  ========================================================
harness          trec_eval           definition (binary relevance, R = number of answers)
===============  ==================  ========================================================
``hit@k``        ``success_k``       1 if an answer is in the top k
``recall@k``     ``recall_k``        |top-k ∩ answers| / R
``precision@k``  ``P_k``             |top-k ∩ answers| / k
``mrr``          ``recip_rank``      1 / rank of the first answer
``map@k``        ``map_cut_k``       sum of the precision at each answer's rank in the top k, / R
``ndcg@k``       ``ndcg_cut_k``      DCG@k / ideal DCG over min(R, k) positions, log2 discounts
``rprecision``   ``Rprec``           precision at rank R
``stark_map@k``  —                   STaRK's ``map@k`` (torchmetrics): the same sum / the number
                                     of answers *found* in the top k (not R)
===============  ==================  ========================================================

``map``, ``ndcg`` and ``mrr`` without a cut-off use the whole returned ranking.

STaRK's official evaluator (``stark_qa/evaluator.py``) computes the same numbers with
torchmetrics, with these rules, which the harness shares:

* Answer ids outside the SKB's candidate set are dropped; duplicate answers count once.
  Returned ids outside the candidate set are dropped too (the official evaluator never
  sees them), and a repeated id keeps its first position.
* Queries with no candidate answer score 0 on every metric and count in the mean (trec_eval
  leaves such queries out: they are not in the qrels).

Deliberate differences from the official evaluator, each checked by the differential tests:

* **Ranking.** The official evaluator ranks *every* candidate, giving those a retriever did
  not return a score below the lowest returned one. The harness scores the returned ranking:
  an answer that was not returned is not retrieved. ``@k`` metrics with k no deeper than the
  ranking are identical; ``mrr``, ``rprecision`` and ``ndcg`` without a cut-off can only be
  lower here (the official evaluator still finds an unreturned answer somewhere below), and
  ``stark_map`` can differ either way.
* **Ties.** A ranking's order is the retriever's order; equal scores keep it. The official
  evaluator orders ties by ``torch`` sorting (unspecified) and averages nDCG gains over tied
  scores. Run files are written with strictly decreasing scores, so trec_eval reads the same
  order.
* **Scores ≤ 0.** Every returned entry counts, whatever its score. torchmetrics ≥ 1.7.4
  (stark-qa 1.1.0 pins no version) treats answers scored ≤ 0 as not found in recall,
  precision, MRR and MAP, but not in hit rate, nDCG or R-precision; with earlier versions,
  and whenever every returned score is positive, the definitions agree.

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
METRICS_VERSION = "2"  # 2: map@k is trec_eval's (÷ R); STaRK's is stark_map@k


class Metric(ABC):
    """One metric family ("recall"), instantiated with a cut-off ("recall@20").

    Subclass, set ``family`` (and ``takes_k = False`` for metrics without a cut-off), and
    implement ``per_query``. Register the class with the ``register_metrics`` hook.
    """

    family: ClassVar[str]
    takes_k: ClassVar[bool] = True
    requires_k: ClassVar[bool] = True
    #: The trec_eval measures with the same definition, if any: without a cut-off ("map")
    #: and with one ("map_cut" → ``map_cut_100``).
    trec_eval: ClassVar[str | None] = None
    trec_eval_cut: ClassVar[str | None] = None

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

    @property
    def trec_eval_measure(self) -> str | None:
        """trec_eval's name for this metric ("P_5", "recip_rank"), or None if it has none."""
        if self.k is None:
            return self.trec_eval
        return f"{self.trec_eval_cut}_{self.k}" if self.trec_eval_cut else None

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
    trec_eval_cut = "success"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        return self.top(hits).any(axis=1).astype(np.float64)


class Recall(Metric):
    family = "recall"
    trec_eval_cut = "recall"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        return _safe_div(self.top(hits).sum(axis=1), n_relevant)


class Precision(Metric):
    family = "precision"
    trec_eval_cut = "P"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        assert self.k is not None
        values = self.top(hits).sum(axis=1) / self.k
        return _no_answers_to_zero(values, n_relevant)


class ReciprocalRank(Metric):
    family = "mrr"
    requires_k = False
    trec_eval = "recip_rank"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        top = self.top(hits)
        if top.shape[1] == 0:  # every ranking empty: nothing found
            return np.zeros(len(top), dtype=np.float64)
        found = top.any(axis=1)
        first = top.argmax(axis=1)
        return np.where(found, 1.0 / (first + 1.0), 0.0)


def _precision_at_hits(top: np.ndarray) -> np.ndarray:
    """Sum, per query, of the precision at the rank of every answer in ``top``."""
    top = top.astype(np.float64)
    ranks = np.arange(1, top.shape[1] + 1, dtype=np.float64)
    return (np.cumsum(top, axis=1) / ranks * top).sum(axis=1)


class AveragePrecision(Metric):
    """trec_eval's ``map`` / ``map_cut_k``: divided by the number of answers."""

    family = "map"
    requires_k = False
    trec_eval = "map"
    trec_eval_cut = "map_cut"

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        return _safe_div(_precision_at_hits(self.top(hits)), n_relevant)


class StarkAveragePrecision(Metric):
    """STaRK's ``map@k`` (torchmetrics' ``retrieval_average_precision``): divided by the
    number of answers found in the top k, so a query with one answer found at rank 1 and nine
    never found scores 1.0."""

    family = "stark_map"
    requires_k = False

    def per_query(self, hits: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
        top = self.top(hits)
        return _safe_div(_precision_at_hits(top), top.sum(axis=1))


class NDCG(Metric):
    family = "ndcg"
    requires_k = False
    trec_eval = "ndcg"
    trec_eval_cut = "ndcg_cut"

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
    trec_eval = "Rprec"

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
    StarkAveragePrecision,
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
