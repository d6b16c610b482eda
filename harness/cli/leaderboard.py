"""``harness leaderboard``: show, schema, validate, merge, withdraw, migrate, publish."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.common import data_dir_option, echo_json, split_list, stdout, table
from harness.plugins.hookspecs import hookimpl


@click.group()
def leaderboard() -> None:
    """Show, validate, merge, migrate and publish the leaderboard."""


@leaderboard.command()
@click.argument("path", required=False, default="leaderboard", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table", show_default=True)
@click.option("--metrics", "-m", help="columns to show, comma-separated")
@click.option("--dataset", help="only this dataset")
@click.option("--wide", is_flag=True, help="every column, as plain text when they do not fit the terminal")
def show(path: str, fmt: str, metrics: str | None, dataset: str | None, wide: bool) -> None:
    """The leaderboard (a directory or a JSON file of rows) as a table.

    In a terminal, the columns that fit its width at full width (the retriever and the first
    metrics first; a footer names the rest); piped or redirected, a plain-text table of every
    column."""
    from harness.leaderboard.rows import markdown_table, read_rows, table_rows

    rows = read_rows(Path(path))
    if dataset:
        rows = [r for r in rows if r.dataset.name == dataset]
    metric_list = split_list(metrics)
    if fmt == "json":
        echo_json([r.model_dump(mode="json") for r in rows])
    elif fmt == "markdown":
        click.echo(markdown_table(rows, metric_list), nl=False)
    else:
        header, cells = table_rows(rows, metric_list)
        show_table(f"{len(rows)} rows, metrics ×100", header, cells, wide)


def show_table(title: str, header: list[str], cells: list[list[str]], wide: bool) -> None:
    """A boxed table of the columns that fit the terminal, never a number cut or wrapped; plain
    text of every column when stdout is no terminal (or with --wide, when they do not fit)."""
    from harness.leaderboard.rows import TEXT_COLUMNS, fit_columns, plain_table

    metrics = header[header.index("n") + 1 : header.index("ms/query")]
    fit = fit_columns(header, cells, metrics, stdout.width) if stdout.is_terminal else None
    if fit is None or (wide and fit[1]):
        click.echo(f"leaderboard ({title})")
        click.echo(plain_table(header, cells), nl=False)
        return
    kept, hidden = fit
    # a hidden column every row agrees on (one dataset, one split) goes into the title
    shared = [cells[0][i] for i in hidden if header[i] in ("dataset", "split") and len({r[i] for r in cells}) == 1]
    lost = [header[i] for i in hidden if not (header[i] in ("dataset", "split") and len({r[i] for r in cells}) == 1)]
    name = "leaderboard" + (f" {'/'.join(shared)}" if shared else "")
    columns = [header[i] for i in kept]
    result = table(
        f"{name} ({title})",
        columns,
        [[row[i] for i in kept] for row in cells],
        right=set(columns) - set(TEXT_COLUMNS),
    )
    for column in result.columns:
        column.no_wrap = True  # fit_columns left room for every cell at full width
    stdout.print(result)
    if lost:
        stdout.print(
            f"({len(lost)} columns hidden at {stdout.width} columns: {', '.join(lost)}; "
            "--wide or --format markdown for all)",
            style="dim",
            highlight=False,
            markup=False,
            soft_wrap=False,  # wrapped at the terminal's width, like the table
        )


@leaderboard.command()
def schema() -> None:
    """Print the JSON Schema of a leaderboard row."""
    from harness.leaderboard.rows import json_schema

    echo_json(json_schema())


@leaderboard.command(name="validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@data_dir_option
@click.option(
    "--schema",
    "schema_file",
    type=click.Path(exists=True, dir_okay=False),
    help="JSON Schema to check rows against (default: the published one)",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def validate_cmd(paths: tuple[str, ...], data_dir: str | None, schema_file: str | None, fmt: str) -> None:
    """Check rows and their per-query results: submission archives, run directories or a
    leaderboard directory. Metrics are recomputed from the TREC runs against the dataset
    installed here. Exit status 1 when any row fails."""
    import json
    import tempfile

    from harness.leaderboard.bundles import collect
    from harness.leaderboard.validate import validate

    schema_data = json.loads(Path(schema_file).read_text(encoding="utf-8")) if schema_file else None
    with tempfile.TemporaryDirectory() as work:
        entries = [e for i, path in enumerate(paths) for e in collect(path, Path(work) / str(i))]
        results = validate(entries, data_dir, schema_data)
    if fmt == "json":
        echo_json([r.as_dict() for r in results])
    else:
        for r in results:
            what = f"{r.row.dataset.name}/{r.row.split} {r.row.retriever.name}" if r.row else ""
            if r.ok:
                stdout.print(f"[green]OK[/green]   {r.source} {what} ({', '.join(r.checks)})", highlight=False)
            else:
                stdout.print(f"[red]FAIL[/red] {r.source} {what}", highlight=False)
                for problem in r.problems:
                    stdout.print(f"     - {problem}", highlight=False, markup=False)
        failed = sum(not r.ok for r in results)
        stdout.print(f"{len(results) - failed} of {len(results)} rows valid")
    if not results or not all(r.ok for r in results):
        sys.exit(1)


@leaderboard.command(name="merge")
@click.argument("submissions", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--into", default="leaderboard", show_default=True, type=click.Path(file_okay=False))
@click.option("--supersede", is_flag=True, help="replace a row of the same name with a different configuration")
@data_dir_option
def merge_cmd(submissions: tuple[str, ...], into: str, supersede: bool, data_dir: str | None) -> None:
    """Validate submissions and add their rows to the leaderboard, all or nothing.

    The same configuration again replaces its row; another configuration under an existing
    name is refused (unless --supersede). Each merge adds an entry to CHANGELOG.md."""
    from harness.leaderboard.merge import merge

    actions = merge(list(submissions), into, data_dir, supersede)
    for action in actions:
        stdout.print(action.describe().replace("**", "").replace("`", ""), highlight=False, markup=False)
    stdout.print(f"merged {len(actions)} rows into {into} (see {Path(into) / 'CHANGELOG.md'})")


@leaderboard.command(name="withdraw")
@click.argument("retriever")
@click.option("--from", "source", default="leaderboard", show_default=True, type=click.Path(file_okay=False))
@click.option("--dataset", "-d", help="only this dataset's rows")
@click.option("--split", "-s", help="only this split's rows")
@click.option("--reason", required=True, help="why, for the changelog")
def withdraw_cmd(retriever: str, source: str, dataset: str | None, split: str | None, reason: str) -> None:
    """Take a retriever's rows (and their per-query results) off the leaderboard, with the
    reason in CHANGELOG.md: for rows that can no longer be validated or reproduced."""
    from harness.leaderboard.merge import withdraw

    for row in withdraw(source, retriever, reason, dataset, split):
        stdout.print(f"withdrew {row.dataset.name}/{row.split} {row.retriever.name} {row.config_hash}", highlight=False)


@leaderboard.command(name="migrate")
@click.argument("directory", required=False, default="leaderboard", type=click.Path(exists=True, file_okay=False))
def migrate_cmd(directory: str) -> None:
    """Rewrite the rows of an older row schema (and their run directories' config.json) to the
    current one, parameters resolved by the installed plugins; all or nothing, with a
    CHANGELOG.md entry. Then check them with `harness leaderboard validate DIRECTORY`."""
    from harness.leaderboard.migrate import migrate

    done = migrate(directory)
    for migration in done:
        stdout.print(migration.describe().replace("**", "").replace("`", ""), highlight=False, markup=False)
    stdout.print(f"migrated {len(done)} rows in {directory}" if done else f"{directory}: every row is current")


@leaderboard.command(name="publish")
@click.option("--from", "source", default="leaderboard", show_default=True, type=click.Path(file_okay=False))
@click.option("--out", default="site", show_default=True, type=click.Path(file_okay=False))
@click.option("--metrics", "-m", help="metric columns, comma-separated (default: every metric in the rows)")
def publish_cmd(source: str, out: str, metrics: str | None) -> None:
    """Render the leaderboard: Markdown tables per dataset/split and a static HTML site
    (one page per dataset, sortable tables, metric-vs-latency plots) that opens from file://."""
    from harness.leaderboard.publish import publish

    written = publish(source, out, split_list(metrics))
    stdout.print(f"wrote {len(written)} files to {out}: open {Path(out) / 'index.html'}")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(leaderboard)
