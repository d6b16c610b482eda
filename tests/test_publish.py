"""Publishing a leaderboard made from runs of fake retrievers: Markdown tables per dataset and
split, marks for sampled and LLM rows, p-values as `harness compare` gives them, and a site
that replaces only what publish wrote; each row's evidence on the site, flagged rows apart,
seeded rows as mean ± std, every metric column tested and Holm-corrected, a page for a phone.
(The committed leaderboard's site, driven in a real browser, is in
integration/test_published_leaderboard.py.)"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import Field

import harness
from harness.analysis.compare import compare_runs, load_per_query
from harness.analysis.stats import holm
from harness.cli import cli
from harness.errors import HarnessError
from harness.leaderboard.merge import merge
from harness.leaderboard.publish import publish
from harness.leaderboard.rows import LeaderboardRow, read_rows, write_row
from harness.leaderboard.site import dataset_page
from harness.leaderboard.views import per_query_of, versus_best
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


def test_publish_refreshes_the_tables_a_readme_marks(board: Path, tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Results\n\n<!-- results:plain-test -->\n| stale |\n<!-- /results -->\n\nafter\n")
    args = ["leaderboard", "publish", "--from", str(board), "--out", str(tmp_path / "site")]
    result = CliRunner().invoke(cli, [*args, "--readme", str(readme)])
    assert result.exit_code == 0, result.output
    table = [line for line in (tmp_path / "site/markdown/plain-test.md").read_text().splitlines() if line[:1] == "|"]
    expected = "# Results\n\n<!-- results:plain-test -->\n" + "\n".join(table) + "\n<!-- /results -->\n\nafter\n"
    assert readme.read_text() == expected and "refreshed plain-test" in result.output
    readme.write_text("<!-- results:plain-test -->\n| cut short |\n")
    result = CliRunner().invoke(cli, [*args, "--readme", str(readme)])
    assert result.exit_code != 0 and "has no <!-- /results --> after it" in result.output
    assert readme.read_text() == "<!-- results:plain-test -->\n| cut short |\n"


def test_rows_record_what_the_marks_are_made_from(board: Path) -> None:
    """The fake LLM row carries what publish reads: its regime, sample, usage and the LLM parameter."""
    [llm] = [r for r in read_rows(board) if r.retriever.name == "asks-llm"]
    assert isinstance(llm, LeaderboardRow)
    assert llm.regime == "llm-at-query-time" and llm.sample == 0.5 and llm.num_queries == 2
    assert llm.usage["cost_usd"] == 0.0012 and llm.retriever.params == {"llm": "fake:echo"}


REASON = "no structured query executed in any of 4 queries (parse_executed 0/4)"


def _flag_and_seed(board: Path) -> LeaderboardRow:
    """On plain/test: flag the best row (its distinguishing component never ran) and average
    overlap-strict over three seeds, whose runs (subdirectories of its run) copy its per-query
    results. Rewrites their row files as the runner and seeded training write them."""
    rows = {r.retriever.name: r for r in read_rows(board) if r.dataset.name == "plain"}
    flagged = LeaderboardRow.model_validate(
        {
            **rows["overlap"].model_dump(mode="json"),
            "health": {
                "counters": {"parse_executed": 0, "queries_parsed": 4},
                "queries": 4,
                "flags": [{"component": "structured query", "reason": REASON}],
            },
        }
    )
    strict = rows["overlap-strict"]
    spread = {m: {"mean": v, "std": 0.0125, "min": v - 0.01, "max": v + 0.02} for m, v in strict.metrics.items()}
    runs = ["seeds/0", "seeds/1", "seeds/2"]
    seeded = LeaderboardRow.model_validate(
        {
            **strict.model_dump(mode="json"),
            "seeds": {"values": [0, 1, 2], "config_hashes": ["a0", "a1", "a2"], "metrics": spread, "runs": runs},
        }
    )
    assert strict.run_dir
    for run in runs:
        (board / strict.run_dir / run).mkdir(parents=True)
        shutil.copy(board / strict.run_dir / "per_query.jsonl", board / strict.run_dir / run / "per_query.jsonl")
    write_row(board, flagged)
    write_row(board, seeded)
    return seeded


def _section(page: str, split: str) -> str:
    return page.split(f'<section id="split-{split}">')[1].split("</section>")[0]


def test_site_shows_each_rows_evidence_and_lists_flagged_rows_apart(board: Path, tmp_path: Path) -> None:
    seeded = _flag_and_seed(board)
    publish(board, tmp_path / "site", METRICS)
    section = _section((tmp_path / "site" / "plain.html").read_text(), "test")
    ranked_part, flagged_part = section.split('<h3 class="flagged-heading">')
    # the flagged row is in its own table below the ranking, badged with its reason, though it
    # is the best by every metric; it does not set the best row either
    assert 'data-value="overlap"' in flagged_part and 'data-value="overlap"' not in ranked_part
    assert 'data-value="overlap-strict"' in ranked_part and 'data-value="asks-llm"' in ranked_part
    assert '<table class="board flagged" data-split="test">' in flagged_part
    assert "component never ran" in flagged_part and f"structured query: {REASON}" in flagged_part
    assert "1 row, not ranked" in flagged_part and "1 flagged, listed apart below" in ranked_part
    strict_row = ranked_part.split('data-value="overlap-strict"')[1].split("</tr>")[0]
    assert ">best<" in strict_row and 'class="best"' in strict_row
    # every row's details: configuration, seeds, health and the command that reproduces it
    assert section.count('<details class="evidence">') == 3
    assert "min_overlap=3" in strict_row and "with_relations=true" in strict_row  # its parameters
    assert "<dt>seeds</dt>" not in strict_row  # not trained: no training section, the seeds have their own
    for value, run in zip([0, 1, 2], ["seeds/0", "seeds/1", "seeds/2"], strict=True):
        assert f"<dt>seed {value}</dt><dd>{seeded.run_dir}/{run}</dd>" in strict_row
    mrr = 100 * seeded.metrics["mrr"]
    assert f"<dt>mrr</dt><dd>{mrr:.2f} ± 1.25 (min {mrr - 1:.2f}, max {mrr + 2:.2f})</dd>" in strict_row
    command = f"harness leaderboard reproduce leaderboard/rows/plain/test/overlap-strict-{seeded.config_hash}.json"
    assert f"<code>{command}</code>" in strict_row
    flagged_row = flagged_part.split('data-value="overlap"')[1].split("</tr>")[0]
    assert "<dt>parse_executed</dt><dd>0</dd>" in flagged_row and "<dt>queries</dt><dd>4</dd>" in flagged_row
    assert f"<dt>flag: structured query</dt><dd>{REASON}</dd>" in flagged_row
    assert "50% of the split, seed " in section  # the sample's seed, from its run's config.json
    # a seeded row's metric cells: mean ± std (n seeds)
    assert f'{mrr:.2f}<span class="pm"> ± 1.25</span> <span class="dim">(3 seeds)</span>' in strict_row
    # its tests are of each query's mean over its seeds' runs
    assert seeded.run_dir
    own = load_per_query(board / seeded.run_dir)
    for seed, hit in [(1, 0.0), (2, 1.0)]:
        lines = [json.dumps({"qid": q, "metrics": {**m, "hit@1": hit}}) for q, m in own.items()]
        (board / seeded.run_dir / f"seeds/{seed}/per_query.jsonl").write_text("\n".join(lines) + "\n")
    averaged = per_query_of(seeded, board)
    assert averaged == {q: {**m, "hit@1": pytest.approx((m["hit@1"] + 1) / 3)} for q, m in own.items()}
    # the Markdown table: the flagged row after the ranked ones, marked, its reason below
    table = (tmp_path / "site" / "markdown" / "plain-test.md").read_text()
    lines = _table_lines(table)
    assert lines[-1].startswith("| overlap ⚑ |") and not any("⚑" in line for line in lines[:-1])
    assert lines[0].startswith("| overlap-strict |") and f"{mrr:.2f} ± 1.25 (3 seeds)" in lines[0]
    assert f"⚑ overlap (plain/test): structured query: {REASON}" in table.split(lines[-1])[1]


def test_every_metric_column_is_tested_against_its_best_row(board: Path, tmp_path: Path) -> None:
    """Each row against the best row of each metric, the p-values `harness compare` gives, then
    Holm-adjusted over all the split's tests; the page says how many."""
    rows = [r for r in read_rows(board) if r.dataset.name == "plain"]
    versus = versus_best(rows, METRICS, board)
    best = next(r for r in rows if r.retriever.name == "overlap")
    assert versus.best == dict.fromkeys(METRICS, best.config_hash)
    others = [r for r in rows if r is not best]
    assert set(versus.p) == {(r.config_hash, m) for r in others for m in METRICS}
    assert best.run_dir
    for row in others:
        assert row.run_dir
        for metric in METRICS:
            [result] = compare_runs([board / best.run_dir, board / row.run_dir], metric)
            assert versus.p[(row.config_hash, metric)] == result["p_randomization"]
    assert versus.adjusted == dict(zip(versus.p, holm(list(versus.p.values())), strict=True))
    publish(board, tmp_path / "site", METRICS)
    page = (tmp_path / "site" / "plain.html").read_text()
    assert page.count(f"Holm–Bonferroni-adjusted over the {len(versus.p)} tests of this split") == 1


