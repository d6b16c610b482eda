"""The ``harness`` command line: the group, error reporting and plugin loading.

Every command is added by a plugin through ``register_commands``, the built-in ones too
(``harness.cli.run``, ``harness.cli.inspect``, ... are listed in :data:`COMMAND_PLUGINS` and
registered on the plugin manager when the command line starts), so a third party's command is
added exactly like ours.
Commands import what they need inside their functions: ``harness --help`` loads no numerics.
"""

from __future__ import annotations

import errno
import importlib
import logging
import os
import sys
import sysconfig
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from harness.errors import HarnessError

#: the built-in commands, each module a plugin registered like an installed one
COMMAND_PLUGINS = (
    "harness.cli.run",
    "harness.cli.train",
    "harness.cli.inspect",
    "harness.cli.evaluate",
    "harness.cli.submit",
    "harness.cli.leaderboard",
)

#: where a ``file:line`` of an error is not worth showing: the harness itself and the stdlib
_HARNESS_ROOT = str(Path(__file__).resolve().parents[1])


class HarnessGroup(click.Group):
    """The top-level group. Commands come from the plugin manager, added on first lookup (and
    again when the manager is replaced, e.g. by ``--plugins-dir``). An error becomes one line on
    stderr and exit status 2: the message, and for an exception raised in code (a plugin's,
    say) the file and line it came from; ``--traceback`` or ``HARNESS_DEBUG=1`` adds the whole
    traceback."""

    _loaded_for: tuple[int, frozenset[str]] | None = None

    def load_plugin_commands(self) -> Any:
        from harness.plugins import get_plugin_manager

        manager = get_plugin_manager()
        for module_name in COMMAND_PLUGINS:
            if not manager.pm.has_plugin(module_name):
                manager.register(importlib.import_module(module_name), module_name)
        key = (id(manager), frozenset(name for name, _ in manager.pm.list_name_plugin()))
        if self._loaded_for != key:
            self.commands = {}
            manager.add_commands(self)
            self._loaded_for = key
        return manager

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self.load_plugin_commands()
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt as exc:
            # not click's bare "Aborted!": what was kept and how to go on (a run says which)
            click.echo(getattr(exc, "message", None) or "interrupted", err=True)
            sys.exit(130)
        except Exception as exc:
            if ctx.meta.get("harness.traceback") or os.environ.get("HARNESS_DEBUG") == "1":
                from harness.run.secrets import redact

                click.echo(redact("".join(traceback.format_exception(exc))).rstrip("\n"), err=True)
            fail(exc)


def fail(exc: BaseException) -> None:
    """Print ``exc`` as one ``error:`` line (secrets redacted) and exit with status 2."""
    from harness.run.secrets import redact

    machine = _machine_error(exc)
    if machine is not None:
        message, where = machine, None  # the file system's fault, not the code's: no frame to show
    else:
        message = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
        where = _origin(exc)
    click.echo(redact(f"error: {message}" + (f" (at {where})" if where else "")), err=True)
    sys.exit(2)


#: errors of the file system (not of the code) that one line with the cause and the path explains
_MACHINE_ERRNOS = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied"}


def _machine_error(exc: BaseException) -> str | None:
    """A full disk, a read-only file system, a file denied: the cause and the path, in words; in
    a harness error that wraps one (``... failed to build: OSError: ...``), its context kept."""
    if isinstance(exc, HarnessError) and not isinstance(exc, OSError):
        cause = exc.__cause__
        said = _machine_cause(cause) if isinstance(cause, OSError) else None
        raw = f"{type(cause).__name__}: {cause}"
        return str(exc).replace(raw, said) if said is not None and raw in str(exc) else None
    return _machine_cause(exc) if isinstance(exc, OSError) else None


def _machine_cause(exc: OSError) -> str | None:
    from harness.io import no_space

    full = no_space(exc)  # also numpy's bare "N requested and M written"
    if full is not None:
        return str(full)
    cause = _MACHINE_ERRNOS.get(exc.errno) if exc.errno is not None else None
    if cause is None:
        return None
    paths = [os.fsdecode(p) for p in (exc.filename, exc.filename2) if isinstance(p, (str, bytes, os.PathLike))]
    return f"{cause}: {' -> '.join(paths)}" if paths else cause


def _origin(exc: BaseException) -> str | None:
    """``file:line in function`` of the innermost frame of the exception that started it all."""
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    if isinstance(root, HarnessError) and root is exc:
        return None  # the harness's own message says what is wrong; no frame needed
    stdlib = sysconfig.get_paths()["stdlib"]
    # the deepest frame in a plugin or library, not in the harness itself or Python's stdlib
    for frame in reversed(traceback.extract_tb(root.__traceback__)):
        if not frame.filename.startswith((_HARNESS_ROOT, stdlib)):
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return None


