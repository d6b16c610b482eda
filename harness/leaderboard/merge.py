"""Changing the curated leaderboard: merging validated submissions in, withdrawing rows.

Every change is all or nothing, under the lock every writer of the leaderboard takes: the new
leaderboard is built beside the old one and swapped in at once, with a ``CHANGELOG.md`` entry.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from harness.errors import HarnessError
from harness.io import atomic_write, clean_stale, exclusive, leaderboard_lock, replace_dir, temp_prefix, write_json
from harness.leaderboard.bundles import RunEntry, collect, run_members, sha256
from harness.leaderboard.rows import LeaderboardRow, json_schema, read_rows, row_path, write_merged
from harness.leaderboard.validate import Validation, data_conflicts, summarize_failures, validate
from harness.run.secrets import redact


@dataclass
class MergeAction:
    kind: Literal["added", "replaced", "superseded"]
    row: LeaderboardRow
    source: str
    old: LeaderboardRow | None = None

    def describe(self, metrics: int = 4) -> str:
        row = self.row
        head = f"{self.kind} `{row.dataset.name}/{row.split}` **{row.retriever.name}** (`{row.config_hash}`)"
        shown = list(row.metrics)[:metrics]
        if self.old is None:
            return head + ": " + ", ".join(f"{m} {100 * row.metrics[m]:.2f}" for m in shown)
        how = "same configuration" if self.kind == "replaced" else f"was `{self.old.config_hash}`"
        dates = f"{self.old.timestamp:%Y-%m-%d} → {row.timestamp:%Y-%m-%d}"
        apart = incomparable(self.old, row)
        if apart:  # no arrow between numbers of different data: they would read as a change
            scores = ", ".join(f"{m} {100 * row.metrics[m]:.2f}" for m in shown)
            return f"{head}, {how} ({', '.join(apart)}; scores not comparable): {scores} (run of {dates})"
        if self.old.metrics == row.metrics:
            changes = "metrics unchanged"
        else:
            changes = ", ".join(
                f"{m} {100 * self.old.metrics[m]:.2f} → {100 * row.metrics[m]:.2f}" if m in self.old.metrics else m
                for m in shown
            )
        return f"{head}, {how}: {changes} (run of {dates})"


def incomparable(old: LeaderboardRow, new: LeaderboardRow) -> list[str]:
    """Why ``old``'s scores cannot be compared with ``new``'s (empty when they can): another version of
    the dataset, another SKB or query set, another sample of it, or other metric definitions."""
    apart = []
    if old.dataset.version != new.dataset.version:
        apart.append(f"dataset {old.dataset.version} → {new.dataset.version}")
    if old.dataset_fingerprint != new.dataset_fingerprint:
        apart.append("another SKB")
    if None not in (old.queries_digest, new.queries_digest) and old.queries_digest != new.queries_digest:
        apart.append("another query set")
    if old.sample != new.sample:
        apart.append("another sample of the queries")
    if old.versions.metrics != new.versions.metrics:
        apart.append(f"metric definitions {old.versions.metrics} → {new.versions.metrics}")
    return apart


def merge(
    paths: Sequence[str | Path],
    into: str | Path,
    data_dir: str | None = None,
    supersede: bool = False,
    allow_stale: bool = False,
) -> list[MergeAction]:
    """Validate the submissions in ``paths`` and add their rows to the leaderboard ``into``.

    A row whose configuration is already there replaces it; another configuration under the
    same name (same dataset and split) is refused unless ``supersede``. Rows of one dataset and
    split must have evaluated the same SKB and query set (:func:`data_conflicts`): a new version
    of a dataset under the same name comes in by superseding every row of it at once. A row whose
    configuration does not recompute from the code installed here (stale) is refused unless
    ``allow_stale``. All or nothing: the
    new leaderboard is built beside the old one and swapped in at once, with a changelog entry.
    """
    into = Path(into)
    with locked(into), tempfile.TemporaryDirectory() as work:
        existing = read_rows(into) if (into / "rows").is_dir() else []
        collected = [(Path(path), collect(path, Path(work) / str(i))) for i, path in enumerate(paths)]
        entries = [e for _, found in collected for e in found]
        if not entries:
            raise HarnessError("merge: the submissions hold no runs")
        results = validate(entries, data_dir)
        if not all(r.ok for r in results):
            failed = sum(not r.ok for r in results)
            raise HarnessError(
                f"merge refused: {failed} of {len(results)} runs do not validate; {into} is unchanged\n"
                + summarize_failures(results)
            )
        stale = [r for r in results if r.stale]
        if stale and not allow_stale:
            raise HarnessError(
                f"merge refused: {len(stale)} of {len(results)} runs do not recompute from the code installed here "
                f"(stale; re-run them, or --allow-stale); {into} is unchanged\n"
                + "\n".join(f"  {r.source}: {'; '.join(r.stale)}" for r in stale)
            )
        actions = _plan(results, existing, supersede)
        directories = {r.source: e.directory for r, e in zip(results, entries, strict=True)}
        with staged(into) as staging:
            for action in actions:
                directory = directories[action.source]
                assert directory is not None
                _apply(staging, action, directory)
            write_merged(staging)
            write_json(staging / "schema.json", json_schema())
            _write_changelog(staging, actions, _sources(collected, results))
    return actions


@contextmanager
def locked(into: Path) -> Iterator[None]:
    """The lock every writer of the leaderboard ``into`` holds."""
    into.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(leaderboard_lock(into), f"waiting for another writer of {into}"):
        yield


@contextmanager
def staged(into: Path) -> Iterator[Path]:
    """A copy of the leaderboard ``into`` to change; swapped in at once when the block ends
    without an error, else discarded (``into`` unchanged). Hold :func:`locked` around it."""
    clean_stale(into)
    staging = Path(tempfile.mkdtemp(dir=into.parent, prefix=temp_prefix(into), suffix=".merge"))
    try:
        if into.exists():
            shutil.copytree(into, staging, dirs_exist_ok=True)
        yield staging
        replace_dir(staging, into)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _plan(results: Sequence[Validation], existing: Sequence[LeaderboardRow], supersede: bool) -> list[MergeAction]:
    by_key = {(r.dataset.name, r.split, r.retriever.name): r for r in existing}
    actions, conflicts = [], []
    for result in results:
        row = result.row
        assert row is not None
        old = by_key.get((row.dataset.name, row.split, row.retriever.name))
        if old is None:
            actions.append(MergeAction("added", row, result.source))
        elif old.config_hash == row.config_hash:
            actions.append(MergeAction("replaced", row, result.source, old))
        elif supersede:
            actions.append(MergeAction("superseded", row, result.source, old))
        else:
            changed = _config_difference(old, row)
            conflicts.append(
                f"  {result.source}: {row.dataset.name}/{row.split} already has {row.retriever.name!r} with "
                f"another configuration ({old.config_hash} vs {row.config_hash}: {changed}); give the new one "
                "another registry name, or pass --supersede to replace it"
            )
    if conflicts:
        raise HarnessError(
            "merge refused: conflicting duplicates; the leaderboard is unchanged\n" + "\n".join(conflicts)
        )
    # the leaderboard as it would be: the rows that stay first, so that they are what differs
    replaced = {a.old.config_hash for a in actions if a.old is not None}
    after = [(f"the leaderboard's {r.retriever.name}", r) for r in existing if r.config_hash not in replaced]
    mixed = data_conflicts(after + [(a.source, a.row) for a in actions])
    if mixed:
        raise HarnessError(
            "merge refused: rows of different data under one dataset and split; the leaderboard is unchanged\n"
            + "\n".join(f"  {source}: {problem}" for source, problem in mixed)
        )
    return actions


def _config_difference(old: LeaderboardRow, new: LeaderboardRow) -> str:
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    keys = ("retriever", "uses", "dataset", "dataset_fingerprint", "k", "sample")
    changed = []
    for key in keys:
        if a[key] != b[key]:
            if isinstance(a[key], dict) and isinstance(b[key], dict):
                inner = sorted(k for k in a[key].keys() | b[key].keys() if a[key].get(k) != b[key].get(k))
                changed.append(f"{key}.{'/'.join(inner)}")
            else:
                changed.append(key)
    if a["versions"]["metrics"] != b["versions"]["metrics"]:
        changed.append("metric definitions")
    return ", ".join(changed) or "the evaluated queries"


def remove_run_dir(root: Path, row: LeaderboardRow) -> None:
    """Delete ``row``'s per-query results, if they are inside the leaderboard ``root``."""
    if row.run_dir and not Path(row.run_dir).is_absolute():
        run = (root / row.run_dir).resolve()
        if root.resolve() in run.parents:
            shutil.rmtree(run, ignore_errors=True)


