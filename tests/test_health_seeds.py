"""Evidence on every row: component health (summed by the runner, recomputed by validation,
flagged when a system's own idea never ran) and rows over several training seeds."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import Seeded, terms
from pydantic import Field

import harness
from harness import SKB, BuildContext, HarnessError, Query, Ranking
from harness.api import evaluate
from harness.leaderboard.bundles import collect
from harness.leaderboard.validate import validate
from harness.run.registry import parse_registry
from harness.testing import Components, TinyDataset, TinyTrainDataset, installed_plugins


class Guessing(harness.Retriever):
    """Term overlap, plus a 'structured' step that runs only for queries naming a document id:
    on the tiny data it never runs, which the health check must catch."""

    name = "guessing"

    class Options(harness.Options):
        at_least: float = Field(0.05)

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        self.docs = [terms(skb.document(int(i))) for i in self.ids]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        out = []
        for q in queries:
            scores = np.asarray([len(terms(q.text) & d) for d in self.docs], dtype=np.float64)
            order = np.argsort(-scores, kind="stable")[:k]
            structured = any(t.isdigit() and len(t) > 6 for t in terms(q.text))
            out.append(Ranking(self.ids[order], scores[order], {"structured": structured, "fallback": not structured}))
        return out

    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        d = details or {}
        return {"structured": float(d.get("structured", False)), "fallback": float(d.get("fallback", False))}

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[harness.HealthCheck]:
        return [harness.HealthCheck("structured", "a structured step ran", at_least=params["at_least"])]


class Reverser(harness.Reranker):
    """Reranks its first stage's candidates upside down: below its own first stage."""

    name = "reverser"

    def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
        return [Ranking(c.ids[::-1][:k], np.arange(len(c.ids), 0, -1, dtype=np.float64)[:k]) for c in candidates]


REGISTRY = {
    "defaults": {"dataset": "tiny-train", "split": "test", "k": 5},
    "datasets": {"tiny-train": {"plugin": "tiny-train", "splits": ["test"]}},
    "retrievers": {
        "guessing": {"plugin": "guessing"},
        "guessing-lenient": {"plugin": "guessing", "params": {"at_least": 0.0}},
        "overlap": {"plugin": "guessing", "params": {"at_least": 0.0}},
        "reverser": {"plugin": "reverser", "params": {"first_stage": "overlap", "candidates": 5}},
        "seeded": {"plugin": "seeded"},
    },
}


@pytest.fixture
def plugins() -> Any:
    return installed_plugins(Components([Guessing, Reverser, Seeded], [TinyDataset, TinyTrainDataset]))


def _run(plugins: Any, retriever: str, out: Path, **options: Any) -> Any:
    registry = parse_registry(json.dumps(REGISTRY), "<test>")
    return evaluate(
        retriever, plugins=plugins, registry=registry, output_dir=out, cache_dir=out / "cache", device="cpu", **options
    )


def _tampered(run_dir: Path, change: Any, tmp_path: Path) -> Any:
    """The validation of a copy of ``run_dir`` whose row ``change`` edited."""
    copy = tmp_path / "tampered"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy)
    row = json.loads((copy / "row.json").read_text())
    change(row)
    (copy / "row.json").write_text(json.dumps(row))
    return _valid(copy, tmp_path)


def _valid(path: Path, tmp_path: Path) -> Any:
    (result,) = validate(collect(path, tmp_path / "unpacked"))
    return result


def test_a_component_that_never_ran_flags_the_row_and_validation_recomputes_it(plugins: Any, tmp_path: Path) -> None:
    outcome = _run(plugins, "guessing", tmp_path / "runs")
    health = outcome.row.health
    n = outcome.row.num_queries
    assert health.queries == n and health.counters == {"fallback": n, "structured": 0}
    (flag,) = health.flags
    assert flag.component == "a structured step ran" and f"0 of {n} queries" in flag.reason
    assert any(note.startswith("flagged: a structured step ran") for note in outcome.notes)
    assert _valid(outcome.run_dir, tmp_path).ok

    lenient = _run(plugins, "guessing-lenient", tmp_path / "runs")
    assert lenient.row.health.flags == [] and _valid(lenient.run_dir, tmp_path).ok

    # a row cannot claim counters its details do not show, nor drop its flags
    for change in (
        lambda row: row["health"]["counters"].update(structured=3),
        lambda row: row["health"].update(flags=[]),
        lambda row: row.update(health=None),
    ):
        result = _tampered(outcome.run_dir, change, tmp_path)
        assert not result.ok and any("health" in p for p in result.problems), result.problems


