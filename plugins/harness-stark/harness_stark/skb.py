"""Load STaRK's processed SKB files into the harness SKB, with STaRK's documents.

The processed files (``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``,
``node_types.pt``, ``edge_type_dict.pkl``, ``node_type_dict.pkl``) are read once: ``node_info``
into a store read node by node (:mod:`harness_stark.store`), the edges made undirected as the
official loader makes them and cached as CSR arrays (:mod:`harness_stark.graph`).
Documents are built on demand from ``node_info`` and follow the official
``get_doc_info(add_rel=..., compact=...)`` of each SKB character for character, including
where it fails: a node whose attributes the official code cannot read raises a
:class:`harness.HarnessError` naming it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import harness
from harness import SKB, EdgeType, HarnessError, compact_text
from harness_stark.graph import Graph, cached_graph, distinct, read_tensors, to_undirected

#: What reading a node's attributes the way STaRK does may raise when they have another shape.
_SHAPE_ERRORS = (AttributeError, KeyError, TypeError, ValueError, IndexError)


def read_processed(directory: Path, fingerprint: str | None = None) -> dict[str, Any]:
    """The official processed files: ``node_info`` as a :class:`~harness_stark.store.NodeStore`
    read on demand (converted once, then cached) and the type dictionaries. The edge and node
    type tensors are read only when the cached graph (:mod:`harness_stark.graph`) lacks them."""
    from harness import cache_root
    from harness_stark.store import build_store

    out: dict[str, Any] = {"directory": directory}
    key = fingerprint or file_fingerprint(directory)
    try:
        out["node_info"] = build_store(directory / "node_info.pkl", cache_root() / "stark" / "nodes" / key)
        for key in ("edge_type_dict", "node_type_dict"):
            path = directory / f"{key}.pkl"
            if path.exists():
                with path.open("rb") as handle:
                    out[key] = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, RuntimeError, ValueError) as exc:
        raise HarnessError(f"cannot read the STaRK SKB files in {directory}: {exc}") from exc
    return out


def _positions(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index in ``keys`` (unique) of each value; -1 where a value is not among them."""
    bound = max(int(keys.max(initial=0)), int(values.max(initial=0))) + 1
    if len(keys) and keys.min() >= 0 and bound <= 1 << 20 and len(values) > 1000:
        # type ids are small: one table look-up per value instead of a binary search
        table = np.full(bound, -1, dtype=np.int64)
        table[keys] = np.arange(len(keys))
        inside = values >= 0
        return np.where(inside, table[np.where(inside, values, 0)], -1)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    at = np.searchsorted(ordered, values).clip(max=len(keys) - 1)
    return np.where(ordered[at] == values, order[at], -1)


def _type_ids(table: Mapping[Any, Any], what: str) -> np.ndarray:
    if not all(isinstance(k, int | np.integer) for k in table):
        raise HarnessError(f"{what} has keys that are not integer type ids: {list(table)[:10]}")
    return np.array([int(k) for k in table], dtype=np.int64)


class _Node:
    """STaRK's ``Node``: a node's attributes as Python attributes, dict values as nested nodes.
    The official documents read nodes this way (a missing attribute raises, ``hasattr`` tests
    presence, a dict value is truthy and prints as a tree), so the harness reads them the same."""

    def __init__(self, dictionary: Any) -> None:
        self.dictionary = dictionary
        for key, value in dictionary.items():
            setattr(self, key, _Node(value) if isinstance(value, dict) else value)

    def __getattr__(self, key: str) -> Any:  # only reached when the attribute is missing
        raise AttributeError(f"the node has no attribute {key!r}")

    def __repr__(self) -> str:
        return _dict_tree(self.dictionary)


def _attribute(info: dict, key: str) -> Any:
    """``_Node(info).<key>`` without building the node: a dict value reads as a node, a
    missing key raises as the node does."""
    if key not in info:
        raise AttributeError(f"the node has no attribute {key!r}")
    value = info[key]
    return _Node(value) if isinstance(value, dict) else value


