"""The spaghetti retriever: the structured-query language checked against the SKB's schema,
execution on the tiny SKB and on Debian, the error fed back once, fusion, verification, usage,
and SmolLM2 behind a real OpenAI-compatible server through the real runner.

A scripted provider stands in for the LLM only where a test needs to choose what it answers
(the error fed back, verdicts that reorder); everything else runs the real model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import harness
from harness import BuildContext, HarnessError, Query, QuerySet
from harness.testing import TinyDataset, check_retriever, tiny_skb
from harness_bm25.retriever import BM25Retriever
from harness_llm.api import LLM, Completion, messages_of
from harness_llm.providers import OpenAILLM
from harness_llm.testing import provider_plugin
from harness_spaghetti.parsing import Constraint, LinkedEntity, Schema, execute, read_answer
from harness_spaghetti.retriever import SpaghettiRetriever, fuse, parse_verdict

GLOBEX = LinkedEntity("glöbex", 6, "Glöbex", "brand")


def _execute(skb: harness.SKB, *pairs: tuple[str, str], linked: tuple[LinkedEntity, ...] = (GLOBEX,)) -> Any:
    linker = harness.EntityLinker(skb.names)
    return execute(skb, Schema.of(skb), [Constraint(a, p) for a, p in pairs], linked, linker, limit=1000)


# -- the structured-query language -------------------------------------------------------------
def test_answers_are_read_as_lines_or_json() -> None:
    assert read_answer("ANCHOR: Glöbex\nPATH: brand <-made_by- product", 3) == [
        Constraint("Glöbex", "brand <-made_by- product")
    ]
    two = "Sure!\n1. **Anchor**: `Acme`\n   Path: brand <-made_by- product\n"
    two += "ANCHOR: red kettle\nPATH: product -similar-> product"
    assert [c.anchor for c in read_answer(two, 3)] == ["Acme", "red kettle"]
    assert read_answer('{"anchor": "Acme", "path": "brand <-made_by- product"}', 3) == [
        Constraint("Acme", "brand <-made_by- product")
    ]
    listed = 'Here: {"constraints": [{"entity": "Acme", "path": "brand <-made_by- product"}]}'
    assert read_answer(listed, 3) == [Constraint("Acme", "brand <-made_by- product")]
    with pytest.raises(HarnessError, match="has no PATH; answer with lines 'ANCHOR"):
        read_answer("CREATE TABLE product (id INT)", 3)
    with pytest.raises(HarnessError, match="has 2 constraints; give at most 1"):
        read_answer(two, 1)


def test_paths_are_checked_against_the_schema_with_the_schema_in_the_error() -> None:
    skb = tiny_skb()
    assert Schema.of(skb).lines() == ["product -made_by-> brand", "product -similar-> product"]
    assert _execute(skb, ("Glöbex", "brand <-made_by- product")).ids.tolist() == [2, 3, 4]
    failures = {
        "brand <-made_by- gadget": "no node type 'gadget'; types: product, brand",
        "brand <-sold_by- product": "no relation 'sold_by'; relations: made_by, similar",
        # the direction: made_by goes from product to brand
        "brand -made_by-> product": "no edge leads brand -made_by-> product; made_by edges go product -made_by-> brand",
        "brand <-made_by- product -made_by-> brand": "ends at brand; it must end at what is searched for: product",
        "brand made_by product": "cannot read",
        "brand": "has no relation",
    }
    for path, message in failures.items():
        with pytest.raises(HarnessError, match=message.replace("(", r"\(").replace(")", r"\)")):
            _execute(skb, ("Glöbex", path))
    with pytest.raises(HarnessError, match=r"no brand is named 'Initech'.*Entities in the query: Glöbex \(brand\)"):
        _execute(skb, ("Initech", "brand <-made_by- product"))
    with pytest.raises(HarnessError, match="needs an ANCHOR"):
        _execute(skb, ("", "brand <-made_by- product"))
    # the entity as the prompt lists it, its type echoed
    assert _execute(skb, ("Glöbex (brand)", "brand <-made_by- product")).ids.tolist() == [2, 3, 4]
    # a name the linker did not find in the query still resolves when it is a whole node name
    assert _execute(skb, ("ACME", "brand <-made_by- product"), linked=()).ids.tolist() == [0, 1]


def test_constraints_intersect_and_an_empty_or_hub_result_is_an_error() -> None:
    skb = tiny_skb()
    # Glöbex's products similar to a Glöbex product: steel pan (3) is similar to itself
    both = _execute(
        skb, ("Glöbex", "brand <-made_by- product"), ("Glöbex", "brand <-made_by- product -similar-> product")
    )
    assert both.ids.tolist() == [3] and both.reached == [3, 1]
    with pytest.raises(HarnessError, match=r"finds no product \('Acme' brand <-made_by- product: 2, 'Glöbex'"):
        _execute(skb, ("Acme", "brand <-made_by- product"), ("Glöbex", "brand <-made_by- product"), linked=())
    linker = harness.EntityLinker(skb.names)
    with pytest.raises(HarnessError, match="passes more than 2 nodes"):
        execute(skb, Schema.of(skb), [Constraint("Glöbex", "brand <-made_by- product")], [GLOBEX], linker, limit=2)


def test_structured_queries_execute_on_debian() -> None:
    """Two val queries' structured queries, written by hand, on the Debian SKB v2: the
    conjunction of a section and a team's dependants holds the gold answers."""
    from harness_debian.dataset import DebianDataset

    dataset = DebianDataset()
    skb = dataset.load_skb()
    queries = {q.id: q for q in dataset.load_queries().split("val")}
    schema, linker = Schema.of(skb), harness.EntityLinker(skb.names)
    assert "package -maintained_by-> maintainer" in schema.lines() and schema.example is not None
    haskell = execute(
        skb, schema, [Constraint("Debian Haskell Group", "maintainer <-maintained_by- package")], [], linker, 10_000
    )
    assert set(queries[6].answer_ids) <= set(haskell.ids.tolist())  # "... maintained by the Debian Haskell Group?"
    vcs = [  # "In the vcs section, which tools bridge Git and Mercurial and depend on a Debian Python Team package?"
        Constraint("vcs", "section <-in_section- package"),
        Constraint("Debian Python Team", "maintainer <-maintained_by- package <-depends- package"),
    ]
    run = execute(skb, schema, vcs, [], linker, 10_000)
    assert set(queries[34].answer_ids) <= set(run.ids.tolist()) and len(run.ids) < min(run.reached)


