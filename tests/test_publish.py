"""Publishing a leaderboard made from runs of fake retrievers: Markdown tables per dataset and
split, marks for sampled and LLM rows, p-values as `harness compare` gives them, and a site
that replaces only what publish wrote. (The committed leaderboard's site, driven in a real
browser, is in integration/test_published_leaderboard.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import Field

import harness
from harness.analysis.compare import compare_runs
from harness.cli import cli
from harness.errors import HarnessError
from harness.leaderboard.merge import merge
from harness.leaderboard.publish import publish
from harness.leaderboard.rows import LeaderboardRow, read_rows
from harness.plugins import PluginManager
from harness.run import Runner, resolve
from harness.run.registry import parse_registry

METRICS = ["hit@1", "recall@3", "mrr"]
REGISTRY = """
datasets:
  plain: {plugin: plain, splits: [test]}
  plain-short:
    plugin: plain
    params: {queries: [[1, "kettle", [1]], [2, "steel frying pan", [3]], [3, "heavy pot", [4]]]}
retrievers:
  overlap: {plugin: overlap}
  overlap-strict: {plugin: overlap, params: {with_relations: true, min_overlap: 3}}
  asks-llm: {plugin: asks-llm}
"""


class AsksLLM(harness.Retriever):
    """A fake retriever that would ask an LLM per query: highest ids first, a priced usage."""

    name = "asks-llm"
    regime = "llm-at-query-time"

    class Options(harness.Options):
        llm: str = Field("fake:echo", description="the model it would ask")

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        self.ids = skb.candidate_ids[::-1]

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        self.calls = getattr(self, "calls", 0) + len(queries)
        ids = self.ids[:k]
        return [harness.Ranking(ids, -np.arange(len(ids), dtype=float)) for _ in queries]

    def usage(self) -> dict[str, Any]:
        return {"api_calls": self.calls, "cost_usd": 0.0012}


class AsksLLMPlugin:
    @harness.hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register(AsksLLM)


@pytest.fixture
def board(plain_plugins: PluginManager, tmp_path: Path) -> Path:
    """A leaderboard of four rows on ``plain`` (one of them LLM-at-query-time on a 50% sample)
    and one on ``plain-short``, merged as submissions are."""
    plain_plugins.register(AsksLLMPlugin(), "asks-llm-plugin")
    registry = parse_registry(REGISTRY, "publish.yaml")
    runner = Runner(plain_plugins, output_dir=tmp_path / "runs", device="cpu")
    runs = [
        runner.run(resolve(registry, plain_plugins, retriever, dataset, "test", 3, METRICS, sample_fraction=sample))
        for retriever, dataset, sample in [
            ("overlap", "plain", None),
            ("overlap-strict", "plain", None),
            ("asks-llm", "plain", 0.5),
            ("overlap", "plain-short", None),
        ]
    ]
    board = tmp_path / "board"
    merge([run.run_dir for run in runs], board)
    return board


def _table_lines(table: str) -> list[str]:
    return [line for line in table.splitlines() if line.startswith("| ") and "retriever" not in line]


def test_markdown_tables_per_dataset_and_split(board: Path, tmp_path: Path) -> None:
    files = publish(board, tmp_path / "site", METRICS)
    rows = read_rows(board)
    names = {p.relative_to(tmp_path / "site").as_posix() for p in files}
    for row in rows:
        assert f"markdown/{row.dataset.name}-{row.split}.md" in names
        assert f"{row.dataset.name}.html" in names
    table = (tmp_path / "site" / "markdown" / "plain-test.md").read_text()
    lines = _table_lines(table)
    test_rows = [r for r in rows if r.dataset.name == "plain" and r.split == "test"]
    assert len(lines) == len(test_rows) == 3
    # best first by the first metric, every number from the row
    firsts = [float(line.split("|")[3]) for line in lines]
    assert firsts == sorted(firsts, reverse=True) and len(set(firsts)) > 1
    best = max(test_rows, key=lambda r: r.metrics["hit@1"])
    assert lines[0].startswith(f"| {best.retriever.name} |")
    assert f"{100 * best.metrics['mrr']:.2f}" in lines[0]
    # LLM-at-query-time and sampled rows are marked; their LLM and cost are shown
    llm_line = next(line for line in lines if "asks-llm" in line)
    assert "†‡" in llm_line and "(50%)" in llm_line and "fake:echo" in llm_line and "$0.00" in llm_line
    assert "† evaluated on a seeded random sample" in table
    assert not any("†" in line or "$" in line for line in lines if "asks-llm" not in line)
    # each row's p-value against the best row is what `harness compare` says for the pair
    column = 2 + len(METRICS) + 1
    assert lines[0].split("|")[column].strip() == "best"
    strict = next(r for r in test_rows if r.retriever.name == "overlap-strict")
    expected = compare_runs([board / best.run_dir, board / strict.run_dir], "hit@1")[0]["p_randomization"]
    strict_line = next(line for line in lines if line.startswith("| overlap-strict |"))
    assert strict_line.split("|")[column].strip() == f"{expected:.3f}" + ("*" if expected < 0.05 else "")
    overview = (tmp_path / "site" / "LEADERBOARD.md").read_text()
    assert overview.count("## plain — ") == 1 and overview.count("## plain-short — ") == 1
    short = _table_lines((tmp_path / "site" / "markdown" / "plain-short-test.md").read_text())
    [row] = [r for r in rows if r.dataset.name == "plain-short"]
    assert len(short) == 1 and short[0].startswith("| overlap |") and f"{100 * row.metrics['mrr']:.2f}" in short[0]


def test_publish_refuses_to_replace_a_directory_it_did_not_write(board: Path, tmp_path: Path) -> None:
    precious = tmp_path / "docs"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(HarnessError, match="refusing to replace"):
        publish(board, precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    # an earlier site is replaced whole: nothing stale survives
    site = tmp_path / "site"
    publish(board, site)
    (site / "stale.html").write_text("old")
    publish(board, site)
    assert not (site / "stale.html").exists()
    empty = tmp_path / "empty-board"
    (empty / "rows").mkdir(parents=True)
    with pytest.raises(HarnessError, match="no rows"):
        publish(empty, tmp_path / "out")


def test_cli_publish(board: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["leaderboard", "publish", "--from", str(board), "--out", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "site" / "index.html").is_file()
    pages = {p.name for p in (tmp_path / "site").glob("*.html")}
    assert {"index.html", "plain.html", "plain-short.html"} <= pages


def test_rows_record_what_the_marks_are_made_from(board: Path) -> None:
    """The fake LLM row carries what publish reads: its regime, sample, usage and the LLM parameter."""
    [llm] = [r for r in read_rows(board) if r.retriever.name == "asks-llm"]
    assert isinstance(llm, LeaderboardRow)
    assert llm.regime == "llm-at-query-time" and llm.sample == 0.5 and llm.num_queries == 2
    assert llm.usage["cost_usd"] == 0.0012 and llm.retriever.params == {"llm": "fake:echo"}
