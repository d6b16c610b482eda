"""Runs from other tools: MS MARCO (``qid docid rank``) and ranx JSON (``{qid: {docid: score}}``)
beside TREC, in ``harness evaluate`` and ``harness compare`` — scored as pytrec_eval scores the
same run, ties included, and ``compare`` on run files and qrels equal to ``compare`` on the run
directories the harness wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import OverlapRetriever, installed_alone

from harness.cli import cli
from harness.metrics import parse_metrics
from harness.plugins.metric_families import BUILTIN_METRICS
from harness.testing import TinyDataset, pytrec_eval
from harness.trec import read_any_run, run_format_of

#: ours → pytrec_eval's output key, checked against each metric's declared trec_eval measure
MEASURES = {
    "mrr": "recip_rank",
    "map": "map",
    "ndcg": "ndcg",
    "precision@5": "P_5",
    "recall@10": "recall_10",
    "ndcg@10": "ndcg_cut_10",
    "hit@1": "success_1",
}
PYTREC_SPEC = {"recip_rank", "map", "ndcg", "P.5", "recall.10", "ndcg_cut.10", "success.1"}


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_measures_compared_are_trec_evals() -> None:
    families = {m.family: m for m in BUILTIN_METRICS}
    for metric in parse_metrics(list(MEASURES), families):
        assert metric.trec_eval_measure == MEASURES[metric.name]


def _random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Qrels (binary, some queries judged not relevant only) and a run whose scores tie often,
    with a query missing from the run, one with no results and one without qrels."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(25):
        qid = f"q{q}"
        judged = rng.choice(docs, size=int(rng.integers(1, 6)), replace=False)
        qrels[qid] = {str(d): int(rng.random() < 0.6) for d in judged}
        if q == 3:
            continue  # missing from the run: scores 0
        ranked = rng.choice(docs, size=0 if q == 4 else int(rng.integers(1, 20)), replace=False)
        run[qid] = {str(d): float(rng.integers(0, 4)) / 2 for d in ranked}  # few distinct scores: ties
    run["extra"] = {"d1": 1.0}  # a query the qrels do not judge
    return qrels, run


def _write_qrels(path: Path, qrels: dict[str, dict[str, int]]) -> None:
    path.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items()))


def _per_query(run_file: Path, qrels_file: Path, *options: str) -> dict[str, dict[str, float]]:
    """Every qrels query's values: --complete scores the one missing from the run 0 (trec_eval -c)."""
    code, out, err = invoke(
        "evaluate", "--run", str(run_file), "--qrels", str(qrels_file), "-m", ",".join(MEASURES), "--per-query",
        "--complete", "--format", "json", *options,
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)["per_query"]


def _agree(ours: dict[str, dict[str, float]], qrels: dict, run: dict) -> None:
    theirs = pytrec_eval().RelevanceEvaluator(qrels, PYTREC_SPEC).evaluate(run)
    assert set(ours) == set(qrels)
    for qid, values in ours.items():
        if qid not in theirs:  # pytrec_eval leaves out what trec_eval -c scores 0
            assert set(values.values()) == {0.0}, qid
            continue
        assert values == pytest.approx({m: theirs[qid][t] for m, t in MEASURES.items()}, abs=1e-12), qid
    assert len(theirs) >= 20


@pytest.mark.parametrize("seed", range(5))
def test_a_ranx_run_scores_as_pytrec_eval_scores_the_same_dictionary(tmp_path: Path, seed: int) -> None:
    qrels, run = _random_case(seed)
    _write_qrels(tmp_path / "qrels.trec", qrels)
    (tmp_path / "run.json").write_text(json.dumps(run))
    _agree(_per_query(tmp_path / "run.json", tmp_path / "qrels.trec"), qrels, run)
    # without the extension, the content tells; --run-format says it outright
    (tmp_path / "run.txt").write_text(json.dumps(run, indent=1))
    assert run_format_of(tmp_path / "run.txt") == "ranx"
    _agree(_per_query(tmp_path / "run.txt", tmp_path / "qrels.trec", "--run-format", "ranx"), qrels, run)


