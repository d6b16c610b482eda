"""The committed leaderboard, published: its Markdown tables (LLM and sampled rows marked, p-values
as `harness compare` gives them), the README's results, and the static site driven in a real
headless Chromium (Debian's, through Playwright) from file:// — table sorting, plot, marks,
screenshot."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import REPO

from harness.analysis.compare import compare_runs
from harness.cli import cli
from harness.errors import HarnessError
from harness.leaderboard.publish import display_name, publish
from harness.leaderboard.rows import read_rows

LEADERBOARD = REPO / "leaderboard"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("HARNESS_TEST_ARTIFACTS", REPO / "test-artifacts"))
METRICS = ["hit@1", "hit@5", "recall@20", "mrr", "map@100"]


def test_markdown_tables_per_dataset_and_split(tmp_path: Path) -> None:
    files = publish(LEADERBOARD, tmp_path / "site", METRICS)
    rows = read_rows(LEADERBOARD)
    names = {p.relative_to(tmp_path / "site").as_posix() for p in files}
    for row in rows:
        assert f"markdown/{row.dataset.name}-{row.split}.md" in names
        assert f"{row.dataset.name}.html" in names
    table = (tmp_path / "site" / "markdown" / "debian-test.md").read_text()
    lines = [line for line in table.splitlines() if line.startswith("| ") and "retriever" not in line]
    test_rows = [r for r in rows if r.dataset.name == "debian" and r.split == "test"]
    assert len(lines) == len(test_rows)
    # best first by the first metric (a seeded row's mean), every number from the row; flagged rows (⚑) last
    marks = ["⚑" in line.split("|")[1] for line in lines]
    assert marks == sorted(marks)
    firsts = [float(line.split("|")[3].split("±")[0]) for line, mark in zip(lines, marks, strict=True) if not mark]
    assert firsts == sorted(firsts, reverse=True)
    best = max(test_rows, key=lambda r: r.metrics["hit@1"])
    assert f"{100 * best.metrics['mrr']:.2f}" in lines[0]
    # LLM-at-query-time and sampled rows are marked; their LLM and cost are shown
    # (the marks themselves are tested on rows of every kind in tests/test_publish.py)
    for row in test_rows:
        line = next(line for line in lines if line.startswith(f"| {display_name(row).split(' ')[0]}"))
        assert ("‡" in line) == (row.regime == "llm-at-query-time") and ("†" in line) == bool(row.sample)
    # each row's p-value against the best row is what `harness compare` says for the pair
    column = 2 + len(METRICS) + 1
    assert lines[0].split("|")[column].strip() == "best"
    bm25 = next(r for r in test_rows if r.retriever.name == "bm25")
    expected = compare_runs([LEADERBOARD / best.run_dir, LEADERBOARD / bm25.run_dir], "hit@1")[0]["p_randomization"]
    bm25_line = next(line for line in lines if line.startswith("| bm25 |"))
    assert bm25_line.split("|")[column].strip() == f"{expected:.3f}" + ("*" if expected < 0.05 else "")
    splits = {r.split for r in rows if r.dataset.name == "debian"}
    assert (tmp_path / "site" / "LEADERBOARD.md").read_text().count("## debian — ") == len(splits)


def test_publish_refuses_to_replace_a_directory_it_did_not_write(tmp_path: Path) -> None:
    precious = tmp_path / "docs"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(HarnessError, match="refusing to replace"):
        publish(LEADERBOARD, precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    # an earlier site is replaced whole: nothing stale survives
    site = tmp_path / "site"
    publish(LEADERBOARD, site)
    (site / "stale.html").write_text("old")
    publish(LEADERBOARD, site)
    assert not (site / "stale.html").exists()
    empty = tmp_path / "empty-board"
    (empty / "rows").mkdir(parents=True)
    with pytest.raises(HarnessError, match="no rows"):
        publish(empty, tmp_path / "out")


def test_cli_publish(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["leaderboard", "publish", "--from", str(LEADERBOARD), "--out", str(tmp_path / "site")]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "site" / "index.html").is_file()


def _cell_values(page, split: str, column: int) -> list[str]:  # type: ignore[no-untyped-def]
    return page.eval_on_selector_all(
        f'table.board:not(.flagged)[data-split="{split}"] tbody tr',
        f"rows => rows.map(r => r.cells[{column}].getAttribute('data-value') ?? r.cells[{column}].textContent)",
    )


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="Debian's chromium is not installed")
def test_site_in_headless_chromium(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "CI installs Debian's chromium (see .ci/run)"
    site = tmp_path / "site"
    publish(LEADERBOARD, site, METRICS)
    rows = [r for r in read_rows(LEADERBOARD) if r.dataset.name == "debian"]
    test_rows = [r for r in rows if r.split == "test"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        errors: list[str] = []
        requests: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("request", lambda request: requests.append(request.url))

        # the overview links to the dataset page; it loads from file:// with no server
        page.goto((site / "index.html").as_uri())
        page.click("text=debian")
        page.wait_for_selector('table.board[data-split="test"]')
        assert page.url.startswith("file://") and page.url.split("#")[0].endswith("/debian.html")

        # the table: one row per leaderboard row, sortable by clicking a header
        mrr_column = 2 + METRICS.index("mrr")
        assert page.locator('table.board[data-split="test"] tbody tr').count() == len(test_rows)
        # a row whose own idea never ran is in a table of its own below the ranking
        flagged = [r for r in test_rows if r.health is not None and r.health.flags]
        assert page.locator('table.board.flagged[data-split="test"] tbody tr').count() == len(flagged)
        ranked = [r for r in test_rows if r not in flagged]
        header = page.locator('table.board:not(.flagged)[data-split="test"] thead th', has_text="mrr")
        header.click()
        assert header.get_attribute("aria-sort") == "descending"
        values = [float(v) for v in _cell_values(page, "test", mrr_column)]
        assert values == sorted((r.metrics["mrr"] for r in ranked), reverse=True)
        header.click()
        assert header.get_attribute("aria-sort") == "ascending"
        assert [float(v) for v in _cell_values(page, "test", mrr_column)] == sorted(values)
        page.locator('table.board:not(.flagged)[data-split="test"] thead th', has_text="retriever").click()
        names = _cell_values(page, "test", 0)
        assert names == sorted(names, key=str.lower)

        # the plot: a point per row that has the chosen metric (a reranker's rows lack cut-offs
        # deeper than its candidates), re-drawn when another metric is chosen
        plot = page.locator('figure.plot[data-split="test"]')
        points = plot.locator("circle.point")
        shown = plot.locator("select").input_value()
        assert points.count() == sum(shown in r.metrics for r in test_rows) > 0
        box = plot.locator("svg").bounding_box()
        assert box and box["width"] > 500 and box["height"] > 300
        before = points.evaluate_all("ps => ps.map(p => +p.getAttribute('cy'))")
        plot.locator("select").select_option("hit@1")
        after = points.evaluate_all("ps => ps.map(p => +p.getAttribute('cy'))")
        assert len(after) == len(test_rows) and after != before
        # higher metric → higher on the plot (smaller y)
        by_name = dict(zip(points.evaluate_all("ps => ps.map(p => p.dataset.retriever)"), after, strict=True))
        best = max(test_rows, key=lambda r: r.metrics["hit@1"])
        worst = min(test_rows, key=lambda r: r.metrics["hit@1"])
        assert by_name[display_name(best)] < by_name[display_name(worst)]

        # sampled and LLM rows are marked in the table and the plot
        marked = page.locator('table.board[data-split="test"] tr.llm.sample')
        # (the committed board holds none since the SmolLM2 rows were withdrawn; tests/test_publish.py has them)
        assert marked.count() == sum(1 for r in test_rows if r.sample and r.regime == "llm-at-query-time")
        if marked.count():
            assert "% sample" in marked.first.inner_text() and "LLM" in marked.first.inner_text()
        assert plot.locator("circle.point.llm.sample").count() == marked.count()

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "leaderboard-debian.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert shot.stat().st_size > 20_000
    assert errors == []
    assert all(url.startswith("file://") for url in requests), requests


def test_readme_results_are_the_published_tables(tmp_path: Path) -> None:
    """The README's results cannot drift from the leaderboard: they are publish's own tables."""
    publish(LEADERBOARD, tmp_path / "site", METRICS)
    readme = (REPO / "README.md").read_text()
    for table in sorted((tmp_path / "site" / "markdown").glob("debian-*.md")):
        lines = [line for line in table.read_text().splitlines() if line.startswith("|")]
        assert "\n".join(lines) in readme, f"refresh README from {table.name}: harness leaderboard publish -m ..."
