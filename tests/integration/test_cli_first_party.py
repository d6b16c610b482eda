"""The command line with the first-party plugins installed: their presets (the Debian default,
the STaRK datasets), `describe debian`, and the README's commands on a fresh clone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from harness.cli import cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_default_run_dry_run_and_check(tmp_path: Path) -> None:
    code, out, _ = invoke("run", "--dry-run")
    assert code == 0 and "would run bm25 on debian/test (k=100)" in out and "condition bm25/debian/test" in out
    code, out, err = invoke("run", "--all", "--dry-run", "--format", "json")
    runs = [d["run"] for d in json.loads(out)]
    assert runs[:2] == ["bm25 on debian/val (k=100)", "bm25 on debian/test (k=100)"]
    # every STaRK split either would run or is named, once, among those that cannot (no SKB here)
    for name in ("amazon", "mag", "prime"):
        for split in ("test", "human-generated"):
            would = f"bm25 on stark-{name}/{split} (k=100)" in runs
            assert would != (f"stark-{name}/{split}" in err), (name, split)
    assert code == (0 if len(runs) == 8 else 2)
    code, out, _ = invoke("run", "--check", "--format", "json")
    assert code == 0, out
    result = json.loads(out)[0]
    assert all(c["ok"] for c in result["checks"]) and len(result["checks"]) == 4
    # the run directory holds the row; nothing is written into a leaderboard unless asked
    assert result["row_path"] is None and not (tmp_path / "leaderboard").exists()
    assert (Path(result["run_dir"]) / "row.json").exists() and (Path(result["run_dir"]) / "qrels.trec").exists()


def test_check_fails_when_expected_scores_are_missed(tmp_path: Path) -> None:
    _, out, _ = invoke("list", "--format", "json")
    [condition] = [c for c in json.loads(out)["conditions"] if c["name"] == "bm25/debian/test"]
    condition["expected"]["hit@1"] = 0.9
    (tmp_path / "registry.yaml").write_text(json.dumps({"conditions": [condition]}))  # ./registry.yaml wins
    code, out, _ = invoke("run", "--check")
    assert code == 1 and "FAIL hit@1: expected 90.0000" in out and "OK mrr" in out


def test_all_keeps_going_when_one_dataset_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STARK_DATA_DIR", str(tmp_path / "no-such-dir"))
    code, out, err = invoke("run", "--all", "--format", "json")
    assert code == 2
    assert [r["row"]["dataset"]["name"] for r in json.loads(out)] == ["debian", "debian", "debian-v1", "debian-v1"]
    assert "error: 6 of 10 runs failed" in err and "STaRK data directory" in err


def test_list_and_plugins() -> None:
    code, out, _ = invoke("list", "--format", "json")
    data = json.loads(out)
    debian = data["datasets"]["debian"]
    assert debian["evaluated"] == ["val", "test"]  # what --all runs; every split the dataset has besides
    assert debian["splits"] == ["train", "val", "test", "test-paraphrased", "train-templated"]
    assert {"bm25", "bm25-relations"} <= set(data["retrievers"])
    code, _, err = invoke("run", "--retriever", "nope")
    assert ", bm25, " in err and "bm25-relations" in err
    assert {"hit@k", "recall@k", "mrr[@k]", "rprecision"} <= set(data["metrics"])
    assert [c["name"] for c in data["conditions"]][:2] == ["bm25/debian/test", "bm25/debian/val"]
    code, out, _ = invoke("list")
    assert code == 0 and "conditions" in out
    code, out, _ = invoke("plugins", "--hook", "register_datasets")
    assert [p["name"] for p in json.loads(out)] == ["debian", "formats", "stark"]


def test_describe_debian() -> None:
    _, out, _ = invoke("describe", "debian", "--format", "json")
    info = json.loads(out)
    assert info["nodes_by_type"]["package"] == info["candidates"] >= 20_000
    assert set(info["edges_by_type"]) == {
        "depends",
        "recommends",
        "suggests",
        "same_source",
        "maintained_by",
        "in_section",
        "tagged",
    }
    assert info["queries"]["val"] + info["queries"]["test"] >= 150


def test_leaderboard_show_formats(tmp_path: Path) -> None:
    invoke("run", "--leaderboard", "board")
    code, out, _ = invoke("leaderboard", "show", "board", "--format", "markdown", "--metrics", "hit@1,mrr")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "| dataset | split | retriever | n | hit@1 | mrr | ms/query | regime | date |"
    from harness.leaderboard.rows import read_rows

    (row,) = read_rows(tmp_path / "board")
    hit1, mrr = (f"{100 * row.metrics[m]:.2f}" for m in ("hit@1", "mrr"))
    assert lines[2].startswith(f"| debian | test | bm25 | {row.num_queries} | {hit1} | {mrr} |")
    code, out, _ = invoke("leaderboard", "show", "board")
    assert code == 0 and "bm25" in out


def test_the_readme_commands_leave_a_fresh_clone_clean(tmp_path: Path) -> None:
    """`harness run` then the test command, on a fresh clone: no tracked file changes, and the
    curated leaderboard refuses a direct write."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    harness = [sys.executable, "-c", "from harness.cli import main; main()"]
    ran = subprocess.run([*harness, "run", "--split", "val"], cwd=clone, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    refused = subprocess.run(
        [*harness, "run", "--split", "val", "--leaderboard", "leaderboard"], cwd=clone, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "is a curated leaderboard" in refused.stderr
