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
    seeded_text,
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


#: the table's columns after the metrics: (header, sort type, shown on a narrow screen, drop order).
#: The page's script drops columns in drop order (lowest first) while a table is wider than its box,
#: then turns it into cards; what it drops is in every row's details, so a narrow screen loses
#: nothing but the side-by-side view. 0: never dropped (the metrics, the name).
_TAIL = [
    ("p vs best", "number", False, 7),
    ("p50 ms", "number", True, 9),
    ("p95 ms", "number", False, 6),
    ("regime", "text", False, 5),
    ("LLM", "text", False, 4),
    ("cost (USD)", "number", False, 3),
    ("date", "text", False, 2),
    ("harness", "text", False, 1),
]


def _head(cells: list[tuple[str, str, bool, int]], metrics: list[str], sorted_by: str | None) -> str:
    """A header row: ``data-drop`` is the column's drop order, ``data-metric`` lets a click on it
    set the plot's metric, ``aria-sort`` says which column the rows come sorted by."""
    esc = html.escape
    out = []
    for name, kind, shown, drop in cells:
        attrs = f' data-type="{kind}"' + (f' data-drop="{drop}"' if drop else "")
        attrs += f' data-metric="{esc(name)}"' if name in metrics else ""
        attrs += ' aria-sort="descending"' if name == sorted_by else ""
        attrs += f' class="{"text" if kind == "text" else "num"}{"" if shown else " minor"}" scope="col"'
        out.append(f"<th{attrs}>{esc(name)}</th>")
    return "<tr>" + "".join(out) + "</tr>"


def _table(
    split: str, rows: list[LeaderboardRow], columns: list[str], versus: Versus | None, root: Path | None, flagged: bool
) -> str:
    esc = html.escape
    head_cells = [("retriever", "text", True, 0), ("queries", "number", True, 8)]
    head_cells += [(m, "number", True, 0) for m in columns]
    head = _head(head_cells + _TAIL, columns, columns[0] if columns else None)
    body_rows = [_row(row, columns, versus, root) for row in rows]
    return f"""<div class="scroll"><table class="board{" flagged" if flagged else ""}" data-split="{esc(split)}">
<thead>{head}</thead>
<tbody>
{chr(10).join(body_rows)}
</tbody>
</table></div>"""


def _row(row: LeaderboardRow, columns: list[str], versus: Versus | None, root: Path | None) -> str:
    esc = html.escape
    classes, badges = _marks(row)
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
    for (label, _, shown, _), (value, text, kind) in zip(_TAIL, tail, strict=True):
        cls = " ".join(c for c in ("text" if kind == "text" else "", "" if shown else "minor") if c)
        attrs = (f' class="{cls}"' if cls else "") + f' data-label="{esc(label)}"'
        attrs += f' data-value="{value}"' if value is not None else ""
        cells.append(f"<td{attrs}>{text}</td>")
    return f'<tr id="{row_id(row)}" class="{" ".join(classes)}">' + "".join(cells) + "</tr>"


def row_id(row: LeaderboardRow) -> str:
    """The row's anchor on its dataset's page, which the overview links to."""
    return f"row-{slug(row.split)}-{slug(row.config_hash)}"