@pytest.mark.parametrize("seed", range(5))
def test_an_ms_marco_run_is_ordered_by_its_rank_column(tmp_path: Path, seed: int) -> None:
    qrels, scored = _random_case(seed)
    rng = np.random.default_rng(100 + seed)
    lines, run = [], {}
    for qid, docs in scored.items():
        order = list(docs)
        rng.shuffle(order)  # any order, ties broken anyhow: the rank column is the ranking
        lines += [f"{qid}\t{doc}\t{rank}" for rank, doc in enumerate(order, start=1)]
        # the same ranking as scores pytrec_eval orders the same way: strictly decreasing
        run[qid] = {doc: float(-rank) for rank, doc in enumerate(order, start=1)}
    rng.shuffle(lines)  # the file's line order says nothing
    (tmp_path / "run.tsv").write_text("\n".join(lines) + "\n")
    _write_qrels(tmp_path / "qrels.trec", qrels)
    assert run_format_of(tmp_path / "run.tsv") == "msmarco"
    _agree(_per_query(tmp_path / "run.tsv", tmp_path / "qrels.trec"), qrels, run)
    assert read_any_run(tmp_path / "run.tsv") == {q: list(docs) for q, docs in run.items() if docs}


def test_a_tie_is_broken_as_trec_eval_breaks_it_in_every_scored_format(tmp_path: Path) -> None:
    """Equal scores — also scores equal only as 32-bit floats — rank the greater document id
    first, in a ranx run as in a TREC run."""
    run = {"1": {"d1": 5.0, "d2": 5.0, "d3": 5.0000000001, "d9": 1.0}}
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "run.trec").write_text("".join(f"1 Q0 {d} 1 {s!r} x\n" for d, s in run["1"].items()))
    assert read_any_run(tmp_path / "run.json") == read_any_run(tmp_path / "run.trec") == {"1": ["d3", "d2", "d1", "d9"]}


