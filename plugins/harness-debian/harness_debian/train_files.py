"""The train directories of a Debian v2 data directory: where each split is, reading and writing them.

``train/`` holds the train split ``qa/`` compiles as ``train``: the templated (synthesized)
split of :mod:`harness_debian.train_split`, until a natural-language one
(:mod:`harness_debian.train_nl`) replaces it and the templated split moves to
``train-templated/``. Each directory holds ``queries.csv`` (STaRK's columns),
``provenance.jsonl.xz`` and ``statistics.json``, written whole by :func:`write` (both merges
use it).
"""

from __future__ import annotations

import json
import lzma
import shutil
import tempfile
from pathlib import Path
from typing import Any

from harness import Query, read_stark_csv, replace_dir, write_stark_csv


def write(out: Path, queries: list[Query], provenance: list[dict[str, Any]], stats: dict[str, Any]) -> None:
    """Write the split beside ``out``, then swap it in whole (an existing split is replaced)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        write_stark_csv(tmp / "queries.csv", queries)
        with lzma.open(tmp / "provenance.jsonl.xz", "wt", encoding="utf-8", preset=9) as handle:
            for record in provenance:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        (tmp / "statistics.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
        tmp.chmod(0o755)
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already on success


def train_queries(root: Path) -> list[Query]:
    """The shipped train split of the v2 directory ``root`` (empty when none ships)."""
    path = root / "train" / "queries.csv"
    return read_stark_csv(path) if path.exists() else []


def templated_dir(root: Path) -> Path | None:
    """Where the templated (synthesized) split of ``root`` is: ``train-templated/`` once a
    natural-language ``train/`` replaced it (:mod:`harness_debian.train_nl`), else ``train/``."""
    for name in ("train-templated", "train"):
        path = root / name / "statistics.json"
        if path.exists() and json.loads(path.read_text(encoding="utf-8")).get("kind") != "natural-language":
            return root / name
    return None


def train_splits(root: Path) -> dict[str, list[Query]]:
    """The train splits ``qa/`` compiles: ``train`` (natural-language, or the templated split
    until one replaces it) and ``train-templated`` once it has its own directory."""
    splits = {"train": train_queries(root)}
    path = root / "train-templated" / "queries.csv"
    if path.exists():
        splits["train-templated"] = read_stark_csv(path)
    return {name: queries for name, queries in splits.items() if queries}


def read_split(directory: Path, skb: Any) -> tuple[list[Query], list[dict[str, Any]], dict[str, Any], list[str]]:
    """A shipped train directory read back for its checks: the queries, the provenance records,
    the statistics, and the first problem of any split (merged on another SKB than ``skb``)."""
    queries = read_stark_csv(directory / "queries.csv")
    with lzma.open(directory / "provenance.jsonl.xz", "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    stats = json.loads((directory / "statistics.json").read_text(encoding="utf-8"))
    problems = []
    if stats.get("skb_fingerprint") != skb.fingerprint:
        problems.append(
            f"{directory.name}: merged on SKB {stats.get('skb_fingerprint')}, not this one ({skb.fingerprint})"
        )
    return queries, records, stats, problems
