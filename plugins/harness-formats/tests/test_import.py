"""``harness import`` (tables and databases) and the ``local`` dataset, end to end through the
command line: the SKB read back is checked against the input files read here independently
(``csv``, ``json``, ``sqlite3``), the runs against pytrec_eval and ir_measures."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import harness
from harness.testing import check_run_dir
from harness.testing import invoke as harness_command
from harness_formats.local import LocalDataset

# A small library: 8 books (the candidates), 6 authors, 4 genres, 2 publishers = 20 nodes.
BOOKS = [
    ("b1", "The Salt Road", "A caravan crosses the desert carrying salt and secrets.", "en"),
    ("b2", "Das Glasperlenspiel", "Ein Spiel der Gelehrten in Kastalien, über Musik und Mathematik.", "de"),
    ("b3", "Cœur de pierre", "Un sculpteur taille la pierre et trouve son cœur.", "fr"),
    ("b4", "雪国", "A story of snow country, hot springs and a geisha.", "ja"),
    ("b5", "Orbital Gardens", "Botanists grow forests aboard a space station.", ""),
    ("b6", "The Quiet Lighthouse", "A keeper's diary from a remote lighthouse in winter storms.", "en"),
    ("b7", "Numbers at Dusk", "Essays on mathematics, music, and counting stars.", "en"),
    ("b8", "Desert Bloom", "Seeds in the desert wait for the rare rain.", "en"),
]
AUTHORS = [
    ("a1", "Amara Okafor", "Writes about deserts and trade routes."),
    ("a2", "Hermann Hesse", "Nobel laureate, German-Swiss novelist."),
    ("a3", "Élodie Marchand", ""),
    ("a4", "川端康成", "Japanese novelist."),
    ("a5", "Priya Raman", "Botanist and science-fiction author."),
    ("a6", "Tom Ashby", "Former lighthouse keeper."),
]
GENRES = [("g1", "adventure"), ("g2", "literary fiction"), ("g3", "science fiction"), ("g4", "essays")]
PUBLISHERS = [("p1", "Sandglass Press", "Lagos"), ("p2", "Éditions du Nord", "Lille")]
EDGES = [
    ("b1", "a1", "written_by"),
    ("b2", "a2", "written_by"),
    ("b3", "a3", "written_by"),
    ("b4", "a4", "written_by"),
    ("b5", "a5", "written_by"),
    ("b6", "a6", "written_by"),
    ("b7", "a2", "written_by"),
    ("b7", "a5", "written_by"),
    ("b8", "a1", "written_by"),
    ("b8", "a1", "written_by"),  # a multi-edge: kept
    ("b1", "g1", "genre"),
    ("b2", "g2", "genre"),
    ("b3", "g2", "genre"),
    ("b4", "g2", "genre"),
    ("b5", "g3", "genre"),
    ("b6", "g2", "genre"),
    ("b7", "g4", "genre"),
    ("b8", "g1", "genre"),
    ("b1", "p1", "published_by"),
    ("b8", "p1", "published_by"),
    ("b3", "p2", "published_by"),
]
QUERIES = [
    ("q1", "a caravan carrying salt across the desert", ["b1"], "test"),
    ("q2", "mathematics and music", ["b2", "b7"], "test"),
    ("q3", "snow country geisha", ["b4"], "test"),
    ("q4", "forests on a space station", ["b5"], "val"),
    ("q5", "lighthouse keeper diary", ["b6"], "val"),
    ("q6", "seeds waiting for rain in the desert", ["b8", "b1"], "test"),
]


def invoke(*args: str) -> tuple[int, str, str]:
    result = harness_command(*args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def node_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    rows += [{"id": i, "type": "book", "name": t, "description": d, "language": lang} for i, t, d, lang in BOOKS]
    rows += [{"id": i, "type": "author", "name": n, "description": b, "language": ""} for i, n, b in AUTHORS]
    rows += [{"id": i, "type": "genre", "name": n, "description": "", "language": ""} for i, n in GENRES]
    rows += [{"id": i, "type": "publisher", "name": n, "description": c, "language": ""} for i, n, c in PUBLISHERS]
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_tables(directory: Path, fmt: str = "csv") -> dict[str, Path]:
    """The library's nodes, edges and queries as files of one format."""
    directory.mkdir(parents=True, exist_ok=True)
    nodes = node_rows()
    edges = [{"src": s, "dst": d, "type": t} for s, d, t in EDGES]
    queries = [{"id": i, "query": q, "answer_ids": a, "split": s} for i, q, a, s in QUERIES]
    paths = {name: directory / f"{name}.{fmt}" for name in ("nodes", "edges", "queries")}
    if fmt == "csv":
        write_csv(paths["nodes"], nodes)
        write_csv(paths["edges"], edges)
        # answers both ways a CSV may hold them: a JSON list and "a;b"
        for number, query in enumerate(queries):
            ids = query["answer_ids"]
            query["answer_ids"] = json.dumps(ids) if number % 2 else ";".join(ids)
        write_csv(paths["queries"], queries)
    elif fmt == "jsonl":
        for name, rows in (("nodes", nodes), ("edges", edges), ("queries", queries)):
            # empty cells are absent keys or nulls in JSON Lines
            lines = [{k: (v if v != "" else None) for k, v in row.items()} for row in rows]
            paths[name].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), "utf-8")
    else:
        for name, rows in (("nodes", nodes), ("edges", edges), ("queries", queries)):
            pq.write_table(pa.Table.from_pylist(rows), paths[name])
    return paths


