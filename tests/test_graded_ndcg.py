"""Graded nDCG: on qrels with grades above 1 ``harness evaluate`` takes the grades as gains, as
trec_eval's ``ndcg`` and ``ndcg_cut`` do, and equals pytrec_eval (trec_eval itself) query by
query on qrels shaped like BEIR's (grades 0/1/2, a negative grade, queries judged 0 only, fewer
relevant than k, queries missing from the run and run queries without qrels, ties in the run);
the other metrics read a grade > 0 as relevant, as trec_eval does. On binary qrels the graded
computation is the hit matrix's ``ndcg@k``, so binary results (the runner's, STaRK's) are
unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.metrics import Grades, evaluate, graded_ndcg, parse_metrics
from harness.plugins.metric_families import BUILTIN_METRICS
from harness.run.scoring import hit_matrix
from harness.testing import invoke, pytrec_eval

FAMILIES = {m.family: m for m in BUILTIN_METRICS}
#: ours → pytrec_eval's output key
MEASURES = {
    "ndcg@1": "ndcg_cut_1",
    "ndcg@3": "ndcg_cut_3",
    "ndcg@10": "ndcg_cut_10",
    "ndcg@100": "ndcg_cut_100",
    "ndcg": "ndcg",
    "mrr": "recip_rank",
    "map": "map",
    "recall@10": "recall_10",
    "precision@5": "P_5",
    "hit@1": "success_1",
}
PYTREC_SPEC = {"ndcg_cut.1,3,10,100", "ndcg", "recip_rank", "map", "recall.10", "P.5", "success.1"}

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def test_the_measures_compared_are_trec_evals() -> None:
    for metric in parse_metrics(list(MEASURES), FAMILIES):
        assert metric.trec_eval_measure == MEASURES[metric.name]


def beir_like(seed: int) -> tuple[Qrels, Run]:
    """Qrels graded 0/1/2 as BEIR's (TREC-COVID, NFCorpus) with a few -1s, and a run of few
    distinct scores (ties, which trec_eval orders by docid descending: "d7" before "d12")."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(60)] + ["doc-é", "doc-z", "Doc-A"]
    qrels: Qrels = {}
    run: Run = {}
    for q in range(40):
        qid = f"q{q}"
        judged = rng.choice(docs, size=int(rng.integers(1, 25)), replace=False)
        grades = rng.choice([0, 0, 1, 1, 2, -1] if q % 5 == 0 else [0, 1, 1, 2, 2], size=len(judged))
        if q % 7 == 3:
            grades[:] = 0  # judged, none relevant: every nDCG is 0 (trec_eval still counts it)
        qrels[qid] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        if q % 9 == 4:
            continue  # missing from the run
        pool = list(judged[: int(rng.integers(0, len(judged) + 1))]) + list(rng.choice(docs, size=30))
        ranked = list(dict.fromkeys(str(d) for d in pool))[: int(rng.integers(1, 40))]
        run[qid] = {d: float(rng.integers(0, 6)) / 4 for d in ranked}
    qrels["q2"] = {"d1": 2, "d2": 1}  # fewer relevant than k: the ideal stops at 2
    run["q2"] = {"d2": 1.0, "d1": 1.0, "d3": 0.5}  # tied: d2 ranks first (docid descending)
    run["extra"] = {"d1": 1.0}  # a run query without qrels
    return qrels, run