def use_plugins_dirs(directories: Sequence[str]) -> None:
    """Load single-file plugins from ``directories`` too (before those already configured):
    sets ``HARNESS_PLUGINS_DIR`` and forgets the plugin manager, so the next one loads them."""
    from harness.plugins import DIRS_ENV_VAR, plugins_dirs, reset_plugin_manager

    wanted = list(dict.fromkeys([*(str(Path(d)) for d in directories), *plugins_dirs()]))
    if wanted != plugins_dirs():
        os.environ[DIRS_ENV_VAR] = os.pathsep.join(wanted)
        reset_plugin_manager()


#: third-party loggers kept at WARNING in the console unless ``--verbose``
THIRD_PARTY_LOGGERS = (
    "transformers",
    "sentence_transformers",
    "huggingface_hub",
    "datasets",
    "httpx",
    "httpcore",
    "urllib3",
    "filelock",
    "openai",
    "anthropic",
    "torch",
    "faiss",
    "colbert",
    "pyserini",
    "jnius",
    "bm25s",
)


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (as click's test runner swaps it),
    with every credential in it redacted (an HTTP client logs the URLs it calls)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass

    def format(self, record: logging.LogRecord) -> str:
        from harness.run.secrets import redact  # at the first record: `harness --help` imports no numerics

        return redact(super().format(record))


def set_verbosity(verbose: bool) -> None:
    """``--verbose`` (or ``HARNESS_VERBOSE=1``): third-party INFO logs reach the console, and
    plugins see ``HARNESS_VERBOSE=1`` (Java's, say, follow it); otherwise those loggers stay
    at WARNING whatever a library configures. Either way log records and ``warnings.warn`` go
    through one redacting stderr handler: Python's last-resort handler and ``showwarning``
    would print them unredacted."""
    verbose = verbose or os.environ.get("HARNESS_VERBOSE") == "1"
    level = logging.INFO if verbose else logging.WARNING
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, _Stderr)), None)
    if handler is None:
        handler = _Stderr()
        root.addHandler(handler)
    # quiet: WARNING and above, as the last-resort handler printed them; verbose: what passes the loggers
    handler.setLevel(logging.NOTSET if verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s"))
    logging.captureWarnings(True)
    if verbose:
        os.environ["HARNESS_VERBOSE"] = "1"
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "info")  # transformers sets its own level on import
        if root.getEffectiveLevel() > logging.INFO:
            root.setLevel(logging.INFO)
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(level)


def _verbose_option(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    # eager: in force before the command (and what it imports) runs
    set_verbosity(value)


def _plugins_dir_option(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
    # eager, so it takes effect before click looks the subcommand up (which loads plugins)
    if value:
        use_plugins_dirs(value)


def _early_plugins_dirs(args: Sequence[str]) -> list[str]:
    """``--plugins-dir`` values given before the command name (``harness --plugins-dir D list``)."""
    found: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--plugins-dir" and i + 1 < len(args):
            found.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--plugins-dir="):
            found.append(arg.split("=", 1)[1])
        elif not arg.startswith("-"):
            break  # the command: what follows is its own
        i += 1
    return found


@click.group(cls=HarnessGroup)
@click.version_option(package_name="stark-harness")
@click.option("--traceback", "show_traceback", is_flag=True, help="print the whole traceback of an error")
@click.option(
    "--plugins-dir",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    is_eager=True,
    expose_value=False,
    callback=_plugins_dir_option,
    help="also load every *.py file in DIR as a plugin (repeatable; $HARNESS_PLUGINS_DIR)",
)
@click.option(
    "--verbose",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_verbose_option,
    help="show third-party libraries' INFO logs (models, HTTP, Java); sets $HARNESS_VERBOSE=1",
)
@click.pass_context
def cli(ctx: click.Context, show_traceback: bool) -> None:
    """Evaluate retrieval on semi-structured knowledge bases (STaRK and friends)."""
    ctx.meta["harness.traceback"] = show_traceback


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: load plugins (and their commands), warn about broken ones, run the CLI."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        directories = _early_plugins_dirs(args)
        if directories:
            use_plugins_dirs(directories)
        manager = cli.load_plugin_commands()
        if args and not {"--help", "--version"} & set(args):
            _warn_about_plugins(manager)  # not for help: collecting components imports every plugin's classes
    except HarnessError as exc:
        fail(exc)
    cli.main(args, prog_name="harness")


def _warn_about_plugins(manager: Any) -> None:
    from harness.plugins import clash_message

    warn = click.style("warning:", fg="yellow")
    clashes = manager.components.clashes
    for failure in manager.failures:
        if failure.hook != "register":  # clashes are reported once each, below
            click.echo(f"{warn} plugin {failure.plugin!r} failed to load: {failure.error}", err=True)
    for message in sorted({clash_message(k, n, o) for (k, n), o in clashes.items()}):
        click.echo(f"{warn} {message}", err=True)


if __name__ == "__main__":
    main()
