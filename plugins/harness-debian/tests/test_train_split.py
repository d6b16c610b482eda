"""Merging synthesized runs into the Debian v2 train split (harness_debian.train_split)."""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from harness import HarnessError, Query, read_stark_csv
from harness.testing import tiny_skb
from harness_debian.qa_v2 import extra_splits
from harness_debian.train_files import train_queries, write
from harness_debian.train_split import FIRST_ID, check, merge
from harness_synthesis.templates import Path as MetaPath
from harness_synthesis.templates import Template

MADE_BY = {5: [0, 1], 6: [2, 3, 4]}  # the tiny SKB's products of each brand: a record's candidates


def _record(qid: int, query: str, gold: int, answers: list[int], properties: list[str], **anchors: Any) -> dict:
    [(brand, _)] = anchors.values()
    return {
        "id": qid,
        "query": query,
        "answer_ids": answers,
        "relational": {
            "template": "brand>product",
            "template_text": "Which products are made by <brand>?",
            "anchors": {slot: {"id": node, "name": name} for slot, (node, name) in anchors.items()},
            "gold": gold,
            "candidates": len(MADE_BY[brand]),
        },
        "textual": {"properties": properties},
        "fuse": {"fused": query, "rephrased": query, "used": "rephrased"},
        # the verifier LLM accepted exactly ``answers`` among the candidates
        "filter": {
            "gold_passed": gold in answers,
            "verifiers": ["llm"],
            "verdicts": {str(n): [n in answers] for n in MADE_BY[brand]},
        },
    }


