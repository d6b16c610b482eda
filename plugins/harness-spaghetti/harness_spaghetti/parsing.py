"""SPAGHETTI's knowledge-base source over an SKB: the schema an LLM writes against, the
structured query it writes (anchored typed relation paths), and their execution.

SPAGHETTI queries Wikidata with SPARQL written by a semantic parser that is given the linked
entities. Here the "database" is the SKB's graph, and the query language is the harness's
typed relation path (``harness.RelationPath``): a constraint is an anchor entity (by name) and
a path from its type to the type of the nodes asked for; several constraints are one
conjunction (SPARQL triple patterns sharing the answer variable), so their results intersect.

Every failure — an answer without a path, a path the schema rejects, an anchor the SKB does
not have, a path through a hub, an empty result — is a :class:`harness.HarnessError` whose
message is what the parser is told when it is asked again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import harness
from harness import SKB, HarnessError, RelationPath

__all__ = ["Constraint", "Example", "Execution", "LinkedEntity", "Schema", "execute", "normalize", "read_answer"]

_TYPED = re.compile(r"^(?P<name>.+?)\s*\((?P<type>[^()]+)\)\s*$")


normalize = harness.normalize_name  # names compared as the entity linker matches them


@dataclass(frozen=True)
class LinkedEntity:
    """A node a query mentions (``harness.EntityLinker``), as the parser is shown it."""

    mention: str
    node: int
    name: str
    node_type: str

    def as_json(self) -> dict[str, Any]:
        return {"mention": self.mention, "id": self.node, "name": self.name, "type": self.node_type}


@dataclass(frozen=True)
class Example:
    """A worked example for the parser's prompt, built from one real edge of the SKB."""

    query: str
    anchor: str
    anchor_type: str
    path: str


@dataclass(frozen=True)
class Schema:
    """What the parser is told about the SKB: the core schema (:class:`harness.Schema`: node
    types, candidate types, every (source type, relation, target type) some edge has) plus a
    worked example taken from a real edge."""

    name: str
    graph: harness.Schema
    example: Example | None  # from a real edge: the prompt's worked example

    @property
    def node_types(self) -> tuple[str, ...]:
        return self.graph.node_types

    @property
    def candidate_types(self) -> tuple[str, ...]:
        return self.graph.candidate_types

    def lines(self) -> list[str]:
        return self.graph.lines()

    def check_hops(self, path: RelationPath) -> None:
        self.graph.check(path)

    @classmethod
    def of(cls, skb: SKB) -> Schema:
        graph = harness.Schema.of(skb)
        edge_of = dict(zip(graph.triples, graph.examples, strict=True))
        candidates = graph.candidate_types
        example = None
        # the example: from a non-candidate entity back to the candidates joined to it (a
        # maintainer's packages), else any relation reaching a candidate type; its query reads
        # the relation's label ("package maintained by Jane Doe")
        for source, relation, target in graph.triples:
            if source in candidates and target not in candidates:
                anchor = str(skb.names[int(skb.dst[edge_of[(source, relation, target)]])])
                label = skb.edge_types[skb.relation(relation)].text("out")
                example = Example(f"{source} {label} {anchor}", anchor, target, f"{target} <-{relation}- {source}")
                break
        if example is None:
            for source, relation, target in graph.triples:
                if target in candidates:
                    anchor = str(skb.names[int(skb.src[edge_of[(source, relation, target)]])])
                    label = skb.edge_types[skb.relation(relation)].text("in")
                    example = Example(f"{target} {label} {anchor}", anchor, source, f"{source} -{relation}-> {target}")
                    break
        return cls(skb.name, graph, example)


@dataclass(frozen=True)
class Constraint:
    anchor: str
    path: str


@dataclass
class Execution:
    """A structured query run against the SKB: the candidate nodes every constraint reaches."""

    constraints: list[Constraint]
    reached: list[int] = field(default_factory=list)  # nodes each constraint reached (before intersecting)
    anchors: list[list[int]] = field(default_factory=list)  # the nodes each anchor resolved to
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


_LINE = re.compile(r"^\s*[-*\d.)\s]*\**\s*(?P<key>anchor|entity|path)\s*\**\s*[:=]\s*(?P<value>.+?)\s*$", re.I | re.M)
_FORMAT = "answer with lines 'ANCHOR: <entity name>' and 'PATH: <type> -relation-> <type>'"


def _unquote(value: str) -> str:
    return value.strip().strip("`'\"").strip()


