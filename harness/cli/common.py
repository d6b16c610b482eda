"""What the command modules share: output consoles, common options, JSON output, progress."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click


class _LazyConsole:
    """A rich ``Console`` created on first use, so importing a command module stays cheap."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def real(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


#: progress and notes (stderr); results (stdout)
console: Any = _LazyConsole(stderr=True)
stdout: Any = _LazyConsole(soft_wrap=True)


def registry_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--registry",
        "registry_path",
        type=click.Path(dir_okay=False),
        help="registry file to add to the plugins' presets (default: $HARNESS_REGISTRY, ./registry.yaml)",
    )(func)


def format_option(*choices: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--format", "fmt", type=click.Choice(list(choices or ("table", "json"))), default="table", show_default=True
    )


def data_dir_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files (data_dir)"
    )(func)


def echo_json(data: Any) -> None:
    from harness.run.secrets import redact

    click.echo(redact(json.dumps(data, indent=2, default=str)))


def split_list(text: str | None) -> list[str] | None:
    """``"a, b,"`` → ``["a", "b"]``; None stays None."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def table(title: str | None, columns: list[str], rows: list[list[str]], right: set[str] | None = None) -> Any:
    """A rich table; columns in ``right`` are right-aligned."""
    from rich.table import Table

    result = Table(title=title)
    for column in columns:
        result.add_column(column, justify="right" if right and column in right else "left")
    for row in rows:
        result.add_row(*row)
    return result


@contextmanager
def progress() -> Iterator[Any]:
    """A rich progress display handing out tasks in the shape ``BuildContext`` expects."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    display = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console.real(),
        transient=False,
        disable=not console.is_terminal,
    )

    class _Task:
        def __init__(self, description: str, total: int | None) -> None:
            self.id = display.add_task(description, total=total)

        def advance(self, amount: int = 1) -> None:
            display.advance(self.id, amount)

    with display:
        yield _Task
