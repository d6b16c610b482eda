"""Publishing the leaderboard: Markdown tables and a static HTML site.

``publish(leaderboard_dir, out)`` writes::

    index.html            the datasets, their splits and the best row of each
    <dataset>.html        one page per dataset: per split a sortable table and a
                          metric-vs-latency scatter plot (metric chosen on the page)
    LEADERBOARD.md        every dataset/split as a Markdown table, for READMEs and PRs
    markdown/<dataset>-<split>.md

The pages embed their rows, style and script: no server, no network, they open from
``file://``. Rows evaluated on a sample of the split, or that run an LLM at query time, are
marked in every view.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import tempfile
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.io import atomic_write, clean_stale, replace_dir, temp_prefix
from harness.leaderboard.rows import LeaderboardRow, read_rows, run_dir_of

TEXT_COLUMNS = {"retriever", "regime", "LLM", "date", "harness"}
MARKER = ".harness-site"  # marks a directory publish may replace
SAMPLE_MARK, LLM_MARK = "†", "‡"
FOOTNOTE = (
    f"{SAMPLE_MARK} evaluated on a seeded random sample of the split (cheaper, noisier); "
    f"{LLM_MARK} an LLM runs at query time (cost and latency per query). Metrics ×100."
)


def publish(source: str | Path, out: str | Path, metrics: list[str] | None = None) -> list[Path]:
    """Render the rows of the leaderboard at ``source`` into ``out``; return the files written.

    The site is built beside ``out`` and swapped in at once. ``out`` may only be replaced if
    it is empty or an earlier site."""
    rows = read_rows(Path(source))
    if not rows:
        raise HarnessError(f"{source}: the leaderboard has no rows to publish")
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise HarnessError(f"refusing to replace {out}: it is not empty and not a site written by publish")
    by_dataset: dict[str, list[LeaderboardRow]] = defaultdict(list)
    for row in rows:
        by_dataset[row.dataset.name].append(row)
    datasets = sorted(by_dataset)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=temp_prefix(out), suffix=".tmp"))
    try:
        files: dict[str, str] = {MARKER: "written by `harness leaderboard publish`; replaced on the next publish\n"}
        sections = []
        versus: dict[str, float | str] = {}
        for dataset in datasets:
            for _, split_rows in _splits(by_dataset[dataset]):
                versus.update(versus_best(split_rows, metric_columns(split_rows, metrics), Path(source)))
        for dataset in datasets:
            files[f"{page_name(dataset)}"] = dataset_page(dataset, by_dataset[dataset], datasets, metrics, versus)
            for split, split_rows in _splits(by_dataset[dataset]):
                table = markdown_section(dataset, split, split_rows, metrics, versus)
                files[f"markdown/{_slug(dataset)}-{_slug(split)}.md"] = table
                sections.append(table)
        files["LEADERBOARD.md"] = "# Leaderboard\n\n" + "\n".join(sections)
        files["index.html"] = index_page(by_dataset, metrics)
        for name, text in files.items():
            with atomic_write(staging / name) as handle:
                handle.write(text)
        staging.chmod(0o755)
        replace_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out / name for name in files]


# -- what a row shows ------------------------------------------------------------------------
def metric_columns(rows: list[LeaderboardRow], metrics: list[str] | None) -> list[str]:
    if metrics:
        return metrics
    found: list[str] = []
    for row in rows:
        found.extend(m for m in row.metrics if m not in found)
    return found


def llm_of(row: LeaderboardRow) -> str | None:
    """The LLM a row used at query time, if any."""
    for info in (row.retriever, row.first_stage, *row.uses):
        if info is not None and isinstance(info.params.get("llm"), str):
            return info.params["llm"]
    value = row.usage.get("llm")
    return value if isinstance(value, str) else None


def cost_of(row: LeaderboardRow) -> float | None:
    """API cost in USD over the run; None when nothing was priced."""
    costs = [v for k, v in row.usage.items() if k.endswith("cost_usd") and isinstance(v, int | float)]
    return float(sum(costs)) if costs else None


def _record(row: LeaderboardRow) -> dict[str, Any]:
    """The row as the page's script sees it."""
    return {
        "split": row.split,
        "retriever": display_name(row),
        "metrics": row.metrics,
        "p50_ms": row.latency.p50_ms,
        "p95_ms": row.latency.p95_ms,
        "sample": row.sample,
        "llm_at_query_time": row.regime == "llm-at-query-time",
    }


def versus_best(rows: list[LeaderboardRow], metrics: list[str], root: Path) -> dict[str, float | str]:
    """For one dataset/split: each row's paired randomization p-value against the best row on
    the first metric (queries both evaluated), by config hash; ``"best"`` for the best row.
    Rows whose per-query results are not at hand are left out."""
    if not metrics:
        return {}
    from harness.analysis.compare import load_per_query, paired_test

    ranked = _ranked(rows, metrics)
    best = next((r for r in ranked if not r.sample), ranked[0])
    found = {}
    for row in rows:
        directory = run_dir_of(root, row.run_dir)
        if directory is not None and (directory / "per_query.jsonl").is_file():
            found[row.config_hash] = load_per_query(directory)
    if best.config_hash not in found:
        return {}
    result: dict[str, float | str] = {best.config_hash: "best"}
    reference = found[best.config_hash]
    for row in rows:
        values = found.get(row.config_hash)
        if row is best or values is None:
            continue
        shared = sorted(set(values) & set(reference))
        if len(shared) < 2 or any(metrics[0] not in values[q] or metrics[0] not in reference[q] for q in shared):
            continue
        a = np.array([reference[q][metrics[0]] for q in shared])
        b = np.array([values[q][metrics[0]] for q in shared])
        result[row.config_hash] = paired_test(a, b, resamples=10_000, seed=0)["p_randomization"]
    return result


