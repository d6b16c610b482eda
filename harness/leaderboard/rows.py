"""Leaderboard rows: one JSON file per run configuration, plus a merged view.

Layout under the leaderboard directory::

    rows/<dataset>/<split>/<retriever>-<config_hash>.json   one row per configuration
    leaderboard.json                                       every row, regenerated on write
    schema.json                                            the row's JSON Schema

A row written with the configuration hash of an existing row replaces it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError
from harness.io import exclusive, leaderboard_lock, write_json
from harness.run.record import SCHEMA_VERSION, ComponentInfo, Hardware, Latency, LeaderboardRow, Versions

__all__ = ["SCHEMA_VERSION", "ComponentInfo", "Hardware", "Latency", "LeaderboardRow", "Versions"]


def row_path(directory: Path, row: LeaderboardRow) -> Path:
    safe = row.retriever.name.replace("/", "_")
    return directory / "rows" / row.dataset.name / row.split / f"{safe}-{row.config_hash}.json"


def check_scratch(directory: str | Path) -> Path:
    """``directory`` if rows may be written into it directly: a curated leaderboard (one with a
    ``CHANGELOG.md``) changes only through submissions and merges."""
    directory = Path(directory)
    if (directory / "CHANGELOG.md").exists():
        raise HarnessError(
            f"{directory} is a curated leaderboard (it has a CHANGELOG.md): it changes only through "
            f"`harness submit RUN_DIR -o run.tar.gz` and `harness leaderboard merge run.tar.gz --into {directory}`"
        )
    return directory


def record_row(directory: str | Path, row: LeaderboardRow) -> Path:
    """Write a run's ``row`` into the scratch leaderboard ``directory`` under the lock that
    ``harness leaderboard merge`` takes (a merge never swaps in a copy without this row)."""
    directory = check_scratch(directory)
    with exclusive(leaderboard_lock(directory), "waiting for a merge into the leaderboard"):
        return write_row(directory, row)


def run_dir_of(directory: Path, run_dir: str | None) -> Path | None:
    """Where a row's per-query results are: ``run_dir`` inside the leaderboard (merged rows),
    else as written (relative to the working directory, as `harness run` records it)."""
    if not run_dir:
        return None
    inside = directory / run_dir
    return inside if inside.is_dir() else Path(run_dir)


def write_row(directory: str | Path, row: LeaderboardRow) -> Path:
    """Write ``row`` (replacing any row with the same configuration hash) and refresh
    the merged view. Both writes are atomic."""
    directory = Path(directory)
    path = row_path(directory, row)
    write_json(path, row.model_dump(mode="json"))
    write_merged(directory)
    return path


def read_rows(directory: str | Path) -> list[LeaderboardRow]:
    """Every row under ``directory/rows`` (or the rows of one JSON file)."""
    directory = Path(directory)
    if directory.is_file():
        files = [directory]
    elif directory.exists():
        files = sorted((directory / "rows").rglob("*.json"))
    else:
        raise HarnessError(f"no leaderboard at {directory}")
    rows = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            items = data if isinstance(data, list) else [data]
            for item in items:
                outdated = schema_problem(item)
                if outdated:
                    raise HarnessError(f"{file}: {outdated}")
                rows.append(LeaderboardRow.model_validate(item))
        except (OSError, json.JSONDecodeError) as exc:
            raise HarnessError(f"{file}: unreadable leaderboard row: {exc}") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(map(str, first["loc"]))
            raise HarnessError(f"{file}: invalid leaderboard row: {loc}: {first['msg']}") from None
    return rows


def schema_problem(data: Any) -> str | None:
    """Why a row's JSON cannot be read as a row of this schema version, if it cannot."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or version == SCHEMA_VERSION:
        return None  # the schema check says what is wrong with it, if anything
    if version < SCHEMA_VERSION:
        return (
            f"a schema-{version} row (this harness reads schema {SCHEMA_VERSION}); migrate the leaderboard "
            "with `harness leaderboard migrate DIR`"
        )
    return f"a schema-{version} row, written by a newer harness (this one reads schema {SCHEMA_VERSION}); upgrade"


