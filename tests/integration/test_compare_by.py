"""`harness compare --by`: a comparison broken down by a query attribute of the dataset, on the
published Debian runs, checked against the groups and means computed here from the files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import REPO

from harness.analysis.compare import compare_runs, paired_test, query_groups
from harness.cli import cli
from harness.errors import HarnessError

RUNS = REPO / "leaderboard" / "runs" / "debian" / "test"
REQUIREMENTS = REPO / "plugins/harness-debian/harness_debian/data/v2/qa/requirements.jsonl"


def _published(prefix: str) -> Path:
    [run] = [p for p in RUNS.iterdir() if p.name.startswith(prefix + "-") and p.name[len(prefix) + 1 :].isalnum()]
    return run


def _values(run: Path) -> dict[int, float]:
    lines = (run / "per_query.jsonl").read_text().splitlines()
    return {row["qid"]: row["metrics"]["mrr"] for row in map(json.loads, lines)}


def test_compare_by_hops_tests_each_group_on_its_own_queries() -> None:
    base, other = _published("bm25"), _published("bm25-relations")
    hops = {row["id"]: row["hops"] for row in map(json.loads, REQUIREMENTS.read_text().splitlines())}
    a, b = _values(base), _values(other)
    assert query_groups(base, "hops") == {q: str(hops[q]) for q in a}
    results = compare_runs([base, other], "mrr", resamples=2_000, groups=query_groups(base, "hops"))
    overall, *groups = results
    assert "group" not in overall and overall["queries"] == len(a) == 208
    sizes = {str(h): sum(hops[q] == h for q in a) for h in (1, 2, 3)}
    # the three-hop group holds one query: no test of its own
    assert sizes["3"] == 1 and [(r["group"], r["queries"]) for r in groups] == [("1", sizes["1"]), ("2", sizes["2"])]
    for r in groups:
        members = sorted(q for q in a if str(hops[q]) == r["group"])
        x, y = np.array([a[q] for q in members]), np.array([b[q] for q in members])
        assert r["mean_a"] == pytest.approx(x.mean()) and r["mean_b"] == pytest.approx(y.mean())
        assert r["p_randomization"] == pytest.approx(paired_test(x, y, resamples=2_000)["p_randomization"])
    table = CliRunner().invoke(cli, ["compare", str(base), str(other), "--by", "hops"], catch_exceptions=False)
    assert "hops=1: " in table.stdout and "hops=2: " in table.stdout
    assert "fewer than 2 shared queries): hops=3 (1)" in " ".join(table.stdout.split())


def test_compare_by_groups_a_sampled_run_by_its_own_sample(tmp_path: Path) -> None:
    from harness.api import evaluate

    # a seeded 25% of the test queries
    sampled = evaluate(
        "bm25", "debian", "test", sample=0.25, seed=0, output_dir=tmp_path / "runs", device="cpu"
    ).run_dir
    hops = {row["id"]: row["hops"] for row in map(json.loads, REQUIREMENTS.read_text().splitlines())}
    assert query_groups(sampled, "hops") == {q: str(hops[q]) for q in _values(sampled)}
    run = tmp_path / "run"
    shutil.copytree(sampled, run)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "seed": config["seed"] + 1}))  # another sample
    with pytest.raises(HarnessError, match=r"not the ones .* evaluated"):
        query_groups(run, "hops")


def test_compare_by_refuses_what_it_cannot_group(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(_published("bm25"), run)
    with pytest.raises(HarnessError, match=r"no query of debian/test has 'difficulty'.*they have: .*hops"):
        query_groups(run, "difficulty")
    with pytest.raises(HarnessError, match="'where' holds dict values"):
        query_groups(run, "where")
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "queries": "0" * 16}))
    with pytest.raises(HarnessError, match=r"not the ones .* evaluated"):
        query_groups(run, "hops")
    (run / "config.json").unlink()
    with pytest.raises(HarnessError, match=r"no readable config\.json"):
        query_groups(run, "hops")
    result = CliRunner().invoke(cli, ["compare", str(run), str(run), "--by", "hops", "--qrels", str(REQUIREMENTS)])
    assert result.exit_code != 0 and "not with --qrels" in result.stderr
