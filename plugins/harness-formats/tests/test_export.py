"""``harness export``: what it writes is read back by the tools each format is for —
``datasets.load_from_disk``, ``datasets.load_dataset("parquet")``, BEIR's ``GenericDataLoader``,
pytrec_eval — and the Hugging Face layout loads back into an equal SKB and query set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
from harness import SKB, Query, QuerySet
from harness.testing import installed_plugins, invoke, require, tiny_skb
from harness_formats.hf import load_hf

QUERIES = {
    "test": [
        Query(1, "a red kettle — “boils” water fast, 茶?", (0,), {"source": "hand", "n": 3}),
        Query(2, "kettle", (1, 0, 0)),  # answers out of order and repeated
        Query(5, "anything by Glöbex", (2, 3, 4)),
        Query(6, "a brand", (5,)),  # answered only by a node that is not a candidate
        Query(7, "nothing answers this", ()),
    ],
    # STaRK's human-generated split reuses the ids of the synthesized queries
    "human-generated": [
        Query(1, "same id, another query", (2, 6), {"author": "Zoë"}),
        Query(9, "a query\nover two lines", (4,)),
    ],
}


class Mixed(harness.Dataset):
    """``harness.testing.tiny_skb`` (a multi-edge, a self-loop, unicode, a list field, nodes
    that are not candidates) with the queries above."""

    name = "mixed"

    def load_skb(self) -> SKB:
        return tiny_skb()

    def load_queries(self) -> QuerySet:
        return QuerySet("mixed", QUERIES)


class MixedPlugin:
    @harness.hookimpl
    def register_datasets(self, register: Any) -> None:
        register(Mixed)


@pytest.fixture(autouse=True)
def _plugins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This plugin and the Debian one (no others), the ``mixed`` dataset, and Hugging Face's
    caches inside the test's directory."""
    monkeypatch.setenv("HARNESS_PLUGINS", "formats,debian")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    installed_plugins(MixedPlugin())


