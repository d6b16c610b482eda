"""What plugins registered: components by kind and name (``ComponentMap``), with who registered
each and which names clash. A component registered by its import path is imported on first use."""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from harness.errors import HarnessError

#: restricts which entry points load (comma-separated names); named here for clash messages
ENV_VAR = "HARNESS_PLUGINS"


@dataclass
class PluginFailure:
    plugin: str
    error: str
    hook: str | None = None


class LazyComponent:
    """A component registered by its import path (``register("pkg.module:Class", name=...)``):
    its module is imported when the component is first used, so that a run imports only the
    code of the components it runs."""

    def __init__(self, path: str, name: str, plugin: str, kind: str, base: Callable[[], type[Any]]) -> None:
        self.path, self.name, self.plugin, self.kind, self.base = path, name, plugin, kind, base

    def load(self) -> type[Any]:
        try:
            component = load_class(self.path)
        except Exception as exc:
            raise HarnessError(
                f"{self.kind} {self.name!r} of plugin {self.plugin!r} does not load: "
                f"{self.path}: {describe_exception(exc)}"
            ) from exc
        try:
            base = self.base()
        except Exception as exc:
            raise HarnessError(
                f"{self.kind} {self.name!r} of plugin {self.plugin!r}: the {self.kind} base class does not load: {exc}"
            ) from exc
        problem = registration_problem(component, base)
        if problem is None and component_name(component) != self.name:
            problem = f"{self.path} is named {component_name(component)!r}, registered as {self.name!r}"
        if problem is not None:
            raise HarnessError(f"{self.kind} {self.name!r} of plugin {self.plugin!r}: {problem}")
        return component


class ComponentMap(Mapping[str, type[Any]]):
    """The components of one kind by name. Names are known without importing anything; a
    component registered by its import path is imported on first lookup (``map[name]``)."""

    def __init__(self) -> None:
        self._entries: dict[str, type[Any] | LazyComponent] = {}

    def __getitem__(self, name: str) -> type[Any]:
        entry = self._entries[name]
        if isinstance(entry, LazyComponent):
            entry = self._entries[name] = entry.load()
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def load_all(self, failures: list[PluginFailure], hook: str) -> None:
        """Import every component registered by path; one that does not load is recorded in
        ``failures`` and left out, as a plugin that fails to import is (``harness list``,
        ``harness plugins``: the commands that show everything)."""
        for name, entry in list(self._entries.items()):
            if isinstance(entry, LazyComponent):
                try:
                    self._entries[name] = entry.load()
                except HarnessError as exc:
                    failures.append(PluginFailure(entry.plugin, str(exc), hook))
                    del self._entries[name]

    def loaded(self, name: str) -> type[Any] | None:
        """The component ``name`` if its code is loaded already (else None: nothing is imported)."""
        entry = self._entries.get(name)
        return None if entry is None or isinstance(entry, LazyComponent) else entry

    def add(self, name: str, entry: type[Any] | LazyComponent) -> None:
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        del self._entries[name]


@dataclass
class Components:
    """Everything plugins registered, by kind and name, with who registered it."""

    by_kind: dict[str, ComponentMap] = field(default_factory=dict)
    owner: dict[tuple[str, str], str] = field(default_factory=dict)
    failures: list[PluginFailure] = field(default_factory=list)
    #: (kind, name) → every plugin that registered it, where more than one did
    clashes: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def get(self, kind: str, name: str) -> type[Any]:
        if (kind, name) in self.clashes:
            raise HarnessError(clash_message(kind, name, self.clashes[(kind, name)]))
        found = self.by_kind.get(kind, ComponentMap())
        if name not in found:
            known = ", ".join(sorted(found)) or "none installed"
            raise HarnessError(f"unknown {kind} {name!r}; known: {known}{self.failure_hint()}")
        return found[name]

    def load_all(self, hooks: Mapping[str, str]) -> None:
        """Every component imported (``hooks``: kind → the hook that registers it, for the
        failures recorded of those that do not load)."""
        for kind, found in self.by_kind.items():
            found.load_all(self.failures, hooks.get(kind, "register"))

    def failure_hint(self) -> str:
        """A note naming plugins that failed, for "unknown component" errors."""
        broken = "; ".join(f"{f.plugin}: {f.error}" for f in self.failures)
        return f" (plugins that failed to load: {broken})" if broken else ""


def load_class(named: type[Any] | str) -> type[Any]:
    if isinstance(named, str):
        module, _, attribute = named.partition(":")
        return getattr(importlib.import_module(module), attribute)
    return named


def registration_problem(component: Any, base: type[Any]) -> str | None:
    if not (isinstance(component, type) and issubclass(component, base)):
        return f"{component!r} is not a subclass of {base.__name__}"
    return None


def clash_message(kind: str, name: str, owners: list[str]) -> str:
    return (
        f"{kind} {name!r} is registered by {len(owners)} plugins ({', '.join(owners)}), so neither is used; "
        f"uninstall one, or load only one with {ENV_VAR}=NAME,…"
    )


def component_name(component: type[Any]) -> str:
    return cast(str, getattr(component, "family", None) or getattr(component, "name", ""))


def describe_exception(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" ({frame.filename}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{where}"
