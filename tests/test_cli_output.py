"""Output for people reads the same everywhere: numbers ×100 (the unit said once, JSON keeps
fractions), runs named by what ran, tables at 80 columns and plain text in a pipe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from harness.analysis.labels import run_labels
from harness.cli import cli

BOXES = set("┃│━─┏┓┗┛┡┩└┘╇╈┳┻")


def in_a_terminal(tmp_path: Path, *args: str, columns: int = 80) -> str:
    """``harness ARGS`` in a subprocess whose rich sees a terminal ``columns`` wide."""
    env = {**os.environ, "COLUMNS": str(columns), "TTY_COMPATIBLE": "1", "FORCE_COLOR": "1"}
    command = [sys.executable, "-c", "from harness.cli import main; main()", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)


def run_dir(root: Path, name: str, values: dict[int, float], split: str = "test", seed: int = 0) -> Path:
    """A run directory as the runner writes it, named as it names them (``dataset-split-retriever-hash``)."""
    directory = root / f"debian-{split}-{name}-{seed:016x}"
    directory.mkdir(parents=True)
    with (directory / "per_query.jsonl").open("w") as out:
        for qid, value in values.items():
            out.write(json.dumps({"qid": qid, "latency_ms": 1.0, "metrics": {"mrr": value}}) + "\n")
    config = {
        "retriever": {"name": name, "plugin": name, "params": {"epochs": 1}},
        "dataset": {"name": "debian"},
        "split": split,
        "seed": None,
        "k": 100,
        "training": {name: {"split": "train", "seed": seed}},
    }
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_runs_are_named_by_retriever_and_what_tells_them_apart(tmp_path: Path) -> None:
    values = {q: q / 50 for q in range(40)}
    runs = [
        run_dir(tmp_path, "bm25", values),
        run_dir(tmp_path, "dense-ft-minilm-64", values, seed=0),
        run_dir(tmp_path, "dense-ft-minilm-64", values, seed=1),
    ]
    assert run_labels([str(r) for r in runs]) == ["bm25", "dense-ft-minilm-64 (seed=0)", "dense-ft-minilm-64 (seed=1)"]
    other = run_dir(tmp_path / "elsewhere", "bm25", values)  # the same configuration: the path tells
    labels = run_labels([str(runs[0]), str(other)])
    assert labels[0] != labels[1] and str(other) in labels[1]
    assert run_labels([str(tmp_path / "a.trec")]) == ["a.trec"]  # another tool's run file: its name


def test_compare_reads_the_same_at_80_columns_and_in_a_pipe(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = {q: float(rng.random()) for q in range(40)}
    better = {q: min(1.0, v + 0.3) for q, v in base.items()}
    runs = [
        str(run_dir(tmp_path, "bm25", base)),
        str(run_dir(tmp_path, "dense-ft-minilm-64", better, seed=0)),
        str(run_dir(tmp_path, "dense-ft-minilm-64", base, seed=1)),
    ]
    data = json.loads(CliRunner().invoke(cli, ["compare", *runs, "--format", "json"]).stdout)
    mean = 100 * data[0]["mean_b"]
    piped = CliRunner().invoke(cli, ["compare", *runs], catch_exceptions=False).stdout
    assert not BOXES & set(piped) and "…" not in piped and "mrr ×100 against bm25" in piped
    line = next(line for line in piped.splitlines() if line.startswith("dense-ft-minilm-64 (seed=0)"))
    assert f"{mean:.2f}" in line and f"{100 * data[0]['difference']:+.2f}" in line and "**" in line
    terminal = in_a_terminal(tmp_path, "compare", *runs)
    rows = [line for line in terminal.splitlines() if line.startswith("│")]
    names = [line.strip("│").split("│")[0].strip() for line in rows]
    assert names == ["bm25", "dense-ft-minilm-64 (seed=0)", "dense-ft-minilm-64 (seed=1)"]
    assert all(len(line) <= 80 for line in terminal.splitlines()) and "…" not in terminal
    assert f"{mean:.2f}" in rows[1]  # numbers in full, never cut


def test_evaluate_prints_metrics_times_100_and_json_keeps_fractions(tmp_path: Path) -> None:
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\nq2 Q0 d9 1 1.0 x\nq2 Q0 d8 2 0.5 x\n")
    (tmp_path / "qrels.trec").write_text("q1 0 d2 1\nq2 0 d9 1\n")
    args = ["evaluate", "--run", str(tmp_path / "run.trec"), "--qrels", str(tmp_path / "qrels.trec"), "-m", "mrr"]
    data = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)
    assert data["metrics"]["mrr"] == 0.75
    out = CliRunner().invoke(cli, args, catch_exceptions=False).stdout
    assert "(metrics ×100)" in out and "75.00" in out and "0.7500" not in out


def test_list_is_a_table_at_80_columns_and_plain_text_in_a_pipe(tmp_path: Path) -> None:
    piped = CliRunner().invoke(cli, ["list"], catch_exceptions=False).stdout
    assert not BOXES & set(piped) and '{"splits"' not in piped  # no wrapped JSON: one line per entry
    debian = next(line for line in piped.splitlines() if line.startswith("debian "))
    assert "splits: train, val, test" in debian and "(--all: val, test)" in debian
    data = json.loads(CliRunner().invoke(cli, ["list", "--format", "json"]).stdout)
    debian_json = data["datasets"]["debian"]
    assert debian_json["evaluated"] == ["val", "test"] and "train" in debian_json["splits"]
    terminal = in_a_terminal(tmp_path, "list")
    assert all(len(line) <= 80 for line in terminal.splitlines() if BOXES & set(line)) and "…" not in terminal
    assert any(line.startswith("│ debian ") for line in terminal.splitlines())  # a table, the names in full
    assert "conditions" in terminal and "bm25-relations/debian/test" in terminal.replace(" ", "")
