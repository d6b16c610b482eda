"""What every benchmark here shares: runs alternated between the harness and its reference,
their min and median, ratios, goals, and timed child processes.

A benchmark script imports only the standard library and this module at its top, because it
is also what its child processes run (``python bench/x.py --child NAME ARGS``): a reference
timed in a child must not pay for importing the harness, and a cold harness run must pay for
everything a user's ``harness run`` pays. This module runs the harness CLI itself too
(``python bench/timing.py --harness run ...``), recording each run's ``RunOutcome.phases``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The runner's phases, in the order a run goes through them.
PHASES = ("load", "build", "search", "evaluate", "write")
#: What a harness CLI run is printed with: the phases, and the rest of the process ("other").
HARNESS_COLUMNS = ("other", *PHASES)
#: Variables that set how many threads OpenMP, BLAS and torch start with.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
#: How a child process says what it measured: one line on stdout, this prefix, then JSON.
RESULT = "bench-result: "
#: Where the harness CLI driver writes the phases of its runs.
PHASES_FILE = "BENCH_PHASES_FILE"


@dataclass
class Sample:
    """One timed run: the seconds compared, the phases behind them, and anything else measured."""

    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Series:
    """The samples of one side of a comparison."""

    label: str
    samples: list[Sample] = field(default_factory=list)
    #: A mark printed after its figures (e.g. "*" for a total extrapolated from some queries).
    mark: str = ""

    @property
    def seconds(self) -> list[float]:
        return [s.seconds for s in self.samples]

    @property
    def min(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def phase(self, name: str) -> float:
        """The median of one phase over the samples (0 where a sample lacks it)."""
        return statistics.median(s.phases.get(name, 0.0) for s in self.samples)

    def info(self, name: str) -> float:
        """The median of a number every sample recorded in ``info``."""
        return statistics.median(float(s.info[name]) for s in self.samples)


def alternate(runs: dict[str, Callable[[], Sample | float | None]], repeat: int) -> dict[str, Series]:
    """Run each callable ``repeat`` times, interleaved: in the given order in even rounds and
    reversed in odd ones, so that drift (another job, a warming disk) and order effects fall on
    both sides. A callable returning None is left out (its reference is not installed)."""
    series = {name: Series(name) for name in runs}
    order = list(runs)
    for round_ in range(repeat):
        for name in order if round_ % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            result = runs[name]()
            if result is None:
                continue
            sample = result if isinstance(result, Sample) else Sample(float(result))
            series[name].samples.append(sample)
            elapsed = time.perf_counter() - started
            print(f"  [{round_ + 1}/{repeat}] {name}: {sample.seconds:.2f} s ({elapsed:.1f} s wall)", file=sys.stderr)
    return {name: s for name, s in series.items() if s.samples}


# -- child processes --------------------------------------------------------------------------


def environment(threads: str = "default", cache: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment for a child: ``threads`` "default" leaves the thread count to
    the libraries, a number pins OpenMP/BLAS (and torch, which reads ``OMP_NUM_THREADS``) to it;
    ``cache`` is the harness cache (``HARNESS_CACHE``). The hub is never asked. Compiled
    bytecode is kept as a user's Python keeps it (``PYTHONDONTWRITEBYTECODE`` is dropped): the
    references are installed packages with their ``.pyc`` files, so sources compiled on every
    start would be a cost only the editable checkout pays."""
    dropped = (*THREAD_VARS, "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    if threads != "default":
        env.update(dict.fromkeys(THREAD_VARS, threads))
    if cache is not None:
        env["HARNESS_CACHE"] = str(cache)
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


def run_child(argv: Sequence[str], env: dict[str, str]) -> Sample:
    """Run ``python ARGV`` and time it from start to exit; the child's result line (see
    :func:`child_main`) gives the phases and info."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        error = done.stderr[done.stderr.rfind("Traceback") :] if "Traceback" in done.stderr else done.stderr
        raise RuntimeError(f"{' '.join(argv[:6])} exited {done.returncode}:\n{error[-4000:]}")
    payload: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        if line.startswith(RESULT):
            payload = json.loads(line[len(RESULT) :])
    return Sample(seconds, payload.pop("phases", {}), payload)


def child_main(functions: dict[str, Callable[..., dict[str, Any]]]) -> None:
    """In a child process (``--child NAME ARGS``): run ``functions[NAME](*ARGS)``, print its result
    with the peak memory added, and exit. Returns at once in the parent."""
    if sys.argv[1:2] != ["--child"]:
        return
    result = functions[sys.argv[2]](*sys.argv[3:])
    result["peak_mib"] = peak_mib()
    print(RESULT + json.dumps(result), flush=True)
    sys.exit(0)


def pin_torch() -> None:
    """In a child: make torch use the thread count the environment pins (torch reads
    ``OMP_NUM_THREADS`` too, but its inter-op pool does not)."""
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


class Clock:
    """Seconds per phase in a child: ``lap(name)`` charges the time since the previous lap."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._last
        self._last = now


def peak_mib() -> float:
    """This process's peak resident memory. On Linux from ``VmHWM``: ``ru_maxrss`` survives
    ``exec``, so a child would report at least its parent's size at the fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def harness_cli(args: Sequence[str], env: dict[str, str]) -> Sample:
    """``harness ARGS`` in a child process, timed end to end, with the phases of its run."""
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp:
        path = Path(tmp) / "phases.json"
        sample = run_child([__file__, "--harness", *args], {**env, PHASES_FILE: str(path)})
        runs = json.loads(path.read_text()) if path.exists() else []
    for phases in runs:
        for name, seconds in phases.items():
            sample.phases[name] = sample.phases.get(name, 0.0) + seconds
    if runs:  # interpreter start, imports, plugins, resolving the run: what no phase covers
        sample.phases["other"] = sample.seconds - sum(sample.phases[name] for name in PHASES)
    return sample


def _harness_driver() -> None:
    """``harness`` as its console script runs it, recording ``RunOutcome.phases``."""
    from harness.run.runner import Runner

    recorded: list[dict[str, float]] = []
    run = Runner.run

    def recording(self: Runner, spec: Any) -> Any:
        outcome = run(self, spec)
        recorded.append(dict(outcome.phases))
        return outcome

    Runner.run = recording  # type: ignore[method-assign]
    from harness.cli import main

    try:
        main(sys.argv[2:])
    finally:
        Path(os.environ[PHASES_FILE]).write_text(json.dumps(recorded))


class ColdWarm:
    """Runs that use the harness cache: each cold run gets an empty one, a warm run the one the
    latest cold run left (so a warm run needs a cold one before it, in any round)."""

    def __init__(self, parent: Path, run: Callable[[Path], Sample]) -> None:
        self.parent, self.run = parent, run
        self.cache: Path | None = None

    def cold(self) -> Sample:
        cache = fresh_dir(self.parent, "cache")
        sample = self.run(cache)
        self.close()
        self.cache = cache
        return sample

    def warm(self) -> Sample:
        assert self.cache is not None, "a cold run comes first"
        return self.run(self.cache)

    def close(self) -> None:
        if self.cache is not None:
            shutil.rmtree(self.cache, ignore_errors=True)
            self.cache = None


def of_phases(sample: Sample, phases: Iterable[str]) -> Sample:
    """``sample`` compared by the sum of some of its phases (the process's seconds kept in info)."""
    seconds = sum(sample.phases.get(name, 0.0) for name in phases)
    return Sample(seconds, sample.phases, {"process": sample.seconds, **sample.info})


# -- reporting --------------------------------------------------------------------------------


def table(series: Iterable[Series], phases: Sequence[str] = ()) -> None:
    """One line per series: runs, min, median, then the median of each phase named."""
    rows = list(series)
    width = max([len(s.label) for s in rows] + [10])
    head = f"{'':<{width}}  runs     min s  median s"
    if phases:
        head += "  | " + " ".join(f"{p:>9}" for p in phases)
    print(head)
    for s in rows:
        line = f"{s.label:<{width}}  {len(s.samples):>4}  {s.min:8.2f}  {s.median:8.2f}{s.mark:1}"
        if phases:
            line += " | " + " ".join(
                f"{s.phase(p):9.2f}" if any(p in x.phases for x in s.samples) else f"{'-':>9}" for p in phases
            )
        print(line)


def ratio(a: Series, b: Series) -> tuple[float, float]:
    """``a / b``: of the medians and of the mins."""
    return a.median / b.median, a.min / b.min


def ratio_line(a: Series, b: Series, what: str = "") -> str:
    median, minimum = ratio(a, b)
    return f"{a.label} / {b.label}{what}: {median:.2f}x (medians), {minimum:.2f}x (mins)"


class Goals:
    """The figures a benchmark exists for, each with its goal, printed together at the end."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def check(self, figure: str, value: str, goal: str, met: bool) -> None:
        line = f"{figure}: {value}   goal {goal}: {'met' if met else 'MISSED'}"
        self.lines.append(line)
        print(line)

    def ratio(self, figure: str, a: Series, b: Series, at_most: float | None = None, at_least: float = 0.0) -> None:
        """A goal on ``a / b`` (the ratio of the medians; the mins' is printed beside it)."""
        median, minimum = ratio(a, b)
        if at_most is not None:
            goal, met = f"<= {at_most:g}x", median <= at_most
        else:
            goal, met = f">= {at_least:g}x", median >= at_least
        self.check(figure, f"{median:.2f}x (medians), {minimum:.2f}x (mins)", goal, met)

    def summary(self) -> None:
        if self.lines:
            print("\ngoals")
            for line in self.lines:
                print("  " + line)


def workdir(path: Path | None, prefix: str) -> tuple[Path, Callable[[], None]]:
    """``path`` (kept) or a new temporary directory (removed by the returned cleanup)."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        return path, lambda: None
    made = Path(tempfile.mkdtemp(prefix=prefix))
    return made, lambda: shutil.rmtree(made, ignore_errors=True)


def fresh_dir(parent: Path, name: str) -> Path:
    """An empty directory ``parent/name-N`` that no earlier run used."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=parent))


if __name__ == "__main__" and sys.argv[1:2] == ["--harness"]:
    _harness_driver()
