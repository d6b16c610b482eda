"""The Debian v2 ``train`` split: queries synthesized by harness-synthesis, merged and checked.

Each synthesis run (``harness synthesize -d debian --exclude-answers-of val --exclude-answers-of
test …``, one seed per run) writes ``OUT/qa/debian/provenance.jsonl`` and ``synthesis.json``.
This module merges runs into ``data/v2/train/``::

    python -m harness_debian.train_split RUN_DIR [RUN_DIR ...] [--out DIR]

(after a merge into the shipped ``data/v2/train``, ``python -m harness_debian.train_card``
re-renders the data card's "Train split" section) and ``train_files.train_queries`` reads them
back for ``qa/`` (``qa_v2.extra_splits``). Every record goes through the same gate, whatever the
run's options were:

* **properties**: kept only if usable (not one naming the node, "package: …", "homepage: …")
  and literally in the gold's document (``harness_synthesis.requests.property_holds``: a
  small model also invents properties, or echoes the prompt); a record left with none is
  dropped;
* **answers**: the gold and every relational candidate whose document has every kept
  property — the literal judge. A verifier LLM's verdicts stay in the provenance, but do not
  decide: SmolLM2-135M accepts wrong candidates more often than the gold;
* **text**: the LLM's request if it still states the requirement and exactly the kept
  properties (``request_problem``), else the template with the kept properties appended;
* a gold that answers an evaluation query (val or test) is dropped (the synthesis excludes
  those golds; the evaluation set may have changed since), so no (template, gold) pair of an
  evaluation query is in the train split; duplicates (the same template, slot entities and
  gold, or the same text) keep the first; ids are renumbered from 100000, in run order.

``queries.csv`` (STaRK's columns), ``provenance.jsonl.xz`` (every stage's record per query,
and what the gate changed) and ``statistics.json`` (counts, templates, hops, answers per
query, how the verifier LLM compared with the literal judge, what was dropped or replaced and
why, the runs' configurations) are written whole, replacing an earlier split.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from harness import SKB, HarnessError, Query
from harness_debian.train_files import read_split, templated_dir, write

FIRST_ID = 100_000
_ECHO = re.compile(r"short propert|taken from the text|a few words|one per line", re.IGNORECASE)


def _synthesis() -> Any:
    try:
        import harness_synthesis.requests as requests
    except ImportError:
        raise HarnessError(
            "merging a train split checks records with harness-synthesis: "
            "pip install 'stark-harness-debian[train-split]'"
        ) from None
    return requests


def _templates() -> list[Any]:
    """The Debian templates of harness-synthesis (what the runs were made with)."""
    _synthesis()
    from harness_synthesis.templates import TEMPLATES

    return TEMPLATES["debian"]


def _same_skb(record: dict[str, Any], skb: SKB, templates: list[Any], where: str) -> None:
    """The record's relational candidates, recomputed on ``skb``, are the ones it was judged
    on: a run made on another SKB (another snapshot, another version) is refused."""
    from harness_synthesis.templates import candidates

    relational = record["relational"]
    template = {t.name: t for t in templates}.get(relational["template"])
    recorded = sorted(int(n) for n in record.get("filter", {}).get("verdicts", {}))
    if template is None or not recorded:
        raise HarnessError(f"{where}: query {record['id']}: no template {relational['template']!r} or no candidates")
    anchors = {slot: int(a["id"]) for slot, a in relational["anchors"].items()}
    found = sorted(int(n) for n in candidates(skb, template, anchors))
    if found != recorded:
        raise HarnessError(
            f"{where}: query {record['id']} was judged on candidates {recorded[:5]}… but SKB {skb.fingerprint} gives "
            f"{found[:5]}…: the run was made on another SKB"
        )


def _requirement(relational: dict[str, Any]) -> tuple[str, list[str]]:
    """The filled template (the relational stage's text) and the slot entities' names."""
    text = relational["template_text"]
    for slot, anchor in relational.get("anchors", {}).items():
        text = text.replace(f"<{slot}>", anchor["name"])
    return text, [a["name"] for a in relational.get("anchors", {}).values()]


def _properties(record: dict[str, Any], skb: SKB) -> tuple[list[str], str | None]:
    """The record's usable properties that the gold's document says, or why there are none."""
    requests = _synthesis()
    properties = record.get("textual", {}).get("properties", [])
    if any(_ECHO.search(p) for p in properties):
        return [], "a property that echoes the prompt"
    document = skb.document(int(record["relational"]["gold"]))
    usable = list(dict.fromkeys(p for p in properties if requests.property_problem(p, skb.node_type_names) is None))
    kept = [p for p in usable if requests.property_holds(document, p)]
    if not kept:
        return [], "no property the gold's text says" if usable else "only properties naming a node"
    return kept, None


def _stated(record: dict[str, Any], properties: list[str]) -> tuple[str, str]:
    """The first of the LLM's rephrased and fused texts that still states the requirement and
    the kept ``properties``, else the template with them: (text, which)."""
    requests = _synthesis()
    requirement, names = _requirement(record["relational"])
    fuse = record.get("fuse", {})
    if properties == record["textual"]["properties"]:
        for which in ("rephrased", "fused"):
            text = record["query"] if fuse.get("used") == which else requests.clean_request(fuse.get(which, ""))
            if which in fuse and not requests.request_problem(text, requirement, names, properties):
                return text, which
    return requests.template_request(requirement, properties), "template"


def _answers(record: dict[str, Any], properties: list[str], skb: SKB) -> list[int]:
    """The gold and every relational candidate whose document has every property."""
    holds = _synthesis().property_holds
    gold = int(record["relational"]["gold"])
    candidates = [int(n) for n in record.get("filter", {}).get("verdicts", {})]  # every relational candidate
    return sorted({gold, *(n for n in candidates if all(holds(skb.document(n), p) for p in properties))})


def merge(
    runs: list[Path], skb: SKB, evaluation: list[Query], templates: list[Any] | None = None
) -> tuple[list[Query], list[dict[str, Any]], dict]:
    """The train queries, their provenance and the statistics, from synthesis run directories
    made with ``templates`` (harness-synthesis's Debian set by default)."""
    templates = templates if templates is not None else _templates()
    forbidden = {a for q in evaluation for a in q.answer_ids}
    queries: list[Query] = []
    provenance: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    replaced: Counter[str] = Counter()  # LLM texts that no longer stated the requirement
    verifier = Counter[str]()  # the verifier LLM's verdicts against the literal judge's
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
            if gold is None:
                dropped["no gold answer"] += 1
                continue
            if gold in forbidden:
                dropped["the gold answers an evaluation query"] += 1
                continue
            _same_skb(record, skb, templates, f"{root}/provenance.jsonl")
            properties, problem = _properties(record, skb)
            if problem:
                dropped[problem] += 1
                continue
            text, which = _stated(record, properties)
            answers = _answers(record, properties, skb)
            gate = {"properties": properties, "text": which, "answers": answers, "llm_answers": record["answer_ids"]}
            relational = record["relational"]
            anchors = sorted((slot, a["id"]) for slot, a in relational["anchors"].items())
            requirement = json.dumps([relational["template"], anchors, relational["gold"]])
            normal = " ".join(text.lower().split())
            if requirement in seen_requirements or normal in seen_texts:
                dropped["duplicate"] += 1
                continue
            seen_requirements.add(requirement)
            seen_texts.add(normal)
            _compare(record, answers, verifier)
            if which != record.get("fuse", {}).get("used"):
                replaced[f"{record.get('fuse', {}).get('used')} → {which}"] += 1
            new_id = FIRST_ID + len(queries)
            queries.append(Query(new_id, text, tuple(answers)))
            provenance.append(
                {
                    **record,
                    "id": new_id,
                    "query": text,
                    "answer_ids": answers,
                    "gate": gate,
                    "source": {"run": run.name, "id": record["id"]},
                }
            )
    if not queries:
        raise HarnessError("no usable synthesized query in " + ", ".join(str(r) for r in runs))
    return (
        queries,
        provenance,
        _statistics(queries, provenance, dropped, replaced, verifier, configs, skb.fingerprint, templates),
    )


def _compare(record: dict[str, Any], answers: list[int], verifier: Counter[str]) -> None:
    """Count how the verifier LLM's verdicts agree with the literal judge (gold apart)."""
    gold = int(record["relational"]["gold"])
    for node, votes in record.get("filter", {}).get("verdicts", {}).items():
        llm = [v for v, judge in zip(votes, record["filter"].get("verifiers", []), strict=False) if judge != "literal"]
        if not llm or int(node) == gold:
            continue
        said = "accepted" if all(v is True for v in llm) else "rejected"
        verifier[f"{said} {'an answer' if int(node) in answers else 'a non-answer'}"] += 1


def _statistics(
    queries: list[Query],
    provenance: list[dict[str, Any]],
    dropped: Counter[str],
    replaced: Counter[str],
    verifier: Counter[str],
    configs: list[dict[str, Any]],
    skb_fingerprint: str,
    known: list[Any],
) -> dict[str, Any]:
    from harness import QuerySet, query_set_statistics

    hops = {t.name: max(len(p.hops) for p in t.paths) for t in known}
    templates = Counter(p["relational"]["template"] for p in provenance)
    passed = [p["filter"]["gold_passed"] for p in provenance if "llm" in str(p.get("filter", {}).get("judge", "llm"))]
    return {
        "queries": len(queries),
        "two_hop_share": round(sum(n for t, n in templates.items() if hops.get(t, 1) >= 2) / len(queries), 4),
        "templates": dict(sorted(templates.items())),
        "answers_per_query": round(sum(len(q.answer_ids) for q in queries) / len(queries), 3),
        "text_used": dict(Counter(p["gate"]["text"] for p in provenance)),
        "text_replaced": dict(replaced),
        "dropped": dict(dropped),
        # the verifier LLM, in the runs that asked one (judge llm), on the kept queries: how often
        # it accepted their gold, and its verdicts on the other candidates against the literal judge
        "verifier_llm": {
            "queries": len(passed),
            "gold_pass_rate": round(sum(passed) / len(passed), 4) if passed else None,
            **verifier,
        },
        "only_property_a_version": sum(
            all(p.lower().startswith("version:") for p in q["gate"]["properties"]) for q in provenance
        ),
        "statistics": query_set_statistics(QuerySet("debian-train", {"train": queries}))["all"],
        "skb_fingerprint": skb_fingerprint,
        "runs": configs,
    }


def check(root: Path, skb: SKB, evaluation: list[Query]) -> list[str]:
    """Problems of the train split shipped under ``root`` (empty: none): it was merged on this
    SKB, its queries are their provenance's, every answer set is its gold and the candidates
    having its properties (the literal judge, re-run), and no gold answers an evaluation query
    (the evaluation set may have changed since the merge). The templated split is checked where
    it is (``train/`` or ``train-templated/``); a natural-language ``train/`` is
    :func:`harness_debian.train_nl_merge.shipped_problems`'s (``qa_v2.train_problems`` runs both)."""
    directory = templated_dir(root)
    if directory is None or not (directory / "queries.csv").exists():
        return []
    name = directory.name
    queries, records, stats, problems = read_split(directory, skb)
    if [(q.id, q.text, list(q.answer_ids)) for q in queries] != [
        (r["id"], r["query"], r["answer_ids"]) for r in records
    ]:
        problems.append(f"{name}: queries.csv is not its provenance's queries")
    forbidden = {a: q.id for q in evaluation for a in q.answer_ids}
    for record in records:
        gold = int(record["relational"]["gold"])
        if record["answer_ids"] != _answers(record, record["gate"]["properties"], skb):
            problems.append(f"{name}: query {record['id']}: its answers are not the candidates having its properties")
        if gold not in record["answer_ids"]:
            problems.append(f"{name}: query {record['id']}: its gold {gold} is not an answer")
        if gold in forbidden:
            problems.append(f"{name}: query {record['id']}: its gold {gold} answers evaluation query {forbidden[gold]}")
        if record["id"] < FIRST_ID:
            problems.append(f"{name}: query {record['id']}: ids start at {FIRST_ID}")
    if stats.get("queries") != len(queries):
        problems.append(
            f"{name}: statistics.json counts {stats.get('queries')} queries, queries.csv has {len(queries)}"
        )
    return problems


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
    if args.out.resolve() == (root / "train").resolve():  # the shipped split: its data card follows
        # (the card module reads this one's statistics: run as its own command, no import cycle)
        print(f"now rewrite its data card: python -m harness_debian.train_card ({root / 'README.md'})")


if __name__ == "__main__":
    main()
