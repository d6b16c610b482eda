"""TREC run and qrels files, as trec_eval and ranx read them.

Run lines: ``qid Q0 docid rank score tag``. Qrels lines: ``qid 0 docid relevance``; either
file may be gzip-compressed (``.gz``). Like trec_eval, a run is ordered by score (descending),
ties by docid (descending), unless the rank column is asked for. Relevance > 0 counts as relevant.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from harness.errors import HarnessError


def write_run(handle: TextIO, qid: str, docids: Iterable[str], scores: Iterable[float], tag: str) -> None:
    for rank, (docid, score) in enumerate(zip(docids, scores, strict=True), start=1):
        handle.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")


def read_run(path: str | Path, order: str = "score") -> dict[str, list[str]]:
    """Query id → document ids, best first: by score like trec_eval (``order="score"``), or
    by the rank column (``order="rank"``, the order the run was written in, which rounded
    scores cannot always reproduce)."""
    entries: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for number, parts in _lines(path):
        if len(parts) != 6:
            raise HarnessError(
                f"{path}:{number}: a run line has 6 columns (qid Q0 docid rank score tag), got {len(parts)}"
            )
        column = 3 if order == "rank" else 4
        try:
            key = float(parts[column])
        except ValueError:
            what = "rank" if column == 3 else "score"
            raise HarnessError(f"{path}:{number}: {what} {parts[column]!r} is not a number") from None
        entries[parts[0]].append((key, parts[2]))
    if order == "rank":
        return {qid: [doc for _, doc in sorted(docs, key=lambda e: e[0])] for qid, docs in entries.items()}
    return {qid: [doc for _, doc in sorted(docs, reverse=True)] for qid, docs in entries.items()}


def read_qrels(path: str | Path) -> dict[str, set[str]]:
    """Query id → relevant document ids."""
    relevant: dict[str, set[str]] = defaultdict(set)
    for number, parts in _lines(path):
        if len(parts) != 4:
            raise HarnessError(f"{path}:{number}: a qrels line has 4 columns (qid iter docid rel), got {len(parts)}")
        try:
            grade = float(parts[3])
        except ValueError:
            raise HarnessError(f"{path}:{number}: relevance {parts[3]!r} is not a number") from None
        relevant.setdefault(parts[0], set())
        if grade > 0:
            relevant[parts[0]].add(parts[2])
    return dict(relevant)


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
