"""TREC run and qrels files, as trec_eval and ranx read them.

Run lines: ``qid Q0 docid rank score tag``. Qrels lines: ``qid 0 docid relevance``; either
file may be gzip-compressed (``.gz``). Like trec_eval, a run is ordered by score (descending),
ties by docid (descending), unless the rank column is asked for. Relevance > 0 counts as relevant.

trec_eval ignores the rank column and keeps scores as C ``float`` (32 bits), so a run file
whose scores tie — or differ only beyond float32 precision, or were rounded into ties — is read
in another order than it was written. The harness writes scores that are strictly decreasing
as float32 values: each score rounded to float32 (printed exactly), and one that is not below
the previous one lowered to the next float32 below it. The order is then the ranking's under
every reader, and no score moves by more than a few float32 units in the last place.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, TextIO

import numpy as np

from harness.errors import HarnessError


def strictly_decreasing(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """``scores`` (non-increasing) as float32, every tie lowered to the next float32 below the
    score before it (one float32 step per tied entry), so that sorting by score alone — in
    float32, as trec_eval 9 and pytrec_eval do, or in double — gives back the same order."""
    out = np.asarray(scores, dtype=np.float64).astype(np.float32)
    if len(out) > 1 and not np.all(out[1:] < out[:-1]):
        lowest = np.float32(-np.inf)
        for i in range(1, len(out)):
            if out[i] >= out[i - 1]:
                out[i] = np.nextafter(out[i - 1], lowest)
    if not np.all(np.isfinite(out)):
        raise HarnessError("scores outside the range of 32-bit floats cannot be written to a TREC run")
    return out


def write_run(handle: TextIO, qid: str, docids: Iterable[str], scores: Iterable[float], tag: str) -> None:
    """One query's ranking, best first, with strictly decreasing scores (see the module doc)."""
    docids = list(docids)
    values = strictly_decreasing(list(scores))
    if len(docids) != len(values):
        raise ValueError(f"query {qid}: {len(docids)} documents but {len(values)} scores")
    # .tolist() gives each float32 as the double of the same value: printed exactly, it reads
    # back to the same float32 whether a reader parses to float or to double
    for rank, (docid, score) in enumerate(zip(docids, values.tolist(), strict=True), start=1):
        handle.write(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")


def write_qrels(handle: TextIO, judgements: Iterable[tuple[str, Iterable[str], Iterable[str]]]) -> None:
    """Binary qrels from ``(qid, relevant, judged not relevant)``: ``qid 0 docid 1`` or ``0``.

    A query with no relevant document still needs a line (relevance 0), or ``trec_eval -c``
    leaves it out of the mean that the harness counts it in (as zero)."""
    for qid, relevant, other in judgements:
        for docid in relevant:
            handle.write(f"{qid} 0 {docid} 1\n")
        for docid in other:
            handle.write(f"{qid} 0 {docid} 0\n")


def read_run(path: str | Path, order: Literal["score", "rank", "checked"] = "score") -> dict[str, list[str]]:
    """Query id → document ids, best first.

    ``order="score"`` sorts like trec_eval (score as a float32 descending, ties by docid
    descending);
    ``"rank"`` by the rank column (the order a run was written in); ``"checked"`` sorts by
    score and refuses a file in which that order differs from the rank column's (ties, or
    scores that do not follow the ranks), because other tools would score another ranking.
    A document listed twice for one query is an error, as in trec_eval.
    """
    entries: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for number, parts in _lines(path):
        if len(parts) != 6:
            raise HarnessError(
                f"{path}:{number}: a run line has 6 columns (qid Q0 docid rank score tag), got {len(parts)}"
            )
        values = []
        for column, what in ((3, "rank"), (4, "score")):
            try:
                values.append(float(parts[column]))
            except ValueError:
                raise HarnessError(f"{path}:{number}: {what} {parts[column]!r} is not a number") from None
        if (parts[0], parts[2]) in seen:
            raise HarnessError(f"{path}:{number}: document {parts[2]} is listed twice for query {parts[0]}")
        seen.add((parts[0], parts[2]))
        # trec_eval compares scores as C floats: so must we, or ties it sees would not be ties here
        entries[parts[0]].append((values[0], float(np.float32(values[1])), parts[2]))
    by_rank = {qid: [doc for _, _, doc in sorted(docs, key=lambda e: e[0])] for qid, docs in entries.items()}
    if order == "rank":
        return by_rank
    by_score = {
        qid: [doc for _, doc in sorted(((score, doc) for _, score, doc in docs), reverse=True)]
        for qid, docs in entries.items()
    }
    if order == "checked":
        for qid, docs in by_score.items():
            if docs != by_rank[qid]:
                at = next(i for i, (a, b) in enumerate(zip(docs, by_rank[qid], strict=True)) if a != b)
                raise HarnessError(
                    f"{path}: query {qid}: ordered by score (as trec_eval reads it) the ranking differs from "
                    f"its rank column from rank {at + 1} on (tied or out-of-order scores)"
                )
    return by_score


def read_qrels(path: str | Path) -> dict[str, set[str]]:
    """Query id → relevant document ids (relevance > 0, as trec_eval's default level)."""
    return {qid: {doc for doc, grade in docs.items() if grade > 0} for qid, docs in read_grades(path).items()}


def read_grades(path: str | Path) -> dict[str, dict[str, float]]:
    """Query id → document id → relevance, every judged query (also those judged 0 only)."""
    grades: dict[str, dict[str, float]] = defaultdict(dict)
    for number, parts in _lines(path):
        if len(parts) != 4:
            raise HarnessError(f"{path}:{number}: a qrels line has 4 columns (qid iter docid rel), got {len(parts)}")
        try:
            grades[parts[0]][parts[2]] = float(parts[3])
        except ValueError:
            raise HarnessError(f"{path}:{number}: relevance {parts[3]!r} is not a number") from None
    return dict(grades)


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.split()
                if parts:
                    yield number, parts
    except (OSError, EOFError) as exc:
        raise HarnessError(f"cannot read {path}: {exc}") from exc
