"""Evaluation queries v2 for the Debian SKB: recursive relational specs, answers judged per candidate.

A v2 data directory (the shipped one is ``data/v2``) holds ``skb/`` (built by ``python -m
harness_debian.build --version 2``), ``queries.yaml`` and ``judgements.yaml``; ``python -m
harness_debian.queries --version 2 [--data DIR]`` writes ``DIR/qa/`` (STaRK's layout plus
``requirements.jsonl``; :mod:`harness_debian.qa_v2`, which adds the paraphrased and train splits).

``queries.yaml`` — a list of queries, written the STaRK human-generated way (paper, Appendix C):
every requirement is stated in the query text, every tag, section, maintainer and package of
``where`` (at any depth) by its name (:func:`unstated`; a paraphrase such as "command-line
tools" for ``interface::commandline`` or "utilities" for the ``utils`` section does not count)::

    - id: 1
      query: Which tools tagged interface::commandline rely on a library the Debian Python Team packages?
      where: {depends: {maintained_by: Debian Python Team}, tagged: interface::commandline}
      textual: a command-line tool        # what the judge checks, in words (optional)

The ``where`` grammar (relations read from the side of the node being described):

* ``where`` is a mapping ``relation: value``; every entry must hold (AND).
* A value is a node **name** (every node with that exact name, e.g. ``Debian Games Team``,
  ``hamradio``, ``game::puzzle``, ``python3-numpy``), a nested **spec** (a mapping with the same
  grammar, describing the neighbour: a two-hop requirement), or a **list** of names/specs, each
  of which must hold through its own neighbour.
* Relations, forward / reverse: ``depends`` / ``required_by``, ``recommends`` / ``recommended_by``,
  ``suggests`` / ``suggested_by``, ``maintained_by`` / ``maintains``, ``in_section`` / ``section_of``,
  ``tagged`` / ``tag_of``, and ``same_source``, symmetric and reflexive (a package is built from
  its own source: ``same_source: X`` holds for X too, though the SKB stores no self-loops).
  ``depends: X`` holds for a package that depends on X; ``required_by: X`` for one that X
  depends on; ``maintains: X`` for a maintainer of package X; ``section_of`` and ``tag_of``
  describe sections and tags by their packages.
* Examples: ``depends: {maintained_by: Debian Python Team}`` ("depends on a package the Debian
  Python Team maintains"); ``maintained_by: {maintains: vim}`` ("packaged by the maintainer of vim");
  ``required_by: {in_section: games}`` ("a library some game depends on").

The relational candidates of a query are the packages satisfying ``where``, computed by code
(boolean masks over all nodes, one vectorized pass over each relation's edges per requirement).

``judgements.yaml`` — the textual requirement judged by a person on the FULL description of EVERY
relational candidate (``--review QID`` prints them)::

    1:                      # query id
      python3-foo: yes
      bar-utils: {answer: no, reason: a library, not a tool}

The answers are the candidates judged yes. ``--check`` (and compiling) fails, listing every
problem at once, when a query's text does not name a value of its ``where``, a candidate has no
judgement, a judgement names a package that is not a candidate, a query has no answer, or
``qa/`` is stale.
A query's ``hops`` is the depth of its ``where`` (2 when a value is a nested spec); ``--stats``
prints the answer-set statistics for the dataset card.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness import SKB, HarnessError, Query

# relation key -> (edge type, the side of the edge the described node is on)
RELATIONS: dict[str, tuple[str, str]] = {
    "depends": ("depends", "src"),
    "required_by": ("depends", "dst"),
    "recommends": ("recommends", "src"),
    "recommended_by": ("recommends", "dst"),
    "suggests": ("suggests", "src"),
    "suggested_by": ("suggests", "dst"),
    "maintained_by": ("maintained_by", "src"),
    "maintains": ("maintained_by", "dst"),
    "in_section": ("in_section", "src"),
    "section_of": ("in_section", "dst"),
    "tagged": ("tagged", "src"),
    "tag_of": ("tagged", "dst"),
    "same_source": ("same_source", "both"),
}


class QuerySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    query: str
    where: dict[str, Any]
    textual: str | None = None


class Reasoned(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: bool
    reason: str = ""


class Graph:
    """Name lookup and per-relation edge arrays, built once per SKB."""

    def __init__(self, skb: SKB) -> None:
        self.skb = skb
        self.by_name: dict[str, list[int]] = {}
        for node in range(skb.num_nodes):
            self.by_name.setdefault(skb.names[node], []).append(node)
        order = np.argsort(skb.edge_type, kind="stable")
        bounds = np.searchsorted(skb.edge_type[order], np.arange(len(skb.edge_types) + 1))
        self.edges = {
            e.name: (skb.src[order[bounds[i] : bounds[i + 1]]], skb.dst[order[bounds[i] : bounds[i + 1]]])
            for i, e in enumerate(skb.edge_types)
        }
        # the nodes a source builds (packages): reflexive ``same_source`` holds for them only
        self.packages = np.zeros(skb.num_nodes, dtype=bool)
        self.packages[skb.candidate_ids] = True

    def step(self, key: str, neighbours: np.ndarray) -> np.ndarray:
        """Mask of nodes related by ``key`` to at least one node in the ``neighbours`` mask."""
        relation, side = RELATIONS[key]
        src, dst = self.edges[relation]
        out = np.zeros(self.skb.num_nodes, dtype=bool)
        if side in ("src", "both"):
            out[src[neighbours[dst]]] = True
        if side in ("dst", "both"):
            out[dst[neighbours[src]]] = True
        if key == "same_source":  # reflexive: a package is built from its own source (no self-loops stored)
            out |= neighbours & self.packages
        return out

    def satisfying(self, where: Mapping[str, Any], path: str) -> np.ndarray:
        """Mask of the nodes satisfying ``where`` (any node type; the caller restricts it)."""
        if not isinstance(where, Mapping) or not where:
            raise HarnessError(f"{path}: a spec must be a non-empty mapping of relation: value")
        mask = np.ones(self.skb.num_nodes, dtype=bool)
        for key, values in where.items():
            if key not in RELATIONS or RELATIONS[key][0] not in self.edges:
                raise HarnessError(f"{path}: unknown relation {key!r} (known: {', '.join(RELATIONS)})")
            items = values if isinstance(values, list) else [values]
            if not items:
                raise HarnessError(f"{path}.{key}: an empty list")
            for value in items:
                mask &= self.step(key, self._neighbours(value, f"{path}.{key}"))
        return mask

    def _neighbours(self, value: Any, path: str) -> np.ndarray:
        if isinstance(value, Mapping):
            return self.satisfying(value, path)
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise HarnessError(f"{path}: expected a node name or a spec, got {value!r}")
        ids = self.by_name.get(str(value))
        if ids is None:
            raise HarnessError(f"{path}: no node named {str(value)!r}")
        mask = np.zeros(self.skb.num_nodes, dtype=bool)
        mask[ids] = True
        return mask

    def candidates(self, where: Mapping[str, Any], path: str) -> list[int]:
        """The relational candidates: candidate-type nodes (packages) satisfying ``where``."""
        mask = self.satisfying(where, path)
        return [int(i) for i in self.skb.candidate_ids[mask[self.skb.candidate_ids]]]


def hops(where: Any) -> int:
    """The depth of a spec: 1 for names only, 2 when a value is itself a spec, and so on."""
    if isinstance(where, list):
        return max((hops(v) for v in where), default=0)
    if isinstance(where, Mapping):
        return 1 + max((hops(v) for v in where.values()), default=0)
    return 0


# what the value of a relation names, when it is a name: ``in_section: utils`` names a section,
# ``tagged: game::card`` a tag, ``maintained_by: X`` a maintainer; every other value is a package
VALUE_KINDS = {"in_section": "section", "tagged": "tag", "maintained_by": "maintainer"}


def named_values(where: Any, path: str = "where") -> list[tuple[str, str, str]]:
    """Every node name in a spec, at any depth: ``(path, kind, name)``, kind being ``section``,
    ``tag``, ``maintainer`` or ``package``."""
    found: list[tuple[str, str, str]] = []
    if not isinstance(where, Mapping):
        return found
    for key, values in where.items():
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, Mapping):
                found.extend(named_values(value, f"{path}.{key}"))
            else:
                found.append((f"{path}.{key}", VALUE_KINDS.get(key, "package"), str(value)))
    return found


def names_in_text(text: str, kind: str, name: str) -> bool:
    """Whether ``text`` names ``name`` (case aside) as a whole word: a section as "the utils
    section", "utils-section tools" or "section utils"; a tag, maintainer or package literally
    ("tagged security::forensics", "the Debian Games Team", "libkrb5-3")."""
    text, value = text.lower(), re.escape(name.lower())
    before, after = r"(?<![\w+.-])", r"(?![\w+-]|\.\w)"
    if kind == "section":
        return re.search(rf"{before}{value}[-\s]+section\b|\bsection\s+{value}{after}", text) is not None
    return re.search(before + value + after, text) is not None


def unstated(spec: QuerySpec) -> list[str]:
    """The requirements of ``spec.where`` that its text does not name: every tag, section,
    maintainer and package must be stated (a hidden debtag makes untagged packages that fit the
    text non-answers)."""
    return [
        f"{path}: {kind} {name!r}"
        for path, kind, name in named_values(spec.where)
        if not names_in_text(spec.query, kind, name)
    ]


def load_specs(path: Path) -> list[QuerySpec]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(raw, list):
        raise HarnessError(f"{path}: expected a list of queries")
    specs, seen = [], set()
    for n, entry in enumerate(raw):
        label = f"{path}: entry {n} (id {entry.get('id') if isinstance(entry, dict) else '?'})"
        try:
            spec = QuerySpec.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise HarnessError(f"{label}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        if spec.id in seen:
            raise HarnessError(f"{label}: duplicate query id {spec.id}")
        seen.add(spec.id)
        specs.append(spec)
    return specs


def load_judgements(path: Path) -> dict[int, dict[str, Reasoned]]:
    """``{query id: {package: judgement}}``; a bare ``yes``/``no`` is a judgement without reason."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    raw = raw or {}
    if not isinstance(raw, dict):
        raise HarnessError(f"{path}: expected a mapping of query id to {{package: yes/no}}")
    result: dict[int, dict[str, Reasoned]] = {}
    for qid, entries in raw.items():
        if not isinstance(qid, int) or not isinstance(entries, dict):
            raise HarnessError(f"{path}: query {qid!r}: expected an integer id mapping packages to yes/no")
        result[qid] = {}
        for package, value in entries.items():
            if isinstance(value, bool):
                value = {"answer": value}
            try:
                result[qid][str(package)] = Reasoned.model_validate(value)
            except ValidationError:
                raise HarnessError(
                    f"{path}: query {qid}: package {package!r}: expected yes, no or {{answer: yes/no, reason: ...}}"
                ) from None
    return result


