"""`harness run` as a person meets it, in real processes: Ctrl-C in the middle of a run, the
re-run that resumes it, and third-party log noise kept out unless ``--verbose``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PLUGIN = '''
import json, logging, os, time
from pathlib import Path

import numpy as np
import harness
from harness.testing import TinyDataset


class Slow(harness.Retriever):
    """Builds an index once (a second, then cached), searches a query in 0.4 s, logs what it searched."""

    name = "slow"
    batch_size = 1

    def build(self, skb, context):
        self.ids = skb.candidate_ids
        entry = Path(context.cache_dir) / "slow" / "tiny-index"
        if not entry.exists():
            time.sleep(1.0)
            entry.mkdir(parents=True)
            (entry / "index.json").write_text("[]")

    def search(self, queries, k):
        with open(os.environ["SLOW_LOG"], "a") as log:
            for q in queries:
                self.searched = getattr(self, "searched", 0) + 1
                # SLOW_HOLD: the third query of this process waits for the test's Ctrl-C, however busy the machine
                time.sleep(300 if os.environ.get("SLOW_HOLD") and self.searched > 2 else 0.4)
                log.write(f"{q.id}\\n")
        scores = np.linspace(1, 0, len(self.ids))
        return [harness.Ranking(self.ids[:k], scores[:k]) for _ in queries]


class Chatty(harness.Retriever):
    """What a library does on import: logging configured at INFO, INFO lines from its loggers."""

    name = "chatty"

    def build(self, skb, context):
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("transformers.modeling").info("chatty-info-line")
        logging.getLogger("httpx").info("HTTP Request: GET https://example.org")
        print(f"verbose={os.environ.get('HARNESS_VERBOSE')}", flush=True)
        self.ids = skb.candidate_ids

    def search(self, queries, k):
        return [harness.Ranking(self.ids[:k], np.linspace(1, 0, k)) for _ in queries]


class Keeper(harness.Retriever):
    """A long build that keeps its finished pieces, as dense encoding does, and says so on Ctrl-C."""

    name = "keeper"

    def build(self, skb, context):
        Path(os.environ["KEEPER_STARTED"]).write_text("building")
        try:
            time.sleep(300)  # the test's Ctrl-C arrives here
        except KeyboardInterrupt:
            raise harness.KeptWork("3 of 5 pieces built and kept (the next run builds only the rest)") from None

    def search(self, queries, k):
        raise AssertionError("never reached")


@harness.hookimpl
def register_datasets(register):
    register(TinyDataset)


@harness.hookimpl
def register_retrievers(register):
    register(Slow)
    register(Chatty)
    register(Keeper)
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "slow.py").write_text(PLUGIN)
    return {
        **os.environ,
        "HARNESS_PLUGINS": "",  # no installed plugin: only the one above
        "HARNESS_PLUGINS_DIR": str(plugins),
        "HARNESS_CACHE": str(tmp_path / "cache"),
        "SLOW_LOG": str(tmp_path / "searched.log"),
        "COLUMNS": "200",
    }


def _harness() -> str:
    return str(Path(sys.executable).with_name("harness"))


RUN = ["run", "-r", "slow", "-d", "tiny", "--k", "3", "--metrics", "hit@1", "--output", "runs"]


#: how long a step may take on a loaded 2-core machine before the test gives up (a bound, not a timing)
PATIENCE = 300


def _logged(tmp_path: Path) -> int:
    """Queries the runner has logged as answered in the run's resume log."""
    logs = (tmp_path / "runs").glob("tiny-test-slow-*/results.jsonl")
    return sum(len(path.read_text().splitlines()) for path in logs)


