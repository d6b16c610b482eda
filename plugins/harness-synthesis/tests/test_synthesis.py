"""Stage 1 of query synthesis: relational templates grounded in a real SKB, checked against an
independent walk over the raw edge list."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness import SKB, BuildContext, EdgeType, HarnessError, load_stark_layout
from harness.testing import invoke
from harness_debian.dataset import DebianDataset
from harness_llm.api import LLM, Completion
from harness_llm.providers import OpenAILLM
from harness_llm.testing import provider_plugin
from harness_synthesis.llm_stages import Fuse
from harness_synthesis.relational import RelationalRequirement
from harness_synthesis.stage import SynthesisStage
from harness_synthesis.templates import TEMPLATES, candidates
from harness_synthesis.templates import Path as MetaPath

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def skb() -> SKB:
    return DebianDataset().load_skb()


def _brute_force(skb: SKB, template_name: str, anchors: dict[str, int]) -> set[int]:
    """Follow each path over the edge arrays directly (not the SKB's CSR look-ups)."""
    template = next(t for t in TEMPLATES["debian"] if t.name == template_name)
    result: set[int] | None = None
    for path in template.paths:
        frontier = {anchors[path.slot]}
        for hop in path.hops:
            relation = [e.name for e in skb.edge_types].index(hop.relation)
            mask = skb.edge_type == relation
            src, dst = skb.src[mask], skb.dst[mask]
            if hop.direction == "out":
                reached = dst[np.isin(src, list(frontier))]
            else:
                reached = src[np.isin(dst, list(frontier))]
            wanted = skb.node_type_names.index(hop.node_type)
            frontier = {int(n) for n in reached if skb.node_types[n] == wanted}
        result = frontier if result is None else result & frontier
    assert result is not None
    return result - set(anchors.values())


def test_grounded_requirements_have_exactly_their_candidates(skb: SKB) -> None:
    drafts = RelationalRequirement(templates="debian", n=25, max_candidates=300).run(skb, [], seed=7)
    assert len(drafts) == 25 and [d.id for d in drafts] == list(range(25))
    seen_templates = set()
    for draft in drafts:
        record = draft.provenance["relational"]
        anchors = {slot: a["id"] for slot, a in record["anchors"].items()}
        assert set(draft.answer_ids) == _brute_force(skb, record["template"], anchors)
        assert record["gold"] in draft.answer_ids and 1 <= len(draft.answer_ids) <= 300
        assert all(a["name"] in draft.text for a in record["anchors"].values()) and "<" not in draft.text
        seen_templates.add(record["template"])
    assert len(seen_templates) >= 5, "templates are sampled, not one repeated"
    again = RelationalRequirement(templates="debian", n=25, max_candidates=300).run(skb, [], seed=7)
    assert [(d.text, d.answer_ids) for d in again] == [(d.text, d.answer_ids) for d in drafts]


def test_the_stage_is_a_plugin_and_checks_its_parameters(skb: SKB, plugins: Any) -> None:
    stages = plugins.components.by_kind["synthesis stage"]
    assert stages["relational"] is RelationalRequirement
    assert {"relational", "textual", "fuse", "filter"} <= set(stages)
    assert all(issubclass(stage, SynthesisStage) for stage in stages.values())
    with pytest.raises(HarnessError, match="no template set 'wikidata'"):
        RelationalRequirement(templates="wikidata")
    with pytest.raises(HarnessError, match="need min_candidates ≤ max_candidates"):
        RelationalRequirement(min_candidates=5, max_candidates=2)
    with pytest.raises(HarnessError, match="n: Input should be greater than or equal to 1"):
        RelationalRequirement(n=0)
    # parameters are recorded resolved, the LLM's provider parameters included
    assert RelationalRequirement(n=3).params == {
        "templates": "debian",
        "n": 3,
        "min_candidates": 1,
        "max_candidates": 200,
        "exclude_gold": [],
    }
    fuse = Fuse(llm="openai:m", llm_params={"base_url": "http://127.0.0.1:1/v1"})
    assert fuse.params["llm_params"] == {**OpenAILLM("m").params, "base_url": "http://127.0.0.1:1/v1"}
    assert fuse.params["role"] == "user" and fuse.params["rephrase_llm"] is None
    with pytest.raises(HarnessError, match="rephrase_llm: LLM 'm': write it as provider:model"):
        Fuse(llm="openai:m", rephrase_llm="m")
    with pytest.raises(HarnessError, match="no 'amazon' template fits"):
        RelationalRequirement(templates="amazon").run(skb, [], seed=0)
    with pytest.raises(HarnessError, match="cannot read"):
        MetaPath.parse("x", "brand ~~has_brand~~ product")


def test_stark_templates_use_the_official_relation_names() -> None:
    amazon = {"also_buy", "also_view", "has_brand", "has_category", "has_color"}
    mag = {
        "author___affiliated_with___institution",
        "paper___cites___paper",
        "paper___has_topic___field_of_study",
        "author___writes___paper",
    }
    for name, relations in (("amazon", amazon), ("mag", mag)):
        used = {hop.relation for t in TEMPLATES[name] for p in t.paths for hop in p.hops}
        assert used <= relations, used - relations
    assert len(TEMPLATES["mag"]) == 7  # the paper's Appendix A.3
    from harness_stark.testing import PRIME_NODE_TYPES, PRIME_RELATIONS

    prime = TEMPLATES["prime"]
    assert len(prime) == 28  # Appendix A.4
    hops = [h for t in prime for p in t.paths for h in p.hops] + [h for t in prime for h in t.none_of]
    assert {h.relation for h in hops} <= set(PRIME_RELATIONS)
    types = {h.node_type for h in hops} | {p.slot_type for t in prime for p in t.paths} | {t.answer_type for t in prime}
    assert types <= set(PRIME_NODE_TYPES)
    for template in prime:  # every slot in the text has a path, and every path a slot in the text
        assert {p.slot for p in template.paths} == set(re.findall(r"<([^>]+)>", template.text)), template.name


def test_negated_and_two_path_templates_on_a_hand_made_graph() -> None:
    """Diseases with a phenotype absent and no indicated drug; drugs sharing a disease and synergy."""
    names = ["fever", "flu", "cold", "measles", "aspirin", "ibuprofen", "paracetamol"]
    types = [2, 0, 0, 0, 1, 1, 1]  # effect/phenotype, disease, drug
    edges = [  # (src, dst, relation)
        (0, 1, 0),
        (0, 2, 0),
        (0, 3, 0),  # fever: phenotype absent in flu, cold, measles
        (4, 1, 1),  # aspirin indicated for flu
        (4, 2, 1),
        (5, 2, 1),
        (6, 2, 1),  # all three indicated for cold
        (4, 5, 2),
        (4, 6, 2),  # aspirin synergises with ibuprofen and paracetamol
    ]
    skb = SKB(
        name="mini-prime",
        node_type_names=["disease", "drug", "effect/phenotype"],
        node_types=np.array(types),
        names=names,
        fields=[{}] * len(names),
        edge_types=[EdgeType("phenotype absent"), EdgeType("indication"), EdgeType("synergistic interaction")],
        src=np.array([e[0] for e in edges]),
        dst=np.array([e[1] for e in edges]),
        edge_type=np.array([e[2] for e in edges]),
    )  # relations without an inverse label are symmetric: followed both ways
    by_name = {t.name: t for t in TEMPLATES["prime"]}
    assert candidates(skb, by_name["ep>disease!drug"], {"effect/phenotype": 0}).tolist() == [3]  # measles only
    both = by_name["drug>disease>drug&drug"]
    assert candidates(skb, both, {"drug": 4}).tolist() == [5, 6]
    drafts = RelationalRequirement(templates="prime", n=3).run(skb, [], seed=0)
    for draft in drafts:
        record = draft.provenance["relational"]
        assert record["template"] in ("ep>disease!drug", "drug>disease>drug&drug")
        assert record["gold"] in draft.answer_ids


class Scripted(LLM):
    """A deterministic provider registered like a third party's, counting its calls."""

    name = "scripted"
    calls = 0

    def complete(self, prompt, max_tokens=256, temperature=0.0):  # type: ignore[no-untyped-def]
        Scripted.calls += 1
        text = prompt[-1].content
        if "short properties" in text:
            answer = "1. free software\n2. command line\n"
        elif text.startswith("Write one search request"):
            answer = "Request: " + text.split("asking for: ")[1].split(" It must")[0] + " Free software, command line."
        elif text.startswith("Rewrite this search request"):
            answer = f'"I work in a terminal all day. {text.split(chr(10) * 2)[1]}"'
        else:  # a verifier: yes when the document mentions "command"
            answer = "Yes." if "command" in text.split("Does this")[0].lower() else "No"
        return Completion(answer, 50, 8, 0.0)


def test_synthesize_writes_an_official_query_set_that_runs(
    tmp_path: Path, session_cache: Path, skb: SKB, plugins: Any
) -> None:
    plugins.register(provider_plugin(Scripted), "scripted-llm")
    out = tmp_path / "synth"
    args = ["synthesize", "-d", "debian", "--n", "6", "--llm", "scripted:m", "--max-candidates", "8", "--out", str(out)]
    result = invoke(*args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    calls = Scripted.calls
    assert calls > 0

    root = out / "qa" / "debian"
    queries = load_stark_layout(root)
    assert sorted(queries.split_names) == ["test", "train", "val"]
    everything = [q for name in queries.split_names for q in queries.split(name)]
    provenance = [json.loads(line) for line in (root / "provenance.jsonl").read_text().splitlines()]
    assert len(everything) == len(provenance) >= 1
    for query, record in zip(sorted(everything, key=lambda q: q.id), provenance, strict=True):
        assert query.text.startswith("I work in a terminal") and record["textual"]["properties"]
        assert record["fuse"]["used"] == "rephrased"
        assert all(a["name"] in query.text for a in record["relational"]["anchors"].values())
        gold = record["relational"]["gold"]
        assert gold in query.answer_ids and record["filter"]["verifiers"] == ["scripted:m"]
        for node in query.answer_ids:  # answers = gold + the candidates every verifier accepted
            assert node == gold or "command" in skb.document(node)[:1000].lower()
    summary = json.loads((root / "synthesis.json").read_text())
    assert summary["queries"] == len(everything) and 0 <= summary["gold_pass_rate"] <= 1

    again = invoke(*args, catch_exceptions=False)  # resumes: every stage is on disk
    assert again.exit_code == 0 and Scripted.calls == calls

    # The synthesized set runs like any other: BM25 over the Debian SKB, a full ranking per query.
    from harness_bm25.retriever import BM25Retriever

    retriever = BM25Retriever()
    retriever.build(skb, BuildContext(cache_dir=session_cache))
    rankings = retriever.search(everything, 10)
    assert len(rankings) == len(everything) and all(len(r.ids) == 10 for r in rankings)
    assert all(len(q.answer_ids) >= 1 for q in everything)


def test_fuse_falls_back_when_the_llm_drops_the_entities(skb: SKB, plugins: Any) -> None:
    class Forgetful(LLM):
        name = "forgetful"

        def complete(self, prompt, max_tokens=256, temperature=0.0):  # type: ignore[no-untyped-def]
            return Completion("I'm here to help with your Debian package requests.", 10, 9, 0.0)

    drafts = RelationalRequirement(templates="debian", n=2).run(skb, [], seed=3)
    for d in drafts:
        d.provenance["textual"] = {"properties": ["free software"]}
    plugins.register(provider_plugin(Forgetful), "forgetful-llm")
    stage = Fuse(llm="forgetful:m")
    fused = stage.run(skb, drafts, seed=3)
    for before, after in zip(drafts, fused, strict=True):
        assert after.provenance["fuse"]["used"] == "template"
        assert after.text == f"{before.text} It should have: free software."


# Texts SmolLM2-135M wrote in the fuse stage of the Debian train split's synthesis runs.
DRIFTED = [
    ("Which packages are maintained by David Rabel?", ["David Rabel"], "David Rabel,", "relation"),
    ("Which packages does task-arabic-desktop recommend?", ["task-arabic-desktop"], "Task-arabic-desktop:", "relation"),
    (
        "Which packages does ne recommend?",
        ["ne"],
        "I'm sorry for the confusion, but as a Debian user, I'm designed to help: ne recommends docs.",
        "task",
    ),
    (
        "Which packages does ruby-json-jwt depend on?",
        ["ruby-json-jwt"],
        "ruby-json-jwt depends on aes-key-wrap-aes-key-wrap-aes-key-wrap-aes-key-wrap",
        "repeats",
    ),
    (
        "Which packages in the net section does Alexander Wirt maintain?",
        ["net", "Alexander Wirt"],
        "Which net packages does Alexander Wirt maintain for high availability?",
        "section",
    ),
]


@pytest.mark.parametrize(("requirement", "names", "text", "why"), DRIFTED)
def test_a_request_that_lost_its_requirement_is_refused(requirement: str, names: list, text: str, why: str) -> None:
    from harness_synthesis.requests import request_problem

    problem = request_problem(text, requirement, names)
    assert problem is not None and why in problem, problem


@pytest.mark.parametrize(
    ("requirement", "names", "text"),
    [
        (
            "Which packages are maintained by David Rabel?",
            ["David Rabel"],
            "I use Vim a lot: which of David Rabel's maintained packages reopens files at the last edit position?",
        ),
        (
            "Which packages in the net section depend on a package maintained by Debian QA Group?",
            ["net", "Debian QA Group"],
            "For my router I need tools in the net section that depend on something Debian QA Group maintains.",
        ),
        ("Which papers are cited by the paper Deep Sets?", ["Deep Sets"], "Which papers does Deep Sets cite on sets?"),
        # "there is" / "there's" are not the task talk "here is" / "here's"
        (
            "Which packages are maintained by David Rabel?",
            ["David Rabel"],
            "There's a package David Rabel maintains for Vim; is there one that reopens files?",
        ),
    ],
)
def test_a_request_that_keeps_its_requirement_passes(requirement: str, names: list, text: str) -> None:
    from harness_synthesis.requests import request_problem, template_request

    assert request_problem(text, requirement, names) is None
    assert request_problem(template_request(requirement, ["free software"]), requirement, names) is None


DOCUMENT = (
    "- package: ne\n- summary: a nice text editor\n- description: This package contains the nice editor.\n"
    "- version: 1.3.1+dfsg-5"
)


@pytest.mark.parametrize(
    ("prop", "holds", "problem"),
    [
        ("summary: a nice text editor", True, None),
        ("Summary: A NICE text editor.", True, None),  # case, end punctuation
        ("a nice text", True, None),
        ("a nice tex", False, None),  # cut mid-word: holds for nothing
        ("version: 1.3.1+dfsg-5", True, None),
        ("version: 1.3.1", False, None),  # another version than 1.3.1+dfsg-5
        ("version: 1.3.1+dfsg", False, None),
        (".1+dfsg-5", False, None),  # the tail of a longer token
        ("version: 1", False, "too short to ask for"),
        ("description", True, "only a field label"),
        ("description: This package contains", True, "only words every document has"),
        ("package: ne", True, "names the node (package)"),
        ("homepage: https://ne.di.unimi.it/", False, "names the node (homepage)"),
    ],
)
def test_the_literal_judge_and_what_a_property_may_be(prop: str, holds: bool, problem: str | None) -> None:
    from harness_synthesis.requests import property_holds, property_problem

    assert property_holds(DOCUMENT, prop) is holds
    assert property_problem(prop, ["package"]) == problem


class Copying(LLM):
    """Lists properties as a small model does: document lines copied (summary, version), one
    invented, and a "package:" line that names the node; it must never be asked anything else."""

    name = "copying"
    calls = 0

    def complete(self, prompt, max_tokens=256, temperature=0.0):  # type: ignore[no-untyped-def]
        Copying.calls += 1
        text = prompt[-1].content
        assert "short properties" in text, "only the textual stage may ask an LLM"
        lines = [line.removeprefix("- ") for line in text.split("\n\nList")[0].splitlines()]
        wanted = [line for line in lines if line.startswith(("package:", "summary:", "version:"))]
        wanted.insert(1, "summary: does everything you ever wanted")  # invented: the document does not say it
        return Completion("\n".join(f"{i + 1}. {line}" for i, line in enumerate(wanted)), 50, 8, 0.0)


def test_literal_judging_and_template_requests_give_exact_answers_without_asking_an_llm(
    tmp_path: Path, skb: SKB, plugins: Any
) -> None:
    from harness_synthesis.requests import property_holds

    plugins.register(provider_plugin(Copying), "copying-llm")
    out = tmp_path / "synth"
    args = ["synthesize", "-d", "debian", "--n", "8", "--llm", "copying:m", "--max-candidates", "30"]
    args += ["--request", "template", "--judge", "literal", "--seed", "4", "--out", str(out)]
    result = invoke(*args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    root = out / "qa" / "debian"
    queries = {q.id: q for name in load_stark_layout(root).split_names for q in load_stark_layout(root).split(name)}
    provenance = [json.loads(line) for line in (root / "provenance.jsonl").read_text().splitlines()]
    assert provenance and 0 < Copying.calls <= 8  # one property prompt per draft, nothing else
    for record in provenance:
        properties = record["textual"]["properties"]
        assert properties and not any(p.startswith("package:") for p in properties)  # names the answer
        assert "summary: does everything you ever wanted" not in properties  # not in the gold's text
        query = queries[record["id"]]
        assert query.text.endswith(f"It should have: {'; '.join(properties)}.") and record["fuse"]["used"] == "template"
        candidates = [int(n) for n in record["filter"]["verdicts"]]
        holding = {n for n in candidates if all(property_holds(skb.document(n), p) for p in properties)}
        assert set(query.answer_ids) == holding and record["relational"]["gold"] in holding
        assert record["filter"]["verifiers"] == ["literal"]


def test_fuse_falls_back_when_the_llm_keeps_the_names_but_loses_the_relation(skb: SKB, plugins: Any) -> None:
    class Terse(LLM):
        name = "terse"

        def complete(self, prompt, max_tokens=256, temperature=0.0):  # type: ignore[no-untyped-def]
            text = prompt[-1].content  # echo the slot entities only, as SmolLM2 sometimes does
            names = [a for a in self.names if a in text]
            return Completion(", ".join(names) + ",", 10, 9, 0.0)

    drafts = RelationalRequirement(templates="debian", n=3).run(skb, [], seed=5)
    Terse.names = [a["name"] for d in drafts for a in d.provenance["relational"]["anchors"].values()]
    for d in drafts:
        d.provenance["textual"] = {"properties": ["free software"]}
    plugins.register(provider_plugin(Terse), "terse-llm")
    fused = Fuse(llm="terse:m").run(skb, drafts, seed=5)
    assert [f.provenance["fuse"]["used"] for f in fused] == ["template"] * len(drafts)
    assert [f.text for f in fused] == [f"{d.text} It should have: free software." for d in drafts]


def test_the_shipped_smollm2_set_loads_and_matches_its_provenance(skb: SKB) -> None:
    root = REPO / "plugins/harness-synthesis/examples/debian-smollm2/qa/debian"
    queries = load_stark_layout(root)
    everything = {q.id: q for name in queries.split_names for q in queries.split(name)}
    provenance = {row["id"]: row for row in map(json.loads, (root / "provenance.jsonl").read_text().splitlines())}
    assert set(everything) == set(provenance) and len(everything) >= 20
    for qid, query in everything.items():
        record = provenance[qid]
        assert query.text == record["query"] and record["relational"]["gold"] in query.answer_ids
        assert set(query.answer_ids) <= {int(n) for n in record["filter"]["verdicts"]}
        assert all(skb.node_type(n) == "package" for n in query.answer_ids)
    summary = json.loads((root / "synthesis.json").read_text())
    assert summary["queries"] == len(everything) and summary["config"]["llm"] == "openai:smollm2"
