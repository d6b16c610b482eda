"""A dataset as Hugging Face ``datasets`` and Parquet files, and back into an SKB and queries.

The layout (``harness export --to hf``; README.md, "Export")::

    harness.json              what the files cannot say: format, the SKB's types, relations,
                              candidate types, document settings, the splits' names
    README.md                 a dataset card whose ``configs`` let ``load_dataset(DIR, "nodes")`` work
    parquet/nodes.parquet     every node: id, name, type, candidate, text (its document), fields (JSON),
                              source_id (the user's id: only for an imported dataset, -d local)
    parquet/edges.parquet     every edge: src, dst, type (the relation's name), in the SKB's order
    parquet/queries/S.parquet one per split: id, text, answer_ids, split, metadata (JSON)
    parquet/qrels/S.parquet   one per split: query_id, corpus_id, score (1: a candidate answer,
                              0: an answer outside the candidates, as qrels.trec of a run)
    hf/nodes hf/edges         ``Dataset.save_to_disk``
    hf/queries hf/qrels       ``DatasetDict.save_to_disk``, one split per query split

Split names are Hugging Face split names (``human-generated`` → ``human_generated``: ``datasets``
accepts only word characters); each query row keeps the original in ``split``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import harness
from harness import SKB, EdgeType, HarnessError, Query, QuerySet

FORMAT = "harness-hf/1"
BATCH = 2_000

#: what a progress callback gets: a description and a total; it returns advance(n)
Progress = Callable[[str, int], Callable[[int], None]]


def hf_split_name(split: str) -> str:
    """A split name ``datasets`` accepts (``^\\w+(\\.\\w+)*$``)."""
    return re.sub(r"\W", "_", split) or "_"


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    return {
        "nodes": pa.schema(
            [
                ("id", pa.int64()),
                ("name", pa.string()),
                ("type", pa.string()),
                ("candidate", pa.bool_()),
                ("text", pa.string()),
                ("fields", pa.string()),
            ]
        ),
        "edges": pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("type", pa.string())]),
        "queries": pa.schema(
            [
                ("id", pa.int64()),
                ("text", pa.string()),
                ("answer_ids", pa.list_(pa.int64())),
                ("split", pa.string()),
                ("metadata", pa.string()),
            ]
        ),
        "qrels": pa.schema([("query_id", pa.int64()), ("corpus_id", pa.int64()), ("score", pa.int32())]),
    }


def builds_own_documents(skb: SKB) -> bool:
    """True when the SKB's class makes documents its own way (not from names and fields)."""
    return type(skb).document is not SKB.document or type(skb).relation_lines is not SKB.relation_lines


def qrels_rows(skb: SKB, queries: list[Query]) -> Iterator[tuple[int, int, int]]:
    """``(query, answer, 1 or 0)``: a candidate answer is relevant, another answer is judged not
    relevant (so that a query without a candidate answer still counts, as in a run's
    qrels.trec); each answer once, candidates first, in id order."""
    for query in queries:
        answers = np.unique(np.asarray(query.answer_ids, dtype=np.int64))
        inside = (answers >= 0) & (answers < skb.num_nodes)
        mask = np.zeros(len(answers), dtype=bool)
        mask[inside] = skb.is_candidate(answers[inside])
        for answer in answers[mask]:
            yield query.id, int(answer), 1
        for answer in answers[~mask]:
            yield query.id, int(answer), 0


