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


GOOD = (
    "import harness\n"
    "class Good(harness.Retriever):\n"
    "    name = 'good'\n"
    "    def build(self, skb, context): pass\n"
    "    def search(self, queries, k, top_ranked=None): return []\n"
    "@harness.hookimpl\n"
    "def register_retrievers(register):\n"
    "    register(Good)\n"
)


@pytest.fixture
def good(site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A well-behaved fake distribution; only fake plugins load (HARNESS_PLUGINS)."""
    install_fake_distribution(site, "fake-good", {"fakeplug_good": GOOD}, {"good": "fakeplug_good"})
    monkeypatch.setenv("HARNESS_PLUGINS", "good,broken,raising,clash")
    return site


def test_environment_variable_restricts_plugins(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = PluginManager()
    described = {row["name"]: row for row in manager.describe()}
    assert described["good"] == {"name": "good", "hooks": ["register_retrievers"], "package": "fake-good 0.1"}
    assert described["harness.plugins.builtin_metrics"]["builtin"] is True
    assert set(manager.components.by_kind["retriever"]) == {"good"}
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    assert "good" not in {row["name"] for row in PluginManager().describe()}


def test_a_plugins_directory_file_is_a_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "good.py").write_text(GOOD)
    (folder / "broken.py").write_text("import does_not_exist\n")
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    monkeypatch.setenv("HARNESS_PLUGINS_DIR", str(folder))
    manager = PluginManager()
    assert set(manager.components.by_kind["retriever"]) == {"good"}
    assert manager.components.owner[("retriever", "good")] == "mine/good.py"
    assert any(f.plugin == "mine/broken.py" and "does_not_exist" in f.error for f in manager.failures)


def test_broken_import_is_reported_and_others_still_work(site: Path, good: Path) -> None:
    install_fake_distribution(
        site, "fake-broken", {"fakeplug_broken": "import does_not_exist\n"}, {"broken": "fakeplug_broken"}
    )
    manager = PluginManager()
    failures = {f.plugin: f.error for f in manager.failures}
    assert "ModuleNotFoundError" in failures["broken"] and "does_not_exist" in failures["broken"]
    assert "good" in manager.components.by_kind["retriever"]
    row = next(r for r in manager.describe() if r["name"] == "broken")
    assert row["errors"]


def test_hook_that_raises_is_isolated(site: Path, good: Path) -> None:
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
    assert "good" in retrievers
    failure = next(f for f in manager.failures if f.plugin == "raising")
    assert failure.hook == "register_retrievers" and "boom in hook" in failure.error
    with pytest.raises(HarnessError, match=r"unknown retriever 'mine'.*failed to load: raising: RuntimeError: boom"):
        manager.components.get("retriever", "mine")


def test_bad_registrations_and_name_clashes(site: Path, good: Path) -> None:
    install_fake_distribution(
        site,
        "fake-clash",
        {
            "fakeplug_clash": (
                "from harness.plugins.hookspecs import hookimpl\n"
                "from fakeplug_good import Good\n"
                "class Copy(Good):\n"
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
    assert any("retriever 'good' is registered by 2 plugins (clash, good), so neither is used" in e for e in errors)
    assert any("not a subclass of Metric" in e for e in errors)
    # an impostor never stands in for the genuine plugin, whatever the names sort to
    assert ("retriever", "good") not in manager.components.owner
    with pytest.raises(HarnessError, match=r"retriever 'good' is registered by 2 plugins .*HARNESS_PLUGINS"):
        manager.components.get("retriever", "good")
    # and every command says so
    result = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "list", "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])},
    )
    assert "warning: retriever 'good' is registered by 2 plugins" in " ".join(result.stderr.split())


def test_unknown_component_lists_known_ones(plain_plugins: PluginManager) -> None:
    with pytest.raises(HarnessError, match=r"unknown retriever 'nope'; known: .*overlap"):
        plain_plugins.components.get("retriever", "nope")


FUTURE = """from __future__ import annotations

from typing import Literal

from pydantic import Field

import harness


class Modes(harness.Retriever):
    name = "modes"

    class Options(harness.Options):
        mode: Literal["a", "b"] = Field("a", description="which")

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        pass

    def search(self, queries, k, top_ranked=None):
        return []


@harness.hookimpl
def register_retrievers(register):
    register(Modes)
"""


def test_a_plugins_directory_file_may_postpone_annotations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "modes.py").write_text(FUTURE)
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    monkeypatch.setenv("HARNESS_PLUGINS_DIR", str(tmp_path))
    cls = PluginManager().components.get("retriever", "modes")
    assert cls(mode="b").params == {"mode": "b"}
    with pytest.raises(HarnessError, match="mode: Input should be 'a' or 'b'"):
        cls(mode="c")


def test_a_component_kind_whose_base_does_not_load_costs_only_that_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "widgets.py").write_text(
        "import harness\n"
        "@harness.hookimpl\n"
        "def add_hookspecs(manager):\n"
        "    manager.add_component_kind('register_retrievers_too', 'no_such_module:Widget', 'widget')\n"
    )
    (tmp_path / "good.py").write_text(GOOD)
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    monkeypatch.setenv("HARNESS_PLUGINS_DIR", str(tmp_path))
    manager = PluginManager()
    assert set(manager.components.by_kind["retriever"]) == {"good"}
    [failure] = [f for f in manager.failures if f.hook == "add_component_kind"]
    assert "no_such_module:Widget" in failure.error and "ModuleNotFoundError" in failure.error
    result = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", "list", "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HARNESS_PLUGINS": "", "HARNESS_PLUGINS_DIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert "widget base class 'no_such_module:Widget' does not load" in " ".join(result.stderr.split())


def test_two_plugins_directories_with_a_file_of_one_name_do_not_shadow_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a" / "plugins", tmp_path / "b" / "plugins"
    for folder in (first, second):
        folder.mkdir(parents=True)
        (folder / "good.py").write_text(GOOD)
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    monkeypatch.setenv("HARNESS_PLUGINS_DIR", os.pathsep.join([str(first), str(first), str(second)]))
    manager = PluginManager()
    assert manager.components.owner[("retriever", "good")] == "plugins/good.py"  # the first, loaded once
    [failure] = [f for f in manager.failures if f.plugin == "plugins/good.py"]
    assert str(second / "good.py") in failure.error and "another plugins directory" in failure.error
