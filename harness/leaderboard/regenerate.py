"""Reproducing every row of a leaderboard (``harness leaderboard regenerate``), one at a time,
each as :func:`harness.leaderboard.reproduce.reproduce` re-runs it (a row over seeds, every seed).

The new run directories land in a scratch directory outside the leaderboard; what matches goes
back into the curated board with ``harness leaderboard merge <out> --into leaderboard``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.leaderboard.reproduce import Reproduction, load_row, reproduce
from harness.leaderboard.rows import LeaderboardRow
from harness.plugins import PluginManager, get_plugin_manager
from harness.run.secrets import redact


@dataclass
class Regenerated:
    """One row of a regeneration: its reproduction, or why it could not run."""

    file: Path
    row: LeaderboardRow | None
    reproduction: Reproduction | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.reproduction is not None and self.reproduction.ok


def regenerate(
    leaderboard: str | Path,
    out: str | Path,
    *,
    regimes: Sequence[str] = (),
    retrievers: Sequence[str] = (),
    plugins: PluginManager | None = None,
    **options: Any,
) -> Iterator[Regenerated]:
    """Reproduce every row under ``leaderboard/rows`` (only those of ``regimes`` and
    ``retrievers``, when given) into the scratch runs directory ``out``, one at a time, each as it
    completes; a row that cannot run is reported, and the next one runs. ``options``: those of
    :func:`reproduce` (``data_dir``, ``tolerance``, ``device``, ``cache_dir``, ``progress``)."""
    root = Path(leaderboard)
    if not (root / "rows").is_dir():
        raise HarnessError(f"{root}: not a leaderboard (no rows/ directory)")
    if root.resolve() in [Path(out).resolve(), *Path(out).resolve().parents]:
        raise HarnessError(f"--out {out} is inside the leaderboard {root}: give a scratch directory outside it")
    plugins = plugins or get_plugin_manager()
    for file in sorted((root / "rows").rglob("*.json")):
        try:
            source = load_row(file)
        except HarnessError as exc:
            yield Regenerated(file, None, error=str(exc))
            continue
        row = source.row
        if (regimes and row.regime not in regimes) or (retrievers and row.retriever.name not in retrievers):
            continue
        try:
            done = reproduce(source, out, plugins=plugins, **options)
        except Exception as exc:  # a plugin's own error too (a server down): this row's, not the others'
            message = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
            yield Regenerated(file, row, error=redact(message))
            continue
        yield Regenerated(file, row, done)
