"""The ``harness`` command line."""

from __future__ import annotations

import json
import os
import sys
import sysconfig
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.errors import HarnessError
from harness.plugins import COMPONENT_HOOKS, clash_message, get_plugin_manager
from harness.run.secrets import redact

console = Console(stderr=True)
stdout = Console(soft_wrap=True)


class _Group(click.Group):
    """Turns an error into one line on stderr and exit status 2: the message, and for an
    exception raised in code (a plugin's, say) the file and line it came from. ``--traceback``
    or ``HARNESS_DEBUG=1`` prints the whole traceback as well."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            if ctx.meta.get("harness.traceback") or os.environ.get("HARNESS_DEBUG") == "1":
                traceback.print_exception(exc)
            message = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
            where = _origin(exc)
            click.echo(redact(f"error: {message}" + (f" (at {where})" if where else "")), err=True)
            sys.exit(2)


def _origin(exc: BaseException) -> str | None:
    """``file:line in function`` of the innermost frame of the exception that started it all."""
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    if isinstance(root, HarnessError) and root is exc:
        return None  # the harness's own message says what is wrong; no frame needed
    core = str(Path(__file__).resolve().parent)
    stdlib = sysconfig.get_paths()["stdlib"]
    # the deepest frame in a plugin or library, not in the harness itself or Python's stdlib
    for frame in reversed(traceback.extract_tb(root.__traceback__)):
        if not frame.filename.startswith((core, stdlib)):
            return f"{frame.filename}:{frame.lineno} in {frame.name}"
    return None


@click.group(cls=_Group)
@click.version_option(package_name="stark-harness")
@click.option("--traceback", "show_traceback", is_flag=True, help="print the whole traceback of an error")
@click.pass_context
def cli(ctx: click.Context, show_traceback: bool) -> None:
    """Evaluate retrieval on semi-structured knowledge bases (STaRK and friends)."""
    ctx.meta["harness.traceback"] = show_traceback


def _registry_option(func: Any) -> Any:
    return click.option(
        "--registry",
        "registry_path",
        type=click.Path(dir_okay=False),
        help="registry.yaml to use (default: $HARNESS_REGISTRY, ./registry.yaml, the bundled one)",
    )(func)


def _echo_json(data: Any) -> None:
    click.echo(redact(json.dumps(data, indent=2, default=str)))


@contextmanager
def _progress() -> Iterator[Any]:
    """A rich progress display handing out tasks in the shape BuildContext expects."""
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )

    class _Task:
        def __init__(self, description: str, total: int | None) -> None:
            self.id = progress.add_task(description, total=total)

        def advance(self, amount: int = 1) -> None:
            progress.advance(self.id, amount)

    with progress:
        yield _Task


@cli.command()
@click.option("--retriever", "-r", help="registry entry or plugin retriever name")
@click.option("--dataset", "-d", help="registry entry or plugin dataset name")
@click.option("--split", "-s", help="query split (default from the registry, usually test)")
@click.option("--k", type=int, help="ranking depth to retrieve and evaluate")
@click.option("--all", "run_all", is_flag=True, help="every dataset (and its splits) in the registry")
@click.option("--metrics", "-m", help="comma-separated, e.g. hit@1,recall@20,mrr")
@click.option("--sample", type=float, help="evaluate a seeded random fraction of the split")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--batch-size", type=int, help="queries per search call (default: the retriever's)")
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    default="runs",
    show_default=True,
    help="where run directories (per-query results, TREC runs) go",
)
@click.option(
    "--leaderboard",
    "leaderboard_dir",
    type=click.Path(file_okay=False),
    help="also write the row into this scratch leaderboard (the curated one changes only through "
    "`harness leaderboard merge`)",
)
@click.option("--no-leaderboard", is_flag=True, hidden=True, help="the default; kept for older scripts")
@click.option("--fresh", is_flag=True, help="discard earlier results of the same configuration")
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files (data_dir)")
@click.option("--dry-run", is_flag=True, help="print what would run, run nothing")
@click.option("--check", is_flag=True, help="exit 1 when a condition's expected score is missed")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_registry_option
def run(
    retriever: str | None,
    dataset: str | None,
    split: str | None,
    k: int | None,
    run_all: bool,
    metrics: str | None,
    sample: float | None,
    seed: int,
    device: str,
    batch_size: int | None,
    output: str,
    leaderboard_dir: str | None,
    no_leaderboard: bool,
    fresh: bool,
    data_dir: str | None,
    dry_run: bool,
    check: bool,
    fmt: str,
    registry_path: str | None,
) -> None:
    """Run a retriever on a dataset split; print metrics and write the run directory (row,
    configuration, per-query results, TREC run and qrels). Nothing tracked changes: rows reach
    the leaderboard through `harness submit` and `harness leaderboard merge`."""
    from harness.run import Runner, resolve
    from harness.run.registry import load_registry

    registry = load_registry(registry_path)
    plugins = get_plugin_manager()
    metric_list = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    targets: list[tuple[str | None, str | None]] = []
    if run_all:
        if dataset:
            raise HarnessError("--all runs every registry dataset; drop --dataset")
        for name, entry in registry.datasets.items():
            for split_name in [split] if split else entry.splits or [registry.defaults.split]:
                targets.append((name, split_name))
        if not targets:
            raise HarnessError(f"{registry.source}: no datasets to run with --all")
    else:
        targets.append((dataset, split))
    params = {"data_dir": data_dir} if data_dir else None
    specs = []
    errors: list[str] = []
    for d, s in targets:
        try:
            specs.append(resolve(registry, plugins, retriever, d, s, k, metric_list, sample, seed, params))
        except HarnessError as exc:
            if not run_all:
                raise
            # one dataset whose plugin failed to load must not cost the others (as with missing data)
            errors.append(f"{d}/{s}: {exc}")
            console.print(f"[red]cannot run[/red] {d}/{s}: {exc}", highlight=False)
    if dry_run:
        data = [
            {
                "run": spec.describe(),
                "retriever": spec.main.info.model_dump(),
                "uses": [c.info.model_dump() for c in spec.uses],
                "dataset": spec.dataset_component.info.model_dump(),
                "metrics": spec.metrics,
                "condition": spec.condition.name if spec.condition else None,
            }
            for spec in specs
        ]
        if fmt == "json":
            _echo_json(data)
        else:
            for item in data:
                stdout.print(
                    f"would run {item['run']}" + (f" (condition {item['condition']})" if item["condition"] else ""),
                    markup=False,
                )
        if errors:
            click.echo(f"error: {len(errors)} of {len(targets)} runs cannot run:\n  " + "\n  ".join(errors), err=True)
            sys.exit(2)
        return
    failed = False
    outcomes = []
    with _progress() as task_factory:
        runner = Runner(
            plugins,
            output_dir=output,
            leaderboard_dir=None if no_leaderboard else leaderboard_dir,
            device=device,
            batch_size=batch_size,
            progress=task_factory,
            fresh=fresh,
            registry=registry,
        )
        for spec in specs:
            console.print(f"[bold]running[/bold] {spec.describe()}", markup=True, highlight=False)
            try:
                outcome = runner.run(spec)
            except HarnessError as exc:
                if len(targets) == 1:
                    raise
                # With several runs, one that cannot run (e.g. data not available) must not
                # cost the others; it is reported and the exit status says so.
                errors.append(f"{spec.describe()}: {exc}")
                console.print(f"[red]failed:[/red] {exc}", highlight=False)
                continue
            outcomes.append(outcome)
            failed |= any(not c.ok for c in outcome.checks)
    if fmt == "json":
        _echo_json(
            [
                {
                    "row": o.row.model_dump(mode="json"),
                    "run_dir": str(o.run_dir),
                    "row_path": str(o.row_path) if o.row_path else None,
                    "checks": [
                        {"metric": c.metric, "expected": c.expected, "actual": c.actual, "ok": c.ok} for c in o.checks
                    ],
                    "notes": o.notes,
                }
                for o in outcomes
            ]
        )
    else:
        for outcome in outcomes:
            _print_outcome(outcome)
    if errors:
        total = len(targets)
        click.echo(f"error: {len(errors)} of {total} runs failed:\n  " + "\n  ".join(errors), err=True)
        sys.exit(2)
    if check and failed:
        sys.exit(1)


def _print_outcome(outcome: Any) -> None:
    row = outcome.row
    table = Table(title=f"{outcome.spec.describe()} — {row.num_queries} queries")
    for name in row.metrics:
        table.add_column(name, justify="right")
    table.add_row(*(f"{100 * v:.2f}" for v in row.metrics.values()))
    stdout.print(table)
    stdout.print(
        f"latency/query {row.latency.mean_ms:.2f} ms (p50 {row.latency.p50_ms:.2f}, p95 {row.latency.p95_ms:.2f}); "
        f"index build {row.index_build_seconds:.2f} s; total {row.total_seconds:.2f} s"
        + (f"; resumed {outcome.resumed_queries} queries" if outcome.resumed_queries else "")
    )
    stdout.print(
        f"run files: {outcome.run_dir}" + (f"\nleaderboard row: {outcome.row_path}" if outcome.row_path else "")
    )
    for note in outcome.notes:
        stdout.print(f"note: {note}", highlight=False)
    for check in outcome.checks:
        actual = "missing" if check.actual is None else f"{check.actual:.4f}"
        diff = "" if check.actual is None else f" ({check.actual - check.expected:+.4f})"
        status = "[green]OK[/green]" if check.ok else "[red]FAIL[/red]"
        stdout.print(f"{status} {check.metric}: expected {check.expected:.4f} ± {check.tolerance}, got {actual}{diff}")


@cli.command(name="list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_registry_option
def list_(fmt: str, registry_path: str | None) -> None:
    """Datasets, retrievers, metrics and conditions known to the registry and plugins."""
    from harness.run.registry import load_registry

    registry = load_registry(registry_path)
    components = get_plugin_manager().components
    data: dict[str, Any] = {
        "registry": registry.source,
        "datasets": {},
        "retrievers": {},
        "metrics": [],
        "llm_providers": sorted(components.by_kind.get("llm", {})),
        "synthesis_stages": sorted(components.by_kind.get("synthesis stage", {})),
        "conditions": [],
    }
    for name, entry in registry.datasets.items():
        data["datasets"][name] = {"plugin": entry.plugin, "params": entry.params, "splits": entry.splits}
    for name in components.by_kind.get("dataset", {}):
        data["datasets"].setdefault(name, {"plugin": name, "params": {}, "splits": []})
    for name, rentry in registry.retrievers.items():
        data["retrievers"][name] = {"plugin": rentry.plugin, "params": rentry.params}
    for name in components.by_kind.get("retriever", {}):
        data["retrievers"].setdefault(name, {"plugin": name, "params": {}})
    for family, metric in sorted(components.by_kind.get("metric", {}).items()):
        data["metrics"].append(f"{family}@k" if metric.requires_k else (f"{family}[@k]" if metric.takes_k else family))
    for condition in registry.conditions:
        data["conditions"].append(condition.model_dump())
    if fmt == "json":
        _echo_json(data)
        return
    stdout.print(f"[dim]registry: {registry.source}[/dim]")
    for kind in ("datasets", "retrievers"):
        table = Table(title=kind)
        table.add_column("name")
        table.add_column("plugin")
        table.add_column("details")
        for name, info in data[kind].items():
            details = {k: v for k, v in info.items() if k != "plugin" and v}
            table.add_row(name, info["plugin"], json.dumps(details) if details else "")
        stdout.print(table)
    stdout.print("metrics: " + ", ".join(data["metrics"]))
    if data["llm_providers"]:
        stdout.print("LLM providers (provider:model): " + ", ".join(data["llm_providers"]))
    if data["synthesis_stages"]:
        stdout.print("synthesis stages: " + ", ".join(data["synthesis_stages"]))
    table = Table(title="conditions")
    for column in ("name", "retriever", "dataset", "split", "expected"):
        table.add_column(column)
    for c in registry.conditions:
        expected = ", ".join(f"{m}={v:.4f}" for m, v in c.expected.items())
        table.add_row(c.name, c.retriever, c.dataset, c.split, f"{expected} (±{c.tolerance})" if expected else "")
    stdout.print(table)


@cli.command()
@click.option("--hook", help="only plugins implementing this hook")
def plugins(hook: str | None) -> None:
    """Installed plugins and the hooks they implement, as JSON."""
    manager = get_plugin_manager()
    known = [*COMPONENT_HOOKS, "register_commands"]
    if hook is not None and hook not in known:
        raise HarnessError(f"unknown hook {hook!r}; hooks: {', '.join(known)}")
    _echo_json(manager.describe(hook))


@cli.group()
def leaderboard() -> None:
    """Show, validate, merge and publish the leaderboard."""


@leaderboard.command()
@click.argument("path", required=False, default="leaderboard", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table", show_default=True)
@click.option("--metrics", "-m", help="columns to show, comma-separated")
@click.option("--dataset", help="only this dataset")
def show(path: str, fmt: str, metrics: str | None, dataset: str | None) -> None:
    """The leaderboard (a directory or a JSON file of rows) as a table."""
    from harness.leaderboard.rows import markdown_table, read_rows, table_rows

    rows = read_rows(Path(path))
    if dataset:
        rows = [r for r in rows if r.dataset.name == dataset]
    metric_list = [m.strip() for m in metrics.split(",")] if metrics else None
    if fmt == "json":
        _echo_json([r.model_dump(mode="json") for r in rows])
    elif fmt == "markdown":
        click.echo(markdown_table(rows, metric_list), nl=False)
    else:
        header, cells = table_rows(rows, metric_list)
        table = Table(title=f"leaderboard ({len(rows)} rows, metrics ×100)")
        for column in header:
            table.add_column(
                column, justify="right" if column not in ("dataset", "split", "retriever", "regime") else "left"
            )
        for cell in cells:
            table.add_row(*cell)
        stdout.print(table)


@leaderboard.command()
def schema() -> None:
    """Print the JSON Schema of a leaderboard row."""
    from harness.leaderboard.rows import json_schema

    _echo_json(json_schema())


@leaderboard.command(name="validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the rows' dataset files")
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
    import tempfile

    from harness.leaderboard.bundles import collect, validate

    schema = json.loads(Path(schema_file).read_text(encoding="utf-8")) if schema_file else None
    with tempfile.TemporaryDirectory() as work:
        entries = [e for i, path in enumerate(paths) for e in collect(path, Path(work) / str(i))]
        results = validate(entries, data_dir, schema)
    if fmt == "json":
        _echo_json([r.as_dict() for r in results])
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
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the rows' dataset files")
def merge_cmd(submissions: tuple[str, ...], into: str, supersede: bool, data_dir: str | None) -> None:
    """Validate submissions and add their rows to the leaderboard, all or nothing.

    The same configuration again replaces its row; another configuration under an existing
    name is refused (unless --supersede). Each merge adds an entry to CHANGELOG.md."""
    from harness.leaderboard.bundles import merge

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
    from harness.leaderboard.bundles import withdraw

    for row in withdraw(source, retriever, reason, dataset, split):
        stdout.print(f"withdrew {row.dataset.name}/{row.split} {row.retriever.name} {row.config_hash}", highlight=False)


@leaderboard.command(name="publish")
@click.option("--from", "source", default="leaderboard", show_default=True, type=click.Path(file_okay=False))
@click.option("--out", default="site", show_default=True, type=click.Path(file_okay=False))
@click.option("--metrics", "-m", help="metric columns, comma-separated (default: every metric in the rows)")
def publish_cmd(source: str, out: str, metrics: str | None) -> None:
    """Render the leaderboard: Markdown tables per dataset/split and a static HTML site
    (one page per dataset, sortable tables, metric-vs-latency plots) that opens from file://."""
    from harness.leaderboard.publish import publish

    metric_list = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    written = publish(source, out, metric_list)
    stdout.print(f"wrote {len(written)} files to {out}: open {Path(out) / 'index.html'}")


