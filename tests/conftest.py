"""Fixtures of the core's tests (the root conftest's apply too)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import install_contributing_plugin


@pytest.fixture(scope="session")
def _contributing_install(shared_tmp: Path) -> list[str]:
    """CONTRIBUTING's example plugin installed as the guide says, once per run (whichever worker
    comes first; the others wait and reuse it): the command that runs the harness CLI with it."""
    workdir = shared_tmp / "contributing-plugin"
    with FileLock(f"{workdir}.lock"):
        done = workdir / "command.json"
        if not done.exists():
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps(install_contributing_plugin(workdir)))
    return json.loads(done.read_text())


@pytest.fixture
def contributing_plugin(_contributing_install: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command that runs the harness CLI with CONTRIBUTING's example plugin installed, and
    an environment for it (this test's, whose changes stay with this test)."""
    return list(_contributing_install), {**os.environ, "COLUMNS": "200"}
