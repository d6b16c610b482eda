"""Logical forms over an SKB: RnG-KBQA's candidate enumeration, adapted from Freebase s-expressions
to the harness's typed relation paths (numpy only; no model library).

A *form* is one or more *parts* whose answers are intersected (RnG's ``AND``); a part is an
*anchor* (a linked entity: a name and a type, standing for the nodes of that type with that name)
and a typed relation path of one or two hops starting at it (RnG's ``JOIN`` chains). Written::

    "Debian Multimedia Maintainers" maintainer <-maintained_by- package <-depends- package
    "sloccount" package -maintained_by-> maintainer <-maintained_by- package AND "text" section <-in_section- package

(the name as a JSON string, then the path in :class:`harness.RelationPath`'s language). The same
text is what the generator (an LLM) reads and writes, and what rows' details show; the ranker
reads :meth:`Form.linear`, the relations' labels ("maintained by", "required by").

:class:`Forms` enumerates a query's candidates the way RnG does (every path of up to two hops
from every linked entity, each executed against the knowledge base; here also the pairwise
intersections of two entities' paths, as STaRK's templates and RnG's ``AND`` compose them),
bounded at hubs, and executes forms with :func:`harness.reach`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

import harness

__all__ = ["Anchor", "Candidate", "Enumeration", "Form", "Forms", "Part", "f1", "normalise"]

#: a part: a JSON string (the anchor's name), then its path up to the next ``AND "`` or the end
_NAME = re.compile(r'\s*"(?:[^"\\]|\\.)*"')
_AND = re.compile(r"\s+AND\s+")


normalise = harness.normalize_name  # names compared as the entity linker matches them


@dataclass(frozen=True)
class Anchor:
    """A linked entity: the nodes of ``node_type`` named ``name`` (usually one)."""

    name: str
    node_type: str
    ids: tuple[int, ...]
    mention: str = ""

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "type": self.node_type, "ids": list(self.ids), "mention": self.mention}


@dataclass(frozen=True)
class Part:
    anchor: Anchor
    path: harness.RelationPath

    def __str__(self) -> str:
        return f"{json.dumps(self.anchor.name, ensure_ascii=False)} {self.path}"


@dataclass(frozen=True)
class Form:
    """Parts whose answers are intersected; all end at the same node type."""

    parts: tuple[Part, ...]

    def __str__(self) -> str:
        return " AND ".join(str(p) for p in self.parts)

    @property
    def answer_type(self) -> str:
        return self.parts[0].path.answer_type

    @property
    def hops(self) -> int:
        return max(len(p.path.hops) for p in self.parts)

    def linear(self, skb: harness.SKB) -> str:
        """What the ranker reads: the path read from the answer back to the entity, in the
        relations' labels, as RnG linearises s-expressions into words (``package depends on
        package maintained by maintainer Debian Multimedia Maintainers``): it reads like the
        queries it is matched with."""
        labels = {e.name: e for e in skb.edge_types}
        pieces = []
        for part in self.parts:
            types = [part.path.start_type, *(h.node_type for h in part.path.hops)]
            words = []
            for i in range(len(part.path.hops) - 1, -1, -1):
                hop = part.path.hops[i]
                back: Literal["in", "out"] = "in" if hop.direction == "out" else "out"  # read from the far end
                label = labels[hop.relation].text(back) if hop.relation in labels else hop.relation
                words.append(f"{label} {types[i]}")
            pieces.append(" ".join(words) + f" {part.anchor.name}")
        return f"{self.answer_type} " + " and ".join(pieces)


@dataclass
class Candidate:
    """An enumerated form and what it executes to (sorted node ids)."""

    form: Form
    ids: np.ndarray

    def __str__(self) -> str:
        return str(self.form)


@dataclass
class Enumeration:
    """A query's linked entities and candidate forms. ``hubs``: expansions skipped because a
    frontier passed ``max_frontier`` or an answer set passed ``max_answers``; ``truncated``:
    ``max_forms`` (or ``max_conjunctions``) stopped the enumeration."""

    anchors: list[Anchor]
    candidates: list[Candidate] = field(default_factory=list)
    hubs: int = 0
    truncated: bool = False


def f1(ids: np.ndarray, gold: np.ndarray) -> float:
    """F1 of an answer set against the gold answers (RnG's metric, and its positives' weight)."""
    if not len(ids) or not len(gold):
        return 0.0
    hits = len(np.intersect1d(ids, gold, assume_unique=True))
    return 0.0 if hits == 0 else 2 * hits / (len(ids) + len(gold))


class Forms:
    """Linking, enumeration, parsing and execution of forms over one SKB.

    Enumeration is guided by each node's *steps*: the (relation, direction, neighbour type)
    triples its edges offer, indexed once for the SKB (sorted int64 keys, one per distinct triple
    and node: at most one per edge), so a path is proposed only where it leads somewhere, and
    each proposal is executed with :func:`harness.reach`.

    Args:
        skb: the knowledge base.
        max_entities: linked nodes per query at most (longest mentions first).
        max_ngram: names of more words are never linked.
        max_frontier: a first hop reaching more nodes is not expanded to a second (a hub).
        max_answers: a form answering more nodes is dropped (too broad to be an answer set);
            the limit of every frontier when a written form is executed.
        max_forms: one- and two-hop forms per query at most.
        conjunctions: also the intersections of two entities' forms.
        max_conjunctions: intersections per query at most.
        conjunction_parts: forms of each entity tried in intersections (its first ones).
    """

    def __init__(
        self,
        skb: harness.SKB,
        max_entities: int = 5,
        max_ngram: int = 5,
        max_frontier: int = 2000,
        max_answers: int = 5000,
        max_forms: int = 200,
        conjunctions: bool = True,
        max_conjunctions: int = 100,
        conjunction_parts: int = 20,
    ) -> None:
        self.skb = skb
        self.max_entities, self.max_frontier, self.max_answers = max_entities, max_frontier, max_answers
        self.max_forms, self.conjunctions = max_forms, conjunctions
        self.max_conjunctions, self.conjunction_parts = max_conjunctions, conjunction_parts
        self.linker = harness.EntityLinker(skb.names, max_ngram=max_ngram)
        self.answer_types = {skb.node_type_names.index(t) for t in skb.candidate_types}
        # a name written without quotes (small LLMs drop them): the words before a type and an arrow
        types = "|".join(re.escape(t) for t in sorted(skb.node_type_names, key=len, reverse=True))
        self._bare = re.compile(rf"\s*(?P<name>\S.*?)\s+(?=(?:{types})\s*(?:-\w+->|<-\w+-))")
        self._index_steps()

    # -- the steps each node offers ------------------------------------------------------
    def _index_steps(self) -> None:
        skb = self.skb
        types, relations = len(skb.node_type_names), len(skb.edge_types)
        self._width = relations * 2 * types
        src, dst, rel = skb.src, skb.dst, skb.edge_type.astype(np.int64)
        node_types = skb.node_types.astype(np.int64)
        keys = [src * self._width + (rel * 2) * types + node_types[dst]]
        if not skb.undirected:
            # a symmetric relation reads alike both ways: its edges are steps "out" from either end
            symmetric = np.asarray([e.symmetric for e in skb.edge_types], dtype=bool)
            side = np.where(symmetric[rel], 0, 1) if len(rel) else np.zeros(0, dtype=np.int64)
            keys.append(dst * self._width + (rel * 2 + side) * types + node_types[src])
        self._keys = np.unique(np.concatenate(keys)) if len(src) else np.zeros(0, dtype=np.int64)

    def steps(self, nodes: np.ndarray) -> list[harness.Hop]:
        """The hops some of ``nodes`` can take (relation, direction, neighbour type), in a fixed order."""
        nodes = np.asarray(nodes, dtype=np.int64)
        lo = np.searchsorted(self._keys, nodes * self._width)
        hi = np.searchsorted(self._keys, (nodes + 1) * self._width)
        if not (hi > lo).any():
            return []
        codes = np.unique(np.concatenate([self._keys[a:b] for a, b in zip(lo, hi, strict=True) if b > a]) % self._width)
        types = len(self.skb.node_type_names)
        hops = []
        for code in codes.tolist():
            step, node_type = divmod(code, types)
            relation, direction = divmod(step, 2)
            name, node_type_name = self.skb.edge_types[relation].name, self.skb.node_type_names[node_type]
            hops.append(harness.Hop(name, "in" if direction else "out", node_type_name))
        return hops

    # -- linking -------------------------------------------------------------------------
    def link(self, text: str) -> list[Anchor]:
        """The query's entities: per mention (longest first), its nodes grouped by type, at
        most ``max_entities`` nodes in all."""
        anchors: list[Anchor] = []
        budget = self.max_entities
        for mention, nodes in self.linker.mentions(text):
            by_type: dict[str, list[int]] = {}
            for node in nodes[:budget]:
                by_type.setdefault(self.skb.node_type(node), []).append(int(node))
            for node_type, ids in by_type.items():
                anchors.append(Anchor(str(self.skb.names[ids[0]]), node_type, tuple(ids), mention))
                budget -= len(ids)
            if budget <= 0:
                break
        return anchors

    # -- enumeration ---------------------------------------------------------------------
    def enumerate(self, anchors: Sequence[Anchor]) -> Enumeration:
        """Every executable form of one or two hops from each anchor ending at a candidate type,
        then (``conjunctions``) the non-empty intersections of two anchors' forms."""
        found = Enumeration(list(anchors))
        per_anchor: list[list[Candidate]] = []
        total = 0
        for anchor in anchors:
            mine: list[Candidate] = []
            start = np.asarray(anchor.ids, dtype=np.int64)
            for first in self.steps(start):
                if total + len(mine) >= self.max_forms:
                    found.truncated = True
                    break
                reached = harness.reach(self.skb, start, [first], limit=self.max_answers)
                if reached is None:
                    found.hubs += 1
                    continue
                if not len(reached):
                    continue
                if self._answers(first.node_type):
                    mine.append(self._candidate(anchor, (first,), reached))
                if len(reached) > self.max_frontier:
                    found.hubs += 1  # a hub: not expanded
                    continue
                for second in self.steps(reached):
                    if not self._answers(second.node_type):
                        continue
                    if total + len(mine) >= self.max_forms:
                        found.truncated = True
                        break
                    answers = harness.reach(self.skb, reached, [second], limit=self.max_answers)
                    if answers is None:
                        found.hubs += 1
                    elif len(answers):
                        mine.append(self._candidate(anchor, (first, second), answers))
            per_anchor.append(mine)
            total += len(mine)
        found.candidates = [c for mine in per_anchor for c in mine]
        if self.conjunctions:
            found.candidates += self._conjunctions(per_anchor, found)
        return found

    def _answers(self, node_type: str) -> bool:
        return self.skb.node_type_names.index(node_type) in self.answer_types

    def _candidate(self, anchor: Anchor, hops: tuple[harness.Hop, ...], ids: np.ndarray) -> Candidate:
        form = Form((Part(anchor, harness.RelationPath(anchor.node_type, hops)),))
        return Candidate(form, ids)

    def _conjunctions(self, per_anchor: list[list[Candidate]], found: Enumeration) -> list[Candidate]:
        made: list[Candidate] = []
        for a in range(len(per_anchor)):
            for b in range(a + 1, len(per_anchor)):
                for left in per_anchor[a][: self.conjunction_parts]:
                    for right in per_anchor[b][: self.conjunction_parts]:
                        if left.form.answer_type != right.form.answer_type:
                            continue
                        if len(made) >= self.max_conjunctions:
                            found.truncated = True
                            return made
                        both = np.intersect1d(left.ids, right.ids, assume_unique=True)
                        if len(both):
                            made.append(Candidate(Form(left.form.parts + right.form.parts), both))
        return made

    # -- written forms -------------------------------------------------------------------
    def parse(self, text: str, known: Sequence[Anchor] = ()) -> Form:
        """A form written in the path language (a name without quotes is read too: the words
        before a node type and an arrow); its anchors' names resolved among ``known`` (the
        query's entities) first, then among every node name. One :class:`HarnessError`
        naming what is wrong (a parser's error, fed back or recorded)."""
        text = text.strip()
        parts: list[Part] = []
        position = 0
        while True:
            match = _NAME.match(text, position) or self._bare.match(text, position)
            if match is None:
                raise harness.HarnessError(
                    f"form {text!r}: expected an entity name and a type at {text[position:][:40]!r} "
                    '(write "NAME" type -relation-> type)'
                )
            try:
                name = match.group("name") if match.re is self._bare else json.loads(match.group(0).strip())
            except json.JSONDecodeError:
                raise harness.HarnessError(f"form {text!r}: cannot read the name {match.group(0).strip()}") from None
            joint = _AND.search(text, match.end())
            end = joint.start() if joint else len(text)
            path = harness.RelationPath.parse(text[match.end() : end])
            path.check(self.skb)
            parts.append(Part(self._resolve(name, path.start_type, known), path))
            if joint is None:
                break
            position = joint.end()
        answer_types = {p.path.answer_type for p in parts}
        if len(answer_types) > 1:
            raise harness.HarnessError(
                f"form {text!r}: parts joined by AND end at different types {sorted(answer_types)}"
            )
        if not self._answers(parts[0].path.answer_type):
            wanted = ", ".join(self.skb.candidate_types)
            raise harness.HarnessError(f"form {text!r} answers {parts[0].path.answer_type}s; the answers are {wanted}")
        return Form(tuple(parts))

    def _resolve(self, name: str, node_type: str, known: Sequence[Anchor]) -> Anchor:
        key = normalise(name)
        for anchor in known:
            if normalise(anchor.name) == key and anchor.node_type == node_type:
                return anchor
        wanted = self.skb.node_type_names.index(node_type)
        mentions = self.linker.mentions(name)
        whole = mentions[0][1] if mentions and mentions[0][0] == key else []  # the name, not a part of it
        ids = [n for n in whole if self.skb.node_types[n] == wanted]
        if not ids:
            raise harness.HarnessError(f"no {node_type} named {name!r}")
        return Anchor(str(self.skb.names[ids[0]]), node_type, tuple(ids))

    def execute(self, form: Form) -> np.ndarray | None:
        """The nodes ``form`` answers (sorted ids), or None when a frontier passes ``max_answers``."""
        answers: np.ndarray | None = None
        for part in form.parts:
            reached = harness.reach(self.skb, np.asarray(part.anchor.ids), part.path.hops, limit=self.max_answers)
            if reached is None:
                return None
            answers = reached if answers is None else np.intersect1d(answers, reached, assume_unique=True)
        return answers if answers is not None else np.zeros(0, dtype=np.int64)

    def schema(self) -> list[str]:
        """Every typed relation the SKB holds, as one-hop paths (``package -depends-> package``):
        what a generator may write."""
        return harness.Schema.of(self.skb).lines()