@cli.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "-o", default="submission.tar.gz", show_default=True, type=click.Path(dir_okay=False))
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files")
@click.option("--no-validate", is_flag=True, help="bundle without checking the runs first")
def submit(run_dirs: tuple[str, ...], out: str, data_dir: str | None, no_validate: bool) -> None:
    """Bundle runs (their rows, per-query results, TREC runs) and this environment into one
    archive for `harness leaderboard validate` and `merge`. RUN_DIRS are run directories
    written by `harness run`, or a directory holding them."""
    from harness.leaderboard.bundles import bundle

    manifest = bundle(list(run_dirs), out, check=not no_validate, data_dir=data_dir)
    stdout.print(
        f"wrote {out}: {len(manifest['runs'])} runs, {len(manifest['files'])} files, "
        f"harness {manifest['harness']}, Python {manifest['environment']['python']}"
    )
    for run in manifest["runs"]:
        stdout.print(f"  {run}", highlight=False)


@cli.command(name="evaluate")
@click.option("--run", "run_file", required=True, type=click.Path(exists=True, dir_okay=False), help="TREC run file")
@click.option("--qrels", required=True, type=click.Path(exists=True, dir_okay=False), help="TREC qrels file")
@click.option("--metrics", "-m", default="hit@1,hit@5,recall@20,mrr,map@100,ndcg@10", show_default=True)
@click.option("--per-query", is_flag=True, help="also print every query's values")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def evaluate_cmd(run_file: str, qrels: str, metrics: str, per_query: bool, fmt: str) -> None:
    """Score a TREC run against TREC qrels with the harness's metric definitions.

    The run is read as trec_eval reads it (by score, ties by document id descending); metrics
    that share a name with a trec_eval measure have its definition. Every query in the qrels
    is evaluated and a query missing from the run scores 0 (trec_eval -c).
    """
    from harness.metrics import evaluate, hit_matrix, means, parse_metrics
    from harness.trec import read_grades, read_run

    metric_objs = parse_metrics(metrics, get_plugin_manager().components.by_kind["metric"])
    rankings, grades = read_run(run_file), read_grades(qrels)
    graded = sorted({g for docs in grades.values() for g in docs.values() if g > 1})
    if graded and any(m.family == "ndcg" for m in metric_objs):
        # trec_eval's nDCG uses the grades as gains; the harness's relevance is binary
        raise HarnessError(
            f"{qrels}: relevance grades above 1 ({', '.join(f'{g:g}' for g in graded[:5])}): nDCG here has binary "
            "gains and would differ from trec_eval's; map the grades to 0/1 or leave nDCG out"
        )
    judgements = {qid: {doc for doc, grade in docs.items() if grade > 0} for qid, docs in grades.items()}
    qids = sorted(judgements)
    if not qids:
        raise HarnessError(f"{qrels}: no judgements")
    vocabulary: dict[str, int] = {}

    def encode(docs: Any) -> list[int]:
        return [vocabulary.setdefault(d, len(vocabulary)) for d in docs]

    hits, n_relevant = hit_matrix([encode(rankings.get(q, [])) for q in qids], [encode(judgements[q]) for q in qids])
    values = evaluate(metric_objs, hits, n_relevant)
    summary = {
        "queries": len(qids),
        "queries_missing_from_run": sum(1 for q in qids if q not in rankings),
        "run_queries_without_qrels": sum(1 for q in rankings if q not in judgements),
        "metrics": means(values),
    }
    if per_query:
        summary["per_query"] = {q: {m: float(v[i]) for m, v in values.items()} for i, q in enumerate(qids)}
    if fmt == "json":
        _echo_json(summary)
        return
    table = Table(title=f"{run_file}: {len(qids)} queries")
    for name in summary["metrics"]:
        table.add_column(name, justify="right")
    table.add_row(*(f"{v:.4f}" for v in summary["metrics"].values()))
    stdout.print(table)
    if summary["queries_missing_from_run"]:
        stdout.print(f"{summary['queries_missing_from_run']} qrels queries are missing from the run (scored 0)")