@dataclass
class Compiled:
    spec: QuerySpec
    candidates: list[int]
    answers: list[int]

    @property
    def hops(self) -> int:
        return hops(self.spec.where)


def compile_v2(
    skb: SKB,
    specs: list[QuerySpec],
    judgements: dict[int, dict[str, Reasoned]],
    judgements_path: Path,
    queries_path: Path = Path("queries.yaml"),
) -> list[Compiled]:
    """Relational candidates by code, answers from the judgements; every inconsistency is one
    line naming the query and the package, and every requirement a query's text does not name
    (:func:`unstated`) one line naming the query and the value."""
    graph = Graph(skb)
    problems: list[str] = []
    compiled = []
    known = {s.id for s in specs}
    for qid in sorted(set(judgements) - known):
        problems.append(f"{judgements_path}: query {qid}: judged but not in queries.yaml")
    for spec in specs:
        for missing in unstated(spec):
            problems.append(f"{queries_path}: query {spec.id}: the text does not name {missing}")
        candidates = graph.candidates(spec.where, f"query {spec.id}: where")
        names = {skb.names[c]: c for c in candidates}
        judged = judgements.get(spec.id, {})
        for name in names:
            if name not in judged:
                problems.append(f"{judgements_path}: query {spec.id}: candidate {name!r} has no judgement")
        for name in judged:
            if name not in names:
                problems.append(f"{judgements_path}: query {spec.id}: {name!r} is not a relational candidate")
        answers = sorted(c for name, c in names.items() if name in judged and judged[name].answer)
        if candidates and not answers and all(n in judged for n in names):
            problems.append(f"{judgements_path}: query {spec.id}: no candidate is judged yes (no answer)")
        if not candidates:
            problems.append(f"query {spec.id}: no package satisfies where (no answer)")
        compiled.append(Compiled(spec, candidates, answers))
    if problems:
        raise HarnessError(f"{len(problems)} problem(s) with the v2 queries:\n" + "\n".join(problems))
    return compiled


