"""`harness leaderboard show` in a narrow terminal and in a pipe: every number in full."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from helpers import REPO

from harness.cli import cli
from harness.leaderboard.rows import cell_width, fit_columns, read_rows, table_rows

BOXES = set("┃│━─┏┓┗┛┡┩└┘╇╈┳┻")


def board(tmp_path: Path) -> Path:
    """The published rows as one JSON file, one with a long name and a number of five digits."""
    rows = json.loads((REPO / "leaderboard" / "leaderboard.json").read_text(encoding="utf-8"))
    for row in rows:  # no row flagged or seeded but those a test makes so (the committed board may hold some)
        row["health"] = None
        row["seeds"] = None  # a seeded row's wider cells ("208 (3 seeds)", "38.30 ± 3.89") are tested on their own
    rows[0]["metrics"]["hit@1"] = 5 / 7  # 71.43
    rows[0]["retriever"]["name"] = "bm25-with-a-rather-long-retriever-name"
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def in_a_terminal(tmp_path: Path, *args: str, columns: int = 80) -> str:
    """`harness leaderboard show ARGS` in a subprocess whose rich sees a terminal ``columns`` wide
    (in-process, the console keeps the width it was made with)."""
    env = {**os.environ, "COLUMNS": str(columns), "TTY_COMPATIBLE": "1", "FORCE_COLOR": "1"}
    command = [sys.executable, "-c", "from harness.cli import main; main()", "leaderboard", "show", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)


def cells_of(path: Path) -> tuple[list[str], list[list[str]]]:
    return table_rows(read_rows(path))


def test_a_pipe_gets_every_column_as_plain_text(tmp_path: Path) -> None:
    path = board(tmp_path)
    result = CliRunner().invoke(cli, ["leaderboard", "show", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "…" not in out and not BOXES & set(out) and "71.43" in out
    header, cells = cells_of(path)
    lines = out.splitlines()
    assert lines[0].startswith("leaderboard (") and lines[1].split() == header
    assert len(lines) == 2 + len(cells)
    for line, row in zip(lines[2:], cells, strict=True):
        rest = line
        for value in row:  # every cell, in full and in order
            assert value in rest, (value, line)
            rest = rest[rest.index(value) + len(value) :]


def test_an_80_column_terminal_shows_whole_columns_and_says_which_are_hidden(tmp_path: Path) -> None:
    path = board(tmp_path)
    out = in_a_terminal(tmp_path, str(path))
    assert "…" not in out and "71.43" in out and BOXES & set(out)
    assert all(cell_width(line) <= 80 for line in out.splitlines()), out
    header, cells = cells_of(path)
    table = [line for line in out.splitlines() if line.startswith(("┃", "│"))]
    shown = [name.strip() for name in table[0].strip("┃").split("┃")]
    assert "retriever" in shown and "hit@1" in shown and len(shown) < len(header)
    for line, row in zip(table[1:], cells, strict=True):
        values = [value.strip() for value in line.strip("│").split("│")]
        assert values == [row[header.index(name)] for name in shown]  # every shown cell in full
    hidden = [name for name in header if name not in shown and name != "dataset"]  # one dataset: in the title
    assert f"({len(hidden)} columns hidden at 80 columns: {', '.join(hidden)};" in " ".join(out.split())
    assert "leaderboard debian (" in out


def test_columns_are_chosen_by_width() -> None:
    header = ["dataset", "split", "retriever", "n", "hit@1", "mrr", "ms/query", "regime", "date"]
    cells = [
        ["d", "test", "some-retriever", "10", "71.43", "80.00", "1.00", "zero-shot", "2026-01-01"],
        ["d", "val", "other", "10", "50.00", "60.00", "2.00", "zero-shot", "2026-01-01"],
    ]
    kept, hidden = fit_columns(header, cells, ["hit@1", "mrr"], 200) or ([], [])
    assert kept == list(range(9)) and hidden == []
    # retriever (14+3), split (5+3), hit@1 (5+3) and the border: 34 cells; mrr needs 8 more
    assert fit_columns(header, cells, ["hit@1", "mrr"], 34) == ([1, 2, 4], [0, 3, 5, 6, 7, 8])
    assert fit_columns(header, cells, ["hit@1", "mrr"], 42) == ([1, 2, 4, 5], [0, 3, 6, 7, 8])
    assert fit_columns(header, cells, ["hit@1", "mrr"], 33) is None  # not even those: plain text


def test_markdown_and_wide_keep_every_column(tmp_path: Path) -> None:
    path = board(tmp_path)
    header, _ = cells_of(path)
    wide = in_a_terminal(tmp_path, str(path), "--wide")
    assert wide.splitlines()[1].split() == header and "…" not in wide and not BOXES & set(wide)
    assert "hidden" not in in_a_terminal(tmp_path, str(path), columns=250)  # all fit: a boxed table of all
    markdown = CliRunner().invoke(cli, ["leaderboard", "show", str(path), "--format", "markdown"])
    assert markdown.stdout.splitlines()[0] == "| " + " | ".join(header) + " |" and "71.43" in markdown.stdout


def with_a_sampled_row(tmp_path: Path) -> Path:
    """The board and a synthetic row of its own: a 10% sample of a debian/test run (the curated
    board need not hold a sampled row)."""
    path = board(tmp_path)
    rows = json.loads(path.read_text(encoding="utf-8"))
    sampled = json.loads(json.dumps(next(row for row in rows if row["split"] == "test")))
    sampled["retriever"]["name"] = "bm25-sampled"
    sampled.update(sample=0.1, num_queries=round(sampled["num_queries"] * 0.1), config_hash="0123456789abcdef")
    sampled["run_dir"] = "runs/debian/test/bm25-sampled-0123456789abcdef"
    path.write_text(json.dumps([*rows, sampled]), encoding="utf-8")
    return path


def test_a_sampled_row_keeps_its_n_and_sample_marker_in_a_narrow_terminal(tmp_path: Path) -> None:
    path = with_a_sampled_row(tmp_path)
    header, cells = cells_of(path)
    sampled = [row for row in cells if row[header.index("n")].endswith("(10%)")]
    assert [row[header.index("retriever")] for row in sampled] == ["bm25-sampled"]
    out = in_a_terminal(tmp_path, str(path))
    table = [line for line in out.splitlines() if line.startswith(("┃", "│"))]
    shown = [name.strip() for name in table[0].strip("┃").split("┃")]
    assert "n" in shown, out  # without it, a 10% sample reads as a full run
    ns = [line.strip("│").split("│")[shown.index("n")].strip() for line in table[1:]]
    assert ns == [row[header.index("n")] for row in cells] and sum(n.endswith("(10%)") for n in ns) == len(sampled)
    # the same board with no sample: n is one of the columns that give way again
    rows = json.loads(path.read_text(encoding="utf-8"))
    for row in rows:
        row["sample"] = None
    path.write_text(json.dumps(rows), encoding="utf-8")
    out = in_a_terminal(tmp_path, str(path))
    assert "(10%)" not in out and "columns hidden at 80 columns: " in out
    shown = [
        name.strip() for name in next(line for line in out.splitlines() if line.startswith("┃")).strip("┃").split("┃")
    ]
    assert "n" not in shown


def test_n_is_needed_when_a_row_is_sampled() -> None:
    header = ["dataset", "split", "retriever", "n", "hit@1", "mrr", "ms/query", "regime", "date"]
    cells = [
        ["d", "test", "some-retriever", "1000", "71.43", "80.00", "1.00", "zero-shot", "2026-01-01"],
        ["d", "test", "other", "100", "50.00", "60.00", "2.00", "zero-shot", "2026-01-01"],
    ]
    # retriever (14+3), hit@1 (5+3), mrr (5+3) and the border: n (4+3) does not fit in 34
    assert fit_columns(header, cells, ["hit@1", "mrr"], 34) == ([2, 4, 5], [0, 1, 3, 6, 7, 8])
    cells[1][3] = "100 (10%)"
    # n (9+3) now comes before mrr; with it, retriever and hit@1 need 38 cells
    assert fit_columns(header, cells, ["hit@1", "mrr"], 38) == ([2, 3, 4], [0, 1, 5, 6, 7, 8])
    assert fit_columns(header, cells, ["hit@1", "mrr"], 37) is None


REASON = "reranking lowered mrr from 55.80 to 46.35: below its own first stage"


def flagged_and_seeded(tmp_path: Path) -> tuple[Path, dict, dict]:
    """The board with its best debian/test row flagged (its reranking never helped) and dense-64's
    test row averaged over three seeds."""
    path = board(tmp_path)
    rows = json.loads(path.read_text(encoding="utf-8"))
    tests = [row for row in rows if row["split"] == "test"]
    best = max(tests, key=lambda row: row["metrics"]["hit@1"])
    best["health"] = {"counters": {"reranked": 0}, "queries": 208, "flags": [{"component": "rerank", "reason": REASON}]}
    seeded = next(row for row in tests if row["retriever"]["name"] == "dense-64")
    spread = {m: {"mean": v, "std": 0.0123, "min": v - 0.01, "max": v + 0.01} for m, v in seeded["metrics"].items()}
    seeded["seeds"] = {
        "values": [0, 1, 2],
        "config_hashes": ["a", "b", "c"],
        "metrics": spread,
        "runs": ["0", "1", "2"],
    }
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path, best, seeded


def test_flagged_rows_are_marked_and_listed_last_with_their_reason(tmp_path: Path) -> None:
    path, best, seeded = flagged_and_seeded(tmp_path)
    name = best["retriever"]["name"]
    out = CliRunner().invoke(cli, ["leaderboard", "show", str(path)], catch_exceptions=False).stdout
    lines = out.splitlines()
    assert "seeded rows mean ± std" in lines[0]
    tests = [line for line in lines[2:] if line.split()[:2] == ["debian", "test"]]
    # not ranked among the rows that ran: after every one of them, marked
    assert tests[-1].split()[2:4] == [name, "⚑"] and not any("⚑" in line for line in tests[:-1])
    assert lines[-1] == f"⚑ {name} (debian/test): rerank: {REASON}"
    [line] = [line for line in tests if line.split()[2] == "dense-64"]
    hit = 100 * seeded["metrics"]["hit@1"]
    assert f"{seeded['num_queries']} (3 seeds)" in line and f"{hit:.2f} ± 1.23" in line
    # a terminal: the marker in the retriever column of the boxed table, the reason below it
    terminal = in_a_terminal(tmp_path, str(path), columns=110)
    assert BOXES & set(terminal) and f"{name} ⚑ │" in terminal and "± 1.23 │" in terminal
    assert f"⚑ {name} (debian/test): rerank: {REASON}" in " ".join(terminal.split())
    markdown = CliRunner().invoke(cli, ["leaderboard", "show", str(path), "--format", "markdown"]).stdout
    assert f"| {name} ⚑ |" in markdown and markdown.rstrip().endswith(f"rerank: {REASON}")
