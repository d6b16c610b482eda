"""Merging synthesized runs into the Debian v2 train split (harness_debian.train_split)."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from harness import HarnessError, Query
from harness.testing import tiny_skb
from harness_debian.queries_v2 import extra_splits
from harness_debian.train_split import FIRST_ID, merge, train_queries, write


def _record(
    qid: int, query: str, gold: int, answers: list[int], properties: list[str], candidates: tuple = (), **anchors: Any
) -> dict:
    return {
        "id": qid,
        "query": query,
        "answer_ids": answers,
        "relational": {
            "template": "brand>product",
            "template_text": "Which products are made by <brand>?",
            "anchors": {slot: {"id": node, "name": name} for slot, (node, name) in anchors.items()},
            "gold": gold,
            "candidates": len(answers),
        },
        "textual": {"properties": properties},
        "fuse": {"fused": query, "rephrased": query, "used": "rephrased"},
        # the verifier LLM accepted exactly ``answers`` among the candidates
        "filter": {
            "gold_passed": gold in answers,
            "verifiers": ["llm"],
            "verdicts": {str(n): [n in answers] for n in sorted({gold, *answers, *candidates})},
        },
    }


def _run(directory: Path, records: list[dict]) -> Path:
    root = directory / "qa" / "tiny"
    root.mkdir(parents=True)
    (root / "provenance.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "synthesis.json").write_text(json.dumps({"config": {"seed": 1}}))
    return directory


def test_runs_merge_into_a_train_split_with_exact_answers_and_stated_requirements(tmp_path: Path) -> None:
    skb = tiny_skb()
    good = _record(0, "A kettle made by Acme that whistles?", 1, [1], ["whistles"], brand=(5, "Acme"))
    invented = _record(1, "Something made by Acme: zzzz", 0, [0], ["solar powered"], brand=(5, "Acme"))
    echo = _record(5, "Acme made it", 0, [0], ["a few words each, taken from the text"], brand=(5, "Acme"))
    named = _record(6, "Acme made it", 0, [0], ["product: red kettle"], brand=(5, "Acme"))
    # the verifier accepted a candidate that does not boil water and rejected one that is a kettle
    unnamed = _record(2, "A red kettle that boils water fast", 0, [0, 1], ["boils water"], brand=(5, "Acme"))
    missed = _record(7, "Which Acme kettles?", 1, [1], ["kettle"], candidates=(0, 3), brand=(5, "Acme"))
    missed["relational"]["template"] = "brand>product>similar"  # not the same requirement as ``good``
    same = {**good, "id": 3}
    other = _record(4, "A Glöbex teapot for green tea", 2, [2, 3], ["green tea"], brand=(6, "Glöbex"))
    first = _run(tmp_path / "a", [good, invented, echo, named, unnamed, missed])
    second = _run(tmp_path / "b", [same, other])
    queries, provenance, stats = merge([first, second], skb, [Query(1, "copper pot", (4,))])
    assert [q.id for q in queries] == [FIRST_ID + i for i in range(4)]
    # Answers: the gold and every candidate whose document says every property, whatever the
    # verifier said. A text that lost the requirement (the slot entity, the relation "made",
    # a property) is replaced by the template, which states it with the properties.
    assert [(q.text, q.answer_ids) for q in queries] == [
        (good["query"], (1,)),
        ("Which products are made by Acme? It should have: boils water.", (0,)),
        ("Which products are made by Acme? It should have: kettle.", (0, 1)),
        ("Which products are made by Glöbex? It should have: green tea.", (2,)),
    ]
    assert provenance[1]["gate"] == {
        "properties": ["boils water"],
        "text": "template",
        "answers": [0],
        "llm_answers": [0, 1],
    }
    assert provenance[1]["fuse"] == unnamed["fuse"]  # what the stage did stays on record
    assert stats["text_replaced"] == {"rephrased → template": 3}
    assert stats["text_used"] == {"rephrased": 1, "template": 3}
    assert stats["dropped"] == {
        "no property the gold's text says": 1,
        "a property that echoes the prompt": 1,
        "only properties naming a node": 1,
        "duplicate": 1,
    }
    # the verifier, against the literal judge, on non-gold candidates
    assert stats["verifier_llm"] == {
        "gold_pass_rate": 1.0,
        "accepted a non-answer": 2,
        "rejected an answer": 1,
        "rejected a non-answer": 1,
    }
    assert stats["queries"] == 4 and stats["answers_per_query"] == round(5 / 4, 3)
    assert provenance[3]["source"] == {"run": "b", "id": 4}
    write(tmp_path / "v2" / "train", queries, provenance, stats)
    assert train_queries(tmp_path / "v2") == queries
    assert extra_splits(tmp_path / "v2") == {"train": queries}
    with lzma.open(tmp_path / "v2" / "train" / "provenance.jsonl.xz", "rt") as handle:
        assert [json.loads(line)["id"] for line in handle] == [FIRST_ID + i for i in range(4)]
    # Merging again replaces the split (it is not a cache that keeps what is there).
    write(tmp_path / "v2" / "train", queries[:1], provenance[:1], stats)
    assert train_queries(tmp_path / "v2") == queries[:1]
    assert [p.name for p in (tmp_path / "v2").iterdir()] == ["train"]


def test_a_gold_answer_of_an_evaluation_query_never_reaches_the_split(tmp_path: Path) -> None:
    leak = _record(0, "A copper pot made by Glöbex", 4, [4], ["copper pot"], brand=(6, "Glöbex"))
    fine = _record(1, "A teapot made by Glöbex for green tea", 2, [2], ["green tea"], brand=(6, "Glöbex"))
    run = _run(tmp_path / "a", [leak, fine])
    queries, _, stats = merge([run], tiny_skb(), [Query(3, "copper pot for soups", (4,))])
    assert [q.answer_ids for q in queries] == [(2,)]
    assert stats["dropped"] == {"the gold answers an evaluation query": 1}
    with pytest.raises(HarnessError, match="no usable synthesized query"):
        merge([_run(tmp_path / "b", [leak])], tiny_skb(), [Query(3, "copper pot for soups", (4,))])
