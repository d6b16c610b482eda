"""``harness export``: a dataset's SKB, queries and answers in the formats other tools read.

- ``hf``: Hugging Face ``datasets`` (``save_to_disk`` and Parquet), every node and edge, so the
  SKB and its queries load back (:func:`harness_formats.hf.load_hf`); layout in ``hf.py``.
- ``beir``: ``corpus.jsonl`` (the candidates: what is retrieved), ``queries.jsonl`` and
  ``qrels/<split>.tsv``, as BEIR's ``GenericDataLoader`` reads them.
- ``trec``: ``qrels.<split>.trec`` for trec_eval.

Documents are the ones retrievers read (``SKB.documents``, with relation lines when asked).
The output appears whole or not at all: it is written under a temporary name and renamed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

import harness
from harness import SKB, HarnessError, Query, QuerySet
from harness_formats.hf import BATCH, Progress, qrels_rows, write_hf
from harness_formats.staging import claimed, output_dir


@click.command(name="export")
@click.option("--dataset", "-d", required=True, help="registry or plugin dataset to export")
@click.option("--split", "splits", multiple=True, help="a query split to export (repeat; default: every split)")
@click.option("--to", "to", type=click.Choice(["hf", "beir", "trec"]), required=True, help="the format")
@click.option("--out", required=True, type=click.Path(), help="directory to write (new or empty; see --force)")
@click.option(
    "--with-relations",
    is_flag=True,
    help="documents with their relation lines (what retrievers with with_relations read)",
)
@click.option(
    "--ids",
    type=click.Choice(["harness", "source"]),
    default="harness",
    show_default=True,
    help="beir, trec: ids as harness numbers, or the user's own (source: a dataset `harness import` wrote)",
)
@click.option("--force", is_flag=True, help="replace --out if it exists and is not empty")
@click.option("--data-dir", type=click.Path(file_okay=False), help="local copy of the dataset's files (data_dir)")
@click.option("--registry", "registry_path", type=click.Path(dir_okay=False), help="registry file")
def export(
    dataset: str,
    splits: tuple[str, ...],
    to: str,
    out: str,
    with_relations: bool,
    ids: str,
    force: bool,
    data_dir: str | None,
    registry_path: str | None,
) -> None:
    """Write a dataset as a Hugging Face dataset (hf), in BEIR's layout (beir) or as TREC qrels
    (trec). See the harness-formats README for each layout."""
    target = Path(out)
    _check_target(target, force)
    with claimed(target):  # before the work: a busy or unwritable --out is said at once
        _export(target, dataset, splits, to, with_relations, ids, data_dir, registry_path)


def _export(
    target: Path,
    dataset: str,
    splits: tuple[str, ...],
    to: str,
    with_relations: bool,
    ids: str,
    data_dir: str | None,
    registry_path: str | None,
) -> None:
    loaded = harness.load_dataset(dataset, data_dir, registry_path)
    queries = loaded.load_queries()
    chosen = list(dict.fromkeys(splits)) or queries.split_names
    for split in chosen:
        queries.split(split)  # an unknown split: the error names the known ones
    skb = loaded.load_skb()
    source = {"dataset": dataset, "params": loaded.params, "version": getattr(loaded, "version", None)}
    reader = getattr(loaded, "node_ids", None)  # the local dataset's: what `harness import` read
    node_ids = reader() if callable(reader) else None
    if ids == "source" and to == "hf":
        raise HarnessError("--ids source: for beir and trec; hf writes the user's ids in the nodes' source_id column")
    names = _source_ids(dataset, skb, queries, chosen, node_ids) if ids == "source" else None
    with _progress() as progress, _atomic_output(target) as tmp:
        if to == "hf":
            counts = write_hf(tmp, skb, queries, chosen, with_relations, source, progress, node_ids)
        elif to == "beir":
            counts = write_beir(tmp, skb, queries, chosen, with_relations, progress, names)
        else:
            counts = write_trec_qrels(tmp, skb, queries, chosen, names)
    click.echo(json.dumps({"format": to, "out": str(target), **counts}))


# -- BEIR and TREC ---------------------------------------------------------------------


@dataclass
class Names:
    """What a node and a query are called in the output: ``--ids source``, the user's ids."""

    nodes: list[str]
    queries: dict[int, str]

    def node(self, node: int) -> str:
        return self.nodes[node]

    def query(self, query: int) -> str:
        return self.queries[query]


def _source_ids(dataset: str, skb: SKB, queries: QuerySet, splits: list[str], node_ids: list[str] | None) -> Names:
    if node_ids is None:
        raise HarnessError(
            f"--ids source: dataset {dataset!r} keeps no ids of its own (node_ids.txt); "
            "it is for what `harness import` wrote (-d local)"
        )
    if len(node_ids) != skb.num_nodes:
        raise HarnessError(f"node_ids.txt holds {len(node_ids):,} ids for {skb.num_nodes:,} nodes")
    names = {q.id: str(q.metadata.get("source_id", q.id)) for s in splits for q in queries.split(s)}
    # TREC files are split on white space: an id holding any would be read as two columns
    for kind, values in (("node", node_ids), ("query", names.values())):
        spaced = next((v for v in values if not v or any(c.isspace() for c in v)), None)
        if spaced is not None:
            raise HarnessError(
                f"--ids source: {kind} id {spaced!r} is empty or holds white space, which TREC files cannot"
            )
    return Names(list(node_ids), names)


