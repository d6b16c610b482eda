"""The metric interface: a family of per-query values computed from a hit matrix, plus the
parsing of ``name@k`` and the averaging every command shares.

A metric receives a boolean matrix ``hits`` (queries × ranks: is the id at that rank an
answer?) and the number of answers per query, and returns one value per query; the matrix is
built once per run (``harness.run.scoring.hit_matrix``: non-candidates dropped, repeats kept
at their first rank, as STaRK's evaluator does). The built-in families and how they relate to
trec_eval's measures and STaRK's evaluator are in ``harness.plugins.builtin_metrics``.

Graded qrels (``harness evaluate``): trec_eval's nDCG takes the grades as gains
(:func:`graded_ndcg`); every other measure reads a grade > 0 as relevant, i.e. the hit matrix.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar, NamedTuple

import numpy as np

from harness.errors import HarnessError
from harness.options import did_you_mean

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


#: The metrics a run reports unless told otherwise (STaRK's table plus a few).
DEFAULT_METRICS = ("hit@1", "hit@5", "recall@20", "recall@100", "mrr", "map@100", "ndcg@10")

_SPEC = re.compile(r"^([a-z_][a-z0-9_]*)(?:@(-?\d+))?$")


def split_metrics(text: str | None) -> list[str] | None:
    """``--metrics TEXT`` as names, for every command: None (the option left out) stays None;
    text that names no metric (``''``, ``','``, blanks) is refused, never read as the default."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise HarnessError(
            f"no metrics requested: --metrics {text!r} names none; give NAME[,NAME…] (e.g. hit@1,mrr), "
            "or leave the option out"
        )
    return names


def parse_metrics(specs: Sequence[str] | str, families: Mapping[str, type[Metric]]) -> list[Metric]:
    """Turn ``"hit@1,mrr"`` (or a list) into metric instances, with clear errors."""
    if isinstance(specs, str):
        specs = split_metrics(specs) or []
    metrics: list[Metric] = []
    for spec in specs:
        match = _SPEC.match(spec.strip().lower())
        if not match:
            raise HarnessError(
                f"bad metric {spec!r}: expected NAME or NAME@K with K a positive integer, e.g. recall@20"
            )
        family, k = match.group(1), match.group(2)
        if family not in families:
            hint = did_you_mean(family, families)
            raise HarnessError(f"unknown metric {family!r}{hint}; known: {', '.join(sorted(families))}")
        metrics.append(families[family](None if k is None else int(k)))
    if not metrics:
        raise HarnessError("no metrics requested")
    return metrics


class Grades(NamedTuple):
    """Graded relevance for the rows of a hit matrix: per query, the grade of the document at
    each rank (0 where not judged) and the grades of every judged document."""

    ranked: Sequence[Sequence[float]]
    judged: Sequence[Sequence[float]]


def evaluate(
    metrics: Sequence[Metric], hits: np.ndarray, n_relevant: np.ndarray, grades: Grades | None = None
) -> dict[str, np.ndarray]:
    """Per-query values of every metric. With ``grades``, a metric with trec_eval's nDCG
    definition (:func:`uses_grades`) takes the grades as gains; the others read ``hits``."""
    return {
        m.name: graded_ndcg(grades.ranked, grades.judged, m.k)
        if grades is not None and uses_grades(m)
        else m.per_query(hits, n_relevant)
        for m in metrics
    }


def uses_grades(metric: Metric) -> bool:
    """Whether ``metric`` has trec_eval's nDCG definition (``ndcg``, ``ndcg_cut``), whose gains
    are the qrels' grades; every other trec_eval measure reads a grade > 0 as relevant."""
    return metric.trec_eval == "ndcg" or metric.trec_eval_cut == "ndcg_cut"


def graded_ndcg(
    ranked: Sequence[Sequence[float]], judged: Sequence[Sequence[float]], k: int | None = None
) -> np.ndarray:
    """trec_eval's nDCG with graded gains, one value per query: ``ndcg_cut_k``, or ``ndcg``
    with ``k`` None (the whole ranking).

    ``ranked``: per query, the grade of the document at each rank (0 where not judged);
    ``judged``: per query, the grade of every judged document. As trec_eval computes it: the
    gain is the grade, counted only when positive (trec_eval reads a negative grade as "in the
    pool, unjudged"); rank r is discounted by log2(r + 1); the ideal DCG ranks the positive
    grades in descending order, cut at k. Without positive grades the value is 0. With grades
    0 and 1 it is the binary ``ndcg@k`` of the hit matrix.
    """
    if len(ranked) != len(judged):
        raise ValueError("ranked and judged differ in length")
    gains = _padded(ranked, k)
    ideal = -np.sort(-_padded(judged, None), axis=1)  # descending: the best possible ranking
    if k is not None:
        ideal = ideal[:, :k]
    dcg = (gains * _discounts(gains.shape[1])).sum(axis=1)
    ideal_dcg = (ideal * _discounts(ideal.shape[1])).sum(axis=1)
    out = np.zeros(len(ranked), dtype=np.float64)
    np.divide(dcg, ideal_dcg, out=out, where=ideal_dcg > 0)
    return out


def _padded(rows: Sequence[Sequence[float]], k: int | None) -> np.ndarray:
    """Rows (cut at ``k``) as one float matrix of their positive values, padded with 0."""
    width = max((len(row) for row in rows), default=0)
    width = width if k is None else min(width, k)
    out = np.zeros((len(rows), width), dtype=np.float64)
    for i, row in enumerate(rows):
        values = np.asarray(row[:width], dtype=np.float64)
        out[i, : len(values)] = np.maximum(values, 0.0)  # only positive grades gain
    return out


def _discounts(length: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, length + 2, dtype=np.float64))


def means(per_query: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {name: float(values.mean()) if len(values) else 0.0 for name, values in per_query.items()}