def _marks(row: LeaderboardRow) -> tuple[list[str], str]:
    """The row's classes and badges for a sample and an LLM at query time."""
    classes, badges = [], ""
    if row.sample:
        classes.append("sample")
        badges += f'<span class="badge sample" title="seeded sample of the split">{row.sample:.0%} sample</span>'
    if row.regime == "llm-at-query-time":
        classes.append("llm")
        badges += '<span class="badge llm" title="an LLM runs at query time">LLM</span>'
    return classes, badges


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
    # the plot opens on the metric the table is sorted by, so that both show the same ranking
    options = "".join(
        f'<option value="{esc(m)}"{" selected" if i == 0 else ""}>{esc(m)}</option>' for i, m in enumerate(columns)
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
<svg viewBox="0 0 760 340" role="img" aria-label="metric against latency, {esc(split)}"></svg>
<noscript><p>The plot needs JavaScript; the table below has every number.</p></noscript>
<figcaption>Each point is a row: higher is better, further left is faster. Orange: an LLM at query time;
hollow: evaluated on a sample; grey: flagged.</figcaption>
</figure>
{tables}
</section>"""


#: how many of a split's best rows the overview shows
TOP = 5


def index_page(by_dataset: dict[str, list[LeaderboardRow]], metrics: list[str] | None) -> str:
    """The overview: per dataset and split, a small table of its best rows by the first metric
    (flagged rows left out: they never rank), each linking to its row on the dataset's page."""
    esc = html.escape
    datasets = sorted(by_dataset)
    sections = []
    for dataset in datasets:
        parts = [f'<h2><a href="{esc(page_name(dataset))}">{esc(dataset)}</a></h2>']
        for split, rows in splits(by_dataset[dataset]):
            columns = metric_columns(rows, metrics)
            best = [r for r in ranked(rows, columns) if not flags_of(r)]
            count = min(len(best), TOP)
            link = f"{esc(page_name(dataset))}#split-{esc(slug(split))}"
            more = f'; <a href="{link}">all {len(rows)}</a>' if len(rows) > count else ""
            by = esc(columns[0]) if columns else "name"
            parts.append(
                f'<h3><a href="{link}">{esc(split)}</a> <span class="dim">best {count} of {_rows(len(rows))} by '
                f"{by}{more}</span></h3>"
            )
            none = '<p class="note">every row is flagged: none ranked</p>'
            parts.append(_best_table(dataset, split, best[:TOP], columns) if best else none)
        sections.append(f'<section class="dataset">\n{chr(10).join(parts)}\n</section>')
    body = f"""<p class="note">Retrieval on semi-structured knowledge bases. One page per dataset; every row links a
configuration to its per-query results in the leaderboard repository.</p>
{chr(10).join(sections)}"""
    return _page("stark-harness leaderboard", _nav(datasets, None), body, [])


def _best_table(dataset: str, split: str, rows: list[LeaderboardRow], columns: list[str]) -> str:
    """A split's best rows: rank, name, its first three metrics and p50 latency (the page's
    script drops the later metrics and latency first when the table is wider than the screen)."""
    esc = html.escape
    shown = columns[:3]
    cells = [("#", "number", True, 0), ("retriever", "text", True, 0)]
    cells += [(m, "number", True, 3 - i if i else 0) for i, m in enumerate(shown)] + [("p50 ms", "number", True, 3)]
    body = []
    for rank, row in enumerate(rows, 1):
        classes, badges = _marks(row)
        name = display_name(row)
        link = f"{esc(page_name(dataset))}#{row_id(row)}"
        tds = [
            f'<td data-label="#" data-value="{rank}">{rank}</td>',
            f'<td class="name" data-label="retriever" data-value="{esc(name)}"><a class="retriever" href="{link}">'
            f"{esc(name)}</a>{badges}</td>",
        ]
        for m in shown:
            value = row.metrics.get(m)
            text = "–" if value is None else seeded_text(row, m) or f"{100 * value:.2f}"
            raw = "" if value is None else repr(value)
            tds.append(f'<td data-label="{esc(m)}" data-value="{raw}">{esc(text)}</td>')
        tds.append(f'<td data-label="p50 ms" data-value="{row.latency.p50_ms!r}">{row.latency.p50_ms:.2f}</td>')
        body.append(f'<tr class="{" ".join(classes)}">{"".join(tds)}</tr>')
    return f"""<div class="scroll"><table class="board summary" data-split="{esc(split)}">
<thead>{_head(cells, shown, shown[0] if shown else None)}</thead>
<tbody>
{chr(10).join(body)}
</tbody>
</table></div>"""