def _versus_text(value: float | str | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    return f"{value:.3f}" + ("*" if value < 0.05 else "")


def display_name(row: LeaderboardRow) -> str:
    return row.retriever.name + (f" > {row.first_stage.name}" if row.first_stage else "")


def _splits(rows: list[LeaderboardRow]) -> list[tuple[str, list[LeaderboardRow]]]:
    order = {"test": 0, "val": 1, "human_generated_eval": 2, "train": 3}
    grouped: dict[str, list[LeaderboardRow]] = defaultdict(list)
    for row in rows:
        grouped[row.split].append(row)
    return sorted(grouped.items(), key=lambda item: (order.get(item[0], 9), item[0]))


def _ranked(rows: list[LeaderboardRow], metrics: list[str]) -> list[LeaderboardRow]:
    first = metrics[0] if metrics else ""
    return sorted(rows, key=lambda r: (-r.metrics.get(first, float("-inf")), display_name(r)))


def _cost_text(row: LeaderboardRow) -> str:
    cost = cost_of(row)
    return "–" if cost is None else f"${cost:.2f}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def page_name(dataset: str) -> str:
    return f"{_slug(dataset)}.html"


# -- Markdown ----------------------------------------------------------------------------------
def markdown_section(
    dataset: str,
    split: str,
    rows: list[LeaderboardRow],
    metrics: list[str] | None,
    versus: dict[str, float | str] | None = None,
) -> str:
    columns = metric_columns(rows, metrics)
    versus = versus or {}
    header = ["retriever", "queries", *columns, "p vs best", "p50 ms", "p95 ms", "regime", "LLM", "cost", "date"]
    header.append("harness")
    lines = [
        f"## {dataset} — {split}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":--" if name in TEXT_COLUMNS else "--:" for name in header) + "|",
    ]
    for row in _ranked(rows, columns):
        marks = (SAMPLE_MARK if row.sample else "") + (LLM_MARK if row.regime == "llm-at-query-time" else "")
        queries = f"{row.num_queries}" + (f" ({row.sample:.0%})" if row.sample else "")
        cells = [
            display_name(row).replace("|", "\\|") + (f" {marks}" if marks else ""),
            queries,
            *(f"{100 * row.metrics[m]:.2f}" if m in row.metrics else "–" for m in columns),
            _versus_text(versus.get(row.config_hash)),
            f"{row.latency.p50_ms:.2f}",
            f"{row.latency.p95_ms:.2f}",
            row.regime,
            llm_of(row) or "–",
            _cost_text(row),
            row.timestamp.date().isoformat(),
            row.versions.harness,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n{FOOTNOTE} {_versus_note(columns)}\n"


# -- HTML --------------------------------------------------------------------------------------
def _versus_note(columns: list[str]) -> str:
    if not columns:
        return ""
    return (
        f"p vs best: paired randomization test of each row's per-query {columns[0]} against the best "
        "full-split row's, on the queries both evaluated (* p < 0.05)."
    )


def _asset(name: str) -> str:
    return resources.files("harness.leaderboard").joinpath("web", name).read_text(encoding="utf-8")


def _page(title: str, nav: str, body: str, data: list[dict[str, Any]]) -> str:
    from harness import __version__

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
    for split, split_rows in _splits(rows):
        columns = metric_columns(split_rows, metrics)
        sections.append(_split_section(split, split_rows, columns, versus or {}))
    body = "\n".join(sections)
    return _page(f"{dataset} leaderboard", _nav(datasets, dataset), body, [_record(r) for r in rows])


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
    for row in _ranked(rows, columns):
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
        cells.append(f'<td data-value="{sort_value}">{esc(_versus_text(against))}</td>')
        cells += [
            f'<td data-value="{row.latency.p50_ms!r}">{row.latency.p50_ms:.2f}</td>',
            f'<td data-value="{row.latency.p95_ms!r}">{row.latency.p95_ms:.2f}</td>',
            f'<td class="text">{esc(row.regime)}</td>',
            f'<td class="text">{esc(llm_of(row) or "–")}</td>',
            f'<td data-value="{"" if cost is None else repr(cost)}">{esc(_cost_text(row))}</td>',
            f'<td class="text" data-value="{row.timestamp.isoformat()}">{row.timestamp.date().isoformat()}</td>',
            f'<td class="text">{esc(row.versions.harness)}</td>',
        ]
        body_rows.append(f'<tr class="{" ".join(classes)}">' + "".join(cells) + "</tr>")
    queries = max(r.num_queries for r in rows if not r.sample) if any(not r.sample for r in rows) else None
    note = f"{queries} queries; " if queries else ""
    return f"""<section id="split-{esc(_slug(split))}">
<h2>{esc(split)}</h2>
<p class="note">{note}{len(rows)} rows, best first by {esc(columns[0]) if columns else "name"}.
{esc(_versus_note(columns))}</p>
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
        splits = []
        for split, rows in _splits(by_dataset[dataset]):
            columns = metric_columns(rows, metrics)
            best = _ranked(rows, columns)[0]
            lead = (
                f"{esc(columns[0])} {100 * best.metrics[columns[0]]:.2f}"
                if columns and columns[0] in best.metrics
                else ""
            )
            splits.append(
                f'<a href="{esc(page_name(dataset))}#split-{esc(_slug(split))}">{esc(split)}</a> '
                f'<span class="dim">({len(rows)} rows; best: {esc(display_name(best))} {lead})</span>'
            )
        items.append(
            f'<li><a href="{esc(page_name(dataset))}"><strong>{esc(dataset)}</strong></a> — '
            + "; ".join(splits)
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