@pytest.mark.parametrize(
    "name, content, options, message",
    [
        ("run.json", '{"q1": {"d1": 1.0,\n "d2": }}', (), r"run.json:2:8: not a ranx JSON run: Expecting value"),
        (
            "run.json",
            '{"q1": {"d1": "high"}}',
            (),
            r"query 'q1', document 'd1': score 'high' is not a finite",
        ),
        ("run.json", '{"q1": {"d1": NaN}}', (), r"run.json: query 'q1', document 'd1': score nan is not a finite"),
        (
            "run.json",
            '{"q1": ["d1", "d2"]}',
            (),
            r"run.json: query 'q1': expected an object \{docid: score\}",
        ),
        ("run.json", '[["q1", "d1", 1.0]]', (), r"run.json: a ranx JSON run is an object .*got list"),
        ("run.tsv", "q1\td1\t1\nq1\td2\t1\n", (), r"run.tsv:2: rank 1 is given twice for query q1"),
        ("run.tsv", "q1\td1\t1\nq1\td2\tfirst\n", (), r"run.tsv:2: rank 'first' is not a positive integer"),
        ("run.tsv", "q1\td1\t1\nq1\td1\t2\n", (), r"run.tsv:2: document d1 is listed twice for query q1"),
        ("run.tsv", "q1\td1\t1\n\nq1\td2\t2\t0.5\n", (), r"run.tsv:3: an MS MARCO run line has 3 columns .* got 4"),
        ("run.txt", "\nq1 d1\n", (), r"run.txt:2: 2 columns: not a TREC run .* give --run-format"),
        ("run.trec", "q1 Q0 d1 1 2.0 x\n", ("--run-format", "msmarco"), r"run.trec:1: an MS MARCO .* got 6"),
        ("run.trec", "q1 d1 1\n", ("--run-format", "trec"), r"run.trec:1: a run line has 6 columns"),
        ("run.trec", b"q1 Q0 d\xff 1 2.0 x\n", (), r"run.trec: not UTF-8 text"),
    ],
)
def test_a_malformed_run_is_one_error_naming_file_and_line(
    tmp_path: Path, name: str, content: str | bytes, options: tuple[str, ...], message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _write_qrels(tmp_path / "qrels.trec", {"q1": {"d1": 1}})
    code, _, err = invoke("evaluate", "--run", str(path), "--qrels", "qrels.trec", *options)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and re.search(message, err), err


PRESETS = """
defaults: {dataset: tiny, retriever: overlap, split: test, k: 5, metrics: [hit@1, mrr, ndcg@5]}
datasets:
  tiny: {plugin: tiny, splits: [train, test]}
retrievers:
  overlap: {plugin: overlap}
  overlap-relations: {plugin: overlap, params: {with_relations: true}}
  overlap-strict: {plugin: overlap, params: {min_overlap: 2}}
"""


def test_compare_on_run_files_and_qrels_equals_compare_on_run_directories(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    installed_alone(monkeypatch, tmp_path, PRESETS, [TinyDataset], [OverlapRetriever], "fake-plugin")
    run_dirs = []
    for retriever in ("overlap", "overlap-relations", "overlap-strict"):
        code, out, err = invoke("run", "-r", retriever, "--format", "json")
        assert code == 0, err
        run_dirs.append(Path(json.loads(out)[0]["run_dir"]))
    qrels = run_dirs[0] / "qrels.trec"
    # the same runs as another tool would hand them over
    trec = [d / "run.trec" for d in run_dirs]
    lines = [line.split() for line in trec[1].read_text().splitlines()]
    (tmp_path / "relations.tsv").write_text("".join(f"{q}\t{d}\t{r}\n" for q, _, d, r, _, _ in lines))
    ranx: dict[str, dict[str, float]] = {}
    for q, _, d, _, s, _ in (line.split() for line in trec[2].read_text().splitlines()):
        ranx.setdefault(q, {})[d] = float(s)
    (tmp_path / "strict.json").write_text(json.dumps(ranx))

    def compared(*args: str) -> list[dict]:
        code, out, err = invoke("compare", *args, "--format", "json")
        assert code == 0, err
        # run files also say how many queries of the qrels each run leaves unanswered
        hidden = ("baseline", "run", "missing_a", "missing_b")
        return [{k: v for k, v in row.items() if k not in hidden} for row in json.loads(out)]

    for metric in ("mrr", "hit@1", "ndcg@5"):
        expected = compared(*map(str, run_dirs), "-m", metric)
        assert expected[0]["difference"] != 0 or expected[1]["difference"] != 0
        assert expected[0]["queries"] == len(TinyDataset().load_queries().split("test"))
        assert compared(*map(str, trec), "--qrels", str(qrels), "-m", metric) == expected
        other_tools = [str(trec[0]), str(tmp_path / "relations.tsv"), str(tmp_path / "strict.json")]
        assert compared(*other_tools, "--qrels", str(qrels), "-m", metric) == expected
        # run directories with --qrels are scored from their run.trec
        assert compared(*map(str, run_dirs), "--qrels", str(qrels), "-m", metric) == expected

    code, _, err = invoke("compare", str(trec[0]), str(trec[1]))
    assert code == 2 and "run.trec is a run file, not a run directory; give --qrels FILE" in err
    # a run that leaves queries of the qrels unanswered is said to, never silently scored 0
    first = lines[0][0]
    kept = [line for line in trec[0].read_text().splitlines() if line.split()[0] != first]
    (tmp_path / "partial.trec").write_text("\n".join(kept) + "\n")
    partial = [str(trec[0]), str(tmp_path / "partial.trec"), "--qrels", str(qrels)]
    code, out, _ = invoke("compare", *partial, "--format", "json")
    [row] = json.loads(out)
    assert code == 0 and row["missing_b"] == row["missing_a"] + 1
    code, out, err = invoke("compare", *partial)
    assert code == 0 and f"partial.trec does not answer {row['missing_b']} of the 6" in " ".join(out.split()), err
    # one that answers none of them (another split's run, other qrels) is refused
    (tmp_path / "other.trec").write_text("nope Q0 1 1 1.0 x\n")
    code, _, err = invoke("compare", str(trec[0]), str(tmp_path / "other.trec"), "--qrels", str(qrels))
    assert code == 2 and "answers none of the" in err
    code, _, err = invoke("compare", str(trec[0]), str(trec[1]), "--qrels", str(qrels), "-m", "mrr,hit@1")
    assert code == 2 and "one metric at a time" in err
