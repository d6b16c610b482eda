"""Semi-structured knowledge bases: typed nodes with text, joined by typed relations.

An :class:`SKB` keeps the graph in flat numpy arrays (CSR, both directions) and builds a
node's text document only when asked, so that a loader can hold a million-node,
ten-million-edge SKB without materialising every document. Loaders for particular
datasets live in plugins; they either construct an :class:`SKB` directly or subclass it to
change how documents read (STaRK's ``get_doc_info`` differs per dataset).
"""

from __future__ import annotations

import hashlib
import json
import lzma
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np

from harness.errors import HarnessError
from harness.io import atomic_dir
from harness.skb.arrays import CSR, TRUSTED_LAYOUT, EdgeType, compact_text
from harness.skb.compiled import load_compiled

FORMAT = "harness-skb/2"  # 2: records `undirected`; the fingerprint is the SKB's own
Direction = Literal["out", "in", "both"]


class SKB:
    """A semi-structured knowledge base.

    Args:
        name: short identifier (used in cache keys and reports).
        node_type_names: the node types, indexed by the values of ``node_types``.
        node_types: one type index per node (node ids are ``0 .. num_nodes-1``).
        names: one display name per node (may be a lazy sequence).
        fields: one mapping of text fields per node (may be a lazy sequence); values are
            strings or lists of strings. Documents show them in mapping order.
        edge_types: the relations, indexed by the values of ``edge_type``.
        src, dst, edge_type: the edges as three equal-length integer arrays.
        candidate_types: node types a task retrieves from (all types when empty).
        fingerprint: a string that changes whenever content changes; caches key on it.
            Computed from the arrays and names when not given.
        max_neighbors_in_doc: per relation, how many neighbour names a document lists.
        undirected: the edge arrays already hold both directions of every edge (STaRK's
            loaders make graphs undirected); only one CSR is then built.
        indptr: the edges are already ordered by (source, relation) (:func:`sort_edges`) and
            these are their row offsets (:func:`row_offsets`): the outgoing CSR is then the edge
            arrays themselves, with no sort (checked in linear time). Loaders of large SKBs
            cache edges in this layout, memory-mapped.
    """

    def __init__(
        self,
        name: str,
        node_type_names: Sequence[str],
        node_types: np.ndarray,
        names: Sequence[str],
        fields: Sequence[Mapping[str, Any]],
        edge_types: Sequence[EdgeType],
        src: np.ndarray,
        dst: np.ndarray,
        edge_type: np.ndarray,
        candidate_types: Sequence[str] = (),
        description: str = "",
        fingerprint: str | None = None,
        max_neighbors_in_doc: int = 50,
        undirected: bool = False,
        indptr: np.ndarray | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.node_type_names = list(node_type_names)
        self.node_types = np.asarray(node_types, dtype=np.int32)
        self.names = names
        self.fields = fields
        self.edge_types = list(edge_types)
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        self.edge_type = np.asarray(edge_type, dtype=np.int32)
        self.max_neighbors_in_doc = max_neighbors_in_doc
        self.undirected = undirected
        n = len(self.node_types)
        if len(names) != n or len(fields) != n:
            raise HarnessError(f"SKB {name!r}: {n} node types but {len(names)} names and {len(fields)} field rows")
        if not (len(self.src) == len(self.dst) == len(self.edge_type)):
            raise HarnessError(f"SKB {name!r}: src, dst and edge_type differ in length")
        if len(self.src) and (min(self.src.min(), self.dst.min()) < 0 or max(self.src.max(), self.dst.max()) >= n):
            raise HarnessError(f"SKB {name!r}: an edge points outside 0..{n - 1}")
        unknown = set(candidate_types) - set(self.node_type_names)
        if unknown:
            raise HarnessError(f"SKB {name!r}: unknown candidate types {sorted(unknown)}")
        self.candidate_types = list(candidate_types) or list(self.node_type_names)
        wanted = [self.node_type_names.index(t) for t in self.candidate_types]
        self.candidate_ids = np.flatnonzero(np.isin(self.node_types, wanted)).astype(np.int64)
        self._fingerprint = fingerprint
        self._out: CSR | None = None
        self._in: CSR | None = None
        self.indptr = None if indptr is None else self._checked_indptr(np.asarray(indptr))
        if self.indptr is not None:
            self._out = CSR(self.dst, self.edge_type, self.indptr)

    def _checked_indptr(self, indptr: np.ndarray) -> np.ndarray:
        n, problem = self.num_nodes, None
        if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr[-1] != self.num_edges:
            problem = f"indptr has shape {indptr.shape}, expected ({n + 1},) from 0 to {self.num_edges}"
        elif TRUSTED_LAYOUT.get():
            pass  # written by the compiled cache, which sorted the edges and counted them itself
        elif not np.array_equal(np.diff(indptr), np.bincount(self.src, minlength=n)):
            problem = "indptr does not count each node's edges"
        else:
            keys = self.src * (int(self.edge_type.max(initial=0)) + 1) + self.edge_type
            if len(keys) > 1 and not bool((keys[1:] >= keys[:-1]).all()):
                problem = "the edges are not ordered by (source, relation)"
        if problem:
            raise HarnessError(f"SKB {self.name!r}: {problem}")
        return indptr

    # -- sizes and types -------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.node_types)

    @property
    def num_edges(self) -> int:
        return len(self.src)

    def node_type(self, node: int) -> str:
        return self.node_type_names[int(self.node_types[node])]

    def nodes_of_type(self, node_type: str) -> np.ndarray:
        if node_type not in self.node_type_names:
            raise HarnessError(f"SKB {self.name!r} has no node type {node_type!r}")
        return np.flatnonzero(self.node_types == self.node_type_names.index(node_type))

    def relation(self, name: str) -> int:
        for index, edge_type in enumerate(self.edge_types):
            if edge_type.name == name:
                return index
        raise HarnessError(
            f"SKB {self.name!r} has no relation {name!r}; known: {', '.join(e.name for e in self.edge_types)}"
        )

    def is_candidate(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``ids`` are in the candidate set."""
        ids = np.asarray(ids, dtype=np.int64)
        mask = np.zeros(len(ids), dtype=bool)
        inside = (ids >= 0) & (ids < self.num_nodes)
        mask[inside] = np.isin(self.node_types[ids[inside]], self._candidate_type_ids())
        return mask

    def _candidate_type_ids(self) -> list[int]:
        return [self.node_type_names.index(t) for t in self.candidate_types]

    def counts(self) -> dict[str, Any]:
        """Nodes and edges by type, and the candidate count."""
        nodes = np.bincount(self.node_types, minlength=len(self.node_type_names))
        edges = np.bincount(self.edge_type, minlength=len(self.edge_types))
        return {
            "nodes": int(self.num_nodes),
            "edges": int(self.num_edges),
            "candidates": len(self.candidate_ids),
            "candidate_types": self.candidate_types,
            "nodes_by_type": {t: int(c) for t, c in zip(self.node_type_names, nodes, strict=True)},
            "edges_by_type": {e.name: int(c) for e, c in zip(self.edge_types, edges, strict=True)},
        }

    # -- graph ---------------------------------------------------------------------
    def _csr(self, direction: Literal["out", "in"]) -> CSR:
        if direction == "out" or self.undirected:
            if self._out is None:
                self._out = CSR.build(self.src, self.dst, self.edge_type, self.num_nodes)
            return self._out
        if self._in is None:
            self._in = CSR.build(self.dst, self.src, self.edge_type, self.num_nodes)
        return self._in

    def _sides(self) -> tuple[Literal["out", "in"], ...]:
        """The directions stored: one when the edges are undirected."""
        return ("out",) if self.undirected else ("out", "in")

    def neighbors(self, node: int, relation: str | None = None, direction: Direction = "both") -> np.ndarray:
        """Ids of ``node``'s neighbours, optionally through one relation and direction.

        A symmetric relation is followed both ways whatever ``direction`` says.
        """
        rel = None if relation is None else self.relation(relation)
        symmetric = rel is not None and self.edge_types[rel].symmetric
        parts = []
        for side in self._sides():
            if direction not in (side, "both") and not symmetric and not self.undirected:
                continue
            ids, types = self._csr(side).row(node)
            parts.append(ids if rel is None else ids[types == rel])
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    def relations(self, node: int) -> dict[str, np.ndarray]:
        """Neighbours grouped by the text that reads from ``node`` ("depends on", ...)."""
        grouped: dict[str, list[np.ndarray]] = {}
        for side in self._sides():
            ids, types = self._csr(side).row(node)
            if not len(ids):
                continue
            bounds = np.flatnonzero(np.diff(types)) + 1
            for chunk_ids, chunk_types in zip(np.split(ids, bounds), np.split(types, bounds), strict=True):
                label = self.edge_types[int(chunk_types[0])].text(side)
                grouped.setdefault(label, []).append(chunk_ids)
        return {label: np.unique(np.concatenate(parts)) for label, parts in grouped.items()}

    # -- documents -----------------------------------------------------------------
    def document(self, node: int, with_relations: bool = False, compact: bool = False) -> str:
        """The node's text: type and name, its fields, then (optionally) one line per
        relation listing neighbour names — STaRK's ``get_doc_info(add_rel=...)`` idea.
        ``compact`` folds it onto one line (STaRK's variant for ColBERT and multi-vector)."""
        lines = [f"- {self.node_type(node)}: {self.names[node]}"]
        for key, value in self.fields[node].items():
            if value is None or value == "" or value == []:
                continue
            text = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
            lines.append(f"- {key}: {text}")
        if with_relations:
            lines.extend(self.relation_lines(node))
        text = "\n".join(lines)
        return compact_text(text) if compact else text

    def relation_lines(self, node: int) -> list[str]:
        """The "- relation: name, name, ..." lines of a node's document."""
        lines = []
        cap = self.max_neighbors_in_doc
        for label, ids in self.relations(node).items():
            names = [str(self.names[i]) for i in ids[:cap]]
            more = f" (and {len(ids) - cap} more)" if len(ids) > cap else ""
            lines.append(f"- {label}: {', '.join(names)}{more}")
        return lines

    def documents(
        self, ids: Sequence[int] | np.ndarray | None = None, with_relations: bool = False, compact: bool = False
    ) -> Iterator[str]:
        """Documents of ``ids`` (default: the candidates), built one at a time."""
        for node in self.candidate_ids if ids is None else ids:
            yield self.document(int(node), with_relations=with_relations, compact=compact)

    # -- identity and persistence ----------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """Changes whenever nodes, names or edges change; caches key on it. The edges are
        hashed in a canonical order (by type, source, target), so the same graph stored in
        another order (a cache's sorted CSR) has the same fingerprint."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            digest.update(json.dumps([self.name, self.node_type_names, self.candidate_types]).encode())
            order = np.lexsort((self.dst, self.src, self.edge_type))
            digest.update(np.ascontiguousarray(self.node_types, dtype=np.int64).tobytes())
            for array in (self.src, self.dst, self.edge_type):
                digest.update(np.ascontiguousarray(np.asarray(array)[order], dtype=np.int64).tobytes())
            for node in range(self.num_nodes):
                digest.update(json.dumps([self.names[node], self.fields[node]]).encode())
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def save(self, directory: str | Path, *, fast: bool = False) -> Path:
        """Write the SKB in the harness format (``skb.json``, ``nodes.jsonl.xz``,
        ``edges.npz``), atomically: the directory appears complete or not at all.

        Everything the constructor takes is written, so :meth:`load` gives back an SKB with
        the same documents, graph, candidates and fingerprint. ``fast``: the same content,
        compressed for speed rather than size (large imports; see :mod:`harness.skb.files`)."""
        from harness.skb.files import write_files  # the writer loads only when an SKB is saved

        if type(self).document is not SKB.document or type(self).relation_lines is not SKB.relation_lines:
            # Such a subclass's documents come from its code, not from names and fields.
            raise HarnessError(
                f"SKB {self.name!r}: {type(self).__name__} builds its own documents, which the harness "
                "format cannot hold; save the data it is loaded from instead"
            )
        directory = Path(directory)
        meta = {
            "format": FORMAT,
            "name": self.name,
            "description": self.description,
            "node_types": self.node_type_names,
            "edge_types": [vars(e) for e in self.edge_types],
            "candidate_types": self.candidate_types,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "max_neighbors_in_doc": self.max_neighbors_in_doc,
            "undirected": self.undirected,
            "fingerprint": self.fingerprint,  # before writing: a lazy one reads every node
        }
        with atomic_dir(directory) as tmp:
            write_files(self, tmp, meta, fast)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> Self:
        """Read an SKB written by :meth:`save`.

        The first load also compiles it into the cache (keyed by the files' digests): graph
        arrays that later loads memory-map, node rows read when a document needs them."""
        return load_compiled(cls, Path(directory))

    @classmethod
    def parse(cls, directory: str | Path) -> Self:
        """Read an SKB written by :meth:`save` from its files, without the cache."""
        directory = Path(directory)
        meta_path = directory / "skb.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("format") != FORMAT:
                raise HarnessError(_format_problem(meta_path, meta.get("format")))
            # Every key is required: a default would load a different SKB than was saved.
            missing = [key for key in _META_KEYS if key not in meta]
            if missing:
                raise HarnessError(f"{meta_path} lacks {', '.join(missing)}")
            node_types, names, fields = [], [], []
            with lzma.open(directory / "nodes.jsonl.xz", "rt", encoding="utf-8") as lines:
                for line in lines:
                    type_id, name, node_fields = json.loads(line)
                    node_types.append(type_id)
                    names.append(name)
                    fields.append(node_fields)
            with np.load(directory / "edges.npz") as edges:
                src, dst, edge_type = edges["src"], edges["dst"], edges["edge_type"]
            if len(names) != meta["num_nodes"] or len(src) != meta["num_edges"]:
                raise HarnessError(
                    f"SKB at {directory} is incomplete: {len(names)}/{meta['num_nodes']} nodes, "
                    f"{len(src)}/{meta['num_edges']} edges"
                )
            return cls(
                name=meta["name"],
                description=meta["description"],
                node_type_names=meta["node_types"],
                node_types=np.asarray(node_types, dtype=np.int32),
                names=names,
                fields=fields,
                edge_types=[EdgeType(**e) for e in meta["edge_types"]],
                src=src,
                dst=dst,
                edge_type=edge_type,
                candidate_types=meta["candidate_types"],
                fingerprint=meta["fingerprint"],
                max_neighbors_in_doc=meta["max_neighbors_in_doc"],
                undirected=meta["undirected"],
            )
        except HarnessError:
            raise
        except (OSError, ValueError, KeyError, TypeError, EOFError, lzma.LZMAError) as exc:
            raise HarnessError(f"cannot read SKB at {directory}: {type(exc).__name__}: {exc}") from exc


_META_KEYS = (
    "name",
    "description",
    "node_types",
    "edge_types",
    "candidate_types",
    "num_nodes",
    "num_edges",
    "max_neighbors_in_doc",
    "undirected",
    "fingerprint",
)


def _format_problem(meta_path: Path, found: Any) -> str:
    if found == "harness-skb/1":
        # Version 1 did not record ``undirected``: loading it could read edges the wrong way.
        return (
            f"{meta_path}: format harness-skb/1 does not say whether the edges are undirected; "
            f'rebuild the SKB, or add "undirected": true or false to skb.json and set "format" '
            f"to {FORMAT!r}"
        )
    return f"{meta_path}: format {found!r}, expected {FORMAT!r}"
