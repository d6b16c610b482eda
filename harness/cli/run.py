"""``harness run``: a retriever on a dataset split, into a run directory."""

from __future__ import annotations

import sys
from typing import Any

import click

from harness.cli.common import (
    console,
    data_dir_option,
    echo_json,
    format_option,
    param_option,
    progress,
    registry_option,
    seed_and_device_options,
    split_list,
    stdout,
    table,
    training_options,
)
from harness.errors import HarnessError
from harness.plugins.executors import executor_from_options, executor_options
from harness.plugins.hookspecs import hookimpl


@click.command()
@click.option("--retriever", "-r", help="registry entry or plugin retriever name")
@param_option
@click.option("--dataset", "-d", help="registry entry or plugin dataset name")
@click.option("--split", "-s", help="query split (default from the registry, usually test)")
@click.option("--k", type=int, help="ranking depth to retrieve and evaluate")
@click.option("--all", "run_all", is_flag=True, help="every dataset (and its splits) in the registry")
@click.option("--metrics", "-m", help="comma-separated, e.g. hit@1,recall@20,mrr")
@click.option("--sample", type=float, help="evaluate a seeded random fraction of the split")
@seed_and_device_options
@executor_options
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
@data_dir_option
@training_options
@click.option("--no-train", is_flag=True, help="a trained retriever must have a checkpoint; never train here")
@click.option("--dry-run", is_flag=True, help="print what would run, run nothing")
@click.option("--check", is_flag=True, help="exit 1 when a condition's expected score is missed")
@format_option()
@registry_option
def run(
    retriever: str | None,
    retriever_params: dict[str, Any],
    dataset: str | None,
    split: str | None,
    k: int | None,
    run_all: bool,
    metrics: str | None,
    sample: float | None,
    seed: int,
    seeds: str | None,
    device: str,
    executor: str,
    address: str | None,
    num_gpus_per_worker: float | None,
    workers: int | None,
    devices: str | None,
    batch_size: int | None,
    output: str,
    leaderboard_dir: str | None,
    no_leaderboard: bool,
    fresh: bool,
    data_dir: str | None,
    train_split: str,
    validation_split: str,
    no_train: bool,
    dry_run: bool,
    check: bool,
    fmt: str,
    registry_path: str | None,
) -> None:
    """Run a retriever on a dataset split; print metrics and write the run directory (row,
    configuration, per-query results, TREC run and qrels). Nothing tracked changes: rows reach
    the leaderboard through `harness submit` and `harness leaderboard merge`."""
    # what running needs (pydantic, numpy, the plugin manager) loads here, not for `harness --help`
    from harness import api
    from harness.leaderboard.rows import check_scratch, record_row
    from harness.machine import resolve_device
    from harness.metrics import split_metrics
    from harness.plugins import get_plugin_manager
    from harness.run import load_registry
    from harness.run.seeds import parse_seeds, run_seeds

    # what the runner would refuse, refused before anything resolves (and by --dry-run alike)
    seed_list = parse_seeds(seeds)
    metric_list = split_metrics(metrics)
    if batch_size is not None and batch_size <= 0:
        raise HarnessError(f"--batch-size must be positive, got {batch_size}")
    plugins = get_plugin_manager()
    # checked now, connected to only when there is work for it
    where = executor_from_options(executor, address, num_gpus_per_worker, workers)
    if where.local:
        resolve_device(device)
    else:
        where.worker_device(device)
    registry = load_registry(registry_path, plugins)
    for problem in registry.problems:
        console.print(f"[yellow]warning:[/yellow] registry: {problem}", highlight=False)
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
    specs = []
    # reason → the runs it stops: a reason shared by several runs (a typo, a dataset's missing
    # files for each of its splits) is said once, with the runs it concerns
    cannot: dict[str, list[str]] = {}
    for d, s in targets:
        try:
            specs.append(
                api.plan(
                    retriever,
                    d,
                    s,
                    k=k,
                    metrics=metric_list,
                    params=retriever_params,
                    sample=sample,
                    seed=seed,
                    data_dir=data_dir,
                    train_split=train_split,
                    registry=registry,
                    plugins=plugins,
                )
            )
        except HarnessError as exc:
            if not run_all:
                raise
            # one dataset whose plugin failed to load must not cost the others (as with missing data)
            cannot.setdefault(str(exc), []).append(f"{d}/{s}")
    if cannot and not specs and len(cannot) == 1:
        raise HarnessError(next(iter(cannot)))  # nothing can run, for one reason: an error like any other
    if dry_run:
        _dry_run(specs, fmt)
        if cannot:
            click.echo(_grouped(f"{_count(cannot)} of {len(targets)} runs cannot run", cannot), err=True)
            sys.exit(2)
        return
    for reason, runs in cannot.items():
        console.print(f"[red]cannot run[/red] {', '.join(runs)}: {reason}", highlight=False)
    failed = False
    outcomes = []
    scratch = None if no_leaderboard or leaderboard_dir is None else check_scratch(leaderboard_dir)
    with progress() as task_factory, where:
        runner = api.runner(
            plugins=plugins,
            output_dir=output,
            device=device,
            batch_size=batch_size,
            progress=task_factory,
            fresh=fresh,
            train_split=train_split,
            validation_split=None if validation_split == "none" else validation_split,
            allow_training=not no_train,
            executor=where,
            devices=split_list(devices) or (),
        )
        for spec in specs:
            console.print(f"[bold]running[/bold] {spec.describe()}", markup=True, highlight=False)
            try:
                outcome = run_seeds(runner, spec, seed_list) if seed_list else runner.run(spec)
                if scratch is not None:
                    outcome.row_path = record_row(scratch, outcome.row)
            except HarnessError as exc:
                if len(targets) == 1:
                    raise
                # With several runs, one that cannot run (e.g. data not available) must not
                # cost the others; it is reported and the exit status says so.
                cannot.setdefault(str(exc), []).append(spec.describe())
                console.print(f"[red]failed:[/red] {exc}", highlight=False)
                continue
            outcomes.append(outcome)
            failed |= any(not c.ok for c in outcome.checks)
    if fmt == "json":
        echo_json([_outcome_json(o) for o in outcomes])
    else:
        for outcome in outcomes:
            _print_outcome(outcome)
    if cannot:
        click.echo(_grouped(f"{_count(cannot)} of {len(targets)} runs failed", cannot), err=True)
        sys.exit(2)
    if check and failed:
        sys.exit(1)


