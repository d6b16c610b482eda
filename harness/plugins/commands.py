"""Commands a plugin adds without importing their code: ``harness.lazy_command(name,
"package.module:command", help=...)`` stands for a click command until it runs (or its
``--help`` is asked for), so that ``harness --help`` imports no plugin's numerics."""

from __future__ import annotations

from typing import Any

import click

from harness.errors import HarnessError
from harness.plugins.components import describe_exception, load_class


class LazyCommand(click.Command):
    """A command known by name and one-line help; the real one is imported when it is used."""

    def __init__(self, name: str, path: str, help: str) -> None:
        super().__init__(name, help=help, short_help=help)
        self.path = path
        self._real: click.Command | None = None

    def real(self) -> click.Command:
        if self._real is None:
            try:
                found = load_class(self.path)
            except Exception as exc:
                raise HarnessError(
                    f"command {self.name!r} does not load: {self.path}: {describe_exception(exc)}"
                ) from exc
            if not isinstance(found, click.Command):
                raise HarnessError(f"command {self.name!r}: {self.path} is not a click command")
            self._real = found
        return self._real

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        return self.real().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        return self.real().invoke(ctx)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return self.real().get_params(ctx)

    def get_help(self, ctx: click.Context) -> str:
        return self.real().get_help(ctx)

    def get_usage(self, ctx: click.Context) -> str:
        return self.real().get_usage(ctx)


def lazy_command(name: str, path: str, help: str) -> click.Command:
    """A command for ``register_commands`` that imports ``path`` ("package.module:attribute", a
    click command) only when it runs; ``help`` is its line in ``harness --help``."""
    return LazyCommand(name, path, help)
