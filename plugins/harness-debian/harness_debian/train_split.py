"""The Debian v2 ``train`` split: queries synthesized by harness-synthesis, merged and checked.

Each synthesis run (``harness synthesize -d debian --exclude-answers-of val --exclude-answers-of
test …``, one seed per run) writes ``OUT/qa/debian/provenance.jsonl`` and ``synthesis.json``.
This module merges runs into ``data/v2/train/``::

    python -m harness_debian.train_split RUN_DIR [RUN_DIR ...] [--out DIR]

and :func:`train_queries` reads them back for ``qa/`` (``queries_v2.extra_splits``). Merging:

* a query whose gold answer answers an evaluation query (val or test) is refused — the
  synthesis excluded those golds; this checks it again, so no (template, gold) pair of an
  evaluation query can be in the train split;
* drafts the LLM stages could not use are dropped, each with its reason counted: a property
  that shares no word with the gold's document (the prompt asks for properties "taken from
  the text"; a small model sometimes emits noise), a query text that does not name every
  slot entity, a gold missing from the answers;
* duplicates (the same template, slot entities and gold, or the same text) keep the first;
* ids are renumbered from 100000, in run order, so they never meet an evaluation id.

``queries.csv`` (STaRK's columns), ``provenance.jsonl.xz`` (every stage's record per query)
and ``statistics.json`` (counts, templates, hops, answers per query, the gold pass rate of
the LLM verifier, what was dropped and why, the runs' configurations) are written atomically.
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
from collections import Counter
from pathlib import Path
from typing import Any

from harness import SKB, HarnessError, Query, atomic_dir, read_stark_csv, write_stark_csv

FIRST_ID = 100_000
TWO_HOP = {  # templates whose requirement reaches the answer through another node
    "maintainer>package>depends",
    "package>maintainer>package",
    "tag>package+maintainer>package>depends",
    "section>package+maintainer>package>depends",
    "maintainer>package+section>package<depends",
}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4}


def _problem(record: dict[str, Any], skb: SKB) -> str | None:
    """Why a synthesized query cannot be a training query, or None."""
    relational = record.get("relational", {})
    gold = relational.get("gold")
    if gold is None or gold not in record.get("answer_ids", []):
        return "gold not among the answers"
    document = _words(skb.document(int(gold)))
    properties = record.get("textual", {}).get("properties", [])
    if not properties or any(not (_words(p) & document) for p in properties):
        return "a property not taken from the gold's text"
    names = [a["name"] for a in relational.get("anchors", {}).values()]
    if not all(name.lower() in record["query"].lower() for name in names):
        return "the query does not name every slot entity"
    return None


def merge(runs: list[Path], skb: SKB, evaluation: list[Query]) -> tuple[list[Query], list[dict[str, Any]], dict]:
    """The train queries, their provenance and the statistics, from synthesis run directories."""
    forbidden = {a for q in evaluation for a in q.answer_ids}
    queries: list[Query] = []
    provenance: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    seen_requirements: set[str] = set()
    seen_texts: set[str] = set()
    configs = []
    for run in runs:
        root = run / "qa" / skb.name
        try:
            records = [json.loads(line) for line in (root / "provenance.jsonl").read_text().splitlines() if line]
            configs.append(json.loads((root / "synthesis.json").read_text())["config"])
        except (OSError, ValueError, KeyError) as exc:
            raise HarnessError(f"{root}: not a finished synthesis run ({exc})") from None
        for record in records:
            gold = record.get("relational", {}).get("gold")
            if gold in forbidden:
                raise HarnessError(
                    f"{root}/provenance.jsonl: query {record['id']} has gold {gold}, an answer of an evaluation query; "
                    "synthesize with --exclude-answers-of val --exclude-answers-of test"
                )
            problem = _problem(record, skb)
            if problem:
                dropped[problem] += 1
                continue
            relational = record["relational"]
            anchors = sorted((slot, a["id"]) for slot, a in relational["anchors"].items())
            requirement = json.dumps([relational["template"], anchors, relational["gold"]])
            text = " ".join(record["query"].lower().split())
            if requirement in seen_requirements or text in seen_texts:
                dropped["duplicate"] += 1
                continue
            seen_requirements.add(requirement)
            seen_texts.add(text)
            new_id = FIRST_ID + len(queries)
            queries.append(Query(new_id, record["query"], tuple(sorted(record["answer_ids"]))))
            provenance.append({**record, "id": new_id, "source": {"run": run.name, "id": record["id"]}})
    if not queries:
        raise HarnessError("no usable synthesized query in " + ", ".join(str(r) for r in runs))
    return queries, provenance, _statistics(queries, provenance, dropped, configs)


def _statistics(
    queries: list[Query], provenance: list[dict[str, Any]], dropped: Counter[str], configs: list[dict[str, Any]]
) -> dict[str, Any]:
    from harness import QuerySet, query_set_statistics

    templates = Counter(p["relational"]["template"] for p in provenance)
    passed = [p["filter"]["gold_passed"] for p in provenance if "filter" in p]
    return {
        "queries": len(queries),
        "two_hop_share": round(sum(n for t, n in templates.items() if t in TWO_HOP) / len(queries), 4),
        "templates": dict(sorted(templates.items())),
        "answers_per_query": round(sum(len(q.answer_ids) for q in queries) / len(queries), 3),
        "verifier_gold_pass_rate": round(sum(passed) / len(passed), 4) if passed else None,
        "text_used": dict(Counter(p.get("fuse", {}).get("used", "?") for p in provenance)),
        "dropped": dict(dropped),
        "statistics": query_set_statistics(QuerySet("debian-train", {"train": queries}))["all"],
        "runs": configs,
    }


def write(out: Path, queries: list[Query], provenance: list[dict[str, Any]], stats: dict[str, Any]) -> None:
    with atomic_dir(out) as tmp:
        write_stark_csv(tmp / "queries.csv", queries)
        with lzma.open(tmp / "provenance.jsonl.xz", "wt", encoding="utf-8", preset=9) as handle:
            for record in provenance:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        (tmp / "statistics.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")


def train_queries(root: Path) -> list[Query]:
    """The shipped train split of the v2 directory ``root`` (empty when none ships)."""
    path = root / "train" / "queries.csv"
    return read_stark_csv(path) if path.exists() else []


def main(argv: list[str] | None = None) -> None:
    from harness_debian.dataset import VERSIONS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="harness synthesize output directories")
    parser.add_argument("--out", type=Path, default=VERSIONS["2"] / "train")
    args = parser.parse_args(argv)
    from harness import load_stark_layout

    root = VERSIONS["2"]
    skb = SKB.load(root / "skb")
    shipped = load_stark_layout(root / "qa")
    evaluation = [q for split in ("val", "test") for q in shipped.split(split)]
    queries, provenance, stats = merge(args.runs, skb, evaluation)
    write(args.out, queries, provenance, stats)
    print(json.dumps({k: v for k, v in stats.items() if k not in ("runs", "statistics")}, indent=2))


if __name__ == "__main__":
    main()