def _apply(root: Path, action: MergeAction, source: Path) -> None:
    if action.old is not None:
        row_path(root, action.old).unlink(missing_ok=True)
        remove_run_dir(root, action.old)
    target_row = row_path(root, action.row)
    run_dir = Path("runs") / action.row.dataset.name / action.row.split / target_row.stem
    destination = root / run_dir
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    # everything the run ships (a sample's qrels, each seed's run) but its own row, rewritten below
    for name, path in run_members(source).items():
        if name == "row.json":
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("run.trec"):
            # mtime=0: the same run compresses to the same bytes, so git sees no change
            with path.open("rb") as src, gzip.GzipFile(target.with_name("run.trec.gz"), "wb", mtime=0) as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(path, target)
    row = action.row.model_copy(update={"run_dir": run_dir.as_posix()})
    write_json(target_row, row.model_dump(mode="json"))


CHANGELOG_TITLE = (
    "# Leaderboard changelog\n\nOne entry per `harness leaderboard merge`, `withdraw` or `migrate`, newest first.\n"
)
_OLD_TITLES = (
    "# Leaderboard changelog\n\nOne entry per `harness leaderboard merge`, newest first.\n",
    "# Leaderboard changelog\n\nOne entry per `harness leaderboard merge` or `withdraw`, newest first.\n",
)


