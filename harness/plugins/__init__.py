"""Finding and loading plugins.

Plugins are found through the ``harness`` entry-point group, first-party and third-party
alike, and as single ``.py`` files in ``--plugins-dir`` directories (``HARNESS_PLUGINS_DIR``).
``HARNESS_PLUGINS`` (comma-separated entry-point names) restricts which load;
an empty value loads none. A plugin that fails to import, or raises inside a hook, is
recorded with its error and skipped; the others keep working. When two plugins register
the same name, neither is used: the name is ambiguous, every command warns, and a run that
names it stops with an error saying which plugins clash (uninstall one, or choose with
``HARNESS_PLUGINS``). A plugin must never silently stand in for another.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from harness.errors import HarnessError
from harness.io import stable_hash
from harness.plugins import hookspecs
from harness.plugins.components import (
    ENV_VAR,
    ComponentMap,
    Components,
    LazyComponent,
    PluginFailure,
    clash_message,
    component_name,
    describe_exception,
    load_class,
    registration_problem,
)

ENTRY_POINT_GROUP = "harness"
#: ``os.pathsep``-separated directories of single-file plugins (what ``--plugins-dir`` sets)
DIRS_ENV_VAR = "HARNESS_PLUGINS_DIR"
__all__ = [
    "ENV_VAR",
    "ComponentMap",
    "Components",
    "LazyComponent",
    "PluginFailure",
    "PluginManager",
    "clash_message",
    "get_plugin_manager",
    "lookup",
    "reset_plugin_manager",
    "using",
]

#: Built-in plugins, registered exactly like installed ones: the metrics. The command line adds
#: its own commands the same way when it starts (``harness.cli.COMMAND_PLUGINS``): the plugin
#: manager never imports the layer above it, and the library API loads no command.
DEFAULT_PLUGINS = ("harness.plugins.builtin_metrics",)

#: hook name -> (base class its components must subclass, kind shown in messages); plugins
#: add kinds of their own through ``add_hookspecs`` (harness-llm adds "llm").
#: (Base classes are named, not imported: numpy and pydantic load only when components are needed.)
COMPONENT_HOOKS: dict[str, tuple[type[Any] | str, str]] = {
    "register_datasets": ("harness.dataset:Dataset", "dataset"),
    "register_retrievers": ("harness.retriever:Retriever", "retriever"),
    "register_metrics": ("harness.metrics:Metric", "metric"),
    "register_executors": ("harness.executors:Executor", "executor"),
}


class PluginManager:
    """Wraps a pluggy manager: loads entry points defensively, collects components."""

    def __init__(self, load_entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager("harness")
        self.pm.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        self.distributions: dict[str, str] = {}
        self.component_hooks: dict[str, tuple[type[Any] | str, str]] = dict(COMPONENT_HOOKS)
        self._hookspec_modules: list[object] = []
        self._directory_modules: set[str] = set()
        self._components: Components | None = None
        self._presets: list[tuple[str, Any]] | None = None
        self.pm.hook.add_hookspecs.call_historic(kwargs={"manager": self})
        for module_name in DEFAULT_PLUGINS:
            self.pm.register(importlib.import_module(module_name), name=module_name)
        if load_entry_points:  # what is installed, and the --plugins-dir files
            self._load_entry_points()
            for directory in plugins_dirs():
                self.load_directory(directory)

    # -- what plugins may add -----------------------------------------------------------
    def add_hookspecs(self, module: ModuleType | type[Any]) -> None:
        """Hook specifications a plugin offers other plugins (call from ``add_hookspecs``); a
        module already added is not added again."""
        if module not in self._hookspec_modules:
            self._hookspec_modules.append(module)
            self.pm.add_hookspecs(module)

    def add_component_kind(self, hook: str, base: type[Any] | str, kind: str) -> None:
        """Components registered through ``hook`` must subclass ``base`` (a class, or its dotted
        path ``"package.module:Class"``, imported only when components are collected); ``kind``
        names them in messages and ``harness list``."""
        self.component_hooks[hook] = (base, kind)
        self._components = None

    def load_directory(self, directory: str | Path) -> None:
        """Register every ``*.py`` file in ``directory`` as a plugin (``--plugins-dir``)."""
        folder = Path(directory)
        if not folder.is_dir():
            raise HarnessError(f"--plugins-dir {folder}: not a directory")
        for path in sorted(folder.glob("*.py")):
            name = f"{folder.name}/{path.name}"
            # one module per file, whatever folder it is in: the name says which file it is
            module_name = f"harness_plugin_{stable_hash(str(path.resolve()), 8)}_{path.stem}"
            if module_name in self._directory_modules:
                continue  # this very file is loaded already
            if self.pm.has_plugin(name):
                self.failures.append(PluginFailure(name, f"{path}: another plugins directory has a file named so"))
                continue
            try:
                spec = importlib.util.spec_from_file_location(module_name, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"cannot import {path}")
                module = importlib.util.module_from_spec(spec)
                # in sys.modules while it runs, as an import would be: pydantic resolves the
                # module's postponed annotations (``from __future__ import annotations``) there
                sys.modules[module_name] = module
                spec.loader.exec_module(module)
            except Exception as exc:
                sys.modules.pop(module_name, None)
                self.failures.append(PluginFailure(name, describe_exception(exc)))
                continue
            self._directory_modules.add(module_name)
            self.register(module, name)

    def _load_entry_points(self) -> None:
        allowed = os.environ.get(ENV_VAR)
        allow = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if allow is not None and entry_point.name not in allow:
                continue
            if self.pm.has_plugin(entry_point.name):
                continue
            try:
                plugin = entry_point.load()
            except Exception as exc:  # a broken plugin must not take the others down
                self.failures.append(PluginFailure(entry_point.name, describe_exception(exc)))
                continue
            self.register(plugin, entry_point.name)
            if entry_point.dist is not None:
                self.distributions[entry_point.name] = f"{entry_point.dist.name} {entry_point.dist.version}"

    def register(self, plugin: ModuleType | object, name: str) -> None:
        """Register a plugin object (a module or any object with ``@hookimpl`` methods)."""
        try:
            self.pm.register(plugin, name=name)
        except Exception as exc:
            self.failures.append(PluginFailure(name, describe_exception(exc)))
        self._components = None
        self._presets = None

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self._components = None
        self._presets = None

    def presets(self) -> list[tuple[str, Any]]:
        """The registry files plugins ship, parsed: ``(plugin name, Registry)`` pairs. A plugin
        whose file is missing or invalid is recorded as failed; the others' presets stay."""
        if self._presets is None:
            # yaml and pydantic load when presets are first read, not for `harness --help`
            from harness.plugins.presets import parse_registry

            found: list[tuple[str, Any]] = []
            for impl in self.pm.hook.register_presets.get_hookimpls():
                paths: list[Path | str] = []
                try:
                    impl.function(register=paths.append)
                    for path in paths:
                        text = Path(path).read_text(encoding="utf-8")
                        found.append((impl.plugin_name, parse_registry(text, str(path))))
                except Exception as exc:
                    self.failures.append(PluginFailure(impl.plugin_name, describe_exception(exc), "register_presets"))
            self._presets = found
        return self._presets

    @property
    def components(self) -> Components:
        if self._components is None:
            self._components = self._collect()
        return self._components

    def _collect(self) -> Components:
        rerun = (*self.component_hooks, "register", "add_component_kind")
        self.failures = [f for f in self.failures if f.hook not in rerun]
        components = Components(failures=self.failures)
        for hook_name, (named, kind) in self.component_hooks.items():
            registered = components.by_kind.setdefault(kind, ComponentMap())
            # Sorted so that a name clash resolves the same way on every machine.
            caller = getattr(self.pm.hook, hook_name, None)  # None: no plugin implements it yet
            impls = sorted(caller.get_hookimpls() if caller else [], key=lambda i: i.plugin_name)
            base = _KindBase(named)
            for impl in impls:
                plugin_name = impl.plugin_name
                staged: dict[str, type[Any] | LazyComponent] = {}

                def register(
                    component: type[Any] | str,
                    name: str | None = None,
                    _kind: str = kind,
                    _base: _KindBase = base,
                    _staged: dict[str, type[Any] | LazyComponent] = staged,
                    _plugin: str = plugin_name,
                ) -> None:
                    if isinstance(component, str):  # "package.module:Class", imported when first used
                        if ":" not in component or not name:
                            raise TypeError(f"register({component!r}) needs 'package.module:Class' and name=...")
                        _staged[name] = LazyComponent(component, name, _plugin, _kind, _base)
                        return
                    problem = registration_problem(component, _base())
                    if problem is not None:
                        raise TypeError(problem)
                    key = name or component_name(component)
                    if not key:
                        raise TypeError(f"{component.__name__} has no name")
                    _staged[key] = component

                try:
                    impl.function(register=register)
                except _BrokenKind:
                    break
                except Exception as exc:
                    self.failures.append(PluginFailure(plugin_name, describe_exception(exc), hook_name))
                    continue
                for key, component in staged.items():
                    if (kind, key) in components.clashes:
                        components.clashes[(kind, key)].append(plugin_name)
                    elif key in registered:
                        components.clashes[(kind, key)] = [components.owner.pop((kind, key)), plugin_name]
                        registered.remove(key)
                    else:
                        registered.add(key, component)
                        components.owner[(kind, key)] = plugin_name
            if not registered and base.error is None:
                try:  # a kind nothing uses yet costs nothing to check
                    base()
                except _BrokenKind:
                    pass
            if base.error is not None:  # the plugin offering this kind is broken: only its kind is lost
                users = ", ".join(i.plugin_name for i in impls) or "none"
                error = f"the {kind} base class {named!r} does not load ({base.error}); plugins using it: {users}"
                self.failures.append(PluginFailure(f"{kind} kind", error, "add_component_kind"))
                components.by_kind[kind] = ComponentMap()
        for (kind, key), owners in components.clashes.items():
            for owner in owners:
                self.failures.append(PluginFailure(owner, clash_message(kind, key, owners), "register"))
        return components

    def add_commands(self, cli: Any) -> None:
        for impl in self.pm.hook.register_commands.get_hookimpls():
            try:
                impl.function(cli=cli)
            except Exception as exc:
                self.failures.append(PluginFailure(impl.plugin_name, describe_exception(exc), "register_commands"))

    def load_all(self) -> Components:
        """The components, every one imported; those that do not load are recorded as failures
        of their plugin and left out (what the commands that list everything use)."""
        components = self.components
        components.load_all({kind: hook for hook, (_, kind) in self.component_hooks.items()})
        return components

    def describe(self, hook: str | None = None) -> list[dict[str, Any]]:
        """Installed plugins and the hooks they implement (``harness plugins``); every component
        is imported, so that one whose code does not load is shown with its plugin's errors."""
        self.load_all()
        rows = []
        for name, plugin in self.pm.list_name_plugin():
            hooks = sorted(impl.name for impl in self.pm.get_hookcallers(plugin) or [])
            if hook is not None and hook not in hooks:
                continue
            row: dict[str, Any] = {"name": name, "hooks": hooks}
            if name in self.distributions:
                row["package"] = self.distributions[name]
            if name in DEFAULT_PLUGINS or name.startswith("harness."):  # the core's own modules
                row["builtin"] = True
            errors = [f.error for f in self.failures if f.plugin == name]
            if errors:
                row["errors"] = errors
            rows.append(row)
        for failure in self.failures:
            if failure.hook is None and hook is None:
                rows.append({"name": failure.plugin, "hooks": [], "errors": [failure.error]})
        return rows


