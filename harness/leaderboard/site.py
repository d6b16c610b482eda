"""The static HTML site: an overview page and one page per dataset, each embedding its rows,
style and script, so it opens from ``file://`` with no server and no network."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from harness.leaderboard.rows import FLAG_MARK, LeaderboardRow, flags_of, seeds_of, spread_of
from harness.leaderboard.views import (
    BELOW_MARK,
    FOOTNOTE,
    Versus,
    cost_of,
    cost_text,
    display_name,
    evidence,
    llm_of,
    metric_columns,
    page_name,
    ranked,
    record,
    sample_seed,
    site_note,
    slug,
    splits,
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
    versus: dict[str, Versus] | None = None,
    root: Path | None = None,
) -> str:
    """A dataset's page: per split (``versus``: its tests, by split) a table of ranked rows, each
    with its evidence in a ``<details>``, and the flagged rows apart. ``root``: the leaderboard
    directory, where a sampled row's seed is read from its run."""
    sections = []
    for split, split_rows in splits(rows):
        columns = metric_columns(split_rows, metrics)
        sections.append(_split_section(split, split_rows, columns, (versus or {}).get(split), root))
    body = "\n".join(sections)
    return _page(f"{dataset} leaderboard", _nav(datasets, dataset), body, [record(r) for r in rows])


#: the table's columns after the metrics: (header, sort type, shown on a narrow screen); those
#: not shown there are in every row's details, so a phone loses nothing but the side-by-side view
_TAIL = [
    ("p vs best", "number", False),
    ("p50 ms", "number", True),
    ("p95 ms", "number", False),
    ("regime", "text", False),
    ("LLM", "text", False),
    ("cost (USD)", "number", False),
    ("date", "text", False),
    ("harness", "text", False),
]


def _table(
    split: str, rows: list[LeaderboardRow], columns: list[str], versus: Versus | None, root: Path | None, flagged: bool
) -> str:
    esc = html.escape
    head_cells = [("retriever", "text", True), ("queries", "number", True)]
    head_cells += [(m, "number", True) for m in columns]
    head_cells += _TAIL
    head = "".join(
        f'<th data-type="{kind}" class="{"text" if kind == "text" else "num"}{"" if shown else " minor"}" '
        f'scope="col">{esc(name)}</th>'
        for name, kind, shown in head_cells
    )
    body_rows = [_row(row, columns, versus, root) for row in rows]
    return f"""<div class="scroll"><table class="board{" flagged" if flagged else ""}" data-split="{esc(split)}">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(body_rows)}
</tbody>
</table></div>"""


def _row(row: LeaderboardRow, columns: list[str], versus: Versus | None, root: Path | None) -> str:
    esc = html.escape
    classes = []
    badges = ""
    if row.sample:
        classes.append("sample")
        badges += f'<span class="badge sample" title="seeded sample of the split">{row.sample:.0%} sample</span>'
    if row.regime == "llm-at-query-time":
        classes.append("llm")
        badges += '<span class="badge llm" title="an LLM runs at query time">LLM</span>'
    flags = flags_of(row)
    reasons = ""
    if flags:
        classes.append("flagged")
        titles = "; ".join(f"{f.get('component')}: {f.get('reason')}" for f in flags)
        badges += f'<span class="badge flag" title="{esc(titles)}">{FLAG_MARK} component never ran</span>'
        reasons = "".join(
            f'<div class="flag-reason">{esc(str(f.get("component")))}: {esc(str(f.get("reason")))}</div>' for f in flags
        )
    name = display_name(row)
    seed = sample_seed(row, root) if row.sample and root is not None else None
    cells = [
        f'<td class="name" data-label="retriever" data-value="{esc(name)}"><span class="retriever">{esc(name)}</span>'
        f"{badges}{reasons}{_details(row, versus, seed)}</td>",
        f'<td data-label="queries" data-value="{row.num_queries}">{row.num_queries}</td>',
    ]
    for m in columns:
        cells.append(_metric_cell(row, m, versus))
    against = versus.first_adjusted(row.config_hash) if versus else None
    sort_value = "" if against is None else ("0" if isinstance(against, str) else repr(against))
    cost = cost_of(row)
    tail = [
        (sort_value, esc(versus_text(against)), "num"),
        (repr(row.latency.p50_ms), f"{row.latency.p50_ms:.2f}", "num"),
        (repr(row.latency.p95_ms), f"{row.latency.p95_ms:.2f}", "num"),
        (None, esc(row.regime), "text"),
        (None, esc(llm_of(row) or "–"), "text"),
        ("" if cost is None else repr(cost), esc(cost_text(row)), "num"),
        (row.timestamp.isoformat(), row.timestamp.date().isoformat(), "text"),
        (None, esc(row.versions.harness), "text"),
    ]
    for (label, _, shown), (value, text, kind) in zip(_TAIL, tail, strict=True):
        cls = " ".join(c for c in ("text" if kind == "text" else "", "" if shown else "minor") if c)
        attrs = (f' class="{cls}"' if cls else "") + f' data-label="{esc(label)}"'
        attrs += f' data-value="{value}"' if value is not None else ""
        cells.append(f"<td{attrs}>{text}</td>")
    return f'<tr class="{" ".join(classes)}">' + "".join(cells) + "</tr>"