def _run(directory: Path, records: list[dict]) -> Path:
    root = directory / "qa" / "tiny"
    root.mkdir(parents=True)
    (root / "provenance.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "synthesis.json").write_text(json.dumps({"config": {"seed": 1}}))
    return directory


TEMPLATES = [
    Template(
        "brand>product",
        "Which products are made by <brand>?",
        "product",
        (MetaPath.parse("brand", "brand <-made_by- product"),),
    )
]


def test_runs_merge_into_a_train_split_with_exact_answers_and_stated_requirements(tmp_path: Path) -> None:
    skb = tiny_skb()
    good = _record(0, "A kettle made by Acme that whistles?", 1, [1], ["whistles"], brand=(5, "Acme"))
    invented = _record(1, "Something made by Acme: zzzz", 0, [0], ["solar powered"], brand=(5, "Acme"))
    echo = _record(5, "Acme made it", 0, [0], ["a few words each, taken from the text"], brand=(5, "Acme"))
    named = _record(6, "Acme made it", 0, [0], ["product: red kettle"], brand=(5, "Acme"))
    # the verifier rejected a candidate that has the property; the text lost the requirement
    missed = _record(2, "A red kettle that boils water fast", 0, [0], ["kettle"], brand=(5, "Acme"))
    same = {**good, "id": 3}
    # the verifier accepted a candidate that lacks the property
    other = _record(4, "A Glöbex teapot for green tea", 2, [2, 3], ["green tea"], brand=(6, "Glöbex"))
    first = _run(tmp_path / "a", [good, invented, echo, named, missed])
    second = _run(tmp_path / "b", [same, other])
    queries, provenance, stats = merge([first, second], skb, [Query(1, "copper pot", (4,))], TEMPLATES)
    assert [q.id for q in queries] == [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]
    # Answers: the gold and every candidate whose document says every property, whatever the
    # verifier said. A text that lost the requirement (the slot entity, the relation "made")
    # is replaced by the template, which states it with the properties.
    assert [(q.text, q.answer_ids) for q in queries] == [
        (good["query"], (1,)),
        ("Which products are made by Acme? It should have: kettle.", (0, 1)),
        ("Which products are made by Glöbex? It should have: green tea.", (2,)),
    ]
    assert provenance[1]["gate"] == {
        "properties": ["kettle"],
        "text": "template",
        "answers": [0, 1],
        "llm_answers": [0],
    }
    assert provenance[1]["fuse"] == missed["fuse"]  # what the stage did stays on record
    assert stats["text_replaced"] == {"rephrased → template": 2}
    assert stats["text_used"] == {"rephrased": 1, "template": 2}
    assert stats["dropped"] == {
        "no property the gold's text says": 1,
        "a property that echoes the prompt": 1,
        "only properties naming a node": 1,
        "duplicate": 1,
    }
    # the verifier, against the literal judge, on non-gold candidates
    assert stats["verifier_llm"] == {
        "queries": 3,
        "gold_pass_rate": 1.0,
        "rejected a non-answer": 2,
        "rejected an answer": 1,
        "accepted a non-answer": 1,
    }
    assert stats["queries"] == 3 and stats["answers_per_query"] == round(4 / 3, 3) and stats["two_hop_share"] == 0
    assert stats["skb_fingerprint"] == skb.fingerprint
    assert provenance[2]["source"] == {"run": "b", "id": 4}
    root = tmp_path / "v2"
    write(root / "train", queries, provenance, stats)
    assert train_queries(root) == queries
    assert extra_splits(root) == {"train": queries}
    with lzma.open(root / "train" / "provenance.jsonl.xz", "rt") as handle:
        assert [json.loads(line)["id"] for line in handle] == [FIRST_ID, FIRST_ID + 1, FIRST_ID + 2]
    assert check(root, skb, [Query(1, "copper pot", (4,))]) == []
    # the evaluation set changed after the merge: a train gold now answers an evaluation query
    assert check(root, skb, [Query(1, "teapots", (2,))]) == [
        f"train: query {FIRST_ID + 2}: its gold 2 answers evaluation query 1"
    ]
    # an answer set edited by hand is not what the literal judge gives
    tampered = [{**provenance[0], "answer_ids": [0, 1]}, *provenance[1:]]
    write(root / "train", [Query(FIRST_ID, queries[0].text, (0, 1)), *queries[1:]], tampered, stats)
    assert check(root, skb, []) == [
        f"train: query {FIRST_ID}: its answers are not the candidates having its properties"
    ]
    # Merging again replaces the split (it is not a cache that keeps what is there).
    write(root / "train", queries[:1], provenance[:1], {**stats, "queries": 1})
    assert train_queries(root) == queries[:1] and check(root, skb, []) == []
    assert [p.name for p in root.iterdir()] == ["train"]


def test_a_run_made_on_another_skb_is_refused(tmp_path: Path) -> None:
    record = _record(0, "A kettle made by Acme that whistles?", 1, [1], ["whistles"], brand=(5, "Acme"))
    record["filter"]["verdicts"] = {"1": [True]}  # judged where Acme made only the blue kettle
    with pytest.raises(HarnessError, match=r"query 0 was judged on candidates .* the run was made on another SKB"):
        merge([_run(tmp_path / "a", [record])], tiny_skb(), [], TEMPLATES)


def test_a_gold_answer_of_an_evaluation_query_never_reaches_the_split(tmp_path: Path) -> None:
    leak = _record(0, "A copper pot made by Glöbex", 4, [4], ["copper pot"], brand=(6, "Glöbex"))
    fine = _record(1, "A teapot made by Glöbex for green tea", 2, [2], ["green tea"], brand=(6, "Glöbex"))
    run = _run(tmp_path / "a", [leak, fine])
    queries, _, stats = merge([run], tiny_skb(), [Query(3, "copper pot for soups", (4,))], TEMPLATES)
    assert [q.answer_ids for q in queries] == [(2,)]
    assert stats["dropped"] == {"the gold answers an evaluation query": 1}
    with pytest.raises(HarnessError, match="no usable synthesized query"):
        merge([_run(tmp_path / "b", [leak])], tiny_skb(), [Query(3, "copper pot for soups", (4,))], TEMPLATES)


def test_the_shipped_train_split_is_exact_and_disjoint_from_the_evaluation_answers() -> None:
    """What ships: at least 3,000 queries, re-verified against the evaluation queries and the
    SKB; every answer set is exactly the relational candidates having every stated property."""
    import random

    from harness_debian.dataset import VERSIONS, DebianDataset
    from harness_synthesis.requests import property_holds

    root = VERSIONS["2"]
    dataset = DebianDataset()
    skb, queries = dataset.load_skb(), dataset.load_queries()
    train = queries.split("train-templated")  # the natural-language train split replaced it as `train`
    evaluation = [q for split in ("val", "test") for q in queries.split(split)]
    assert len(train) >= 3000 and train == read_stark_csv(root / "train-templated" / "queries.csv")
    assert check(root, skb, evaluation) == []
    with lzma.open(root / "train-templated" / "provenance.jsonl.xz", "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    stats = json.loads((root / "train-templated" / "statistics.json").read_text())
    assert stats["queries"] == len(records) == len(train) and stats["skb_fingerprint"] == skb.fingerprint
    for record in random.Random(0).sample(records, 300):
        properties = record["gate"]["properties"]
        assert (
            record["query"].endswith(f"It should have: {'; '.join(properties)}.")
            or record["gate"]["text"] != "template"
        )
        candidates = [int(n) for n in record["filter"]["verdicts"]]
        having = {n for n in candidates if all(property_holds(skb.document(n), p) for p in properties)}
        assert set(record["answer_ids"]) == having and record["relational"]["gold"] in having


def test_the_shipped_train_card_is_what_the_shipped_files_give() -> None:
    """The data card's "Train split" section is rendered from what ships, and names its command."""
    from harness_debian.dataset import VERSIONS
    from harness_debian.train_card import COMMAND, END, START, problems, render

    root = VERSIONS["2"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert problems(root) == []
    section = readme[readme.index(START) + len(START) + 1 : readme.index(END)]
    assert section == render(root)
    assert section.startswith(f"This section is generated by `{COMMAND}`")
    stats = json.loads((root / "train-templated" / "statistics.json").read_text())
    assert f"**{stats['queries']:,} synthesized queries**" in section
    assert f"{stats['only_property_a_version']:,} queries ask for a version string" in section


def test_a_changed_figure_in_the_train_card_fails_the_check(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    from harness_debian.dataset import VERSIONS
    from harness_debian.train_card import main, problems

    root = tmp_path / "v2"
    shutil.copytree(VERSIONS["2"], root, ignore=shutil.ignore_patterns("__pycache__"))
    readme = root / "README.md"
    shipped = readme.read_text(encoding="utf-8")
    assert "| **two-hop share** | 16.5% |" in shipped
    readme.write_text(shipped.replace("| **two-hop share** | 16.5% |", "| **two-hop share** | 17.5% |"))
    command = [sys.executable, "-m", "harness_debian.queries", "--version", "2", "--data", str(root), "--check"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode != 0
    assert "the train card is not what the train split gives (line 41 of the section" in result.stderr
    assert "17.5%" in result.stderr and "16.5%" in result.stderr
    assert "run python -m harness_debian.train_card" in result.stderr
    main(["--data", str(root)])  # re-renders the section, and only it
    assert readme.read_text(encoding="utf-8") == shipped
    assert subprocess.run(command, capture_output=True, text=True).returncode == 0
    # statistics.json and the provenance must agree: the card takes its figures from the latter
    stats = json.loads((root / "train-templated" / "statistics.json").read_text())
    (root / "train-templated" / "statistics.json").write_text(json.dumps({**stats, "only_property_a_version": 1}))
    assert problems(root) == [
        f"{root / 'train-templated' / 'statistics.json'}: only_property_a_version differ from what "
        "provenance.jsonl.xz gives"
    ]
    # a card without its markers cannot be checked, so it fails
    readme.write_text(shipped.replace("<!-- train-card:end -->", ""))
    assert problems(root) == [
        f"{readme}: no <!-- train-card:start --> … <!-- train-card:end --> section (once each) for the train card"
    ]
