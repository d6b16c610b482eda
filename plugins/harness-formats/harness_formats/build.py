"""What both importers share: collecting nodes and edges under their own ids, reading the query
table against them, and writing ``DIR/skb`` + ``DIR/qa`` in one step.

Node ids are the user's strings; the SKB numbers nodes ``0 .. n-1`` in the order they were
added, and ``DIR/node_ids.txt`` keeps the user's id of each (line ``i`` is node ``i``).
"""

from __future__ import annotations

import csv
import json
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from harness_formats.staging import output_dir
from harness_formats.tables import Table, scalar

#: split names become file names (qa/split/<name>.index)
SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def reverse_label(name: str) -> str:
    """How a relation reads from its target: every imported relation is directed."""
    return f"{name.replace('_', ' ')} (reverse)"


class SKBBuilder:
    """Nodes and edges as they are read, checked as they come: a duplicate id names both rows."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        # where each node was read (a source and its row), for the error on a duplicate
        self._sources: list[Callable[[int], str]] = []
        self._source = array("i")
        self._row = array("q")
        self.type_names: list[str] = []
        self._type_index: dict[str, int] = {}
        self.node_types = array("i")
        self.names: list[str] = []
        self.fields: list[dict[str, Any]] = []
        self.edge_types: list[harness.EdgeType] = []
        self._edge_index: dict[str, int] = {}
        # edges added one at a time, then whole tables (add_edges) as numpy parts, in order
        self.src, self.dst, self.edge_type = array("q"), array("q"), array("i")
        self._edge_parts: list[tuple[Any, Any, Any]] = []
        self._id_array: Any = None  # the ids as a pyarrow array (edge look-ups), while no node is added

    def source(self, where: Callable[[int], str]) -> int:
        """Register a table: ``where(row)`` says where its row ``row`` is, in an error's words."""
        self._sources.append(where)
        return len(self._sources) - 1

    def add_node(self, node_id: str, node_type: str, name: str, fields: dict[str, Any], source: int, row: int) -> int:
        if node_id in self.index:
            first = self.index[node_id]
            raise harness.HarnessError(
                f"{self._sources[source](row)}: duplicate node id {node_id!r} "
                f"(first at {self._sources[self._source[first]](self._row[first])})"
            )
        if "\n" in node_id or "\r" in node_id:
            raise harness.HarnessError(f"{self._sources[source](row)}: a node id cannot hold a line break: {node_id!r}")
        number = len(self.ids)
        self.index[node_id] = number
        self.ids.append(node_id)
        self._source.append(source)
        self._row.append(row)
        if node_type not in self._type_index:
            self._type_index[node_type] = len(self.type_names)
            self.type_names.append(node_type)
        self.node_types.append(self._type_index[node_type])
        self.names.append(name or node_id)
        self.fields.append(fields)
        return number

    def add_nodes(
        self, ids: list[str], types: list[str], names: list[str], fields: list[dict[str, Any]], source: int
    ) -> None:
        """A whole table's nodes, checked by the caller as :meth:`add_node` checks one (ids
        stripped, unique here and among the nodes before, without line breaks). Their rows in
        ``source`` are their positions in the table (its ``where`` maps them)."""
        start = len(self.ids)
        self.index.update(zip(ids, range(start, start + len(ids)), strict=True))
        self.ids.extend(ids)
        self._source.extend(array("i", [source]) * len(ids))
        self._row.extend(array("q", range(len(ids))))
        for kind in dict.fromkeys(types):
            if kind not in self._type_index:
                self._type_index[kind] = len(self.type_names)
                self.type_names.append(kind)
        codes = self._type_index
        self.node_types.extend(array("i", [codes[kind] for kind in types]))
        self.names.extend(name or node_id for name, node_id in zip(names, ids, strict=True))
        self.fields.extend(fields)
        self._id_array = None

    def id_array(self) -> Any:
        """Every node id as a pyarrow array (the value set whole edge tables are looked up in)."""
        import pyarrow as pa

        if self._id_array is None or len(self._id_array) != len(self.ids):
            self._id_array = pa.array(self.ids, type=pa.string())
        return self._id_array

    def node(self, node_id: str, where: str, role: str = "node") -> int:
        number = self.index.get(node_id)
        if number is None:
            raise harness.HarnessError(f"{where}: no {role} {node_id!r} among the {len(self.ids):,} nodes read")
        return number

    def relation(self, name: str, label: str | None = None, inverse_label: str | None = None) -> int:
        if name not in self._edge_index:
            self._edge_index[name] = len(self.edge_types)
            inverse = inverse_label or reverse_label(label or name)
            self.edge_types.append(harness.EdgeType(name, label, inverse))
        return self._edge_index[name]

    def add_edge(self, src: int, dst: int, relation: int) -> None:
        self.src.append(src)
        self.dst.append(dst)
        self.edge_type.append(relation)

    def add_edges(self, src: Any, dst: Any, relation: Any) -> None:
        """A whole table's edges (numpy arrays of node numbers and relations), after those added so far."""
        self._flush_edges()
        self._edge_parts.append((src, dst, relation))

    def _flush_edges(self) -> None:
        import numpy as np

        if len(self.src):
            self._edge_parts.append((np.asarray(self.src), np.asarray(self.dst), np.asarray(self.edge_type)))
            self.src, self.dst, self.edge_type = array("q"), array("q"), array("i")

    def edges(self) -> tuple[Any, Any, Any]:
        """src, dst, edge_type: every edge in the order added, as int64, int64, int32 arrays."""
        import numpy as np

        self._flush_edges()
        parts = self._edge_parts or [(np.zeros(0, np.int64),) * 3]
        src, dst, edge_type = (
            np.concatenate([p[i] for p in parts], dtype=dtype) for i, dtype in enumerate((np.int64, np.int64, np.int32))
        )
        self._edge_parts = [(src, dst, edge_type)]  # one part: the copies made here, the SKB's own
        return src, dst, edge_type

    def candidate_types(self, wanted: Sequence[str]) -> list[str]:
        unknown = [t for t in wanted if t not in self.type_names]
        if unknown:
            raise harness.HarnessError(
                f"--candidates: no node type {', '.join(map(repr, unknown))}; the types read: "
                f"{', '.join(self.type_names)}"
            )
        return list(dict.fromkeys(wanted)) or list(self.type_names)

    def skb(self, name: str, candidates: Sequence[str], description: str) -> harness.SKB:
        import numpy as np

        src, dst, edge_type = self.edges()
        return harness.SKB(
            name=name,
            description=description,
            node_type_names=self.type_names,
            node_types=np.frombuffer(self.node_types, dtype=np.int32) if len(self.node_types) else np.zeros(0),
            names=self.names,
            fields=self.fields,
            edge_types=self.edge_types,
            src=src,
            dst=dst,
            edge_type=edge_type,
            candidate_types=self.candidate_types(candidates),
        )


