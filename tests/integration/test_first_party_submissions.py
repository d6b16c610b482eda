"""Submissions with the first-party plugins: the committed leaderboard validates from its own
files, and a Debian BM25 run goes through the contributor's and maintainer's commands to the
published rows' hashes and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from harness.cli import cli
from harness.leaderboard.bundles import collect
from harness.leaderboard.rows import read_rows
from harness.leaderboard.validate import validate


def test_committed_leaderboard_validates_from_its_own_files(tmp_path: Path) -> None:
    """Every published row is recomputed from the TREC run the leaderboard keeps for it."""
    results = validate(collect(REPO / "leaderboard", tmp_path / "unpacked"))
    files = list((REPO / "leaderboard" / "rows").rglob("*.json"))
    assert len(results) == len(files) > 0
    assert [r.problems for r in results if not r.ok] == []
    for result in results:
        if result.row.seeds:  # each seed's run is validated as a row of its own; the means from those
            assert "seeds' means, spreads and per-query means recomputed" in result.checks, result.checks
            continue
        assert any(check.startswith("metrics recomputed from") for check in result.checks), result.checks
        assert "health recomputed from the per-query details" in result.checks
        assert not Path(result.row.run_dir).is_absolute()


@pytest.mark.slow
def test_debian_run_submitted_merged_published_and_compared(tmp_path: Path) -> None:
    """The contributor's and the maintainer's commands in order, on real BM25 over Debian."""
    cli_runner = CliRunner()

    def invoke(*args: str) -> str:
        result = cli_runner.invoke(cli, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    invoke("run", "--no-leaderboard", "--output", "runs")
    invoke("run", "-r", "bm25-relations", "--no-leaderboard", "--output", "runs")
    invoke("submit", "runs", "-o", "debian.tar.gz")
    out = invoke("leaderboard", "merge", "debian.tar.gz", "--into", "board")
    assert "added debian/test bm25 " in out and "added debian/test bm25-relations " in out
    assert "2 of 2 rows valid" in invoke("leaderboard", "validate", "board")
    rows = {r.retriever.name: r for r in read_rows(tmp_path / "board")}
    published = {r.retriever.name: r for r in read_rows(REPO / "leaderboard") if r.split == "test"}
    # the same configuration as the published rows: same hash, same metrics to the last digit
    for name in ("bm25", "bm25-relations"):
        assert rows[name].config_hash == published[name].config_hash
        assert {m: rows[name].metrics[m] for m in published[name].metrics} == published[name].metrics
    result = json.loads(
        invoke(
            "compare",
            str(tmp_path / "board" / rows["bm25"].run_dir),
            str(tmp_path / "board" / rows["bm25-relations"].run_dir),
            "--format",
            "json",
        )
    )
    assert result[0]["difference"] == pytest.approx(rows["bm25-relations"].metrics["mrr"] - rows["bm25"].metrics["mrr"])
    invoke("leaderboard", "publish", "--from", "board", "--out", "site")
    assert "bm25-relations" in (tmp_path / "site" / "markdown" / "debian-test.md").read_text()
