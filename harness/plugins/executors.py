"""Executors by name: ``make_executor`` finds ``local`` or one a plugin registers, and the
command-line options a command that runs work offers (``run``, ``train``, a plugin's own
command such as ``harness synthesize``) to choose one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import click

from harness.errors import HarnessError
from harness.plugins import PluginManager, get_plugin_manager

if TYPE_CHECKING:
    from harness.executors import Executor

#: executors first-party plugins provide, and the distribution that has each
_PLUGINS = {"ray": "stark-harness-ray"}


def make_executor(name: str, params: dict[str, Any] | None = None, plugins: PluginManager | None = None) -> Executor:
    """The executor ``name`` (``local``, or one a plugin registers) constructed with ``params``."""
    # pydantic (executors' options) loads when an executor is made, not when a command adds the options
    from harness.executors import LocalExecutor

    if name == LocalExecutor.name:
        return LocalExecutor(**(params or {}))
    if plugins is None:
        plugins = get_plugin_manager()
    components = plugins.components
    known: Mapping[str, type[Any]] = components.by_kind.get("executor", {})
    if name not in known and (("executor", name) not in components.clashes):
        hint = f" (pip install '{_PLUGINS[name]}')" if name in _PLUGINS else ""
        names = ", ".join(sorted({LocalExecutor.name, *known}))
        raise HarnessError(f"unknown executor {name!r}{hint}; known: {names}{components.failure_hint()}")
    executor: type[Executor] = components.get("executor", name)  # registered as an Executor subclass
    return executor(**(params or {}))


def executor_options(command: Callable[..., Any] | None = None, *, devices: bool = True) -> Any:
    """``--executor``, ``--address``, ``--num-gpus-per-worker``, ``--workers`` and (unless
    ``devices=False``) ``--devices``: shared by ``run``, ``train`` and plugins' commands
    (``harness synthesize``); :func:`executor_from_options` turns them into an executor."""
    if command is None:
        return lambda command: executor_options(command, devices=devices)
    options = [
        click.option(
            "--executor",
            default="local",
            show_default=True,
            help="where encoding, search shards and LLM calls run: local (this process) or ray (a Ray cluster's "
            "workers; pip install 'stark-harness-ray'); the results are the same",
        ),
        click.option(
            "--address",
            help="--executor ray: the cluster (auto: the one `ray start --head` started here; HOST:PORT; ray://HOST:PORT)",
        ),
        click.option("--num-gpus-per-worker", type=float, help="--executor ray: GPUs each worker holds (default 0)"),
        click.option("--workers", type=int, help="--executor ray: worker processes (default: one per CPU or GPU)"),
        click.option(
            "--devices",
            help="encode documents on several devices of this machine at once, one process each (cuda:0,cuda:1; "
            "cpu,cpu); without Ray",
        ),
    ][: None if devices else -1]
    for option in reversed(options):
        command = option(command)
    return command


def executor_from_options(
    executor: str, address: str | None, num_gpus_per_worker: float | None, workers: int | None
) -> Executor:
    """The executor :func:`executor_options` name, with the settings given (a setting the
    executor does not have is one error: ``--address`` means nothing to ``local``)."""
    given = {"address": address, "num_gpus_per_worker": num_gpus_per_worker, "workers": workers}
    params = {name: value for name, value in given.items() if value is not None}
    if executor == "local" and params:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in params)
        raise HarnessError(f"{flags}: for --executor ray (the local executor runs in this process)")
    return make_executor(executor, params)
