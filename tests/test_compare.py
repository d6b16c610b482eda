"""Run comparison: statistics checked against independent computations on known cases."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from harness.analysis.compare import compare_runs, paired_test
from harness.cli import cli
from harness.errors import HarnessError


def _t_two_sided_p(t: float, df: int) -> float:
    """P(|T| ≥ |t|) for Student's t, by integrating its density (Simpson's rule)."""
    scale = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))

    def density(x: float) -> float:
        return scale * (1 + x * x / df) ** (-(df + 1) / 2)

    steps, upper = 200_000, abs(t)
    h = upper / steps
    area = density(0) + density(upper) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
    return 1 - 2 * (area * h / 3)


def test_paired_statistics_match_independent_computations() -> None:
    a = np.array([0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.6, 0.0])
    b = np.array([0.5, 0.4, 0.6, 1.0, 0.8, 0.2, 0.9, 0.5])
    result = paired_test(a, b, resamples=10_000, seed=0)
    d = b - a
    assert result["difference"] == pytest.approx(d.mean())
    # exact randomization: every one of the 2^8 sign patterns
    flips = [abs(np.mean(d * np.array(signs))) for signs in itertools.product([1, -1], repeat=len(d))]
    exact = np.mean(np.array(flips) >= abs(d.mean()) - 1e-12)
    assert result["p_randomization"] == pytest.approx(exact)
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    assert result["p_ttest"] == pytest.approx(_t_two_sided_p(t, len(d) - 1), abs=1e-6)
    assert result["ci95_low"] < d.mean() < result["ci95_high"]
    assert d.min() <= result["ci95_low"] and result["ci95_high"] <= d.max()
    same = paired_test(a, a.copy())
    assert same["p_randomization"] == 1.0 and same["difference"] == 0.0


def _run(directory: Path, values: dict[int, float]) -> Path:
    directory.mkdir(parents=True)
    with (directory / "per_query.jsonl").open("w") as out:
        for qid, value in values.items():
            metrics = {"mrr": value, "hit@1": float(value == 1)}
            out.write(json.dumps({"qid": qid, "latency_ms": 1.0, "metrics": metrics}) + "\n")
    return directory


def test_compare_command_on_run_directories(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base = {q: float(rng.random()) for q in range(40)}
    better = {q: min(1.0, v + 0.3) for q, v in base.items()}
    noise = {q: float(rng.random()) for q in range(40)}
    runs = [_run(tmp_path / n, v) for n, v in (("base", base), ("better", better), ("noise", noise))]
    result = CliRunner().invoke(cli, ["compare", *map(str, runs), "--format", "json"], catch_exceptions=False)
    rows = json.loads(result.stdout)
    assert [Path(r["run"]).name for r in rows] == ["better", "noise"] and rows[0]["queries"] == 40
    assert rows[0]["p_randomization"] < 0.001 and rows[0]["difference"] > 0.2
    assert rows[1]["p_randomization"] > 0.05
    table = CliRunner().invoke(cli, ["compare", *map(str, runs)], catch_exceptions=False).stdout
    assert "**" in table and "baseline" in table
    with pytest.raises(HarnessError, match="no 'ndcg@10'"):
        compare_runs(runs, "ndcg@10")
    other = _run(tmp_path / "elsewhere", {1000 + q: 0.5 for q in range(5)})
    with pytest.raises(HarnessError, match="share no query ids"):
        compare_runs([runs[0], other], "mrr")


def test_queries_without_a_difference_do_not_blur_the_randomization_test() -> None:
    a = np.zeros(111)
    b = a.copy()
    b[5] = -0.3  # one query differs: every sign flip gives the same |mean|, so p is exactly 1
    assert paired_test(a, b)["p_randomization"] == 1.0
    b[6], b[7] = -0.3, -0.3  # three equal differences: 2 of the 8 flips are as extreme
    assert paired_test(a, b)["p_randomization"] == pytest.approx(0.25)


def test_run_directories_without_per_query_results_point_to_qrels(tmp_path: Path) -> None:
    # run directories of another tool: rankings and qrels, no per_query.jsonl
    runs = []
    for name, ranking in (("first", {"q1": ["d1", "d2"], "q2": ["d2", "d1"]}), ("second", {"q1": ["d2", "d1"]})):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "qrels.trec").write_text("q1 0 d1 1\nq2 0 d2 1\n")
        lines = [f"{q} Q0 {d} {rank} {10 - rank} {name}" for q, ds in ranking.items() for rank, d in enumerate(ds, 1)]
        (directory / "run.trec").write_text("\n".join(lines) + "\n")
        runs.append(str(directory))
    result = CliRunner().invoke(cli, ["compare", *runs])
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert f"no per-query results at {Path(runs[0]) / 'per_query.jsonl'}" in message
    assert f"give --qrels FILE (TREC qrels, e.g. {Path(runs[0]) / 'qrels.trec'})" in message
    # which works
    qrels = str(Path(runs[0]) / "qrels.trec")
    result = CliRunner().invoke(cli, ["compare", *runs, "--qrels", qrels, "--format", "json"], catch_exceptions=False)
    [row] = json.loads(result.stdout)
    assert row["queries"] == 2 and row["mean_a"] == 1.0 and row["mean_b"] == 0.25 and row["missing_b"] == 1
    with pytest.raises(HarnessError, match=r"no per-query results .* give --qrels FILE \(TREC qrels\)"):
        compare_runs([tmp_path / "nowhere.jsonl", runs[1]], "mrr")


def test_runs_of_another_split_pair_with_the_baseline_by_a_query_attribute(tmp_path: Path) -> None:
    """Paraphrases (ids 10000 + N) against their originals (N): paired query by query, as if one split."""
    rng = np.random.default_rng(1)
    base = {q: float(rng.random()) for q in range(30)}
    better = {10_000 + q: min(1.0, v + 0.2) for q, v in base.items()}
    runs = [_run(tmp_path / "test", base), _run(tmp_path / "paraphrased", better)]
    with pytest.raises(HarnessError, match="share no query ids"):
        compare_runs(runs, "mrr")
    [paired] = compare_runs(runs, "mrr", pairs=[{10_000 + q: q for q in base}])
    assert paired["queries"] == 30 and paired["difference"] == pytest.approx(
        np.mean([better[10_000 + q] - base[q] for q in base])
    )
    with pytest.raises(HarnessError, match="pair with the same query"):
        compare_runs(runs, "mrr", pairs=[dict.fromkeys(better, 0)])