def _count(reasons: dict[str, list[str]]) -> int:
    return sum(len(runs) for runs in reasons.values())


def _grouped(headline: str, reasons: dict[str, list[str]]) -> str:
    """``error: headline:`` then one line per reason, naming the runs it stopped."""
    return f"error: {headline}:\n  " + "\n  ".join(f"{', '.join(runs)}: {reason}" for reason, runs in reasons.items())


def _dry_run(specs: list[Any], fmt: str) -> None:
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
        echo_json(data)
        return
    for item in data:
        condition = f" (condition {item['condition']})" if item["condition"] else ""
        stdout.print(f"would run {item['run']}{condition}", markup=False)


def _outcome_json(outcome: Any) -> dict[str, Any]:
    return {
        "row": outcome.row.model_dump(mode="json"),
        "run_dir": str(outcome.run_dir),
        "row_path": str(outcome.row_path) if outcome.row_path else None,
        "checks": [
            {"metric": c.metric, "expected": c.expected, "actual": c.actual, "ok": c.ok} for c in outcome.checks
        ],
        "notes": outcome.notes,
        "phases": outcome.phases,
        # the row's index_build_seconds came from an earlier invocation (this one resumed)
        "index_built_earlier": outcome.built_earlier,
    }


def _print_outcome(outcome: Any) -> None:

    row = outcome.row
    metrics = list(row.metrics)
    values = [f"{100 * v:.2f}" for v in row.metrics.values()]
    title = f"{outcome.spec.describe()} — {row.num_queries} queries"
    stdout.print(table(title, metrics, [values], right=set(metrics)))
    # a resumed run did not just build the index: say when it was built and what this run did
    if not outcome.built_earlier:
        index = f"index build {row.index_build_seconds:.2f} s"
    elif outcome.phases.get("build"):
        index = (
            f"index built earlier in {row.index_build_seconds:.2f} s, "
            f"built or loaded from the cache now in {outcome.phases['build']:.2f} s"
        )
    else:
        index = f"index built earlier in {row.index_build_seconds:.2f} s, not needed now"
    stdout.print(
        f"latency/query {row.latency.mean_ms:.2f} ms (p50 {row.latency.p50_ms:.2f}, p95 {row.latency.p95_ms:.2f}); "
        f"{index}; total {row.total_seconds:.2f} s"
        + (f"; resumed {outcome.resumed_queries} queries" if outcome.resumed_queries else "")
    )
    if outcome.phases:
        stdout.print("time: " + ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in outcome.phases.items()))
    stdout.print(
        f"run files: {outcome.run_dir}" + (f"\nleaderboard row: {outcome.row_path}" if outcome.row_path else "")
    )
    from harness.run.secrets import redact  # a note may quote a plugin's or an executor's error

    for note in outcome.notes:
        stdout.print(f"note: {redact(note)}", highlight=False)
    for check in outcome.checks:  # ×100 as the table above; four decimals: the tolerances are that fine
        actual = "missing" if check.actual is None else f"{100 * check.actual:.4f}"
        diff = "" if check.actual is None else f" ({100 * (check.actual - check.expected):+.4f})"
        status = "[green]OK[/green]" if check.ok else "[red]FAIL[/red]"
        expected = f"{100 * check.expected:.4f} ± {100 * check.tolerance:.4f}"
        stdout.print(f"{status} {check.metric}: expected {expected}, got {actual}{diff}", highlight=False)


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(run)
