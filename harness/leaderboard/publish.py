"""Publishing the leaderboard: Markdown tables and a static HTML site.

``publish(leaderboard_dir, out)`` writes::

    index.html            the datasets, their splits and the best rows of each (top 5, flagged rows apart)
    <dataset>.html        one page per dataset: per split a sortable table and a
                          metric-vs-latency scatter plot (metric chosen on the page)
    LEADERBOARD.md        every dataset/split as a Markdown table, for READMEs and PRs
    markdown/<dataset>-<split>.md

The pages embed their rows, style and script: no server, no network, they open from
``file://``. Rows evaluated on a sample of the split, or that run an LLM at query time, are
marked in every view; so are rows whose distinguishing component never ran (their health
flags), listed apart below the ranked rows. Each row on the site carries its evidence (its
configuration, training, seeds, health counters, tests and the command that reproduces it)
in a ``<details>``; every metric cell is tested against its column's best row, Holm-adjusted.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from harness.errors import HarnessError
from harness.io import atomic_write, clean_stale, replace_dir, temp_prefix
from harness.leaderboard.rows import FLAG_MARK, LeaderboardRow, flag_notes, flags_of, metric_text, read_rows
from harness.leaderboard.site import dataset_page, index_page
from harness.leaderboard.views import (
    FOOTNOTE,
    LLM_MARK,
    SAMPLE_MARK,
    TEXT_COLUMNS,
    Versus,
    cost_text,
    display_name,
    llm_of,
    metric_columns,
    page_name,
    ranked,
    seeded_text,
    slug,
    splits,
    versus_best,
    versus_note,
    versus_text,
)

__all__ = ["display_name", "markdown_section", "publish"]

MARKER = ".harness-site"  # marks a directory publish may replace


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
        for dataset in datasets:
            versus = {
                split: versus_best(split_rows, metric_columns(split_rows, metrics), Path(source))
                for split, split_rows in splits(by_dataset[dataset])
            }
            page = dataset_page(dataset, by_dataset[dataset], datasets, metrics, versus, Path(source))
            files[f"{page_name(dataset)}"] = page
            for split, split_rows in splits(by_dataset[dataset]):
                table = markdown_section(dataset, split, split_rows, metrics, versus[split])
                files[f"markdown/{slug(dataset)}-{slug(split)}.md"] = table
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


def markdown_section(
    dataset: str,
    split: str,
    rows: list[LeaderboardRow],
    metrics: list[str] | None,
    versus: Versus | None = None,
) -> str:
    """A split's Markdown table. "p vs best" stays the unadjusted p of the first metric, as
    `harness compare` gives it for the pair (the site adjusts for its many tests); a flagged row
    is listed after the ranked ones, marked ⚑, its reason below the table."""
    columns = metric_columns(rows, metrics)
    header = ["retriever", "queries", *columns, "p vs best", "p50 ms", "p95 ms", "regime", "LLM", "cost", "date"]
    header.append("harness")
    lines = [
        f"## {dataset} — {split}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":--" if name in TEXT_COLUMNS else "--:" for name in header) + "|",
    ]
    order = ranked(rows, columns)
    for row in [r for r in order if not flags_of(r)] + [r for r in order if flags_of(r)]:
        marks = (SAMPLE_MARK if row.sample else "") + (LLM_MARK if row.regime == "llm-at-query-time" else "")
        marks += FLAG_MARK if flags_of(row) else ""
        queries = f"{row.num_queries}" + (f" ({row.sample:.0%})" if row.sample else "")
        cells = [
            display_name(row).replace("|", "\\|") + (f" {marks}" if marks else ""),
            queries,
            *(seeded_text(row, m) or metric_text(row, m) for m in columns),
            versus_text(versus.first(row.config_hash) if versus else None),
            f"{row.latency.p50_ms:.2f}",
            f"{row.latency.p95_ms:.2f}",
            row.regime,
            llm_of(row) or "–",
            cost_text(row),
            row.timestamp.date().isoformat(),
            row.versions.harness,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    flags = "".join(f"\n{note}\n" for note in flag_notes(rows))
    return "\n".join(lines) + f"\n\n{FOOTNOTE} {versus_note(columns)}\n" + flags


def refresh_readme(readme: str | Path, site: str | Path) -> list[str]:
    """Put the published Markdown tables (``site/markdown/<dataset>-<split>.md``) into ``readme``
    between ``<!-- results:<dataset>-<split> -->`` and ``<!-- /results -->``; returns the blocks
    replaced. A README never drifts from the board: its tables are publish's own."""
    path = Path(readme)
    text = path.read_text(encoding="utf-8")
    replaced = []
    for table in sorted((Path(site) / "markdown").glob("*.md")):
        start, end = f"<!-- results:{table.stem} -->", "<!-- /results -->"
        if start not in text:
            continue
        head, rest = text.split(start, 1)
        if end not in rest:
            raise HarnessError(f"{path}: {start} has no {end} after it")
        # the table, and why a row of it is flagged (the lines that follow it with the mark)
        lines = [
            line
            for line in table.read_text(encoding="utf-8").splitlines()
            if line.startswith("|") or line.startswith(FLAG_MARK)
        ]
        body = "\n".join(lines).replace("|\n" + FLAG_MARK, "|\n\n" + FLAG_MARK, 1)
        text = head + start + "\n" + body + "\n" + end + rest.split(end, 1)[1]
        replaced.append(table.stem)
    with atomic_write(path) as out:
        out.write(text)
    return replaced