def export(*args: str) -> tuple[int, str, str]:
    result = invoke("export", *args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def expected_qrels(skb: SKB, queries: list[Query]) -> dict[str, dict[str, int]]:
    """What the qrels mean: every answer once, 1 when it is a candidate, else 0 (judged)."""
    return {
        str(q.id): {str(a): int(skb.is_candidate(np.array([a]))[0]) for a in q.answer_ids}
        for q in queries
        if q.answer_ids
    }


@pytest.mark.parametrize("with_relations", [False, True])
def test_hf_export_loads_with_datasets_and_back_into_the_harness(tmp_path: Path, with_relations: bool) -> None:
    datasets = require("datasets", install="pip install datasets")
    out = tmp_path / "mixed-hf"
    code, stdout, err = export("-d", "mixed", "--to", "hf", "--out", str(out), *["--with-relations"] * with_relations)
    assert code == 0, err
    assert json.loads(stdout)["queries"] == {"test": 5, "human-generated": 2}
    skb = tiny_skb()
    cache = str(tmp_path / "hf-cache")  # datasets reads HF_DATASETS_CACHE once, at import

    nodes = datasets.load_from_disk(str(out / "hf" / "nodes")).to_list()
    assert [n["id"] for n in nodes] == list(range(skb.num_nodes))
    for node in nodes:
        i = node["id"]
        assert node["text"] == skb.document(i, with_relations=with_relations)
        assert (node["name"], node["type"]) == (skb.names[i], skb.node_type(i))
        assert node["candidate"] == bool(skb.is_candidate(np.array([i]))[0])
        assert json.loads(node["fields"]) == skb.fields[i]
    edges = datasets.load_from_disk(str(out / "hf" / "edges")).to_list()
    names = [e.name for e in skb.edge_types]
    assert [(e["src"], e["dst"], e["type"]) for e in edges] == [
        (int(s), int(d), names[t]) for s, d, t in zip(skb.src, skb.dst, skb.edge_type, strict=True)
    ]
    assert sum(e == {"src": 0, "dst": 1, "type": "similar"} for e in edges) == 2  # the multi-edge, twice

    queries = datasets.load_from_disk(str(out / "hf" / "queries"))
    assert set(queries) == {"test", "human_generated"}  # Hugging Face split names are \w+
    for split, hf_split in (("test", "test"), ("human-generated", "human_generated")):
        rows = queries[hf_split].to_list()
        assert [(r["id"], r["text"], r["answer_ids"], r["split"]) for r in rows] == [
            (q.id, q.text, list(q.answer_ids), split) for q in QUERIES[split]
        ]
        assert [json.loads(r["metadata"]) for r in rows] == [q.metadata for q in QUERIES[split]]
        # the Parquet files hold the same, read by datasets' own parquet builder
        parquet = datasets.load_dataset(
            "parquet", data_files={hf_split: str(out / "parquet" / "queries" / f"{hf_split}.parquet")}
        )
        assert parquet[hf_split].to_list() == rows
        qrels = datasets.load_dataset(
            "parquet", data_files={hf_split: str(out / "parquet" / "qrels" / f"{hf_split}.parquet")}
        )[hf_split].to_list()
        found: dict[str, dict[str, int]] = {}
        for r in qrels:
            found.setdefault(str(r["query_id"]), {})[str(r["corpus_id"])] = r["score"]
        assert found == expected_qrels(skb, QUERIES[split])
    # the dataset card's configs: load_dataset(DIR, CONFIG) reads the Parquet files too
    assert datasets.load_dataset(str(out), "queries", cache_dir=cache)["test"].to_list() == queries["test"].to_list()
    assert datasets.load_dataset(str(out), "nodes", cache_dir=cache)["train"].to_list() == nodes

    loaded, loaded_queries = load_hf(out)
    assert loaded.num_nodes == skb.num_nodes and loaded.node_type_names == skb.node_type_names
    assert [loaded.node_type(i) for i in range(skb.num_nodes)] == [skb.node_type(i) for i in range(skb.num_nodes)]
    for relations in (False, True):
        assert list(loaded.documents(range(skb.num_nodes), with_relations=relations)) == list(
            skb.documents(range(skb.num_nodes), with_relations=relations)
        )
    for array in ("src", "dst", "edge_type", "candidate_ids"):
        assert np.array_equal(getattr(loaded, array), getattr(skb, array)), array
    assert loaded.edge_types == skb.edge_types and loaded.candidate_types == skb.candidate_types
    assert loaded_queries.split_names == ["test", "human-generated"]
    for split, queries_of in QUERIES.items():
        assert loaded_queries.split(split) == queries_of


def test_beir_export_loads_with_beirs_loader(tmp_path: Path) -> None:
    loader = require("beir.datasets.data_loader", install="pip install --no-deps beir==2.2.0").GenericDataLoader
    out = tmp_path / "mixed-beir"
    code, stdout, err = export("-d", "mixed", "--to", "beir", "--out", str(out), "--with-relations")
    assert code == 0, err
    # the human-generated split reuses test's ids: BEIR's prefix layout keeps it apart
    assert json.loads(stdout)["prefixed_splits"] == ["human-generated"]
    skb = tiny_skb()
    expected_corpus = {
        str(i): {"text": skb.document(int(i), with_relations=True), "title": ""} for i in skb.candidate_ids
    }
    for split, prefix in (("test", None), ("human-generated", "human-generated")):
        corpus, queries, qrels = loader(str(out), prefix=prefix).load(split=split)
        assert corpus == expected_corpus
        assert qrels == expected_qrels(skb, QUERIES[split])
        # BEIR keeps the queries that have qrels; query 7 has no answer
        assert queries == {str(q.id): q.text for q in QUERIES[split] if q.answer_ids}
    # every query is in queries.jsonl, also the unanswered one
    written = [json.loads(line) for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert written == [{"_id": str(q.id), "text": q.text} for q in QUERIES["test"]]


def test_trec_qrels_read_by_pytrec_eval(tmp_path: Path) -> None:
    pytrec_eval = require("pytrec_eval", install="pip install pytrec-eval-terrier")
    out = tmp_path / "mixed-trec"
    code, _, err = export("-d", "mixed", "--to", "trec", "--out", str(out), "--split", "test")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["qrels.test.trec"]
    with (out / "qrels.test.trec").open() as handle:
        qrels = pytrec_eval.parse_qrel(handle)
    assert qrels == expected_qrels(tiny_skb(), QUERIES["test"])
    # and `harness evaluate` scores a run against it as pytrec_eval does, query 6 (no
    # candidate answer) included as trec_eval -c includes it
    run = {"1": {"0": 3.0, "1": 2.0}, "2": {"1": 1.0, "0": 1.0, "4": 0.5}, "5": {"0": 1.0}, "6": {"0": 1.0}}
    (tmp_path / "run.json").write_text(json.dumps(run))
    qrels_file = str(out / "qrels.test.trec")
    arguments = ["--run", "run.json", "--qrels", qrels_file, "-m", "mrr,map", "--per-query", "--format", "json"]
    result = invoke("evaluate", *arguments, catch_exceptions=False)
    ours = json.loads(result.stdout)["per_query"]
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "map"}).evaluate(run)
    assert set(ours) == set(theirs) == {"1", "2", "5", "6"}
    for qid, values in theirs.items():
        assert ours[qid] == pytest.approx({"mrr": values["recip_rank"], "map": values["map"]}), qid


