"""Static types: mypy over the core and every first-party plugin's source, with the configuration
in pyproject.toml ([tool.mypy]): strict on the modules the public API re-exports from."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import harness
from harness.testing import require

REPO = Path(__file__).resolve().parents[1]


def _strict_modules() -> list[str]:
    """The module patterns of the override that sets mypy's strict flags."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    strict = [o for o in config.get("overrides", []) if o.get("disallow_untyped_defs")]
    assert len(strict) == 1, "one override carries the strict flags"
    return list(strict[0]["module"])


def test_the_public_api_is_checked_strictly() -> None:
    """Every module `harness` exports a name from is in the strict override (a new export's module too)."""
    patterns = _strict_modules()

    def strict(module: str) -> bool:  # mypy's `a.*` matches `a` itself and every module below it
        return any(module == p or fnmatch.fnmatchcase(module, p) or p == f"{module}.*" for p in patterns)

    loose = sorted({m for m in ["harness", *harness._EXPORTS.values()] if not strict(m)})
    assert not loose, f"add to the strict override in pyproject.toml ([[tool.mypy.overrides]]): {loose}"


@pytest.mark.slow
def test_mypy_passes(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """`mypy` as CI runs it, from the repository root; about 90 s cold on two cores, seconds when
    its incremental cache (kept in pytest's cache directory) is warm."""
    require("mypy", extra="stark-harness[test]")
    pytest_cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider
    cache = pytest_cache.mkdir("mypy") if pytest_cache is not None else tmp_path / "mypy"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
