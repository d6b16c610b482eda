"""Leaderboard rows: one JSON file per run configuration, plus a merged view.

Layout under the leaderboard directory::

    rows/<dataset>/<split>/<retriever>-<config_hash>.json   one row per configuration
    leaderboard.json                                       every row, regenerated on write
    schema.json                                            the row's JSON Schema

A row written with the configuration hash of an existing row replaces it.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from harness.errors import HarnessError
from harness.io import write_json

SCHEMA_VERSION = 1


class ComponentInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="registry or plugin name")
    plugin: str = Field(description="component name registered by the plugin")
    params: dict[str, Any] = Field(default_factory=dict)
    version: str = Field(description="component version")
    package: str | None = Field(None, description="distribution that provided it")
    #: the parameters the component is built with, when they differ from the recorded ones
    #: (URL credentials, which are recorded as ***); never serialised
    _runtime_params: dict[str, Any] | None = PrivateAttr(default=None)

    @property
    def runtime_params(self) -> dict[str, Any]:
        return self._runtime_params if self._runtime_params is not None else self.params


class Latency(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mean_ms: float
    p50_ms: float
    p95_ms: float
    batch_size: int = Field(description="queries per search call; latency is amortised per query")


class Hardware(BaseModel):
    model_config = ConfigDict(extra="forbid")
    device: str
    cpu: str
    gpu: str | None = None


class Versions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    python: str
    harness: str
    metrics: str = Field(description="version of the metric definitions")
    torch: str | None = None
    numpy: str


class LeaderboardRow(BaseModel):
    """One evaluated configuration: what ran, on what, how well, how fast, where."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    retriever: ComponentInfo
    first_stage: ComponentInfo | None = None
    uses: list[ComponentInfo] = Field(default_factory=list, description="retrievers a composite builds on")
    dataset: ComponentInfo
    dataset_fingerprint: str
    split: str
    num_queries: int = Field(ge=0)
    queries_without_candidate_answers: int = Field(0, ge=0)
    sample: float | None = Field(None, description="fraction of the split evaluated (seeded)")
    k: int = Field(gt=0)
    metrics: dict[str, float]
    latency: Latency
    index_build_seconds: float
    total_seconds: float
    regime: Literal["zero-shot", "trained", "llm-at-query-time"]
    usage: dict[str, Any] = Field(default_factory=dict, description="tokens, cost (USD), API calls")
    hardware: Hardware
    versions: Versions
    config_hash: str
    timestamp: datetime
    run_dir: str | None = Field(None, description="per-query results and TREC run, relative or absolute")


def row_path(directory: Path, row: LeaderboardRow) -> Path:
    safe = row.retriever.name.replace("/", "_")
    return directory / "rows" / row.dataset.name / row.split / f"{safe}-{row.config_hash}.json"


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
            rows.extend(LeaderboardRow.model_validate(item) for item in items)
        except (OSError, json.JSONDecodeError) as exc:
            raise HarnessError(f"{file}: unreadable leaderboard row: {exc}") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(map(str, first["loc"]))
            raise HarnessError(f"{file}: invalid leaderboard row: {loc}: {first['msg']}") from None
    return rows


def write_merged(directory: Path) -> Path:
    rows = read_rows(directory)
    rows.sort(key=lambda r: (r.dataset.name, r.split, r.retriever.name, r.timestamp))
    path = directory / "leaderboard.json"
    write_json(path, [row.model_dump(mode="json") for row in rows])
    return path


def json_schema() -> dict[str, Any]:
    return LeaderboardRow.model_json_schema()


def table_rows(rows: list[LeaderboardRow], metrics: list[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and cells for a leaderboard table (used by the rich and Markdown views)."""
    if metrics is None:
        metrics = []
        for row in rows:
            metrics.extend(m for m in row.metrics if m not in metrics)
    header = ["dataset", "split", "retriever", "n", *metrics, "ms/query", "regime", "date"]
    cells = []
    for row in sorted(rows, key=lambda r: (r.dataset.name, r.split, -r.metrics.get(metrics[0] if metrics else "", 0))):
        name = row.retriever.name + (f" > {row.first_stage.name}" if row.first_stage else "")
        sample = f" ({row.sample:.0%})" if row.sample else ""
        cells.append(
            [row.dataset.name, row.split, name, f"{row.num_queries}{sample}"]
            + [f"{100 * row.metrics[m]:.2f}" if m in row.metrics else "–" for m in metrics]
            + [f"{row.latency.mean_ms:.2f}", row.regime, row.timestamp.date().isoformat()]
        )
    return header, cells


def markdown_table(rows: list[LeaderboardRow], metrics: list[str] | None = None) -> str:
    header, cells = table_rows(rows, metrics)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c) + " |" for c in cells]
    return "\n".join(lines) + "\n"
