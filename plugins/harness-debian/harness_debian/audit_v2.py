"""Second audit pass of the Debian v2 evaluation queries: answers outside the candidate sets.

The first audit (``data/v2/AUDIT.md``) re-judged the relational candidates of 20 queries; by its
design it could not find a package that the query TEXT admits but ``where`` excludes. This pass
looks outside the candidate sets: for each audited query it relaxes ``where`` one constraint at
a time — every ``tagged`` value and every ``in_section`` value, at any depth (a list loses one
item; a nested spec that would become empty is not relaxed) — and reads the packages the
relaxation admits that ``where`` does not (the *extras* of that relaxation; a package is an extra
of one relaxation only, since it fails exactly the dropped constraint). ``same_source`` is
reflexive in ``where`` itself since this pass (a package is built from its own source), so that
relaxation needs no step here: its new candidates are judged in ``judgements.yaml``.

Which extras are read: all of them when a relaxation admits at most ``READ_ALL`` packages;
otherwise the ``READ_TOP`` best by BM25 (:func:`ranking_query`: the textual requirement and the
query text without the words of its relational part, against the package's name, summary and
description, IDF over all packages), plus every package the review
of issue 16 named for the query (``NAMED``). The others are counted, not read.

``data/v2/audit.yaml`` holds one judgement per read extra::

    57:                                   # query id
      regripper:
        answer: false                     # does the query text, as written, admit it?
        textual: true                     # does it meet the textual requirement alone?
        reason: registry hive forensics, but not tagged security::forensics, which the text states

``answer: true`` would be an answer missing from the query (a disagreement with ``where``);
``textual: true`` with ``answer: false`` is a near miss: the package fails only a requirement
the text states. A near miss also records ``previous_text``: whether the query's text before
this pass (which paraphrased or left out that tag or section) admitted it — an answer that
query was missing then. ``python -m harness_debian.audit_v2`` recomputes every relaxation, checks that
audit.yaml judges exactly the read extras and prints the agreement (``--review QID`` prints a
query's read extras with their full descriptions, for judging; ``--data DIR`` another copy).
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness import SKB, HarnessError
from harness_debian.queries_v2 import Graph, QuerySpec, load_judgements, load_specs, named_values

V2 = Path(__file__).parent / "data" / "v2"

# the 20 queries of the first audit: random.Random(20261123).sample(sorted(ids), 20)
FIRST_AUDIT = [409, 291, 82, 89, 401, 46, 316, 232, 237, 103, 16, 38, 52, 256, 147, 57, 28, 152, 214, 277]
# every query the review of issue 16 (findings H1, H2) flagged
FLAGGED = [33, 57, 59, 118, 139, 140, 142, 153, 209, 214, 226, 233, 235, 237, 238, 244, 279, 285, 294, 312, 323,
           407, 411]  # fmt: skip
QUERIES = sorted(set(FIRST_AUDIT) | set(FLAGGED))
# packages the review named as missing answers, read whatever their BM25 rank
NAMED = {
    33: ["borgbackup2"],
    57: ["regripper", "creddump7", "winregfs"],
    59: ["kea-dhcp4-server", "kea-dhcp6-server", "dnsmasq-base-lua"],
    118: ["poezio", "libervia-tui"],
    209: ["tilemaker"],
    244: ["gopass"],
}
RELAXED = ("tagged", "in_section")
READ_ALL = 25
READ_TOP = 25


class Judgement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: bool
    textual: bool
    reason: str
    # for a near miss: did the query's text before this pass (it paraphrased or left out the
    # tag or section; see git history) admit it, i.e. was it a missing answer then?
    previous_text: bool | None = None


def relaxations(where: Mapping[str, Any], path: str = "where") -> Iterator[tuple[str, dict[str, Any]]]:
    """``(label, relaxed where)`` for every ``tagged`` / ``in_section`` value at any depth."""
    for key, value in where.items():
        items = value if isinstance(value, list) else [value]
        for j, item in enumerate(items):
            if isinstance(item, Mapping):
                for label, sub in relaxations(item, f"{path}.{key}"):
                    relaxed = copy.deepcopy(dict(where))
                    if isinstance(value, list):
                        relaxed[key][j] = sub
                    else:
                        relaxed[key] = sub
                    yield label, relaxed
            elif key in RELAXED:
                relaxed = copy.deepcopy(dict(where))
                rest = [x for i, x in enumerate(items) if i != j]
                if rest:
                    relaxed[key] = rest if len(rest) > 1 else rest[0]
                else:
                    del relaxed[key]
                if relaxed:
                    yield f"{path}.{key}={item}", relaxed


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


# words of the relational part, which every extra shares or fails by construction
RELATIONAL_WORDS = {"section", "tagged", "debtags", "debian", "package", "packages", "team", "maintainers", "source"}


def ranking_query(spec: QuerySpec) -> str:
    """The BM25 query for ranking a relaxation's extras: the textual requirement, and the query
    text without the words of its relational part (the named tags, sections, maintainers and
    packages), which would rank the extras by the requirement they fail rather than by what
    they do."""
    relational = RELATIONAL_WORDS | {t for _, _, name in named_values(spec.where) for t in _tokens(name)}
    words = [w for w in _tokens(spec.query) if w not in relational]
    return " ".join([*_tokens(spec.textual or ""), *words])


class Independent:
    """Relational candidates by plain set logic over the SKB's edge list — code separate from
    :class:`harness_debian.queries_v2.Graph` (no masks, no shared helpers), to re-check the
    judged candidate sets. ``same_source`` is symmetric and reflexive on packages."""

    FORWARD: ClassVar[set[str]] = {"depends", "recommends", "suggests", "maintained_by", "in_section", "tagged"}
    REVERSE: ClassVar[dict[str, str]] = {
        "required_by": "depends",
        "recommended_by": "recommends",
        "suggested_by": "suggests",
        "maintains": "maintained_by",
        "section_of": "in_section",
        "tag_of": "tagged",
    }

    def __init__(self, skb: SKB) -> None:
        self.skb = skb
        self.out: dict[str, dict[int, set[int]]] = {}
        self.into: dict[str, dict[int, set[int]]] = {}
        for s, d, t in zip(skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist(), strict=True):
            name = skb.edge_types[t].name
            self.out.setdefault(name, {}).setdefault(s, set()).add(d)
            self.into.setdefault(name, {}).setdefault(d, set()).add(s)
        self.packages = set(skb.candidate_ids.tolist())
        self.named: dict[str, set[int]] = {}
        for node, name in enumerate(skb.names):
            self.named.setdefault(name, set()).add(node)

    def nodes(self, where: Any) -> set[int]:
        """Every node (of any type) satisfying ``where``; a name is every node so named."""
        if not isinstance(where, Mapping):
            return set(self.named[str(where)])
        result: set[int] | None = None
        for key, values in where.items():
            for value in values if isinstance(values, list) else [values]:
                targets = self.nodes(value)
                if key == "same_source":
                    table = self.out["same_source"], self.into["same_source"]
                    hits = {n for t in targets for side in table for n in side.get(t, ())} | (targets & self.packages)
                elif key in self.FORWARD:
                    hits = {n for t in targets for n in self.into[key].get(t, ())}
                else:
                    hits = {n for t in targets for n in self.out[self.REVERSE[key]].get(t, ())}
                result = hits if result is None else result & hits
        return result or set()

    def candidates(self, where: Mapping[str, Any]) -> set[str]:
        return {self.skb.names[n] for n in self.nodes(where) & self.packages}


@dataclass
class Relaxation:
    label: str
    extras: list[str]  # every package the relaxation admits that where does not
    read: list[str]  # the ones read and judged


@dataclass
class Auditor:
    skb: SKB
    graph: Graph = field(init=False)

    def __post_init__(self) -> None:
        self.graph = Graph(self.skb)

    def text(self, node: int) -> str:
        fields = self.skb.fields[node]
        return f"{self.skb.names[node]} {fields.get('summary', '')} {fields.get('description', '')}"

    @cached_property
    def idf(self) -> dict[str, float]:
        df: Counter[str] = Counter()
        nodes = self.skb.candidate_ids.tolist()
        for node in nodes:
            df.update(set(_tokens(self.text(node))))
        return {t: math.log(1 + (len(nodes) - n + 0.5) / (n + 0.5)) for t, n in df.items()}

    def bm25(self, query: str, nodes: list[int], k1: float = 1.2, b: float = 0.75) -> list[float]:
        docs = [Counter(_tokens(self.text(n))) for n in nodes]
        avg = float(np.mean([sum(d.values()) for d in docs])) if docs else 1.0
        terms = set(_tokens(query))
        scores = []
        for doc in docs:
            length = sum(doc.values())
            score = 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self.idf.get(term, 0.0) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
            scores.append(score)
        return scores

    def relax(self, spec: QuerySpec) -> list[Relaxation]:
        base = set(self.graph.candidates(spec.where, f"query {spec.id}: where"))
        named = set(NAMED.get(spec.id, []))
        result = []
        for label, relaxed in relaxations(spec.where):
            extras = sorted(set(self.graph.candidates(relaxed, label)) - base)
            if len(extras) <= READ_ALL:
                read = extras
            else:
                scores = self.bm25(ranking_query(spec), extras)
                order = sorted(range(len(extras)), key=lambda i: (-scores[i], self.skb.names[extras[i]]))
                read = [extras[i] for i in order[:READ_TOP]]
                read += [n for n in extras if self.skb.names[n] in named and n not in read]
            result.append(Relaxation(label, [self.skb.names[n] for n in extras], [self.skb.names[n] for n in read]))
        return result


def load_audit(path: Path) -> dict[int, dict[str, Judgement]]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    result: dict[int, dict[str, Judgement]] = {}
    for qid, entries in (raw or {}).items():
        if not isinstance(qid, int) or not isinstance(entries, dict):
            raise HarnessError(f"{path}: query {qid!r}: expected an integer id mapping packages to judgements")
        try:
            result[qid] = {str(p): Judgement.model_validate(v) for p, v in entries.items()}
        except ValidationError as exc:
            raise HarnessError(f"{path}: query {qid}: {exc.errors()[0]['msg']}") from None
    return result


def check(root: Path) -> str:
    """Recompute every relaxation, check that audit.yaml judges exactly the read extras, and
    report the agreement; a missing or stray judgement is an error, listed all at once."""
    specs = {s.id: s for s in load_specs(root / "queries.yaml")}
    audit = load_audit(root / "audit.yaml")
    skb = SKB.load(root / "skb")
    auditor = Auditor(skb)
    judged_candidates = load_judgements(root / "judgements.yaml")
    independent = Independent(skb)
    problems, lines = [], []
    for qid in QUERIES:  # the judged candidate sets, recomputed with separate code
        mine, judged_ids = independent.candidates(specs[qid].where), set(judged_candidates.get(qid, {}))
        if mine != judged_ids:
            problems.append(
                f"query {qid}: independent candidates differ from judgements.yaml "
                f"(only here: {sorted(mine - judged_ids)[:5]}, only judged: {sorted(judged_ids - mine)[:5]})"
            )
    read_total = extras_total = admitted = near = before = 0
    for qid in QUERIES:
        judged = audit.get(qid, {})
        relaxed = auditor.relax(specs[qid])
        read = {name for r in relaxed for name in r.read}
        problems += [f"query {qid}: read extra {n!r} has no judgement" for n in sorted(read - set(judged))]
        problems += [f"query {qid}: {n!r} is not a read extra" for n in sorted(set(judged) - read)]
        for r in relaxed:
            marks = [judged[n] for n in r.read if n in judged]
            yes = [n for n in r.read if n in judged and judged[n].answer]
            close = [n for n in r.read if n in judged and judged[n].textual and not judged[n].answer]
            before += sum(bool(judged[n].previous_text) for n in close)
            problems += [
                f"query {qid}: near miss {n!r} needs previous_text: true or false"
                for n in close
                if judged[n].previous_text is None
            ]
            read_total, extras_total = read_total + len(r.read), extras_total + len(r.extras)
            admitted, near = admitted + len(yes), near + len(close)
            lines.append(
                f"  {qid} drop {r.label}: {len(r.extras)} extra, {len(r.read)} read, "
                f"{len(marks) - len(yes)} not admitted by the text"
                + (f"; ADMITTED {yes}" if yes else "")
                + (f"; near misses {close}" if close else "")
            )
        if not relaxed:
            lines.append(f"  {qid}: no tag or section to relax")
    if problems:
        raise HarnessError(f"{len(problems)} problem(s) with {root / 'audit.yaml'}:\n" + "\n".join(problems))
    head = (
        f"{len(QUERIES)} queries: candidate sets recomputed independently, identical to the judged ones for "
        f"{len(QUERIES)} of {len(QUERIES)}; "
        f"{sum(1 for line in lines if ' drop ' in line)} relaxations, "
        f"{extras_total} extra packages, {read_total} read: {read_total - admitted} of {read_total} "
        f"judgements agree with where (not admitted by the text), {admitted} missing answer(s); "
        f"{near} near misses (meet the textual requirement, fail a requirement the text states), "
        f"{before} of them admitted by the texts before this pass"
    )
    return head + "\n" + "\n".join(lines)


def review(root: Path, qid: int) -> str:
    specs = {s.id: s for s in load_specs(root / "queries.yaml")}
    if qid not in specs:
        raise HarnessError(f"{root / 'queries.yaml'}: no query with id {qid}")
    spec = specs[qid]
    auditor = Auditor(SKB.load(root / "skb"))
    judged = load_audit(root / "audit.yaml").get(qid, {})
    out = [f"[{qid}] {spec.query.strip()}", f"    where: {spec.where}", f"    textual: {spec.textual}"]
    node = {auditor.skb.names[i]: i for i in auditor.skb.candidate_ids.tolist()}
    for r in auditor.relax(spec):
        out.append(f"\n-- drop {r.label}: {len(r.extras)} extra, {len(r.read)} read")
        for name in r.read:
            fields = auditor.skb.fields[node[name]]
            mark = judged.get(name)
            verdict = "?" if mark is None else f"answer={mark.answer} textual={mark.textual} ({mark.reason})"
            out.append(f"== {name} [{verdict}]: {fields.get('summary', '')}")
            out.extend("   " + line for line in str(fields.get("description", "")).splitlines())
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=V2, help=f"the v2 data directory (default {V2})")
    parser.add_argument("--review", type=int, metavar="QID", help="print a query's read extras for judging")
    args = parser.parse_args(argv)
    try:
        print(review(args.data, args.review) if args.review is not None else check(args.data))
    except HarnessError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