def _synthetic(board: Path, tmp_path: Path) -> list[LeaderboardRow]:
    """Three rows over 40 queries: ``a`` the best; ``b`` worse on every query (significant on both
    metrics, however corrected); ``d`` worse on hit@1 in 6 queries only, p = 2/2⁶ exactly, which
    Holm's correction over the 4 tests (2·p) no longer calls significant."""
    [template] = [r for r in read_rows(board) if r.retriever.name == "overlap-strict"]
    values = {
        "a": [{"hit@1": 1.0, "mrr": 1.0}] * 40,
        "b": [{"hit@1": 0.0, "mrr": 0.5}] * 40,
        "d": [{"hit@1": 0.0, "mrr": 1.0}] * 6 + [{"hit@1": 1.0, "mrr": 1.0}] * 34,
    }
    rows = []
    for name, per_query in values.items():
        directory = tmp_path / "synthetic" / "runs" / name
        directory.mkdir(parents=True)
        lines = [json.dumps({"qid": q, "metrics": m}) for q, m in enumerate(per_query)]
        (directory / "per_query.jsonl").write_text("\n".join(lines) + "\n")
        metrics = {m: float(np.mean([v[m] for v in per_query])) for m in ("hit@1", "mrr")}
        retriever = template.retriever.model_copy(update={"name": name})
        update = {"retriever": retriever, "metrics": metrics, "run_dir": f"runs/{name}", "config_hash": name * 16}
        rows.append(template.model_copy(update=update))
    return rows