def _interrupted(args: list[str], env: dict[str, str], tmp_path: Path) -> str:
    """``harness`` with ``args``, sent SIGINT once the runner has logged two more answered
    queries, while the third waits for it (events, not a guess at how long a busy machine
    takes); its stderr."""
    already = _logged(tmp_path)
    child = subprocess.Popen(
        [_harness(), *args],
        cwd=tmp_path,
        env={**env, "SLOW_HOLD": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + PATIENCE
    while _logged(tmp_path) < already + 2:
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=PATIENCE)
    assert child.returncode == 130, err
    return err


def test_ctrl_c_says_what_was_kept_and_a_rerun_resumes(env: dict[str, str], tmp_path: Path) -> None:
    searched = tmp_path / "searched.log"
    err = _interrupted(RUN, env, tmp_path)
    assert "Aborted!" not in err
    [results] = list((tmp_path / "runs").glob("tiny-test-slow-*/results.jsonl"))
    kept = len(results.read_text().splitlines())
    assert kept == 2  # the third query was waiting for the Ctrl-C
    assert "interrupted: slow on tiny/test" in err
    assert f"kept: {kept} of 6 queries answered, in {Path('runs') / results.parent.name / 'results.jsonl'}" in err
    assert "run the same command again to resume" in err
    [cached] = [line for line in err.splitlines() if line.startswith("cached by this run under")]
    assert str(tmp_path / "cache") in cached and "slow/tiny-index" in cached

    first_build = json.loads((results.parent / "build.json").read_text())["seconds"]
    assert first_build >= 1.0
    before = searched.read_text().split()
    again = subprocess.run([_harness(), *RUN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE)
    assert again.returncode == 0, again.stderr
    after = searched.read_text().split()[len(before) :]
    # the kept queries are not searched again; the rest are, once each
    answered = {json.loads(line)["qid"] for line in results.read_text().splitlines()[:kept]}
    assert sorted(after) == sorted(set(after)) and not answered & {int(q) for q in after}
    assert f"resumed {kept} queries" in again.stdout
    # the index came from the cache this time: the line says when it was built, the row keeps that cost
    assert f"index built earlier in {first_build:.2f} s, built or loaded from the cache now in" in again.stdout
    row = json.loads((results.parent / "row.json").read_text())
    assert row["index_build_seconds"] == round(first_build, 4)

    done = subprocess.run(
        [_harness(), *RUN, "--format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE
    )
    [outcome] = json.loads(done.stdout)
    assert outcome["index_built_earlier"] and outcome["phases"]["build"] == 0
    shown = subprocess.run([_harness(), *RUN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE)
    assert f"index built earlier in {first_build:.2f} s, not needed now" in shown.stdout


def test_third_party_info_logs_only_with_verbose(env: dict[str, str], tmp_path: Path) -> None:
    run = ["run", "-r", "chatty", "-d", "tiny", "--k", "3", "--metrics", "hit@1", "--output", "runs"]
    quiet = subprocess.run([_harness(), *run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE)
    assert quiet.returncode == 0, quiet.stderr
    assert "chatty-info-line" not in quiet.stderr and "HTTP Request" not in quiet.stderr
    assert "verbose=None" in quiet.stdout
    loud = subprocess.run(
        [_harness(), "--verbose", *run, "--fresh"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert loud.returncode == 0, loud.stderr
    assert "chatty-info-line" in loud.stderr and "HTTP Request" in loud.stderr
    assert "verbose=1" in loud.stdout


def test_ctrl_c_of_a_fresh_run_says_to_resume_without_fresh(env: dict[str, str], tmp_path: Path) -> None:
    """Repeating a --fresh command discards what was kept: the advice must drop the flag."""
    err = _interrupted([*RUN, "--fresh"], env, tmp_path)
    assert "run the same command again without --fresh to resume" in err
    [results] = list((tmp_path / "runs").glob("tiny-test-slow-*/results.jsonl"))
    kept = len(results.read_text().splitlines())
    again = subprocess.run([_harness(), *RUN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PATIENCE)
    assert again.returncode == 0 and f"resumed {kept} queries" in again.stdout, again.stderr


def test_ctrl_c_during_a_build_says_what_the_component_kept(env: dict[str, str], tmp_path: Path) -> None:
    started = tmp_path / "keeper-started"
    run = ["run", "-r", "keeper", "-d", "tiny", "--k", "3", "--metrics", "hit@1", "--output", "runs"]
    child = subprocess.Popen(
        [_harness(), *run],
        cwd=tmp_path,
        env={**env, "KEEPER_STARTED": str(started)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + PATIENCE
    while not started.exists():
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=PATIENCE)
    assert child.returncode == 130, err
    assert "kept: 3 of 5 pieces built and kept (the next run builds only the rest)" in err
    assert "no query was answered yet; run the same command again to go on" in err  # not "to start"
