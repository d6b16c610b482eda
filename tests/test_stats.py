"""Query-set statistics: hand-checked definitions, and a query set read from a directory.
(STaRK's own numbers on its real query sets: integration/test_stark_statistics.py.) The
Holm–Bonferroni correction, by hand and against the step-down procedure it stands for."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.analysis.stats import holm, query_set_statistics, shannon_entropy, type_token_ratio
from harness.cli import cli
from harness.queries import HUMAN_SPLIT, Query, QuerySet


def test_definitions_by_hand() -> None:
    words = "the cat and the hat".split()
    assert type_token_ratio(words) == 4 / 5
    expected = -(2 / 5 * math.log2(2 / 5) + 3 * (1 / 5 * math.log2(1 / 5)))
    assert shannon_entropy(words) == pytest.approx(expected)
    queries = QuerySet(
        "q",
        {
            "train": [Query(1, "red kettle", (1,)), Query(2, "a blue kettle here", (1, 2, 2))],
            "test": [Query(3, "pan", tuple(range(40)))],
            HUMAN_SPLIT: [Query(1, "a human wrote this", (5,))],  # reuses id 1, counted apart
        },
    )
    stats = query_set_statistics(queries)
    assert stats["all"]["queries"] == 3 and stats["all"]["words"] == 7
    assert stats["all"]["answers_per_query"]["max"] == 40 and stats["all"]["answers_per_query"]["min"] == 1
    assert stats["all"]["share_with_more_than_30_answers"] == pytest.approx(1 / 3)
    assert stats["splits"][HUMAN_SPLIT]["words"] == 4


def test_stats_of_a_query_set_directory(tmp_path: Path) -> None:
    from harness.queries import write_stark_csv

    root = tmp_path / "qa" / "mine"
    write_stark_csv(root / "stark_qa" / "stark_qa.csv", [Query(0, "a b c", (1,)), Query(1, "a b", (2, 3))])
    (root / "split").mkdir()
    (root / "split" / "test.index").write_text("0\n1\n")
    result = CliRunner().invoke(cli, ["stats", "--queries", str(root), "--format", "json"], catch_exceptions=False)
    stats = json.loads(result.stdout)
    assert stats["dataset"] == "mine" and stats["all"]["words"] == 5 and stats["all"]["type_token_ratio"] == 3 / 5
    refused = CliRunner().invoke(cli, ["stats"])
    assert refused.exit_code != 0 and "DATASET or --queries" in refused.output


def test_holm_by_hand() -> None:
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → kept monotone at 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.02, 0.5, 0.02]) == pytest.approx([0.06, 0.5, 0.06])  # ties: one value, whatever the order
    assert holm([0.4, 0.6]) == pytest.approx([0.8, 0.8])
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    assert holm([0.03]) == [0.03] and holm([]) == []


def test_holm_rejects_what_the_step_down_procedure_rejects() -> None:
    rng = random.Random(0)
    for _ in range(200):
        pvalues = [rng.choice([rng.random(), rng.random() / 50]) for _ in range(rng.randint(1, 12))]
        alpha = 0.05
        # Holm's procedure: reject the smallest p-values while p₍ᵢ₎ ≤ α / (m − i + 1)
        rejected = set()
        for rank, index in enumerate(sorted(range(len(pvalues)), key=lambda i: pvalues[i])):
            if pvalues[index] > alpha / (len(pvalues) - rank):
                break
            rejected.add(index)
        adjusted = holm(pvalues)
        assert {i for i, p in enumerate(adjusted) if p <= alpha} == rejected
        assert all(p <= a <= 1 for p, a in zip(pvalues, adjusted, strict=True))
