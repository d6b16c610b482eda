"""The ``test-paraphrased`` split of Debian v2: the shipped paraphrases pass their check, the check
refuses what it must, and the split's answers are exactly the test split's."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness_debian.dataset import VERSIONS, DebianDataset
from harness_debian.paraphrased import FILE, ID_OFFSET, SPLIT, Paraphrase, load_paraphrases, problems
from harness_debian.queries_v2 import load_specs, named_values

ROOT = VERSIONS["2"]


@pytest.fixture(scope="module")
def shipped() -> tuple[list[Paraphrase], dict, list[int]]:
    specs = {s.id: s for s in load_specs(ROOT / "queries.yaml")}
    test_ids = [int(line) for line in (ROOT / "qa" / "split" / "test.index").read_text().split()]
    return load_paraphrases(ROOT / FILE), specs, test_ids


def _check(paraphrases: list[Paraphrase], specs: dict, test_ids: list[int]) -> list[str]:
    return problems(paraphrases, specs, test_ids, Path(FILE))


def test_the_shipped_paraphrases_pass_the_check(shipped) -> None:
    paraphrases, specs, test_ids = shipped
    assert _check(paraphrases, specs, test_ids) == []
    assert sorted(p.id for p in paraphrases) == sorted(test_ids) and len(test_ids) == 208
    for p in paraphrases:  # every requirement described, none named, the text reworded
        assert set(p.describes) == {name for _, _, name in named_values(specs[p.id].where)}
        assert p.query.strip() != specs[p.id].query.strip()


def _one(shipped, qid: int | None = None) -> tuple[Paraphrase, dict, list[int]]:
    paraphrases, specs, test_ids = shipped
    p = next(p for p in paraphrases if qid is None or p.id == qid)
    return p, specs, test_ids


def test_a_verbatim_name_is_refused(shipped) -> None:
    p, specs, _ = _one(shipped, 2)  # Debian Games Team, game::arcade, Debian Multimedia Maintainers
    named = p.model_copy(update={"query": p.query + " Ideally from the Debian Games Team."})
    tag = p.model_copy(update={"query": p.query + " (debtags game::arcade)"})
    assert _check([named], specs, [2]) == [f"{FILE}: query 2: names the maintainer 'Debian Games Team' verbatim"]
    assert any("game::arcade" in line for line in _check([tag], specs, [2]))
    # a section in any wording, even inside a compound, unless the textual requirement says the word
    p, specs, _ = _one(shipped, 20)  # in_section: games
    games = p.model_copy(update={"query": p.query.replace("things you play", "things you play (games-section)")})
    assert any("section 'games' verbatim" in line for line in _check([games], specs, [20]))


def test_a_missing_or_absent_describing_phrase_is_refused(shipped) -> None:
    p, specs, _ = _one(shipped, 2)
    missing = p.model_copy(update={"describes": {k: v for k, v in p.describes.items() if k != "game::arcade"}})
    absent = p.model_copy(update={"describes": {**p.describes, "game::arcade": "retro shoot-'em-ups"}})
    extra = p.model_copy(update={"describes": {**p.describes, "games": "things you play"}})
    assert _check([missing], specs, [2]) == [f"{FILE}: query 2: no phrase describes the tag 'game::arcade'"]
    assert "is not in the text" in _check([absent], specs, [2])[0]
    assert "which its where does not name" in _check([extra], specs, [2])[0]


def test_a_changed_id_set_or_requirement_is_refused(shipped) -> None:
    paraphrases, specs, test_ids = shipped
    found = _check(paraphrases[1:], specs, test_ids)
    assert found == [f"{FILE}: test query {paraphrases[0].id} has no paraphrase"]
    val_id = min(set(specs) - set(test_ids))
    stray = paraphrases[0].model_copy(update={"id": val_id})
    assert f"{FILE}: query {val_id} is not a test query" in _check([*paraphrases, stray], specs, test_ids)
    twice = _check([*paraphrases, paraphrases[0]], specs, test_ids)
    assert f"{FILE}: query {paraphrases[0].id} is paraphrased twice" in twice
    p, specs, _ = _one(shipped, 2)
    changed = p.model_copy(update={"where": {**p.where, "tagged": "game::puzzle"}})
    assert "the requirement changed" in _check([changed], specs, [2])[0]


def test_the_split_has_the_test_answers_and_requirements() -> None:
    queries = DebianDataset().load_queries()
    test, paraphrased = queries.split("test"), queries.split(SPLIT)
    assert [q.id + ID_OFFSET for q in test] == [q.id for q in paraphrased]
    texts = {q.id: q.text for q in test}
    for original, q in zip(test, paraphrased, strict=True):
        assert q.answer_ids == original.answer_ids and q.text != texts[original.id]
        assert q.metadata["paraphrase_of"] == original.id
        assert {k: q.metadata[k] for k in ("hops", "where", "answers")} == {
            k: original.metadata[k] for k in ("hops", "where", "answers")
        }
