"""The plugin hooks. Every hook is documented in ``docs/plugin-hooks.md``.

Each ``register_*`` hook receives a ``register`` callable; call it once per thing your plugin
provides. Hooks are called once per process, when the harness first needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pluggy

hookspec = pluggy.HookspecMarker("harness")
hookimpl = pluggy.HookimplMarker("harness")


class Register(Protocol):
    """What a ``register_*`` hook is handed: ``register(MyRetriever)``, or
    ``register("my_plugin.retriever:MyRetriever", name="mine")`` so that the class is imported
    only when a run uses it (a run imports only the code of the components it runs)."""

    def __call__(self, component: type[Any] | str, name: str | None = None) -> None: ...


@hookspec
def register_datasets(register: Register) -> None:
    """Register :class:`harness.Dataset` subclasses: ``register(MyDataset)``, or by path,
    ``register("my_plugin.data:MyDataset", name="mine")``, imported when first used."""


@hookspec
def register_retrievers(register: Register) -> None:
    """Register :class:`harness.Retriever` (or :class:`harness.Reranker`) subclasses."""


@hookspec
def register_metrics(register: Register) -> None:
    """Register :class:`harness.Metric` subclasses (one per metric family)."""


@hookspec
def register_executors(register: Register) -> None:
    """Register :class:`harness.Executor` subclasses: where ``--executor NAME`` runs work (Ray)."""


@hookspec
def register_presets(register: Callable[[Path | str], None]) -> None:
    """Register registry files your plugin ships (YAML in ``registry.yaml``'s format, usually
    package data): named retriever and dataset presets, reproduction conditions, defaults."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``harness`` command line; ``cli`` is its ``click.Group``."""


@hookspec(historic=True)
def add_hookspecs(manager: Any) -> None:
    """Offer hooks and component kinds of your own to other plugins (pytest's ``pytest_addhooks``):
    ``manager.add_hookspecs(module)`` and ``manager.add_component_kind(hook, base, kind)``.
    Called once for every plugin, whenever it is registered."""