@dataclass(frozen=True)
class QueryColumns:
    """The query table's column names (options of ``harness import``)."""

    id: str = "id"
    text: str = "query"
    answers: str = "answer_ids"
    split: str = "split"
    #: every query's split when the table has no split column
    default_split: str | None = None


@dataclass
class ImportedQuery:
    source_id: str
    text: str
    answers: tuple[int, ...]
    split: str
    row: int


@dataclass
class Queries:
    items: list[ImportedQuery] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(Counter(q.split for q in self.items))


def answer_list(value: Any, where: str) -> list[str]:
    """Answer ids from a cell: a list (JSON Lines, Parquet), a JSON list, or ``a;b;c``."""
    items: list[str | None] | list[str]
    if isinstance(value, list | tuple):
        items = [scalar(v) for v in value]
    else:
        cell = (scalar(value) or "").strip()
        if cell.startswith("["):
            try:
                parsed = json.loads(cell)
            except ValueError as exc:
                raise harness.HarnessError(f"{where}: not a JSON list: {cell!r} ({exc})") from None
            if not isinstance(parsed, list):
                raise harness.HarnessError(f"{where}: not a JSON list: {cell!r}")
            items = [scalar(v) for v in parsed]
        else:
            items = cell.split(";")
    answers = [item.strip() for item in items if item is not None and item.strip()]
    if not answers:
        raise harness.HarnessError(f"{where}: no answer ids (a JSON list, or ids separated by ';')")
    return answers