@pytest.mark.slow
def test_the_debian_dataset_exported_and_read_back(tmp_path: Path) -> None:
    """The real dataset: 66k nodes, a million edges (node pairs with several relations), unicode text."""
    datasets = require("datasets", install="pip install datasets")
    loader = require("beir.datasets.data_loader", install="pip install --no-deps beir==2.2.0").GenericDataLoader
    debian = harness.load_dataset("debian")
    skb, queries = debian.load_skb(), debian.load_queries()
    assert export("-d", "debian", "--to", "hf", "--out", "hf", "--with-relations")[0] == 0
    assert export("-d", "debian", "--to", "beir", "--out", "beir", "--split", "test")[0] == 0

    loaded, loaded_queries = load_hf("hf")
    for array in ("node_types", "src", "dst", "edge_type", "candidate_ids"):
        assert np.array_equal(getattr(loaded, array), getattr(skb, array)), array
    pairs = np.stack([skb.src, skb.dst], axis=1)
    assert len(np.unique(pairs, axis=0)) < len(pairs), "pairs of nodes joined by more than one relation"
    nodes = datasets.load_from_disk("hf/hf/nodes")
    sample = np.random.default_rng(0).choice(skb.num_nodes, 2_000, replace=False).tolist()
    texts = nodes.select(sample)["text"]
    assert texts == [skb.document(i, with_relations=True) for i in sample]
    assert texts == [loaded.document(i, with_relations=True) for i in sample]
    assert any(not t.isascii() for t in texts)
    for split in queries.split_names:
        assert loaded_queries.split(split) == queries.split(split)

    corpus, beir_queries, qrels = loader("beir").load(split="test")
    assert list(corpus) == [str(i) for i in skb.candidate_ids]
    assert [corpus[str(i)]["text"] for i in sample if skb.is_candidate(np.array([i]))[0]] == [
        skb.document(i) for i in sample if skb.is_candidate(np.array([i]))[0]
    ]
    assert beir_queries == {str(q.id): q.text for q in queries.split("test") if q.answer_ids}
    assert qrels == expected_qrels(skb, queries.split("test"))


def test_output_is_whole_or_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    code, _, err = export("-d", "mixed", "--to", "beir", "--out", "taken")
    assert code == 2 and "--out taken exists and is not empty; give --force to replace it" in err
    code, _, err = export("-d", "mixed", "--to", "trec", "--out", "new", "--split", "nope")
    assert code == 2 and "no split 'nope'" in err and not (tmp_path / "new").exists()

    calls = {"n": 0}
    original = SKB.document

    def failing(self: SKB, node: int, *args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("disk full")
        return original(self, node, *args, **kwargs)

    monkeypatch.setattr(SKB, "document", failing)
    for to in ("hf", "beir"):
        calls["n"] = 0
        code, _, err = export("-d", "mixed", "--to", to, "--out", "taken", "--force")
        assert code == 2 and "disk full" in err
        code, _, err = export("-d", "mixed", "--to", to, "--out", "fresh")
        assert code == 2 and "disk full" in err
    # the old directory is untouched, nothing else was left behind
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "hf-cache") == ["taken"]
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]

    monkeypatch.setattr(SKB, "document", original)
    code, _, err = export("-d", "mixed", "--to", "trec", "--out", "taken", "--force")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["qrels.human-generated.trec", "qrels.test.trec"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "hf-cache") == ["taken"]


def test_a_damaged_hf_export_is_refused_naming_file_and_row(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    assert export("-d", "mixed", "--to", "hf", "--out", "hf")[0] == 0
    path = tmp_path / "hf" / "parquet" / "edges.parquet"
    table = pq.read_table(path).to_pylist()
    table[4]["type"] = "sold_by"
    pq.write_table(pq.read_table(path).from_pylist(table, schema=pq.read_schema(path)), path)
    with pytest.raises(harness.HarnessError, match=r"edges.parquet: row 4, column type: unknown relation 'sold_by'"):
        load_hf(tmp_path / "hf")
    meta = json.loads((tmp_path / "hf" / "harness.json").read_text())
    meta["documents"]["built_by"] = "StarkSKB"
    (tmp_path / "hf" / "harness.json").write_text(json.dumps(meta))
    with pytest.raises(harness.HarnessError, match="exported from StarkSKB, whose documents come from its code"):
        load_hf(tmp_path / "hf")
