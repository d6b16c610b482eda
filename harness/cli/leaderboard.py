"""``harness leaderboard``: show, schema, validate, merge, withdraw, migrate, publish, reproduce, regenerate."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from harness.cli.common import data_dir_option, echo_json, stdout, table
from harness.plugins.hookspecs import hookimpl


@click.group()
def leaderboard() -> None:
    """Show, validate, merge, migrate, publish and reproduce the leaderboard."""


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
    column. A row whose distinguishing component never ran is marked ⚑ and listed after the
    others of its split, its reason below the table; a row averaged over seeds shows mean ± std."""
    from harness.leaderboard.rows import flag_notes, markdown_table, read_rows, seeds_of, table_rows
    from harness.metrics import split_metrics

    metric_list = split_metrics(metrics)  # refused before the rows are read
    rows = read_rows(Path(path))
    if dataset:
        rows = [r for r in rows if r.dataset.name == dataset]
    if fmt == "json":
        echo_json([r.model_dump(mode="json") for r in rows])
    elif fmt == "markdown":
        click.echo(markdown_table(rows, metric_list), nl=False)
    else:
        header, cells = table_rows(rows, metric_list)
        seeded = ", seeded rows mean ± std" if any(seeds_of(r) for r in rows) else ""
        show_table(f"{len(rows)} rows, metrics ×100{seeded}", header, cells, wide, flag_notes(rows))


def show_table(title: str, header: list[str], cells: list[list[str]], wide: bool, notes: Sequence[str] = ()) -> None:
    """A boxed table of the columns that fit the terminal, never a number cut or wrapped; plain
    text of every column when stdout is no terminal (or with --wide, when they do not fit).
    ``notes`` (such as why a row is flagged) follow the table, as plain lines."""
    from harness.leaderboard.rows import TEXT_COLUMNS, fit_columns, plain_table

    metrics = header[header.index("n") + 1 : header.index("ms/query")]
    fit = fit_columns(header, cells, metrics, stdout.width) if stdout.is_terminal else None
    if fit is None or (wide and fit[1]):
        click.echo(f"leaderboard ({title})")
        click.echo(plain_table(header, cells), nl=False)
        for note in notes:
            click.echo(note)
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
    for note in notes:
        stdout.print(note, highlight=False, markup=False)


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
            if r.ok and r.stale:  # its numbers hold; the code here would run another configuration
                stdout.print(f"[yellow]STALE[/yellow] {r.source} {what} ({', '.join(r.checks)})", highlight=False)
                for reason in r.stale:
                    stdout.print(f"     - {reason}", highlight=False, markup=False)
            elif r.ok:
                stdout.print(f"[green]OK[/green]   {r.source} {what} ({', '.join(r.checks)})", highlight=False)
            else:
                stdout.print(f"[red]FAIL[/red] {r.source} {what}", highlight=False)
                for problem in r.problems:
                    stdout.print(f"     - {problem}", highlight=False, markup=False)
        failed = sum(not r.ok for r in results)
        stale = sum(r.ok and bool(r.stale) for r in results)
        stdout.print(f"{len(results) - failed} of {len(results)} rows valid" + (f" ({stale} stale)" if stale else ""))
    if not results or not all(r.ok for r in results):
        sys.exit(1)


@leaderboard.command(name="merge")
@click.argument("submissions", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--into", default="leaderboard", show_default=True, type=click.Path(file_okay=False))
@click.option("--supersede", is_flag=True, help="replace a row of the same name with a different configuration")
@click.option("--allow-stale", is_flag=True, help="accept rows whose configuration the code here no longer makes")
@data_dir_option
def merge_cmd(
    submissions: tuple[str, ...], into: str, supersede: bool, allow_stale: bool, data_dir: str | None
) -> None:
    """Validate submissions and add their rows to the leaderboard, all or nothing.

    The same configuration again replaces its row; another configuration under an existing
    name is refused (unless --supersede). Each merge adds an entry to CHANGELOG.md."""
    from harness.leaderboard.merge import merge

    actions = merge(list(submissions), into, data_dir, supersede, allow_stale)
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
@click.option(
    "--readme",
    type=click.Path(dir_okay=False, exists=True),
    help="also put the Markdown tables into this file, between <!-- results:DATASET-SPLIT --> and <!-- /results -->",
)
def publish_cmd(source: str, out: str, metrics: str | None, readme: str | None) -> None:
    """Render the leaderboard: Markdown tables per dataset/split and a static HTML site
    (one page per dataset, sortable tables, metric-vs-latency plots) that opens from file://."""
    from harness.leaderboard.publish import publish, refresh_readme
    from harness.metrics import split_metrics

    written = publish(source, out, split_metrics(metrics))
    stdout.print(f"wrote {len(written)} files to {out}: open {Path(out) / 'index.html'}")
    if readme:
        replaced = refresh_readme(readme, out)
        stdout.print(f"{readme}: refreshed {', '.join(replaced) or 'no table (it has no results markers)'}")


def _reproduce_options(command: Any) -> Any:
    """What ``reproduce`` and ``regenerate`` share: the data, the cache, the device, the tolerance."""
    for option in (
        click.option(
            "--cache-dir", type=click.Path(file_okay=False), help="default $HARNESS_CACHE; empty: rebuild all"
        ),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True),
        click.option("--tolerance", type=float, help="largest metric difference that matches (default 1e-9: exact)"),
        data_dir_option,
    ):
        command = option(command)
    return command


