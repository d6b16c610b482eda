"""DAQu's metadata of a query, read from an SKB: the rows joined to it, table by table.

DAQu (Jeong et al.) treats a query as a row of a relational database and augments it with the
attribute values of the rows joined to it by foreign keys (its Eq. 4). An SKB has no query
rows: the query is joined to the graph through the entities it mentions. So here

* the query's **rows** are its linked entities (:class:`harness.EntityLinker`);
* a **table** is a relation as read from an entity ("maintains", "depends on", "required by"),
  its rows the neighbours through it; the entities' own fields are the table ``(self)``;
* a **column** is one field of a table's rows (the name, a summary, a description), a
  **feature** one row's value of it (a cell, DAQu's ``r_ij``).

Gathering is bounded whatever the SKB: at most ``max_entities`` entities, and per entity and
table at most ``max_per_relation`` rows (a sample seeded by the entity and the table, so the same
for every query; a maintainer of 2,000 packages contributes 20).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import harness

SELF = "(self)"  # the table of the linked entities' own fields (DAQu: the query row's own attributes)
NAME = "name"  # the pseudo-field of a node's name


@dataclass
class Table:
    """One relation's rows for a query: the neighbours kept, out of how many."""

    name: str
    rows: list[int] = field(default_factory=list)
    total: int = 0
    features: int = 0


@dataclass
class Metadata:
    """A query's linked entities and the features of its tables, each in one column."""

    entities: list[tuple[str, int]]  # (mention, node)
    tables: list[Table]
    texts: list[str]  # the features' values
    columns: np.ndarray  # each feature's column: an index into column_names
    column_names: list[tuple[str, str]]  # (table, field)

    @property
    def augmented(self) -> bool:
        return bool(self.texts)

    def details(self, skb: harness.SKB) -> dict[str, Any]:
        """What a researcher needs to see why the query was (not) augmented (JSON values)."""
        fallback = None
        if not self.entities:
            fallback = "no entity linked: the query's own representation"
        elif not self.texts:
            fallback = "the linked entities have no metadata: the query's own representation"
        return {
            "entities": [
                {"id": node, "name": str(skb.names[node]), "type": skb.node_type(node), "mention": mention}
                for mention, node in self.entities
            ],
            "tables": [
                {"table": t.name, "rows": len(t.rows), "of": t.total, "features": t.features}
                for t in self.tables
                if t.features
            ],
            "columns": len(self.column_names),
            "features": len(self.texts),
            "augmented": self.augmented,
            "fallback": fallback,
        }


class Gatherer:
    """Links a query to SKB entities and gathers their metadata, bounded (see the module)."""

    def __init__(
        self,
        skb: harness.SKB,
        *,
        max_entities: int = 5,
        max_ngram: int = 5,
        entity_types: Sequence[str] | None = None,
        max_per_relation: int = 20,
        fields: Sequence[str] | None = None,
        self_table: bool = True,
        max_chars: int = 1000,
        sample_seed: int = 0,
    ) -> None:
        keep = None
        if entity_types is not None:
            unknown = [t for t in entity_types if t not in skb.node_type_names]
            if unknown:
                raise harness.HarnessError(
                    f"daqu: entity_types {unknown} are not node types of SKB {skb.name!r} "
                    f"(it has: {', '.join(skb.node_type_names)})"
                )
            keep = [skb.node_type_names.index(t) for t in entity_types]
        self.skb = skb
        self.max_entities, self.max_per_relation = max_entities, max_per_relation
        self.fields = None if fields is None else list(fields)
        self.self_table, self.max_chars, self.sample_seed = self_table, max_chars, sample_seed
        self.linker = harness.EntityLinker(
            skb.names, max_ngram=max_ngram, types=skb.node_types if keep is not None else None, keep_types=keep
        )

    def link(self, text: str) -> list[tuple[str, int]]:
        """Up to ``max_entities`` (mention, node) pairs: longer mentions first, then left to right."""
        linked: list[tuple[str, int]] = []
        for mention, nodes in self.linker.mentions(text):
            linked.extend((mention, n) for n in nodes if all(n != m for _, m in linked))
        return linked[: self.max_entities]

    def rows(self, node: int) -> dict[str, tuple[np.ndarray, int]]:
        """``node``'s tables: per relation label, the neighbours kept (sorted) and how many there were."""
        tables: dict[str, tuple[np.ndarray, int]] = {}
        for label, ids in self.skb.relations(node).items():
            total = len(ids)
            if total > self.max_per_relation:
                rng = np.random.default_rng([self.sample_seed, node, zlib.crc32(label.encode("utf-8"))])
                ids = np.sort(rng.choice(ids, self.max_per_relation, replace=False))
            tables[label] = (ids, total)
        return tables

    def values(self, node: int) -> list[tuple[str, str]]:
        """``node``'s (field, value) features: its name and fields (``fields`` only, when given)."""
        record = self.skb.fields[node]
        names = [NAME, *record.keys()] if self.fields is None else self.fields
        found = []
        for name in names:
            value = self.skb.names[node] if name == NAME else record.get(name)
            if isinstance(value, list | tuple):
                value = ", ".join(str(v) for v in value if v not in (None, ""))
            text = "" if value is None else str(value).strip()
            if text:
                found.append((name, text[: self.max_chars]))
        return found

    def gather(self, text: str) -> Metadata:
        entities = self.link(text)
        tables: dict[str, Table] = {}
        if self.self_table and entities:
            tables[SELF] = Table(SELF, sorted({n for _, n in entities}), len({n for _, n in entities}))
        for _, node in entities:
            for label, (ids, total) in self.rows(node).items():
                table = tables.setdefault(label, Table(label))
                table.rows = sorted(set(table.rows) | set(ids.tolist()))
                table.total += total
        texts: list[str] = []
        columns: list[int] = []
        column_names: list[tuple[str, str]] = []
        index: dict[tuple[str, str], int] = {}
        for table in tables.values():
            for row in table.rows:
                for name, value in self.values(row):
                    key = (table.name, name)
                    if key not in index:
                        index[key] = len(column_names)
                        column_names.append(key)
                    texts.append(value)
                    columns.append(index[key])
                    table.features += 1
        return Metadata(entities, list(tables.values()), texts, np.asarray(columns, dtype=np.int64), column_names)