def import_tables(paths: dict[str, Path], out: Path, *extra: str) -> tuple[int, str, str]:
    return invoke(
        "import", "tables", "--nodes", str(paths["nodes"]), "--edges", str(paths["edges"]),
        "--queries", str(paths["queries"]), "--out", str(out), "--candidates", "book", *extra,
    )  # fmt: skip


def run_local(data_dir: Path, split: str = "test", *extra: str) -> tuple[dict[str, Any], Path]:
    """``harness run -r bm25 -d local --data-dir DIR``; the row and its run directory, the row's
    metrics confirmed by pytrec_eval and ir_measures from the run's TREC files."""
    code, out, err = invoke(
        "run", "-r", "bm25", "-d", "local", "--data-dir", str(data_dir), "--split", split,
        "--metrics", "hit@1,hit@5,recall@20,mrr,ndcg@10", "--format", "json", *extra,
    )  # fmt: skip
    assert code == 0, err
    (result,) = json.loads(out)
    row, run_dir = result["row"], Path(result["run_dir"])
    confirmed = check_run_dir(run_dir)
    assert confirmed["pytrec_eval"] > 0 and confirmed["ir_measures"] > 0
    return row, run_dir


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def imported_queries(data_dir: Path) -> dict[int, str]:
    """The query numbers the import gave → the ids in the user's table."""
    return {int(r["id"]): r.get("source_id", r["id"]) for r in read_csv(data_dir / "qa/stark_qa/stark_qa.csv")}


def check_qrels(run_dir: Path, data_dir: Path, answers: dict[str, list[str]]) -> None:
    """The run's qrels are the user's answers, node ids mapped through node_ids.txt."""
    node_ids = (data_dir / "node_ids.txt").read_text(encoding="utf-8").splitlines()
    source = imported_queries(data_dir)
    qrels: dict[str, set[str]] = {}
    for line in (run_dir / "qrels.trec").read_text().splitlines():
        qid, _, doc, rel = line.split()
        if int(rel) > 0:
            qrels.setdefault(source[int(qid)], set()).add(node_ids[int(doc)])
    assert qrels == {qid: set(ids) for qid, ids in answers.items()}


def test_csv_tables_run_end_to_end(tmp_path: Path) -> None:
    """CSV tables → `harness import tables` → `harness run -d local`: the SKB holds every row
    and edge of the files (read back here with the csv module), the run is scored right."""
    paths = write_tables(tmp_path / "in")
    code, out, err = import_tables(paths, tmp_path / "library")
    assert code == 0, err
    assert "20 nodes, 21 edges, 6 queries" in out
    assert "nodes by type: book 8, author 6, genre 4, publisher 2" in out
    assert "edges by type: written_by 10, genre 8, published_by 3" in out
    assert "queries by split: test 4, val 2" in out

    data_dir = tmp_path / "library"
    skb = harness.SKB.load(data_dir / "skb")
    node_ids = (data_dir / "node_ids.txt").read_text(encoding="utf-8").splitlines()
    rows = read_csv(paths["nodes"])
    assert node_ids == [r["id"] for r in rows] and skb.candidate_types == ["book"]
    for number, row in enumerate(rows):
        assert skb.node_type(number) == row["type"] and skb.names[number] == row["name"]
        assert dict(skb.fields[number]) == {k: row[k] for k in ("description", "language") if row[k]}
    edges = Counter(
        (node_ids[s], node_ids[d], skb.edge_types[t].name)
        for s, d, t in zip(skb.src, skb.dst, skb.edge_type, strict=True)
    )
    assert edges == Counter((r["src"], r["dst"], r["type"]) for r in read_csv(paths["edges"]))
    assert edges[("b8", "a1", "written_by")] == 2  # the multi-edge
    # both directions read through the edge types
    author = node_ids.index("a1")
    assert {node_ids[i] for i in skb.neighbors(author, "written_by", "in")} == {"b1", "b8"}
    assert "- written by (reverse): The Salt Road, Desert Bloom" in skb.document(author, with_relations=True)

    for split in ("test", "val"):
        row, run_dir = run_local(data_dir, split)
        assert row["dataset"]["name"] == "local" and row["dataset"]["params"] == {"data_dir": str(data_dir)}
        assert row["dataset_fingerprint"] == skb.fingerprint and row["split"] == split
        check_qrels(run_dir, data_dir, {q: a for q, _, a, s in QUERIES if s == split})


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_jsonl_and_parquet_give_the_csv_skb(tmp_path: Path, fmt: str) -> None:
    """The same tables as JSON Lines (nulls, native answer lists) or Parquet give the SKB, the
    fingerprint and the query files the CSV gives."""
    written = {}
    for kind in ("csv", fmt):
        code, out, err = import_tables(
            write_tables(tmp_path / kind, kind), tmp_path / f"out-{kind}", "--name", "library", "--format", "json"
        )
        assert code == 0, err
        written[kind] = json.loads(out)
    assert written[fmt]["fingerprint"] == written["csv"]["fingerprint"]
    assert {k: v for k, v in written[fmt].items() if k != "out"} == {
        k: v for k, v in written["csv"].items() if k != "out"
    }
    for name in ("qa/stark_qa/stark_qa.csv", "qa/split/test.index", "qa/split/val.index", "node_ids.txt"):
        assert (tmp_path / f"out-{fmt}" / name).read_bytes() == (tmp_path / "out-csv" / name).read_bytes()
    a, b = (harness.SKB.load(tmp_path / f"out-{kind}" / "skb") for kind in ("csv", fmt))
    assert list(a.documents(range(a.num_nodes), with_relations=True)) == list(
        b.documents(range(b.num_nodes), with_relations=True)
    )