def prepend_changelog(root: Path, entry: list[str]) -> None:
    path = root / "CHANGELOG.md"
    old = path.read_text(encoding="utf-8") if path.exists() else CHANGELOG_TITLE
    title = next((t for t in (CHANGELOG_TITLE, *_OLD_TITLES) if old.startswith(t)), None)
    body = old[len(title) :] if title else "\n" + old
    with atomic_write(path) as handle:  # published: a reason quoting a URL loses its credentials
        handle.write(CHANGELOG_TITLE + redact("\n".join(entry)) + "\n" + body)


def withdraw(
    into: str | Path, retriever: str, reason: str, dataset: str | None = None, split: str | None = None
) -> list[LeaderboardRow]:
    """Take the rows of ``retriever`` (optionally one dataset / split) off the leaderboard,
    with their per-query results, and say why in the changelog. All or nothing, under the lock
    every writer of the leaderboard takes."""
    into = Path(into)
    if not reason.strip():
        raise HarnessError("withdraw: give the reason (--reason), it goes into the changelog")
    with locked(into):
        rows = [
            r
            for r in (read_rows(into) if (into / "rows").is_dir() else [])
            if r.retriever.name == retriever and dataset in (None, r.dataset.name) and split in (None, r.split)
        ]
        if not rows:
            raise HarnessError(f"withdraw: {into} has no row of {retriever!r} matching that; nothing changed")
        with staged(into) as staging:
            for row in rows:
                row_path(staging, row).unlink(missing_ok=True)
                remove_run_dir(staging, row)
            write_merged(staging)
            entry = [f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {len(rows)} withdrawn", "", reason.strip(), ""]
            entry += [f"- withdrew {r.dataset.name}/{r.split} **{r.retriever.name}** `{r.config_hash}`" for r in rows]
            prepend_changelog(staging, entry)
    return rows


def _sources(collected: Sequence[tuple[Path, Sequence[RunEntry]]], results: Sequence[Validation]) -> list[str]:
    """Where a merge's rows came from, as the changelog names it: a bundle (or a row file) by its
    file name and digest, a run directory (a folder of them, another leaderboard) by the rows it
    held. Never a path: the changelog is published, and a maintainer's directories are not
    the leaderboard's."""
    names, start = [], 0
    for path, found in collected:
        held, start = results[start : start + len(found)], start + len(found)
        if path.is_file():
            names.append(f"`{path.name}` (sha256 {sha256(path)[:12]})")
        else:
            names += [f"`{row_name(r.row)}`" for r in held if r.row is not None]
    return names


def row_name(row: LeaderboardRow) -> str:
    """A row as the changelog and the reports name it: ``debian/test bm25 8f1e775b5bb8ef7b``."""
    return f"{row.dataset.name}/{row.split} {row.retriever.name} {row.config_hash}"


def _write_changelog(root: Path, actions: Sequence[MergeAction], sources: Sequence[str]) -> None:
    counts = ", ".join(f"{sum(a.kind == k for a in actions)} {k}" for k in ("added", "replaced", "superseded"))
    entry = [f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {counts}", "", f"From {', '.join(sources)}.", ""]
    entry += [f"- {a.describe()}" for a in actions]
    prepend_changelog(root, entry)
