"""CSV and TSV tables read whole (pyarrow) give what the row-by-row reader gives: the same SKB
from awkward but valid files, the same error (file, row, column) from faulty ones; and the SKB
files the importer writes are those ``harness.SKB.save`` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harness
import harness_formats.from_tables as from_tables
from harness.testing import invoke

NODES = (
    "\ufeffid , type,name,abstract,note\r\n"  # a BOM, header names with spaces, CRLF
    'n1,paper,Salt Road,"a caravan, ""salt""\r\nand secrets",\r\n'  # quoted comma, quotes, line break
    "\r\n"  # a blank line: a row number, no node
    " n2 , paper ,,plain,x\r\n"  # padded id and type, empty name (the id then)
    "n3,author,Amara Okafor,,  \r\n"  # empty field left out, a blank one kept
    "n4,author,雪国,,\r\n"
    'n5,paper,"Quoted",a"mid quote,\r\n'  # a quote inside an unquoted cell is text
)
EDGES = "src,dst,type\nn1,n3,written_by\n n2,n4 , written_by\nn1,n2,cites\n\nn5,n5,cites\nn5,n1,written_by\n"
QUERIES = "id,query,answer_ids,split\n1,salt,n1,test\n2,plain,n2;n5,test\n"


def tables(folder: Path, nodes: str = NODES, edges: str = EDGES, sep: str = ",") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    suffix = "csv" if sep == "," else "tsv"
    (folder / f"nodes.{suffix}").write_bytes(nodes.replace(",", sep).encode("utf-8", "surrogateescape"))
    (folder / f"edges.{suffix}").write_text(edges.replace(",", sep), encoding="utf-8")
    (folder / "queries.csv").write_text(QUERIES, encoding="utf-8")
    return ["--nodes", str(folder / f"nodes.{suffix}"), "--edges", str(folder / f"edges.{suffix}"),
            "--queries", str(folder / "queries.csv")]  # fmt: skip


def imported(args: list[str], out: Path) -> tuple[int, str, str]:
    result = invoke("import", "tables", *args, "--out", str(out), "--name", "same", catch_exceptions=False)
    return result.exit_code, result.stdout.replace(str(out), "OUT"), result.stderr


def contents(out: Path) -> dict[str, Any]:
    skb = harness.SKB.parse(out / "skb")
    return {
        "fingerprint": skb.fingerprint,
        "names": list(skb.names),
        "fields": [dict(f) for f in skb.fields],
        "edges": [skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist()],
        "relations": [e.name for e in skb.edge_types],
        "types": skb.node_type_names,
        "ids": (out / "node_ids.txt").read_text(encoding="utf-8"),
    }


def rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every table through the row-by-row reader (what the whole-table reader must equal)."""
    monkeypatch.setattr(from_tables, "read_columns", lambda table: None)


@pytest.mark.parametrize("sep", [",", "\t"], ids=["csv", "tsv"])
def test_awkward_but_valid_tables_give_the_row_readers_skb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sep: str
) -> None:
    nodes = NODES if sep == "," else NODES.replace('"a caravan, ""salt""\r\nand secrets"', "a caravan 'salt'")
    args = tables(tmp_path / "in", nodes, sep=sep)
    read = from_tables.read_columns
    taken: list[bool] = []
    monkeypatch.setattr(from_tables, "read_columns", lambda table: taken.append(bool(read(table))) or read(table))
    whole = imported(args, tmp_path / "whole")
    assert whole[0] == 0, whole[2]
    assert taken == [True, True]  # both tables read whole
    rows_only(monkeypatch)
    by_row = imported(args, tmp_path / "rows")
    assert whole == by_row
    assert contents(tmp_path / "whole") == contents(tmp_path / "rows")
    result = contents(tmp_path / "whole")
    assert result["names"][:2] == ["Salt Road", "n2"] and result["relations"] == ["written_by", "cites"]
    if sep == ",":
        assert result["fields"][0] == {"abstract": 'a caravan, "salt"\r\nand secrets'}
    assert result["fields"][2] == {"note": "  "} and result["fields"][3] == {}


def test_a_short_row_is_read_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow refuses a row with fewer cells than the header; the row reader reads its missing
    cells as empty, and the table is read that way."""
    args = tables(tmp_path / "in", NODES + "n6,paper\n")
    whole = imported(args, tmp_path / "whole")
    assert whole[0] == 0, whole[2]
    rows_only(monkeypatch)
    assert whole == imported(args, tmp_path / "rows")
    assert contents(tmp_path / "whole") == contents(tmp_path / "rows")
    assert contents(tmp_path / "whole")["names"][-1] == "n6"


FAULTS = [
    ("duplicate id after a line break in a cell", lambda n, e: (n + "n3,paper,again\n", e)),
    ("empty id", lambda n, e: (n + " ,paper,none\n", e)),
    ("line break in an id", lambda n, e: (n + '"n9\nx",paper,broken\n', e)),
    ("empty type", lambda n, e: (n + "n9,  ,typeless\n", e)),
    ("dangling edge after a blank line", lambda n, e: (n, e + "\nn1,n77,cites\n")),
    ("empty edge type", lambda n, e: (n, e + "n1,n2,\n")),
    ("too many cells", lambda n, e: (n, e + "n1,n2,cites,extra\n")),
    ("stray quote", lambda n, e: (n + 'n9,paper,"Salt" Road\n', e)),
    ("unterminated quote", lambda n, e: (n + 'n9,paper,"never closed\nn10,paper,lost\n', e)),
    ("not UTF-8", lambda n, e: (n + "n9,paper,caf\udce9\n", e)),  # the byte 0xE9 alone
]


@pytest.mark.parametrize("spoil", [f[1] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_faulty_tables_give_the_row_readers_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: Any) -> None:
    nodes, edges = spoil(NODES, EDGES)
    args = tables(tmp_path / "in", nodes, edges)
    whole = imported(args, tmp_path / "out")
    rows_only(monkeypatch)
    assert whole == imported(args, tmp_path / "out")
    assert whole[0] == 2 and whole[2].startswith(f"error: {tmp_path / 'in'}") and whole[2].count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_duplicate_across_files_names_the_first_row_read_whole(tmp_path: Path) -> None:
    args = tables(tmp_path / "in")
    more = tmp_path / "in" / "more.csv"
    more.write_text("id,type,name\nn7,paper,fine\nn4,paper,again\n", encoding="utf-8")
    code, _, err = imported([*args, "--nodes", str(more)], tmp_path / "out")
    nodes = tmp_path / "in" / "nodes.csv"
    # n4 is on row 6: after the header, n1's row (a line break in a cell: still one row), a blank line, n2, n3
    assert (code, err) == (
        2,
        f"error: {more}, row 3, column 'id': duplicate node id 'n4' (first at {nodes}, row 6, column 'id')\n",
    )