def _dict_tree(dictionary: dict, indent: int = 0) -> str:
    tree = ""
    for key, value in dictionary.items():
        if indent > 0:
            tree += "    |-----" * indent + f"{key}\n"
        else:
            tree += f"--{key}\n"
        if isinstance(value, dict):
            tree += _dict_tree(value, indent + 1)
    return tree


class _Names(Sequence[str]):
    """Node names read from ``node_info`` on demand (no copy of every name)."""

    def __init__(self, skb: StarkSKB) -> None:
        self.skb = skb

    def __len__(self) -> int:
        return self.skb.num_nodes

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        try:
            return self.skb.node_name(int(index))
        except _SHAPE_ERRORS as exc:
            raise HarnessError(f"{self.skb.skb_name}: node {int(index)} has no name: {_reason(exc)}") from exc


class _Info(Sequence[Mapping[str, Any]]):
    def __init__(self, node_info: Mapping[int, Any]) -> None:
        self.node_info = node_info

    def __len__(self) -> int:
        return len(self.node_info)

    def __getitem__(self, index: Any) -> Any:
        return self.node_info[int(index)]


def file_fingerprint(directory: Path) -> str:
    """SHA-256 over the processed files (streamed; computed once per file state)."""
    from harness import cache_root, stable_hash

    files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in (".pkl", ".pt"))
    # The memo key names the directory and each file's inode and change time as well: two copies
    # with equal sizes and modification times (written within one clock tick) must not share it.
    stats = [(p.name, p.stat()) for p in files]
    state = stable_hash(
        [str(directory.resolve())]
        + [[name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino] for name, st in stats]
    )
    memo = cache_root() / "stark" / "fingerprints" / f"{state}.txt"
    if memo.exists():
        return memo.read_text().strip()
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    value = digest.hexdigest()[:16]
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(value)
    return value


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class StarkSKB(SKB):
    """An SKB read from STaRK's processed files. Subclasses define names and documents.

    Node types and relations are numbered in the order of the type dictionaries, as the
    official name look-ups (``node_type2id``, ``edge_type2id``) walk them. ``type_ids`` and
    ``edge_type_ids`` give the raw id (the key in ``node_type_dict`` / ``edge_type_dict``) of
    each node type and relation index. Edges whose type id ``edge_type_dict`` lacks (possible
    after the mean of several relations) stay in the graph under a relation named
    ``<edge type N: not in edge_type_dict>``, which no official relation name reaches.
    """

    skb_name: ClassVar[str] = "stark"
    default_node_types: ClassVar[dict[int, str]] = {}
    default_edge_types: ClassVar[dict[int, str]] = {}
    candidate_type_names: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self, processed: dict[str, Any], fingerprint: str | None = None, graph_cache: Path | None = None
    ) -> None:
        """``processed``: :func:`read_processed`'s files (or the tensors themselves under
        ``edge_index``, ``edge_types``, ``node_types``). ``graph_cache``: a cache entry for the
        graph made undirected (see :mod:`harness_stark.graph`), keyed by the caller."""
        self.node_info: Mapping[int, Any] = processed["node_info"]
        # Relation lines repeat the same neighbour names; each costs one unpickle from the store.
        self.node_name = functools.lru_cache(maxsize=1 << 18)(self.node_name)  # type: ignore[method-assign]
        node_type_dict, edge_type_dict = self.type_dicts(processed)
        if not node_type_dict or not edge_type_dict:
            raise HarnessError(f"{self.skb_name}: node_type_dict.pkl / edge_type_dict.pkl are missing")
        self.node_type_dict = dict(node_type_dict)
        self.edge_type_dict = dict(edge_type_dict)
        self.type_ids = _type_ids(self.node_type_dict, f"{self.skb_name}: node_type_dict")
        if graph_cache is not None:
            # node types and relations are cached as positions in these dictionaries
            dicts = [list(self.node_type_dict.items()), list(self.edge_type_dict.items())]
            graph_cache = graph_cache.with_name(f"{graph_cache.name}-{harness.stable_hash(dicts)}")
        graph = cached_graph(graph_cache, lambda: self._graph(processed))
        known = _type_ids(self.edge_type_dict, f"{self.skb_name}: edge_type_dict")
        if not np.array_equal(np.asarray(graph["edge_type_ids"][: len(known)]), known):
            raise HarnessError(f"{self.skb_name}: the cached graph {graph_cache} numbers relations otherwise")
        n = len(graph["node_types"])
        if len(self.node_info) != n:
            raise HarnessError(f"{self.skb_name}: {len(self.node_info)} entries in node_info but {n} node types")
        self.edge_type_ids = np.asarray(graph["edge_type_ids"])
        relations = [EdgeType(str(name)) for name in self.edge_type_dict.values()]
        relations += [EdgeType(f"<edge type {t}: not in edge_type_dict>") for t in self.edge_type_ids[len(known) :]]
        type_names = [str(name) for name in self.node_type_dict.values()]
        super().__init__(
            name=self.skb_name,
            node_type_names=type_names,
            node_types=graph["node_types"],
            names=_Names(self),
            fields=_Info(self.node_info),
            edge_types=relations,
            src=graph["src"],
            dst=graph["dst"],
            edge_type=graph["edge_type"],
            candidate_types=list(self.candidate_type_names) or type_names,
            fingerprint=fingerprint,
            undirected=True,
            indptr=graph["indptr"],
        )

    def _graph(self, processed: dict[str, Any]) -> Graph:
        """The graph as the official loader makes it, checked against the type dictionaries;
        node types and relations as positions in them; edges in the :class:`harness.SKB`
        ``indptr`` layout."""
        tensors = processed if "edge_index" in processed else read_tensors(processed["directory"])
        raw_node_types = tensors["node_types"].reshape(-1)
        n = len(raw_node_types)
        node_types = _positions(raw_node_types, self.type_ids)
        if (node_types < 0).any():
            unknown = np.flatnonzero(node_types < 0)
            ids = sorted(set(raw_node_types[unknown].tolist()))
            raise HarnessError(
                f"{self.skb_name}: node_types.pt gives node {int(unknown[0])} (and {len(unknown) - 1} more) "
                f"type id(s) {ids[:10]} that node_type_dict {self.node_type_dict} does not name"
            )
        edge_index, raw_edge_types = tensors["edge_index"], tensors["edge_types"].reshape(-1)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2 or edge_index.shape[1] != len(raw_edge_types):
            raise HarnessError(
                f"{self.skb_name}: edge_index.pt has shape {edge_index.shape}, "
                f"expected (2, {len(raw_edge_types)}) to match edge_types.pt"
            )
        if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
            raise HarnessError(f"{self.skb_name}: edge_index.pt has an edge outside the nodes 0..{n - 1}")
        src, dst, raw_types = to_undirected(edge_index, raw_edge_types, n)
        known = _type_ids(self.edge_type_dict, f"{self.skb_name}: edge_type_dict")
        extra = sorted(set(distinct(raw_types).tolist()) - set(known.tolist()))
        edge_type_ids = np.concatenate([known, np.array(extra, dtype=np.int64)])
        src, dst, edge_type = harness.sort_edges(src, dst, _positions(raw_types, edge_type_ids))
        return {
            "node_types": node_types.astype(np.int32),
            "src": src,
            "dst": dst,
            "edge_type": edge_type.astype(np.int32),
            "indptr": harness.row_offsets(src, n),
            "edge_type_ids": edge_type_ids,
        }

    # -- what subclasses provide -------------------------------------------------------
    def type_dicts(self, processed: dict[str, Any]) -> tuple[Mapping[Any, Any], Mapping[Any, Any]]:
        """The node and edge type dictionaries: the files', else the defaults."""
        return (
            processed.get("node_type_dict") or self.default_node_types,
            processed.get("edge_type_dict") or self.default_edge_types,
        )

    def node_name(self, node: int) -> str:
        raise NotImplementedError

    def doc_info(self, node: int, add_rel: bool) -> str:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def document(self, node: int, with_relations: bool = False, compact: bool = False) -> str:
        node = int(node)
        try:
            return self.get_doc_info(node, with_relations, compact)
        except (HarnessError, *_SHAPE_ERRORS) as exc:
            raise HarnessError(
                f"{self.skb_name}: node {node} (or a neighbour it lists) does not have the attributes "
                f"STaRK's get_doc_info reads, which fails on it as well ({_reason(exc)})"
            ) from exc

    def get_doc_info(self, node: int, add_rel: bool, compact: bool) -> str:
        doc = self.doc_info(node, add_rel)
        return compact_text(doc) if compact else doc

    def stark_node(self, node: int) -> _Node:
        """The node as the official ``skb[node]`` gives it."""
        return _Node(self.node_info[node])

    def raw_type_ids(self, ids: np.ndarray) -> np.ndarray:
        """The ``node_types.pt`` value of each node in ``ids``."""
        return self.type_ids[self.node_types[ids]]

    def neighbors_by(self, node: int, relation: str) -> list[int]:
        """Neighbour ids through one relation, ascending (as the official sparse look-up)."""
        return self.neighbors(node, relation).tolist()

    def relation_names(self) -> list[str]:
        """``rel_type_lst()``: the edge type dictionary's names in its order."""
        return [self.edge_type_dict[i] for i in self.edge_type_dict]


