"""Scoring and comparing runs: ``evaluate`` (TREC files) and ``compare`` (run directories)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from harness.cli.common import echo_json, format_option, stdout, table
from harness.errors import HarnessError
from harness.plugins.hookspecs import hookimpl


@click.command(name="evaluate")
@click.option("--run", "run_file", required=True, type=click.Path(exists=True, dir_okay=False), help="TREC run file")
@click.option("--qrels", required=True, type=click.Path(exists=True, dir_okay=False), help="TREC qrels file")
@click.option("--metrics", "-m", default="hit@1,hit@5,recall@20,mrr,map@100,ndcg@10", show_default=True)
@click.option("--per-query", is_flag=True, help="also print every query's values")
@format_option()
def evaluate_cmd(run_file: str, qrels: str, metrics: str, per_query: bool, fmt: str) -> None:
    """Score a TREC run against TREC qrels with the harness's metric definitions.

    The run is read as trec_eval reads it (by score, ties by document id descending); metrics
    that share a name with a trec_eval measure have its definition. Every query in the qrels
    is evaluated and a query missing from the run scores 0 (trec_eval -c).
    """
    from harness.metrics import evaluate, means, parse_metrics
    from harness.plugins import get_plugin_manager
    from harness.run.scoring import hit_matrix
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
    summary: dict[str, Any] = {
        "queries": len(qids),
        "queries_missing_from_run": sum(1 for q in qids if q not in rankings),
        "run_queries_without_qrels": sum(1 for q in rankings if q not in judgements),
        "metrics": means(values),
    }
    if per_query:
        summary["per_query"] = {q: {m: float(v[i]) for m, v in values.items()} for i, q in enumerate(qids)}
    if fmt == "json":
        echo_json(summary)
        return
    names = list(summary["metrics"])
    cells = [[f"{v:.4f}" for v in summary["metrics"].values()]]
    stdout.print(table(f"{run_file}: {len(qids)} queries", names, cells, right=set(names)))
    if summary["queries_missing_from_run"]:
        stdout.print(f"{summary['queries_missing_from_run']} qrels queries are missing from the run (scored 0)")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--metric", "-m", default="mrr", show_default=True)
@click.option("--resamples", type=int, default=10_000, show_default=True, help="randomization and bootstrap draws")
@click.option("--seed", type=int, default=0, show_default=True)
@format_option()
def compare(runs: tuple[str, ...], metric: str, resamples: int, seed: int, fmt: str) -> None:
    """Compare runs (directories with per_query.jsonl) against the first: difference, paired
    randomization and t-test p-values, bootstrap 95% interval."""
    from harness.analysis.compare import compare_runs

    results = compare_runs(list(runs), metric, resamples, seed)
    if fmt == "json":
        echo_json(results)
        return
    columns = ["run", "mean", "Δ", "95% CI", "p (randomization)", "p (t-test)", ""]
    cells = [[Path(runs[0]).name, f"{results[0]['mean_a']:.4f}", "", "", "", "", "baseline"]]
    for r in results:
        marker = "**" if r["p_randomization"] < 0.01 else "*" if r["p_randomization"] < 0.05 else ""
        cells.append(
            [
                Path(r["run"]).name,
                f"{r['mean_b']:.4f}",
                f"{r['difference']:+.4f}",
                f"[{r['ci95_low']:+.4f}, {r['ci95_high']:+.4f}]",
                f"{r['p_randomization']:.4f}",
                f"{r['p_ttest']:.4f}",
                marker,
            ]
        )
    title = f"{metric} against {Path(runs[0]).name} ({results[0]['queries']} shared queries)"
    stdout.print(table(title, columns, cells, right=set(columns) - {"run"}))
    stdout.print("* p < 0.05, ** p < 0.01 (paired randomization test)")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(evaluate_cmd)
    cli.add_command(compare)
