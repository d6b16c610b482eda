"""Structure over an SKB that retrievers share: entity linking and typed relation paths.

* :class:`EntityLinker` — a query's n-grams (longest first, not overlapping) looked up among
  the normalised names of every node; memory-bounded for SKBs of millions of nodes.
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

import numpy as np

from harness.errors import HarnessError
from harness.skb import SKB

__all__ = ["STOPWORDS", "EntityLinker", "Hop", "RelationPath", "reach", "words"]

_WORD = re.compile(r"\w+")
#: Words that alone never name an entity ("the", "for"): an n-gram made only of them is skipped.
STOPWORDS = frozenset(
    "a an and are as at be by for from has have i in is it its me my of on or that the this to was what which who "
    "with any some can could would should do does you your our we they them there their these those not no".split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (NFKC, case-folded): what names and queries are matched on."""
    return _WORD.findall(unicodedata.normalize("NFKC", str(text)).casefold())


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
        left to right; a word belongs to one mention at most."""
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
            found.append((" ".join(tokens[a:b]), [int(i) for i in self.ids[first:last]]))
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
    direction: str  # "out" or "in"
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
            direction = "out" if match.group("out") else "in"
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
        found = [skb.neighbors(int(n), hop.relation, hop.direction) for n in frontier]  # type: ignore[arg-type]
        frontier = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
        frontier = frontier[skb.node_types[frontier] == wanted]
        if limit is not None and len(frontier) > limit:
            return None
    return frontier