def test_two_imports_are_told_apart_by_the_row(tmp_path: Path) -> None:
    """Rows name the data: a changed text gives another SKB fingerprint (and another run)."""
    paths = write_tables(tmp_path / "in")
    assert import_tables(paths, tmp_path / "one", "--name", "library")[0] == 0
    rows = read_csv(paths["nodes"])
    rows[4]["description"] = "Botanists grow forests aboard a generation ship."
    write_csv(paths["nodes"], rows)
    assert import_tables(paths, tmp_path / "two", "--name", "library")[0] == 0
    first, first_dir = run_local(tmp_path / "one")
    second, second_dir = run_local(tmp_path / "two")
    assert first["dataset_fingerprint"] != second["dataset_fingerprint"] and first_dir != second_dir


def test_a_registry_entry_runs_it(tmp_path: Path) -> None:
    assert import_tables(write_tables(tmp_path / "in"), tmp_path / "library")[0] == 0
    Path("registry.yaml").write_text(
        f"datasets:\n  my-library:\n    plugin: local\n    params: {{data_dir: {tmp_path / 'library'}}}\n"
        "    splits: [test, val]\n",
        encoding="utf-8",
    )
    code, out, err = invoke("run", "-r", "bm25", "-d", "my-library", "--split", "val", "--format", "json")
    assert code == 0, err
    (result,) = json.loads(out)
    assert result["row"]["dataset"]["name"] == "my-library" and result["row"]["dataset"]["plugin"] == "local"
    assert check_run_dir(result["run_dir"])["pytrec_eval"] > 0


def test_local_dataset_needs_its_directory(tmp_path: Path) -> None:
    code, _, err = invoke("run", "-r", "bm25", "-d", "local")
    assert code == 2 and "dataset 'local' needs its directory: --data-dir DIR" in err
    with pytest.raises(harness.HarnessError, match=f"dataset 'local': {tmp_path / 'nowhere'} does not exist"):
        LocalDataset(data_dir=str(tmp_path / "nowhere")).load_skb()
    assert import_tables(write_tables(tmp_path / "in"), tmp_path / "library")[0] == 0
    code, _, err = invoke(
        "run", "-r", "bm25", "-d", "local", "--data-dir", str(tmp_path / "library"), "--split", "tset"
    )
    assert code == 2 and "has no split 'tset' (did you mean 'test'?)" in err


SCHEMA = """
CREATE TABLE publishers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city VARCHAR(40));
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, bio TEXT, born INTEGER);
CREATE TABLE genres (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE books (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, description TEXT, language CHAR(2),
    publisher_id INTEGER REFERENCES publishers (id),
    sequel_of INTEGER REFERENCES books (id) DEFERRABLE INITIALLY DEFERRED,
    pages INTEGER
);
-- link tables: two foreign keys and no text; repeated rows (no primary key) are repeated edges
CREATE TABLE book_authors (
    book_id INTEGER NOT NULL REFERENCES books (id), author_id INTEGER NOT NULL REFERENCES authors
);
CREATE TABLE book_genres (
    book_id INTEGER NOT NULL REFERENCES books (id), genre_id INTEGER NOT NULL REFERENCES genres (id),
    PRIMARY KEY (book_id, genre_id)
);
"""


def number(node_id: str) -> int:
    return int(node_id[1:])


