"""``registry.yaml``: named datasets, retrievers and reproduction conditions.

In the spirit of Pyserini's reproduction matrix, a *condition* is a retriever × dataset ×
split with expected scores and a tolerance; a run of it reports OK or FAIL per metric.
Names not in the registry fall back to what plugins registered, with default parameters,
so a freshly installed plugin works before anyone edits the registry.

Lookup order for the file: ``--registry``, ``$HARNESS_REGISTRY``, ``./registry.yaml``,
then the registry shipped with the harness.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import HarnessError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetEntry(_Strict):
    plugin: str = Field(description="name of a dataset registered by a plugin")
    params: dict[str, Any] = Field(default_factory=dict)
    splits: list[str] = Field(default_factory=list, description="splits `--all` runs")
    description: str = ""


class RetrieverEntry(_Strict):
    plugin: str = Field(description="name of a retriever registered by a plugin")
    params: dict[str, Any] = Field(default_factory=dict)
    first_stage: str | None = Field(
        None, description="for rerankers: the retriever they rerank (a registry entry or plugin name)"
    )
    candidates: int = Field(20, gt=0, description="for rerankers: first-stage depth")
    description: str = ""


class Condition(_Strict):
    name: str
    retriever: str
    dataset: str
    split: str
    k: int = Field(100, gt=0)
    sample: float | None = Field(None, gt=0, le=1)
    expected: dict[str, float] = Field(default_factory=dict)
    tolerance: float = Field(1e-4, ge=0)
    source: str = ""


class Defaults(_Strict):
    dataset: str | None = None
    retriever: str | None = None
    split: str = "test"
    k: int = Field(100, gt=0)
    metrics: list[str] | None = None


class Registry(_Strict):
    defaults: Defaults = Field(default_factory=Defaults)
    datasets: dict[str, DatasetEntry] = Field(default_factory=dict)
    retrievers: dict[str, RetrieverEntry] = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)
    source: str = Field("<built-in>", exclude=True)

    @model_validator(mode="after")
    def _references_resolve(self) -> Registry:
        for name, entry in self.retrievers.items():
            if entry.first_stage == name:
                raise ValueError(f"retrievers.{name}.first_stage: a retriever cannot rerank itself")
        seen: set[str] = set()
        for i, condition in enumerate(self.conditions):
            if condition.name in seen:
                raise ValueError(f"conditions[{i}]: duplicate condition name {condition.name!r}")
            seen.add(condition.name)
            entry = self.datasets.get(condition.dataset)
            if entry is not None and entry.splits and condition.split not in entry.splits:
                raise ValueError(
                    f"conditions[{i}] ({condition.name}): split {condition.split!r} is not among "
                    f"datasets.{condition.dataset}.splits {entry.splits}"
                )
        return self

    def condition_for(self, retriever: str, dataset: str, split: str) -> Condition | None:
        for condition in self.conditions:
            if (condition.retriever, condition.dataset, condition.split) == (retriever, dataset, split):
                return condition
        return None


def _format_error(path: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        problems.append(f"  {loc}: {message}")
    return f"{path}: invalid registry\n" + "\n".join(problems)


def parse_registry(text: str, source: str) -> Registry:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HarnessError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        # an empty ./registry.yaml would otherwise hide the shipped registry without a word
        raise HarnessError(
            f"{source}: the registry is empty; delete it to use the shipped registry, or give it datasets, "
            "retrievers or conditions"
        )
    if not isinstance(data, dict):
        raise HarnessError(f"{source}: the registry must be a mapping with datasets/retrievers/conditions")
    try:
        registry = Registry.model_validate(data)
    except ValidationError as exc:
        raise HarnessError(_format_error(source, exc)) from None
    registry.source = source
    return registry


def bundled_registry_path() -> Path | None:
    """The registry shipped with the harness (wheel) or beside a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "registry.yaml", here.parent / "registry.yaml"):
        if candidate.exists():
            return candidate
    return None


def load_registry(path: str | os.PathLike[str] | None = None) -> Registry:
    """Load and validate the registry (see the module docstring for the lookup order)."""
    candidates: list[Path | None] = [
        Path(path) if path else None,
        Path(os.environ["HARNESS_REGISTRY"]) if os.environ.get("HARNESS_REGISTRY") else None,
        Path("registry.yaml"),
        bundled_registry_path(),
    ]
    for candidate in candidates:
        if candidate is None:
            continue
        explicit = candidate is candidates[0] or candidate is candidates[1]
        if candidate.exists():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise HarnessError(f"cannot read registry {candidate} (UTF-8 YAML expected): {exc}") from exc
            return parse_registry(text, str(candidate))
        if explicit:
            raise HarnessError(f"registry file {candidate} does not exist")
    return Registry()
