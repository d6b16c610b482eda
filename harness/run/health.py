"""Component health: whether a system's own idea ran, summed into every row.

A retriever states, through :meth:`Retriever.health`, the per-query counters that show its
distinguishing component at work (a structured query executed, a verdict other than "no", a
query augmented) and, through :meth:`Retriever.health_checks`, which of them must not stay (near)
zero. A :class:`harness.Reranker` also records its first stage's ids, so that a reranking that
lowers its own first stage's MRR (significantly, by a paired test) is said too. The runner
sums them into ``row.health``; ``harness leaderboard validate`` recomputes them from
``per_query.jsonl`` with this module, so a row can neither hide a flag nor claim counters its
details do not show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.retriever import FIRST_STAGE, Reranker, Retriever
from harness.run.record import Health, HealthFlag
from harness.run.scoring import hit_matrix
from harness.training import TrainingInfo


def per_query(retriever: type[Retriever], details: Mapping[str, Any] | None) -> dict[str, float]:
    """One query's counters, checked: names to finite numbers."""
    try:
        counters = retriever.health(dict(details) if details is not None else None)
    except Exception as exc:  # a plugin's bug: one clear error, not a traceback after the whole search
        raise HarnessError(f"retriever {retriever.name!r}: health() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(counters, dict):
        raise HarnessError(f"retriever {retriever.name!r}: health() must return a dict, got {type(counters).__name__}")
    for key, value in counters.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int | float):
            raise HarnessError(
                f"retriever {retriever.name!r}: health() counter {key!r} must be a number, got {value!r}"
            )
        if not np.isfinite(value):
            raise HarnessError(f"retriever {retriever.name!r}: health() counter {key!r} is not finite ({value})")
    return counters


def summarize(
    retriever: type[Retriever],
    params: dict[str, Any],
    details: Sequence[Mapping[str, Any] | None],
    rankings: Sequence[Sequence[int] | np.ndarray],
    answers: Sequence[Sequence[int]],
    is_candidate: np.ndarray | None,
    training: TrainingInfo | None = None,
) -> Health:
    """The row's health from each query's details (in the order of ``rankings`` and ``answers``)
    and, for a trained row, from what its training kept."""
    counters: dict[str, float] = {}
    for d in details:
        for key, value in per_query(retriever, d).items():
            counters[key] = counters.get(key, 0) + value
    counters = {key: counters[key] for key in sorted(counters)}
    flags: list[HealthFlag] = []
    try:
        checks = retriever.health_checks(params)
    except Exception as exc:
        raise HarnessError(
            f"retriever {retriever.name!r}: health_checks() failed: {type(exc).__name__}: {exc}"
        ) from exc
    for check in checks:
        count = counters.get(check.counter, 0)
        denominator = counters.get(check.per, 0) if check.per else len(details)
        of = check.per or "queries"
        if check.per and denominator == 0:
            # nothing was there to count: the part whose share is checked never ran either
            flags.append(
                HealthFlag(component=check.what, reason=f"no {of} recorded in the details of {len(details)} queries")
            )
        elif count < check.at_least * denominator:
            flags.append(
                HealthFlag(
                    component=check.what,
                    reason=f"{_number(count)} of {_number(denominator)} {of} "
                    f"({check.counter}; at least {check.at_least:.0%} expected)",
                )
            )
    if training is not None and training.kept_epoch == 0:
        flags.append(
            HealthFlag(
                component="training",
                reason="no epoch beat the untrained model on the validation split, so the untrained model was kept: "
                "the row measures it, not what training learned",
            )
        )
    first_stage = _first_stage(details, rankings, answers, is_candidate)
    if issubclass(retriever, Reranker):
        missing = sum(d is None or FIRST_STAGE not in d for d in details)
        if missing:  # a reranker that does not say what it reranked cannot show that it helped
            flags.append(
                HealthFlag(
                    component="reranking",
                    reason=f"{UNRECORDED} {missing} of {len(details)} queries: whether reranking helped cannot be said",
                )
            )
    if first_stage is not None and first_stage["mrr"] > first_stage["reranked_mrr"] and first_stage["p"] < ALPHA:
        flags.append(
            HealthFlag(
                component="reranking",
                reason=f"reranking lowered MRR from {100 * first_stage['mrr']:.2f} to "
                f"{100 * first_stage['reranked_mrr']:.2f} on the same {int(first_stage['queries'])} queries "
                f"(paired randomization p {first_stage['p']:.3f}): below its own first stage",
            )
        )
    return Health(counters=counters, queries=len(details), first_stage=first_stage, flags=flags)


def _number(value: float) -> str:
    return f"{value:g}"


