"""``harness import``: your own data as an SKB and a query set, ready for ``-d local --data-dir DIR``.

``harness import tables`` reads node and edge tables (CSV, TSV, JSON Lines, Parquet);
``harness import db`` reads a relational database (a SQLite file or any SQLAlchemy URL). Both
read the queries from a table and write ``DIR/skb`` (the harness format) and ``DIR/qa``
(STaRK's layout) together, or nothing at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

import harness

QUERY_HELP = "query table (CSV, TSV, JSONL, Parquet): id, query text, answer ids (a JSON list or 'a;b'), split"


def _common(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options both sources share: the queries, the output, the candidates."""
    options = [
        click.option("--queries", "queries_file", required=True, type=click.Path(dir_okay=False), help=QUERY_HELP),
        # not click.Path(file_okay=False): a file in the way is one error line (staging.claimed), not a usage text
        click.option("--out", required=True, type=click.Path(), help="directory to write (skb/ and qa/)"),
        click.option(
            "--candidates",
            multiple=True,
            metavar="TYPE",
            help="node type queries retrieve (repeat for several; default: every type)",
        ),
        click.option("--name", "skb_name", help="the SKB's name (default: the --out directory's name)"),
        click.option("--query-id-column", default="id", show_default=True),
        click.option("--query-column", default="query", show_default=True, help="the query text's column"),
        click.option("--answers-column", default="answer_ids", show_default=True),
        click.option("--split-column", default="split", show_default=True),
        click.option("--split", "default_split", help="put every query in this split (a table without a split column)"),
        click.option("--force", is_flag=True, help="replace --out if it exists (only once the new one is complete)"),
        click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group("import")
def import_command() -> None:
    """Build an SKB and its queries from your own data: node and edge tables, or a relational
    database. Run it with `harness run -d local --data-dir DIR`."""


@import_command.command("tables")
@click.option(
    "--nodes",
    "node_files",
    multiple=True,
    required=True,
    metavar="[TYPE=]FILE",
    help="node table: id, type, name, every other column a text field; TYPE=FILE gives all its rows "
    "that type (no type column needed). Repeat for several files",
)
@click.option(
    "--edges",
    "edge_files",
    multiple=True,
    metavar="[TYPE=]FILE",
    help="edge table: src, dst, type (TYPE=FILE: all of that type); repeated rows are repeated edges",
)
@click.option("--id-column", default="id", show_default=True, help="node tables: the id's column")
@click.option("--type-column", default="type", show_default=True, help="node tables: the type's column")
@click.option("--name-column", default="name", show_default=True, help="node tables: the name's column")
@click.option("--src-column", default="src", show_default=True, help="edge tables: the source node id's column")
@click.option("--dst-column", default="dst", show_default=True, help="edge tables: the target node id's column")
@click.option("--edge-type-column", default="type", show_default=True, help="edge tables: the type's column")
@_common
def tables(
    node_files: tuple[str, ...],
    edge_files: tuple[str, ...],
    id_column: str,
    type_column: str,
    name_column: str,
    src_column: str,
    dst_column: str,
    edge_type_column: str,
    **common: Any,
) -> None:
    """Node and edge tables (CSV, TSV, JSON Lines or Parquet, by extension) → DIR/skb + DIR/qa.

    \b
    harness import tables --nodes nodes.csv --edges edges.csv --queries queries.csv --out mydata/
    harness import tables --nodes paper=papers.parquet --nodes author=authors.csv \\
        --edges written_by=authorship.csv --queries q.jsonl --candidates paper --out mydata/
    """
    from harness_formats.build import SKBBuilder, progress_bars
    from harness_formats.from_tables import TableColumns, read_edges, read_nodes

    columns = TableColumns(id_column, type_column, name_column, src_column, dst_column, edge_type_column)
    builder = SKBBuilder()
    with _claimed(common), progress_bars() as track:
        sources = [read_nodes(builder, spec, columns, track) for spec in node_files]
        sources += [read_edges(builder, spec, columns, track) for spec in edge_files]
        _finish(builder, sources, {"command": "tables", "columns": vars(columns)}, track, **common)


@import_command.command("db")
@click.argument("database")
@click.option(
    "--name-column",
    "name_columns",
    multiple=True,
    metavar="TABLE=COLUMN",
    help="the column naming TABLE's rows (default: its first text column)",
)
@click.option("--exclude", multiple=True, metavar="TABLE", help="leave a table out (repeat for several)")
@_common
def db(database: str, name_columns: tuple[str, ...], exclude: tuple[str, ...], **common: Any) -> None:
    """A relational database → DIR/skb + DIR/qa: tables become node types, rows nodes (id
    TABLE:KEY), text columns fields, foreign keys typed edges (TABLE.COLUMN), link tables
    (two foreign keys, no text) direct edges. DATABASE: a SQLite file or a SQLAlchemy URL.

    \b
    harness import db shop.sqlite --queries queries.csv --candidates products --out shop/
    harness import db postgresql://user@host/db --name-column users=display_name --queries q.csv --out db/
    """
    from harness_formats.build import SKBBuilder, progress_bars
    from harness_formats.from_database import Database, read_database

    names: dict[str, str] = {}
    for spec in name_columns:
        table, _, column = spec.partition("=")
        if not table or not column:
            raise harness.HarnessError(f"--name-column {spec}: expected TABLE=COLUMN")
        names[table] = column
    source = Database(database, exclude)
    builder = SKBBuilder()
    with _claimed(common), progress_bars() as track:
        read = read_database(source, builder, names, track)
        provenance: dict[str, Any] = {"command": "db", "database": source.shown, **read, "excluded": list(exclude)}
        # not silently: the columns that are neither text nor keys (numbers, dates, blobs)
        provenance["columns_left_out"] = source.left_out()
        provenance["name_columns"] = names
        _finish(builder, [], provenance, track, **common)


def _claimed(common: dict[str, Any]) -> Any:
    """``--out``'s lock, held from before the tables are read (a second import or export into it
    stops at once); an existing ``--out`` without --force is said first."""
    from harness_formats.staging import claimed

    target = Path(common["out"])
    if target.exists() and not target.is_dir():
        raise harness.HarnessError(f"--out {target} is a file, not a directory")
    if target.exists() and not common["force"]:
        raise harness.HarnessError(f"{target} exists; choose another --out, or --force to replace it")
    return claimed(target)


def _finish(
    builder: Any,
    sources: list[Path],
    provenance: dict[str, Any],
    track: Any,
    *,
    queries_file: str,
    out: str,
    candidates: tuple[str, ...],
    skb_name: str | None,
    query_id_column: str,
    query_column: str,
    answers_column: str,
    split_column: str,
    default_split: str | None,
    force: bool,
    fmt: str,
) -> None:
    """Read the queries against what was built, write the directory, report the counts."""
    from harness_formats.build import QueryColumns, read_queries, summary, write_dataset
    from harness_formats.tables import open_table

    target = Path(out)
    if target.exists() and not force:  # said before the work, and again before the write
        raise harness.HarnessError(f"{target} exists; choose another --out, or --force to replace it")
    if not builder.ids:
        raise harness.HarnessError("no nodes were read")
    chosen = builder.candidate_types(list(candidates))
    query_table = open_table(queries_file)
    query_columns = QueryColumns(query_id_column, query_column, answers_column, split_column, default_split)
    queries = read_queries(query_table, builder, chosen, query_columns, track)
    name = skb_name or target.resolve().name
    files = [*sources, query_table.path]
    skb = builder.skb(name, chosen, f"imported by `harness import {provenance['command']}`")
    provenance = {
        **provenance,
        "harness": harness.__version__,
        "files": {str(path): harness.sha256_file(path) for path in files},
        "query_columns": vars(query_columns),
        **summary(target, skb, queries),
    }
    write_dataset(target, skb, builder.ids, queries, provenance, force)
    counts = summary(target, skb, queries)
    if "columns_left_out" in provenance:
        counts["columns_left_out"] = provenance["columns_left_out"]
    if fmt == "json":
        click.echo(json.dumps(counts, indent=2, ensure_ascii=False))
        return
    click.echo(
        f"wrote {target}: {counts['nodes']:,} nodes, {counts['edges']:,} edges, {counts['queries']:,} queries "
        f"(SKB fingerprint {counts['fingerprint']}; run it: harness run -d local --data-dir {target})"
    )
    for title, key in (("nodes", "nodes_by_type"), ("edges", "edges_by_type"), ("queries", "queries_by_split")):
        parts = ", ".join(f"{kind} {count:,}" for kind, count in counts[key].items()) or "none"
        click.echo(f"  {title} by {'split' if title == 'queries' else 'type'}: {parts}")
    click.echo(f"  candidates: {', '.join(counts['candidate_types'])}")
    if "columns_left_out" in counts:
        parts = "; ".join(f"{table}: {', '.join(columns)}" for table, columns in counts["columns_left_out"].items())
        click.echo(f"  columns left out (not text): {parts or 'none'}")
