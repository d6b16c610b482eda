"""The README's set-up, timed: a fresh virtual environment, PyTorch, ``requirements.txt``, the
first ``harness run``.

    python bench/bench_install.py                    # this machine's pip cache, as a user's second install
    python bench/bench_install.py --no-cache         # pip downloads everything again
    python bench/bench_install.py --dev              # also requirements-dev.txt + requirements-nodeps.txt

PyTorch goes in first, as the README's line does (``--torch``, default: the CPU build from
PyTorch's index). Where that index cannot be reached but a CPU wheel lies in pip's
``--find-links`` (the project's CI machines), pass ``--torch torch==2.13.0``. Each step is timed
separately; the goal line is the README install (venv + torch + requirements.txt) within
5 minutes with a warm cache and nothing built from source: any wheel pip builds that is not pure
Python, and any source distribution in the default install's ``--report``, is named.

It also prints the first run's transcript (what a new user sees) and its time, with a fresh
cache directory, so the Debian SKB is compiled and the BM25 index built as on a first run.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 300.0


def step(label: str, command: list[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> tuple[float, str]:
    """Run ``command``; (seconds, its output). Stops the benchmark with its output if it fails."""
    print(f"$ {shlex.join(command)}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    output = done.stdout + done.stderr
    if done.returncode != 0:
        sys.exit(f"{label} failed (exit {done.returncode}) after {seconds:.1f} s:\n{output[-4000:]}")
    print(f"  {label}: {seconds:.1f} s", flush=True)
    return seconds, output


def compiled_wheels(pip_output: str) -> list[str]:
    """Wheels pip built in this install that are not pure Python (something was compiled)."""
    built = re.findall(r"Created wheel for [^:]+: filename=(\S+\.whl)", pip_output)
    return [name for name in built if not name.endswith("-none-any.whl")]


def from_source(report: Path) -> list[str]:
    """Packages of a ``pip install --report`` taken as source distributions: each is built on
    the user's machine (a compiled wheel from pip's cache would hide that from the log)."""
    if not report.exists():
        return []
    found = []
    for item in json.loads(report.read_text())["install"]:
        info = item["download_info"]
        if not info["url"].endswith(".whl") and not info.get("dir_info", {}).get("editable"):
            found.append(f"{item['metadata']['name']} {item['metadata']['version']}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--torch",
        default="torch --index-url https://download.pytorch.org/whl/cpu",
        help="what `pip install` is given for PyTorch",
    )
    parser.add_argument("--no-cache", action="store_true", help="pip without its cache (downloads everything)")
    parser.add_argument("--dev", action="store_true", help="also time the test suite's extra installs")
    parser.add_argument("--keep", action="store_true", help="keep the virtual environment (its path is printed)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    venv = work / "venv"
    pip_flags = ["--no-cache-dir"] if args.no_cache else []
    python = str(venv / "bin" / "python")
    report = work / "requirements-report.json"
    times: dict[str, float] = {}
    outputs: list[str] = []
    try:
        times["venv"], _ = step("venv", [sys.executable, "-m", "venv", str(venv)])
        times["torch"], out = step("torch", [python, "-m", "pip", "install", *pip_flags, *shlex.split(args.torch)])
        outputs.append(out)
        times["requirements.txt"], out = step(
            "requirements.txt",
            [python, "-m", "pip", "install", "-v", *pip_flags, "-r", "requirements.txt", "--report", str(report)],
        )
        outputs.append(out)
        readme = sum(times.values())
        if args.dev:
            times["requirements-dev.txt"], out = step(
                "requirements-dev.txt", [python, "-m", "pip", "install", "-v", *pip_flags, "-r", "requirements-dev.txt"]
            )
            outputs.append(out)
            times["requirements-nodeps.txt"], out = step(
                "requirements-nodeps.txt",
                [python, "-m", "pip", "install", "-v", *pip_flags, "--no-deps", "-r", "requirements-nodeps.txt"],
            )
            outputs.append(out)

        # The first run, as a new user sees it: a fresh cache and output directory.
        env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(work), "HARNESS_CACHE": str(work / "cache")}
        times["first harness run"], transcript = step(
            "first harness run", [str(venv / "bin" / "harness"), "run", "--output", str(work / "runs")], env=env
        )
        times["second harness run"], _ = step(
            "second harness run",
            [str(venv / "bin" / "harness"), "run", "--output", str(work / "runs"), "--fresh"],
            env=env,
        )
        size = subprocess.run(["du", "-sm", str(venv)], capture_output=True, text=True).stdout.split()[0]
        sources = from_source(report)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    compiled = compiled_wheels("\n".join(outputs))
    print()
    print(f"pip cache: {'off (--no-cache)' if args.no_cache else 'this machine’s'}; PyTorch: {args.torch}")
    for label, seconds in times.items():
        print(f"{label:>24}: {seconds:7.1f} s")
    print(f"{'virtual environment':>24}: {size} MB")
    print(f"{'compiled while installing':>24}: {', '.join(compiled) if compiled else 'nothing'}")
    print(f"{'requirements.txt sdists':>24}: {', '.join(sources) if sources else 'none (wheels only)'}")
    verdict = "met" if readme <= GOAL_SECONDS and not compiled and not sources else "MISSED"
    print(
        f"goal: README install (venv + torch + requirements.txt) ≤ {GOAL_SECONDS:.0f} s, nothing compiled: "
        f"{readme:.1f} s — {verdict}"
    )
    print("\nfirst-run transcript (`harness run`):\n" + transcript)
    if args.keep:
        print(f"kept: {work}")


if __name__ == "__main__":
    main()
