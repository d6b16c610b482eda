"""Load STaRK's processed SKB files into the harness SKB, with STaRK's documents.

The processed files (``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``,
``node_types.pt``, ``edge_type_dict.pkl``, ``node_type_dict.pkl``) are read once. Edges are
made undirected the way the official loader does (each edge also in reverse; a node pair
linked by several relations keeps the truncated mean of their type ids), then held as CSR
arrays. Documents are built on demand from ``node_info`` and follow the official
``get_doc_info(add_rel=..., compact=...)`` of each SKB character for character.
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

from harness.errors import HarnessError
from harness.skb import SKB, EdgeType, compact_text


def read_processed(directory: Path, fingerprint: str | None = None) -> dict[str, Any]:
    """The official processed files as numpy arrays and Python objects; ``node_info`` as a
    :class:`~harness_stark.store.NodeStore` read on demand (converted once, then cached)."""
    import torch

    from harness.io import cache_root
    from harness_stark.store import build_store

    out: dict[str, Any] = {}
    key = fingerprint or file_fingerprint(directory)
    try:
        out["node_info"] = build_store(directory / "node_info.pkl", cache_root() / "stark" / "nodes" / key)
        for key in ("edge_index", "edge_types", "node_types"):
            tensor = torch.load(directory / f"{key}.pt", map_location="cpu", weights_only=True)
            out[key] = tensor.numpy().astype(np.int64, copy=False)
        for key in ("edge_type_dict", "node_type_dict"):
            path = directory / f"{key}.pkl"
            if path.exists():
                with path.open("rb") as handle:
                    out[key] = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, RuntimeError, ValueError) as exc:
        raise HarnessError(f"cannot read the STaRK SKB files in {directory}: {exc}") from exc
    return out


def to_undirected(edge_index: np.ndarray, edge_types: np.ndarray, num_nodes: int) -> tuple[np.ndarray, ...]:
    """PyG's ``to_undirected(..., reduce="mean")`` as the official loader applies it."""
    src, dst = edge_index
    forward = np.unique(src * num_nodes + dst)
    backward = np.unique(dst * num_nodes + src)
    if forward.shape == backward.shape and np.array_equal(forward, backward):
        return src, dst, edge_types  # already undirected: the official loader leaves it as is
    rows = np.concatenate([src, dst])
    cols = np.concatenate([dst, src])
    types = np.concatenate([edge_types, edge_types])
    keys, inverse = np.unique(rows * num_nodes + cols, return_inverse=True)
    sums = np.bincount(inverse, weights=types, minlength=len(keys))
    counts = np.bincount(inverse, minlength=len(keys))
    merged = (sums // counts).astype(np.int64)  # integer mean, truncated like ``.long()``
    return keys // num_nodes, keys % num_nodes, merged


class _Names(Sequence[str]):
    """Node names read from ``node_info`` on demand (no copy of every name)."""

    def __init__(self, skb: StarkSKB) -> None:
        self.skb = skb

    def __len__(self) -> int:
        return self.skb.num_nodes

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.skb.node_name(int(index))


class _Info(Sequence[Mapping[str, Any]]):
    def __init__(self, node_info: Mapping[int, Any]) -> None:
        self.node_info = node_info

    def __len__(self) -> int:
        return len(self.node_info)

    def __getitem__(self, index: Any) -> Any:
        return self.node_info[int(index)]


def file_fingerprint(directory: Path) -> str:
    """SHA-256 over the processed files (streamed; computed once per file state)."""
    from harness.io import cache_root, stable_hash

    files = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in (".pkl", ".pt"))
    state = stable_hash([[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files])
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


class StarkSKB(SKB):
    """An SKB read from STaRK's processed files. Subclasses define names and documents."""

    skb_name: ClassVar[str] = "stark"
    default_node_types: ClassVar[dict[int, str]] = {}
    default_edge_types: ClassVar[dict[int, str]] = {}
    candidate_type_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, processed: dict[str, Any], fingerprint: str | None = None) -> None:
        self.node_info: Mapping[int, Any] = processed["node_info"]
        # Relation lines repeat the same neighbour names; each costs one unpickle from the store.
        self.node_name = functools.lru_cache(maxsize=1 << 18)(self.node_name)  # type: ignore[method-assign]
        node_type_dict = processed.get("node_type_dict") or self.default_node_types
        edge_type_dict = processed.get("edge_type_dict") or self.default_edge_types
        if not node_type_dict or not edge_type_dict:
            raise HarnessError(f"{self.skb_name}: node_type_dict.pkl / edge_type_dict.pkl are missing")
        self.node_type_dict = dict(node_type_dict)
        self.edge_type_dict = dict(edge_type_dict)
        node_types = processed["node_types"]
        n = len(node_types)
        if len(self.node_info) != n:
            raise HarnessError(f"{self.skb_name}: {len(self.node_info)} entries in node_info but {n} node types")
        type_names = [self.node_type_dict[i] for i in sorted(self.node_type_dict)]
        relation_ids = sorted(self.edge_type_dict)
        src, dst, types = to_undirected(processed["edge_index"], processed["edge_types"], n)
        super().__init__(
            name=self.skb_name,
            node_type_names=type_names,
            node_types=np.searchsorted(sorted(self.node_type_dict), node_types),
            names=_Names(self),
            fields=_Info(self.node_info),
            edge_types=[EdgeType(self.edge_type_dict[i]) for i in relation_ids],
            src=src,
            dst=dst,
            edge_type=np.searchsorted(relation_ids, types),
            candidate_types=list(self.candidate_type_names) or type_names,
            fingerprint=fingerprint,
            undirected=True,
        )

    # -- what subclasses provide -------------------------------------------------------
    def node_name(self, node: int) -> str:
        raise NotImplementedError

    def doc_info(self, node: int, add_rel: bool) -> str:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def document(self, node: int, with_relations: bool = False, compact: bool = False) -> str:
        doc = self.doc_info(int(node), with_relations)
        return compact_text(doc) if compact else doc

    def neighbors_by(self, node: int, relation: str) -> list[int]:
        """Neighbour ids through one relation, ascending (as the official sparse look-up)."""
        return self.neighbors(node, relation).tolist()

    def relation_names(self) -> list[str]:
        return [self.edge_type_dict[i] for i in self.edge_type_dict]


