"""One rule for ties and zero scores everywhere — ranking, per-query values, the TREC file,
`harness evaluate`, `harness leaderboard validate` — checked against trec_eval's own
implementations (pytrec_eval, ir_measures) on rankings made of ties, zero and negative
scores, scores equal in float32 only, non-candidates and repeats; and the inputs that used to
crash give zeros (empty rankings) or one clear error (no query shared with the qrels, unless
``--complete``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.errors import HarnessError
from harness.leaderboard.bundles import collect
from harness.leaderboard.validate import validate
from harness.plugins import PluginManager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query
from harness.retriever import BuildContext, Ranking, Retriever
from harness.run import Runner, resolve
from harness.run.registry import parse_registry
from harness.skb import SKB
from harness.testing import check_run_dir, require
from harness.trec import read_run, strictly_decreasing

REGISTRY = """
defaults: {dataset: plain, retriever: scripted, split: test, k: 5}
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  scripted: {plugin: scripted}
"""
# Node ids 0-4 are products (candidates), 5-6 brands. Query 7's only answer is a brand.
QUERIES = [
    [1, "all tied", [3]],
    [2, "ties and zeros", [4, 1]],
    [3, "float32 ties", [2]],
    [4, "negative scores", [0, 4]],
    [5, "nothing", [1]],
    [6, "non-candidates and repeats", [2]],
    [7, "a brand is the only answer", [5]],
]


class Scripted(Retriever):
    """Returns, per query id, a fixed ranking (ids, scores) from ``SCRIPT``."""

    name = "scripted"
    batch_size = 2
    SCRIPT: ClassVar[dict[int, tuple[list[int], list[float]]]] = {}

    def build(self, skb: SKB, context: BuildContext) -> None:
        pass

    def search(self, queries: Sequence[Query], k: int) -> list[Ranking]:
        return [Ranking(*self.SCRIPT[q.id]) for q in queries]


GOOD_SCRIPT = {
    # the retriever's order decides ties: the answer (3) is third among five equal scores
    1: ([0, 1, 3, 2, 4], [2.0, 2.0, 2.0, 2.0, 2.0]),
    # BM25-style zero fill after the matches, in the retriever's order
    2: ([2, 4, 0, 1, 3], [7.5, 7.5, 0.0, 0.0, 0.0]),
    # distinct as float64, equal as float32: trec_eval would see ties
    3: ([0, 1, 2], [1.0 + 1e-12, 1.0 + 5e-13, 1.0]),
    4: ([1, 0, 4], [-0.5, -1.0, -1.0]),
    5: ([], []),
    # 5 and 6 are brands (not candidates), 0 is returned twice: dropped, order kept
    6: ([5, 0, 6, 2, 0], [9.0, 8.0, 7.0, 6.0, 5.0]),
    # no candidate answer: zero everywhere, and still counted by trec_eval -c (a relevance-0 line)
    7: ([0, 1], [2.0, 1.0]),
}


class ScriptedPlugin:
    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register(Scripted)


@pytest.fixture
def manager(plain_plugins: PluginManager) -> PluginManager:
    plain_plugins.register(ScriptedPlugin(), "scripted-plugin")
    Scripted.SCRIPT = dict(GOOD_SCRIPT)
    return plain_plugins


METRICS = [
    "hit@1",
    "hit@3",
    "recall@2",
    "recall@5",
    "precision@3",
    "mrr",
    "map",
    "map@3",
    "stark_map@3",
    "ndcg",
    "ndcg@3",
    "rprecision",
]


def _run(manager: PluginManager, tmp_path: Path, metrics: list[str] | None = METRICS, **kwargs):  # type: ignore[no-untyped-def]
    registry = parse_registry(
        REGISTRY.replace(
            "{plugin: plain, splits: [test]}", f"{{plugin: plain, params: {{queries: {json.dumps(QUERIES)}}}}}"
        ),
        "r.yaml",
    )
    spec = resolve(registry, manager, metrics=metrics, **kwargs)
    return Runner(manager, output_dir=tmp_path / "runs", device="cpu").run(spec)


def test_ties_zeros_and_dropped_ids_agree_everywhere(manager: PluginManager, tmp_path: Path) -> None:
    outcome = _run(manager, tmp_path)
    run_dir = outcome.run_dir
    per_query = {
        r["qid"]: r["metrics"] for r in map(json.loads, (run_dir / "per_query.jsonl").read_text().splitlines())
    }
    # the ranking is the retriever's order: answer 3 is third among the tied scores
    assert per_query[1]["mrr"] == pytest.approx(1 / 3)
    # zero-scored entries count like any other: answer 1 at rank 4 (after a tie at 7.5)
    assert per_query[2]["recall@5"] == 1.0 and per_query[2]["hit@1"] == 0.0
    assert per_query[3]["mrr"] == pytest.approx(1 / 3)
    assert per_query[4]["hit@1"] == 0.0 and per_query[4]["mrr"] == 0.5
    assert all(v == 0.0 for v in per_query[5].values())
    # brands dropped, the repeat of 0 dropped: 0 then 2, so the answer is at rank 2
    assert per_query[6]["mrr"] == 0.5
    assert all(v == 0.0 for v in per_query[7].values())
    assert "7 0 5 0" in (run_dir / "qrels.trec").read_text().splitlines()
    assert any("non-candidate" in note for note in outcome.notes)
    assert any("repeated" in note for note in outcome.notes)

    # the TREC file: strictly decreasing in float32, so every reader gets the written order back
    lines = [line.split() for line in (run_dir / "run.trec").read_text().splitlines()]
    for qid in {line[0] for line in lines}:
        scores = np.array([float(line[4]) for line in lines if line[0] == qid], dtype=np.float32)
        assert np.all(np.diff(scores) < 0), qid
    assert read_run(run_dir / "run.trec", order="checked") == read_run(run_dir / "run.trec", order="rank")
    assert [line[2] for line in lines if line[0] == "6"] == ["0", "2"]

    # trec_eval's implementations give the row (also checked for every run by the conftest)
    confirmed = check_run_dir(run_dir)
    assert confirmed["pytrec_eval"] == confirmed["ir_measures"] == len(QUERIES) * 11  # all but stark_map@3

    # `harness evaluate --complete` on the run directory's own files gives the row too (the row
    # counts query 5, whose ranking is empty and so not in run.trec, as 0: trec_eval -c)
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "--run",
            str(run_dir / "run.trec"),
            "--qrels",
            str(run_dir / "qrels.trec"),
            "--metrics",
            ",".join(METRICS),
            "--complete",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    evaluated = json.loads(result.stdout)["metrics"]
    assert "1 of the 7 qrels queries are missing from the run (scored 0)" in result.stderr
    for name in METRICS:
        assert evaluated[name] == pytest.approx(outcome.row.metrics[name], abs=1e-12), name

    # and the leaderboard's validator recomputes the same numbers from the TREC file
    [checked] = validate(collect(run_dir, tmp_path / "work"))
    assert checked.ok, checked.problems


def test_strictly_decreasing_moves_scores_only_where_they_tie() -> None:
    scores = [3.0, 3.0, 3.0, 1.0 + 1e-9, 1.0, 0.0, 0.0, -2.0]
    out = strictly_decreasing(scores)
    assert out.dtype == np.float32 and np.all(np.diff(out) < 0)
    assert out[0] == 3.0 and out[-1] == -2.0 and out[3] == 1.0
    assert np.max(np.abs(out - np.float32(scores))) < 1e-6


def test_a_run_file_whose_scores_do_not_follow_its_ranks_is_refused(manager: PluginManager, tmp_path: Path) -> None:
    run_dir = _run(manager, tmp_path).run_dir
    trec = run_dir / "run.trec"
    lines = trec.read_text().splitlines()
    # what a six-decimal writer made of query 3: equal scores, which trec_eval orders by docid
    tied = [
        " ".join([*line.split()[:4], "1.000000", line.split()[5]]) if line.startswith("3 ") else line for line in lines
    ]
    trec.write_text("\n".join(tied) + "\n")
    with pytest.raises(HarnessError, match=r"query 3: ordered by score .* differs from its rank column from rank 1"):
        read_run(trec, order="checked")
    [checked] = validate(collect(run_dir, tmp_path / "work"))
    assert not checked.ok and "cannot be read unambiguously" in " ".join(checked.problems)


@pytest.mark.parametrize(
    "script, message",
    [
        ({1: ([0, 1], [1.0, 2.0])}, r"query 1: scores must not increase .* rank 1 has 1.0 and rank 2 has 2.0"),
        ({1: ([0, 1], [1.0, float("nan")])}, r"query 1: score nan at rank 2 is not a finite number"),
        ({1: ([0, 99], [2.0, 1.0])}, r"query 1: id 99 is not a node of the SKB"),
        ({1: ([0, 1, 2, 3, 4, 0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0])}, r"query 1: 6 results, asked for at most 5"),
        ({1: ([0.0, 12.7], [2.0, 1.0])}, r"ranking ids must be integer node ids, got 12.7"),
        # float32's lowest value as a mask: ties there could not be written apart
        ({1: ([0, 1], [-3.4028234663852886e38] * 2)}, r"query 1: score -3.40\d+e\+38 at rank 1 is beyond ±1e\+37"),
    ],
)
def test_rankings_a_retriever_gets_wrong_stop_the_run(
    manager: PluginManager, tmp_path: Path, script: dict, message: str
) -> None:
    Scripted.SCRIPT = {**GOOD_SCRIPT, **script}
    with pytest.raises(HarnessError, match=message):
        _run(manager, tmp_path)


def test_every_ranking_empty_scores_zero(manager: PluginManager, tmp_path: Path) -> None:
    Scripted.SCRIPT = {qid: ([], []) for qid in GOOD_SCRIPT}
    outcome = _run(manager, tmp_path)
    assert set(outcome.row.metrics.values()) == {0.0}
    assert (outcome.run_dir / "run.trec").read_text() == ""


def test_evaluate_with_no_query_in_common_is_refused_unless_complete(tmp_path: Path) -> None:
    """trec_eval stops ("No queries with both results and relevance info"); with -c it scores 0."""
    (tmp_path / "run.trec").write_text("1 Q0 a 1 2.0 x\n1 Q0 b 2 1.0 x\n")
    (tmp_path / "qrels.trec").write_text("2 0 a 1\n3 0 c 1\n")
    args = ["evaluate", "--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.trec")]
    args += ["--format", "json"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2 and "run.trec answers none of the 2 queries of" in refused.stderr
    assert "--complete scores each of them 0" in refused.stderr
    result = CliRunner().invoke(cli, [*args, "--complete"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["queries_missing_from_run"] == 2 and summary["run_queries_without_qrels"] == 1
    assert summary["queries"] == 2 and set(summary["metrics"].values()) == {0.0}


def test_evaluate_reads_ties_as_trec_eval_does(tmp_path: Path) -> None:
    """Equal scores (also equal only as float32) are ordered by document id, descending."""
    pytrec_eval = require("pytrec_eval", extra="stark-harness[test]")
    (tmp_path / "run.trec").write_text("1 Q0 d1 1 5.0 x\n1 Q0 d2 2 5.0 x\n1 Q0 d3 3 5.0000000001 x\n1 Q0 d9 4 1.0 x\n")
    (tmp_path / "qrels.trec").write_text("1 0 d1 1\n1 0 d9 1\n")
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "--run",
            str(tmp_path / "run.trec"),
            "--qrels",
            str(tmp_path / "qrels.trec"),
            "--metrics",
            "mrr,map,ndcg,precision@3",
            "--format",
            "json",
        ],
    )
    ours = json.loads(result.output)["metrics"]
    theirs = pytrec_eval.RelevanceEvaluator({"1": {"d1": 1, "d9": 1}}, {"recip_rank", "map", "ndcg", "P.3"}).evaluate(
        {"1": {"d1": 5.0, "d2": 5.0, "d3": 5.0000000001, "d9": 1.0}}
    )["1"]
    assert ours["mrr"] == pytest.approx(theirs["recip_rank"]) == 1 / 3
    assert ours["map"] == pytest.approx(theirs["map"])
    assert ours["ndcg"] == pytest.approx(theirs["ndcg"])
    assert ours["precision@3"] == pytest.approx(theirs["P_3"])


def test_a_cutoff_deeper_than_the_ranking_is_refused_or_left_out(manager: PluginManager, tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"recall@100: a cut-off deeper than the ranking \(k=5\).*--k 100"):
        _run(manager, tmp_path, metrics=["hit@1", "recall@100"])
    # the default metric set leaves out what k=5 cannot measure instead of reporting it
    outcome = _run(manager, tmp_path, metrics=None)
    assert "recall@100" not in outcome.row.metrics and "hit@5" in outcome.row.metrics
    assert any("left out recall@20, recall@100" in note for note in outcome.notes)


def test_a_cutoff_deeper_than_a_rerankers_candidates_is_refused(manager: PluginManager) -> None:
    from harness.retriever import Reranker

    class Keep(Reranker):
        name = "keep"

        def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
            return list(candidates)

    class KeepPlugin:
        @hookimpl
        def register_retrievers(self, register):  # type: ignore[no-untyped-def]
            register(Keep)

    manager.register(KeepPlugin(), "keep-plugin")
    registry = parse_registry(REGISTRY + "  keep: {plugin: keep, first_stage: scripted, candidates: 2}\n", "r.yaml")
    with pytest.raises(HarnessError, match=r"hit@5: a cut-off deeper than the ranking \('keep' reranks 2 candidates\)"):
        resolve(registry, manager, retriever="keep", metrics=["hit@1", "hit@5"])
    spec = resolve(registry, manager, retriever="keep")
    assert spec.metrics == ["hit@1", "mrr"] and "recall@20" in spec.dropped_metrics
    Keep.fills = True  # its rankings go on past the candidates: every cut-off is measured
    spec = resolve(registry, manager, retriever="keep", metrics=["hit@1", "hit@5"])
    assert spec.metrics == ["hit@1", "hit@5"] and not spec.dropped_metrics


def test_evaluate_takes_grades_as_ndcg_gains_and_as_relevance_elsewhere(tmp_path: Path) -> None:
    """Graded qrels: nDCG's gain is the grade (trec_eval's ndcg_cut), the others count grade > 0
    (more in test_graded_ndcg.py)."""
    (tmp_path / "run.trec").write_text("1 Q0 a 1 2.0 x\n1 Q0 b 2 1.0 x\n")
    (tmp_path / "qrels.trec").write_text("1 0 a 1\n1 0 b 3\n")
    args = ["evaluate", "--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.trec")]
    result = CliRunner().invoke(cli, [*args, "--metrics", "ndcg@10,hit@1,mrr,recall@1", "--format", "json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert metrics["ndcg@10"] == pytest.approx((1 + 3 / np.log2(3)) / (3 + 1 / np.log2(3)), abs=1e-12)
    assert (metrics["hit@1"], metrics["mrr"], metrics["recall@1"]) == (1.0, 1.0, 0.5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"metrics": []}, "no metrics requested"),
        ({"sample_fraction": 0.0}, r"--sample must be a fraction in \(0, 1\], got 0.0"),
        ({"sample_fraction": 1.5}, r"--sample must be a fraction in \(0, 1\], got 1.5"),
    ],
)
def test_requests_that_used_to_fall_back_silently_are_refused(
    manager: PluginManager, kwargs: dict, message: str
) -> None:
    registry = parse_registry(REGISTRY, "r.yaml")
    with pytest.raises(HarnessError, match=message):
        resolve(registry, manager, **kwargs)
    result = CliRunner().invoke(cli, ["run", "-r", "scripted", "-d", "plain", "--metrics", ",", "--dry-run"])
    assert result.exit_code != 0 and "no metrics requested" in result.output
