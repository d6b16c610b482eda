"""The registry: plugins' presets merged with the user's file; errors name the file, the entry
and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from harness.errors import HarnessError
from harness.run.registry import load_registry, parse_registry
from harness.testing import plugin_manager


def presets_plugin(path: Path, text: str) -> object:
    """A plugin that ships ``text`` as its presets file."""
    path.write_text(text)

    class Plugin:
        @harness.hookimpl
        def register_presets(self, register):  # type: ignore[no-untyped-def]
            register(path)

    return Plugin()


def test_plugins_presets_merge_and_the_user_file_wins(tmp_path: Path) -> None:
    first = presets_plugin(
        tmp_path / "a.yaml",
        "defaults: {retriever: lexical, k: 10}\n"
        "retrievers:\n  lexical: {plugin: overlap, description: from a}\n"
        "conditions:\n  - {name: c1, retriever: lexical, dataset: tiny, split: test, expected: {mrr: 0.5}}\n",
    )
    second = presets_plugin(
        tmp_path / "b.yaml",
        "defaults: {dataset: tiny}\ndatasets:\n  tiny: {plugin: tiny, splits: [test]}\n",
    )
    manager = plugin_manager(first, second)
    registry = load_registry(plugins=manager)
    assert registry.defaults.retriever == "lexical" and registry.defaults.dataset == "tiny"
    assert registry.defaults.k == 10 and registry.problems == []
    assert registry.retrievers["lexical"].description == "from a" and [c.name for c in registry.conditions] == ["c1"]
    (tmp_path / "registry.yaml").write_text(
        "defaults: {k: 5}\nretrievers:\n  lexical: {plugin: overlap, params: {min_overlap: 2}}\n"
    )
    mine = load_registry(tmp_path / "registry.yaml", plugins=manager)
    assert mine.defaults.k == 5 and mine.defaults.retriever == "lexical"
    assert mine.retrievers["lexical"].params == {"min_overlap": 2}
    assert "registry.yaml" in mine.source and "plugins" in mine.source


def test_a_name_two_plugins_define_is_used_by_neither(tmp_path: Path) -> None:
    one = presets_plugin(tmp_path / "a.yaml", "retrievers:\n  same: {plugin: overlap}\n  only-a: {plugin: overlap}\n")
    two = presets_plugin(tmp_path / "b.yaml", "defaults: {k: 7}\nretrievers:\n  same: {plugin: flaky}\n")
    three = presets_plugin(tmp_path / "c.yaml", "defaults: {k: 9}\n")
    registry = load_registry(plugins=plugin_manager(one, two, three))
    assert set(registry.retrievers) == {"only-a"}
    assert any("'same' is defined by 2 plugins" in p for p in registry.problems)
    assert any("disagree on the default k" in p for p in registry.problems) and registry.defaults.k == 100


def test_a_broken_presets_file_costs_only_its_plugin(tmp_path: Path) -> None:
    good = presets_plugin(tmp_path / "good.yaml", "retrievers:\n  fine: {plugin: overlap}\n")
    bad = presets_plugin(tmp_path / "bad.yaml", "retrievers:\n  broken: {plugin: overlap, colour: red}\n")
    manager = plugin_manager(good, bad)
    registry = load_registry(plugins=manager)
    assert set(registry.retrievers) == {"fine"}
    [failure] = [f for f in manager.failures if f.hook == "register_presets"]
    assert "bad.yaml" in failure.error and "colour" in failure.error


def test_the_core_alone_ships_no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    from harness.plugins import PluginManager

    registry = load_registry(plugins=PluginManager())
    assert not registry.datasets and not registry.retrievers and not registry.conditions


def test_old_style_reranker_entries_become_parameters() -> None:
    registry = parse_registry("retrievers:\n  r: {plugin: x, first_stage: bm25, candidates: 5}\n", "r.yaml")
    assert registry.retrievers["r"].params == {"first_stage": "bm25", "candidates": 5}


@pytest.mark.parametrize(
    "text, message",
    [
        ("datasets: [", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("datasets:\n  d: {params: {}}\n", r"datasets\.d\.plugin: Field required"),
        ("retrievers:\n  r: {plugin: bm25, colour: red}\n", r"retrievers\.r\.colour: Extra inputs are not permitted"),
        (
            "conditions:\n  - {name: c, retriever: r, dataset: d, split: s, k: 0}\n",
            r"conditions\.0\.k: Input should be greater than 0",
        ),
        (
            "datasets:\n  d: {plugin: p, splits: [test]}\n"
            "conditions:\n  - {name: c, retriever: r, dataset: d, split: val}\n",
            r"split 'val' is not among datasets\.d\.splits",
        ),
        (
            "conditions:\n  - {name: c, retriever: r, dataset: d, split: s}\n"
            "  - {name: c, retriever: r, dataset: d, split: t}\n",
            "duplicate condition name 'c'",
        ),
    ],
)
def test_malformed_registries(text: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message) as info:
        parse_registry(text, "my-registry.yaml")
    assert str(info.value).startswith("my-registry.yaml")


def test_missing_explicit_registry(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="does not exist"):
        load_registry(tmp_path / "nope.yaml")


def test_one_plugins_misfit_condition_costs_only_that_condition(tmp_path: Path) -> None:
    datasets = presets_plugin(tmp_path / "d.yaml", "datasets:\n  tiny: {plugin: tiny, splits: [test]}\n")
    conditions = presets_plugin(
        tmp_path / "c.yaml",
        "conditions:\n  - {name: fits, retriever: r, dataset: tiny, split: test}\n"
        "  - {name: misfit, retriever: r, dataset: tiny, split: val}\n",
    )
    registry = load_registry(plugins=plugin_manager(datasets, conditions))
    assert [c.name for c in registry.conditions] == ["fits"]
    [problem] = registry.problems
    assert problem.startswith("condition 'misfit' (plugin harness-testing-1) is left out: split 'val'")


def test_one_plugin_shipping_a_name_twice_is_not_a_clash_and_the_user_settles_clashes(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("retrievers:\n  same: {plugin: overlap}\n")
    (tmp_path / "b.yaml").write_text("retrievers:\n  same: {plugin: overlap, params: {min_overlap: 2}}\n")

    class TwoFiles:
        @harness.hookimpl
        def register_presets(self, register):  # type: ignore[no-untyped-def]
            register(tmp_path / "a.yaml")
            register(tmp_path / "b.yaml")

    registry = load_registry(plugins=plugin_manager(TwoFiles()))
    assert registry.problems == [] and registry.retrievers["same"].params == {"min_overlap": 2}
    clash = [presets_plugin(tmp_path / f"{n}.yaml", "retrievers:\n  x: {plugin: overlap}\n") for n in "cd"]
    (tmp_path / "mine.yaml").write_text("retrievers:\n  x: {plugin: overlap, params: {min_overlap: 3}}\n")
    mine = load_registry(tmp_path / "mine.yaml", plugins=plugin_manager(*clash))
    assert mine.problems == [] and mine.retrievers["x"].params == {"min_overlap": 3}


def test_parameters_are_checked_when_the_registry_loads(tmp_path: Path) -> None:
    from helpers import OverlapRetriever

    class Plugin:
        @harness.hookimpl
        def register_retrievers(self, register):  # type: ignore[no-untyped-def]
            register(OverlapRetriever)

    (tmp_path / "registry.yaml").write_text(
        "retrievers:\n"
        "  fine: {plugin: overlap, params: {min_overlap: 2}}\n"
        "  typo: {plugin: overlap, params: {min_overlpa: 2}}\n"
        "  negative: {plugin: overlap, params: {min_overlap: -1}}\n"
        "  elsewhere: {plugin: not-installed, params: {anything: 1}}\n"
    )
    registry = load_registry(tmp_path / "registry.yaml", plugins=plugin_manager(Plugin()))
    assert registry.problems == [
        "retriever 'typo': bad parameters: min_overlpa: not a parameter of this component",
        "retriever 'negative': bad parameters: min_overlap: Input should be greater than or equal to 0",
    ]
