"""The static HTML site: an overview page and one page per dataset, each embedding its rows,
style and script, so it opens from ``file://`` with no server and no network."""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from harness.leaderboard.rows import LeaderboardRow
from harness.leaderboard.views import (
    FOOTNOTE,
    cost_of,
    cost_text,
    display_name,
    llm_of,
    metric_columns,
    page_name,
    ranked,
    record,
    slug,
    splits,
    versus_note,
    versus_text,
)
from harness.version import __version__


def _asset(name: str) -> str:
    return resources.files("harness.leaderboard").joinpath("web", name).read_text(encoding="utf-8")


def _page(title: str, nav: str, body: str, data: list[dict[str, Any]]) -> str:

    # "</" cannot end the script element early once escaped; JSON parses "<\/" as "</".
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
{_asset("leaderboard.css")}</style>
</head>
<body>
<header><h1>{html.escape(title)}</h1><nav>{nav}</nav></header>
<main>
{body}
</main>
<footer>Published with stark-harness {html.escape(__version__)}. {html.escape(FOOTNOTE)}
Click a column header to sort.</footer>
<script type="application/json" id="leaderboard-data">{payload}</script>
<script>
{_asset("leaderboard.js")}</script>
</body>
</html>
"""


def _nav(datasets: list[str], current: str | None) -> str:
    links = ['<a href="index.html"' + (' class="current"' if current is None else "") + ">overview</a>"]
    for name in datasets:
        cls = ' class="current"' if name == current else ""
        links.append(f'<a href="{html.escape(page_name(name))}"{cls}>{html.escape(name)}</a>')
    return "".join(links)


def dataset_page(
    dataset: str,
    rows: list[LeaderboardRow],
    datasets: list[str],
    metrics: list[str] | None,
    versus: dict[str, float | str] | None = None,
) -> str:
    sections = []
    for split, split_rows in splits(rows):
        columns = metric_columns(split_rows, metrics)
        sections.append(_split_section(split, split_rows, columns, versus or {}))
    body = "\n".join(sections)
    return _page(f"{dataset} leaderboard", _nav(datasets, dataset), body, [record(r) for r in rows])


def _split_section(split: str, rows: list[LeaderboardRow], columns: list[str], versus: dict[str, float | str]) -> str:
    esc = html.escape
    options = "".join(
        f'<option value="{esc(m)}"{" selected" if i == len(columns) - 1 else ""}>{esc(m)}</option>'
        for i, m in enumerate(columns)
    )
    head_cells = [("retriever", "text"), ("queries", "number")]
    head_cells += [(m, "number") for m in columns]
    head_cells += [("p vs best", "number")]
    head_cells += [("p50 ms", "number"), ("p95 ms", "number"), ("regime", "text"), ("LLM", "text")]
    head_cells += [("cost (USD)", "number"), ("date", "text"), ("harness", "text")]
    head = "".join(
        f'<th data-type="{kind}" class="{"text" if kind == "text" else "num"}" scope="col">{esc(name)}</th>'
        for name, kind in head_cells
    )
    body_rows = []
    for row in ranked(rows, columns):
        classes = []
        badges = ""
        if row.sample:
            classes.append("sample")
            badges += f'<span class="badge sample" title="seeded sample of the split">{row.sample:.0%} sample</span>'
        if row.regime == "llm-at-query-time":
            classes.append("llm")
            badges += '<span class="badge llm" title="an LLM runs at query time">LLM</span>'
        cost = cost_of(row)
        cells = [
            f'<td data-value="{esc(display_name(row))}">{esc(display_name(row))}{badges}</td>',
            f'<td data-value="{row.num_queries}">{row.num_queries}</td>',
        ]
        for m in columns:
            if m in row.metrics:
                cells.append(f'<td data-value="{row.metrics[m]!r}">{100 * row.metrics[m]:.2f}</td>')
            else:
                cells.append('<td data-value="">–</td>')
        against = versus.get(row.config_hash)
        sort_value = "" if against is None else ("0" if isinstance(against, str) else repr(against))
        cells.append(f'<td data-value="{sort_value}">{esc(versus_text(against))}</td>')
        cells += [
            f'<td data-value="{row.latency.p50_ms!r}">{row.latency.p50_ms:.2f}</td>',
            f'<td data-value="{row.latency.p95_ms!r}">{row.latency.p95_ms:.2f}</td>',
            f'<td class="text">{esc(row.regime)}</td>',
            f'<td class="text">{esc(llm_of(row) or "–")}</td>',
            f'<td data-value="{"" if cost is None else repr(cost)}">{esc(cost_text(row))}</td>',
            f'<td class="text" data-value="{row.timestamp.isoformat()}">{row.timestamp.date().isoformat()}</td>',
            f'<td class="text">{esc(row.versions.harness)}</td>',
        ]
        body_rows.append(f'<tr class="{" ".join(classes)}">' + "".join(cells) + "</tr>")
    queries = max(r.num_queries for r in rows if not r.sample) if any(not r.sample for r in rows) else None
    note = f"{queries} queries; " if queries else ""
    return f"""<section id="split-{esc(slug(split))}">
<h2>{esc(split)}</h2>
<p class="note">{note}{len(rows)} rows, best first by {esc(columns[0]) if columns else "name"}.
{esc(versus_note(columns))}</p>
<figure class="plot" data-split="{esc(split)}">
<label>metric <select aria-label="metric to plot">{options}</select></label>
<svg width="760" height="340" role="img" aria-label="metric against latency, {esc(split)}"></svg>
<noscript><p>The plot needs JavaScript; the table below has every number.</p></noscript>
<figcaption>Each point is a row: higher is better, further left is faster. Orange: an LLM at query time;
hollow: evaluated on a sample.</figcaption>
</figure>
<div class="scroll"><table class="board" data-split="{esc(split)}">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body_rows)}
</tbody>
</table></div>
</section>"""


def index_page(by_dataset: dict[str, list[LeaderboardRow]], metrics: list[str] | None) -> str:
    esc = html.escape
    datasets = sorted(by_dataset)
    items = []
    for dataset in datasets:
        parts = []
        for split, rows in splits(by_dataset[dataset]):
            columns = metric_columns(rows, metrics)
            best = ranked(rows, columns)[0]
            lead = (
                f"{esc(columns[0])} {100 * best.metrics[columns[0]]:.2f}"
                if columns and columns[0] in best.metrics
                else ""
            )
            parts.append(
                f'<a href="{esc(page_name(dataset))}#split-{esc(slug(split))}">{esc(split)}</a> '
                f'<span class="dim">({len(rows)} rows; best: {esc(display_name(best))} {lead})</span>'
            )
        items.append(
            f'<li><a href="{esc(page_name(dataset))}"><strong>{esc(dataset)}</strong></a> — '
            + "; ".join(parts)
            + "</li>"
        )
    body = f"""<section>
<p class="note">Retrieval on semi-structured knowledge bases. One page per dataset; every row links a
configuration to its per-query results in the leaderboard repository.</p>
<ul class="datasets">
{chr(10).join(items)}
</ul>
</section>"""
    return _page("stark-harness leaderboard", _nav(datasets, None), body, [])