def plugins_dirs() -> list[str]:
    value = os.environ.get(DIRS_ENV_VAR, "")
    return [part for part in value.split(os.pathsep) if part]


class _BrokenKind(Exception):
    """The base class of a component kind does not load."""


class _KindBase:
    """A component kind's base class, imported when a component of the kind is first checked: a
    kind whose components are all registered by path costs no import until one is used."""

    def __init__(self, named: type[Any] | str) -> None:
        self.named = named
        self.error: str | None = None
        self._class: type[Any] | None = None if isinstance(named, str) else named

    def __call__(self) -> type[Any]:
        if self._class is None:
            if self.error is not None:
                raise _BrokenKind(self.error)
            try:
                self._class = load_class(self.named)
            except Exception as exc:
                self.error = describe_exception(exc)
                raise _BrokenKind(self.error) from exc
        return self._class


_manager: PluginManager | None = None
#: the manager a run (or a resolution) is using, when it is not the process-wide one
_active: ContextVar[PluginManager | None] = ContextVar("harness_plugin_manager", default=None)


def get_plugin_manager() -> PluginManager:
    """The plugin manager in use: the one a run or resolution is using, else the process-wide
    one, created on first use."""
    active = _active.get()
    if active is not None:
        return active
    global _manager
    if _manager is None:
        _manager = PluginManager()
    return _manager


@contextmanager
def using(manager: PluginManager) -> Iterator[None]:
    """Make ``manager`` the one components look others up in (``lookup``) while inside."""
    token = _active.set(manager)
    try:
        yield
    finally:
        _active.reset(token)


def lookup(kind: str, name: str) -> type[Any]:
    """The component class registered as ``name`` of ``kind`` ("retriever", "llm", ...) in the
    plugin manager in use; a :class:`HarnessError` naming the known ones if there is none."""
    return get_plugin_manager().components.get(kind, name)


def reset_plugin_manager() -> None:
    """Forget the process-wide manager (tests, or after changing ``HARNESS_PLUGINS``)."""
    global _manager
    _manager = None


#: what a ``register_*`` hook is handed: ``register(Class)``, or ``register("pkg.module:Class", name=...)``
#: to import the class only when a run uses it
Register = Callable[..., None]
