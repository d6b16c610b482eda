"""`harness stats` on the STaRK plugin's datasets: the paper's numbers on the real query sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.testing import invoke
from harness_stark.testing import stark_data_dir

needs_stark_data = pytest.mark.skipif(stark_data_dir() is None, reason="set STARK_DATA_DIR to the STaRK files")


@needs_stark_data
@pytest.mark.parametrize(("name", "entropy"), [("amazon", 10.39), ("mag", 10.25), ("prime", 9.63)])
def test_stark_query_sets_have_the_papers_entropy(name: str, entropy: float, tmp_path: Path) -> None:
    png = tmp_path / f"{name}.png"
    result = invoke(
        *("stats", f"stark-{name}", "--data-dir", str(stark_data_dir()), "--format", "json", "--png", str(png)),
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert round(stats["all"]["shannon_entropy"], 2) == entropy  # STaRK paper, Table 5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if name == "amazon":  # "about 22% of the answers have more than 30 entities" (§2.5)
        assert round(stats["all"]["share_with_more_than_30_answers"], 2) == 0.22