def write_sqlite(path: Path) -> Path:
    """The library as a SQLite database with real foreign keys (enforced while it is written)."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA foreign_keys = ON")
    connection.executescript(SCHEMA)
    null = lambda text: text or None  # noqa: E731 - empty cells are NULLs in the database
    publisher = {s: d for s, d, t in EDGES if t == "published_by"}
    connection.executemany("INSERT INTO publishers VALUES (?, ?, ?)", [(number(i), n, c) for i, n, c in PUBLISHERS])
    connection.executemany(
        "INSERT INTO authors VALUES (?, ?, ?, ?)",
        [(number(i), n, null(b), 1900 + k) for k, (i, n, b) in enumerate(AUTHORS)],
    )
    connection.executemany("INSERT INTO genres VALUES (?, ?)", [(number(i), n) for i, n in GENRES])
    sequel = {"b6": "b8"}  # a reference to a row read later
    connection.executemany(
        "INSERT INTO books VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (number(i), t, null(d), null(lang), number(publisher[i]) if i in publisher else None,
             number(sequel[i]) if i in sequel else None, 100 + number(i))
            for i, t, d, lang in BOOKS
        ],
    )  # fmt: skip
    connection.executemany(
        "INSERT INTO book_authors VALUES (?, ?)", [(number(s), number(d)) for s, d, t in EDGES if t == "written_by"]
    )
    connection.executemany(
        "INSERT INTO book_genres VALUES (?, ?)", [(number(s), number(d)) for s, d, t in EDGES if t == "genre"]
    )
    connection.commit()
    connection.close()
    return path


def db_queries(path: Path) -> Path:
    rows = [
        {"id": i, "query": q, "answer_ids": ";".join(f"books:{number(a)}" for a in answers), "split": s}
        for i, q, answers, s in QUERIES
    ]
    return write_csv(path, rows)


def test_sqlite_database_runs_end_to_end(tmp_path: Path) -> None:
    """A SQLite file → `harness import db` → `harness run -d local`: tables are node types, text
    columns fields (NULLs left out), foreign keys and link tables edges — each checked against
    the database read here with sqlite3."""
    database = write_sqlite(tmp_path / "library.sqlite")
    data_dir = tmp_path / "library"
    code, out, err = invoke(
        "import", "db", str(database), "--queries", str(db_queries(tmp_path / "queries.csv")),
        "--candidates", "books", "--out", str(data_dir),
    )  # fmt: skip
    assert code == 0, err
    assert "20 nodes" in out and "nodes by type: authors 6, books 8, genres 4, publishers 2" in out
    skb = harness.SKB.load(data_dir / "skb")
    node_ids = (data_dir / "node_ids.txt").read_text(encoding="utf-8").splitlines()
    node = {node_id: i for i, node_id in enumerate(node_ids)}

    connection = sqlite3.connect(database)
    connection.row_factory = sqlite3.Row
    expected_fields = {"authors": ["bio"], "books": ["description", "language"], "genres": [], "publishers": ["city"]}
    name_column = {"authors": "name", "books": "title", "genres": "name", "publishers": "name"}
    for table, fields in expected_fields.items():
        for row in connection.execute(f"SELECT * FROM {table}"):
            i = node[f"{table}:{row['id']}"]
            assert skb.node_type(i) == table and skb.names[i] == row[name_column[table]]
            assert dict(skb.fields[i]) == {f: row[f] for f in fields if row[f] is not None}  # NULLs are absent

    def edges(name: str) -> Counter[tuple[str, str]]:
        relation = skb.relation(name)
        chosen = skb.edge_type == relation
        return Counter((node_ids[s], node_ids[d]) for s, d in zip(skb.src[chosen], skb.dst[chosen], strict=True))

    assert edges("books.publisher_id") == Counter(
        (f"books:{b}", f"publishers:{p}")
        for b, p in connection.execute("SELECT id, publisher_id FROM books WHERE publisher_id IS NOT NULL")
    )
    assert edges("books.sequel_of") == Counter({("books:6", "books:8"): 1})
    assert edges("book_authors") == Counter(
        (f"books:{b}", f"authors:{a}") for b, a in connection.execute("SELECT book_id, author_id FROM book_authors")
    )
    assert edges("book_authors")[("books:8", "authors:1")] == 2  # the repeated row
    assert edges("book_genres") == Counter(
        (f"books:{b}", f"genres:{g}") for b, g in connection.execute("SELECT book_id, genre_id FROM book_genres")
    )
    assert set(skb.counts()["edges_by_type"]) == {
        "books.publisher_id",
        "books.sequel_of",
        "book_authors",
        "book_genres",
    }
    # the reverse of every relation is readable
    hesse = node["authors:2"]
    assert {node_ids[i] for i in skb.neighbors(hesse, "book_authors", "in")} == {"books:2", "books:7"}
    assert "- books (book authors): Das Glasperlenspiel, Numbers at Dusk" in skb.document(hesse, with_relations=True)
    assert "- books (publisher id): Cœur de pierre" in skb.document(node["publishers:2"], with_relations=True)

    row, run_dir = run_local(data_dir)
    assert row["dataset_fingerprint"] == skb.fingerprint
    check_qrels(run_dir, data_dir, {q: [f"books:{number(x)}" for x in a] for q, _, a, s in QUERIES if s == "test"})


def test_a_database_url_and_name_columns(tmp_path: Path) -> None:
    """Any SQLAlchemy URL is read the same; --name-column names a table's rows."""
    database = write_sqlite(tmp_path / "library.db")
    queries = db_queries(tmp_path / "queries.csv")
    code, out, err = invoke(
        "import", "db", f"sqlite:///{database}", "--queries", str(queries), "--out", str(tmp_path / "by-url"),
        "--name-column", "publishers=city", "--exclude", "genres", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    counts = json.loads(out)
    assert counts["nodes_by_type"] == {"authors": 6, "books": 8, "publishers": 2}
    assert "book_genres" not in counts["edges_by_type"]  # its genres are left out, so it is left out too
    skb = harness.SKB.load(tmp_path / "by-url" / "skb")
    assert sorted(skb.names[i] for i in skb.nodes_of_type("publishers")) == ["Lagos", "Lille"]


def _add_row(path: Path, row: dict[str, str]) -> None:
    rows = read_csv(path)
    write_csv(path, [*rows, {k: row.get(k, "") for k in rows[0]}])


def _edit_rows(path: Path, edit: Any) -> None:
    write_csv(path, [edit(dict(row)) for row in read_csv(path)])


def _drop_columns(path: Path, *columns: str) -> None:
    _edit_rows(path, lambda row: {k: v for k, v in row.items() if k not in columns})


def _answer(qid: str, answers: str) -> Any:
    return lambda row: {**row, "answer_ids": answers} if row["id"] == qid else row


def _header_only(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")


# (case, how the input is spoiled, the error: {nodes}, {edges}, {queries} stand for the files)
TABLE_ERRORS = [
    (
        "dangling edge",
        lambda p: _add_row(p["edges"], {"src": "b1", "dst": "b99", "type": "genre"}),
        "{edges}, row 23, column 'dst': no node 'b99' among the 20 nodes read",
    ),
    (
        "duplicate node id",
        lambda p: _add_row(p["nodes"], {"id": "a3", "type": "author", "name": "Élodie M."}),
        "{nodes}, row 22, column 'id': duplicate node id 'a3' (first at {nodes}, row 12, column 'id')",
    ),
    (
        "missing columns",
        lambda p: _drop_columns(p["nodes"], "type", "name"),
        "{nodes}: missing columns 'name' (--name-column), 'type' (--type-column, or --nodes TYPE=FILE); "
        "its columns: id, description, language",
    ),
    (
        "missing query column",
        lambda p: _drop_columns(p["queries"], "split"),
        "{queries}: missing column 'split' (--split-column, or --split NAME for one split); "
        "its columns: id, query, answer_ids",
    ),
    (
        "unknown answer id",
        lambda p: _edit_rows(p["queries"], _answer("q3", "b4;b44")),
        "{queries}, row 4, column 'answer_ids': no node 'b44' among the 20 nodes read",
    ),
    (
        "answer not a candidate",
        lambda p: _edit_rows(p["queries"], _answer("q5", '["b6", "a6"]')),
        "{queries}, row 6, column 'answer_ids': answer 'a6' is of type 'author', not a candidate type "
        "(book; choose them with --candidates)",
    ),
    ("empty node table", lambda p: _header_only(p["nodes"]), "{nodes}: no rows (an empty node table)"),
    ("empty edge table", lambda p: _header_only(p["edges"]), "{edges}: no rows (an empty edge table)"),
    ("empty query table", lambda p: _header_only(p["queries"]), "{queries}: no queries (the table has no rows)"),
    (
        "empty node id",
        lambda p: _edit_rows(p["nodes"], lambda row: {**row, "id": ""} if row["id"] == "g2" else row),
        "{nodes}, row 17, column 'id': empty node id",
    ),
    (
        "bad answer list",
        lambda p: _edit_rows(p["queries"], _answer("q1", '["b1",')),
        "{queries}, row 2, column 'answer_ids': not a JSON list: '[\"b1\",' "
        "(Expecting value: line 1 column 7 (char 6))",
    ),
    (
        "duplicate query id",
        lambda p: _edit_rows(p["queries"], lambda row: {**row, "id": "q1"} if row["id"] == "q4" else row),
        "{queries}, row 5, column 'id': duplicate query id 'q1' (first at row 2)",
    ),
    (
        "bad split name",
        lambda p: _edit_rows(p["queries"], lambda row: {**row, "split": "test/1"} if row["id"] == "q2" else row),
        "{queries}, row 3, column 'split': split 'test/1' is not a name (letters, digits, '_', '-', '.')",
    ),
    (
        "too many values",
        lambda p: p["edges"].write_text(p["edges"].read_text(encoding="utf-8") + "b1,g1,genre,extra\n", "utf-8"),
        "{edges}, row 23: 4 values, but the header names 3 columns",
    ),
]


def leftovers(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.mark.parametrize(("spoil", "message"), [case[1:] for case in TABLE_ERRORS], ids=[c[0] for c in TABLE_ERRORS])
def test_bad_tables_give_one_error_and_write_nothing(tmp_path: Path, spoil: Any, message: str) -> None:
    paths = write_tables(tmp_path / "in")
    spoil(paths)
    before = leftovers(tmp_path)
    code, out, err = import_tables(paths, tmp_path / "library")
    assert (code, out) == (2, "")
    assert err == f"error: {message.format(**{k: str(v) for k, v in paths.items()})}\n"
    assert leftovers(tmp_path) == before  # no output, no temporary directory


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    paths = write_tables(tmp_path / "in")
    xlsx = tmp_path / "nodes.xlsx"
    xlsx.write_bytes(b"")
    code, _, err = import_tables({**paths, "nodes": xlsx}, tmp_path / "out")
    assert code == 2
    assert (
        err == f"error: {xlsx}: unknown table format '.xlsx'; expected one of .csv, .jsonl, .ndjson, .parquet, .tsv\n"
    )
    code, _, err = import_tables({**paths, "edges": tmp_path / "missing.csv"}, tmp_path / "out")
    assert err == f"error: {tmp_path / 'missing.csv'}: no such file\n"
    code, _, err = import_tables(paths, tmp_path / "out", "--candidates", "books")
    assert err == "error: --candidates: no node type 'books'; the types read: book, author, genre, publisher\n"
    assert not (tmp_path / "out").exists()


def test_an_existing_directory_is_replaced_only_by_force_and_only_when_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_tables(tmp_path / "in")
    out = tmp_path / "library"
    assert import_tables(paths, out)[0] == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _, err = import_tables(paths, out)
    assert code == 2 and err == f"error: {out} exists; choose another --out, or --force to replace it\n"
    # a failure while writing (here: the last file) leaves the old directory as it was, and no debris
    monkeypatch.setattr(harness, "write_json", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    code, _, err = import_tables(paths, out, "--force", "--name", "other")
    assert code == 2 and "disk full" in err
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert leftovers(tmp_path) == ["in", "library"]
    monkeypatch.undo()
    assert import_tables(paths, out, "--force", "--name", "other")[0] == 0
    assert harness.SKB.load(out / "skb").name == "other" and leftovers(tmp_path) == ["in", "library"]


def _sql(statements: str) -> Any:
    def spoil(path: Path) -> None:
        connection = sqlite3.connect(path)  # foreign keys not enforced: SQLite's default
        connection.executescript(statements)
        connection.commit()
        connection.close()

    return spoil


DB_ERRORS = [
    (
        "dangling foreign key",
        _sql("UPDATE books SET publisher_id = 9 WHERE id = 5"),
        "{db}, table 'books', row 'books:5', column 'publisher_id': 9 is no row of table 'publishers' (column id)",
    ),
    (
        "dangling link",
        _sql("INSERT INTO book_authors VALUES (3, 77)"),
        "{db}, table 'book_authors', row (book_id=3, author_id=77), column 'author_id': "
        "77 is no row of table 'authors' (column id)",
    ),
    (
        "empty table",
        _sql("CREATE TABLE reviews (id INTEGER PRIMARY KEY, text TEXT)"),
        "{db}, table 'reviews': no rows (an empty table); leave it out with --exclude reviews",
    ),
    (
        "no primary key",
        _sql("CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('a note')"),
        "{db}, table 'notes': no primary key, so its rows have no ids; leave it out with --exclude notes",
    ),
    (
        "unknown answer id",
        lambda path: None,  # the queries name books:1 .. books:8; one more is added below
        "{queries}, row 8, column 'answer_ids': no node 'books:9' among the 20 nodes read",
    ),
]


@pytest.mark.parametrize(("spoil", "message"), [case[1:] for case in DB_ERRORS], ids=[c[0] for c in DB_ERRORS])
def test_bad_databases_give_one_error_and_write_nothing(tmp_path: Path, spoil: Any, message: str) -> None:
    database = write_sqlite(tmp_path / "library.sqlite")
    spoil(database)
    queries = db_queries(tmp_path / "queries.csv")
    _add_row(queries, {"id": "q7", "query": "a lost book", "answer_ids": "books:9", "split": "test"})
    if "books:9" not in message:
        _edit_rows(queries, lambda row: row if row["id"] != "q7" else {**row, "answer_ids": "books:1"})
    before = leftovers(tmp_path)
    code, out, err = invoke("import", "db", str(database), "--queries", str(queries), "--out", str(tmp_path / "out"))
    assert (code, out) == (2, "")
    assert err == f"error: {message.format(db=database, queries=queries)}\n"
    assert leftovers(tmp_path) == before


def test_database_option_errors(tmp_path: Path) -> None:
    database = write_sqlite(tmp_path / "library.sqlite")
    queries = str(db_queries(tmp_path / "queries.csv"))
    out = str(tmp_path / "out")
    none = tmp_path / "none.db"
    tables = "authors, book_authors, book_genres, books, genres, publishers"
    for args, message in [
        ([str(none)], f"{none}: no such file (give a path to a SQLite file or a database URL)"),
        ([f"sqlite:///{none}"], f"sqlite:///{none}: no such SQLite file {none}"),
        ([str(database), "--exclude", "shelves"], f"--exclude: no table 'shelves' in {database}; its tables: {tables}"),
        (
            [str(database), "--name-column", "authors=nick"],
            "--name-column authors=nick: table 'authors' has no column 'nick'; its columns: id, name, bio, born",
        ),
        (
            [str(database), "--name-column", "book_genres=book_id"],
            "--name-column book_genres=book_id: 'book_genres' is a link table, not nodes",
        ),
        (
            [queries],
            f"{queries}: cannot read the database: (sqlite3.DatabaseError) file is not a database",
        ),
    ]:
        code, _, err = invoke("import", "db", *args, "--queries", queries, "--out", out)
        assert code == 2 and err.startswith(f"error: {message}"), err
    assert leftovers(tmp_path) == ["library.sqlite", "queries.csv"]


# -- review fixes: quoting, numeric query ids, untyped columns, byte offsets, output races ----


def _small_tables(directory: Path, node_text: list[str], fmt: str = "tsv") -> dict[str, Path]:
    """Three books whose descriptions are ``node_text``, as ``fmt`` (tsv or csv) files."""
    directory.mkdir(parents=True, exist_ok=True)
    sep = "\t" if fmt == "tsv" else ","
    lines = [sep.join(["id", "type", "name", "description"])]
    lines += [sep.join([f"b{i}", "book", f"Book {i}", text]) for i, text in enumerate(node_text)]
    paths = {"nodes": directory / f"nodes.{fmt}", "queries": directory / "queries.csv"}
    paths["nodes"].write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_csv(paths["queries"], [{"id": "q1", "query": "book", "answer_ids": "b0", "split": "test"}])
    return paths


def test_tsv_cells_with_bare_quotes_are_kept_verbatim(tmp_path: Path) -> None:
    texts = ['"quoted start with no end', '"Salt" Road', 'ends with a quote"', "plain"]
    paths = _small_tables(tmp_path / "in", texts)
    code, _, err = invoke(
        "import", "tables", "--nodes", str(paths["nodes"]), "--queries", str(paths["queries"]),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 0, err
    skb = harness.SKB.load(tmp_path / "out" / "skb")
    assert skb.num_nodes == len(texts)
    assert [dict(f)["description"] for f in skb.fields] == texts


def test_a_csv_with_an_unterminated_quote_is_one_error(tmp_path: Path) -> None:
    paths = _small_tables(tmp_path / "in", ["fine", '"never closed', "lost", "lost too"], fmt="csv")
    code, out, err = invoke(
        "import", "tables", "--nodes", str(paths["nodes"]), "--queries", str(paths["queries"]),
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {paths['nodes']}, row 3: ") and err.count("\n") == 1, err
    # a stray quote in the middle of a cell
    paths["nodes"].write_text('id,type,name\nb0,book,"Salt" Road\n', encoding="utf-8")
    code, _, err = invoke("import", "tables", "--nodes", str(paths["nodes"]), "--queries", str(paths["queries"]),
                          "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 2 and err.startswith(f"error: {paths['nodes']}, row 2: "), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("ids", [("7", "007"), ("-0", "0"), ("3", "٣")], ids=["leading zero", "minus zero", "unicode"])
def test_query_ids_equal_as_numbers_stay_apart(tmp_path: Path, ids: tuple[str, str]) -> None:
    paths = write_tables(tmp_path / "in")
    names = {f"q{n}": qid for n, qid in enumerate([*ids, "10", "11", "12", "13"], start=1)}
    _edit_rows(paths["queries"], lambda row: {**row, "id": names[row["id"]]})
    code, _, err = import_tables(paths, tmp_path / "library")
    assert code == 0, err
    assert sorted(imported_queries(tmp_path / "library").values()) == sorted(names.values())
    run_local(tmp_path / "library")


def test_untyped_and_json_columns_are_text_and_the_rest_is_listed(tmp_path: Path) -> None:
    database = tmp_path / "items.sqlite"
    connection = sqlite3.connect(database)
    connection.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, title, descr JSON, note CLOB, n INTEGER, mixed)")
    connection.executemany(
        "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)",
        [(1, "Salt Road", '{"pages": 3}', "a note", 5, "text"), (2, "Glass", None, "another", 6, 7)],
    )
    connection.commit()
    connection.close()
    queries = write_csv(tmp_path / "q.csv", [{"id": 1, "query": "salt", "answer_ids": "items:1", "split": "test"}])
    out = tmp_path / "items"
    code, printed, err = invoke("import", "db", str(database), "--queries", str(queries), "--out", str(out))
    assert code == 0, err
    skb = harness.SKB.load(out / "skb")
    assert skb.names == ["Salt Road", "Glass"]
    assert [dict(f) for f in skb.fields] == [{"descr": '{"pages": 3}', "note": "a note"}, {"note": "another"}]
    assert "columns left out (not text): items: n, mixed" in printed
    assert json.loads((out / "import.json").read_text())["columns_left_out"] == {"items": ["n", "mixed"]}


def test_bad_utf8_names_its_row_and_line(tmp_path: Path) -> None:
    paths = _small_tables(tmp_path / "in", ["one", "two", "three", "four", "five"], fmt="csv")
    lines = paths["nodes"].read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"four", b"fo\xffur")  # data row 4: spreadsheet row 5
    paths["nodes"].write_bytes(b"\n".join(lines))
    code, _, err = invoke("import", "tables", "--nodes", str(paths["nodes"]), "--queries", str(paths["queries"]),
                          "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 2 and err.startswith(f"error: {paths['nodes']}, row 5: not UTF-8 text"), err
    jsonl = tmp_path / "nodes.jsonl"
    jsonl.write_bytes(b'{"id": "b0", "type": "book"}\n{"id": "b1", "type": "book"}\n{"id": "b\xe92", "type": "book"}\n')
    code, _, err = invoke("import", "tables", "--nodes", str(jsonl), "--queries", str(paths["queries"]),
                          "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 2 and err.startswith(f"error: {jsonl}, line 3: not UTF-8 text"), err


def test_an_out_that_appears_while_writing_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write_tables(tmp_path / "in")
    out = tmp_path / "library"
    write_json = harness.write_json

    def theirs_first(path: Any, *args: Any, **kwargs: Any) -> None:
        out.mkdir()
        (out / "theirs.txt").write_text("another process", encoding="utf-8")
        write_json(path, *args, **kwargs)

    monkeypatch.setattr(harness, "write_json", theirs_first)
    code, printed, err = import_tables(paths, out)
    assert (code, printed) == (2, "")
    assert err == f"error: {out} appeared while it was being written (Directory not empty); nothing was written to it\n"
    assert leftovers(out) == ["theirs.txt"] and leftovers(tmp_path) == ["in", "library"]


def test_import_into_the_current_directory_with_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write_tables(tmp_path / "in")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    code, _, err = import_tables(paths, Path("."), "--force")
    assert code == 0, err
    assert harness.SKB.load(tmp_path / "here" / "skb").num_nodes == 20


def test_integral_float_ids_agree_across_formats(tmp_path: Path) -> None:
    """{"id": 1.0} in JSON Lines, 1.0 in a Parquet float column and "1.0" in a CSV are one id."""
    fingerprints = set()
    for fmt in ("csv", "jsonl", "parquet"):
        folder = tmp_path / fmt
        folder.mkdir()
        nodes = [{"id": 1.0, "type": "book", "name": "One"}, {"id": 2.5, "type": "book", "name": "Two and a half"}]
        queries = folder / "q.csv"
        write_csv(queries, [{"id": "q", "query": "one", "answer_ids": "1.0", "split": "test"}])
        path = folder / f"nodes.{fmt}"
        if fmt == "csv":
            write_csv(path, nodes)
        elif fmt == "jsonl":
            path.write_text("".join(json.dumps(n) + "\n" for n in nodes), encoding="utf-8")
        else:
            pq.write_table(pa.Table.from_pylist(nodes), path)
        code, out, err = invoke("import", "tables", "--nodes", str(path), "--queries", str(queries),
                                "--out", str(folder / "out"), "--name", "n", "--format", "json")  # fmt: skip
        assert code == 0, err
        fingerprints.add(json.loads(out)["fingerprint"])
        assert (folder / "out" / "node_ids.txt").read_text() == "1.0\n2.5\n"
    assert len(fingerprints) == 1


def test_exported_with_source_ids_another_tools_run_scores_the_same(tmp_path: Path) -> None:
    """`harness export --ids source`: BEIR's loader sees the user's ids, and a run written over
    them scores (harness evaluate, against the exported TREC qrels) what the harness run did."""
    from beir.datasets.data_loader import GenericDataLoader

    data_dir = tmp_path / "library"
    assert import_tables(write_tables(tmp_path / "in"), data_dir)[0] == 0
    row, run_dir = run_local(data_dir, "test")
    local = ("-d", "local", "--data-dir", str(data_dir), "--split", "test", "--ids", "source")
    for fmt in ("beir", "trec"):
        code, _, err = invoke("export", *local, "--to", fmt, "--out", str(tmp_path / fmt))
        assert code == 0, err
    corpus, queries, qrels = GenericDataLoader(str(tmp_path / "beir")).load(split="test")
    assert set(corpus) == {b[0] for b in BOOKS}
    answers = {q: a for q, _, a, s in QUERIES if s == "test"}
    assert set(queries) == set(answers) and qrels == {q: dict.fromkeys(a, 1) for q, a in answers.items()}

    # the harness's run, as another tool would write it over the user's ids (ranks as trec_eval reads them)
    node_ids = (data_dir / "node_ids.txt").read_text(encoding="utf-8").splitlines()
    source = imported_queries(data_dir)
    lines = [line.split() for line in (run_dir / "run.trec").read_text().splitlines()]
    by_query: dict[str, list[tuple[float, str]]] = {}
    for qid, _, doc, _, score, _ in lines:
        by_query.setdefault(source[int(qid)], []).append((float(score), node_ids[int(doc)], doc))
    mapped = tmp_path / "theirs.tsv"
    with mapped.open("w", encoding="utf-8") as handle:
        for qid, docs in by_query.items():
            ranked = sorted(docs, key=lambda d: (d[0], d[2]), reverse=True)  # ties: harness doc number descending
            handle.writelines(f"{qid}\t{doc}\t{rank}\n" for rank, (_, doc, _) in enumerate(ranked, start=1))
    metrics = ",".join(row["metrics"])
    code, out, err = invoke(
        "evaluate", "--run", str(mapped), "--run-format", "msmarco",
        "--qrels", str(tmp_path / "trec" / "qrels.test.trec"), "--metrics", metrics, "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["metrics"] == pytest.approx(row["metrics"])
    # a dataset with no ids of its own cannot
    code, _, err = invoke("export", "-d", "local", "--data-dir", str(tmp_path / "library"), "--to", "hf",
                          "--ids", "source", "--out", str(tmp_path / "hf"))  # fmt: skip
    assert code == 2 and "--ids source: for beir and trec" in err


def test_hf_export_keeps_source_ids_and_export_into_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "library"
    assert import_tables(write_tables(tmp_path / "in"), data_dir)[0] == 0
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "old.txt").write_text("old", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "here")
    code, _, err = invoke("export", "-d", "local", "--data-dir", str(data_dir), "--to", "hf", "--out", ".", "--force")
    assert code == 0, err
    nodes = pq.read_table(tmp_path / "here" / "parquet" / "nodes.parquet")
    assert nodes.column("source_id").to_pylist() == [r["id"] for r in node_rows()]
    assert not (tmp_path / "here" / "old.txt").exists()
