"""TREC run and qrels files, as trec_eval and ranx read them, and runs from other tools.

Run lines: ``qid Q0 docid rank score tag``. Qrels lines: ``qid 0 docid relevance``; either
file may be gzip-compressed (``.gz``). Like trec_eval, a run is ordered by score (descending),
ties by docid (descending), unless the rank column is asked for. Relevance > 0 counts as relevant;
nDCG on graded qrels takes the grades as gains (``harness.metrics.graded_ndcg``, trec_eval's).

:func:`read_any_run` also reads MS MARCO runs (``qid<TAB>docid<TAB>rank``: ordered by the rank
column, which is the only order such a file states) and ranx JSON runs (``{qid: {docid:
score}}``: ordered by score as a TREC run is, because ranx itself leaves tied documents in
whatever order its unstable sort gives).

trec_eval ignores the rank column and keeps scores as C ``float`` (32 bits), so a run file
whose scores tie — or differ only beyond float32 precision, or were rounded into ties — is read
in another order than it was written. The harness writes scores that are strictly decreasing
as float32 values: each score rounded to float32 (printed exactly), and one that is not below
the previous one lowered to the next float32 below it. The order is then the ranking's under
every reader, and no score moves by more than a few float32 units in the last place.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Literal

import numpy as np

from harness.errors import HarnessError


def strictly_decreasing(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """``scores`` (non-increasing) as float32, every tie lowered to the next float32 below the
    score before it (one float32 step per tied entry), so that sorting by score alone — in
    float32, as trec_eval 9 and pytrec_eval do, or in double — gives back the same order.

    Computed on the float32 values' order-preserving integer keys (one step is one key, -0.0 and
    +0.0 one key): the recurrence ``out[i] = min(key[i], out[i-1] - 1)`` is a running minimum of
    ``key[i] + i``, less ``i``, so a ranking of any length costs a few vector operations."""
    out = np.asarray(scores, dtype=np.float64).astype(np.float32)
    if len(out) > 1 and not np.all(out[1:] < out[:-1]) and not np.any(np.isnan(out) | (out == -np.inf)):
        out = _lowered(out)  # (NaN and -inf are never lowered: only refused, below)
    if not np.all(np.isfinite(out)):
        raise HarnessError("scores outside the range of 32-bit floats cannot be written to a TREC run")
    return out


def _lowered(out: np.ndarray) -> np.ndarray:
    bits = out.view(np.int32).astype(np.int64)
    # the sign-magnitude bits as an ordered integer, -0.0 folded onto +0.0
    keys = np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))
    steps = np.arange(len(keys), dtype=np.int64)
    lowered = np.minimum.accumulate(keys + steps) - steps
    if lowered[-1] < _LOWEST_KEY:  # lowered past the lowest float32: -inf, refused
        out[-1] = -np.inf
        return out
    changed = lowered != keys
    raw = np.where(lowered >= 0, lowered, (-lowered) | np.int64(-0x80000000))
    out[changed] = raw[changed].astype(np.int64).astype(np.uint32).view(np.float32)
    return out


#: the key of the lowest finite float32
_LOWEST_KEY = -int(np.array(np.finfo(np.float32).max, dtype=np.float32).view(np.int32))


def write_run(handle: IO[str], qid: str, docids: Iterable[str], scores: Iterable[float], tag: str) -> None:
    """One query's ranking, best first, with strictly decreasing scores (see the module doc)."""
    docids = list(docids)
    values = strictly_decreasing(list(scores))
    if len(docids) != len(values):
        raise ValueError(f"query {qid}: {len(docids)} documents but {len(values)} scores")
    # .tolist() gives each float32 as the double of the same value: printed exactly, it reads
    # back to the same float32 whether a reader parses to float or to double
    for rank, (docid, score) in enumerate(zip(docids, values.tolist(), strict=True), start=1):
        handle.write(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")


def write_qrels(handle: IO[str], judgements: Iterable[tuple[str, Iterable[str], Iterable[str]]]) -> None:
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


RunFormat = Literal["trec", "msmarco", "ranx"]
RUN_FORMATS: tuple[RunFormat, ...] = ("trec", "msmarco", "ranx")


def read_any_run(path: str | Path, run_format: RunFormat | None = None) -> dict[str, list[str]]:
    """Query id → document ids, best first, from a TREC, MS MARCO or ranx JSON run
    (``run_format``, or told from the file: see :func:`run_format_of`)."""
    run_format = run_format or run_format_of(path)
    if run_format == "msmarco":
        return read_msmarco_run(path)
    if run_format == "ranx":
        return read_ranx_run(path)
    return read_run(path)


def run_format_of(path: str | Path) -> RunFormat:
    """By the name: ``.json`` → ``ranx``, ``.trec`` → ``trec`` (also gzip'd); otherwise ``ranx``
    for a file starting with ``{``, else by the columns of its first line: 6 → ``trec``, 3 →
    ``msmarco``."""
    name = str(path).removesuffix(".gz")
    if name.endswith(".json"):
        return "ranx"
    if name.endswith(".trec"):
        return "trec"
    for number, line in _raw_lines(path):
        if line.lstrip().startswith("{"):
            return "ranx"
        parts = line.split()
        if not parts:
            continue
        if len(parts) in (6, 3):
            return "trec" if len(parts) == 6 else "msmarco"
        raise HarnessError(
            f"{path}:{number}: {len(parts)} columns: not a TREC run (qid Q0 docid rank score tag), an MS MARCO "
            "run (qid docid rank) or a ranx JSON run; give --run-format if it is one of them"
        )
    return "trec"  # an empty file: every format reads it as a run without results


def read_msmarco_run(path: str | Path) -> dict[str, list[str]]:
    """An MS MARCO run, ``qid docid rank`` (tab- or space-separated), ordered by rank. Ranks are
    positive integers, each at most once per query; a document at most once per query."""
    entries: dict[str, list[tuple[int, str]]] = defaultdict(list)
    ranks: set[tuple[str, int]] = set()
    docs: set[tuple[str, str]] = set()
    for number, parts in _lines(path):
        if len(parts) != 3:
            raise HarnessError(
                f"{path}:{number}: an MS MARCO run line has 3 columns (qid docid rank), got {len(parts)}"
            )
        qid, doc, text = parts
        try:
            rank = int(text)
        except ValueError:
            rank = 0
        if rank < 1:
            raise HarnessError(f"{path}:{number}: rank {text!r} is not a positive integer")
        if (qid, rank) in ranks:
            raise HarnessError(f"{path}:{number}: rank {rank} is given twice for query {qid}")
        if (qid, doc) in docs:
            raise HarnessError(f"{path}:{number}: document {doc} is listed twice for query {qid}")
        ranks.add((qid, rank))
        docs.add((qid, doc))
        entries[qid].append((rank, doc))
    return {qid: [doc for _, doc in sorted(found)] for qid, found in entries.items()}


def read_ranx_run(path: str | Path) -> dict[str, list[str]]:
    """A ranx JSON run, ``{qid: {docid: score}}``, ordered as :func:`read_run` orders a TREC
    run: score as a float32 descending, ties by docid descending (what pytrec_eval makes of
    the same dictionary)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{path}:{exc.lineno}:{exc.colno}: not a ranx JSON run: {exc.msg}") from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: a ranx JSON run is an object {{qid: {{docid: score}}}}, got {type(data).__name__}")
    run: dict[str, list[str]] = {}
    for qid, docs in data.items():
        if not isinstance(docs, dict):
            raise HarnessError(f"{path}: query {qid!r}: expected an object {{docid: score}}, got {type(docs).__name__}")
        scored = []
        for doc, score in docs.items():
            # bool is an int to Python, never a score; NaN and infinities order nothing
            if isinstance(score, bool) or not isinstance(score, int | float) or not np.isfinite(score):
                raise HarnessError(f"{path}: query {qid!r}, document {doc!r}: score {score!r} is not a finite number")
            scored.append((float(np.float32(score)), doc))
        run[qid] = [doc for _, doc in sorted(scored, reverse=True)]
    return run


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
    for number, line in _raw_lines(path):
        parts = line.split()
        if parts:
            yield number, parts


def _raw_lines(path: str | Path) -> Iterable[tuple[int, str]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            yield from enumerate(handle, start=1)
    except (OSError, EOFError) as exc:
        raise HarnessError(f"cannot read {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
