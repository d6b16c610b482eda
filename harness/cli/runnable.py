"""What can run here: registry entries and plugin components that resolve with the installed
plugins (what ``harness list`` shows), and the parameters components declare."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError

#: why an entry is hidden, as ``harness list`` words it
NOT_INSTALLED = "its plugin is not installed"
AMBIGUOUS = "two plugins register its plugin's name"
BAD_PARAMS = "invalid parameters"
NEEDS_PARAMS = "needs parameters (a registry entry gives them)"
USES = "uses a retriever that cannot run"
CONDITION = "names an entry that cannot run"


@dataclass
class Runnable:
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    retrievers: dict[str, dict[str, Any]] = field(default_factory=dict)
    conditions: list[Any] = field(default_factory=list)
    #: {"kind", "name", "reason", "error"} per hidden entry
    hidden: list[dict[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        counts = Counter(h["reason"] for h in self.hidden)
        why = "; ".join(f"{reason} ({n})" for reason, n in counts.most_common())
        return f"{len(self.hidden)} hidden because they cannot run here: {why}"


def runnable(registry: Any, plugins: Any) -> Runnable:
    """Every registry entry and plugin component of ``registry`` and ``plugins`` (a
    :class:`harness.plugins.PluginManager`) sorted into runnable and hidden (with the reason)."""
    from harness.run.resolve import construct, resolve_dataset, resolve_retrievers

    found = Runnable()
    components = plugins.components

    def attempt(kind: str, entries: dict[str, Any], name: str, resolver: Any) -> tuple[Any, Any]:
        """(what ``resolver`` resolved or None, the registry entry or None); hidden if it failed."""
        entry = entries.get(name)
        try:
            return resolver(registry, plugins, name), entry
        except HarnessError as exc:
            found.hidden.append({"kind": kind, "name": name, "reason": why(kind, entry, name), "error": str(exc)})
            return None, entry

    def why(kind: str, entry: Any, name: str) -> str:
        plugin = entry.plugin if entry is not None else name
        if (kind, plugin) in components.clashes:
            return AMBIGUOUS
        if plugin not in components.by_kind.get(kind, {}):
            return NOT_INSTALLED
        try:
            construct(plugins, kind, name, plugin, entry.params if entry is not None else {})
        except HarnessError as exc:
            # a credential the environment lacks (``set NAME in the environment``) is not a bad parameter
            needs = re.search(r"set ([A-Z][A-Z0-9_]*) in the environment", str(exc))
            if needs:
                return f"needs ${needs.group(1)}"
            return BAD_PARAMS if entry is not None else NEEDS_PARAMS
        return USES

    for name in _names(registry.datasets, components.by_kind.get("dataset", {})):
        component, entry = attempt("dataset", registry.datasets, name, resolve_dataset)
        if component is not None:
            evaluated = list(entry.splits) if entry else []
            try:  # every split the dataset has (told cheaply: file names at most), train included
                known = component.instance.known_splits()
            except HarnessError:
                known = None
            found.datasets[name] = {
                "plugin": component.info.plugin,
                "params": entry.params if entry else {},
                # train, val, test first (the order people read them in), any others as the dataset gives them
                "splits": sorted(known, key=lambda s: (_ORDER.get(s, len(_ORDER)), known.index(s)))
                if known is not None
                else evaluated,
                "evaluated": evaluated,  # what `harness run --all` runs on
            }
    for name in _names(registry.retrievers, components.by_kind.get("retriever", {})):
        chain, entry = attempt("retriever", registry.retrievers, name, resolve_retrievers)
        if chain is not None:
            info: dict[str, Any] = {"plugin": chain[name].info.plugin, "params": entry.params if entry else {}}
            if len(chain) > 1:
                info["uses"] = [used for used in chain if used != name]
            found.retrievers[name] = info
    for condition in registry.conditions:
        if condition.retriever in found.retrievers and condition.dataset in found.datasets:
            found.conditions.append(condition)
        else:
            missing = condition.retriever if condition.retriever not in found.retrievers else condition.dataset
            hidden = {"kind": "condition", "name": condition.name, "reason": CONDITION}
            found.hidden.append({**hidden, "error": f"{missing!r} cannot run here"})
    return found


_ORDER = {"train": 0, "val": 1, "test": 2}


def _names(entries: dict[str, Any], registered: dict[str, Any]) -> list[str]:
    """Registry entries first, then plugin components no entry shadows."""
    return [*entries, *(name for name in registered if name not in entries)]


def component_params(plugins: Any) -> dict[str, dict[str, Any]]:
    """Per kind and component name, its declared parameters (``harness list --params``)."""
    from harness.options import describe_options

    components = plugins.components
    result: dict[str, dict[str, Any]] = {}
    for kind, by_name in sorted(components.by_kind.items()):
        for name, cls in sorted(by_name.items()):
            options = getattr(cls, "Options", None)
            if options is None or not hasattr(options, "model_fields"):
                continue
            owner = components.owner.get((kind, name), "")
            result.setdefault(kind, {})[name] = {
                "package": plugins.distributions.get(owner),
                "params": describe_options(options),
            }
    return result