def _clean(value: Any) -> Any:
    """STaRK's ``clean_dict``: drop entries whose value prints as '' or 'nan'."""
    if not isinstance(value, dict):
        return value
    return {k: _clean(v) for k, v in value.items() if isinstance(v, dict) or str(v) not in ("", "nan")}


class PrimeSKB(StarkSKB):
    skb_name = "stark-prime"
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

    def info(self, node: int) -> dict[str, Any]:
        return _clean(self.node_info[node])

    def node_name(self, node: int) -> str:
        return str(self.info(node)["name"])

    def doc_info(self, node: int, add_rel: bool) -> str:
        info = self.info(node)
        doc = f"- name: {info['name']}\n- type: {info['type']}\n- source: {info['source']}\n"
        details, count = "- details:\n", 0
        for key, value in info.get("details", {}).items():
            if str(value) in ("", "nan") or key.startswith("_") or "_id" in key:
                continue
            if info["type"] == "gene/protein" and key in self.GENE_FIELDS:
                if "interpro" in key:
                    value = [v["desc"] for v in ([value] if isinstance(value, dict) else value)]
                if "generif" in key:
                    value = " ".join("; ".join(v["text"] for v in value).split(" ")[:50000])
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
            types = self.node_types[ids]
            for type_index in sorted(set(types.tolist())):
                doc += f"{self.node_type_names[type_index]}: "
                names = ", ".join(self.node_name(int(i)) for i in ids[types == type_index])
                doc += f"({names}),"
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

    def node_name(self, node: int) -> str:
        info = self.node_info[node]
        return str(info["title"] if info["type"] == "paper" else info["DisplayName"])

    def doc_info(self, node: int, add_rel: bool) -> str:
        info = self.node_info[node]
        kind = info["type"]
        if kind == "paper":
            doc = f" - paper title: {info['title']}\n"
            doc += " - abstract: " + info["abstract"].replace("\r", "").rstrip("\n") + "\n"
            if str(info["Date"]) != "-1":
                doc += f" - publication date: {info['Date']}\n"
            for key, label in (
                ("OriginalVenue", "venue"),
                ("JournalDisplayName", "journal"),
                ("ConferenceSeriesDisplayName", "conference"),
                ("ConferenceInstancesDisplayName", "conference"),
            ):
                if str(info[key]) != "-1":
                    doc += f" - {label}: {info[key]}\n"
                    break
        else:
            prefix = {"author": "- author name", "field_of_study": " - field of study", "institution": " - institution"}
            short = {"author": "author", "field_of_study": "field", "institution": "institution"}[kind]
            doc = f"{prefix[kind]}: {info['DisplayName']}\n"
            if info["PaperCount"] != -1:
                doc += f"- {short} paper count: {info['PaperCount']}\n"
            if info["CitationCount"] != -1:
                doc += f"- {short} citation count: {info['CitationCount']}\n"
            doc = doc.replace("-1", "Unknown")
        if add_rel and kind == "paper":
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
                info = self.node_info[i]
                if info["type"] == "paper":
                    neighbours.append(f'"{info["title"]}"')
                elif str(info["DisplayName"]) == "-1":
                    continue
                elif info["type"] == "author":
                    places = [
                        self.node_info[j]["DisplayName"]
                        for j in self.neighbors_by(i, "author___affiliated_with___institution")
                        if str(self.node_info[j]["DisplayName"]) != "-1"
                    ]
                    neighbours.append(f"{info['DisplayName']} ({', '.join(places)})" if places else info["DisplayName"])
                else:
                    neighbours.append(f"{info['DisplayName']}")
            doc += "(" + ", ".join(neighbours) + "),"
        return "- relations:\n" + doc if doc else ""