def _metric_cell(row: LeaderboardRow, metric: str, versus: Versus | None) -> str:
    esc = html.escape
    if metric not in row.metrics:
        return f'<td data-label="{esc(metric)}" data-value="">–</td>'
    value = row.metrics[metric]
    text = f"{100 * value:.2f}"
    spread = spread_of(row, metric)
    if spread is not None:  # mean ± std (n seeds), as seeded_text says it in Markdown
        count = len((seeds_of(row) or {}).get("values") or [])
        text += f'<span class="pm"> ± {100 * spread["std"]:.2f}</span> <span class="dim">({count} seeds)</span>'
    classes = []
    if versus is not None and versus.best.get(metric) == row.config_hash:
        classes.append("best")
    elif versus is not None and versus.below(row.config_hash, metric):
        key = (row.config_hash, metric)
        classes.append("below")
        title = (
            f"significantly below the best row on {metric} ({versus.best_name[metric]}): "
            f"p = {versus.p[key]:.3f}, Holm-adjusted {versus.adjusted[key]:.3f}"
        )
        text += f'<abbr class="sig" title="{esc(title)}">{BELOW_MARK}</abbr>'
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return f'<td{cls} data-label="{esc(metric)}" data-value="{value!r}">{text}</td>'


def _details(row: LeaderboardRow, versus: Versus | None, seed: int | None) -> str:
    """The row's evidence (:func:`evidence`), folded: a ``<details>`` needs no script."""
    esc = html.escape
    parts = []
    for heading, items in evidence(row, versus, seed):
        entries = "".join(
            f"<dt>{esc(label)}</dt><dd>{f'<code>{esc(text)}</code>' if heading == 'reproduce' else esc(text)}</dd>"
            for label, text in items
        )
        parts.append(f'<div class="part"><h4>{esc(heading)}</h4><dl>{entries}</dl></div>')
    return f'<details class="evidence"><summary>details</summary><div class="body">{"".join(parts)}</div></details>'


def _rows(count: int) -> str:
    return f"{count} row" + ("" if count == 1 else "s")


def _split_section(
    split: str, rows: list[LeaderboardRow], columns: list[str], versus: Versus | None, root: Path | None = None
) -> str:
    esc = html.escape
    options = "".join(
        f'<option value="{esc(m)}"{" selected" if i == len(columns) - 1 else ""}>{esc(m)}</option>'
        for i, m in enumerate(columns)
    )
    # A flagged row's distinguishing component never ran, so its numbers are not the system's it
    # names: it goes to a table of its own below the ranking rather than un-ranked among the others,
    # so that no sort of the ranked table lifts it above a row that did run, while it keeps the
    # same columns to be compared by eye. It never sets the best row either (views.versus_best).
    flagged = [r for r in ranked(rows, columns) if flags_of(r)]
    ranked_rows = [r for r in ranked(rows, columns) if not flags_of(r)]
    queries = max(r.num_queries for r in rows if not r.sample) if any(not r.sample for r in rows) else None
    note = f"{queries} queries; " if queries else ""
    apart = f"; {len(flagged)} flagged, listed apart below" if flagged else ""
    tables = _table(split, ranked_rows, columns, versus, root, flagged=False) if ranked_rows else ""
    if flagged:
        tables += f"""
<h3 class="flagged-heading">{FLAG_MARK} Flagged: component never ran ({_rows(len(flagged))}, not ranked)</h3>
<p class="note">Each of these rows' distinguishing component never (or almost never) ran, as its health counters
show: its numbers measure something other than the system it names, so it is not ranked with the rows above
(expand its details for the counters).</p>
{_table(split, flagged, columns, versus, root, flagged=True)}"""
    return f"""<section id="split-{esc(slug(split))}">
<h2>{esc(split)}</h2>
<p class="note">{note}{_rows(len(ranked_rows))}, best first by {esc(columns[0]) if columns else "name"}{apart}.
{esc(site_note(columns, versus))}</p>
<figure class="plot" data-split="{esc(split)}">
<label>metric <select aria-label="metric to plot">{options}</select></label>
<svg width="760" height="340" viewBox="0 0 760 340" role="img" aria-label="metric against latency, {esc(split)}"></svg>
<noscript><p>The plot needs JavaScript; the table below has every number.</p></noscript>
<figcaption>Each point is a row: higher is better, further left is faster. Orange: an LLM at query time;
hollow: evaluated on a sample; grey: flagged.</figcaption>
</figure>
{tables}
</section>"""


def index_page(by_dataset: dict[str, list[LeaderboardRow]], metrics: list[str] | None) -> str:
    esc = html.escape
    datasets = sorted(by_dataset)
    items = []
    for dataset in datasets:
        parts = []
        for split, rows in splits(by_dataset[dataset]):
            columns = metric_columns(rows, metrics)
            best = ranked([r for r in rows if not flags_of(r)] or rows, columns)[0]
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