def _clean(value: Any) -> Any:
    """STaRK's ``clean_dict``: drop entries whose value prints as '' or 'nan'."""
    if not isinstance(value, dict):
        return value
    return {k: _clean(v) for k, v in value.items() if isinstance(v, dict) or not _blank(v)}


def _blank(value: Any) -> bool:
    """``str(value) in ("", "nan")``, the official test, without printing lists to learn it."""
    kind = type(value)
    if kind is str:
        return value in ("", "nan")
    if kind is list or kind is tuple:
        return False  # prints as "[...]" or "(...)"
    return str(value) in ("", "nan")


class PrimeSKB(StarkSKB):
    skb_name = "stark-prime"
    NODE_TYPES = (
        "disease",
        "gene/protein",
        "molecular_function",
        "drug",
        "pathway",
        "anatomy",
        "effect/phenotype",
        "biological_process",
        "cellular_component",
        "exposure",
    )
    candidate_type_names = NODE_TYPES  # the official ``candidate_types``: nodes of other types are not candidates
    GENE_FIELDS: ClassVar[dict[str, str]] = {
        "name": "gene name",
        "type_of_gene": "gene types",
        "alias": "other gene names",
        "other_names": "extended other gene names",
        "genomic_pos": "genomic position",
        "generif": "PubMed text",
        "interpro": "protein family and classification information",
        "summary": "protein summary text",
    }

    def info(self, node: int) -> Any:
        return _clean(self.node_info[node])  # the official loader cleans every node at load

    def stark_node(self, node: int) -> _Node:
        return _Node(self.info(node))

    def node_name(self, node: int) -> str:
        return f"{self.stark_node(node).name}"

    def doc_info(self, node: int, add_rel: bool) -> str:
        info = self.info(node)
        kind = _attribute(info, "type")
        doc = f"- name: {_attribute(info, 'name')}\n- type: {kind}\n- source: {_attribute(info, 'source')}\n"
        details, count = "- details:\n", 0
        for key, value in info["details"].items() if "details" in info else ():
            if _blank(value) or key.startswith("_") or "_id" in key:
                continue
            if kind == "gene/protein" and key in self.GENE_FIELDS:
                if "interpro" in key:
                    value = [v["desc"] for v in ([value] if isinstance(value, dict) else value)]
                if "generif" in key:
                    value = " ".join("; ".join([v["text"] for v in value]).split(" ")[:50000])
                if "genomic_pos" in key and isinstance(value, list):
                    value = value[0]
                details += f"  - {key} ({self.GENE_FIELDS[key]}): {value}\n"
            else:
                details += f"  - {key}: {value}\n"
            count += 1
        doc += details if count else ""
        if add_rel:
            doc += self.rel_info(node)
        return doc

    def rel_info(self, node: int) -> str:
        doc = ""
        for relation in self.relation_names():
            ids = np.asarray(self.neighbors_by(node, relation), dtype=np.int64)
            if not len(ids):
                continue
            doc += f"\n  {relation.replace(' ', '_')}: " + "{"
            raw = self.raw_type_ids(ids)
            # The official code walks ``set(node_types.tolist())``: a set of the raw type ids built
            # in neighbour order. Its order is the set's hash-slot order, not sorted (8 and 9 land
            # among 0-7 once they collide); the same set built from the same list repeats it.
            for type_id in set(raw.tolist()):
                doc += f"{self.node_type_dict[type_id]}: "
                names = [self.node_name(int(i)) for i in ids[raw == type_id]]
                doc += "(" + ", ".join(names) + "),"
            doc += "}"
        return "- relations:" + doc if doc else ""


