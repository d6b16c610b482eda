"""Plugin discovery through entry points, restriction, and isolation of broken plugins."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.plugins import PluginManager


def install_fake_distribution(site: Path, name: str, modules: dict[str, str], entry_points: dict[str, str]) -> None:
    """Write modules and a ``.dist-info`` with ``harness`` entry points into ``site``:
    exactly what ``pip install`` leaves behind, found by importlib.metadata."""
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(f"{ep} = {target}" for ep, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[harness]\n{lines}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    importlib.invalidate_caches()
    yield path
    for module in [m for m in sys.modules if m.startswith("fakeplug")]:
        del sys.modules[module]


def test_first_party_plugins_are_found_through_entry_points(plugins: PluginManager) -> None:
    described = {row["name"]: row for row in plugins.describe()}
    assert described["bm25"]["hooks"] == ["register_retrievers"]
    assert described["bm25"]["package"].startswith("stark-harness-bm25 ")
    assert described["debian"]["hooks"] == ["register_datasets"]
    assert described["harness.plugins.builtin_metrics"]["builtin"] is True
    assert "bm25" in plugins.components.by_kind["retriever"]
    assert "recall" in plugins.components.by_kind["metric"]


def test_environment_variable_restricts_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_PLUGINS", "debian")
    manager = PluginManager()
    names = {row["name"] for row in manager.describe()}
    assert "debian" in names and "bm25" not in names
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    assert {row["name"] for row in PluginManager().describe()} == {"harness.plugins.builtin_metrics"}


def test_broken_import_is_reported_and_others_still_work(site: Path) -> None:
    install_fake_distribution(
        site, "fake-broken", {"fakeplug_broken": "import does_not_exist\n"}, {"broken": "fakeplug_broken"}
    )
    manager = PluginManager()
    failures = {f.plugin: f.error for f in manager.failures}
    assert "ModuleNotFoundError" in failures["broken"] and "does_not_exist" in failures["broken"]
    assert "bm25" in manager.components.by_kind["retriever"]
    row = next(r for r in manager.describe() if r["name"] == "broken")
    assert row["errors"]


def test_hook_that_raises_is_isolated(site: Path) -> None:
    install_fake_distribution(
        site,
        "fake-raising",
        {
            "fakeplug_raising": (
                "from harness.plugins.hookspecs import hookimpl\n"
                "@hookimpl\n"
                "def register_retrievers(register):\n"
                "    raise RuntimeError('boom in hook')\n"
            )
        },
        {"raising": "fakeplug_raising"},
    )
    manager = PluginManager()
    retrievers = manager.components.by_kind["retriever"]
    assert "bm25" in retrievers
    failure = next(f for f in manager.failures if f.plugin == "raising")
    assert failure.hook == "register_retrievers" and "boom in hook" in failure.error
    with pytest.raises(HarnessError, match=r"unknown retriever 'mine'.*failed to load: raising: RuntimeError: boom"):
        manager.components.get("retriever", "mine")


def test_bad_registrations_and_name_clashes(site: Path) -> None:
    install_fake_distribution(
        site,
        "fake-clash",
        {
            "fakeplug_clash": (
                "from harness.plugins.hookspecs import hookimpl\n"
                "from harness_bm25 import BM25Retriever\n"
                "class Copy(BM25Retriever):\n"
                "    pass\n"
                "@hookimpl\n"
                "def register_retrievers(register):\n"
                "    register(Copy)\n"
                "@hookimpl\n"
                "def register_metrics(register):\n"
                "    register(object)\n"
            )
        },
        {"clash": "fakeplug_clash"},
    )
    manager = PluginManager()
    manager.components  # noqa: B018 - hooks run when components are first collected
    errors = [f.error for f in manager.failures if f.plugin == "clash"]
    assert any("retriever 'bm25' is registered by 2 plugins (bm25, clash), so neither is used" in e for e in errors)
    assert any("not a subclass of Metric" in e for e in errors)
    # an impostor never stands in for the genuine plugin, whatever the names sort to
    assert ("retriever", "bm25") not in manager.components.owner
    with pytest.raises(HarnessError, match=r"retriever 'bm25' is registered by 2 plugins .*HARNESS_PLUGINS"):
        manager.components.get("retriever", "bm25")
    # and every command says so
    result = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "list", "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])},
    )
    assert "warning: retriever 'bm25' is registered by 2 plugins" in " ".join(result.stderr.split())


def test_unknown_component_lists_known_ones(plugins: PluginManager) -> None:
    with pytest.raises(HarnessError, match=r"unknown retriever 'nope'; known: .*bm25"):
        plugins.components.get("retriever", "nope")