def test_cells_significantly_below_the_best_are_marked_after_the_correction(board: Path, tmp_path: Path) -> None:
    rows = _synthetic(board, tmp_path)
    root = tmp_path / "synthetic"
    versus = versus_best(rows, ["hit@1", "mrr"], root)
    a, b, d = (r.config_hash for r in rows)
    assert len(versus.p) == 4 and versus.p[(d, "hit@1")] == pytest.approx(2 / 2**6)  # exact: 2⁶ sign flips
    assert versus.adjusted[(d, "hit@1")] == pytest.approx(2 * 2 / 2**6)  # second smallest of 4 after b's two
    assert versus.below(b, "hit@1") and versus.below(b, "mrr")
    assert not versus.below(d, "hit@1") and not versus.below(d, "mrr") and not versus.below(a, "hit@1")
    page = dataset_page("synthetic", rows, ["synthetic"], ["hit@1", "mrr"], {"test": versus}, root)

    def cells(name: str) -> list[str]:
        row = page.split(f'data-value="{name}"')[1].split("</tr>")[0]
        return [cell for cell in row.split("<td")[1:] if 'data-label="hit@1"' in cell or 'data-label="mrr"' in cell]

    assert all('class="best"' in cell for cell in cells("a"))
    assert all('class="below"' in cell and "▼</abbr>" in cell for cell in cells("b"))
    assert not any("below" in cell or "▼" in cell for cell in cells("d"))
    assert "Holm-adjusted 0.062" in page.split('data-value="d"')[1].split("</tr>")[0]  # its details say why
    assert "over the 4 tests of this split" in page


def test_pages_are_made_for_a_phone(board: Path, tmp_path: Path) -> None:
    """What keeps a page from scrolling sideways at 390 px (checked in a browser in
    tests/test_site_layout.py): the viewport tag, the order in which the script drops columns
    that are in every row's details, cards with labels for their values, a plot that scales."""
    publish(board, tmp_path / "site", METRICS)
    for page in (tmp_path / "site").glob("*.html"):
        text = page.read_text()
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
        assert "@media (max-width: 640px)" in text and "td.minor { display: none; }" in text
    text = (tmp_path / "site" / "plain.html").read_text()
    assert 'viewBox="0 0 760 340"' in text and "max-width: 100%" in text
    body = text.split("<tbody>")[1].split("</tbody>")[0]
    assert body.count("<td") == body.count("data-label=")
    assert 'class="num minor" scope="col">p95 ms' in text and 'class="text minor" data-label="date"' in text
    assert 'data-drop="6" class="num minor" scope="col">p95 ms' in text and "table.board.cards" in text
    assert '<option value="hit@1" selected>' in text  # the plot opens on the table's sort metric