# -- fusion --------------------------------------------------------------------------------------
def test_fusion_keeps_each_sources_candidates() -> None:
    lists = {
        "kb": np.array([7, 8, 9, 10]),
        "text": np.array([1, 7, 2, 3, 4]),
        "tables": np.array([7, 1, 5, 6]),
    }
    order, origin = fuse(lists, "concat", per_source=2)
    # each source's first two are in the first 6 (the candidates), in SPAGHETTI's order: kb, text, tables
    assert order[:6] == [7, 8, 1, 2, 5, 6]
    for ids in lists.values():
        assert set(ids[:2].tolist()) <= set(order[:6])
    assert order[6:] == [9, 3, 10, 4] and sorted(order) == sorted({n for ids in lists.values() for n in ids.tolist()})
    assert origin[7] == "kb" and origin[1] == "text" and origin[5] == "tables"
    rrf, best = fuse(lists, "rrf", per_source=2, rrf_k=60)

    def score(node: int) -> float:
        return sum(1 / (61 + ids.tolist().index(node)) for ids in lists.values() if node in ids)

    assert [round(score(n), 12) for n in rrf] == sorted((round(score(n), 12) for n in rrf), reverse=True)
    assert rrf[0] == 7 and best[7] == "kb" and best[1] == "text"  # a node's source: the list ranking it best
    assert fuse({"kb": np.zeros(0, dtype=np.int64)}, "concat", 3) == ([], {})


def test_verdicts_are_read() -> None:
    assert parse_verdict("Yes.") is True and parse_verdict("no, it is not") is False
    assert parse_verdict("True") is True and parse_verdict("maybe") is None and parse_verdict("yesterday") is None


