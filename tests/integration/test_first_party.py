"""The first-party plugins as a distribution: found through entry points, their presets
runnable together, the default run equal to its reproduction condition."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.plugins import PluginManager
from harness.run import Runner, load_registry, resolve


def test_first_party_plugins_are_found_through_entry_points(plugins: PluginManager) -> None:
    described = {row["name"]: row for row in plugins.describe()}
    assert described["bm25"]["hooks"] == ["register_presets", "register_retrievers"]
    assert described["bm25"]["package"].startswith("stark-harness-bm25 ")
    assert "register_datasets" in described["debian"]["hooks"]
    assert described["harness.plugins.builtin_metrics"]["builtin"] is True
    assert "bm25" in plugins.components.by_kind["retriever"]
    assert "recall" in plugins.components.by_kind["metric"]


def test_environment_variable_restricts_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_PLUGINS", "debian")
    manager = PluginManager()
    names = {row["name"] for row in manager.describe()}
    assert "debian" in names and "bm25" not in names
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    assert {row["name"] for row in PluginManager().describe()} <= {"harness.plugins.builtin_metrics"} | {
        row["name"] for row in PluginManager().describe() if row.get("builtin")
    }


def test_every_preset_of_the_first_party_plugins_is_valid(
    plugins: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.run.resolve import resolve_retrievers

    # API presets resolve only with their key set (checked before anything loads); any value
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.setenv(variable, "dummy")

    registry = load_registry(plugins=plugins)
    assert registry.problems == [] and not [f for f in plugins.failures if f.hook == "register_presets"]
    assert registry.defaults.dataset == "debian" and registry.defaults.retriever == "bm25"
    for name in registry.retrievers:
        resolve_retrievers(registry, plugins, name)  # parameters valid, uses() resolvable
    assert all(c.expected for c in registry.conditions)


def test_debian_default_run_matches_registry_condition(plugins: PluginManager, tmp_path: Path) -> None:
    registry = load_registry(plugins=plugins)
    spec = resolve(registry, plugins)
    assert (spec.dataset, spec.retriever, spec.split) == ("debian", "bm25", "test")
    outcome = Runner(plugins, output_dir=tmp_path / "runs", device="cpu").run(spec)
    assert outcome.row.num_queries >= 100
    assert outcome.checks, "the presets carry an expected-score condition for the default run"
    for check in outcome.checks:
        assert check.ok, (check.metric, check.expected, check.actual)
