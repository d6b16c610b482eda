"""Statistics of a query set, as STaRK reports them (§2.5, Table 5, Figure 4).

Words are whitespace-separated tokens, case kept: with that reading the Shannon entropy of
STaRK's three synthesized query sets is the paper's (10.39 / 10.25 / 9.63 bits). The
type-token ratio depends on how much text it is computed over; it is given for the whole set
and per split (the paper does not say which text its 0.179 / 0.180 / 0.143 come from).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.queries import HUMAN_SPLIT, Query, QuerySet

__all__ = ["holm", "query_set_statistics", "shannon_entropy", "type_token_ratio", "write_histograms"]


def _words(queries: Sequence[Query]) -> list[str]:
    return [word for q in queries for word in q.text.split()]


def shannon_entropy(words: Sequence[str]) -> float:
    """Entropy in bits of the word distribution: −Σ p(w) log₂ p(w)."""
    counts, total = Counter(words), len(words)
    return -sum(c / total * math.log2(c / total) for c in counts.values()) if total else 0.0


def type_token_ratio(words: Sequence[str]) -> float:
    """Distinct words over words."""
    return len(set(words)) / len(words) if words else 0.0


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given: the i-th smallest of m p-values
    becomes max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎). An adjusted value below α is exactly a
    rejection by Holm's step-down procedure at family-wise error rate α (the values
    statsmodels' ``multipletests(method="holm")`` gives)."""
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    # a stable sort: tied p-values get the same adjusted value whatever their order
    for rank, index in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        # the running maximum keeps the step-down monotone: a larger p never gets a smaller adjustment
        running = max(running, min(1.0, (m - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def _distribution(values: np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {}
    q = np.percentile(values, [5, 25, 50, 75, 95])
    return {
        "mean": float(values.mean()),
        "min": float(values.min()),
        "p5": float(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "p95": float(q[4]),
        "max": float(values.max()),
    }


def _summary(queries: Sequence[Query]) -> dict[str, Any]:
    words = _words(queries)
    lengths = np.array([len(q.text.split()) for q in queries])
    answers = np.array([len(set(q.answer_ids)) for q in queries])
    return {
        "queries": len(queries),
        "words": len(words),
        "shannon_entropy": shannon_entropy(words),
        "type_token_ratio": type_token_ratio(words),
        "query_length_words": _distribution(lengths),
        "answers_per_query": _distribution(answers),
        "share_with_more_than_30_answers": float((answers > 30).mean()) if len(answers) else 0.0,
    }


def _synthesized(queries: QuerySet) -> list[Query]:
    """Every query of every split but the human-generated one, each once."""
    names = [n for n in queries.split_names if n != HUMAN_SPLIT]
    return list({q.id: q for name in names for q in queries.split(name)}.values())


def query_set_statistics(queries: QuerySet) -> dict[str, Any]:
    """The statistics of the whole set ("all": every split but the human-generated one, each
    query once, as the paper counts) and of each split."""
    return {
        "all": _summary(_synthesized(queries)),
        "splits": {name: _summary(queries.split(name)) for name in queries.split_names},
    }


def write_histograms(queries: QuerySet, path: Path, title: str) -> Path | None:
    """A PNG with the query-length and answers-per-query histograms; None without matplotlib."""
    try:  # the `leaderboard` extra's, optional: no plot without it
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # after choosing the backend that needs no display
    except ImportError:
        return None
    everything = _synthesized(queries)
    lengths = [len(q.text.split()) for q in everything]
    answers = [len(set(q.answer_ids)) for q in everything]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    left.hist(lengths, bins=range(0, max(lengths, default=1) + 2), color="#4c72b0")
    left.set(xlabel="query length (words)", ylabel="queries")
    right.hist(np.minimum(answers, 50), bins=range(1, 52), color="#dd8452")
    right.set(xlabel="answers per query (50 = 50 or more)", ylabel="queries")
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