class MagSKB(StarkSKB):
    skb_name = "stark-mag"
    default_node_types: ClassVar[dict[int, str]] = {0: "author", 1: "institution", 2: "field_of_study", 3: "paper"}
    default_edge_types: ClassVar[dict[int, str]] = {
        0: "author___affiliated_with___institution",
        1: "paper___cites___paper",
        2: "paper___has_topic___field_of_study",
        3: "author___writes___paper",
    }
    candidate_type_names = ("paper",)
    AFFILIATION = "author___affiliated_with___institution"

    def type_dicts(self, processed: dict[str, Any]) -> tuple[Mapping[Any, Any], Mapping[Any, Any]]:
        return self.default_node_types, self.default_edge_types  # the official MagSKB ignores the files'

    def node_name(self, node: int) -> str:
        info = self.node_info[node]
        return str(info["title"] if info["type"] == "paper" else info["DisplayName"])

    def doc_info(self, node: int, add_rel: bool) -> str:
        item = self.stark_node(node)
        if item.type == "paper":
            doc = f" - paper title: {item.title}\n"
            doc += " - abstract: " + item.abstract.replace("\r", "").rstrip("\n") + "\n"
            if str(item.Date) != "-1":
                doc += f" - publication date: {item.Date}\n"
            if str(item.OriginalVenue) != "-1":  # the first of these that is known, read lazily
                doc += f" - venue: {item.OriginalVenue}\n"
            elif str(item.JournalDisplayName) != "-1":
                doc += f" - journal: {item.JournalDisplayName}\n"
            elif str(item.ConferenceSeriesDisplayName) != "-1":
                doc += f" - conference: {item.ConferenceSeriesDisplayName}\n"
            elif str(item.ConferenceInstancesDisplayName) != "-1":
                doc += f" - conference: {item.ConferenceInstancesDisplayName}\n"
        else:
            if item.type == "author":
                doc, short = f"- author name: {item.DisplayName}\n", "author"
            elif item.type == "field_of_study":
                doc, short = f" - field of study: {item.DisplayName}\n", "field"
            elif item.type == "institution":
                doc, short = f" - institution: {item.DisplayName}\n", "institution"
            else:
                raise HarnessError(f"node type {item.type!r} is none of MAG's")
            if item.PaperCount != -1:
                doc += f"- {short} paper count: {item.PaperCount}\n"
            if item.CitationCount != -1:
                doc += f"- {short} citation count: {item.CitationCount}\n"
            doc = doc.replace("-1", "Unknown")
        if add_rel and item.type == "paper":
            doc += self.rel_info(node)
        return doc

    def rel_info(self, node: int) -> str:
        doc = ""
        for relation in self.relation_names():
            ids = self.neighbors_by(node, relation)
            if not ids:
                continue
            doc += f"\n{relation.replace('___', ' ')}: "
            neighbours = []
            for i in ids:
                other = self.stark_node(i)
                if other.type == "paper":
                    neighbours.append(f'"{other.title}"')
                elif other.type == "author":
                    if str(other.DisplayName) != "-1":
                        places = [self.stark_node(j) for j in self.neighbors_by(i, self.AFFILIATION)]
                        if any(place.type != "institution" for place in places):  # the official code asserts
                            raise HarnessError(f"author {i} is affiliated with a node that is not an institution")
                        names = [place.DisplayName for place in places if str(place.DisplayName) != "-1"]
                        suffix = f" ({', '.join(names)})" if names else ""
                        neighbours.append(f"{other.DisplayName}{suffix}")
                elif str(other.DisplayName) != "-1":
                    neighbours.append(f"{other.DisplayName}")
            doc += "(" + ", ".join(neighbours) + "),"
        return "- relations:\n" + doc if doc else ""


