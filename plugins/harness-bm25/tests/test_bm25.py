"""BM25: same results as bm25s alone, cached index reused, corrupt cache rebuilt, the
``bm25-stark`` preset tokenizing and filling its top k as bm25s (and so STaRK's baseline) does, parameters
checked and recorded, and the retriever contract for every preset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import pytest
import Stemmer

import harness_bm25
from harness import SKB, BuildContext, HarnessError, Query
from harness.testing import check_retriever, recorded_params, registry, tiny_skb
from harness_bm25.retriever import BM25Retriever
from harness_debian.dataset import DebianDataset
from harness_debian.testing import debian_slice

PRESETS = ("bm25", "bm25-stark", "bm25-relations")


@pytest.fixture(scope="module")
def debian() -> DebianDataset:
    return DebianDataset()


@pytest.fixture(scope="module")
def slice_skb() -> SKB:
    """The first 5,000 Debian packages as a text-only SKB: real documents, a quick index."""
    return debian_slice(1, 5000)


def test_matches_bm25s_alone_on_the_same_corpus(debian: DebianDataset, slice_skb: SKB, session_cache: Path) -> None:
    skb, queries = slice_skb, debian.load_queries().split("test")[:30]
    retriever = BM25Retriever(analyzer="bm25s", stopwords="en", stemmer="english", length_norms="exact")
    retriever.build(skb, BuildContext(cache_dir=session_cache))
    ours = retriever.search(queries, 10)

    stemmer = Stemmer.Stemmer("english")
    corpus = list(skb.documents())
    raw = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    raw.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([q.text for q in queries], stopwords="en", stemmer=stemmer, show_progress=False)
    _, scores = raw.retrieve(tokens, k=10, show_progress=False)
    for ranking, row_scores, words in zip(
        ours, scores, bm25s.tokenization.convert_tokenized_to_string_list(tokens), strict=True
    ):
        np.testing.assert_allclose(ranking.scores, row_scores[: len(ranking.scores)], rtol=1e-6)
        # The plugin puts ties in index order, also across rank 10 (where bm25s keeps any).
        every = raw.get_scores(words) if words else np.zeros(len(corpus))
        expected = np.lexsort((np.arange(len(every)), -every))[:10]
        assert ranking.ids.tolist() == skb.candidate_ids[expected[every[expected] > 0]].tolist()
        assert (ranking.scores > 0).all()


def test_lucene_analysis_and_norms_change_only_the_tokens_and_lengths(
    debian: DebianDataset, slice_skb: SKB, session_cache: Path
) -> None:
    """The default plugin = bm25s over Lucene's tokens, with lengths decoded from Lucene's norm byte."""
    from harness_bm25.analysis import LuceneEnglishAnalyzer
    from harness_bm25.norms import lucene_length

    skb, queries = slice_skb, debian.load_queries().split("test")[:30]
    analyzer = LuceneEnglishAnalyzer()
    corpus = [analyzer(d) for d in skb.documents()]
    exact = BM25Retriever(length_norms="exact")
    exact.build(skb, BuildContext(cache_dir=session_cache))
    raw = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    raw.index(corpus, show_progress=False)
    _, scores = raw.retrieve([analyzer(q.text) for q in queries], k=10, show_progress=False)
    for ranking, row_scores in zip(exact.search(queries, 10), scores, strict=True):
        np.testing.assert_allclose(ranking.scores, row_scores[: len(ranking.scores)], rtol=1e-6)

    # Lucene-normed score of one (document, term), by hand from BM25's formula.
    lucene = BM25Retriever()
    lucene.build(skb, BuildContext(cache_dir=session_cache))
    document = max(range(len(corpus)), key=lambda i: len(corpus[i]))  # a long one, where the norm is lossy
    term = corpus[document][0]
    n, df = len(corpus), sum(term in set(d) for d in corpus)
    tf, avgdl = corpus[document].count(term), sum(map(len, corpus)) / len(corpus)
    length = int(lucene_length(np.array([len(corpus[document])]))[0])
    assert length < len(corpus[document])
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = idf * tf / (tf + 0.9 * (0.6 + 0.4 * length / avgdl))
    column = lucene._index.vocab_dict[term]
    start, end = lucene._index.scores["indptr"][column : column + 2]
    position = np.searchsorted(lucene._index.scores["indices"][start:end], document)
    assert lucene._index.scores["data"][start + position] == pytest.approx(expected, rel=1e-5)


def test_lucene_length_decodes_the_norm_byte() -> None:
    from harness_bm25.norms import lucene_length

    # Exact below 24; above, 24 + (n - 24) kept to its four most significant bits.
    lengths = np.array([0, 1, 23, 24, 25, 39, 40, 41, 55, 56, 1000, 2**20])
    assert lucene_length(lengths).tolist() == [0, 1, 23, 24, 25, 39, 40, 40, 54, 56, 984, 983064]


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"analyzer": "whitespace"}, "analyzer"),
        ({"stemmer": "english"}, "stemmer apply to analyzer 'bm25s'"),  # only with analyzer bm25s
        ({"analyzer": "bm25s", "stemmer": "klingon"}, "stemmer: unknown PyStemmer language 'klingon'"),
        ({"length_norms": "approximate"}, "length_norms"),
        ({"method": "bm25+"}, "length_norms 'lucene' needs method 'lucene'"),  # Lucene norms: Lucene's formula
        ({"method": "tf-idf", "length_norms": "exact"}, "method"),
        ({"k1": -1}, "k1"),
        ({"b": 2}, "b: Input should be less than or equal to 1"),
        ({"zero_scores": "fill"}, "zero_scores"),
        ({"colour": "red"}, "colour: not a parameter"),
    ],
)
def test_a_bad_parameter_is_one_error_naming_it(bad: dict[str, Any], named: str) -> None:
    with pytest.raises(HarnessError, match="retriever 'bm25': bad parameters") as raised:
        BM25Retriever(**bad)
    assert named in str(raised.value)


def test_every_bad_parameter_is_named_in_the_one_error() -> None:
    with pytest.raises(HarnessError) as raised:
        BM25Retriever(b=2, colour="red", zero_scores="fill")
    assert all(f"{name}:" in str(raised.value) for name in ("b", "colour", "zero_scores")), raised.value


def test_good_combinations_are_accepted() -> None:
    options = BM25Retriever(method="bm25+", length_norms="exact", analyzer="bm25s", stemmer="english").options
    assert (options.method, options.stemmer) == ("bm25+", "english")


def test_params_record_every_option_with_its_default() -> None:
    assert BM25Retriever(k1=1.2).params == {
        "k1": 1.2,
        "b": 0.4,
        "method": "lucene",
        "analyzer": "lucene",
        "stopwords": None,
        "stemmer": None,
        "length_norms": "lucene",
        "with_relations": False,
        "zero_scores": "drop",
    }


@pytest.mark.parametrize("preset", PRESETS)
def test_a_presets_row_records_every_option(preset: str) -> None:
    presets = registry(harness_bm25)
    assert not presets.problems
    recorded = recorded_params(preset, harness_bm25)
    assert set(recorded) == set(BM25Retriever.Options.model_fields)
    assert recorded == {**BM25Retriever().params, **presets.retrievers[preset].params}


def test_the_presets_and_conditions_load_from_the_plugin() -> None:
    presets = registry(harness_bm25)
    assert set(PRESETS) <= set(presets.retrievers)
    assert (presets.defaults.retriever, presets.defaults.split, presets.defaults.k) == ("bm25", "test", 100)
    assert {c.retriever for c in presets.conditions} == {"bm25", "bm25-relations", "bm25-stark"}
    assert presets.condition_for("bm25-stark", "stark-prime", "human-generated") is not None


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_keeps_the_retriever_contract(preset: str, tmp_path: Path) -> None:
    check_retriever(BM25Retriever, _preset(preset), tmp_path)


def test_second_build_loads_the_cached_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    skb, query = tiny_skb(), [Query(1, "copper pot soups", (4,)), Query(2, "kettle", (0, 1))]
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
    assert BM25Retriever(zero_scores="keep").cache_key(skb) != first.cache_key(skb)


def test_corrupt_cache_is_rebuilt(tmp_path: Path) -> None:
    skb, query = tiny_skb(), [Query(1, "copper pot soups", (4,)), Query(2, "kettle", (0, 1))]
    retriever = BM25Retriever()
    retriever.build(skb, BuildContext(cache_dir=tmp_path))
    expected = [r.ids.tolist() for r in retriever.search(query, 5)]
    cache = next(p for p in (tmp_path / "bm25").iterdir() if p.is_dir())  # not the entry's lock file
    for file in cache.iterdir():
        if file.suffix in (".npy", ".json") and file.name != "complete.json":
            file.write_bytes(b"garbage")
    rebuilt = BM25Retriever()
    rebuilt.build(skb, BuildContext(cache_dir=tmp_path))
    assert [r.ids.tolist() for r in rebuilt.search(query, 5)] == expected


def test_query_without_known_terms_returns_nothing(debian: DebianDataset, session_cache: Path) -> None:
    retriever = BM25Retriever()
    retriever.build(debian.load_skb(), BuildContext(cache_dir=session_cache))
    assert retriever.search([Query(1, "zzqxjw the of", (0,))], 10)[0].ids.size == 0


def _preset(name: str) -> dict[str, Any]:
    """The parameters of one of the plugin's presets."""
    return dict(registry(harness_bm25).retrievers[name].params)


