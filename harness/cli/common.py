"""What the command modules share: output consoles, common options, JSON output, progress."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
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


def _parse_params(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """``("lam=0.5", "fields=[name, summary]")`` → ``{"lam": 0.5, "fields": ["name", "summary"]}``:
    each value read as YAML, as the registry reads it (the retriever's Options check it)."""
    if not values:
        return {}
    import yaml  # only when there are parameters to read: `harness --help` and plain runs skip it

    params: dict[str, Any] = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE, e.g. -p k1=0.9", ctx, param)
        try:
            params[key.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as exc:  # a ReaderError (a control character) has no `problem`, only its message
            problem = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else str(exc).splitlines()[0]
            raise click.BadParameter(f"{item!r}: the value is not YAML ({problem})", ctx, param) from None
    return params


def param_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--param",
        "-p",
        "retriever_params",
        multiple=True,
        callback=_parse_params,
        metavar="KEY=VALUE",
        help="override a parameter of the retriever (repeat; YAML values: 0.5, true, [a, b]); the row "
        "records it and its configuration hash changes",
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


#: the narrowest a column of free text that wraps gets in a terminal's table
WRAPPED_WIDTH = 24


def print_table(
    title: str,
    columns: list[str],
    rows: list[list[str]],
    right: set[str] | None = None,
    optional: Sequence[str] = (),
    wrap: Sequence[str] = (),
) -> None:
    """A boxed table on a terminal, every cell in full (never cut; only the ``wrap`` columns of
    free text wrap over lines): the ``optional`` columns that do not fit its width are left
    out (last first, said below it), and plain text when even the others do not fit. Plain
    text, every column, one line per row, in a pipe or a file."""
    from harness.leaderboard.rows import cell_width, plain_table  # rich loads only when a table is printed

    shown = list(columns)
    if stdout.is_terminal:
        widths = {c: max(cell_width(str(cell)) for cell in [c, *(r[i] for r in rows)]) for i, c in enumerate(columns)}
        widths |= {c: min(widths[c], WRAPPED_WIDTH) for c in wrap if c in widths}
        # rich's box: a border left of each column and one at the end, a space of padding each side
        dropped = [c for c in reversed(optional) if c in columns]
        while 1 + sum(widths[c] + 3 for c in shown) > stdout.width and dropped:
            shown.remove(dropped.pop(0))
        if 1 + sum(widths[c] + 3 for c in shown) <= stdout.width:
            result = table(title, shown, [[r[columns.index(c)] for c in shown] for r in rows], right)
            for column in result.columns:
                column.no_wrap = column.header not in wrap
                column.overflow = "fold"  # a word longer than a wrapped column breaks, never ends in "…"
                column.min_width = widths[str(column.header)]
            stdout.print(result)
            hidden = [c for c in columns if c not in shown]
            if hidden:
                stdout.print(
                    f"(hidden at {stdout.width} columns: {', '.join(hidden)}; --format json for all)",
                    style="dim",
                    highlight=False,
                    markup=False,
                )
            return
    click.echo(title)
    click.echo(plain_table(columns, rows, text_columns=set(columns) - (right or set())), nl=False)


@contextmanager
def progress() -> Iterator[Any]:
    """A live progress display on stderr (when it is a terminal) handing out tasks in the shape
    ``BuildContext`` expects, and the runner's phases (a status line from the moment a run
    starts). Nothing stays behind as a frozen spinner: a task leaves the display when it
    completes or its phase ends, as one ``✓`` line saying how long it took; a phase's own
    status line just goes."""
    if not console.is_terminal:  # nothing to show: rich's live display is not even imported
        yield _no_progress
        return
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Column
    from rich.text import Text

    # One line per task in any width: the description is the only column rich's table may
    # shrink (cut with an ellipsis, never wrapped), the bar narrows with the terminal, and
    # the numbers are never cut or wrapped (a wrapped "eta" used to land on a second line).
    out = console.real()

    def fixed() -> Column:
        return Column(no_wrap=True)

    class Description(ProgressColumn):
        """The task's description on one line, cut with ``…`` when the line is short of room."""

        def __init__(self) -> None:
            super().__init__(table_column=Column(no_wrap=False, overflow="ellipsis"))

        def render(self, task: Any) -> Any:
            return Text(task.description, no_wrap=True, overflow="ellipsis")

    class Bar(BarColumn):
        """A bar that narrows with the terminal (6 columns at 60, 13 at 80, 40 at most), leaving
        the description room to be read."""

        def render(self, task: Any) -> Any:
            self.bar_width = max(6, min(40, (out.width - 40) // 3))
            return super().render(task)

    class Count(ProgressColumn):
        """``done/total`` for a task with a total; nothing for a status line."""

        def render(self, task: Any) -> Any:
            return Text("" if task.total is None else f"{int(task.completed):,}/{int(task.total):,}")

    class TimeLeft(TimeRemainingColumn):
        """``eta H:MM:SS`` for a task with a total (once its speed is known); nothing otherwise."""

        def render(self, task: Any) -> Any:
            if task.total is None or task.finished:
                return Text("")
            return Text.assemble("eta ", super().render(task))

    display = Progress(
        SpinnerColumn(table_column=fixed()),
        Description(),
        Bar(table_column=fixed()),
        Count(table_column=fixed()),
        TimeElapsedColumn(table_column=fixed()),
        TimeLeft(table_column=fixed()),
        console=out,
        transient=True,
        disable=not console.is_terminal,
    )
    with display:
        yield _Tasks(display)


class _NoTask:
    def advance(self, amount: int = 1) -> None:
        pass

    def end(self, ok: bool = True) -> None:
        pass


class _NoProgress:
    """The ``ProgressFactory`` (with the runner's ``phase``) when stderr is no terminal."""

    def __call__(self, description: str, total: int | None = None) -> _NoTask:
        return _NoTask()

    @contextmanager
    def phase(self, description: str, total: int | None = None) -> Iterator[_NoTask]:
        yield _NoTask()


_no_progress = _NoProgress()


class _Tasks:
    """The ``ProgressFactory`` of one display, with ``phase`` for the runner."""

    def __init__(self, display: Any) -> None:
        self.display = display
        self.open: list[_Task] = []
        self.lock = threading.RLock()  # an API encoder advances its task from worker threads

    def __call__(self, description: str, total: int | None = None) -> _Task:
        # A plugin's tasks follow one another: an open one without a total (a spinner, which
        # only its phase's end would stop) is over when the next one starts.
        with self.lock:
            for task in reversed(self.open):
                if task.is_phase:
                    break
                if task.total is None:
                    task.end(ok=True)
            return _Task(self, description, total)

    @contextmanager
    def phase(self, description: str, total: int | None = None) -> Iterator[_Task]:
        """A status line (with ``total``, a bar) while the block runs; the tasks started in it end with it."""
        task = _Task(self, description, total, is_phase=True)
        ok = False
        try:
            yield task
            ok = True
        finally:
            with self.lock:
                for started in reversed(self.open[self.open.index(task) :] if task in self.open else []):
                    started.end(ok)


class _Task:
    def __init__(self, tasks: _Tasks, description: str, total: int | None, is_phase: bool = False) -> None:
        self.tasks, self.description, self.total, self.is_phase = tasks, description, total, is_phase
        with tasks.lock:
            self.id = tasks.display.add_task(description, total=total)
            self.done = 0
            self.ended = False
            tasks.open.append(self)

    def advance(self, amount: int = 1) -> None:
        with self.tasks.lock:
            if self.ended:
                return
            self.done += amount
            self.tasks.display.advance(self.id, amount)
            if self.total is not None and self.done >= self.total and not self.is_phase:
                self.end(ok=True)

    def end(self, ok: bool) -> None:
        """Take the task off the display; a finished task with a count, or a plugin's, leaves a line."""
        with self.tasks.lock:
            self._end(ok)

    def _end(self, ok: bool) -> None:
        if self.ended:
            return
        self.ended = True
        self.tasks.open.remove(self)
        display = self.tasks.display
        elapsed = next((t.elapsed for t in display.tasks if t.id == self.id), None) or 0.0
        display.remove_task(self.id)
        # a phase's status line says nothing the phase times at the end do not; work a plugin
        # or the search did is worth a line
        if ok and not display.disable and (self.total is not None or not self.is_phase):
            from rich.text import Text

            # one line too: the description gives way to the count and the time
            count = f" {self.done:,}/{self.total:,}" if self.total is not None else ""
            tail = f"{count} {elapsed:.1f} s"
            description = Text(self.description)
            description.truncate(max(1, display.console.width - 2 - len(tail)), overflow="ellipsis")
            line = Text.assemble(("✓", "green"), " ", description, count, " ", (f"{elapsed:.1f} s", "dim"))
            display.console.print(line, highlight=False, no_wrap=True, overflow="ellipsis")


def training_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--train-split`` and ``--validation-split``, shared by ``run`` and ``train``."""
    command = click.option(
        "--validation-split",
        default="val",
        show_default=True,
        help="split for early stopping of trained retrievers ('none': no early stopping); the evaluated one is "
        "dropped (with a note), one sharing queries with it refused",
    )(command)
    return click.option("--train-split", default="train", show_default=True, help="split trained retrievers train on")(
        command
    )


def seed_and_device_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--seed``, ``--seeds`` and ``--device``, shared by ``run`` and ``train``."""
    command = click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)(
        command
    )
    command = click.option(
        "--seeds",
        help="train (and evaluate) once per seed, e.g. 0,1,2: one row with each metric's mean and spread "
        "(--seed then seeds only the sample)",
    )(command)
    return click.option("--seed", type=int, default=0, show_default=True, help="training and sample seed")(command)