def _first_stage(
    details: Sequence[Mapping[str, Any] | None],
    rankings: Sequence[Sequence[int] | np.ndarray],
    answers: Sequence[Sequence[int]],
    is_candidate: np.ndarray | None,
) -> dict[str, float] | None:
    """A reranker's first stage against its reranking, both cut at the reranked depth, over the
    queries whose details name the first stage's ids."""
    rows = [i for i, d in enumerate(details) if d is not None and FIRST_STAGE in d]
    if not rows:
        return None
    try:
        listed = [np.asarray(details[i][FIRST_STAGE], dtype=np.int64).reshape(-1) for i in rows]  # type: ignore[index]
    except (TypeError, ValueError) as exc:
        raise HarnessError(f"details[{FIRST_STAGE!r}] must list the first stage's node ids ({exc})") from None
    # both cut at the depth both reach: a reranking shorter than its candidates (k below them)
    # is compared with the first stage's same top, not with candidates it could not return
    depth = [min(len(f), len(rankings[i])) for i, f in zip(rows, listed, strict=True)]
    first = [f[:d] for f, d in zip(listed, depth, strict=True)]
    reranked = [np.asarray(rankings[i], dtype=np.int64)[:d] for i, d in zip(rows, depth, strict=True)]
    gold = [answers[i] for i in rows]
    before = _reciprocal(_ranks(first, gold, is_candidate))
    after = _reciprocal(_ranks(reranked, gold, is_candidate))
    return {
        "queries": float(len(rows)),
        "hit@1": float((before == 1).mean()),
        "mrr": float(before.mean()),
        "reranked_hit@1": float((after == 1).mean()),
        "reranked_mrr": float(after.mean()),
        "p": _paired_p(after - before),
    }


#: the reason of a reranker's flag when its details do not name its first stage's ids
UNRECORDED = "its first stage's ids are not in the details of"
#: a reranking is flagged below its first stage only when the paired test says so (not noise)
ALPHA = 0.05
_RESAMPLES = 10_000


def _reciprocal(ranks: np.ndarray) -> np.ndarray:
    return np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)


def _paired_p(differences: np.ndarray) -> float:
    """Two-sided paired randomization (sign-flip) test of the mean difference, seeded: the same
    p for the runner and for validation."""
    if not len(differences) or not np.any(differences):
        return 1.0
    signs = np.random.default_rng(0).choice((-1.0, 1.0), size=(_RESAMPLES, len(differences)))
    observed = abs(differences.mean())
    extreme = np.abs((signs * differences).mean(axis=1)) >= observed - 1e-12
    return float((extreme.sum() + 1) / (_RESAMPLES + 1))


def _ranks(
    rankings: Sequence[np.ndarray], answers: Sequence[Sequence[int]], is_candidate: np.ndarray | None
) -> np.ndarray:
    """The rank (from 1) of each query's first answer, 0 when none is ranked."""
    hits, _ = hit_matrix(rankings, answers, is_candidate)
    found = hits.any(axis=1)
    return np.where(found, hits.argmax(axis=1) + 1, 0)


def compare(recorded: Health | None, recomputed: Health) -> list[str]:
    """What a row's ``health`` says that its details do not (for ``leaderboard validate``)."""
    if recorded is None:
        # a row from before health: a reranker's first stage was not recorded then, which shows
        # nothing about its run; any other flag is a component that never ran
        shown = [f for f in recomputed.flags if not f.reason.startswith(UNRECORDED)]
        if shown:
            reasons = "; ".join(f"{f.component}: {f.reason}" for f in shown)
            return [f"the row records no health, and its per-query details show a component that never ran ({reasons})"]
        return []
    problems = []
    if recorded.queries != recomputed.queries:
        problems.append(f"health.queries: the row says {recorded.queries}, the details give {recomputed.queries}")
    for key in sorted(set(recorded.counters) | set(recomputed.counters)):
        a, b = recorded.counters.get(key), recomputed.counters.get(key)
        if a is None or b is None or abs(a - b) > 1e-9 * max(1.0, abs(b)):
            problems.append(f"health counter {key!r}: the row says {a}, the per-query details give {b}")
    if (recorded.first_stage is None) != (recomputed.first_stage is None) or (
        recorded.first_stage
        and recomputed.first_stage
        and any(abs(recorded.first_stage.get(k, np.nan) - v) > 1e-9 for k, v in recomputed.first_stage.items())
    ):
        problems.append("health.first_stage does not match the first stage's ids in the per-query details")
    if [f.model_dump() for f in recorded.flags] != [f.model_dump() for f in recomputed.flags]:
        said = "; ".join(f.reason for f in recorded.flags) or "none"
        given = "; ".join(f.reason for f in recomputed.flags) or "none"
        problems.append(f"health flags: the row says {said}; the details give {given}")
    return problems
