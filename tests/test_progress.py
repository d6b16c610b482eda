"""What a run shows while it works: the CLI's live progress display on a terminal, driven by
the real runner (phases, a plugin's tasks, the search), and what it leaves behind."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console

import harness
from harness.cli import common
from harness.run.registry import Registry, RetrieverEntry
from harness.run.resolve import resolve
from harness.run.runner import Runner
from harness.testing import plugin_manager


class Spinning(harness.Retriever):
    """Builds as plugins do: a task with a total, then one without (a spinner)."""

    name = "spinning"

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        self.ids = skb.candidate_ids
        for _ in context.track(range(len(self.ids)), "spinning: read documents", len(self.ids)):
            pass
        with context.task("spinning: index", None):
            pass

    def search(self, queries: list[harness.Query], k: int) -> list[harness.Ranking]:
        scores = np.linspace(1, 0, len(self.ids))
        return [harness.Ranking(self.ids[:k], scores[:k]) for _ in queries]


class _Components:
    @harness.hookimpl
    def register_retrievers(self, register: Any) -> None:
        register(Spinning)


def _plain(screen: io.StringIO) -> str:
    """What the terminal shows, colours and cursor moves left out."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The CLI's stderr console as a 120-column terminal writing into a buffer."""
    screen = io.StringIO()
    monkeypatch.setattr(common.console, "_console", Console(file=screen, force_terminal=True, width=120))
    return screen


def test_a_run_shows_its_phases_and_leaves_no_spinner_behind(terminal: io.StringIO, tmp_path: Path) -> None:
    manager = plugin_manager(_Components())
    registry = Registry(retrievers={"spinning": RetrieverEntry(plugin="spinning")})
    spec = resolve(registry, manager, "spinning", "tiny", "test", 3, ["hit@1"])
    seen: list[str] = []
    with common.progress() as tasks:
        phase = tasks.phase

        def watched(description: str, total: int | None = None) -> Any:
            seen.append(description)
            return phase(description, total)

        tasks.phase = watched
        runner = Runner(manager, output_dir=tmp_path / "runs", cache_dir=tmp_path / "cache", progress=tasks)
        runner.run(spec)
        # every task ended with its phase: nothing left to spin on after the run
        assert tasks.display.tasks == [] and tasks.open == []
    assert seen == [
        "load tiny",
        "index spinning: build or load",
        "search spinning",
        "evaluate 6 queries",
        "write the run files",
    ]
    screen = _plain(terminal)
    # a line for each piece of work, with its count and time; none for the status lines
    assert "✓ spinning: read documents 5/5" in screen
    assert "✓ spinning: index" in screen
    assert "✓ search spinning 6/6" in screen
    assert "✓ loading" not in screen


def test_a_task_with_a_total_shows_its_count_and_time_left(terminal: io.StringIO) -> None:
    with common.progress() as tasks:
        task = tasks("encode documents", 10)
        task.advance(3)
        tasks.display.refresh()
        shown = _plain(terminal)
        assert "3/10" in shown and "eta " in shown
        # the next task ends an open spinner before it; a finished bar leaves the display
        spinner = tasks("index", None)
        task.advance(7)
        tasks("write", None)
        assert spinner.ended and task.ended and [t.description for t in tasks.display.tasks] == ["write"]
    assert "✓ encode documents 10/10" in _plain(terminal) and "✓ index" in _plain(terminal)


LONG = "bm25: read + analyze documents, a description longer than any terminal is wide, " * 2


@pytest.mark.parametrize("width", [60, 80])
def test_a_narrow_terminal_cuts_the_description_never_a_number(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(common.console, "_console", Console(file=screen, force_terminal=True, width=width))
    with common.progress() as tasks, tasks.phase("index bm25-with-a-rather-long-name: build or load"):
        task = tasks(LONG, 234_567)
        task.advance(1)
        time.sleep(0.05)  # two samples apart: the speed, and so the time left, is known
        task.advance(123_455)
        # the display itself, as the live view draws it on a terminal this wide
        drawn = Console(file=io.StringIO(), force_terminal=True, width=width, record=True)
        drawn.print(tasks.display.get_renderable())
        lines = drawn.export_text().splitlines()
        assert len(lines) == 2 and all(cell_len(line) <= width for line in lines), lines
        assert lines[0][2:].startswith("index bm25") and "…" in lines[0]
        bar = lines[1]
        assert bar[2:].startswith("bm25: read") and "…" in bar and "━" in bar
        assert re.search(r" 123,456/234,567 \d+:\d\d:\d\d eta \d+:\d\d:\d\d$", bar), bar
        task.advance(234_567 - 123_456)
    # the line a finished task leaves is one line too, the count in full
    shown = _plain(screen)
    done = shown[shown.index("✓") :].split("\n")[0]
    assert cell_len(done) <= width and done.startswith("✓ bm25: read") and " 234,567/234,567 " in done, done


def test_a_failed_phase_ends_its_tasks_without_a_done_line(terminal: io.StringIO) -> None:
    with common.progress() as tasks:
        with pytest.raises(RuntimeError), tasks.phase("building"):
            tasks("half done", 10).advance(5)
            raise RuntimeError("boom")
        assert tasks.display.tasks == []
    assert "✓" not in _plain(terminal)


def test_no_progress_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    monkeypatch.setattr(common.console, "_console", Console(file=screen, force_terminal=False))
    with common.progress() as tasks, tasks.phase("loading"):
        tasks("work", 2).advance(2)
    assert screen.getvalue() == ""
