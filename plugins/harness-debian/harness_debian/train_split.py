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
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from harness import SKB, HarnessError, Query, read_stark_csv, replace_dir, write_stark_csv

FIRST_ID = 100_000
TWO_HOP = {  # templates whose requirement reaches the answer through another node
    "maintainer>package>depends",
    "package>maintainer>package",
    "tag>package+maintainer>package>depends",
    "section>package+maintainer>package>depends",
    "maintainer>package+section>package<depends",
}


# Field labels: every package document has them, so they show no property.
_LABELS = frozenset("summary description version homepage section package".split())
_ECHO = re.compile(r"short propert|taken from the text|a few words|one per line", re.IGNORECASE)


def _words(text: str) -> set[str]:
    """Words of four letters or more, and numbers (a version is a property)."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4 or any(c.isdigit() for c in w)}


def _problem(record: dict[str, Any], skb: SKB) -> str | None:
    """Why a synthesized query cannot be a training query, or None."""
    relational = record.get("relational", {})
    gold = relational.get("gold")
    if gold is None or gold not in record.get("answer_ids", []):
        return "gold not among the answers"
    document = _words(skb.document(int(gold)))
    properties = record.get("textual", {}).get("properties", [])
    if any(_ECHO.search(p) for p in properties):
        return "a property that echoes the prompt"
    if not properties or any(not (_words(p) - _LABELS) & document for p in properties):
        return "a property not taken from the gold's text"
    return None


def _requirement(relational: dict[str, Any]) -> tuple[str, list[str]]:
    """The filled template (the relational stage's text) and the slot entities' names."""
    text = relational["template_text"]
    for slot, anchor in relational.get("anchors", {}).items():
        text = text.replace(f"<{slot}>", anchor["name"])
    return text, [a["name"] for a in relational.get("anchors", {}).values()]


def _stated(record: dict[str, Any]) -> tuple[str, str]:
    """The first of the LLM's rephrased and fused texts that still states the requirement,
    else the template with the properties: (text, which). Runs made before the fuse stage
    checked relations, properties and loops (fuse v2) are re-checked here with the same rule."""
    try:
        from harness_synthesis.requests import request_problem, template_request
    except ImportError:
        raise HarnessError(
            "merging a train split re-checks texts with harness-synthesis: "
            "pip install 'stark-harness-debian[train-split]'"
        ) from None

    requirement, names = _requirement(record["relational"])
    properties = record["textual"]["properties"]
    fuse = record.get("fuse", {})
    for which in ("rephrased", "fused"):
        text = record["query"] if fuse.get("used") == which else _clean(fuse.get(which, ""))
        if which in fuse and not request_problem(text, requirement, names, properties):
            return text, which
    return template_request(requirement, properties), "template"


def _clean(answer: str) -> str:
    # as the fuse stage cleans an answer: its first paragraph, without quotes or a "Request:" label
    text = answer.strip().split("\n\n")[0].strip().strip('"').strip()
    return re.sub(r"^(?:request|query|question)\s*:\s*", "", text, flags=re.IGNORECASE)


def merge(runs: list[Path], skb: SKB, evaluation: list[Query]) -> tuple[list[Query], list[dict[str, Any]], dict]:
    """The train queries, their provenance and the statistics, from synthesis run directories."""
    forbidden = {a for q in evaluation for a in q.answer_ids}
    queries: list[Query] = []
    provenance: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    rechecked: Counter[str] = Counter()  # LLM texts that no longer stated the requirement, replaced
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
            text, which = _stated(record)
            if which != record.get("fuse", {}).get("used"):
                rechecked[f"{record.get('fuse', {}).get('used')} → {which}"] += 1
                record = {**record, "query": text, "fuse": {**record["fuse"], "used": which, "rechecked": True}}
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
    return queries, provenance, _statistics(queries, provenance, dropped, rechecked, configs)


def _statistics(
    queries: list[Query],
    provenance: list[dict[str, Any]],
    dropped: Counter[str],
    rechecked: Counter[str],
    configs: list[dict[str, Any]],
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
        "text_replaced": dict(rechecked),
        "dropped": dict(dropped),
        "statistics": query_set_statistics(QuerySet("debian-train", {"train": queries}))["all"],
        "runs": configs,
    }


def write(out: Path, queries: list[Query], provenance: list[dict[str, Any]], stats: dict[str, Any]) -> None:
    """Write the split beside ``out``, then swap it in whole (an existing split is replaced)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        write_stark_csv(tmp / "queries.csv", queries)
        with lzma.open(tmp / "provenance.jsonl.xz", "wt", encoding="utf-8", preset=9) as handle:
            for record in provenance:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        (tmp / "statistics.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")
        tmp.chmod(0o755)
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already on success


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
