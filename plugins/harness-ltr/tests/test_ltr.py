"""harness-ltr on the tiny fixture SKB: the trained ranker keeps the retriever contract, trains
the same model twice, resumes after a kill, its ablation switches change the features, and the
propagation baseline lifts a neighbour of a matched document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
import harness_ltr
from harness.testing import check_training_resumes, checkpoint_entry, registry, run_retriever
from harness_bm25.retriever import BM25Retriever
from harness_ltr.retriever import MODEL, LTRRetriever, PropagateRetriever

FIRST_STAGES = {
    "bm25": {"plugin": "bm25", "params": {}},
    "bm25-relations": {"plugin": "bm25", "params": {"with_relations": True}},
}
#: small and quick: no encoder (the dense feature has its own test elsewhere: it needs the model package)
SMALL: dict[str, Any] = {"dense": False, "min_data_in_leaf": 1, "rounds": 30, "rounds_per_epoch": 10, "patience": 5}


def _run(tmp: Path, params: dict[str, Any], **options: Any) -> Any:
    return run_retriever(
        LTRRetriever,
        {**SMALL, **params},
        tmp,
        dataset="tiny-train",
        also=[BM25Retriever],
        presets=FIRST_STAGES,
        k=5,
        **options,
    )


def _model(entry: Path) -> dict[str, Any]:
    text = (entry / MODEL).read_text(encoding="utf-8")
    return {"model": np.frombuffer(text.encode(), dtype=np.uint8)}


def test_trains_keeps_the_contract_and_records_training(tmp_path: Path) -> None:
    outcome = _run(tmp_path, {})
    row = outcome.row
    assert row.regime == "trained" and row.training is not None and row.training.split == "train"
    assert row.metrics["hit@1"] > 0
    assert "anchored" in row.health.counters
    details = [line for line in (outcome.run_dir / "per_query.jsonl").read_text().splitlines() if line.strip()]
    assert any('"top_features"' in line for line in details)
    entry = checkpoint_entry(outcome, tmp_path / "cache")
    assert (entry / "importance.json").exists() and (entry / MODEL).exists()


def test_one_seed_trains_one_model(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", {})
    second = _run(tmp_path / "b", {})
    assert first.row.training.checkpoint == second.row.training.checkpoint
    a = (checkpoint_entry(first, tmp_path / "a" / "cache") / MODEL).read_text()
    b = (checkpoint_entry(second, tmp_path / "b" / "cache") / MODEL).read_text()
    assert a == b
    assert first.row.metrics == second.row.metrics


def test_training_resumes_after_a_kill(tmp_path: Path) -> None:
    check_training_resumes(
        LTRRetriever,
        SMALL,
        tmp_path,
        fail_at=2,
        weights=_model,
        dataset="tiny-train",
        also=[BM25Retriever],
        presets=FIRST_STAGES,
        k=5,
    )


@pytest.mark.parametrize(
    ("params", "gone"),
    [
        ({"paths": False}, "path:"),
        ({"ppr": False}, "ppr:"),
        ({"relation_classifier": False}, "query:p:"),
        ({"dense": False}, "dense:"),
    ],
)
def test_ablation_params_change_the_features(params: dict[str, Any], gone: str) -> None:
    full = LTRRetriever(**{**SMALL, "dense": True})
    ablated = LTRRetriever(**{**SMALL, "dense": True, **params})
    assert full.switches != ablated.switches
    fake = type("F", (), {})()
    names = {}
    from harness_ltr.features import Featurizer

    for which, retriever in (("full", full), ("ablated", ablated)):
        fake.switches, fake.options, fake.paths = retriever.switches, retriever.options, [(0,)]
        fake.text = type("T", (), {"fields": ["name"]})()
        fake.graph = type("G", (), {"steps": [], "type_names": ["product"], "path_name": lambda self, p: "made_by>"})()
        names[which] = Featurizer._feature_names(fake)
    assert any(n.startswith(gone) for n in names["full"])
    assert not any(n.startswith(gone) for n in names["ablated"])


def test_candidates_from_bm25_only_adds_no_graph_candidates(tmp_path: Path) -> None:
    outcome = _run(tmp_path, {"candidates": "bm25"})
    assert outcome.row.health.counters["graph_candidates"] == 0
    assert not any(check.counter == "graph_candidates" for check in LTRRetriever.health_checks({"candidates": "bm25"}))


def test_propagation_ranks_a_neighbour_of_a_matched_document(tmp_path: Path) -> None:
    # "whistles" matches only the blue kettle (1); the red kettle (0) is `similar` to it and
    # made by the same brand: propagation ranks it right after, though BM25 never returns it
    outcome = run_retriever(
        PropagateRetriever,
        {"sources": ["bm25"], "hops": 2, "decay": 0.5},
        tmp_path,
        also=[BM25Retriever],
        presets=FIRST_STAGES,
        k=5,
    )
    assert outcome.row.metrics["hit@1"] > 0
    retriever = PropagateRetriever(sources=["bm25"], hops=1, decay=0.5)
    built = _built(retriever, tmp_path)
    [ranking] = built.search([harness.Query(1, "whistles", (1,))], 5)
    assert ranking.ids[0] == 1 and 0 in ranking.ids.tolist()[1:3]


def _built(retriever: PropagateRetriever, tmp_path: Path) -> PropagateRetriever:
    from harness.testing import tiny_skb

    skb = tiny_skb()
    bm25 = BM25Retriever()
    bm25.build(skb, harness.BuildContext(cache_dir=tmp_path / "c"))
    retriever.build(skb, harness.BuildContext(cache_dir=tmp_path / "c", build_retriever=lambda name: bm25))
    return retriever


def test_presets_resolve() -> None:
    merged = registry(harness_ltr, entry_points=True)
    assert "ltr-structural" in merged.retrievers and "propagate-bm25" in merged.retrievers
