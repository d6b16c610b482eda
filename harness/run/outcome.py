"""What a run returns: its row, where its files are, what it healed, how long each phase took."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.run.record import LeaderboardRow
from harness.run.resolve import RunSpec


@dataclass
class CheckResult:
    metric: str
    expected: float
    actual: float | None
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.actual is not None and abs(self.actual - self.expected) <= self.tolerance + 1e-12


@dataclass
class RunOutcome:
    spec: RunSpec
    row: LeaderboardRow
    run_dir: Path
    #: where the row was also written (``harness run --leaderboard DIR``), set by the caller
    row_path: Path | None
    resumed_queries: int
    checks: list[CheckResult] = field(default_factory=list)
    #: What the runner healed and the user should know (ids dropped from rankings, ...).
    notes: list[str] = field(default_factory=list)
    #: Seconds spent in each phase of this invocation: load (queries and SKB), build (fit and
    #: index, 0 when every query was already done), search, evaluate, write.
    phases: dict[str, float] = field(default_factory=dict)
    #: The row's ``index_build_seconds`` were measured by an earlier invocation on this run
    #: directory (this one resumed it, and built or loaded the index in ``phases["build"]``).
    built_earlier: bool = False


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``message`` says what was kept and how to resume."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
