"""Structure over an SKB that retrievers share: entity linking and typed relation paths.

* :class:`EntityLinker` — a query's n-grams (longest first, not overlapping) looked up among
  the normalised names of every node; memory-bounded for SKBs of millions of nodes.
* :class:`Schema` — every (source type, relation, target type) some edge has: what a parser
  is told, what path enumeration walks, and what a written path is checked against.
* :class:`RelationPath` — a typed path written ``type -relation-> type <-relation- type``
  (``->`` follows edges from source to target, ``<-`` from target to source; on undirected
  SKBs such as STaRK's both read the same), checked against an SKB's schema, and
  :func:`reach`, which executes one from a start node.

Synthesis templates, graph retrievers and semantic parsers all speak this one path language,
so a path a parser writes is the same object a template grounds and a ranker scores.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from harness.errors import HarnessError
from harness.skb import SKB

__all__ = ["STOPWORDS", "EntityLinker", "Hop", "RelationPath", "Schema", "normalize_name", "reach", "words"]

_WORD = re.compile(r"\w+")
#: Words that alone never name an entity ("the", "for"): an n-gram made only of them is skipped.
STOPWORDS = frozenset(
    "a an and are as at be by for from has have i in is it its me my of on or that the this to was what which who "
    "with any some can could would should do does you your our we they them there their these those not no".split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (NFKC, case-folded): what names and queries are matched on."""
    return _WORD.findall(unicodedata.normalize("NFKC", str(text)).casefold())


def normalize_name(text: str) -> str:
    """``text`` as :class:`EntityLinker` matches names: its words, NFKC, case-folded, one space apart."""
    return " ".join(words(text))


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


class EntityLinker:
    """Exact matching of a query's n-grams against node names.

    The index holds a 64-bit hash of each normalised name and the node it names, in two sorted
    arrays (16 bytes a name: 30 MB for MAG's 1.9M nodes, where a dict of strings would take
    hundreds); a query's n-grams are looked up all at once.

    Args:
        names: one name per node (``SKB.names``).
        max_ngram: names of more words are never matched (long product titles are not mentioned
            verbatim, and leaving them out keeps the index small).
        min_chars: shorter names are left out ("a", "x").
        max_per_name: a name shared by more nodes links to the first of them only (ids ascending).
        types: when given (one type index per node) with ``keep_types``, only nodes of those types
            are linked.
    """

    def __init__(
        self,
        names: Sequence[str],
        max_ngram: int = 5,
        min_chars: int = 3,
        max_per_name: int = 3,
        types: np.ndarray | None = None,
        keep_types: Sequence[int] | None = None,
    ) -> None:
        self.max_ngram = max_ngram
        wanted = None if types is None or keep_types is None else np.isin(types, list(keep_types))
        keys, ids = [], []
        for node in range(len(names)):
            if wanted is not None and not wanted[node]:
                continue
            tokens = words(names[node])
            if not tokens or len(tokens) > max_ngram or all(t in STOPWORDS for t in tokens):
                continue
            key = " ".join(tokens)
            if len(key) >= min_chars:
                keys.append(_hash(key))
                ids.append(node)
        keys_array, ids_array = np.asarray(keys, dtype=np.uint64), np.asarray(ids, dtype=np.int64)
        order = np.lexsort((ids_array, keys_array))
        keys_array, ids_array = keys_array[order], ids_array[order]
        starts = np.flatnonzero(np.r_[True, keys_array[1:] != keys_array[:-1]]) if len(keys_array) else np.zeros(0, int)
        rank = np.arange(len(keys_array)) - np.repeat(starts, np.diff(np.r_[starts, len(keys_array)]))
        keep = rank < max_per_name
        self.keys, self.ids = keys_array[keep], ids_array[keep]

    def mentions(self, text: str) -> list[tuple[str, list[int]]]:
        """The mentions found in ``text`` and the nodes each names: longer mentions first, then
        left to right; a word belongs to one mention at most, and a mention said twice is
        listed once (it names the same nodes: a repeated entity is one entity)."""
        tokens = words(text)
        spans = [
            (start, start + n)
            for n in range(min(self.max_ngram, len(tokens)), 0, -1)
            for start in range(len(tokens) - n + 1)
        ]
        if not spans or not len(self.keys):
            return []
        hashes = np.asarray([_hash(" ".join(tokens[a:b])) for a, b in spans], dtype=np.uint64)
        lo = np.searchsorted(self.keys, hashes, side="left")
        hi = np.searchsorted(self.keys, hashes, side="right")
        taken = np.zeros(len(tokens), dtype=bool)
        found: list[tuple[str, list[int]]] = []
        for (a, b), first, last in zip(spans, lo.tolist(), hi.tolist(), strict=True):
            if first == last or taken[a:b].any():
                continue
            taken[a:b] = True
            mention = " ".join(tokens[a:b])
            if all(mention != seen for seen, _ in found):
                found.append((mention, [int(i) for i in self.ids[first:last]]))
        return found

    def link(self, text: str, limit: int) -> np.ndarray:
        """Up to ``limit`` node ids named in ``text``, in :meth:`mentions` order."""
        linked: list[int] = []
        for _, nodes in self.mentions(text):
            linked.extend(n for n in nodes if n not in linked)
        return np.asarray(linked[:limit], dtype=np.int64)