def read_answer(text: str, max_constraints: int) -> list[Constraint]:
    """The constraints in a parser's answer: ``ANCHOR:``/``PATH:`` line pairs, or JSON
    (``{"anchor": …, "path": …}``, a list of those, or ``{"constraints": [...]}``)."""
    found: list[Constraint] = []
    brace = text.find("{"), text.find("[")
    starts = [i for i in brace if i >= 0]
    if starts:
        try:
            data: Any = json.JSONDecoder().raw_decode(text[min(starts) :])[0]
        except ValueError:
            data = None
        if isinstance(data, dict):
            data = data.get("constraints", [data])
        if isinstance(data, list):
            for item in data:
                if isinstance(item, dict) and isinstance(item.get("path"), str):
                    named = item.get("anchor", item.get("entity", ""))
                    found.append(Constraint(_unquote(str(named)), _unquote(item["path"])))
    if not found:
        anchor: str | None = None
        for match in _LINE.finditer(text):
            key, value = match.group("key").lower(), _unquote(match.group("value"))
            if key == "path":
                found.append(Constraint(anchor or "", value))
                anchor = None
            else:
                anchor = value
    if not found:
        raise HarnessError(f"the answer has no PATH; {_FORMAT}")
    if len(found) > max_constraints:
        raise HarnessError(f"the answer has {len(found)} constraints; give at most {max_constraints}")
    return found


def execute(
    skb: SKB,
    schema: Schema,
    constraints: Sequence[Constraint],
    linked: Sequence[LinkedEntity],
    linker: harness.EntityLinker,
    limit: int,
) -> Execution:
    """Check, resolve and run ``constraints``; the candidates every one reaches, sorted by id.
    Raises a :class:`HarnessError` worded for the parser."""
    run = Execution(list(constraints))
    answer_type: str | None = None
    result: np.ndarray | None = None
    for constraint in constraints:
        path = RelationPath.parse(constraint.path)
        path.check(skb)
        schema.check_hops(path)
        if path.answer_type not in schema.candidate_types:
            raise HarnessError(
                f"path {path} ends at {path.answer_type}; it must end at what is searched for: "
                f"{', '.join(schema.candidate_types)}"
            )
        if answer_type is not None and path.answer_type != answer_type:
            raise HarnessError(f"the paths end at {answer_type} and {path.answer_type}; all must end at one type")
        answer_type = path.answer_type
        anchors = resolve_anchor(skb, constraint.anchor, path.start_type, linked, linker)
        reached = harness.reach(skb, anchors, path.hops, limit=limit)
        if reached is None:
            raise HarnessError(
                f"path {path} from {constraint.anchor!r} passes more than {limit} nodes (a hub); "
                "start from a more specific entity"
            )
        reached = reached[skb.is_candidate(reached)]
        run.anchors.append(anchors.tolist())
        run.reached.append(len(reached))
        result = reached if result is None else np.intersect1d(result, reached)
    assert result is not None
    if not len(result):
        each = ", ".join(f"{c.anchor!r} {c.path}: {n}" for c, n in zip(constraints, run.reached, strict=True))
        raise HarnessError(
            f"the query finds no {answer_type} ({each}); check each path's direction and anchor"
            if len(constraints) > 1
            else f"path {constraints[0].path} from {constraints[0].anchor!r} reaches no {answer_type}; "
            "check the direction of each relation and the anchor"
        )
    run.ids = result
    return run


def resolve_anchor(
    skb: SKB, anchor: str, start_type: str, linked: Sequence[LinkedEntity], linker: harness.EntityLinker
) -> np.ndarray:
    """The nodes of ``start_type`` named ``anchor``: a linked entity first (by name or by the
    mention), else any node whose whole name it is."""
    # "Dolphin (package)": the entity as the prompt lists it, its type echoed
    typed = _TYPED.match(anchor)
    if typed and typed.group("type").strip() in skb.node_type_names:
        anchor = typed.group("name")
    wanted = normalize(anchor)
    if not wanted:
        raise HarnessError(f"a path starting at {start_type} needs an ANCHOR: the name of one of the entities listed")
    of_type = [e for e in linked if e.node_type == start_type]
    named = [e.node for e in of_type if normalize(e.name) == wanted or e.mention == wanted]
    if not named:
        named = [n for mention, nodes in linker.mentions(anchor) if mention == wanted for n in nodes]
        named = [n for n in named if skb.node_type(n) == start_type]
    if not named:
        listed = "; ".join(f"{e.name} ({e.node_type})" for e in linked) or "none"
        raise HarnessError(
            f"no {start_type} is named {anchor!r}; the path must start at the type of its anchor. "
            f"Entities in the query: {listed}"
        )
    return np.unique(np.asarray(named, dtype=np.int64))
