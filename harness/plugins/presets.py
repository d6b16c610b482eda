"""The registry: named datasets, retrievers (presets) and reproduction conditions.

In the spirit of Pyserini's reproduction matrix, a *condition* is a retriever × dataset ×
split with expected scores and a tolerance; a run of it reports OK or FAIL per metric.
Names not in the registry fall back to what plugins registered, with default parameters,
so a freshly installed plugin works before anyone edits the registry.

The registry is assembled from what the loaded plugins ship (``register_presets``: a YAML
file in this format, usually package data), then one user file on top, whose entries replace
plugin entries of the same name: ``--registry``, else ``$HARNESS_REGISTRY``, else
``./registry.yaml`` when present. The core ships no entries, so an install lists only what
its plugins can run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

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
    description: str = ""

    @model_validator(mode="before")
    @classmethod
    def _rerankers_are_composites(cls, data: Any) -> Any:
        # Registries written before rerankers were composites gave these two beside params.
        if isinstance(data, dict) and ({"first_stage", "candidates"} & set(data)):
            data = dict(data)
            params = dict(data.get("params") or {})
            for key in ("first_stage", "candidates"):
                if key in data:
                    params.setdefault(key, data.pop(key))
            data["params"] = params
        return data


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
    source: str = Field("(empty)", exclude=True)
    #: what assembling it from plugins found wrong (shown by ``harness list``)
    _problems: list[str] = PrivateAttr(default_factory=list)
    #: the file each entry came from, by ("datasets" | "retrievers" | "conditions", name)
    _origins: dict[tuple[str, str], str] = PrivateAttr(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        return self._problems

    def origin(self, kind: str, name: str) -> str | None:
        """The registry file that defines the ``kind`` ("dataset", "retriever", "condition") entry ``name``."""
        return self._origins.get((f"{kind}s", name))

    @model_validator(mode="after")
    def _references_resolve(self) -> Registry:
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
        # libyaml's parser when PyYAML has it (several times faster; the same safe constructors)
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise HarnessError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        # an empty file is a mistake (a truncated copy, a wrong path), not a registry
        raise HarnessError(
            f"{source}: the registry is empty; delete it to use the plugins' presets, or give it datasets, "
            "retrievers or conditions"
        )
    if not isinstance(data, dict):
        raise HarnessError(f"{source}: the registry must be a mapping with datasets/retrievers/conditions")
    try:
        registry = Registry.model_validate(data)
    except ValidationError as exc:
        raise HarnessError(_format_error(source, exc)) from None
    registry.source = source
    for section in ("datasets", "retrievers"):
        registry._origins.update({(section, name): source for name in getattr(registry, section)})
    registry._origins.update({("conditions", c.name): source for c in registry.conditions})
    return registry


def user_registry_path(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The user's registry file: ``path``, else ``$HARNESS_REGISTRY``, else ``./registry.yaml``."""
    for candidate, explicit in (
        (path, True),
        (os.environ.get("HARNESS_REGISTRY") or None, True),
        ("registry.yaml", False),
    ):
        if candidate is None:
            continue
        found = Path(candidate)
        if found.exists():
            return found
        if explicit:
            raise HarnessError(f"registry file {found} does not exist")
    return None


def read_registry(path: Path) -> Registry:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read registry {path} (UTF-8 YAML expected): {exc}") from exc
    return parse_registry(text, str(path))