def test_bm25_stark_tokenizes_as_bm25s_defaults() -> None:
    """STaRK's baseline calls ``bm25s.tokenize(text)``, whose default removes English stopwords."""
    text = "What is the role of the Protein in the regulation of it, and is it not such a thing? Ça va."
    tokens = BM25Retriever(**_preset("bm25-stark"))._tokenize([text])
    ours = bm25s.tokenization.convert_tokenized_to_string_list(tokens)
    assert ours == bm25s.tokenize([text], return_ids=False, show_progress=False)
    assert ours == [["what", "role", "protein", "regulation", "thing", "ça", "va"]]


def _bm25s_alone(skb: SKB, texts: list[str], k: int, **params: Any) -> tuple[np.ndarray, np.ndarray]:
    """bm25s by itself on the SKB's documents: ``retrieve``'s ids (as candidate ids) and scores."""
    raw = bm25s.BM25(**params)
    raw.index(bm25s.tokenize(list(skb.documents()), stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    positions, scores = raw.retrieve(tokens, k=k, show_progress=False)
    return skb.candidate_ids[positions], scores


def test_bm25_stark_answers_a_stopword_query_with_bm25s_zero_score_top_k(tmp_path: Path) -> None:
    """A query of stopwords only has no terms for bm25s: every document scores 0, and STaRK's
    baseline still returns its top k, in the order bm25s's selection gives (not index order)."""
    skb = tiny_skb()
    retriever = BM25Retriever(**_preset("bm25-stark"))
    retriever.build(skb, BuildContext(cache_dir=tmp_path))
    text = "Is it that it is in the?"
    (ranking,) = retriever.search([Query(1, text, (0,))], 3)
    ids, _ = _bm25s_alone(skb, [text], 3, k1=1.5, b=0.75)
    assert ranking.ids.tolist() == ids[0].tolist() and ranking.scores.tolist() == [0, 0, 0]
    assert len(set(ranking.ids.tolist())) == 3


@pytest.mark.parametrize("zero_scores", ["drop", "keep"])
def test_zero_score_fill_follows_the_matches_as_bm25s_fills(tmp_path: Path, zero_scores: str) -> None:
    skb = tiny_skb()
    retriever = BM25Retriever(analyzer="bm25s", stopwords="en", length_norms="exact", zero_scores=zero_scores)
    retriever.build(skb, BuildContext(cache_dir=tmp_path))
    kettle, steel = retriever.search([Query(1, "kettle", (0,)), Query(2, "steel pot", (3,))], 4)
    assert kettle.ids.tolist()[:2] == [1, 0]  # the shorter document first
    assert (np.diff(kettle.scores) <= 0).all() and (kettle.scores[:2] > 0).all()
    assert (steel.scores[:2] > 0).all() and sorted(steel.ids.tolist()[:2]) == [3, 4]
    if zero_scores == "keep":  # bm25s's own top 4: its fill, in its order
        ids, scores = _bm25s_alone(skb, ["kettle", "steel pot"], 4, method="lucene", k1=0.9, b=0.4)
        assert [kettle.ids.tolist(), steel.ids.tolist()] == ids.tolist()
        np.testing.assert_allclose([kettle.scores, steel.scores], scores, rtol=1e-6)
        assert kettle.scores.tolist()[2:] == [0, 0] and steel.scores.tolist()[2:] == [0, 0]
    else:
        assert len(kettle.ids) == len(steel.ids) == 2


def test_top_k_breaks_ties_by_index_position() -> None:
    from harness_bm25.retriever import _top_k

    scores = np.array([1.0, 3.0, 3.0, 0.0, 3.0, 0.0, 2.0], dtype=np.float32)
    assert _top_k(scores, 2).tolist() == [1, 2]  # a tie across rank k keeps the first ones
    assert _top_k(scores, 3).tolist() == [1, 2, 4]
    assert _top_k(scores, 6).tolist() == [1, 2, 4, 6, 0, 3]
    assert _top_k(scores, 7).tolist() == [1, 2, 4, 6, 0, 3, 5]
    assert _top_k(scores, 10).tolist() == [1, 2, 4, 6, 0, 3, 5]
    assert _top_k(np.zeros(5, dtype=np.float32), 3).tolist() == [0, 1, 2]


@pytest.mark.parametrize("seed", range(30))
def test_top_k_is_the_order_of_score_then_position(seed: int) -> None:
    """On score arrays shaped like BM25's (mostly 0, ties, a few negatives from robertson's idf),
    the top k is exactly the first k of all positions sorted by (-score, position)."""
    from harness_bm25.retriever import _top_k

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    scores = rng.choice(np.array([0, 0, 0, 0, 1.5, 2.25, 3, 7.125], dtype=np.float32), size=n)
    if seed % 3 == 0:
        scores[rng.integers(0, n, 3)] = -0.5
    if seed % 5 == 0:
        scores[:] = 0
    for k in (1, 2, 10, 100, n, n + 5):
        expected = sorted(range(n), key=lambda i: (-float(scores[i]), i))[:k]
        assert _top_k(scores, k).tolist() == expected, (seed, k)
