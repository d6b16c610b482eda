"""The scores written to TREC run files: strictly decreasing, ties lowered one float32 step at a
time, checked against the step-by-step definition (``np.nextafter``) on rankings shaped like real
ones: ties, zero-score fill, signed zeros, subnormals, the float32 extremes, infinities, NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from harness.errors import HarnessError
from harness.trec import strictly_decreasing


def step_by_step(scores: np.ndarray) -> np.ndarray:
    """The definition: every entry not below the one before it becomes the next float32 below it."""
    out = np.asarray(scores, dtype=np.float64).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nextafter below the lowest float32 overflows to -inf
        for i in range(1, len(out)):
            if out[i] >= out[i - 1]:
                out[i] = np.nextafter(out[i - 1], np.float32(-np.inf))
    if not np.all(np.isfinite(out)):
        raise HarnessError("scores outside the range of 32-bit floats cannot be written to a TREC run")
    return out


SPECIAL = [0.0, -0.0, 1e-45, -1e-45, 2.8e-45, -2.8e-45, 1.0, -1.0, 3.4028235e38, -3.4028235e38, 1e-38, 0.5, 7.0]


def _rankings(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    found = []
    for trial in range(count):
        n = int(rng.integers(0, 120))
        kind = trial % 5
        if kind == 0:
            values = rng.choice([*SPECIAL, np.inf, -np.inf, np.nan, 1e39], size=n)
        elif kind == 1:
            values = rng.integers(-3, 4, size=n).astype(np.float64)
        elif kind == 2:
            values = rng.normal(size=n) * 10.0 ** float(rng.integers(-40, 39))
        elif kind == 3:  # BM25's top k: matches, then zero-score fill
            values = np.concatenate([rng.gamma(2.0, 3.0, size=n // 3), np.zeros(n - n // 3)])
        else:
            values = np.repeat(rng.choice(SPECIAL, size=max(1, n // 8)), 8)
        if kind != 0 or trial % 10 == 0:
            values = -np.sort(-values)  # rankings come sorted; some unsorted ones too
        found.append(values)
    return found


@pytest.mark.parametrize("seed", range(4))
def test_scores_equal_the_step_by_step_definition(seed: int) -> None:
    for values in _rankings(seed, 3000):
        try:
            expected = step_by_step(values)
        except HarnessError:
            with pytest.raises(HarnessError, match="32-bit floats"):
                strictly_decreasing(values)
            continue
        got = strictly_decreasing(values)
        assert got.dtype == np.float32 and got.tobytes() == expected.tobytes(), values


def test_a_long_run_of_ties_descends_one_step_each() -> None:
    scores = strictly_decreasing(np.r_[np.full(1000, 2.0), np.zeros(500)])
    assert np.all(scores[1:] < scores[:-1])
    assert scores[999] == np.float32(2.0) - 999 * np.spacing(np.float32(2.0)) / 2  # 2.0's lower neighbours
    assert scores[1000] == np.float32(0.0) and scores[1001] == -np.float32(1e-45)
