"""``harness submit``: runs bundled into one archive for the leaderboard's maintainers."""

from __future__ import annotations

import click

from harness.cli.common import stdout
from harness.plugins.hookspecs import hookimpl


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "-o", default="submission.tar.gz", show_default=True, type=click.Path(dir_okay=False))
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files")
@click.option("--no-validate", is_flag=True, help="bundle without checking the runs first")
def submit(run_dirs: tuple[str, ...], out: str, data_dir: str | None, no_validate: bool) -> None:
    """Bundle runs (their rows, per-query results, TREC runs) and this environment into one
    archive for `harness leaderboard validate` and `merge`. RUN_DIRS are run directories
    written by `harness run`, or a directory holding them."""
    from harness.leaderboard.submit import bundle

    manifest = bundle(list(run_dirs), out, check=not no_validate, data_dir=data_dir)
    stdout.print(
        f"wrote {out}: {len(manifest['runs'])} runs, {len(manifest['files'])} files, "
        f"harness {manifest['harness']}, Python {manifest['environment']['python']}"
    )
    for run in manifest["runs"]:
        stdout.print(f"  {run}", highlight=False)


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(submit)
