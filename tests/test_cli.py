"""The command line, driven through click's runner (and once as a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli, main

REPO = Path(__file__).resolve().parent.parent


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_default_run_dry_run_and_check(tmp_path: Path) -> None:
    code, out, _ = invoke("run", "--dry-run")
    assert code == 0 and "would run bm25 on debian/test (k=100)" in out and "condition bm25/debian/test" in out
    code, out, _ = invoke("run", "--all", "--dry-run", "--format", "json")
    runs = [d["run"] for d in json.loads(out)]
    assert runs[:2] == ["bm25 on debian/val (k=100)", "bm25 on debian/test (k=100)"]
    assert "bm25 on stark-prime/human-generated (k=100)" in runs and len(runs) == 8
    code, out, _ = invoke("run", "--check", "--format", "json")
    assert code == 0, out
    result = json.loads(out)[0]
    assert all(c["ok"] for c in result["checks"]) and len(result["checks"]) == 4
    # the run directory holds the row; nothing is written into a leaderboard unless asked
    assert result["row_path"] is None and not (tmp_path / "leaderboard").exists()
    assert (Path(result["run_dir"]) / "row.json").exists() and (Path(result["run_dir"]) / "qrels.trec").exists()


def test_check_fails_when_expected_scores_are_missed(tmp_path: Path) -> None:
    registry = (REPO / "registry.yaml").read_text().replace("hit@1: 0.558559", "hit@1: 0.9")
    (tmp_path / "registry.yaml").write_text(registry)  # ./registry.yaml wins over the bundled one
    code, out, _ = invoke("run", "--check")
    assert code == 1 and "FAIL hit@1: expected 0.9000" in out and "OK mrr" in out


def test_all_keeps_going_when_one_dataset_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STARK_DATA_DIR", str(tmp_path / "no-such-dir"))
    code, out, err = invoke("run", "--all", "--format", "json")
    assert code == 2
    assert [r["row"]["dataset"]["name"] for r in json.loads(out)] == ["debian", "debian"]
    assert "error: 6 of 8 runs failed" in err and "STaRK data directory" in err


def test_errors_are_one_line_without_traceback() -> None:
    for args, message in [
        (["run", "--retriever", "nope"], "error: unknown retriever 'nope'; known: "),
        (["run", "--k", "0"], "error: k must be a positive integer, got 0"),
        (["run", "--registry", "missing.yaml"], "error: registry file missing.yaml does not exist"),
        (["describe", "nope"], "error: unknown dataset 'nope'"),
        (["plugins", "--hook", "register_nothing"], "error: unknown hook 'register_nothing'"),
    ]:
        code, _, err = invoke(*args)
        assert code == 2 and err.strip().startswith(message), (args, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err


def test_list_and_plugins() -> None:
    code, out, _ = invoke("list", "--format", "json")
    data = json.loads(out)
    assert data["datasets"]["debian"]["splits"] == ["val", "test"]
    assert {"bm25", "bm25-relations"} <= set(data["retrievers"])
    code, _, err = invoke("run", "--retriever", "nope")
    assert ", bm25, " in err and "bm25-relations" in err
    assert {"hit@k", "recall@k", "mrr[@k]", "rprecision"} <= set(data["metrics"])
    assert [c["name"] for c in data["conditions"]][:2] == ["bm25/debian/test", "bm25/debian/val"]
    code, out, _ = invoke("list")
    assert code == 0 and "conditions" in out
    code, out, _ = invoke("plugins", "--hook", "register_datasets")
    assert [p["name"] for p in json.loads(out)] == ["debian", "stark"]


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
    assert lines[2].startswith("| debian | test | bm25 | 111 | 55.86 | 68.82 |")
    code, out, _ = invoke("leaderboard", "show", "board")
    assert code == 0 and "bm25" in out
    code, out, _ = invoke("leaderboard", "schema")
    assert json.loads(out)["title"] == "LeaderboardRow"


def test_evaluate_trec_files(tmp_path: Path) -> None:
    (tmp_path / "run.trec").write_text(
        "q1 Q0 d3 1 3.0 x\nq1 Q0 d1 2 2.0 x\nq1 Q0 d2 3 1.0 x\n"
        "q2 Q0 d9 1 1.0 x\nq2 Q0 d8 2 5.0 x\n"  # trec_eval orders by score, not by the rank column
    )
    (tmp_path / "qrels.trec").write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d9 2\nq3 0 d4 1\n")
    code, out, _ = invoke(
        "evaluate",
        "--run",
        "run.trec",
        "--qrels",
        "qrels.trec",
        "--metrics",
        "hit@1,mrr,recall@2",
        "--format",
        "json",
        "--per-query",
    )
    data = json.loads(out)
    assert data["queries"] == 3 and data["queries_missing_from_run"] == 1
    assert data["per_query"]["q1"] == {"hit@1": 0.0, "mrr": 0.5, "recall@2": 1.0}
    assert data["per_query"]["q2"] == {"hit@1": 0.0, "mrr": 0.5, "recall@2": 1.0}
    assert data["metrics"]["mrr"] == pytest.approx(1 / 3)
    (tmp_path / "bad.trec").write_text("q1 Q0 d1 1\n")
    code, _, err = invoke("evaluate", "--run", "bad.trec", "--qrels", "qrels.trec")
    assert code == 2 and "bad.trec:1: a run line has 6 columns" in err


def test_harness_entry_point_runs_as_a_program() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    result = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "plugins"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert any(p["name"] == "bm25" for p in json.loads(result.stdout))
    assert callable(main)


def test_all_runs_the_datasets_it_can_when_one_plugin_failed_to_load(tiny_plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    registry = tmp_path / "r.yaml"
    registry.write_text(
        "defaults: {retriever: bm25, split: test, k: 3}\n"
        "datasets:\n  gone: {plugin: gone-plugin, splits: [test]}\n  tiny: {plugin: tiny, splits: [test]}\n"
        "retrievers:\n  bm25: {plugin: bm25}\n"
    )
    result = CliRunner().invoke(
        cli,
        ["run", "--all", "--registry", str(registry), "--no-leaderboard", "--metrics", "hit@1,mrr", "--format", "json"],
    )
    assert result.exit_code == 2, result.output
    assert "1 of 2 runs failed" in result.output and "gone/test: unknown dataset 'gone-plugin'" in result.output
    assert (tmp_path / "runs").is_dir() and any(
        p.name.startswith("tiny-test-bm25-") for p in (tmp_path / "runs").iterdir()
    )


def test_a_plugin_exception_is_one_line_with_its_file_and_line(tmp_path: Path) -> None:
    plugin = tmp_path / "boom_plugin.py"
    plugin.write_text(
        "import numpy as np\n"
        "from harness.plugins.hookspecs import hookimpl\n"
        "from harness.retriever import Ranking, Retriever\n\n"
        "class Boom(Retriever):\n"
        "    name = 'boom'\n"
        "    def build(self, skb, context):\n"
        "        pass\n"
        "    def search(self, queries, k):\n"
        "        raise KeyError('no such field')\n\n"
        "@hookimpl\n"
        "def register_retrievers(register):\n"
        "    register(Boom)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = (
        "import sys, boom_plugin; from harness.plugins import get_plugin_manager; "
        "get_plugin_manager().register(boom_plugin, 'boom'); from harness.cli import cli; sys.argv[0] = 'harness'; "
        "cli(sys.argv[1:])"
    )
    args = [sys.executable, "-c", code, "run", "-r", "boom", "--split", "val", "--no-leaderboard", "--sample", "0.05"]
    short = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert short.returncode == 2
    last = short.stderr.strip().splitlines()[-1]
    assert last.startswith("error: retriever 'boom' failed on queries") and "KeyError" in last
    assert last.endswith(f"(at {plugin}:10 in search)") and "Traceback" not in short.stderr
    full = subprocess.run([*args[:3], "--traceback", *args[3:]], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert "Traceback (most recent call last)" in full.stderr and full.returncode == 2


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