@cli.command()
@click.argument("dataset")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files (data_dir)")
@_registry_option
def describe(dataset: str, fmt: str, data_dir: str | None, registry_path: str | None) -> None:
    """Counts for a dataset: nodes and edges by type, candidates, queries per split."""
    from harness.run import load_dataset

    info = load_dataset(dataset, data_dir, registry_path).describe()
    if fmt == "json":
        _echo_json(info)
        return
    stdout.print(f"[bold]{dataset}[/bold]")
    for key, value in info.items():
        if isinstance(value, dict):
            table = Table(title=key)
            table.add_column("type")
            table.add_column("count", justify="right")
            for name, count in value.items():
                table.add_row(str(name), f"{count:,}" if isinstance(count, int) else str(count))
            stdout.print(table)
        else:
            stdout.print(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")


@cli.command()
@click.argument("dataset", required=False)
@click.option("--queries", "queries_dir", type=click.Path(file_okay=False), help="a query set in STaRK's layout")
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files (data_dir)")
@click.option("--png", type=click.Path(dir_okay=False), help="also write length/answer histograms here")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_registry_option
def stats(
    dataset: str | None,
    queries_dir: str | None,
    data_dir: str | None,
    png: str | None,
    fmt: str,
    registry_path: str | None,
) -> None:
    """Query-set statistics: length and answer distributions, word entropy, type-token ratio.

    Of a dataset's queries (DATASET), or of any query set in STaRK's layout (--queries DIR,
    e.g. one written by `harness synthesize`)."""
    from harness.analysis.stats import query_set_statistics, write_histograms
    from harness.queries import load_stark_layout
    from harness.run import load_dataset

    if (dataset is None) == (queries_dir is None):
        raise HarnessError("stats: give a DATASET or --queries DIR (one of them)")
    if queries_dir is not None:
        queries = load_stark_layout(queries_dir)
        dataset = queries.name
    else:
        assert dataset is not None
        queries = load_dataset(dataset, data_dir, registry_path).load_queries()
    result = {"dataset": dataset, **query_set_statistics(queries)}
    if png:
        written = write_histograms(queries, Path(png), f"{dataset}: {result['all']['queries']:,} queries")
        result["png"] = str(written) if written else "not written: matplotlib is not installed"
    if fmt == "json":
        _echo_json(result)
        return
    table = Table(title=f"{dataset} query statistics (words = whitespace tokens)")
    for column in ("split", "queries", "words", "entropy", "TTR", "median len", "mean answers", ">30 answers"):
        table.add_column(column, justify="left" if column == "split" else "right")
    for name, summary in [("all", result["all"]), *result["splits"].items()]:
        table.add_row(
            name,
            f"{summary['queries']:,}",
            f"{summary['words']:,}",
            f"{summary['shannon_entropy']:.2f}",
            f"{summary['type_token_ratio']:.3f}",
            f"{summary['query_length_words'].get('median', 0):.0f}",
            f"{summary['answers_per_query'].get('mean', 0):.1f}",
            f"{summary['share_with_more_than_30_answers']:.1%}",
        )
    stdout.print(table)
    if png:
        stdout.print(f"histograms: {result['png']}")


@cli.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--metric", "-m", default="mrr", show_default=True)
@click.option("--resamples", type=int, default=10_000, show_default=True, help="randomization and bootstrap draws")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def compare(runs: tuple[str, ...], metric: str, resamples: int, seed: int, fmt: str) -> None:
    """Compare runs (directories with per_query.jsonl) against the first: difference, paired
    randomization and t-test p-values, bootstrap 95% interval."""
    from harness.analysis.compare import compare_runs

    results = compare_runs(list(runs), metric, resamples, seed)
    if fmt == "json":
        _echo_json(results)
        return
    table = Table(title=f"{metric} against {Path(runs[0]).name} ({results[0]['queries']} shared queries)")
    for column in ("run", "mean", "Δ", "95% CI", "p (randomization)", "p (t-test)", ""):
        table.add_column(column, justify="left" if column == "run" else "right")
    table.add_row(Path(runs[0]).name, f"{results[0]['mean_a']:.4f}", "", "", "", "", "baseline")
    for r in results:
        marker = "**" if r["p_randomization"] < 0.01 else "*" if r["p_randomization"] < 0.05 else ""
        table.add_row(
            Path(r["run"]).name,
            f"{r['mean_b']:.4f}",
            f"{r['difference']:+.4f}",
            f"[{r['ci95_low']:+.4f}, {r['ci95_high']:+.4f}]",
            f"{r['p_randomization']:.4f}",
            f"{r['p_ttest']:.4f}",
            marker,
        )
    stdout.print(table)
    stdout.print("* p < 0.05, ** p < 0.01 (paired randomization test)")


def main() -> None:
    """Entry point: add plugin commands, then run the CLI."""
    manager = get_plugin_manager()
    manager.add_commands(cli)
    for failure in manager.failures:
        if failure.hook in (None, "register_commands"):
            console.print(f"[yellow]warning:[/yellow] plugin {failure.plugin!r} failed to load: {failure.error}")
    for message in sorted({clash_message(k, n, o) for (k, n), o in manager.components.clashes.items()}):
        console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)
    cli()


if __name__ == "__main__":
    main()
