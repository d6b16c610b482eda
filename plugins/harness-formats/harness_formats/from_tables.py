"""Node and edge tables → an SKB: one node per row of a node table (an id, a type, a name, and
every other column a text field), one edge per row of an edge table (source id, target id,
type; repeated rows are repeated edges).

CSV and TSV tables are read whole (:mod:`harness_formats.columnar`) and checked a column at a
time; any fault sends the table back through the row-by-row reader, whose error names the file,
row and column. Both give the same SKB."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness_formats.build import SKBBuilder
from harness_formats.columnar import read_columns, row_number
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
    with track(f"nodes {path.name}", table) as progress:
        if _nodes_whole(builder, table, columns, node_type, field_columns):
            progress(table.total)
            return path
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
    with track(f"edges {path.name}", table) as progress:
        if _edges_whole(builder, table, columns, edge_type):
            progress(table.total)
            return path
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


# -- whole tables: the same result as the row loops above, or False and nothing changed ----------


def _nodes_whole(
    builder: SKBBuilder, table: Table, columns: TableColumns, node_type: str | None, field_columns: list[str]
) -> bool:
    data = read_columns(table)
    if data is None or not data.num_rows:
        return False
    ids = [value.strip() for value in data.column(columns.id).to_pylist()]
    # every fault read_nodes and add_node raise, checked at once (the row loop then names it)
    unique = set(ids)
    joined = "\x00".join(ids)  # one C scan for line breaks, not a million
    if "" in unique or len(unique) != len(ids) or not unique.isdisjoint(builder.index):
        return False
    if "\n" in joined or "\r" in joined:
        return False
    del unique, joined
    if node_type is None:
        types = [value.strip() for value in data.column(columns.type).to_pylist()]
        if "" in types:
            return False
    else:
        types = [node_type] * len(ids)
    names = [value.strip() for value in data.column(columns.name).to_pylist()]
    values = [data.column(c).to_pylist() for c in field_columns]
    del data  # the text now lives in Python strings; the table's buffers go
    # a cell is a field when not empty (text() of a CSV cell), in column order
    fields = [{c: v for c, v in zip(field_columns, row, strict=True) if v} for row in zip(*values, strict=True)]
    if not field_columns:
        fields = [{} for _ in ids]
    del values
    source = builder.source(lambda index: table.where(row_number(table, index), columns.id))
    builder.add_nodes(ids, types, names, fields, source)
    return True


def _edges_whole(builder: SKBBuilder, table: Table, columns: TableColumns, edge_type: str | None) -> bool:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    data = read_columns(table)
    if data is None or not data.num_rows:
        return False
    ends = []
    for column in (columns.src, columns.dst):
        values = data.column(column)
        found = pc.index_in(values, value_set=builder.id_array())
        numbers = pc.fill_null(found, -1).to_numpy().astype(np.int64)
        missing = np.flatnonzero(numbers < 0)
        if len(missing):
            # the row loop strips a cell before looking it up: " b1" is b1; anything else is a fault
            cells = values.take(pa.array(missing)).to_pylist()
            for position, cell in zip(missing.tolist(), cells, strict=True):
                number = builder.index.get(cell.strip())
                if number is None:
                    return False
                numbers[position] = number
        ends.append(numbers)
    if edge_type is not None:
        relations = np.full(len(ends[0]), builder.relation(edge_type), dtype=np.int32)
    else:
        kinds = data.column(columns.edge_type)
        distinct = pc.unique(kinds)  # in order of first appearance, as the row loop meets them
        names = [value.strip() for value in distinct.to_pylist()]
        if "" in names:
            return False
        numbers = np.array([builder.relation(name) for name in names], dtype=np.int32)
        relations = numbers[pc.index_in(kinds, value_set=distinct).to_numpy()]
    builder.add_edges(ends[0], ends[1], relations)
    return True