class AmazonSKB(StarkSKB):
    skb_name = "stark-amazon"
    candidate_type_names = ("product",)
    VARIANT = "brand-category-color"
    META_TYPES = ("brand", "category", "color")  # the official document of these is one line

    def __init__(
        self,
        processed: dict[str, Any],
        fingerprint: str | None = None,
        graph_cache: Path | None = None,
        max_entries: int = 25,
    ) -> None:
        self.max_entries = max_entries
        super().__init__(processed, fingerprint, graph_cache)

    def node_name(self, node: int) -> str:
        info = self.node_info[node]
        kind = self.node_type(node)
        return str(info[f"{kind}_name"] if kind in self.META_TYPES else info["title"])

    def get_doc_info(self, node: int, add_rel: bool, compact: bool) -> str:
        if self.node_type(node) in self.META_TYPES:  # returned as is: no relations, not compacted
            return self.doc_info(node, False)
        return super().get_doc_info(node, add_rel, compact)

    def doc_info(self, node: int, add_rel: bool) -> str:
        kind = self.node_type(node)
        if kind in self.META_TYPES:
            return f"{kind} name: {getattr(self.stark_node(node), f'{kind}_name')}"
        item = self.stark_node(node)  # any other type reads as a product, as in the official code
        doc = f"- product: {item.title}\n"
        if hasattr(item, "brand"):
            doc += f"- brand: {item.brand}\n"
        try:
            dimensions, weight = item.details.product_dimensions.split(" ; ")
            doc += f"- dimensions: {dimensions}\n- weight: {weight}\n"
        except Exception:  # the official code skips them on any failure (missing, NaN, non-dict details)
            pass
        if item.description:
            description = " ".join(item.description).strip(" ")
            if description:
                doc += f"- description: {description}\n"
        features = ""
        if item.feature:
            features = "- features: \n"
            for i, feature in enumerate(item.feature):
                if feature and "asin" not in feature.lower():
                    features += f"#{i + 1}: {feature}\n"
        reviews = ""
        if item.review:
            reviews = "- reviews: \n"
            votes = [0 if _isnull(r["vote"]) else int(r["vote"].replace(",", "")) for r in item.review]
            for shown, i in enumerate(np.argsort(-np.array(votes))):
                review = item.review[i]
                reviews += f'#{i + 1}:\nsummary: {review["summary"]}\ntext: "{review["reviewText"]}"\n'
                if shown > self.max_entries:
                    break
        answers = ""
        if item.qa:
            answers = "- Q&A: \n"
            for i, qa in enumerate(item.qa):
                answers += f'#{i + 1}:\nquestion: "{qa["question"]}"\nanswer: "{qa["answer"]}"\n'
                if i > self.max_entries:
                    break
        doc += features + reviews + answers
        if add_rel:
            doc += self.rel_info(node)
        return doc

    def rel_info(self, node: int) -> str:
        bought = self._titles(self.neighbors_by(node, "also_buy"))
        viewed = self._titles(self.neighbors_by(node, "also_view"))
        brands = self.neighbors_by(node, "has_brand")
        doc = ""
        if bought:
            doc += f"  products also purchased: \n{bought}"
        if viewed:
            doc += f"  products also viewed: \n{viewed}"
        if brands:
            doc += f"  brand: {self.stark_node(brands[0]).brand_name}\n"
        return "- relations:\n" + doc if doc else ""

    def _titles(self, ids: list[int]) -> str:
        # "#k: " + title + "\n" as the official code writes it: a title that is not a string fails.
        return "".join(f"#{k + 1}: " + self.stark_node(i).title + "\n" for k, i in enumerate(ids))


def _isnull(value: Any) -> bool:
    """``pandas.isnull`` for the scalars a review's vote can be (pandas is no dependency here)."""
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    if isinstance(value, np.datetime64 | np.timedelta64):
        return bool(np.isnat(value))
    return type(value).__name__ in ("NAType", "NaTType")
