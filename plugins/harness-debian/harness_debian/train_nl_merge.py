"""Merging the natural-language Debian v2 train split (``python -m harness_debian.train_nl merge``).

:func:`merge` writes ``data/v2/train`` (STaRK's ``queries.csv``, ``provenance.jsonl.xz``: each
query's draft, text and writer, ``statistics.json``) from every checked text, moving the
templated split to ``train-templated`` first; :func:`shipped_problems` re-verifies what ships
(``python -m harness_debian.queries --version 2 --check`` runs it).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from harness import SKB, HarnessError, Query
from harness_debian.queries_v2 import Graph
from harness_debian.train_files import read_split, write
from harness_debian.train_nl_check import content, jaccard
from harness_debian.train_nl_core import FIRST_ID, KIND, check, evaluation


def statistics_of(records: list[dict[str, Any]], evaluation_texts: list[Query]) -> dict[str, Any]:
    """The split's figures for statistics.json and the card (records: drafts with their texts)."""
    lengths = sorted(len(r["text"].split()) for r in records)
    answers = [len(r["answers"]) for r in records]
    mine = Counter(w for r in records for w in re.findall(r"[a-z0-9]+", r["text"].lower()))
    theirs = Counter(w for q in evaluation_texts for w in re.findall(r"[a-z0-9]+", q.text.lower()))
    others = [(q.id, content(q.text)) for q in evaluation_texts]
    closest = []
    for r in records:
        words = content(r["text"])
        score, qid = max((jaccard(words, theirs_), qid) for qid, theirs_ in others) if others else (0.0, None)
        closest.append({"id": r["id"], "evaluation_id": qid, "jaccard": round(score, 3)})
    closest.sort(key=lambda c: (-c["jaccard"], c["id"]))
    return {
        "kind": KIND,
        "queries": len(records),
        "two_hop_share": round(sum(r["hops"] >= 2 for r in records) / len(records), 4) if records else 0,
        "hops": dict(sorted(Counter(str(r["hops"]) for r in records).items())),
        "shapes": dict(Counter(r["shape"] for r in records).most_common()),
        "properties": dict(sorted(Counter(str(len(r["properties"])) for r in records).items())),
        "answers": {
            "mean": round(statistics.fmean(answers), 2) if answers else 0,
            "median": statistics.median(answers) if answers else 0,
            "max": max(answers, default=0),
            "per_count": dict(sorted(Counter(str(a) for a in answers).items(), key=lambda kv: int(kv[0]))),
        },
        "length_words": {
            "mean": round(statistics.fmean(lengths), 1) if lengths else 0,
            "median": statistics.median(lengths) if lengths else 0,
            "p5": lengths[int(0.05 * (len(lengths) - 1))] if lengths else 0,
            "p95": lengths[int(0.95 * (len(lengths) - 1))] if lengths else 0,
        },
        # how much of the split's vocabulary the evaluation queries use, and the reverse
        "vocabulary": {
            "words": len(mine),
            "shared_with_evaluation": round(len(set(mine) & set(theirs)) / len(mine), 4) if mine else 0,
            "evaluation_covered": round(len(set(mine) & set(theirs)) / len(theirs), 4) if theirs else 0,
        },
        "closest_to_evaluation": closest[:5],
        "mean_closest_jaccard": round(statistics.fmean(c["jaccard"] for c in closest), 3) if closest else 0,
        "writers": dict(Counter(r["by"] for r in records).most_common()),
    }


def merge(root: Path) -> dict[str, Any]:
    """Write ``root/train`` from every checked text (refusing any problem); a templated split
    there moves to ``root/train-templated`` first, kept whole."""
    problems, records = check(root, full=True)
    if problems:
        raise HarnessError(f"{len(problems)} problem(s); run python -m harness_debian.train_nl check")
    if not records:
        raise HarnessError(f"{root / 'train-nl' / 'texts'}: no written text to merge")
    skb = SKB.load(root / "skb")
    current = root / "train" / "statistics.json"
    if current.exists() and json.loads(current.read_text(encoding="utf-8")).get("kind") != KIND:
        if (root / "train-templated").exists():
            raise HarnessError(f"{root / 'train-templated'} exists: will not replace it with {root / 'train'}")
        (root / "train").rename(root / "train-templated")
    manifest = json.loads((root / "train-nl" / "drafts" / "manifest.json").read_text(encoding="utf-8"))
    stats = {**statistics_of(records, evaluation(root)), "first_id": FIRST_ID, "drafts": manifest}
    stats["skb_fingerprint"] = skb.fingerprint
    queries = [Query(r["id"], r["text"], tuple(a["id"] for a in r["answers"])) for r in records]
    write(root / "train", queries, [{k: v for k, v in r.items() if k != "part"} for r in records], stats)
    return stats


def shipped_problems(root: Path, skb: SKB, evaluation_queries: list[Query]) -> list[str]:
    """Problems of the natural-language ``root/train``: merged on this SKB, its queries are its
    provenance's, every answer set is what the SKB gives (relational candidates, literal judge)
    and no answer answers an evaluation query (the texts themselves: ``check``)."""
    from harness_synthesis.requests import property_holds

    queries, records, stats, problems = read_split(root / "train", skb)
    if [(q.id, q.text, list(q.answer_ids)) for q in queries] != [
        (r["id"], r["text"], [a["id"] for a in r["answers"]]) for r in records
    ]:
        problems.append("train: queries.csv is not its provenance's queries")
    if stats.get("queries") != len(queries):
        problems.append(f"train: statistics.json counts {stats.get('queries')} queries, queries.csv has {len(queries)}")
    graph = Graph(skb)
    forbidden = {a: q.id for q in evaluation_queries for a in q.answer_ids}
    for r in records:
        candidates = graph.candidates(r["where"], f"train: query {r['id']}: where")
        having = [c for c in candidates if all(property_holds(skb.document(c), p) for p in r["properties"])]
        if [a["id"] for a in r["answers"]] != having or not having:
            problems.append(f"train: query {r['id']}: its answers are not the candidates having its properties")
        problems += [
            f"train: query {r['id']}: answer {a} answers evaluation query {forbidden[a]}"
            for a in having
            if a in forbidden
        ]
        if r["id"] < FIRST_ID:
            problems.append(f"train: query {r['id']}: ids start at {FIRST_ID}")
    return problems
