"""Scoring and comparing runs: ``evaluate`` (run and qrels files) and ``compare`` (run
directories, or run files with qrels)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click

from harness.cli.common import console, echo_json, format_option, print_table, stdout
from harness.errors import HarnessError
from harness.plugins.hookspecs import hookimpl

_RUN_FORMAT_HELP = (
    "trec (qid Q0 docid rank score tag), msmarco (qid docid rank) or ranx (JSON {qid: {docid: score}}); "
    "default: told from the file (.json → ranx, .trec → trec, else a leading '{' → ranx, or by the columns "
    "of the first line)"
)


def run_format_option(func: Any) -> Any:
    return click.option("--run-format", type=click.Choice(["trec", "msmarco", "ranx"]), help=_RUN_FORMAT_HELP)(func)


def score_runs(
    run_files: list[str], qrels: str, metrics: str, run_format: str | None, complete: bool = True
) -> tuple[list[str], list[Any]]:
    """The query ids scored (sorted) and, for each run file, every metric's per-query values
    over them, with the counts of the qrels' queries missing from the run and of the run's
    queries without qrels.

    ``complete``: every query of the qrels is scored, one missing from a run scoring 0
    (``trec_eval -c``); else only the queries the run answers (trec_eval's default; one run).
    On graded qrels (a grade above 1) nDCG takes the grades as gains, as trec_eval's does;
    every other metric reads a grade > 0 as relevant."""
    from harness.metrics import Grades, evaluate, parse_metrics, uses_grades
    from harness.plugins import get_plugin_manager
    from harness.run.scoring import hit_matrix
    from harness.trec import read_any_run, read_grades

    if not complete and len(run_files) != 1:
        raise ValueError("only one run is scored over the queries it answers: the runs' queries differ")
    metric_objs = parse_metrics(metrics, get_plugin_manager().components.by_kind["metric"])
    runs = [read_any_run(run_file, run_format) for run_file in run_files]  # type: ignore[arg-type]
    grades = read_grades(qrels)
    graded = any(g > 1 for docs in grades.values() for g in docs.values()) and any(map(uses_grades, metric_objs))
    if graded:
        _check_integer_grades(qrels, grades)
    judgements = {qid: {doc for doc, grade in docs.items() if grade > 0} for qid, docs in grades.items()}
    if not judgements:
        raise HarnessError(f"{qrels}: no judgements")
    scored = []
    for run_file, rankings in zip(run_files, runs, strict=True):
        missing = sum(1 for q in judgements if q not in rankings)
        extra = sum(1 for q in rankings if q not in judgements)
        # a query is answered when the run names it: a TREC line, or a ranx entry (even empty)
        qids = sorted(judgements) if complete else sorted(q for q in judgements if q in rankings)
        if not qids:
            raise HarnessError(
                f"{run_file} answers none of the {len(judgements)} queries of {qrels} (its query ids are not "
                "the qrels'); --complete scores each of them 0, as trec_eval -c"
            )
        vocabulary: dict[str, int] = {}

        def encode(docs: Any, vocabulary: dict[str, int] = vocabulary) -> list[int]:
            return [vocabulary.setdefault(d, len(vocabulary)) for d in docs]

        hits, n_relevant = hit_matrix(
            [encode(rankings.get(q, [])) for q in qids], [encode(judgements[q]) for q in qids]
        )
        gains = None
        if graded:  # the grade at each rank (0: not judged), and every judged grade
            ranked = [[grades[q].get(doc, 0.0) for doc in rankings.get(q, [])] for q in qids]
            gains = Grades(ranked, [list(grades[q].values()) for q in qids])
        scored.append((evaluate(metric_objs, hits, n_relevant, gains), missing, extra))
    return qids, scored


def _check_integer_grades(qrels: str, grades: dict[str, dict[str, float]]) -> None:
    """trec_eval reads grades as integers (``atol``): a fractional gain would be another nDCG."""
    for qid, docs in grades.items():
        for doc, grade in docs.items():
            if grade != int(grade):
                raise HarnessError(
                    f"{qrels}: query {qid}, document {doc}: relevance {grade:g} is not an integer; graded nDCG "
                    "takes the grades as gains, as trec_eval reads them (integers)"
                )


@click.command(name="evaluate")
@click.option(
    "--run",
    "run_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="run file: TREC, MS MARCO or ranx JSON (see --run-format)",
)
@click.option("--qrels", required=True, type=click.Path(exists=True, dir_okay=False), help="TREC qrels file")
@run_format_option
@click.option("--metrics", "-m", default="hit@1,hit@5,recall@20,mrr,map@100,ndcg@10", show_default=True)
@click.option(
    "--complete",
    "-c",
    is_flag=True,
    help="average over every query of the qrels, one the run does not answer scoring 0 (trec_eval -c); "
    "default: over the queries the run answers, as trec_eval",
)
@click.option("--per-query", is_flag=True, help="also print every query's values")
@format_option()
def evaluate_cmd(
    run_file: str, qrels: str, run_format: str | None, metrics: str, complete: bool, per_query: bool, fmt: str
) -> None:
    """Score a run (TREC, MS MARCO or ranx JSON) against TREC qrels with the harness's metric
    definitions.

    A TREC or ranx run is read as trec_eval reads it (by score, ties by document id
    descending); an MS MARCO run by its rank column. Metrics that share a name with a
    trec_eval measure have its definition; on graded qrels nDCG takes the grades as gains
    (trec_eval's ndcg and ndcg_cut), the others count a grade > 0 as relevant. As trec_eval,
    the means are over the qrels' queries that the run answers, with a warning when it leaves
    some out; --complete averages over all of them, a missing query scoring 0 (trec_eval -c).
    """
    from harness.metrics import means

    qids, [(values, missing, extra)] = score_runs([run_file], qrels, metrics, run_format, complete)
    judged = len(qids) if complete else len(qids) + missing
    summary: dict[str, Any] = {
        "queries": len(qids),
        "qrels_queries": judged,
        "queries_missing_from_run": missing,
        "run_queries_without_qrels": extra,
        "complete": complete,
        "metrics": means(values),
    }
    if per_query:
        summary["per_query"] = {q: {m: float(v[i]) for m, v in values.items()} for i, q in enumerate(qids)}
    if fmt == "json":
        echo_json(summary)
    else:  # ×100, as run, compare and the leaderboard print them; JSON keeps fractions
        names = list(summary["metrics"])
        cells = [[f"{100 * v:.2f}" for v in summary["metrics"].values()]]
        print_table(f"{run_file}: {len(qids)} queries (metrics ×100)", names, cells, right=set(names))
    if missing and complete:
        console.print(
            f"note: {missing} of the {judged} qrels queries are missing from the run (scored 0)",
            highlight=False,
            soft_wrap=True,
        )
    elif missing:  # a sampled run against the whole split's qrels, or the wrong qrels: said, never silent
        console.print(
            f"[yellow]warning:[/yellow] the run answers {len(qids)} of the {judged} qrels queries: the means are "
            f"over those {len(qids)}, as trec_eval's; --complete averages over all {judged}, the {missing} "
            "missing scoring 0 (trec_eval -c)",
            highlight=False,
            soft_wrap=True,
        )


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--qrels",
    type=click.Path(exists=True, dir_okay=False),
    help="TREC qrels: score every run from its run file (a run directory's run.trec) against them",
)
@run_format_option
@click.option("--metric", "-m", default="mrr", show_default=True)
@click.option("--resamples", type=int, default=10_000, show_default=True, help="randomization and bootstrap draws")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--by",
    "field",
    metavar="FIELD",
    help="also compare within each value of a query attribute (the `metadata` of the dataset's queries, "
    "e.g. hops on debian): the dataset is the one the first run's config.json names",
)
@click.option(
    "--pair-by",
    metavar="FIELD",
    help="pair each run's queries with the first run's by this query attribute, the first run's query id "
    "(e.g. paraphrase_of: debian's test-paraphrased against test)",
)
@click.option("--data-dir", type=click.Path(file_okay=False), help="with --by: where the dataset's files are")
@format_option()
def compare(
    runs: tuple[str, ...],
    qrels: str | None,
    run_format: str | None,
    metric: str,
    resamples: int,
    seed: int,
    field: str | None,
    pair_by: str | None,
    data_dir: str | None,
    fmt: str,
) -> None:
    """Compare runs against the first: difference, paired randomization and t-test p-values,
    bootstrap 95% interval.

    RUNS are run directories (their per_query.jsonl), or, with --qrels, run files from any
    tool (TREC, MS MARCO, ranx JSON) or run directories (their run.trec), whose per-query
    values are computed from the run and the qrels as `harness evaluate` computes them."""
    from harness.analysis.compare import MIN_GROUP, compare_runs, load_per_query, query_groups

    if qrels is None:
        files = [run for run in runs if not Path(run).is_dir()]
        if files:
            raise HarnessError(
                f"compare: {files[0]} is a run file, not a run directory; give --qrels FILE to score run files"
            )
        groups = query_groups(runs[0], field, data_dir) if field else None
        pairs = None
        if pair_by:  # another split's queries, each naming the first run's query it stands for
            pairs = [
                {q: int(v) for q, v in query_groups(run, pair_by, data_dir, "--pair-by").items()} for run in runs[1:]
            ]
        results = compare_runs(list(runs), metric, resamples, seed, groups, pairs)
    else:
        groups = None
        if field or pair_by:
            raise HarnessError(
                "compare: --by and --pair-by read the queries a run directory's config.json names; not with --qrels"
            )
        results = _compare_files(list(runs), qrels, run_format, metric, resamples, seed)
    if fmt == "json":
        echo_json(results)
        return
    from harness.analysis.labels import run_labels

    labels = dict(zip(runs, run_labels(list(runs)), strict=True))
    for group in dict.fromkeys(r.get("group") for r in results):
        _print_comparison([r for r in results if r.get("group") == group], runs[0], metric, field, group, labels)
    stdout.print("p: paired randomization test (* p < 0.05, ** p < 0.01)")
    if groups:
        tested = {r.get("group") for r in results}
        sizes = Counter(groups[q] for q in load_per_query(runs[0]) if q in groups)
        small = [f"{field}={g} ({n})" for g, n in sorted(sizes.items()) if g not in tested]
        if small:
            stdout.print(f"not tested on their own (fewer than {MIN_GROUP} shared queries): {', '.join(small)}")
    missing = {runs[0]: results[0].get("missing_a", 0)} | {r["run"]: r.get("missing_b", 0) for r in results}
    for run, count in missing.items():
        if count:
            stdout.print(
                f"note: {run} does not answer {count} of the {results[0]['queries']} queries; they score 0 there"
            )


def _print_comparison(
    results: list[dict[str, Any]],
    baseline: str,
    metric: str,
    field: str | None,
    group: str | None,
    labels: dict[str, str],
) -> None:
    """One table: the baseline's mean, then each run's difference and its tests; means and
    differences ×100, as every table for people prints them (JSON keeps fractions)."""
    columns = ["run", "mean", "Δ", "95% CI", "p", "p (t-test)"]
    cells = [[labels[baseline], f"{100 * results[0]['mean_a']:.2f}", "baseline", "", "", ""]]
    for r in results:
        marker = " **" if r["p_randomization"] < 0.01 else " *" if r["p_randomization"] < 0.05 else ""
        cells.append(
            [
                labels[r["run"]],
                f"{100 * r['mean_b']:.2f}",
                f"{100 * r['difference']:+.2f}",
                f"[{100 * r['ci95_low']:+.2f}, {100 * r['ci95_high']:+.2f}]",
                f"{r['p_randomization']:.4f}{marker}",
                f"{r['p_ttest']:.4f}",
            ]
        )
    which = (
        f"{field}={group}: {results[0]['queries']} queries"
        if group is not None
        else f"{results[0]['queries']} shared queries"
    )
    title = f"{metric} ×100 against {labels[baseline]} ({which})"
    print_table(title, columns, cells, right=set(columns) - {"run"}, optional=["95% CI", "p (t-test)"])


def _compare_files(
    runs: list[str], qrels: str, run_format: str | None, metric: str, resamples: int, seed: int
) -> list[dict[str, Any]]:
    """What ``compare_runs`` gives for run directories, from run files and qrels."""
    import numpy as np

    from harness.analysis.compare import paired_test

    if len(runs) < 2:
        raise HarnessError("compare: give at least two runs")
    files = []
    for run in runs:
        path = Path(run)
        if path.is_dir():
            path = path / "run.trec"
            if not path.is_file():
                raise HarnessError(f"compare: {run} is a directory without run.trec")
        files.append(str(path))
    if "," in metric:
        raise HarnessError(f"compare: one metric at a time, got {metric!r}")
    qids, scored = score_runs(files, qrels, metric, run_format)
    for run, (_, missing, _) in zip(runs, scored, strict=True):
        if missing == len(qids):  # every value would be 0: another split's run, or other qrels
            raise HarnessError(f"compare: {run} answers none of the {len(qids)} queries of {qrels}")
    [name] = scored[0][0]  # the metric's canonical name ("MRR" → "mrr")
    base, base_missing = scored[0][0][name], scored[0][1]
    return [
        {
            "baseline": runs[0],
            "run": run,
            "metric": name,
            "queries": len(base),
            # queries of the qrels a run does not answer score 0 there (trec_eval -c): said, not hidden
            "missing_a": base_missing,
            "missing_b": missing,
            **paired_test(np.asarray(base), np.asarray(values[name]), resamples, seed),
        }
        for run, (values, missing, _) in zip(runs[1:], scored[1:], strict=True)
    ]


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(evaluate_cmd)
    cli.add_command(compare)