_STEP = re.compile(r"\s*(-(?P<out>[\w]+)->|<-(?P<in>[\w]+)-)\s*(?P<type>[\w/]+)")


@dataclass(frozen=True)
class Hop:
    relation: str
    direction: Literal["out", "in"]
    node_type: str

    def __str__(self) -> str:
        arrow = f"-{self.relation}->" if self.direction == "out" else f"<-{self.relation}-"
        return f"{arrow} {self.node_type}"


@dataclass(frozen=True)
class RelationPath:
    """A start type and the hops that follow it: ``maintainer <-maintained_by- package -depends-> package``."""

    start_type: str
    hops: tuple[Hop, ...]

    @classmethod
    def parse(cls, spec: str) -> RelationPath:
        start, _, rest = spec.strip().partition(" ")
        hops, position = [], 0
        while position < len(rest):
            match = _STEP.match(rest, position)
            if match is None:
                raise HarnessError(f"relation path {spec!r}: cannot read {rest[position:]!r}")
            direction: Literal["out", "in"] = "out" if match.group("out") else "in"
            hops.append(Hop(match.group("out") or match.group("in"), direction, match.group("type")))
            position = match.end()
        if not start or not hops:
            raise HarnessError(f"relation path {spec!r} has no relation (write 'type -relation-> type')")
        return cls(start, tuple(hops))

    def __str__(self) -> str:
        return " ".join([self.start_type, *(str(h) for h in self.hops)])

    @property
    def answer_type(self) -> str:
        return self.hops[-1].node_type

    def check(self, skb: SKB) -> None:
        """Raise one :class:`HarnessError` naming the first type or relation ``skb`` lacks, and
        what it has instead (a parser's error fed back to it reads this)."""
        relations = {e.name for e in skb.edge_types}
        for node_type in [self.start_type, *(h.node_type for h in self.hops)]:
            if node_type not in skb.node_type_names:
                raise HarnessError(f"path {self}: no node type {node_type!r}; types: {', '.join(skb.node_type_names)}")
        for hop in self.hops:
            if hop.relation not in relations:
                known = ", ".join(sorted(relations))
                raise HarnessError(f"path {self}: no relation {hop.relation!r}; relations: {known}")


