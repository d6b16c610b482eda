"""The natural-language Debian v2 train split: drafts, the text checker, merging (harness_debian.train_nl)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import SKB, HarnessError
from harness_debian.queries_v2 import Graph
from harness_debian.train_files import templated_dir, train_splits
from harness_debian.train_nl_check import content, text_problems
from harness_debian.train_nl_core import default_root, draft_all, evaluation
from harness_debian.train_nl_merge import merge, shipped_problems

DRAFT = {
    "where": {"in_section": "games", "depends": {"maintained_by": "Debian Python Team"}},
    "properties": ["solitaire card games"],
    "answers": [{"id": 1, "name": "pysolfc"}],
}
DOCUMENTS = ["- package: pysolfc\n- summary: collection of more than 1000 solitaire card games\n- description: Play."]
GOOD = (
    "I'd like to play patience on my desktop: which solitaire card games in the games section "
    "are built on something the Debian Python Team maintains?"
)


def test_a_text_that_states_the_whole_requirement_passes() -> None:
    assert text_problems(GOOD, DRAFT, DOCUMENTS, [(7, content("Which arcade games run on Linux consoles?"))]) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            GOOD.replace("the Debian Python Team", "the Python folks"),
            "does not name the maintainer 'Debian Python Team'",
        ),
        (GOOD.replace("games section", "games collection"), "does not name the section 'games'"),
        (GOOD.replace("are built on something", "come from"), "no word for the relation 'depends'"),
        (GOOD.replace("solitaire card games", "puzzle games"), "lost the property 'solitaire card games'"),
        ("summary: " + GOOD, "a field label ('summary:')"),
        (GOOD.replace("on my desktop", "like pysolfc"), "names its answer 'pysolfc'"),
        (
            GOOD.replace("which solitaire", "a collection of more than 1000 solitaire"),
            "copies 6+ words from a candidate's document ('collection of more than 1000 solitaire')",
        ),
    ],
)
def test_the_checker_refuses_each_defect(text: str, problem: str) -> None:
    assert any(problem in found for found in text_problems(text, DRAFT, DOCUMENTS))


def test_a_near_duplicate_of_an_evaluation_text_is_refused() -> None:
    close = GOOD.replace("I'd like to play patience on my desktop:", "Which")
    assert text_problems(GOOD, DRAFT, DOCUMENTS, [(57, content(close))]) == [
        "a near-duplicate of evaluation query 57 (Jaccard 0.69)"
    ]


@pytest.fixture(scope="module")
def shipped() -> tuple[SKB, set[int]]:
    root = default_root()
    return SKB.load(root / "skb"), {a for q in evaluation(root) for a in q.answer_ids}


def test_drafting_is_deterministic_and_its_answers_recompute(shipped: tuple[SKB, set[int]]) -> None:
    from harness_synthesis.requests import property_holds

    skb, forbidden = shipped
    drafts = draft_all(skb, forbidden, 6, seed=3)
    assert drafts == draft_all(skb, forbidden, 6, seed=3)
    assert [d["id"] for d in drafts] == list(range(200_000, 200_006))
    graph = Graph(skb)
    for draft in drafts:
        candidates = graph.candidates(draft["where"], "test")
        answers = [c for c in candidates if all(property_holds(skb.document(c), p) for p in draft["properties"])]
        assert [a["id"] for a in draft["answers"]] == answers and 1 <= len(answers) <= 10
        assert draft["gold"]["id"] in answers and not set(answers) & forbidden


def test_the_shipped_drafts_are_mostly_two_hop() -> None:
    from harness_debian.train_nl_core import load_drafts

    drafts = load_drafts(default_root() / "train-nl")
    assert len(drafts) >= 2000
    assert sum(d["hops"] >= 2 for d in drafts.values()) / len(drafts) >= 0.55


@pytest.mark.slow
def test_merge_ships_train_and_keeps_the_templated_split_as_train_templated(tmp_path: Path) -> None:
    """A copy of data/v2 with two written texts: merge writes train/, moves the templated split
    to train-templated/, both names resolve, and the cards render and check."""
    from harness_debian.train_card import problems, write_card

    shipped_root = default_root()
    root = tmp_path / "v2"
    shutil.copytree(shipped_root, root, ignore=shutil.ignore_patterns("__pycache__", "texts"))
    # back to before the shipped merge: the templated split in train/, no natural-language one
    shutil.rmtree(root / "train")
    (root / "train-templated").rename(root / "train")
    templated = train_splits(shipped_root)["train-templated"]
    (root / "train-nl" / "texts").mkdir()
    texts = (shipped_root / "train-nl" / "texts" / "part-01.yaml").read_text(encoding="utf-8")
    (root / "train-nl" / "texts" / "part-01.yaml").write_text(texts.split("- id: 200018")[0], encoding="utf-8")
    stats = merge(root)
    assert stats["queries"] == 2 and stats["kind"] == "natural-language"
    splits = train_splits(root)
    assert [q.id for q in splits["train"]] == [200_000, 200_009]
    assert splits["train-templated"] == templated and templated_dir(root) == root / "train-templated"
    skb = SKB.load(root / "skb")
    assert shipped_problems(root, skb, evaluation(root)) == []
    assert write_card(root) and problems(root) == []
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "`train` holds **2 natural-language queries**" in readme
    assert "`train-templated` holds **3,130 synthesized queries**" in readme
    with pytest.raises(HarnessError, match=r"train-templated .*exists"):
        (root / "train").rename(root / "train-moved")
        shutil.copytree(root / "train-templated", root / "train")
        merge(root)
    # an edited answer set no longer recomputes
    lines = (root / "train-nl" / "drafts" / "part-01.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["answers"].append({"id": 1, "name": "x"})
    (root / "train-nl" / "drafts" / "part-01.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    from harness_debian.train_nl_core import check

    assert (
        "query 200000: its answers are not what the SKB gives (candidates and properties)" in check(root, "01", True)[0]
    )
