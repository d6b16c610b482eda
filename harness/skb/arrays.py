"""The arrays an SKB is made of: relation types, edges sorted for CSR, row offsets, and
STaRK's way of folding a document onto one line."""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

import numpy as np

#: set while the compiled cache opens an SKB whose layout it wrote itself and whose entry's
#: digests were verified: the linear checks of ``indptr`` (re-counting every edge) are skipped
#: then, the constant-time ones kept
TRUSTED_LAYOUT: ContextVar[bool] = ContextVar("harness_skb_trusted_layout", default=False)


@dataclass(frozen=True)
class EdgeType:
    """A relation. ``label`` reads source→target ("depends on"); ``inverse_label`` reads
    target→source ("required by"). A symmetric relation has ``inverse_label=None``."""

    name: str
    label: str | None = None
    inverse_label: str | None = None

    @property
    def symmetric(self) -> bool:
        return self.inverse_label is None

    def text(self, direction: Literal["out", "in"]) -> str:
        if direction == "in" and self.inverse_label is not None:
            return self.inverse_label
        return self.label or self.name.replace("_", " ")


def row_offsets(sources: np.ndarray, num_nodes: int) -> np.ndarray:
    """CSR row offsets: where each node's edges start in edges sorted by source."""
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(sources, minlength=num_nodes), out=indptr[1:])
    return indptr


def sort_edges(src: np.ndarray, dst: np.ndarray, edge_type: np.ndarray) -> tuple[np.ndarray, ...]:
    """The edges ordered by (source, relation, target): the layout an :class:`SKB` given
    ``indptr`` reads in place. A total order, so the result does not depend on the input's."""
    src, dst, edge_type = (np.asarray(a, dtype=np.int64) for a in (src, dst, edge_type))
    if not len(src):
        return src, dst, edge_type
    n = int(max(src.max(), dst.max())) + 1
    t = int(edge_type.max()) + 1
    if src.min() >= 0 and edge_type.min() >= 0 and n * n * t < 2**62:
        # One sort of packed int64 keys, several times faster than an argsort or a lexsort.
        keys = np.sort((src * t + edge_type) * n + dst)
        head, dst = np.divmod(keys, n)
        src, edge_type = np.divmod(head, t)
        return src, dst, edge_type
    order = np.lexsort((dst, edge_type, src))
    return src[order], dst[order], edge_type[order]


def compact_text(text: str) -> str:
    """Fold a "- key: value" document onto one line, as STaRK's ``compact_text`` does."""
    text = text.replace("\n", ". ").replace("\r", "")
    text = text.replace("- ", "")
    text = text.replace(": .", ":").replace(":.", ":")
    text = re.sub(r"\s{2,}", " ", text)
    return text.replace(".. ", ". ")


class CSR:
    """Neighbours of every node, grouped by node then relation, in three flat arrays."""

    def __init__(self, neighbors: np.ndarray, types: np.ndarray, indptr: np.ndarray) -> None:
        self.neighbors, self.types, self.indptr = neighbors, types, indptr

    @classmethod
    def build(cls, keys: np.ndarray, values: np.ndarray, types: np.ndarray, num_nodes: int) -> CSR:
        # One int64 sort key (node, relation) is several times faster than a lexsort.
        order = np.argsort(keys * (int(types.max(initial=0)) + 1) + types, kind="stable")
        return cls(values[order], types[order], row_offsets(keys, num_nodes))

    def row(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[node], self.indptr[node + 1]
        return self.neighbors[lo:hi], self.types[lo:hi]
