"""Queries with their answers, grouped into named splits.

The on-disk layout STaRK publishes is supported directly, because it is the field's common
currency: ``stark_qa/stark_qa.csv`` (``id,query,answer_ids`` with answers as a Python list
literal), ``stark_qa/stark_qa_human_generated_eval.csv`` and ``split/<name>.index`` files holding
one query id per line.
"""

from __future__ import annotations

import ast
import csv
import json
import pickle
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.caches import discard_entry, entry_lock, file_digest, verified_entry, write_manifest
from harness.errors import HarnessError
from harness.io import atomic_dir, atomic_write, cache_root, stable_hash

HUMAN_SPLIT = "human-generated"


@dataclass(frozen=True)
class Query:
    """One query: its id, text, every correct node id, and free-form metadata."""

    id: int
    text: str
    answer_ids: tuple[int, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)


class QuerySet:
    """Named splits of queries. Ids are unique within a split (STaRK's human-generated
    queries reuse the ids of synthesized ones, so they live in a split of their own)."""

    def __init__(self, name: str, splits: Mapping[str, Sequence[Query]]):
        self.name = name
        self._splits: dict[str, list[Query]] = {}
        for split, queries in splits.items():
            seen: set[int] = set()
            for query in queries:
                if query.id in seen:
                    raise HarnessError(f"query set {name!r}, split {split!r}: duplicate query id {query.id}")
                seen.add(query.id)
            self._splits[split] = list(queries)

    @property
    def split_names(self) -> list[str]:
        return list(self._splits)

    def split(self, name: str) -> list[Query]:
        if name not in self._splits:
            known = ", ".join(self._splits) or "none"
            raise HarnessError(f"query set {self.name!r} has no split {name!r} (known: {known})")
        return self._splits[name]

    def counts(self) -> dict[str, int]:
        return {name: len(queries) for name, queries in self._splits.items()}

    def __iter__(self) -> Iterator[str]:
        return iter(self._splits)


def sample(queries: Sequence[Query], fraction: float, seed: int = 0) -> list[Query]:
    """A seeded random ``fraction`` of ``queries`` (at least one), in their original order."""
    if not 0 < fraction <= 1:
        raise HarnessError(f"sample fraction must be in (0, 1], got {fraction}")
    if fraction == 1:
        return list(queries)
    size = max(1, round(len(queries) * fraction))
    keep = set(random.Random(seed).sample(range(len(queries)), size))
    return [q for i, q in enumerate(queries) if i in keep]


def parse_answer_ids(text: str, where: str) -> tuple[int, ...]:
    """Parse STaRK's ``"[1, 2, 3]"`` answer column (a Python list literal)."""
    try:
        value = json.loads(text)  # what the releases hold, read several times faster than by ast
    except ValueError:
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError) as exc:
            raise HarnessError(f"{where}: answer_ids is not a list literal: {text!r}") from exc
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, list | tuple) or not all(type(v) is int for v in value):  # True is no id
        raise HarnessError(f"{where}: answer_ids must be a list of integers, got {text!r}")
    return tuple(value)


