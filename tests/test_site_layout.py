"""The published site on a phone (390 px) and a laptop (1280 px), in a real headless Chromium
(Debian's, through Playwright, as tests/integration/test_published_leaderboard.py drives it):
no page scrolls sideways, no element reaches past the viewport, no table cell cuts its text, the
plot's labels stay inside it without overprinting each other, also with every row's details
open; the plot opens on the table's sort metric and follows it; the overview shows each split's
best rows. On the committed board and on a synthetic one made to be awkward: long names, twelve
metric columns, a sampled LLM row, seeds, a flagged row, a second dataset."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

from harness.analysis.compare import paired_test
from harness.leaderboard import views
from harness.leaderboard.publish import publish
from harness.leaderboard.rows import LeaderboardRow, flags_of, read_rows, write_row
from harness.leaderboard.views import display_name, ranked

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
METRICS = ["hit@1", "hit@5", "recall@20", "mrr", "map@100"]
WIDTHS = [(390, 844), (1280, 800)]
LONG = "a-dataset-with-a-rather-long-name-that-has-no-spaces"

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="Debian's chromium is not installed"),
    pytest.mark.slow,  # about 20 s: publishing the committed board, then a browser on every page at two widths
]

# Everything on the page that reaches past the viewport, cuts its text or overprints the plot.
PROBLEMS = """() => {
  const width = window.innerWidth, problems = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + (el.getAttribute("class") ? "." + el.getAttribute("class").trim().split(/\\s+/).join(".") : "")
    + (el.textContent ? " '" + el.textContent.trim().slice(0, 30) + "'" : "");
  if (document.documentElement.scrollWidth > width) {
    problems.push("the page is " + document.documentElement.scrollWidth + " px wide");
  }
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || getComputedStyle(el).visibility === "hidden") continue;
    if (r.right > width + 0.5 || r.left < -0.5) problems.push(name(el) + " spans " + r.left + ".." + r.right);
    if ((el.tagName === "TD" || el.tagName === "TH") && el.scrollWidth > el.clientWidth + 1) {
      problems.push(name(el) + " cuts its text: " + el.scrollWidth + " > " + el.clientWidth);
    }
  }
  for (const svg of document.querySelectorAll("figure.plot svg")) {
    const box = svg.getBoundingClientRect();
    const labels = [...svg.querySelectorAll("text.label")].map(t => [t, t.getBoundingClientRect()]);
    for (const el of svg.querySelectorAll("text, circle")) {
      const r = el.getBoundingClientRect();
      const inside = r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
      if (!inside || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) problems.push("off the plot: " + name(el));
    }
    labels.forEach(([a, ra], i) => labels.slice(i + 1).forEach(([b, rb]) => {
      const x = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const y = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (x > 1 && y > 1) problems.push("labels overlap: " + name(a) + " and " + name(b));
    }));
  }
  return problems;
}"""

OPEN_DETAILS = """async () => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  await new Promise(done => setTimeout(done, 50));  // toggle events fire after the change
}"""


def _awkward_board(root: Path) -> Path:
    """The committed debian/test rows, renamed long, with twelve metrics, on two datasets and
    two splits; one row sampled with an LLM at query time (its seeded and flagged rows stay)."""
    board = root / "awkward-board"
    (board / "rows").mkdir(parents=True)
    source = [r for r in read_rows(REPO / "leaderboard") if r.dataset.name == "debian" and r.split == "test"]
    extra = ["hit@3", "hit@10", "recall@5", "recall@10", "recall@50", "recall@100", "ndcg@10"]
    for n, row in enumerate(source):
        metrics = {**row.metrics, **{m: min(1.0, row.metrics["hit@5"] + 0.01 * i) for i, m in enumerate(extra)}}
        update: dict[str, Any] = {
            "retriever": row.retriever.model_copy(
                update={"name": f"{row.retriever.name}-with-an-uncommonly-long-configuration-name-{n}"}
            ),
            "dataset": row.dataset.model_copy(update={"name": LONG if n % 2 else "debian"}),
            "split": "val" if n % 3 == 2 else "test",
            "metrics": metrics,
            "run_dir": None,
        }
        if n == 1:
            params = {**row.retriever.params, "llm": "some-provider/a-long-model-name-2025-preview"}
            update |= {"sample": 0.25, "regime": "llm-at-query-time", "usage": {"api_calls": 52, "cost_usd": 0.41}}
            update["retriever"] = update["retriever"].model_copy(update={"params": params})
        write_row(board, row.model_copy(update=update))
    return board


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layout")
    # fewer resamples for the tests against the best rows: their p-values shift a little, the marks
    # and cells the layout has to fit stay; 10,000 take most of a minute on two busy cores
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(views, "paired_test", lambda a, b, resamples, seed: paired_test(a, b, resamples=500, seed=seed))
        publish(REPO / "leaderboard", root / "committed", METRICS)
    publish(_awkward_board(root), root / "awkward")  # every metric of the rows: twelve columns
    return {"committed": root / "committed", "awkward": root / "awkward"}


BOARDS = {"committed": REPO / "leaderboard", "awkward": Path("awkward-board")}  # the latter beside its site


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "CI installs Debian's chromium (see .ci/run)"
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=[*args, "--disable-sync", "--no-first-run"]
        )
        yield launched
        launched.close()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
@pytest.mark.parametrize("board", ["committed", "awkward"])
def test_every_page_fits_the_screen(sites: dict[str, Path], browser: Any, board: str, width: int, height: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    pages = sorted(sites[board].glob("*.html"))
    assert len(pages) == (2 if board == "committed" else 3)
    for file in pages:
        page.goto(file.as_uri())
        assert page.evaluate(PROBLEMS) == [], f"{board}/{file.name} at {width} px"
        assert page.locator("figure.plot svg circle.point").count() == (
            0
            if file.name == "index.html"
            else len(page.evaluate("JSON.parse(document.getElementById('leaderboard-data').textContent)"))
        )
        page.evaluate(OPEN_DETAILS)
        assert page.evaluate(PROBLEMS) == [], f"{board}/{file.name} at {width} px, every details open"
        # a column left out is named above its table (and its values are in each row's details)
        for note in page.locator("p.hidden-note:visible").all():
            assert note.inner_text().startswith("Not shown at this width: ")
    if board == "committed" and width == 1280:  # a laptop shows the committed board as a table
        page.goto((sites[board] / "debian.html").as_uri())
        assert page.locator("table.board.cards").count() == 0
        shown = page.locator('table.board:not(.flagged)[data-split="test"] thead th:visible').all_inner_texts()
        assert {"retriever", *METRICS, "p50 ms", "p95 ms", "p vs best"} <= {t.strip(" ▼") for t in shown}
    if width == 390:  # a phone shows cards, each value labelled
        page.goto((sites[board] / "debian.html").as_uri())
        assert page.locator("table.board:not(.summary)").count() == page.locator("table.board.cards").count() > 0
    page.close()
    assert errors == []


def test_the_plot_shows_the_tables_sort_metric(sites: dict[str, Path], browser: Any) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto((sites["committed"] / "debian.html").as_uri())
    for figure in page.locator("figure.plot").all():
        split = figure.get_attribute("data-split")
        table = page.locator(f'table.board:not(.flagged)[data-split="{split}"]')
        sorted_by = table.locator('thead th[aria-sort="descending"]').inner_text().strip(" ▼")
        assert figure.locator("select").input_value() == sorted_by == METRICS[0]
        assert f"best first by {METRICS[0]}" in page.locator(f"#split-{split} p.note").first.inner_text()
        # sorting the table by another metric plots that metric
        table.locator("thead th", has_text="mrr").click()
        assert figure.locator("select").input_value() == "mrr"
    page.close()


def test_the_overview_shows_each_splits_best_rows(sites: dict[str, Path], browser: Any) -> None:
    """Per dataset a section, per split a table of its best rows by the sort metric (flagged
    rows left out), each linking to its row on the dataset's page."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    for board, site in sites.items():
        rows = read_rows(site.parent / BOARDS[board])
        page.goto((site / "index.html").as_uri())
        datasets = page.locator("section.dataset h2").all_inner_texts()
        assert datasets == sorted({r.dataset.name for r in rows})
        for dataset, section in zip(datasets, page.locator("section.dataset").all(), strict=True):
            target = (site / f"{dataset}.html").read_text()
            tables = section.locator("table.board.summary").all()
            assert len(tables) == len({r.split for r in rows if r.dataset.name == dataset})
            for table in tables:
                split = table.get_attribute("data-split")
                split_rows = [r for r in rows if r.dataset.name == dataset and r.split == split]
                best = [display_name(r) for r in ranked(split_rows, ["hit@1"]) if not flags_of(r)]
                assert table.locator("tbody td.name a.retriever").all_inner_texts() == best[:5]
                links = table.locator("tbody td.name a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
                assert all(link.startswith(f"{dataset}.html#row-") for link in links)
                assert all(f'<tr id="{link.split("#")[1]}"' in target for link in links)
    page.close()


def test_the_awkward_board_is_what_it_claims(sites: dict[str, Path]) -> None:
    """The synthetic board really has what makes a page hard to fit."""
    rows = read_rows(sites["awkward"].parent / BOARDS["awkward"])
    assert {r.dataset.name for r in rows} == {"debian", LONG} and {r.split for r in rows} == {"test", "val"}
    assert max(len(r.metrics) for r in rows) == 12 and any(flags_of(r) for r in rows)
    llm: LeaderboardRow = next(r for r in rows if r.regime == "llm-at-query-time")
    assert llm.sample == 0.25


def test_a_page_fits_again_when_the_window_narrows(sites: dict[str, Path], browser: Any) -> None:
    """Turning a tablet or narrowing a window refits the tables and redraws the plots."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto((sites["committed"] / "debian.html").as_uri())
    wide = page.locator("figure.plot svg").first.get_attribute("viewBox")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function("document.querySelectorAll('table.board.cards').length > 0")
    assert page.evaluate(PROBLEMS) == []
    assert page.locator("figure.plot svg").first.get_attribute("viewBox") != wide
    page.close()