def reach(skb: SKB, start: int | np.ndarray, hops: Sequence[Hop], limit: int | None = None) -> np.ndarray | None:
    """The nodes ``hops`` lead to from ``start`` (one node or several), each hop keeping only
    nodes of its type; sorted ids. None when a frontier grows past ``limit`` nodes (a path
    through a hub: too broad to execute, and too broad to be an answer set)."""
    frontier = np.unique(np.atleast_1d(np.asarray(start, dtype=np.int64)))
    for hop in hops:
        if hop.node_type not in skb.node_type_names:
            raise HarnessError(f"SKB {skb.name!r} has no node type {hop.node_type!r}")
        wanted = skb.node_type_names.index(hop.node_type)
        found = [skb.neighbors(int(n), hop.relation, hop.direction) for n in frontier]
        frontier = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
        frontier = frontier[skb.node_types[frontier] == wanted]
        if limit is not None and len(frontier) > limit:
            return None
    return frontier


@dataclass(frozen=True)
class Schema:
    """The SKB's schema as its edges show it: every (source type, relation, target type) that
    some edge has (``Schema.of(skb)``: one pass over the edge arrays), and which relations are
    followed both ways (symmetric ones; all of them in an undirected SKB)."""

    node_types: tuple[str, ...]
    candidate_types: tuple[str, ...]
    triples: tuple[tuple[str, str, str], ...]
    symmetric: frozenset[str]
    #: the index of one edge per triple (a real example of it)
    examples: tuple[int, ...] = ()

    @classmethod
    def of(cls, skb: SKB) -> Schema:
        types, kinds = skb.node_types.astype(np.int64), len(skb.node_type_names)
        keys = (skb.edge_type.astype(np.int64) * kinds + types[skb.src]) * kinds + types[skb.dst]
        present, first = np.unique(keys, return_index=True)
        triples = []
        for key in present.tolist():
            relation, rest = divmod(key, kinds * kinds)
            source, target = divmod(rest, kinds)
            triples.append((skb.node_type_names[source], skb.edge_types[relation].name, skb.node_type_names[target]))
        symmetric = frozenset(e.name for e in skb.edge_types if skb.undirected or e.symmetric)
        return cls(
            tuple(skb.node_type_names),
            tuple(skb.candidate_types),
            tuple(triples),
            symmetric,
            tuple(first.tolist()),
        )

    def lines(self) -> list[str]:
        """``source -relation-> target``, one per triple."""
        return [f"{s} -{r}-> {t}" for s, r, t in self.triples]

    def joins(self, relation: str) -> list[str]:
        return [f"{s} -{r}-> {t}" for s, r, t in self.triples if r == relation]

    def steps(self, node_type: str) -> list[Hop]:
        """Every hop an edge allows from ``node_type`` (both ways along a symmetric relation)."""
        found: list[Hop] = []
        for source, relation, target in self.triples:
            both = relation in self.symmetric
            if source == node_type:
                found.append(Hop(relation, "out", target))
                if both and target != node_type:
                    found.append(Hop(relation, "in", target))
            if target == node_type:
                found.append(Hop(relation, "in", source))
                if both and source != node_type:
                    found.append(Hop(relation, "out", source))
        return list(dict.fromkeys(found))

    def check(self, path: RelationPath) -> None:
        """Raise one :class:`HarnessError` unless every hop of ``path`` follows edges the SKB has,
        in the direction written; the message says which way the relation's edges go."""
        known = set(self.node_types)
        for node_type in [path.start_type, *(h.node_type for h in path.hops)]:
            if node_type not in known:
                raise HarnessError(f"path {path}: no node type {node_type!r}; types: {', '.join(self.node_types)}")
        here = path.start_type
        for hop in path.hops:
            if not self.joins(hop.relation):
                relations = ", ".join(sorted({r for _, r, _ in self.triples}))
                raise HarnessError(f"path {path}: no relation {hop.relation!r}; relations: {relations}")
            if hop not in self.steps(here):
                arrow = str(hop).split(" ")[0]
                raise HarnessError(
                    f"path {path}: no edge leads {here} {arrow} {hop.node_type}; {hop.relation} edges go "
                    f"{'; '.join(self.joins(hop.relation))} (-{hop.relation}-> follows them from source to "
                    f"target, <-{hop.relation}- from target to source)"
                )
            here = hop.node_type