def read_stark_csv(path: Path) -> list[Query]:
    """Read one STaRK query CSV; extra columns are kept as metadata."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise HarnessError(f"cannot read query file {path}: {exc}") from exc
    queries = []
    for line, row in enumerate(rows, start=2):
        where = f"{path}:{line}"
        try:
            qid = int(row["id"])
            text = row["query"]
            answers = parse_answer_ids(row["answer_ids"], where)
        except KeyError as exc:
            raise HarnessError(f"{path}: missing column {exc}; expected id,query,answer_ids") from exc
        except (TypeError, ValueError) as exc:
            raise HarnessError(f"{where}: bad id {row.get('id')!r}") from exc
        extra = {k: v for k, v in row.items() if k not in ("id", "query", "answer_ids")}
        queries.append(Query(qid, text, answers, extra))
    return queries


def read_index(path: Path) -> list[int]:
    try:
        return [int(line) for line in path.read_text(encoding="utf-8").split() if line]
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read split file {path}: {exc}") from exc


def load_stark_layout(root: str | Path, name: str | None = None) -> QuerySet:
    """Load a query set laid out as STaRK's ``qa/<dataset>/`` directory.

    Splits: one per ``split/*.index`` file over ``stark_qa.csv``, plus ``human-generated``
    when ``stark_qa_human_generated_eval.csv`` exists. What is parsed is kept in the cache under
    the files' digests (verified when read), so a second load reads no CSV.
    """
    root = Path(root)
    name = name or root.name
    files = _layout_files(root)
    if not files:
        raise HarnessError(f"no STaRK query files under {root} (expected stark_qa/stark_qa.csv)")
    # the parser's own source is part of the key: a fix to it is never served stale parses
    parsed_by = [_CACHE_LAYOUT, file_digest(__file__)]
    key = stable_hash([parsed_by, [[path.relative_to(root).as_posix(), file_digest(path)] for path in files]], 32)
    entry = cache_root() / "queries" / key
    if verified_entry(entry):
        try:
            with (entry / "splits.pkl").open("rb") as handle:
                return QuerySet(name, pickle.load(handle))
        except Exception as exc:  # a damaged entry: parsed again and replaced
            discard_entry(entry, f"cannot be read ({type(exc).__name__}: {exc})")
    splits = _parse_layout(root)
    try:
        with entry_lock(entry, "caching the parsed queries"):
            if not verified_entry(entry):
                with atomic_dir(entry) as tmp:
                    with (tmp / "splits.pkl").open("wb") as handle:
                        pickle.dump(splits, handle, protocol=pickle.HIGHEST_PROTOCOL)
                    write_manifest(tmp)
    except OSError:
        pass  # a read-only or full cache: the queries were parsed, nothing is lost
    return QuerySet(name, splits)


#: bump when what ``_parse_layout`` makes of the same files changes in code outside this module
_CACHE_LAYOUT = 1


def _layout_files(root: Path) -> list[Path]:
    """The files a STaRK layout's splits are read from, in a fixed order."""
    found = [root / "stark_qa" / "stark_qa.csv", root / "stark_qa" / "stark_qa_human_generated_eval.csv"]
    return [path for path in found if path.is_file()] + sorted((root / "split").glob("*.index"))


def _parse_layout(root: Path) -> dict[str, list[Query]]:
    splits: dict[str, list[Query]] = {}
    synthesized = root / "stark_qa" / "stark_qa.csv"
    if synthesized.exists():
        by_id: dict[int, Query] = {}
        for query in read_stark_csv(synthesized):
            if query.id in by_id:
                raise HarnessError(f"{synthesized}: duplicate query id {query.id}")
            by_id[query.id] = query
        for index_file in sorted((root / "split").glob("*.index")):
            ids = read_index(index_file)
            missing = [i for i in ids if i not in by_id]
            if missing:
                raise HarnessError(
                    f"{index_file}: {len(missing)} query ids not in {synthesized.name} (first: {missing[:5]})"
                )
            splits[index_file.stem] = [by_id[i] for i in ids]
        if not splits:
            splits["all"] = list(by_id.values())
    human = root / "stark_qa" / "stark_qa_human_generated_eval.csv"
    if human.exists():
        splits[HUMAN_SPLIT] = read_stark_csv(human)
    if not splits:
        raise HarnessError(f"no STaRK query files under {root} (expected stark_qa/stark_qa.csv)")
    return splits


def write_stark_csv(path: Path, queries: Iterable[Query]) -> None:
    """Write queries in STaRK's CSV layout, atomically."""

    with atomic_write(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "query", "answer_ids"])
        for query in queries:
            writer.writerow([query.id, query.text, str(list(query.answer_ids))])
