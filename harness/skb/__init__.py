"""Semi-structured knowledge bases: typed nodes with text, joined by typed relations.

``base``: the :class:`SKB` (graph in flat CSR arrays, documents built when asked) and its files
(``save``, ``parse``); ``arrays``: relation types and the edge sorting it is built from;
``compiled``: an SKB's files compiled into the cache, memory-mapped on ``SKB.load``.
"""

from harness.skb.arrays import EdgeType, compact_text, row_offsets, sort_edges
from harness.skb.base import FORMAT, SKB, Direction

__all__ = ["FORMAT", "SKB", "Direction", "EdgeType", "compact_text", "row_offsets", "sort_edges"]
