"""``harness evaluate`` on a run that answers only some of the qrels' queries (a sampled run
against the whole split's qrels): as trec_eval, the means are over the queries in both, and a
warning says how many qrels queries the run lacks and how to count them; ``--complete`` (``-c``)
averages over every qrels query, a missing one scoring 0, as ``trec_eval -c``. Both are checked
against pytrec_eval (trec_eval's per-query values, averaged as trec_eval averages them)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.testing import invoke, pytrec_eval

#: ours → pytrec_eval's output key
MEASURES = {"hit@1": "success_1", "mrr": "recip_rank", "recall@10": "recall_10", "ndcg@10": "ndcg_cut_10"}
PYTREC_SPEC = {"success.1", "recip_rank", "recall.10", "ndcg_cut.10"}


def split(tmp_path: Path, answered: int, seed: int = 0) -> tuple[dict, dict]:
    """Qrels for 30 queries (binary, one judged 0 only) and a run answering the first
    ``answered`` of a seeded sample of them, plus one query the qrels do not have."""
    rng = np.random.default_rng(seed)
    qrels = {f"q{q}": {f"d{d}": int(q != 7) for d in rng.choice(50, size=3, replace=False)} for q in range(30)}
    sample = rng.permutation(sorted(qrels))[:answered]
    run = {str(q): {f"d{d}": float(50 - rank) for rank, d in enumerate(rng.permutation(50)[:20])} for q in sample}
    run["not-judged"] = {"d1": 1.0}
    (tmp_path / "qrels.trec").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    lines = (f"{q} Q0 {d} {r} {s!r} x\n" for q, docs in run.items() for r, (d, s) in enumerate(docs.items(), 1))
    (tmp_path / "run.trec").write_text("".join(lines))
    return qrels, run


def evaluate(tmp_path: Path, *options: str) -> tuple[dict, str]:
    result = invoke(
        "evaluate", "--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.trec"),
        "-m", ",".join(MEASURES), "--per-query", "--format", "json", *options,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_a_sampled_run_is_averaged_over_its_queries_with_a_warning(tmp_path: Path) -> None:
    qrels, run = split(tmp_path, answered=10)
    theirs = pytrec_eval().RelevanceEvaluator(qrels, PYTREC_SPEC).evaluate(run)
    summary, err = evaluate(tmp_path)
    assert (summary["queries"], summary["qrels_queries"], summary["queries_missing_from_run"]) == (10, 30, 20)
    assert summary["run_queries_without_qrels"] == 1 and summary["complete"] is False
    assert set(summary["per_query"]) == set(theirs) == set(qrels) & set(run)
    for name, measure in MEASURES.items():  # trec_eval: the mean over the queries in both
        assert summary["metrics"][name] == pytest.approx(np.mean([v[measure] for v in theirs.values()]), abs=1e-12)
    assert err.strip() == (
        "warning: the run answers 10 of the 30 qrels queries: the means are over those 10, as trec_eval's; "
        "--complete averages over all 30, the 20 missing scoring 0 (trec_eval -c)"
    )


@pytest.mark.parametrize("flag", ["--complete", "-c"])
def test_complete_counts_the_missing_queries_as_zero(tmp_path: Path, flag: str) -> None:
    qrels, run = split(tmp_path, answered=10)
    theirs = pytrec_eval().RelevanceEvaluator(qrels, PYTREC_SPEC).evaluate(run)
    summary, err = evaluate(tmp_path, flag)
    assert (summary["queries"], summary["qrels_queries"], summary["queries_missing_from_run"]) == (30, 30, 20)
    assert summary["complete"] is True and set(summary["per_query"]) == set(qrels)
    for qid, values in summary["per_query"].items():
        if qid not in run:
            assert set(values.values()) == {0.0}, qid
    for name, measure in MEASURES.items():  # trec_eval -c: the sum over the queries in both, / all 30
        assert summary["metrics"][name] == pytest.approx(sum(v[measure] for v in theirs.values()) / 30, abs=1e-12)
    assert err.strip() == "note: 20 of the 30 qrels queries are missing from the run (scored 0)"


def test_a_run_answering_every_query_needs_no_warning_and_complete_changes_nothing(tmp_path: Path) -> None:
    split(tmp_path, answered=30)
    default, err = evaluate(tmp_path)
    complete, err_complete = evaluate(tmp_path, "--complete")
    assert err == err_complete == ""
    assert default["queries"] == complete["queries"] == 30 and default["queries_missing_from_run"] == 0
    assert default["metrics"] == complete["metrics"] and default["per_query"] == complete["per_query"]


def test_the_table_shows_the_queries_averaged_and_the_warning_goes_to_stderr(tmp_path: Path) -> None:
    split(tmp_path, answered=12)
    result = invoke("evaluate", "--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.trec"))
    assert result.exit_code == 0, result.output
    assert "12 queries" in result.stdout and "warning" not in result.stdout
    assert result.stderr.startswith("warning: the run answers 12 of the 30 qrels queries")