def write_beir(
    out: Path,
    skb: SKB,
    queries: QuerySet,
    splits: list[str],
    with_relations: bool,
    progress: Progress,
    names: Names | None = None,
) -> dict[str, Any]:
    """BEIR's layout. The corpus is the candidate set, ``title`` empty: the document already
    begins with the node's type and name, and BEIR's models read ``title + " " + text``, so
    they see exactly what the harness's retrievers see.

    BEIR keeps one ``queries.jsonl`` for every split, so query ids must be unique across
    splits. A split whose ids are also another split's (STaRK's human-generated queries reuse
    synthesized ones' ids) is written with BEIR's prefix convention instead:
    ``<split>-queries.jsonl`` and ``<split>-qrels/<split>.tsv``, read with
    ``GenericDataLoader(DIR, prefix=SPLIT).load(split=SPLIT)``. ``names``: ``--ids source``."""
    node_name = names.node if names else lambda node: str(int(node))
    query_name = names.query if names else str
    ids = skb.candidate_ids
    advance = progress(f"corpus of {skb.name}", len(ids))
    with _open(out / "corpus.jsonl") as corpus:
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            for node, text in zip(part, skb.documents(part, with_relations=with_relations), strict=True):
                corpus.write(_jsonl({"_id": node_name(int(node)), "title": "", "text": text}))
            advance(len(part))
    shared: dict[int, str] = {}  # query id → the first split holding it
    prefixed = []
    for split in splits:
        rows = queries.split(split)
        if any(q.id in shared for q in rows):
            prefixed.append(split)
            continue
        shared.update((q.id, split) for q in rows)
    with _open(out / "queries.jsonl") as handle:
        for split in splits:
            if split not in prefixed:
                handle.writelines(_jsonl({"_id": query_name(q.id), "text": q.text}) for q in queries.split(split))
    for split in prefixed:
        with _open(out / f"{split}-queries.jsonl") as handle:
            handle.writelines(_jsonl({"_id": query_name(q.id), "text": q.text}) for q in queries.split(split))
    for split in splits:
        folder = out / (f"{split}-qrels" if split in prefixed else "qrels")
        folder.mkdir(exist_ok=True)
        with _open(folder / f"{split}.tsv") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            judged = qrels_rows(skb, queries.split(split))
            handle.writelines(f"{query_name(q)}\t{node_name(d)}\t{s}\n" for q, d, s in judged)
    return {
        "corpus": len(ids),
        "queries": {s: len(queries.split(s)) for s in splits},
        "prefixed_splits": prefixed,
    }


def write_trec_qrels(
    out: Path, skb: SKB, queries: QuerySet, splits: list[str], names: Names | None = None
) -> dict[str, Any]:
    """``qrels.<split>.trec``: ``qid 0 docid 1`` for a candidate answer, ``0`` for an answer
    outside the candidates (so that ``trec_eval -c`` counts a query without a candidate answer,
    as the harness does); the qrels.trec a run directory holds, for every query of the split."""
    for split in splits:
        rows: list[Query] = queries.split(split)
        with _open(out / f"qrels.{split}.trec") as handle:
            if names is None:
                handle.writelines(f"{q} 0 {d} {s}\n" for q, d, s in qrels_rows(skb, rows))
            else:
                handle.writelines(f"{names.query(q)} 0 {names.node(d)} {s}\n" for q, d, s in qrels_rows(skb, rows))
    return {"queries": {s: len(queries.split(s)) for s in splits}}


def _jsonl(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


@contextlib.contextmanager
def _open(path: Path) -> Iterator[IO[str]]:
    try:
        with path.open("w", encoding="utf-8", newline="\n") as handle:
            yield handle
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:  # a write's error (a full disk) names no file: say which
            exc.filename = str(path)
        raise


# -- output: whole or nothing ----------------------------------------------------------


def _check_target(target: Path, force: bool) -> None:
    if target.exists() and not target.is_dir():
        raise HarnessError(f"--out {target} is a file, not a directory")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise HarnessError(f"--out {target} exists and is not empty; give --force to replace it")


def _atomic_output(target: Path) -> Any:
    """A temporary directory beside ``target`` that becomes ``target`` only on success; an
    existing ``target`` (empty, or replaced with --force) is swapped out only then, and one
    that appears meanwhile is an error."""
    return output_dir(target, replace=target.exists())


@contextlib.contextmanager
def _progress() -> Iterator[Progress]:
    """Progress bars on stderr when it is a terminal (the harness's own display is not part of
    the plugin API)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    display = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )

    def task(description: str, total: int) -> Callable[[int], None]:
        ident = display.add_task(description, total=total)
        return lambda n: display.advance(ident, n)

    with display:
        yield task