def merge(fragments: list[tuple[str, Registry]], user: Registry | None = None) -> tuple[Registry, list[str]]:
    """One registry from the plugins' fragments and the user's file (which wins), and the
    problems found: a name two plugins define is ambiguous, so neither entry is used."""
    problems: list[str] = []
    merged: dict[str, dict[str, Any]] = {"datasets": {}, "retrievers": {}, "conditions": {}}
    origins: dict[tuple[str, str], str] = {}
    owners: dict[tuple[str, str], list[str]] = {}
    defaults: dict[str, set[Any]] = {}
    condition_owner: dict[str, str] = {}
    for owner, fragment in sorted(fragments, key=lambda pair: pair[0]):
        for section in ("datasets", "retrievers"):
            for name, entry in getattr(fragment, section).items():
                _own(owners, (section, name), owner)
                merged[section][name] = entry
                origins[(section, name)] = fragment.origin(section[:-1], name) or fragment.source
        for condition in fragment.conditions:
            _own(owners, ("conditions", condition.name), owner)
            merged["conditions"][condition.name] = condition
            condition_owner[condition.name] = owner
            origins[("conditions", condition.name)] = fragment.origin("condition", condition.name) or fragment.source
        for key in fragment.defaults.model_fields_set:
            value = getattr(fragment.defaults, key)
            defaults.setdefault(key, set()).add(tuple(value) if isinstance(value, list) else value)
    user_names = {
        "datasets": set(user.datasets) if user else set(),
        "retrievers": set(user.retrievers) if user else set(),
        "conditions": {c.name for c in user.conditions} if user else set(),
    }
    for (section, name), who in owners.items():
        if len(who) > 1:
            del merged[section][name]
            if name not in user_names[section]:  # the user's own entry settles it
                problems.append(
                    f"{section[:-1]} {name!r} is defined by {len(who)} plugins ({', '.join(who)}), so neither is used"
                )
    chosen = {key: next(iter(values)) for key, values in defaults.items() if len(values) == 1}
    for key, values in defaults.items():
        if len(values) > 1 and not (user and key in user.defaults.model_fields_set):
            problems.append(f"plugins disagree on the default {key} ({', '.join(sorted(map(str, values)))})")
    if "metrics" in chosen:
        chosen["metrics"] = list(chosen["metrics"])
    default = Defaults(**chosen)
    if user is not None:
        merged["datasets"].update(user.datasets)
        merged["retrievers"].update(user.retrievers)
        for section in ("datasets", "retrievers"):
            origins.update(
                {(section, name): user.origin(section[:-1], name) or user.source for name in getattr(user, section)}
            )
        merged["conditions"].update({c.name: c for c in user.conditions})
        origins.update(
            {("conditions", c.name): user.origin("condition", c.name) or user.source for c in user.conditions}
        )
        default = default.model_copy(update={k: getattr(user.defaults, k) for k in user.defaults.model_fields_set})
    # a plugin's condition may name another plugin's dataset: one that does not fit it is
    # dropped with a problem naming its plugin, not allowed to break the whole registry
    for name, condition in list(merged["conditions"].items()):
        entry = merged["datasets"].get(condition.dataset)
        if entry is not None and entry.splits and condition.split not in entry.splits:
            del merged["conditions"][name]
            where = f"plugin {condition_owner[name]}" if name not in user_names["conditions"] else "your registry"
            problems.append(
                f"condition {name!r} ({where}) is left out: split {condition.split!r} is not among "
                f"datasets.{condition.dataset}.splits {entry.splits}"
            )
    sources = [owner for owner, _ in fragments]
    try:
        registry = Registry(
            defaults=default,
            datasets=merged["datasets"],
            retrievers=merged["retrievers"],
            conditions=list(merged["conditions"].values()),
        )
    except ValidationError as exc:
        raise HarnessError(_format_error("registry", exc)) from None
    registry.source = (
        ", ".join(
            ([f"plugins ({', '.join(sorted(set(sources)))})"] if sources else []) + ([user.source] if user else [])
        )
        or "(empty)"
    )
    registry._origins = origins
    return registry, problems


def _own(owners: dict[tuple[str, str], list[str]], key: tuple[str, str], owner: str) -> None:
    """Record ``owner`` as defining ``key`` (once: a plugin may ship several files)."""
    found = owners.setdefault(key, [])
    if owner not in found:
        found.append(owner)
