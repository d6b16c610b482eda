"""What is installed and what the data looks like: ``list``, ``plugins``, ``describe``, ``stats``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from harness.cli.common import data_dir_option, echo_json, format_option, print_table, registry_option, stdout, table
from harness.errors import HarnessError
from harness.plugins.hookspecs import hookimpl


@click.command(name="list")
@click.option("--params", "show_params", is_flag=True, help="also every component's parameters")
@format_option()
@registry_option
def list_(show_params: bool, fmt: str, registry_path: str | None) -> None:
    """Datasets, retrievers, metrics and conditions that can run here (registry entries whose
    plugin is missing, whose parameters are invalid or that use what cannot run are hidden)."""
    from harness.cli.runnable import component_params, runnable
    from harness.plugins import get_plugin_manager
    from harness.run import load_registry
    from harness.run.secrets import redact

    plugins = get_plugin_manager()
    loaded_before = len(plugins.failures)
    plugins.load_all()  # a component whose code does not load is reported and left out, as a broken plugin is
    for failure in plugins.failures[loaded_before:]:
        click.echo(f"warning: plugin {failure.plugin!r}: {failure.error}", err=True)
    registry = load_registry(registry_path, plugins, check_all=True)
    found = runnable(registry, plugins)
    components = plugins.components
    data: dict[str, Any] = {
        "registry": registry.source,
        "datasets": found.datasets,
        "retrievers": found.retrievers,
        "metrics": [],
        # kinds plugins offer each other (add_hookspecs): LLM providers, synthesis stages, ...
        "other": {
            kind: sorted(components.by_kind.get(kind, {}))
            for _, kind in plugins.component_hooks.values()
            if kind not in ("dataset", "retriever", "metric") and components.by_kind.get(kind)
        },
        "conditions": [c.model_dump() for c in found.conditions],
        "hidden": found.hidden,
        "problems": registry.problems,
    }
    for family, metric in sorted(components.by_kind.get("metric", {}).items()):
        data["metrics"].append(f"{family}@k" if metric.requires_k else (f"{family}[@k]" if metric.takes_k else family))
    if show_params:
        data["params"] = component_params(plugins)
    if fmt == "json":
        echo_json(data)
        return
    stdout.print(f"[dim]registry: {registry.source}[/dim]")
    for kind in ("datasets", "retrievers"):
        # redacted before the table wraps a long URL over lines
        cells = [[name, info["plugin"], redact(_details(info))] for name, info in data[kind].items()]
        print_table(kind, ["name", "plugin", "details"], cells, optional=["plugin"], wrap=["details"])
    stdout.print("metrics: " + ", ".join(data["metrics"]), markup=False)
    for kind, names in data["other"].items():
        stdout.print(f"{kind}: " + ", ".join(names), markup=False)
    cells = []
    for c in found.conditions:
        expected = ", ".join(f"{m}={100 * v:.2f}" for m, v in c.expected.items())  # ×100, as every table
        tolerance = f" (±{100 * c.tolerance:.2f})" if expected else ""
        cells.append([c.name, c.retriever, c.dataset, c.split, expected + tolerance])
    columns = ["name", "retriever", "dataset", "split", "expected (×100)"]
    print_table("conditions", columns, cells, optional=["retriever", "split", "dataset"], wrap=[columns[-1]])
    if show_params:
        _print_params(data["params"])
    if found.hidden:
        stdout.print(f"[dim]{found.summary()} (--format json lists them)[/dim]", highlight=False)
    for problem in registry.problems:
        stdout.print(f"[dim]registry: {redact(problem)}[/dim]", highlight=False)


def _details(info: dict[str, Any]) -> str:
    """A component's entry as a person reads it: ``splits: train, val, test (--all: val, test)``,
    ``k1=0.9, b=0.4; uses: bm25``."""
    parts = []
    if "splits" in info:
        evaluated = info.get("evaluated") or []
        also = f" (--all: {', '.join(evaluated)})" if evaluated and evaluated != info["splits"] else ""
        parts.append(f"splits: {', '.join(info['splits']) or '–'}{also}")
    if info.get("params"):
        parts.append(", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in info["params"].items()))
    if info.get("uses"):
        parts.append(f"uses: {', '.join(info['uses'])}")
    return "; ".join(parts)


def _print_params(params: dict[str, dict[str, Any]]) -> None:
    for kind, by_name in params.items():
        for name, info in by_name.items():
            fields = info["params"]
            title = f"{kind} {name}" + (f" ({info['package']})" if info.get("package") else "")
            if not fields:
                stdout.print(f"{title}: no parameters", highlight=False)
                continue
            cells = [[f["name"], f["type"], _default(f["default"]), f["description"]] for f in fields]
            stdout.print(table(title, ["parameter", "type", "default", "description"], cells))


def _default(value: Any) -> str:
    from harness.run.secrets import redact

    return value if value == "(required)" else redact(json.dumps(value, default=str))


@click.command()
@click.option("--hook", help="only plugins implementing this hook")
def plugins(hook: str | None) -> None:
    """Installed plugins and the hooks they implement, as JSON."""
    from harness.plugins import get_plugin_manager

    manager = get_plugin_manager()
    known = sorted(manager.pm.hook.__dict__)
    if hook is not None and hook not in known:
        raise HarnessError(f"unknown hook {hook!r}; hooks: {', '.join(known)}")
    echo_json(manager.describe(hook))


@click.command()
@click.argument("dataset")
@format_option()
@data_dir_option
@registry_option
def describe(dataset: str, fmt: str, data_dir: str | None, registry_path: str | None) -> None:
    """Counts for a dataset: nodes and edges by type, candidates, queries per split."""
    from harness.run import load_dataset

    info = load_dataset(dataset, data_dir, registry_path).describe()
    if fmt == "json":
        echo_json(info)
        return
    stdout.print(f"[bold]{dataset}[/bold]")
    for key, value in info.items():
        if isinstance(value, dict):
            cells = [[str(n), f"{c:,}" if isinstance(c, int) else str(c)] for n, c in value.items()]
            stdout.print(table(key, ["type", "count"], cells, right={"count"}))
        else:
            stdout.print(f"{key}: {value:,}" if isinstance(value, int) else f"{key}: {value}")


@click.command()
@click.argument("dataset", required=False)
@click.option("--queries", "queries_dir", type=click.Path(file_okay=False), help="a query set in STaRK's layout")
@data_dir_option
@click.option("--png", type=click.Path(dir_okay=False), help="also write length/answer histograms here")
@format_option()
@registry_option
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
        missing = "not written: matplotlib is not installed (pip install 'stark-harness[leaderboard]')"
        result["png"] = str(written) if written else missing
    if fmt == "json":
        echo_json(result)
        return
    columns = ["split", "queries", "words", "entropy", "TTR", "median len", "mean answers", ">30 answers"]
    cells = [
        [
            name,
            f"{summary['queries']:,}",
            f"{summary['words']:,}",
            f"{summary['shannon_entropy']:.2f}",
            f"{summary['type_token_ratio']:.3f}",
            f"{summary['query_length_words'].get('median', 0):.0f}",
            f"{summary['answers_per_query'].get('mean', 0):.1f}",
            f"{summary['share_with_more_than_30_answers']:.1%}",
        ]
        for name, summary in [("all", result["all"]), *result["splits"].items()]
    ]
    title = f"{dataset} query statistics (words = whitespace tokens)"
    stdout.print(table(title, columns, cells, right=set(columns) - {"split"}))
    if png:
        stdout.print(f"histograms: {result['png']}")


@hookimpl
def register_commands(cli: click.Group) -> None:
    for command in (list_, plugins, describe, stats):
        cli.add_command(command)
