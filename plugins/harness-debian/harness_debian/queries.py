"""Compile the hand-written Debian queries into STaRK's layout, answers computed by code.

Each query in ``data/v1/queries.yaml`` (the v1 query set) was written by looking at a package, its relations and
its text, in the manner of STaRK's human-generated queries (STaRK paper, Appendix C), and
carries the two requirements it combines:

* ``where`` — relational requirements, checked by code. Keys are relations read from the
  answer's side: ``maintained_by``, ``in_section``, ``tagged``, ``depends``, ``recommends``,
  ``suggests``, ``same_source`` (name the neighbour) and the reverse forms ``required_by``,
  ``recommended_by``, ``suggested_by`` (name the package that points at the answer).
  A value may be a list: every item must hold. Several maintainers can share a display
  name; a name matches all of them.
* ``text`` — a textual requirement as a case-insensitive regular expression over the
  package's name, summary and description (only the summary with ``field: summary``),
  applied to the packages that pass ``where``.
  The matches were then judged by reading them: ``exclude`` lists matches that do not
  satisfy the query, ``include`` lists packages that do but that the pattern misses
  (they must still pass ``where``).

``python -m harness_debian.queries`` rewrites ``data/v1/qa/`` and prints every query with its
answers for review; ``--check`` only verifies that ``data/v1/qa/`` is up to date.

``--version 2 [--data DIR]`` compiles evaluation queries v2 instead (recursive relational specs,
answers judged per relational candidate; ``--review QID``, ``--stats``), by default the shipped
``data/v2``: see :mod:`harness_debian.queries_v2` (the queries) and :mod:`harness_debian.qa_v2`
(``qa/``, every split).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from harness import SKB, Query, atomic_write, load_stark_layout, write_stark_csv

DATA = Path(__file__).parent / "data"
V1 = DATA / "v1"
V2 = DATA / "v2"
SPEC = V1 / "queries.yaml"
FORWARD = {"maintained_by", "in_section", "tagged", "depends", "recommends", "suggests", "same_source"}
REVERSE = {"required_by": "depends", "recommended_by": "recommends", "suggested_by": "suggests"}
VAL_FRACTION = 1 / 3
SPLIT_SEED = 20261121


class SpecError(ValueError):
    pass


@cache
def _names(skb: SKB) -> dict[str, np.ndarray]:
    grouped: dict[str, list[int]] = {}
    for node in range(skb.num_nodes):
        grouped.setdefault(skb.names[node], []).append(node)
    return {name: np.asarray(ids) for name, ids in grouped.items()}


def _packages_named(skb: SKB, name: str, where: str) -> int:
    ids = [i for i in _names(skb).get(name, []) if skb.node_type(int(i)) == "package"]
    if not ids:
        raise SpecError(f"{where}: no package named {name!r}")
    return int(ids[0])


def relational_matches(skb: SKB, where: dict[str, Any], context: str) -> np.ndarray:
    """Package ids satisfying every relational requirement."""
    result = skb.candidate_ids
    for key, values in where.items():
        for value in values if isinstance(values, list) else [values]:
            if key in FORWARD:
                targets = _names(skb).get(str(value))
                if targets is None:
                    raise SpecError(f"{context}: {key}: no node named {value!r}")
                # answers point at the named node
                ok = np.unique(np.concatenate([skb.neighbors(int(t), key, "in") for t in targets]))
            elif key in REVERSE:
                source = _packages_named(skb, str(value), context)
                ok = skb.neighbors(source, REVERSE[key], "out")
            else:
                raise SpecError(f"{context}: unknown requirement {key!r}")
            result = np.intersect1d(result, ok)
    return result


def _searched_text(skb: SKB, node: int, spec: dict[str, Any]) -> str:
    """The text ``text`` is matched against: name, summary and description, or only the
    summary when the query says ``field: summary``."""
    fields = skb.fields[node]
    if spec.get("field") == "summary":
        return fields["summary"]
    return f"{skb.names[node]}\n{fields['summary']}\n{fields['description']}"


def answers(skb: SKB, spec: dict[str, Any]) -> list[int]:
    context = f"query {spec.get('id')}"
    matches = relational_matches(skb, spec.get("where", {}), context)
    pattern = re.compile(spec["text"], re.IGNORECASE) if spec.get("text") else None
    chosen = set()
    for node in matches:
        if pattern is None or pattern.search(_searched_text(skb, int(node), spec)):
            chosen.add(int(node))
    for name in spec.get("exclude", []):
        node = _packages_named(skb, name, context)
        if node not in chosen:
            raise SpecError(f"{context}: excluded {name!r} is not among the matches")
        chosen.discard(node)
    for name in spec.get("include", []):
        node = _packages_named(skb, name, context)
        if node not in set(matches.tolist()):
            raise SpecError(f"{context}: included {name!r} fails the relational requirements")
        chosen.add(node)
    if not chosen:
        raise SpecError(f"{context}: no answers")
    return sorted(chosen)


def compile_queries(skb: SKB, specs: list[dict[str, Any]]) -> list[Query]:
    seen: set[int] = set()
    queries, problems = [], []
    for spec in specs:
        try:
            if spec["id"] in seen:
                raise SpecError(f"duplicate query id {spec['id']}")
            seen.add(spec["id"])
            queries.append(Query(int(spec["id"]), spec["query"].strip(), tuple(answers(skb, spec))))
        except SpecError as exc:
            problems.append(str(exc))
    if problems:
        raise SpecError("\n".join(problems))
    return queries


def split_ids(ids: list[int]) -> dict[str, list[int]]:
    shuffled = sorted(ids)
    random.Random(SPLIT_SEED).shuffle(shuffled)
    n_val = round(len(shuffled) * VAL_FRACTION)
    return {"val": sorted(shuffled[:n_val]), "test": sorted(shuffled[n_val:])}


def write_layout(root: Path, queries: list[Query]) -> None:
    write_stark_csv(root / "stark_qa" / "stark_qa.csv", queries)
    for split, ids in split_ids([q.id for q in queries]).items():
        with atomic_write(root / "split" / f"{split}.index") as handle:
            handle.write("\n".join(map(str, ids)) + "\n")


def _evidence(skb: SKB, node: int, spec: dict[str, Any]) -> str:
    """Where the textual pattern's words occur, for reviewing a query's answers."""
    body = _searched_text(skb, node, spec)
    snippets = []
    for word in re.findall(r"[a-z][a-z0-9-]{2,}", (spec.get("text") or "").lower()):
        i = body.lower().find(word)
        if i >= 0:
            snippets.append(body[max(0, i - 50) : i + 60].replace("\n", " "))
    return "      ~ " + " | ".join(snippets[:3]) if snippets else ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail if qa/ is out of date (v2: also if a query text does not name a value of its where)",
    )
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--only", type=int, nargs="*", help="review only these query ids")
    parser.add_argument("--version", type=int, choices=(1, 2), default=1, help="query-set version (default 1)")
    parser.add_argument(
        "--data", type=Path, help=f"v2: the directory holding skb/, queries.yaml, judgements.yaml (default {V2})"
    )
    parser.add_argument("--review", type=int, metavar="QID", help="v2: print a query's candidates for judging")
    parser.add_argument("--stats", action="store_true", help="v2: print answer-set statistics")
    args = parser.parse_args(argv)
    if args.version == 2:
        from harness import HarnessError
        from harness_debian import qa_v2

        try:
            print(qa_v2.run(args.data or V2, split_ids, args.check, args.review, args.stats))
        except HarnessError as exc:
            sys.exit(f"error: {exc}")
        return
    if args.data or args.review is not None or args.stats:
        parser.error("--data, --review and --stats are for --version 2")
    skb = SKB.load(V1 / "skb")
    specs = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    try:
        queries = compile_queries(skb, specs)
    except SpecError as exc:
        sys.exit(f"error: {exc}")
    if args.check:
        shipped = load_stark_layout(V1 / "qa")
        expected = {q.id: q for q in queries}
        stale = [q.id for split in shipped for q in shipped.split(split) if expected.get(q.id) != q]
        if stale or sum(shipped.counts().values()) != len(queries):
            sys.exit(f"{V1 / 'qa'} is out of date (queries {stale[:10]}); run python -m harness_debian.queries")
        print(f"{len(queries)} queries up to date")
        return
    write_layout(V1 / "qa", queries)
    if not args.quiet:
        for query in queries:
            if args.only and query.id not in args.only:
                continue
            print(f"\n[{query.id}] {query.text}  ({len(query.answer_ids)} answers)")
            spec = next(s for s in specs if s["id"] == query.id)
            for node in query.answer_ids[:40]:
                print(f"    {skb.names[node]}: {skb.fields[node]['summary']}")
                print(_evidence(skb, node, spec))
    sizes = sorted(len(q.answer_ids) for q in queries)
    splits = ", ".join(f"{k}: {len(v)}" for k, v in split_ids([q.id for q in queries]).items())
    print(
        f"\n{len(queries)} queries; answers per query: min {sizes[0]}, median {sizes[len(sizes) // 2]}, "
        f"max {sizes[-1]}; splits {{{splits}}}"
    )


if __name__ == "__main__":
    main()
