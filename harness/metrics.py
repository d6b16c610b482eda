"""The metric interface: a family of per-query values computed from a hit matrix, plus the
parsing of ``name@k`` and the averaging every command shares.

A metric receives a boolean matrix ``hits`` (queries × ranks: is the id at that rank an
answer?) and the number of answers per query, and returns one value per query; the matrix is
built once per run (``harness.run.scoring.hit_matrix``: non-candidates dropped, repeats kept
at their first rank, as STaRK's evaluator does). The built-in families and how they relate to
trec_eval's measures and STaRK's evaluator are in ``harness.plugins.builtin_metrics``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

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


def parse_metrics(specs: Sequence[str] | str, families: Mapping[str, type[Metric]]) -> list[Metric]:
    """Turn ``"hit@1,mrr"`` (or a list) into metric instances, with clear errors."""
    if isinstance(specs, str):
        specs = [s for s in specs.split(",") if s.strip()]
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


def evaluate(metrics: Sequence[Metric], hits: np.ndarray, n_relevant: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query values of every metric."""
    return {m.name: m.per_query(hits, n_relevant) for m in metrics}


def means(per_query: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {name: float(values.mean()) if len(values) else 0.0 for name, values in per_query.items()}