def test_a_reranker_records_its_first_stage_beside_its_reranking(plugins: Any, tmp_path: Path) -> None:
    first = _run(plugins, "overlap", tmp_path / "runs")
    outcome = _run(plugins, "reverser", tmp_path / "runs")
    stage = outcome.row.health.first_stage
    assert stage is not None and stage["queries"] == outcome.row.num_queries
    assert stage["mrr"] == pytest.approx(first.row.metrics["mrr"])  # the first stage's own MRR, same depth
    assert stage["reranked_mrr"] < stage["mrr"]
    # on a handful of queries the drop is not significant: not flagged (the p says why)
    assert stage["p"] >= 0.05 and outcome.row.health.flags == []
    details = [json.loads(line)["details"] for line in (outcome.run_dir / "per_query.jsonl").read_text().splitlines()]
    assert all(len(d["first_stage"]) == 5 for d in details)
    assert _valid(outcome.run_dir, tmp_path).ok


def test_seeds_give_one_row_with_mean_and_spread_that_validation_recomputes(plugins: Any, tmp_path: Path) -> None:
    outcome = _run(plugins, "seeded", tmp_path / "runs", seeds=[0, 1, 2])
    row = outcome.row
    assert row.seeds is not None and row.seeds.values == [0, 1, 2] and row.seeds.runs == ["seed-0", "seed-1", "seed-2"]
    singles = [_run(plugins, "seeded", tmp_path / "single", seed=s).row for s in (0, 1, 2)]
    assert row.seeds.config_hashes == [r.config_hash for r in singles]  # each seed's run is the plain run
    for name in row.metrics:
        values = [r.metrics[name] for r in singles]
        assert row.metrics[name] == pytest.approx(np.mean(values))
        assert row.seeds.metrics[name].std == pytest.approx(np.std(values, ddof=1))
        assert row.seeds.metrics[name].min == min(values) and row.seeds.metrics[name].max == max(values)
    assert len({r.metrics["mrr"] for r in singles}) > 1  # the seeds differ: the spread means something
    for seed in (0, 1, 2):
        copied = json.loads((outcome.run_dir / f"seed-{seed}" / "row.json").read_text())
        assert copied["training"]["seed"] == seed and (outcome.run_dir / f"seed-{seed}" / "run.trec").is_file()
    per_query = [json.loads(line) for line in (outcome.run_dir / "per_query.jsonl").read_text().splitlines()]
    seed_rows = [
        [json.loads(line) for line in (outcome.run_dir / f"seed-{s}" / "per_query.jsonl").read_text().splitlines()]
        for s in (0, 1, 2)
    ]
    assert per_query[0]["metrics"]["mrr"] == pytest.approx(np.mean([r[0]["metrics"]["mrr"] for r in seed_rows]))
    result = _valid(outcome.run_dir, tmp_path)
    assert result.ok, result.problems

    # a seed's run changed after the fact: the seeded row no longer validates
    lines = (outcome.run_dir / "seed-1" / "per_query.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["metrics"]["mrr"] = 1.0 - record["metrics"]["mrr"]
    (outcome.run_dir / "seed-1" / "per_query.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    result = _valid(outcome.run_dir, tmp_path)
    assert not result.ok and any(p.startswith("seed 1:") for p in result.problems)


def test_seeds_are_refused_for_a_retriever_that_trains_nothing(plugins: Any, tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="trains nothing"):
        _run(plugins, "overlap", tmp_path / "runs", seeds=[0, 1])


def test_seeds_option_is_parsed_strictly() -> None:
    from harness.run.seeds import parse_seeds

    assert parse_seeds("0,1, 2") == [0, 1, 2]
    for bad in ("0", "0,0", "a,b", ""):
        with pytest.raises(HarnessError, match="--seeds"):
            parse_seeds(bad)


def test_cli_run_and_train_with_seeds_and_compare_pairs_the_per_query_means(plugins: Any, tmp_path: Path) -> None:
    from harness.testing import invoke

    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(REGISTRY))  # JSON is YAML
    common = ["--registry", str(registry), "--device", "cpu"]
    env = {"HARNESS_CACHE": str(tmp_path / "cache")}
    trained = invoke("train", "-r", "seeded", "-d", "tiny-train", "--seeds", "0,1", *common, env=env)
    assert trained.exit_code == 0, trained.output
    assert "seeded (seed 0)" in trained.output and "seeded (seed 1)" in trained.output
    out = tmp_path / "runs"
    ran = invoke("run", "-r", "seeded", "--seeds", "0,1", "--output", str(out), "--format", "json", *common, env=env)
    assert ran.exit_code == 0, ran.output
    (outcome,) = json.loads(ran.stdout)
    assert outcome["row"]["seeds"]["values"] == [0, 1] and outcome["run_dir"].endswith(
        f"-seeds-{outcome['row']['config_hash']}"
    )
    plain = invoke("run", "-r", "guessing-lenient", "--output", str(out), "--format", "json", *common, env=env)
    assert plain.exit_code == 0, plain.output
    other = json.loads(plain.stdout)[0]["run_dir"]
    compared = invoke("compare", outcome["run_dir"], other, "--metric", "mrr", "--format", "json", env=env)
    assert compared.exit_code == 0, compared.output
    (result,) = json.loads(compared.stdout)
    # the seeded run is paired query by query through its per-query means over the seeds
    seeded_dir, other_dir = Path(outcome["run_dir"]), Path(other)
    means = {q: np.mean([_mrr(seeded_dir / f"seed-{s}")[q] for s in (0, 1)]) for q in _mrr(seeded_dir)}
    assert result["mean_a"] == pytest.approx(np.mean(list(means.values())))
    assert result["mean_b"] == pytest.approx(np.mean(list(_mrr(other_dir).values())))
    assert result["mean_a"] == pytest.approx(outcome["row"]["metrics"]["mrr"])
    refused = invoke("run", "-r", "guessing", "--seeds", "0,1", "--output", str(out), *common, env=env)
    assert refused.exit_code != 0 and "trains nothing" in refused.output


def test_a_row_whose_configuration_the_code_no_longer_makes_is_stale_and_merge_refuses_it(
    plugins: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.leaderboard.merge import merge

    outcome = _run(plugins, "guessing-lenient", tmp_path / "runs")
    fresh = _valid(outcome.run_dir, tmp_path)
    assert fresh.ok and fresh.stale == []
    monkeypatch.setattr(Guessing, "version", "9")  # the plugin changed what it computes
    stale = _valid(outcome.run_dir, tmp_path)
    assert stale.ok and stale.stale == ['retriever.version: "0" → "9"']
    with pytest.raises(HarnessError, match="stale"):
        merge([outcome.run_dir], tmp_path / "board")
    assert not (tmp_path / "board" / "rows").exists()
    (action,) = merge([outcome.run_dir], tmp_path / "board", allow_stale=True)
    assert action.row.retriever.name == "guessing-lenient"

    # a trained row whose checkpoint key the code no longer computes (its training identity changed)
    monkeypatch.undo()
    trained = _run(plugins, "seeded", tmp_path / "trained")
    assert _valid(trained.run_dir, tmp_path).stale == []
    monkeypatch.setattr(Seeded, "training_identity", lambda self: {"base": "another"})
    (reason,) = _valid(trained.run_dir, tmp_path).stale
    assert reason.startswith("training.under-test.checkpoint:") or reason.startswith("training.seeded.checkpoint:")


def test_a_seeded_row_and_a_sample_travel_whole_through_submit_and_merge(plugins: Any, tmp_path: Path) -> None:
    from harness.leaderboard.merge import merge
    from harness.leaderboard.submit import bundle

    seeded = _run(plugins, "seeded", tmp_path / "runs", seeds=[0, 1])
    sampled = _run(plugins, "guessing-lenient", tmp_path / "runs", sample=0.5, seed=3)
    archive = tmp_path / "sub.tar.gz"
    bundle([seeded.run_dir, sampled.run_dir], archive)
    merge([archive], tmp_path / "board")
    runs = tmp_path / "board" / "runs" / "tiny-train" / "test"
    (seeded_dir,) = runs.glob("seeded-*")
    for seed in (0, 1):
        assert {p.name for p in (seeded_dir / f"seed-{seed}").iterdir()} >= {"row.json", "run.trec.gz", "qrels.trec"}
    (sampled_dir,) = runs.glob("guessing-lenient-*")
    qrels = {line.split()[0] for line in (sampled_dir / "qrels.trec").read_text().splitlines()}
    assert qrels == {str(q) for q in _qids(sampled_dir)} and len(qrels) == sampled.row.num_queries
    results = validate(collect(tmp_path / "board", tmp_path / "unpacked"))
    assert [r.ok for r in results] == [True, True], [r.problems for r in results]


def _qids(run_dir: Path) -> list[int]:
    return [json.loads(line)["qid"] for line in (run_dir / "per_query.jsonl").read_text().splitlines()]


def _reranked(n: int, reverse: bool, depth: int = 10, k: int = 10) -> tuple[list[Any], list[Any], list[list[int]]]:
    """``n`` queries whose answer the first stage ranks 1st (ids 0..depth-1), reranked upside down
    (or kept), cut at ``k``."""
    first = [list(range(depth)) for _ in range(n)]
    ranked = [(f[::-1] if reverse else f)[:k] for f in first]
    return [{"first_stage": f} for f in first], ranked, [[0] for _ in range(n)]


def test_the_first_stage_check_is_a_paired_test_at_the_depth_both_reach() -> None:
    from harness.run.health import summarize

    details, ranked, answers = _reranked(30, reverse=True)
    health = summarize(Reverser, {}, details, ranked, answers, None)
    assert health.first_stage["mrr"] == 1.0 and health.first_stage["reranked_mrr"] == pytest.approx(0.1)
    assert health.first_stage["p"] < 0.001
    (flag,) = health.flags
    assert "lowered MRR from 100.00 to 10.00 on the same 30 queries" in flag.reason
    # a reranker that keeps the order, returning fewer (k=2) than its 10 candidates, changed nothing
    details, ranked, answers = _reranked(30, reverse=False, k=2)
    health = summarize(Reverser, {}, details, ranked, answers, None)
    assert health.flags == [] and health.first_stage["mrr"] == health.first_stage["reranked_mrr"] == 1.0
    # a reranker whose details do not say what it reranked is flagged, not silently unchecked
    health = summarize(Reverser, {}, [{} for _ in ranked], ranked, answers, None)
    assert health.first_stage is None and "first stage's ids are not in the details of 30" in health.flags[0].reason
    with pytest.raises(HarnessError, match="must list the first stage's node ids"):
        summarize(Reverser, {}, [{"first_stage": "a,b"}], [[0]], [[0]], None)


def test_a_health_method_that_raises_is_one_clear_error() -> None:
    from harness.run.health import summarize

    class Broken(Guessing):
        @classmethod
        def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
            raise KeyError("parse")

    with pytest.raises(HarnessError, match=r"retriever 'guessing': health\(\) failed: KeyError"):
        summarize(Broken, {"at_least": 0.0}, [{}], [[0]], [[0]], None)


def _mrr(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "per_query.jsonl").read_text().splitlines()
    return {r["qid"]: r["metrics"]["mrr"] for r in map(json.loads, lines)}


def test_a_seeded_row_cannot_say_what_its_seeds_do_not(
    plugins: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.leaderboard.merge import merge
    from harness.run.seeds import combine

    outcome = _run(plugins, "seeded", tmp_path / "runs", seeds=[0, 1])
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "runs" / "by-seed").iterdir()) == ["tiny", "tiny"]
    assert [p.name for p in (tmp_path / "runs").iterdir() if (p / "row.json").is_file()] == [outcome.run_dir.name]
    for change, expected in (
        (lambda row: row["retriever"].update(name="another-system"), "retriever: the row's is not its seeds'"),
        (lambda row: row.update(num_queries=999), "num_queries: the row's is not its seeds'"),
        (lambda row: row["seeds"].update(values=[0, 0]), "given twice"),
    ):
        result = _tampered(outcome.run_dir, change, tmp_path)
        assert not result.ok and any(expected in p for p in result.problems), result.problems

    # one zero-shot run copied as if it were three seeds is not a seeded row
    single = _run(plugins, "guessing-lenient", tmp_path / "zero")
    as_seed_1 = dataclasses.replace(single, spec=dataclasses.replace(single.spec, seed=1))
    repeated = combine([single, as_seed_1], tmp_path / "repeated")
    result = _valid(repeated.run_dir, tmp_path)
    assert not result.ok and any("given twice" in p for p in result.problems), result.problems

    # a seed whose configuration the code no longer makes makes the seeded row stale: merge refuses it
    monkeypatch.setattr(Seeded, "version", "9")
    result = _valid(outcome.run_dir, tmp_path)
    assert result.ok and result.stale and all(reason.startswith("seed ") for reason in result.stale)
    with pytest.raises(HarnessError, match="stale"):
        merge([outcome.run_dir], tmp_path / "board")


def test_a_shipped_qrels_file_must_be_the_evaluated_answers(plugins: Any, tmp_path: Path) -> None:
    sampled = _run(plugins, "guessing-lenient", tmp_path / "runs", sample=0.5, seed=3)
    assert _valid(sampled.run_dir, tmp_path).ok
    qrels = sampled.run_dir / "qrels.trec"
    qrels.write_text(qrels.read_text().replace(" 1\n", " 0\n"))  # every answer judged not relevant
    result = _valid(sampled.run_dir, tmp_path)
    assert not result.ok and any("qrels.trec is not the evaluated queries' answers" in p for p in result.problems)


def test_a_training_that_kept_the_untrained_model_flags_the_row() -> None:
    from harness.run.health import summarize
    from harness.training import TrainingInfo

    fields = {"split": "train", "queries": 8, "digest": "d", "seed": 0, "checkpoint": "c", "checkpoint_digest": "x"}
    info = TrainingInfo(**fields, seconds=1.0, device="cpu", hardware="cpu", kept_epoch=0)
    (flag,) = summarize(Seeded, {}, [None], [[0]], [[0]], None, info).flags
    assert flag.component == "training" and "the untrained model was kept" in flag.reason
    assert summarize(Seeded, {}, [None], [[0]], [[0]], None, info.model_copy(update={"kept_epoch": 3})).flags == []
    assert summarize(Seeded, {}, [None], [[0]], [[0]], None, info.model_copy(update={"kept_epoch": None})).flags == []