def write_merged(directory: Path) -> Path:
    rows = read_rows(directory)
    rows.sort(key=lambda r: (r.dataset.name, r.split, r.retriever.name, r.timestamp))
    path = directory / "leaderboard.json"
    write_json(path, [row.model_dump(mode="json") for row in rows])
    return path


def json_schema() -> dict[str, Any]:
    return LeaderboardRow.model_json_schema()


#: marks a row whose distinguishing component never (or almost never) ran (its ``health.flags``)
FLAG_MARK = "⚑"


def _plain(value: Any) -> dict[str, Any] | None:
    """A row's optional ``health`` or ``seeds`` as plain JSON data (a model or a dict), or None."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value if isinstance(value, dict) else None


def health_of(row: LeaderboardRow) -> dict[str, Any] | None:
    """``{"counters", "queries", "flags", ...}``; None on a row written before rows had it."""
    return _plain(getattr(row, "health", None))


def seeds_of(row: LeaderboardRow) -> dict[str, Any] | None:
    """``{"values", "metrics": {metric: {"mean", "std", "min", "max"}}, "runs"}`` for a row averaged
    over training seeds, else None."""
    return _plain(getattr(row, "seeds", None))


def flags_of(row: LeaderboardRow) -> list[dict[str, str]]:
    """The row's health flags (``component``, ``reason``): non-empty when what distinguishes it never ran."""
    health = health_of(row) or {}
    return [flag for flag in health.get("flags") or [] if isinstance(flag, dict)]


def spread_of(row: LeaderboardRow, metric: str) -> dict[str, float] | None:
    """``{"mean", "std", "min", "max"}`` of ``metric`` over the row's seeds, if it has seeds."""
    seeds = seeds_of(row) or {}
    spread = (seeds.get("metrics") or {}).get(metric)
    return spread if isinstance(spread, dict) and "std" in spread else None


def metric_text(row: LeaderboardRow, metric: str) -> str:
    """A metric ×100: ``55.80``, or ``55.80 ± 1.23`` (mean ± std) for a row averaged over seeds;
    ``–`` when the row lacks it."""
    if metric not in row.metrics:
        return "–"
    spread = spread_of(row, metric)
    text = f"{100 * row.metrics[metric]:.2f}"
    return text + (f" ± {100 * spread['std']:.2f}" if spread else "")


def flag_notes(rows: list[LeaderboardRow]) -> list[str]:
    """One line per health flag, for below a table: ``⚑ name (dataset/split): component: reason``."""
    return [
        f"{FLAG_MARK} {display_name(row)} ({row.dataset.name}/{row.split}): {flag.get('component')}: "
        f"{flag.get('reason')}"
        for row in rows
        for flag in flags_of(row)
    ]


