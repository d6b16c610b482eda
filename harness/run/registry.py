"""The registry a run resolves names in: the presets of the loaded plugins, with the user's
``registry.yaml`` on top, every entry's parameters checked against its component's ``Options``.
The file format, its models and the merge are ``harness.plugins.presets``."""

from __future__ import annotations

import os

from pydantic import ValidationError

from harness.errors import HarnessError
from harness.options import describe_errors
from harness.plugins import PluginManager, get_plugin_manager, using
from harness.plugins.presets import (
    Condition,
    DatasetEntry,
    Defaults,
    Registry,
    RetrieverEntry,
    merge,
    parse_registry,
    read_registry,
    user_registry_path,
)

__all__ = [
    "Condition",
    "DatasetEntry",
    "Defaults",
    "Registry",
    "RetrieverEntry",
    "check_parameters",
    "load_registry",
    "merge",
    "parse_registry",
    "read_registry",
    "user_registry_path",
]


def load_registry(
    path: str | os.PathLike[str] | None = None, plugins: PluginManager | None = None, check_all: bool = False
) -> Registry:
    """The registry: the presets of the loaded plugins (``plugins``, a
    :class:`harness.plugins.PluginManager`; the process-wide one by default) with the user's
    file on top (see the module docstring for where it is looked for)."""
    if plugins is None:
        plugins = get_plugin_manager()
    found = user_registry_path(path)
    registry, problems = merge(plugins.presets(), read_registry(found) if found else None)
    registry._problems = problems + check_parameters(registry, plugins, check_all)
    return registry


def check_parameters(registry: Registry, plugins: PluginManager, load: bool = False) -> list[str]:
    """Every entry's parameters validated against its component's ``Options`` (entries whose
    plugin is not installed are left to ``harness list``, which hides them): one problem per
    bad entry. With ``load`` every component is imported to check it (``harness list``); without,
    only those already imported are, and a run checks the entries it uses when it resolves them."""
    problems = []
    components = plugins.components
    for kind, entries in (("dataset", registry.datasets), ("retriever", registry.retrievers)):
        for name, entry in entries.items():
            found = components.by_kind.get(kind)
            if found is None or entry.plugin not in found:
                continue
            # a component not imported yet is checked when it runs (or by `harness list`), so that
            # loading the registry imports no plugin's code
            try:
                cls = found[entry.plugin] if load else found.loaded(entry.plugin)
            except HarnessError as exc:
                problems.append(f"{kind} {name!r}: {exc}")
                continue
            options = getattr(cls, "Options", None)
            if options is None:
                continue
            try:
                with using(plugins):  # validators may look up other components (an LLM provider)
                    options.model_validate(entry.params)
            except ValidationError as exc:
                problems.append(f"{kind} {name!r}: bad parameters: {describe_errors(exc)}")
            except HarnessError as exc:
                problems.append(f"{kind} {name!r}: {exc}")
    return problems