def test_options_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    local = {"llm": "openai:m", "llm_params": {"base_url": "http://127.0.0.1:9/v1"}}
    with pytest.raises(HarnessError, match="sources must be distinct and not empty"):
        SpaghettiRetriever(**local, sources=["kb", "kb"])
    with pytest.raises(HarnessError, match=r"sources.0: Input should be 'kb', 'text', 'tables' or 'llm'"):
        SpaghettiRetriever(**local, sources=["wikidata"])
    with pytest.raises(HarnessError, match=r"per_source \(8\) × 3 sources exceeds candidates \(20\)"):
        SpaghettiRetriever(**local, per_source=8)
    with pytest.raises(HarnessError, match="verifier: Input should be"):
        SpaghettiRetriever(**local, verifier="vote")
    with pytest.raises(HarnessError, match="llm: Field required"):
        SpaghettiRetriever()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(HarnessError, match="retriever 'spaghetti': llm 'openai:gpt-4o-mini'"):
        SpaghettiRetriever(llm="openai:gpt-4o-mini")
    made = SpaghettiRetriever(**local, sources=["tables", "kb"], candidates=5)
    # the evidence order whatever was written; the share derived and recorded
    assert made.params["sources"] == ["kb", "tables"] and made.params["per_source"] == 2
    assert made.uses() == ["bm25-relations"]


# -- the control flow, with a scripted LLM ----------------------------------------------------------
class Scripted(LLM):
    """Answers parse prompts from a script (a bad path, then a good one after the error comes
    back), and verifies yes only the product named in ``approve``."""

    name = "scripted"
    log: ClassVar[list[list[Any]]] = []
    approve: ClassVar[str] = ""

    def complete(self, prompt: Any, max_tokens: int = 256, temperature: float = 0.0) -> Completion:
        messages = messages_of(prompt)
        type(self).log.append(messages)
        last = messages[-1].content
        if "Answer yes or no" in last:
            text = "yes" if f"- product: {self.approve}\n" in last else "no"
        elif "Reply with the number only" in last:  # harness-llm's pointwise reranker
            text = "0.9" if f"- product: {self.approve}\n" in last else "0.1"
        elif last.startswith("That query fails"):
            text = (
                "PATH: nonsense" if "Acme" in messages[-3].content else "ANCHOR: Glöbex\nPATH: brand <-made_by- product"
            )
        elif last.startswith("Search query:"):
            text = "ANCHOR: Glöbex\nPATH: brand -made_by-> product"  # the wrong direction
        elif last.startswith("Name up to"):
            text = "- copper pot\n- a pot nobody makes"
        else:
            raise AssertionError(f"unexpected prompt: {last[:80]}")
        return Completion(text, len(" ".join(m.content for m in messages).split()), len(text.split()), 0.0, 0.001)


@pytest.fixture
def scripted(plugins: Any, session_cache: Path) -> Iterator[Any]:
    plugins.register(provider_plugin(Scripted), "scripted-llm")
    skb = tiny_skb()
    built: dict[str, BM25Retriever] = {}

    def retriever(name: str) -> BM25Retriever:
        if name not in built:
            built[name] = BM25Retriever(with_relations=name == "bm25-relations")
            built[name].build(skb, BuildContext(cache_dir=session_cache))
        return built[name]

    def make(**params: Any) -> SpaghettiRetriever:
        made = SpaghettiRetriever(**{"llm": "scripted:m", "candidates": 3, **params})
        made.build(skb, BuildContext(cache_dir=session_cache, build_retriever=retriever))
        return made

    Scripted.log.clear()
    yield make


def _parse_prompts() -> list[list[Any]]:
    return [m for m in Scripted.log if "ANCHOR" in m[0].content]