@leaderboard.command(name="reproduce")
@click.argument("row", type=click.Path(exists=True))
@click.option("--out", default="runs", show_default=True, type=click.Path(file_okay=False), help="for the new run")
@_reproduce_options
def reproduce_cmd(row: str, out: str, **options: Any) -> None:
    """Re-run a row from what it records and compare each metric with the row's.

    ROW: a row file (leaderboard/rows/<dataset>/<split>/<name>-<hash>.json) or a run directory.
    The retriever, what it uses and the dataset are constructed from the row's plugins and
    parameters (not the registry); split, sample, seed, k, metrics and training splits are the
    row's; every query is searched again. A row over seeds is re-run once per seed, and each
    metric's mean, std, min and max compared. Exit status 1 when a metric differs by more than
    --tolerance, or when the row is stale: the re-run's configuration hash (or a seed's) is not the row's."""
    from harness.cli.common import progress
    from harness.leaderboard.reproduce import load_row, reproduce

    source = load_row(row)
    stdout.print(f"reproducing {_name(source.row)} ({source.row.regime})", highlight=False, markup=False)
    with progress() as task_factory:
        done = reproduce(source, out, progress=task_factory, **options)
    missing = "–"
    cells = [
        [c.label, f"{c.recorded:.10f}", missing, missing, "DIFFERS"]
        if c.reproduced is None or c.difference is None
        else [
            c.label,  # a row over seeds: "mrr mean", "mrr std", ...
            f"{c.recorded:.10f}",
            f"{c.reproduced:.10f}",
            f"{c.difference:+.2e}",
            "ok" if c.ok else "DIFFERS",
        ]
        for c in done.checks
    ]
    tolerance = done.checks[0].tolerance if done.checks else 0.0
    columns = ["metric", "row", "reproduced", "difference", "ok"]
    stdout.print(table(f"tolerance {tolerance:g}", columns, cells, right={"row", "reproduced", "difference"}))
    lines = [f"configuration {done.row.config_hash}: as the row records"]
    if done.stale:
        lines = [
            f"STALE: the re-run's configuration hash {done.reproduced.config_hash} is not the row's "
            f"{done.row.config_hash}: the code installed here resolves the row differently than when it ran "
            "(re-run and merge it, or withdraw it):",
            *(f"  - {change}" for change in done.changes),
        ]
    lines += [f"note: {note}" for note in done.notes]
    lines += [f"run directory: {done.run_dir}", f"reproduce: {source.command()}"]
    lines += [f"the same run: {done.run_command}"] if done.run_command else []
    lines.append(done.verdict() if done.ok else f"NOT reproduced: {done.verdict()}")
    for line in lines:
        stdout.print(line, highlight=False, markup=False)
    if not done.ok:
        sys.exit(1)


def _name(row: Any) -> str:
    return f"{row.dataset.name}/{row.split} {row.retriever.name} {row.config_hash}"


@leaderboard.command(name="regenerate")
@click.argument("directory", required=False, default="leaderboard", type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="scratch runs directory")
@click.option("--regime", "regimes", multiple=True, type=click.Choice(["zero-shot", "trained", "llm-at-query-time"]))
@click.option("--retriever", "-r", "retrievers", multiple=True, help="only this retriever's rows (repeatable)")
@_reproduce_options
def regenerate_cmd(directory: str, out: str, **options: Any) -> None:
    """Reproduce every row of the leaderboard, as `harness leaderboard reproduce` does, into
    --out; say of each whether it matches. A row that cannot run (a missing plugin, a server
    it needs) is reported and the next one runs. Exit status 1 unless every row reproduced."""
    from rich.markup import escape

    from harness.cli.common import progress
    from harness.leaderboard.regenerate import regenerate

    results = []
    with progress() as task_factory:
        for result in regenerate(directory, out, progress=task_factory, **options):
            results.append(result)
            what = escape(_name(result.row) if result.row else str(result.file))
            done = result.reproduction
            if done is None:
                stdout.print(f"[red]ERROR[/red] {what}: {escape(result.error or '')}", highlight=False)
                continue
            status = (
                "[green]OK[/green]   " if done.ok else "[red]STALE[/red]" if done.metrics_match else "[red]FAIL[/red] "
            )
            stdout.print(f"{status} {what}: {escape(done.verdict())}", highlight=False)
            for change in done.changes:
                stdout.print(f"        - {change}", highlight=False, markup=False)
    ok = sum(r.ok for r in results)
    stdout.print(f"{ok} of {len(results)} rows reproduced (runs in {out})", highlight=False, markup=False)
    if ok < len(results) or not results:
        sys.exit(1)


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(leaderboard)
