"""The kit's data: one tiny SKB (and a star of any size), the ``tiny`` dataset over it, and
``tiny-train`` with train/val/test splits for trained retrievers."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.dataset import Dataset
from harness.queries import Query, QuerySet
from harness.skb import SKB, EdgeType


def tiny_skb() -> SKB:
    """Five products and two brands, shaped like real data: a multi-edge, a self-loop, a node
    without fields, unicode, a list-valued field. Products are the candidates.

    ===  =============  ======================================================
    id   name           fields
    ===  =============  ======================================================
    0    red kettle     an electric kettle in red, boils water fast; tags
    1    blue kettle    a blue stovetop kettle that whistles
    2    green teapot   a glass teapot for green tea — 茶
    3    steel pan      a steel frying pan
    4    copper pot     (none)
    5    Acme           (none): a brand
    6    Glöbex         country: Deutschland
    ===  =============  ======================================================

    Edges: 0, 1 made_by Acme; 2, 3, 4 made_by Glöbex; 0 similar 1 (twice); 3 similar 3."""
    names = ["red kettle", "blue kettle", "green teapot", "steel pan", "copper pot", "Acme", "Glöbex"]
    fields: list[dict[str, Any]] = [
        {"description": "an electric kettle in red, boils water fast", "tags": ["kitchen", "electric"]},
        {"description": "a blue stovetop kettle that whistles"},
        {"description": "a glass teapot for green tea — 茶"},
        {"description": "a steel frying pan"},
        {},
        {},
        {"country": "Deutschland"},
    ]
    src = np.array([0, 1, 2, 3, 4, 0, 0, 3])
    dst = np.array([5, 5, 6, 6, 6, 1, 1, 3])
    edge_type = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    return SKB(
        name="tiny",
        node_type_names=["product", "brand"],
        node_types=np.array([0, 0, 0, 0, 0, 1, 1]),
        names=names,
        fields=fields,
        edge_types=[EdgeType("made_by", "brand", "makes"), EdgeType("similar", "similar to")],
        src=src,
        dst=dst,
        edge_type=edge_type,
        candidate_types=["product"],
    )


def star_skb(leaves: int, chain: bool = True) -> SKB:
    """A hub brand (node 0) making ``leaves`` products (nodes 1…): one node of huge degree, to
    test that a retriever's graph work stays within its bounds. ``chain``: each product is also
    ``similar`` to the next (paths longer than one hop that avoid the hub)."""
    products = np.arange(1, leaves + 1)
    chained = products[:-1] if chain else products[:0]
    return SKB(
        name="star",
        node_type_names=["product", "brand"],
        node_types=np.array([1] + [0] * leaves),
        names=["hub", *(f"product {i}" for i in products)],
        fields=[{"country": "here"}, *({"description": f"thing {i}", "tags": ["a", "b"]} for i in products)],
        edge_types=[EdgeType("made_by", "made by", "makes")] + ([EdgeType("similar", "similar to")] if chain else []),
        src=np.concatenate([products, chained]),
        dst=np.concatenate([np.zeros(leaves, dtype=np.int64), chained + 1]),
        edge_type=np.concatenate([np.zeros(leaves, dtype=np.int64), np.ones(len(chained), dtype=np.int64)]),
        candidate_types=["product"],
    )


TINY_QUERIES: list[tuple[int, str, tuple[int, ...]]] = [
    (1, "red kettle that boils water", (0,)),
    (2, "kettle", (0, 1)),
    (3, "copper pot for soups", (4,)),
    (4, "glass teapot", (2,)),
    (5, "something by Glöbex", (2, 3, 4)),
    (6, "a brand", (5,)),  # answered only by a non-candidate
]


class TinyDataset(Dataset):
    """:func:`tiny_skb` with six queries in a ``test`` split and four in ``train``."""

    name = "tiny"

    def load_skb(self) -> SKB:
        return tiny_skb()

    def load_queries(self) -> QuerySet:
        queries = [Query(q, text, answers) for q, text, answers in TINY_QUERIES]
        return QuerySet("tiny", {"test": queries, "train": queries[:4]})

    def known_splits(self) -> list[str]:
        return self.load_queries().split_names  # in memory: as cheap as a declaration


TINY_TRAIN: list[tuple[int, str, tuple[int, ...]]] = [
    (101, "electric kettle", (0,)),
    (102, "whistling stovetop kettle", (1,)),
    (103, "teapot for tea", (2,)),
    (104, "frying pan made of steel", (3,)),
    (105, "a pot made of copper", (4,)),
    (106, "kettle from Acme", (0, 1)),
    (107, "Glöbex cookware", (2, 3, 4)),
    (108, "boil water quickly", (0,)),
]
TINY_VAL: list[tuple[int, str, tuple[int, ...]]] = [(201, "green tea pot", (2,)), (202, "pan for frying", (3,))]


class TinyTrainDataset(TinyDataset):
    """:func:`tiny_skb` for trained retrievers: ``train`` (eight queries), ``val`` (two) and
    ``test`` (the six of :class:`TinyDataset`), no query in two splits."""

    name = "tiny-train"

    def load_queries(self) -> QuerySet:
        def split(rows: list[tuple[int, str, tuple[int, ...]]]) -> list[Query]:
            return [Query(q, text, answers) for q, text, answers in rows]

        return QuerySet("tiny-train", {"train": split(TINY_TRAIN), "val": split(TINY_VAL), "test": split(TINY_QUERIES)})