def test_a_failed_query_is_fed_back_once(scripted: Any) -> None:
    spaghetti = scripted(verifier="none")
    ranking = spaghetti.search([Query(5, "something by Glöbex", (2, 3, 4))], 5)[0]
    parse = ranking.details["parse"]
    assert parse["retried"] and parse["ok"] and len(parse["attempts"]) == 2
    assert "no edge leads brand -made_by-> product" in parse["attempts"][0]["error"]
    assert parse["attempts"][1]["reached"] == [3] and ranking.details["execution_size"] == 3
    # the second prompt: the first answer, then its error with what the schema has
    first, second = _parse_prompts()
    assert second[: len(first)] == first and second[len(first)].content == parse["attempts"][0]["answer"]
    assert "made_by edges go product -made_by-> brand" in second[-1].content
    # one candidate a source, then in turn: text found nothing, tables only what kb found
    assert ranking.details["retrieved"] == {"kb": 3, "text": 0, "tables": 3}
    assert ranking.details["contributed"] == {"kb": 2, "text": 0, "tables": 1}
    fed_back = ranking

    # failing twice: two calls, never a third; the other sources stand in
    Scripted.log.clear()
    ranking = spaghetti.search([Query(7, "something by Acme", (0, 1))], 5)[0]
    assert len(_parse_prompts()) == 2 and not ranking.details["parse"]["ok"]
    assert ranking.details["fallback"].startswith("the other sources only") and len(ranking.ids)
    # no feedback: one call; no entity linked: no call at all
    Scripted.log.clear()
    once = scripted(verifier="none", feedback=False).search([Query(5, "something by Glöbex", (2, 3, 4))], 5)[0]
    assert len(_parse_prompts()) == 1 and once.details["parse"]["retried"] is False
    Scripted.log.clear()
    unlinked = spaghetti.search([Query(8, "boil water quickly", (0,))], 5)[0]
    assert not _parse_prompts() and unlinked.details["parse"] == {"skipped": "no entity linked"}
    usage = spaghetti.usage()
    assert usage["parse_retries"] == 2 and usage["parse_failures"] == 1 and usage["parse_skipped"] == 1
    # health: what each ranking's details show, and the check that flags a knowledge base never queried
    assert SpaghettiRetriever.health(ranking.details) == {
        "linked": 1.0,
        "parsed": 0.0,
        "executed": 0.0,
        "kb_fallback": 1.0,
    }
    assert SpaghettiRetriever.health(fed_back.details)["executed"] == 1.0
    assert SpaghettiRetriever.health(once.details)["executed"] == 0.0  # no second chance: nothing executed
    assert SpaghettiRetriever.health(unlinked.details) == {
        "linked": 0.0,
        "parsed": 0.0,
        "executed": 0.0,
        "kb_fallback": 1.0,
    }
    checks = SpaghettiRetriever.health_checks(spaghetti.params)
    assert [c.counter for c in checks] == ["executed"]  # verifier none: no verdict to check
    assert [c.counter for c in SpaghettiRetriever.health_checks({**spaghetti.params, "verifier": "yes-no"})] == [
        "executed",
        "verdict_yes",
        "verdict_no",
    ]


def test_verification_reorders_and_usage_counts_tokens(scripted: Any) -> None:
    query = Query(5, "something by Glöbex", (2, 3, 4))
    fused = [c["id"] for c in scripted(verifier="none").search([query], 5)[0].details["candidates"]]
    Scripted.approve = tiny_skb().names[fused[-1]]
    Scripted.log.clear()
    spaghetti = scripted()
    ranking = spaghetti.search([query], 5)[0]
    assert ranking.ids[0] == fused[-1] and ranking.ids.tolist()[1:3] == fused[:2]  # the rest keep fused order
    verdicts = {c["id"]: c["verdict"] for c in ranking.details["candidates"]}
    assert verdicts == {n: "yes" if n == fused[-1] else "no" for n in fused}
    assert np.all(np.diff(ranking.scores) <= 0) and ranking.scores[0] > 2 > ranking.scores[1] >= 1
    usage = spaghetti.usage()
    asked = list(Scripted.log)
    assert usage["llm"] == "scripted:m" and usage["calls"] == len(asked) == 2 + 3  # two parses, three verdicts
    assert usage["input_tokens"] == sum(len(" ".join(x.content for x in m).split()) for m in asked)
    assert usage["verify_calls"] == 3 and usage["parse_calls"] == 2 and usage["cost_usd"] == pytest.approx(0.005)