def read_queries(
    table: Table, builder: SKBBuilder, candidates: Sequence[str], columns: QueryColumns, track: Callable[..., Any]
) -> Queries:
    """The query table, every answer checked: a node that exists and is of a candidate type."""
    needed = {columns.id: "--query-id-column", columns.text: "--query-column", columns.answers: "--answers-column"}
    if columns.default_split is None:
        needed[columns.split] = "--split-column, or --split NAME for one split"
    table.require(needed)
    candidate_types = set(candidates)
    result = Queries()
    first_row: dict[str, int] = {}
    with track(f"queries {table.path.name}", table) as progress:
        for row, values in table.rows(progress):
            qid = (scalar(values.get(columns.id)) or "").strip()
            if not qid:
                raise harness.HarnessError(f"{table.where(row, columns.id)}: empty query id")
            if qid in first_row:
                raise harness.HarnessError(
                    f"{table.where(row, columns.id)}: duplicate query id {qid!r} "
                    f"(first at {table.row_word} {first_row[qid]})"
                )
            first_row[qid] = row
            text = scalar(values.get(columns.text)) or ""
            if not text.strip():
                raise harness.HarnessError(f"{table.where(row, columns.text)}: empty query text")
            if columns.default_split is not None and columns.split not in table.columns:
                split = columns.default_split
            else:
                split = (scalar(values.get(columns.split)) or "").strip()
                if not SPLIT_NAME.match(split):
                    raise harness.HarnessError(
                        f"{table.where(row, columns.split)}: split {split!r} is not a name "
                        "(letters, digits, '_', '-', '.')"
                    )
            where = table.where(row, columns.answers)
            answers = []
            for answer in answer_list(values.get(columns.answers), where):
                node = builder.node(answer, where, "node")
                node_type = builder.type_names[builder.node_types[node]]
                if node_type not in candidate_types:
                    raise harness.HarnessError(
                        f"{where}: answer {answer!r} is of type {node_type!r}, not a candidate type "
                        f"({', '.join(candidates)}; choose them with --candidates)"
                    )
                answers.append(node)
            result.items.append(ImportedQuery(qid, text, tuple(dict.fromkeys(answers)), split, row))
    if not result.items:
        raise harness.HarnessError(f"{table.path}: no queries (the table has no rows)")
    return result


def write_dataset(
    out: Path,
    skb: harness.SKB,
    node_ids: Sequence[str],
    queries: Queries,
    provenance: dict[str, Any],
    force: bool,
) -> None:
    """``out/skb``, ``out/qa`` (STaRK's layout), ``out/node_ids.txt`` and ``out/import.json``,
    built beside ``out`` and moved into place only when complete."""
    if out.exists() and not force:
        raise harness.HarnessError(f"{out} exists; choose another --out, or --force to replace it")
    # STaRK's layout numbers queries; ids that are not numbers keep their text in source_id. Only
    # ids written as a number is written ("7", not "007", "-0" or "٣") are kept as numbers:
    # distinct such ids are distinct numbers
    numeric = all(re.fullmatch(r"0|-?[1-9][0-9]*", q.source_id, flags=re.ASCII) for q in queries.items)
    with output_dir(out, replace=out.exists()) as tmp:
        skb.save(tmp / "skb", fast=True)  # a large import: compressed for speed, the same content
        qa = tmp / "qa"
        (qa / "stark_qa").mkdir(parents=True)
        (qa / "split").mkdir()
        with (qa / "stark_qa" / "stark_qa.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["id", "query", "answer_ids"] + ([] if numeric else ["source_id"]))
            for number, query in enumerate(queries.items):
                qid = int(query.source_id) if numeric else number
                writer.writerow([qid, query.text, str(list(query.answers))] + ([] if numeric else [query.source_id]))
        by_split: dict[str, list[str]] = {}
        for number, query in enumerate(queries.items):
            by_split.setdefault(query.split, []).append(str(int(query.source_id) if numeric else number))
        for split, ids in by_split.items():
            (qa / "split" / f"{split}.index").write_text("\n".join(ids) + "\n", encoding="utf-8")
        (tmp / "node_ids.txt").write_text("".join(f"{node_id}\n" for node_id in node_ids), encoding="utf-8")
        harness.write_json(tmp / "import.json", provenance, durable=False)


@contextmanager
def progress_bars() -> Iterator[Callable[..., Any]]:
    """``track(description, table_or_total)``: a context giving a callback that moves a bar on
    stderr (shown only on a terminal, so logs and tests stay clean)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    ) as display:

        @contextmanager
        def track(description: str, size: Table | int) -> Iterator[Callable[[int], None]]:
            total, unit = (size.total, size.unit) if isinstance(size, Table) else (size, "rows")
            task = display.add_task(description, total=total or None, count="")

            def update(position: int) -> None:
                shown = f"{position / 1e6:,.1f}/{total / 1e6:,.1f} MB" if unit == "bytes" else f"{position:,}/{total:,}"
                display.update(task, completed=position, count=shown)

            try:
                yield update
            finally:
                display.remove_task(task)

        yield track


def summary(out: Path, skb: harness.SKB, queries: Queries) -> dict[str, Any]:
    counts = skb.counts()
    return {
        "out": str(out),
        "fingerprint": skb.fingerprint,
        "nodes": counts["nodes"],
        "edges": counts["edges"],
        "queries": len(queries.items),
        "candidate_types": counts["candidate_types"],
        "nodes_by_type": counts["nodes_by_type"],
        "edges_by_type": counts["edges_by_type"],
        "queries_by_split": queries.counts(),
    }
