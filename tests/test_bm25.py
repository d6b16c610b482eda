"""BM25: same results as bm25s alone, cached index reused, corrupt cache rebuilt."""

from __future__ import annotations

from pathlib import Path

import bm25s
import numpy as np
import pytest
import Stemmer

from harness.retriever import BuildContext
from harness_bm25 import BM25Retriever
from harness_debian import DebianDataset


@pytest.fixture(scope="module")
def debian() -> DebianDataset:
    return DebianDataset()


def test_matches_bm25s_alone_on_the_same_corpus(debian: DebianDataset, session_cache: Path) -> None:
    skb, queries = debian.load_skb(), debian.load_queries().split("test")[:30]
    retriever = BM25Retriever()
    retriever.build(skb, BuildContext(cache_dir=session_cache))
    ours = retriever.search(queries, 10)

    stemmer = Stemmer.Stemmer("english")
    corpus = list(skb.documents())
    raw = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    raw.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    docs, scores = raw.retrieve(
        bm25s.tokenize([q.text for q in queries], stopwords="en", stemmer=stemmer, show_progress=False),
        k=10,
        show_progress=False,
    )
    for ranking, row_docs, row_scores in zip(ours, docs, scores, strict=True):
        np.testing.assert_allclose(ranking.scores, row_scores[: len(ranking.scores)], rtol=1e-6)
        assert ranking.ids.tolist() == skb.candidate_ids[row_docs[: len(ranking.ids)]].tolist()
        assert (ranking.scores > 0).all()


def test_second_build_loads_the_cached_index(
    debian: DebianDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skb, query = debian.load_skb(), debian.load_queries().split("test")[:3]
    first = BM25Retriever()
    first.build(skb, BuildContext(cache_dir=tmp_path))
    expected = first.search(query, 5)

    def no_indexing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the index was rebuilt instead of loaded")

    monkeypatch.setattr(bm25s.BM25, "index", no_indexing)
    second = BM25Retriever()
    second.build(skb, BuildContext(cache_dir=tmp_path))
    assert [r.ids.tolist() for r in second.search(query, 5)] == [r.ids.tolist() for r in expected]
    # other parameters get an index of their own
    assert BM25Retriever(k1=1.2).cache_key(skb) != first.cache_key(skb)


def test_corrupt_cache_is_rebuilt(debian: DebianDataset, tmp_path: Path) -> None:
    skb, query = debian.load_skb(), debian.load_queries().split("test")[:3]
    retriever = BM25Retriever()
    retriever.build(skb, BuildContext(cache_dir=tmp_path))
    expected = [r.ids.tolist() for r in retriever.search(query, 5)]
    cache = next((tmp_path / "bm25").iterdir())
    for file in cache.iterdir():
        if file.suffix in (".npy", ".json") and file.name != "complete.json":
            file.write_bytes(b"garbage")
    rebuilt = BM25Retriever()
    rebuilt.build(skb, BuildContext(cache_dir=tmp_path))
    assert [r.ids.tolist() for r in rebuilt.search(query, 5)] == expected


def test_query_without_known_terms_returns_nothing(debian: DebianDataset, session_cache: Path) -> None:
    from harness.queries import Query

    retriever = BM25Retriever()
    retriever.build(debian.load_skb(), BuildContext(cache_dir=session_cache))
    assert retriever.search([Query(1, "zzqxjw the of", (0,))], 10)[0].ids.size == 0