def test_the_llm_names_answers_and_harness_llm_reranks(scripted: Any) -> None:
    query = Query(5, "something by Glöbex", (2, 3, 4))
    claimed = scripted(sources=["llm", "text"], verifier="none", candidates=2).search([query], 5)[0]
    assert claimed.details["claims"]["linked"] == [4] and claimed.ids[0] == 4  # "copper pot"; the other name is none
    # the verifier as harness-llm's pointwise reranker (STaRK's 0-1 score plus the fused rank)
    fused = [c["id"] for c in scripted(verifier="none").search([query], 5)[0].details["candidates"]]
    Scripted.approve = tiny_skb().names[fused[-1]]
    ranking = scripted(verifier="pointwise").search([query], 5)[0]
    assert ranking.ids.tolist() == [fused[-1], *fused[:2]]
    assert ranking.details["candidates"][-1]["verdict"] == pytest.approx(0.9 + 0.1 * 1 / 3, abs=1e-4)


# -- SmolLM2 behind a real OpenAI-compatible server, through the real runner ---------------------
class TwoQueries(TinyDataset):
    """The tiny SKB with one query that links an entity and one that links none."""

    name = "tiny-spaghetti"

    def load_queries(self) -> QuerySet:
        return QuerySet(self.name, {"test": [Query(5, "something by Glöbex", (2, 3, 4)), Query(8, "boil water", (0,))]})


class TwoQueriesPlugin:
    @harness.hookimpl
    def register_datasets(self, register: Any) -> None:
        register(TwoQueries)


@pytest.mark.slow
def test_smollm2_keeps_the_contract_and_runs_record_details(smollm2_server: str, tmp_path: Path) -> None:
    params = {
        "llm": "openai:smollm2",
        "llm_params": {"base_url": smollm2_server, "concurrency": 1, "timeout": 600},
        "candidates": 3,
        "doc_chars": 200,
        "parse_max_tokens": 32,
        "verify_max_tokens": 2,
    }
    check_retriever(
        SpaghettiRetriever,
        params,
        tmp_path,
        k=3,
        dataset="tiny-spaghetti",
        also=[BM25Retriever],
        presets={"bm25-relations": {"plugin": "bm25", "params": {"with_relations": True}}},
        plugins=[TwoQueriesPlugin(), provider_plugin(OpenAILLM)],
    )
    run_dir = next((tmp_path / "first" / "runs").iterdir())
    lines = [json.loads(line) for line in (run_dir / "per_query.jsonl").read_text().splitlines()]
    linked, unlinked = (line["details"] for line in lines)
    assert linked["linked"][0]["name"] == "Glöbex" and linked["parse"]["attempts"][0]["answer"]
    assert linked["parse"]["ok"] or (linked["parse"]["retried"] and len(linked["parse"]["attempts"]) == 2)
    assert unlinked["parse"] == {"skipped": "no entity linked"} and unlinked["execution_size"] == 0
    results = {r["qid"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    for details, line in zip((linked, unlinked), lines, strict=True):
        ranked = results[line["qid"]]["ids"]
        said = {c["id"]: c["verdict"] for c in details["candidates"]}
        # verified candidates first, each group in fused order
        expected = [n for n in said if said[n] == "yes"] + [n for n in said if said[n] != "yes"]
        assert ranked == expected[: len(ranked)]
        assert sum(details["contributed"].values()) == len(details["candidates"]) <= 3
    row = json.loads((run_dir / "row.json").read_text())
    assert row["regime"] == "llm-at-query-time" and row["usage"]["llm"] == "openai:smollm2"
    assert row["usage"]["input_tokens"] > 0 and row["usage"]["parse_calls"] >= 1 and row["usage"]["verify_calls"] >= 3
    assert row["retriever"]["params"]["per_source"] == 1 and [u["name"] for u in row["uses"]] == [
        "bm25",
        "bm25-relations",
    ]