class AmazonSKB(StarkSKB):
    skb_name = "stark-amazon"
    candidate_type_names = ("product",)
    VARIANT = "brand-category-color"

    def __init__(self, processed: dict[str, Any], fingerprint: str | None = None, max_entries: int = 25) -> None:
        self.max_entries = max_entries
        super().__init__(processed, fingerprint)

    def node_name(self, node: int) -> str:
        info = self.node_info[node]
        kind = self.node_type(node)
        return str(info["title"] if kind == "product" else info[f"{kind}_name"])

    def document(self, node: int, with_relations: bool = False, compact: bool = False) -> str:
        if self.node_type(int(node)) != "product":  # the official code returns these as they are
            return self.doc_info(int(node), False)
        return super().document(node, with_relations, compact)

    def doc_info(self, node: int, add_rel: bool) -> str:
        kind = self.node_type(node)
        info = self.node_info[node]
        if kind != "product":
            return f"{kind} name: {info[f'{kind}_name']}"
        doc = f"- product: {info['title']}\n"
        if "brand" in info:
            doc += f"- brand: {info['brand']}\n"
        dimensions = (info.get("details") or {}).get("product_dimensions")
        parts = dimensions.split(" ; ") if isinstance(dimensions, str) else []
        if len(parts) == 2:
            doc += f"- dimensions: {parts[0]}\n- weight: {parts[1]}\n"
        if info.get("description"):
            description = " ".join(info["description"]).strip(" ")
            if description:
                doc += f"- description: {description}\n"
        features = ""
        if info.get("feature"):
            features = "- features: \n"
            for i, feature in enumerate(info["feature"]):
                if feature and "asin" not in feature.lower():
                    features += f"#{i + 1}: {feature}\n"
        reviews = ""
        if info.get("review"):
            reviews = "- reviews: \n"
            votes = [0 if _missing(r["vote"]) else int(str(r["vote"]).replace(",", "")) for r in info["review"]]
            for shown, i in enumerate(np.argsort(-np.array(votes))):
                review = info["review"][i]
                reviews += f'#{i + 1}:\nsummary: {review["summary"]}\ntext: "{review["reviewText"]}"\n'
                if shown > self.max_entries:
                    break
        answers = ""
        if info.get("qa"):
            answers = "- Q&A: \n"
            for i, qa in enumerate(info["qa"]):
                answers += f'#{i + 1}:\nquestion: "{qa["question"]}"\nanswer: "{qa["answer"]}"\n'
                if i > self.max_entries:
                    break
        doc += features + reviews + answers
        if add_rel:
            doc += self.rel_info(node)
        return doc

    def rel_info(self, node: int) -> str:
        doc = ""
        for relation, label in (("also_buy", "products also purchased"), ("also_view", "products also viewed")):
            ids = self.neighbors_by(node, relation) if relation in self.relation_names() else []
            if ids:
                doc += f"  {label}: \n" + "".join(
                    f"#{k + 1}: {self.node_info[i]['title']}\n" for k, i in enumerate(ids)
                )
        brands = self.neighbors_by(node, "has_brand") if "has_brand" in self.relation_names() else []
        if brands:
            doc += f"  brand: {self.node_info[brands[0]]['brand_name']}\n"
        return "- relations:\n" + doc if doc else ""


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