def write(tmp_path: Path, qrels: Qrels, run: Run) -> tuple[str, str]:
    judgements = (f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    (tmp_path / "qrels.trec").write_text("".join(judgements))
    lines = (
        f"{q} Q0 {d} {rank} {score!r} tag\n"
        for q, docs in run.items()
        for rank, (d, score) in enumerate(docs.items(), start=1)
    )
    (tmp_path / "run.trec").write_text("".join(lines))
    return str(tmp_path / "run.trec"), str(tmp_path / "qrels.trec")


def evaluated(run_file: str, qrels_file: str, *options: str) -> dict:
    result = invoke(
        "evaluate", "--run", run_file, "--qrels", qrels_file, "-m", ",".join(MEASURES), "--per-query",
        "--format", "json", *options,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("seed", range(6))
def test_graded_ndcg_equals_trec_eval_query_by_query(tmp_path: Path, seed: int) -> None:
    qrels, run = beir_like(seed)
    theirs = pytrec_eval().RelevanceEvaluator(qrels, PYTREC_SPEC).evaluate(run)
    summary = evaluated(*write(tmp_path, qrels, run))
    ours = summary["per_query"]
    # trec_eval's default: the queries in both the qrels and the run
    assert set(ours) == set(theirs) == set(qrels) & set(run)
    for qid, values in ours.items():
        assert values == pytest.approx({m: theirs[qid][t] for m, t in MEASURES.items()}, abs=1e-12), qid
    for name, measure in MEASURES.items():
        mean = sum(v[measure] for v in theirs.values()) / len(theirs)
        assert summary["metrics"][name] == pytest.approx(mean, abs=1e-12), name
    # the cases the qrels were made to hold are there: grades 2, a -1, judged-0-only queries
    grades = {g for docs in qrels.values() for g in docs.values()}
    assert {-1, 0, 1, 2} <= grades
    assert any(max(docs.values()) <= 0 for q, docs in qrels.items() if q in run)
    assert any(0 < theirs[q]["ndcg_cut_10"] < 1 for q in theirs)


def test_graded_ndcg_by_hand(tmp_path: Path) -> None:
    """d (-1: no gain), then c (0) and a (2) tied at 2.0 — c first, docid descending — then b (1)."""
    qrels = {"1": {"a": 2, "b": 1, "c": 0, "d": -1}}
    run = {"1": {"d": 3.0, "a": 2.0, "c": 2.0, "b": 1.0}}
    summary = evaluated(*write(tmp_path, qrels, run))
    expected = (2 / np.log2(4) + 1 / np.log2(5)) / (2 + 1 / np.log2(3))
    assert summary["per_query"]["1"]["ndcg@10"] == pytest.approx(expected, abs=1e-12)
    assert summary["per_query"]["1"]["ndcg@3"] == pytest.approx((2 / np.log2(4)) / (2 + 1 / np.log2(3)), abs=1e-12)
    assert summary["per_query"]["1"]["ndcg@1"] == 0.0
    theirs = pytrec_eval().RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)["1"]["ndcg_cut_10"]
    assert theirs == pytest.approx(expected, abs=1e-12)
    # mrr, map, hit read a grade > 0 as relevant: a at rank 3
    assert summary["per_query"]["1"]["mrr"] == pytest.approx(1 / 3)


def test_complete_averages_graded_ndcg_over_every_qrels_query(tmp_path: Path) -> None:
    qrels, run = beir_like(3)
    theirs = pytrec_eval().RelevanceEvaluator(qrels, PYTREC_SPEC).evaluate(run)
    summary = evaluated(*write(tmp_path, qrels, run), "--complete")
    assert set(summary["per_query"]) == set(qrels) and summary["queries"] == len(qrels)
    for name, measure in MEASURES.items():  # trec_eval -c: a missing query adds 0 to the sum
        mean = sum(v[measure] for v in theirs.values()) / len(qrels)
        assert summary["metrics"][name] == pytest.approx(mean, abs=1e-12), name


def test_fractional_grades_are_refused_for_graded_ndcg_only(tmp_path: Path) -> None:
    run_file, qrels_file = write(tmp_path, {"1": {"a": 2, "b": 1}}, {"1": {"a": 1.0, "b": 0.5}})
    Path(qrels_file).write_text("1 0 a 2\n1 0 b 0.5\n")
    refused = invoke("evaluate", "--run", run_file, "--qrels", qrels_file, "-m", "ndcg@10")
    assert refused.exit_code == 2
    assert "query 1, document b: relevance 0.5 is not an integer" in refused.stderr
    fine = invoke("evaluate", "--run", run_file, "--qrels", qrels_file, "-m", "mrr", "--format", "json")
    assert fine.exit_code == 0 and json.loads(fine.stdout)["metrics"] == {"mrr": 1.0}


@pytest.mark.parametrize("seed", range(4))
def test_graded_ndcg_on_binary_grades_is_the_hit_matrix_ndcg(seed: int) -> None:
    """What the runner, STaRK's evaluator comparison and binary qrels compute is unchanged:
    with grades 0/1 the graded definition equals ``ndcg@k`` on the hit matrix exactly."""
    rng = np.random.default_rng(seed)
    rankings, answers, judged_zero = [], [], []
    for q in range(200):
        rankings.append(rng.choice(500, size=int(rng.integers(0, 120)), replace=False).tolist())
        answers.append(rng.choice(500, size=int(rng.integers(0, 30)), replace=False).tolist() if q % 11 else [])
        judged_zero.append(rng.choice(500, size=5).tolist())
    hits, n_relevant = hit_matrix(rankings, answers)
    relevant = [set(a) for a in answers]
    ranked = [[float(d in rel) for d in ranking] for ranking, rel in zip(rankings, relevant, strict=True)]
    judged = [[1.0] * len(rel) + [0.0] * len(zeros) for rel, zeros in zip(relevant, judged_zero, strict=True)]
    metrics = parse_metrics(["ndcg@1", "ndcg@10", "ndcg@100", "ndcg@1000", "ndcg"], FAMILIES)
    binary = evaluate(metrics, hits, n_relevant)
    graded = evaluate(metrics, hits, n_relevant, Grades(ranked, judged))
    for metric in metrics:
        np.testing.assert_allclose(graded[metric.name], binary[metric.name], rtol=0, atol=1e-15)
        assert np.array_equal(graded[metric.name], graded_ndcg(ranked, judged, metric.k))


def test_binary_qrels_take_the_binary_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Qrels whose grades are at most 1 (negatives included) never reach the graded code."""
    import harness.metrics

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("graded nDCG on binary qrels")

    monkeypatch.setattr(harness.metrics, "graded_ndcg", refuse)
    run_file, qrels_file = write(tmp_path, {"1": {"a": 1, "b": 0, "c": -1}}, {"1": {"c": 2.0, "a": 1.0}})
    summary = evaluated(run_file, qrels_file)
    assert summary["per_query"]["1"]["ndcg@10"] == pytest.approx(1 / np.log2(3))


def test_graded_ndcg_edge_cases() -> None:
    assert graded_ndcg([], [], 10).tolist() == []
    # nothing ranked, nothing positive, negative only, everything at the ideal
    ranked = [[], [0.0, 0.0], [-1.0], [2.0, 1.0, 0.0]]
    judged = [[2.0], [0.0], [-1.0, -2.0], [0.0, 1.0, 2.0]]
    assert graded_ndcg(ranked, judged, 3).tolist() == [0.0, 0.0, 0.0, 1.0]
    assert graded_ndcg(ranked, judged, None).tolist() == [0.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="differ in length"):
        graded_ndcg([[1.0]], [], 1)
