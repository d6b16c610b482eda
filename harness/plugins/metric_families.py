"""The built-in metric families, vectorized (``builtin_metrics`` registers them).

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

import numpy as np

from harness.metrics import Metric


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
        return np.asarray(self.top(hits).any(axis=1), dtype=np.float64)


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
