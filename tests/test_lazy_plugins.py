"""Components registered by import path: names known without importing any plugin code; a
component whose code does not load is reported and left out by the commands that list
everything, and is one clear error for a run that names it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.testing import invoke, plugin_manager

BROKEN = """
import harness

@harness.hookimpl
def register_retrievers(register):
    register("no_such_module_xyz:Thing", name="thing")
    register("harness.testing:OverlapRetriever", name="overlap")
    register("harness.testing:OverlapRetriever", name="misnamed")
"""


def test_names_come_without_imports_and_a_broken_one_is_reported(tmp_path: Path) -> None:
    (tmp_path / "lazy.py").write_text(BROKEN)
    manager = plugin_manager()
    manager.load_directory(tmp_path)
    retrievers = manager.components.by_kind["retriever"]
    assert {"thing", "overlap", "misnamed"} <= set(retrievers)
    assert "no_such_module_xyz" not in sys.modules
    assert retrievers["overlap"].name == "overlap"
    with pytest.raises(
        HarnessError, match=r"retriever 'thing' of plugin '.*lazy\.py'.*does not load.*no_such_module_xyz"
    ):
        manager.components.get("retriever", "thing")
    with pytest.raises(HarnessError, match="named 'overlap', registered as 'misnamed'"):
        manager.components.get("retriever", "misnamed")
    manager.load_all()  # what `harness list` and `harness plugins` do
    assert set(manager.components.by_kind["retriever"]) >= {"overlap"}
    assert not {"thing", "misnamed"} & set(manager.components.by_kind["retriever"])
    errors = [f.error for f in manager.failures if f.plugin.endswith("lazy.py")]
    assert any("'thing'" in e for e in errors) and any("'misnamed'" in e for e in errors)


def test_the_commands_report_it_and_a_run_names_it(tmp_path: Path) -> None:
    (tmp_path / "lazy.py").write_text(BROKEN)
    listed = invoke("--plugins-dir", str(tmp_path), "list")
    assert listed.exit_code == 0 and "does not load" in listed.stderr
    described = invoke("--plugins-dir", str(tmp_path), "plugins")
    assert described.exit_code == 0 and "no_such_module_xyz" in described.stdout
    ran = invoke("--plugins-dir", str(tmp_path), "run", "-r", "thing", "-d", "debian")
    assert ran.exit_code == 2 and "does not load" in ran.stderr and "Traceback" not in ran.stderr