def table_rows(rows: list[LeaderboardRow], metrics: list[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and cells for a leaderboard table (used by the rich and Markdown views).

    A flagged row (:func:`flags_of`) is marked ⚑ and listed after the other rows of its split:
    its numbers measure something other than the system it names, so it is not ranked among them."""
    if metrics is None:
        metrics = []
        for row in rows:
            metrics.extend(m for m in row.metrics if m not in metrics)
    header = ["dataset", "split", "retriever", "n", *metrics, "ms/query", "regime", "date"]
    cells = []
    first = metrics[0] if metrics else ""
    for row in sorted(rows, key=lambda r: (r.dataset.name, r.split, bool(flags_of(r)), -r.metrics.get(first, 0))):
        name = display_name(row) + (f" {FLAG_MARK}" if flags_of(row) else "")
        sample = f" ({row.sample:.0%})" if row.sample else ""
        seeds = seeds_of(row)
        seeded = f" ({len(seeds.get('values') or [])} seeds)" if seeds else ""
        cells.append(
            [row.dataset.name, row.split, name, f"{row.num_queries}{sample}{seeded}"]
            + [metric_text(row, m) for m in metrics]
            + [f"{row.latency.mean_ms:.2f}", row.regime, row.timestamp.date().isoformat()]
        )
    return header, cells


#: left-aligned columns of :func:`table_rows`; the rest are numbers, right-aligned
TEXT_COLUMNS = ("dataset", "split", "retriever", "regime", "date")


def cell_width(text: str) -> int:
    """Terminal cells ``text`` takes (wide characters count two)."""
    from rich.cells import cell_len  # rich loads only when a table is printed

    return cell_len(text)


def plain_table(header: list[str], cells: list[list[str]], text_columns: Iterable[str] = TEXT_COLUMNS) -> str:
    """A table as plain text for pipes and files: every column, nothing cut, aligned with
    spaces (``text_columns`` left-aligned, the numbers right-aligned), no box drawing."""
    text_columns = set(text_columns)
    widths = [max(cell_width(c) for c in column) for column in zip(header, *cells, strict=True)]

    def line(values: list[str]) -> str:
        parts = []
        for name, value, width in zip(header, values, widths, strict=True):
            pad = " " * (width - cell_width(value))
            parts.append(value + pad if name in text_columns else pad + value)
        return "  ".join(parts).rstrip()

    return "".join(line(values) + "\n" for values in [header, *cells])


def column_priority(header: list[str], cells: list[list[str]], metrics: list[str]) -> tuple[list[int], list[int]]:
    """Column indices for a terminal too narrow for all: those a table cannot do without (the
    retriever, the dataset and split where rows differ in them, the first metric, and n when
    a row is a sample), then the rest, most important first (the other metrics in order,
    ms/query, n, a dataset or split every row shares, regime, date)."""
    varies = {name: len({row[i] for row in cells}) > 1 for i, name in enumerate(header)}
    # a sampled row's n carries its " (10%)" marker (table_rows): without it, it reads as a full run
    sampled = "n" in header and any("%)" in row[header.index("n")] for row in cells)
    needed = ["retriever", *(name for name in ("dataset", "split") if varies[name]), *metrics[:1]]
    needed += ["n"] if sampled else []
    optional = [*metrics[1:], "ms/query", *([] if sampled else ["n"])]
    optional += [name for name in ("dataset", "split") if not varies[name]]
    optional += ["regime", "date"]
    return [header.index(n) for n in needed if n in header], [header.index(n) for n in optional if n in header]


def fit_columns(
    header: list[str], cells: list[list[str]], metrics: list[str], width: int
) -> tuple[list[int], list[int]] | None:
    """The columns (indices, in table order) that fit a boxed table ``width`` cells wide at
    their full width, most important first (:func:`column_priority`), and those left out;
    None when not even the columns a table cannot do without fit."""
    natural = [max(cell_width(c) for c in column) for column in zip(header, *cells, strict=True)]
    needed, optional = column_priority(header, cells, metrics)
    # rich's box: a border left of each column and one at the end; a space of padding each side
    used = 1 + sum(natural[i] + 3 for i in needed)
    if used > width:
        return None
    kept = list(needed)
    for index in optional:
        if used + natural[index] + 3 <= width:
            kept.append(index)
            used += natural[index] + 3
    return sorted(kept), [i for i in range(len(header)) if i not in kept]


def markdown_table(rows: list[LeaderboardRow], metrics: list[str] | None = None) -> str:
    header, cells = table_rows(rows, metrics)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c) + " |" for c in cells]
    notes = flag_notes(rows)
    return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in notes)


def display_name(row: LeaderboardRow) -> str:
    """The retriever's name, with the first stage of a reranker: ``reranker > first-stage``."""
    first = row.retriever.params.get("first_stage")
    return row.retriever.name + (f" > {first}" if isinstance(first, str) and row.uses else "")
