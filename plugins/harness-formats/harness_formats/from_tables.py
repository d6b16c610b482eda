"""Node and edge tables → an SKB: one node per row of a node table (an id, a type, a name, and
every other column a text field), one edge per row of an edge table (source id, target id,
type; repeated rows are repeated edges)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness_formats.build import SKBBuilder
from harness_formats.tables import Table, open_table, scalar, text


@dataclass(frozen=True)
class TableColumns:
    """Column names of the node and edge tables (options of ``harness import tables``)."""

    id: str = "id"
    type: str = "type"
    name: str = "name"
    src: str = "src"
    dst: str = "dst"
    edge_type: str = "type"


def typed_file(spec: str) -> tuple[str | None, Path]:
    """``[TYPE=]FILE`` → (TYPE or None, FILE). A name holding ``=`` that is an existing file is
    read as a file."""
    if "=" in spec and not Path(spec).exists():
        kind, _, path = spec.partition("=")
        if kind.strip() and path:
            return kind.strip(), Path(path)
    return None, Path(spec)


def _cell(table: Table, row: int, values: dict[str, Any], column: str, what: str) -> str:
    value = (scalar(values.get(column)) or "").strip()
    if not value:
        raise harness.HarnessError(f"{table.where(row, column)}: empty {what}")
    return value


def read_nodes(builder: SKBBuilder, spec: str, columns: TableColumns, track: Callable[..., Any]) -> Path:
    node_type, path = typed_file(spec)
    table = open_table(path)
    needed = {columns.id: "--id-column", columns.name: "--name-column"}
    if node_type is None:
        needed[columns.type] = "--type-column, or --nodes TYPE=FILE"
    table.require(needed)
    # with TYPE=FILE a type column, if any, is text like the others
    reserved = {columns.id, columns.name} | ({columns.type} if node_type is None else set())
    field_columns = [c for c in table.columns if c not in reserved]
    source = builder.source(lambda row: table.where(row, columns.id))
    count = 0
    with track(f"nodes {path.name}", table) as progress:
        for row, values in table.rows(progress):
            node_id = _cell(table, row, values, columns.id, "node id")
            kind = node_type or _cell(table, row, values, columns.type, "node type")
            name = (scalar(values.get(columns.name)) or "").strip()
            fields = {c: value for c in field_columns if (value := text(values.get(c))) is not None}
            builder.add_node(node_id, kind, name, fields, source, row)
            count += 1
    if not count:
        raise harness.HarnessError(f"{path}: no rows (an empty node table)")
    return path


def read_edges(builder: SKBBuilder, spec: str, columns: TableColumns, track: Callable[..., Any]) -> Path:
    edge_type, path = typed_file(spec)
    table = open_table(path)
    needed = {columns.src: "--src-column", columns.dst: "--dst-column"}
    if edge_type is None:
        needed[columns.edge_type] = "--edge-type-column, or --edges TYPE=FILE"
    table.require(needed)
    relation = None if edge_type is None else builder.relation(edge_type)
    index, count = builder.index, 0
    with track(f"edges {path.name}", table) as progress:
        for row, values in table.rows(progress):
            # the common case first, without building an error's words (a million edges or more)
            ends = []
            for column, what in ((columns.src, "source id"), (columns.dst, "target id")):
                value = values.get(column)
                node = index.get(value.strip()) if isinstance(value, str) else None
                if node is None:
                    node = builder.node(_cell(table, row, values, column, what), table.where(row, column))
                ends.append(node)
            if relation is None:
                kind = builder.relation(_cell(table, row, values, columns.edge_type, "edge type"))
            else:
                kind = relation
            builder.add_edge(ends[0], ends[1], kind)
            count += 1
    if not count:
        raise harness.HarnessError(f"{path}: no rows (an empty edge table)")
    return path
