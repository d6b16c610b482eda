"""What the command line costs before any retrieval: `harness --help`, and a Debian BM25 run
cold (empty cache) against warm (the cache a cold run left, a new output directory), in CPU
seconds (user + system of the child process), with every first-party plugin installed.

A run should cost what its retriever costs: a warm run maps the cached SKB, loads the cached
index, searches, scores and writes, and imports only the code of the components it uses
(plugins register components by import path; the plugin manager imports none of them to list
names). The reference for start-up is a bare interpreter that imports click (what any click
program pays), timed in the same rounds, alternating.

Goals: `harness --help` <= 0.3 CPU s; warm run >= 10x faster than the cold one (CPU s).

    python bench/bench_startup.py [--repeat 3] [--split test]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import timing

_IMPORTED = "import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.startswith('harness_'))))"


def cpu_child(argv: Sequence[str], env: dict[str, str]) -> timing.Sample:
    """``argv`` in a child process; the sample's seconds are its CPU seconds (user + system),
    its info the wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(list(argv), env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])} exited {done.returncode}:\n{done.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return timing.Sample(cpu, info={"wall": wall})


def imported_plugins(split: str, env: dict[str, str], out: Path) -> list[str]:
    """The first-party plugin modules a BM25 run imports (in-process, through the library API)."""
    code = (
        f"import harness; harness.evaluate('bm25', 'debian', {split!r}, output_dir={str(out)!r}, device='cpu'); "
        + _IMPORTED
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    harness = str(Path(sys.executable).with_name("harness"))
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        env = timing.environment(cache=work / "unused-cache")
        print("harness --help against a bare interpreter importing click (CPU s):", file=sys.stderr)
        help_runs = timing.alternate(
            {
                "harness --help": lambda: cpu_child([harness, "--help"], env),
                "python -c 'import click'": lambda: cpu_child([sys.executable, "-c", "import click"], env),
            },
            args.repeat,
        )
        counter = iter(range(10_000))

        def run(cache: Path) -> timing.Sample:
            out = work / f"runs-{next(counter)}"  # a new output directory: nothing is resumed
            argv = [harness, "run", "-r", "bm25", "-d", "debian", "-s", args.split, "--device", "cpu"]
            argv += ["--output", str(out)]
            return cpu_child(argv, timing.environment(cache=cache))

        print(f"harness run -r bm25 -d debian -s {args.split}, cold and warm (CPU s):", file=sys.stderr)
        runs = timing.ColdWarm(work, run)
        run_series = timing.alternate({"cold": runs.cold, "warm": runs.warm}, args.repeat)
        assert runs.cache is not None
        plugins = imported_plugins(args.split, timing.environment(cache=runs.cache), work / "imports")

    print(f"\n{'':28} {'min':>8} {'median':>8}   (CPU seconds; wall median)")
    for series in (*help_runs.values(), *run_series.values()):
        print(f"{series.label:28} {series.min:8.3f} {series.median:8.3f}   ({series.info('wall'):.2f} s wall)")
    help_median = help_runs["harness --help"].median
    floor = help_runs["python -c 'import click'"].median
    ratio = run_series["cold"].median / run_series["warm"].median
    print(f"\nharness --help: {help_median:.3f} CPU s ({help_median / floor:.1f}x a bare click import); goal <= 0.3")
    print(f"warm run {ratio:.1f}x faster than the cold one (medians); goal >= 10x")
    print(f"first-party plugin modules a BM25 run imports: {', '.join(plugins)}")


if __name__ == "__main__":
    main()
