"""Documentation that a test holds to: every core hook documented, the CONTRIBUTING plugin works
on the core alone, the README's commands exist, the code is ruff clean."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import harness
from harness.plugins import PluginManager

REPO = Path(__file__).resolve().parent.parent


def _documented_hooks() -> dict[str, str]:
    """``## name(arguments)`` headings of docs/plugin-hooks.md: hook name → its arguments."""
    docs = (REPO / "docs" / "plugin-hooks.md").read_text()
    return dict(re.findall(r"^## (\w+)\(([^)]*)\)$", docs, flags=re.MULTILINE))


def _hooks(manager: PluginManager) -> dict[str, str]:
    """The hooks ``manager`` knows, with their arguments as the documentation writes them."""
    return {
        name: ", ".join(caller.spec.argnames)
        for name, caller in vars(manager.pm.hook).items()
        if getattr(caller, "spec", None) is not None
    }


def test_every_core_hook_is_documented_with_its_signature() -> None:
    """Derived from a plugin manager with no installed plugin: every hook the core declares
    has its heading with its arguments. (The hooks first-party plugins add through
    ``add_hookspecs`` are checked in integration/test_docs_first_party.py.)"""
    documented = _documented_hooks()
    hooks = _hooks(PluginManager(load_entry_points=False))
    assert {"register_retrievers", "register_datasets", "register_presets", "add_hookspecs"} <= set(hooks)
    assert {name: documented.get(name) for name in hooks} == hooks


def test_a_hook_a_plugin_adds_is_seen_by_the_documentation_test() -> None:
    """The derivation above sees hooks a plugin adds, so an undocumented one would fail it."""

    class Specs:
        @harness.hookspec
        def register_widgets(self, register, colour):  # type: ignore[no-untyped-def]
            """A hook some plugin declares."""

    class Adds:
        @harness.hookimpl
        def add_hookspecs(self, manager):  # type: ignore[no-untyped-def]
            manager.add_hookspecs(Specs)

    manager = PluginManager(load_entry_points=False)
    manager.register(Adds(), "adds-widgets")
    hooks = _hooks(manager)
    assert hooks["register_widgets"] == "register, colour"
    assert "register_widgets" not in _documented_hooks()


def test_every_public_name_resolves() -> None:
    for name in harness.__all__:
        assert getattr(harness, name) is not None, name


TINY_DATASET_PLUGIN = """
import harness
from harness.testing import TinyDataset


@harness.hookimpl
def register_datasets(register):
    register(TinyDataset)
"""


def test_contributing_example_plugin_installs_and_runs_on_the_core_alone(
    contributing_plugin: tuple[list[str], dict[str, str]], tmp_path: Path
) -> None:
    """The documented plugin, installed by its entry point, with no other installed plugin: a
    dataset from a single-file plugin is all it needs."""
    harness_cli, env = contributing_plugin
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "tiny_dataset.py").write_text(TINY_DATASET_PLUGIN)
    env.update({"HARNESS_PLUGINS": "keyword_overlap", "HARNESS_PLUGINS_DIR": str(datasets)})
    listed = subprocess.run(
        [*harness_cli, "plugins", "--hook", "register_retrievers"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert [p for p in json.loads(listed.stdout) if not p.get("builtin")] == [
        {"name": "keyword_overlap", "hooks": ["register_retrievers"], "package": "harness-keyword-overlap 0.1.0"}
    ]
    args = ["run", "--retriever", "keyword-overlap", "--dataset", "tiny", "--k", "3", "--format", "json"]
    ran = subprocess.run(
        [*harness_cli, *args, "--metrics", "hit@1,mrr"], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr
    [outcome] = json.loads(ran.stdout)
    row = outcome["row"]
    assert row["retriever"]["package"] == "harness-keyword-overlap 0.1.0"
    assert row["retriever"]["params"] == {"min_length": 3}
    assert row["num_queries"] == 6 and 0.5 <= row["metrics"]["hit@1"] < 1
    # a run made outside this process is held to trec_eval's implementations too
    from harness.testing import check_run_dir

    assert check_run_dir(tmp_path / outcome["run_dir"])["pytrec_eval"] > 0


def test_readme_commands_exist() -> None:
    readme = (REPO / "README.md").read_text()
    assert "pip install -r requirements.txt" in readme and "python -m pytest" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "python -m pytest" in ci
    # CI installs what the README's test command installs, step by step
    tests = re.search(r"## Run the tests\n\n```bash\n(.*?)\n```", readme, flags=re.DOTALL).group(1)
    steps = [step.strip() for step in tests.split("&&")]
    assert steps[-1] == "python -m pytest -n auto"  # in parallel (pytest-xdist)
    assert ci.rstrip().splitlines()[-1] == steps[-1], "CI ends with the README's test command"
    for step in steps[:-1]:
        assert step.startswith("pip install "), step
        assert f"python -m pip install --quiet {step.removeprefix('pip install ')}" in ci, step
    # every file those steps name exists
    for name in re.findall(r"-r (\S+)", tests):
        assert (REPO / name).is_file(), name


def test_code_is_ruff_clean() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        result = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
