"""TREC run and qrels files, as trec_eval and ranx read them.

Run lines: ``qid Q0 docid rank score tag``. Qrels lines: ``qid 0 docid relevance``.
Like trec_eval, a run is ordered by score (descending), ties by docid (descending); the
rank column is ignored. Relevance > 0 counts as relevant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from harness.errors import HarnessError


def write_run(handle: TextIO, qid: str, docids: Iterable[str], scores: Iterable[float], tag: str) -> None:
    for rank, (docid, score) in enumerate(zip(docids, scores, strict=True), start=1):
        handle.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")


def read_run(path: str | Path) -> dict[str, list[str]]:
    """Query id → document ids, best first."""
    entries: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for number, parts in _lines(path):
        if len(parts) != 6:
            raise HarnessError(
                f"{path}:{number}: a run line has 6 columns (qid Q0 docid rank score tag), got {len(parts)}"
            )
        try:
            score = float(parts[4])
        except ValueError:
            raise HarnessError(f"{path}:{number}: score {parts[4]!r} is not a number") from None
        entries[parts[0]].append((score, parts[2]))
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
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.split()
                if parts:
                    yield number, parts
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc}") from exc