def to_queries(compiled: list[Compiled]) -> list[Query]:
    return [Query(c.spec.id, c.spec.query.strip(), tuple(c.answers)) for c in compiled]


def review(skb: SKB, spec: QuerySpec, judgements: dict[int, dict[str, Reasoned]]) -> str:
    """Every relational candidate with its summary and full description, for judging, then a
    judgements.yaml block to fill in (existing judgements kept, new ones marked ``?``)."""
    candidates = Graph(skb).candidates(spec.where, f"query {spec.id}: where")
    judged = judgements.get(spec.id, {})
    lines = [f"[{spec.id}] {spec.query.strip()}", f"    where: {json.dumps(spec.where, ensure_ascii=False)}"]
    if spec.textual:
        lines.append(f"    textual: {spec.textual}")
    lines.append(f"    {len(candidates)} relational candidates\n")
    for node in candidates:
        name, fields = skb.names[node], skb.fields[node]
        mark = judged.get(name)
        verdict = "?"
        if mark is not None:
            verdict = ("yes" if mark.answer else "no") + (f" ({mark.reason})" if mark.reason else "")
        lines.append(f"== {name} [{verdict}]: {fields.get('summary', '')}")
        lines.extend("   " + para for para in str(fields.get("description", "")).splitlines())
        lines.append("")
    lines.append(f"{spec.id}:")
    for node in candidates:
        mark = judged.get(skb.names[node])
        value = "?" if mark is None else ("yes" if mark.answer else "no")
        lines.append(f"  {json.dumps(skb.names[node])}: {value}")
    return "\n".join(lines)
