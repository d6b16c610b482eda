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


def _record(qid: int, query: str, gold: int, answers: list[int], properties: list[str], **anchors: Any) -> dict:
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
        "filter": {"gold_passed": True, "verdicts": {}},
    }


def _run(directory: Path, records: list[dict]) -> Path:
    root = directory / "qa" / "tiny"
    root.mkdir(parents=True)
    (root / "provenance.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "synthesis.json").write_text(json.dumps({"config": {"seed": 1}}))
    return directory


def test_runs_merge_into_a_train_split_without_noise_or_duplicates(tmp_path: Path) -> None:
    skb = tiny_skb()
    good = _record(0, "A kettle made by Acme that whistles?", 1, [1], ["whistles"], brand=(5, "Acme"))
    noise = _record(1, "Something made by Acme: zzzz", 0, [0], ["zzzz qqqq"], brand=(5, "Acme"))
    echo = _record(5, "Acme made it", 0, [0], ["a few words each, taken from the text"], brand=(5, "Acme"))
    unnamed = _record(2, "A red kettle that boils water fast", 0, [0, 1], ["boils water"], brand=(5, "Acme"))
    same = {**good, "id": 3}
    other = _record(4, "A Glöbex teapot for green tea", 2, [2, 3], ["green tea"], brand=(6, "Glöbex"))
    first = _run(tmp_path / "a", [good, noise, echo, unnamed])
    second = _run(tmp_path / "b", [same, other])
    queries, provenance, stats = merge([first, second], skb, [Query(1, "copper pot", (4,))])
    assert [q.id for q in queries] == [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]
    # A text that lost the requirement (the slot entity; the relation "made") is replaced by
    # the template, which states it with the properties.
    assert [(q.text, q.answer_ids) for q in queries] == [
        (good["query"], (1,)),
        ("Which products are made by Acme? It should have: boils water.", (0, 1)),
        ("Which products are made by Glöbex? It should have: green tea.", (2, 3)),
    ]
    assert provenance[1]["fuse"] == {**unnamed["fuse"], "used": "template", "rechecked": True}
    assert stats["text_replaced"] == {"rephrased → template": 2}
    assert stats["text_used"] == {"rephrased": 1, "template": 2}
    assert stats["dropped"] == {
        "a property not taken from the gold's text": 1,
        "a property that echoes the prompt": 1,
        "duplicate": 1,
    }
    assert stats["queries"] == 3 and stats["answers_per_query"] == round(5 / 3, 3)
    assert provenance[2]["source"] == {"run": "b", "id": 4}
    write(tmp_path / "v2" / "train", queries, provenance, stats)
    assert train_queries(tmp_path / "v2") == queries
    assert extra_splits(tmp_path / "v2") == {"train": queries}
    with lzma.open(tmp_path / "v2" / "train" / "provenance.jsonl.xz", "rt") as handle:
        assert [json.loads(line)["id"] for line in handle] == [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]
    # Merging again replaces the split (it is not a cache that keeps what is there).
    write(tmp_path / "v2" / "train", queries[:1], provenance[:1], stats)
    assert train_queries(tmp_path / "v2") == queries[:1]
    assert [p.name for p in (tmp_path / "v2").iterdir()] == ["train"]


def test_a_gold_answer_of_an_evaluation_query_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path / "a", [_record(0, "A copper pot by Glöbex", 4, [4], ["copper"], brand=(6, "Glöbex"))])
    with pytest.raises(HarnessError, match="query 0 has gold 4, an answer of an evaluation query"):
        merge([run], tiny_skb(), [Query(3, "copper pot for soups", (4,))])