def write_hf(
    out: Path,
    skb: SKB,
    queries: QuerySet,
    splits: list[str],
    with_relations: bool,
    source: dict[str, Any],
    progress: Progress,
    node_ids: list[str] | None = None,
) -> dict[str, Any]:
    """Write the layout above into ``out`` (an empty directory). Returns its counts.
    ``node_ids``: the user's id of every node (an imported dataset's node_ids.txt), written
    as the nodes' ``source_id`` column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = _schemas()
    if node_ids is not None:
        if len(node_ids) != skb.num_nodes:
            raise HarnessError(f"node_ids.txt holds {len(node_ids):,} ids for {skb.num_nodes:,} nodes")
        schemas["nodes"] = schemas["nodes"].append(pa.field("source_id", pa.string()))
    parquet = out / "parquet"
    (parquet / "queries").mkdir(parents=True)
    (parquet / "qrels").mkdir()
    type_names = skb.node_type_names
    candidate = np.zeros(skb.num_nodes, dtype=bool)
    candidate[skb.candidate_ids] = True

    advance = progress(f"nodes of {skb.name}", skb.num_nodes)
    with pq.ParquetWriter(parquet / "nodes.parquet", schemas["nodes"]) as writer:
        for start in range(0, skb.num_nodes, BATCH):
            ids = range(start, min(start + BATCH, skb.num_nodes))
            columns = {
                "id": list(ids),
                "name": [str(skb.names[i]) for i in ids],
                "type": [type_names[skb.node_types[i]] for i in ids],
                "candidate": candidate[start : ids.stop].tolist(),
                "text": list(skb.documents(ids, with_relations=with_relations)),
                "fields": [json.dumps(dict(skb.fields[i]), ensure_ascii=False, default=str) for i in ids],
            }
            if node_ids is not None:
                columns["source_id"] = node_ids[ids.start : ids.stop]
            writer.write_table(pa.table(columns, schema=schemas["nodes"]))
            advance(len(ids))

    relation_names = np.asarray([e.name for e in skb.edge_types] or [""], dtype=object)
    advance = progress(f"edges of {skb.name}", skb.num_edges)
    with pq.ParquetWriter(parquet / "edges.parquet", schemas["edges"]) as writer:
        step = 1_000_000
        for start in range(0, skb.num_edges, step):
            part = slice(start, start + step)
            columns = {
                "src": skb.src[part],
                "dst": skb.dst[part],
                "type": relation_names[skb.edge_type[part]].tolist(),
            }
            writer.write_table(pa.table(columns, schema=schemas["edges"]))
            advance(len(columns["src"]))

    names: dict[str, str] = {}
    for split in splits:
        name = hf_split_name(split)
        if name in names:
            raise HarnessError(f"splits {names[name]!r} and {split!r} both become {name!r} as Hugging Face splits")
        names[name] = split
        rows = queries.split(split)
        columns = {
            "id": [q.id for q in rows],
            "text": [q.text for q in rows],
            "answer_ids": [[int(a) for a in q.answer_ids] for q in rows],
            "split": [split] * len(rows),
            "metadata": [json.dumps(dict(q.metadata), ensure_ascii=False, default=str) for q in rows],
        }
        pq.write_table(pa.table(columns, schema=schemas["queries"]), parquet / "queries" / f"{name}.parquet")
        judged = list(qrels_rows(skb, rows))
        columns = {key: [row[i] for row in judged] for i, key in enumerate(("query_id", "corpus_id", "score"))}
        pq.write_table(pa.table(columns, schema=schemas["qrels"]), parquet / "qrels" / f"{name}.parquet")

    meta: dict[str, Any] = {
        "format": FORMAT,
        "source": source,
        "skb": {
            "name": skb.name,
            "description": skb.description,
            "node_types": list(type_names),
            "edge_types": [vars(e) for e in skb.edge_types],
            "candidate_types": list(skb.candidate_types),
            "max_neighbors_in_doc": skb.max_neighbors_in_doc,
            "undirected": skb.undirected,
            "fingerprint": skb.fingerprint,
            "num_nodes": skb.num_nodes,
            "num_edges": skb.num_edges,
            "candidates": len(skb.candidate_ids),
        },
        "documents": {
            "with_relations": with_relations,
            # an SKB class with its own documents cannot be rebuilt from names and fields
            "built_by": type(skb).__qualname__ if builds_own_documents(skb) else "fields",
        },
        "queries": {"name": queries.name, "splits": names, "counts": {s: len(queries.split(s)) for s in splits}},
    }
    harness.write_json(out / "harness.json", meta)
    _save_to_disk(out, names, progress)
    (out / "README.md").write_text(_card(meta), encoding="utf-8")
    return {"nodes": skb.num_nodes, "edges": skb.num_edges, "queries": meta["queries"]["counts"]}


def _save_to_disk(out: Path, splits: dict[str, str], progress: Progress) -> None:
    """The Parquet files again as ``save_to_disk`` directories, through ``datasets`` itself
    (its Arrow cache kept inside ``out`` and deleted after)."""
    import datasets

    cache = out / ".hf-cache"
    parquet = out / "parquet"
    enabled = datasets.utils.logging.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # ours say what is being written
    try:
        advance = progress("save_to_disk", 2 + 2 * len(splits))

        def load(path: Path) -> Any:
            return datasets.Dataset.from_parquet(str(path), cache_dir=str(cache), keep_in_memory=False)

        for table in ("nodes", "edges"):
            load(parquet / f"{table}.parquet").save_to_disk(str(out / "hf" / table))
            advance(1)
        for table in ("queries", "qrels"):
            parts = {}
            for name in splits:
                parts[name] = load(parquet / table / f"{name}.parquet")
                advance(1)
            datasets.DatasetDict(parts).save_to_disk(str(out / "hf" / table))
    finally:
        if enabled:
            datasets.enable_progress_bars()
        shutil.rmtree(cache, ignore_errors=True)


def _card(meta: dict[str, Any]) -> str:
    """A dataset card whose YAML ``configs`` make ``datasets.load_dataset(DIR, CONFIG)`` read
    the Parquet files."""
    splits = meta["queries"]["splits"]
    lines = ["---", "configs:"]
    for table in ("nodes", "edges"):
        lines += [f"- config_name: {table}", "  data_files:", "  - split: train", f"    path: parquet/{table}.parquet"]
    for table in ("queries", "qrels") if splits else ():
        lines += [f"- config_name: {table}", "  data_files:"]
        for name in splits:
            lines += [f"  - split: {name}", f"    path: parquet/{table}/{name}.parquet"]
    skb = meta["skb"]
    lines += [
        "---",
        "",
        f"# {skb['name']}, exported by stark-harness",
        "",
        f"{skb['description']}".strip(),
        "",
        f"{skb['num_nodes']:,} nodes ({skb['candidates']:,} candidates: {', '.join(skb['candidate_types'])}), "
        f"{skb['num_edges']:,} edges; queries: "
        + ", ".join(f"{s} {n:,}" for s, n in meta["queries"]["counts"].items())
        + ".",
        "",
        "Configs: `nodes` (id, name, type, candidate, text: the document retrievers read, fields: JSON), "
        "`edges` (src, dst, type), `queries` (id, text, answer_ids, split, metadata: JSON), `qrels` "
        "(query_id, corpus_id, score: 1 for a candidate answer, 0 for an answer outside the candidates).",
        "",
        "```python",
        "import datasets",
        'queries = datasets.load_dataset("parquet", data_files={"test": "parquet/queries/test.parquet"})',
        'nodes = datasets.load_from_disk("hf/nodes")',
        "```",
        "",
        "Back into the harness: `harness_formats.hf.load_hf(DIR)` gives the SKB and the query set.",
        "",
    ]
    return "\n".join(lines)


# -- back into the harness ------------------------------------------------------------


def load_hf(directory: str | Path) -> tuple[SKB, QuerySet]:
    """The SKB and the query set of an export (``harness export --to hf``).

    Documents are rebuilt from names, fields and edges, so they read as the exported SKB's
    did; an export of an SKB whose class builds its own documents is refused."""
    import pyarrow.parquet as pq

    directory = Path(directory)
    meta_path = directory / "harness.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HarnessError(f"{directory} is not a harness export: cannot read {meta_path.name} ({exc})") from None
    except ValueError as exc:
        raise HarnessError(f"{meta_path}: not JSON ({exc})") from None
    if meta.get("format") != FORMAT:
        raise HarnessError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    built_by = meta["documents"]["built_by"]
    if built_by != "fields":
        raise HarnessError(
            f"{meta_path}: the SKB was exported from {built_by}, whose documents come from its code, not from "
            "names and fields: its nodes' text is in parquet/nodes.parquet, but an SKB reading the same cannot be "
            "rebuilt from it"
        )
    info = meta["skb"]
    parquet = directory / "parquet"

    def read(path: Path, columns: list[str]) -> Any:
        try:
            return pq.read_table(path, columns=columns)
        except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
            raise HarnessError(f"cannot read {path}: {exc}") from None

    nodes_path = parquet / "nodes.parquet"
    nodes = read(nodes_path, ["id", "name", "type", "fields"])
    ids = nodes.column("id").to_numpy()
    wrong = np.flatnonzero(ids != np.arange(len(ids)))
    if len(wrong):
        raise HarnessError(f"{nodes_path}: row {wrong[0]}: id {ids[wrong[0]]}, expected {wrong[0]} (ids are 0..n-1)")
    node_types = _indices(nodes.column("type"), info["node_types"], nodes_path, "node type")
    fields = []
    for row, text in enumerate(nodes.column("fields").to_pylist()):
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            value = None
        if not isinstance(value, dict):
            raise HarnessError(f"{nodes_path}: row {row}, column fields: not a JSON object: {text!r}")
        fields.append(value)
    edges_path = parquet / "edges.parquet"
    edges = read(edges_path, ["src", "dst", "type"])
    relations = [e["name"] for e in info["edge_types"]]
    skb = SKB(
        name=info["name"],
        description=info["description"],
        node_type_names=info["node_types"],
        node_types=node_types,
        names=nodes.column("name").to_pylist(),
        fields=fields,
        edge_types=[EdgeType(**e) for e in info["edge_types"]],
        src=edges.column("src").to_numpy(),
        dst=edges.column("dst").to_numpy(),
        edge_type=_indices(edges.column("type"), relations, edges_path, "relation"),
        candidate_types=info["candidate_types"],
        max_neighbors_in_doc=info["max_neighbors_in_doc"],
        undirected=info["undirected"],
    )
    splits: dict[str, list[Query]] = {}
    for name, split in meta["queries"]["splits"].items():
        path = parquet / "queries" / f"{name}.parquet"
        table = read(path, ["id", "text", "answer_ids", "metadata"]).to_pylist()
        found = []
        for row, entry in enumerate(table):
            try:
                metadata = json.loads(entry["metadata"])
            except (TypeError, ValueError):
                raise HarnessError(f"{path}: row {row}, column metadata: not JSON: {entry['metadata']!r}") from None
            found.append(Query(entry["id"], entry["text"], tuple(entry["answer_ids"] or ()), metadata))
        splits[split] = found
    return skb, QuerySet(meta["queries"]["name"], splits)


def _indices(column: Any, names: list[str], path: Path, what: str) -> np.ndarray:
    """Each value's index in ``names``; an unknown value is an error naming its row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = pc.index_in(column, value_set=pa.array(names, type=pa.string()))
    if found.null_count:
        row = int(pc.index(pc.is_null(found), True).as_py())
        raise HarnessError(
            f"{path}: row {row}, column type: unknown {what} {column[row].as_py()!r} (known: {', '.join(names)})"
        )
    return found.to_numpy(zero_copy_only=False).astype(np.int64)
