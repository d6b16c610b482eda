"""Documentation held to the first-party distribution: every hook, those its plugins add
included, documented; its plugins import only the public API; CONTRIBUTING's example plugin
on the Debian dataset; the committed leaderboard's schema."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from helpers import REPO, contributing_block

from harness import load_dataset
from harness.leaderboard.rows import json_schema
from harness.plugins import PluginManager


def test_every_hook_is_documented_with_its_signature() -> None:
    """Derived from the plugin manager (with every installed plugin, so the hooks plugins offer
    through ``add_hookspecs`` count too): a heading ``## name(arguments)`` per hook."""
    docs = (REPO / "docs" / "plugin-hooks.md").read_text()
    documented = {name: args for name, args in re.findall(r"^## (\w+)\(([^)]*)\)$", docs, flags=re.MULTILINE)}
    manager = PluginManager()
    hooks = {
        name: ", ".join(caller.spec.argnames)
        for name, caller in vars(manager.pm.hook).items()
        if getattr(caller, "spec", None) is not None
    }
    assert {"register_retrievers", "register_presets", "add_hookspecs"} <= set(hooks)
    assert {"register_llms", "register_synthesis_stages"} <= set(hooks), "installed plugins offer these"
    assert hooks == documented


def test_first_party_plugins_use_only_the_public_api() -> None:
    private = []
    for path in sorted((REPO / "plugins").glob("*/*/**/*.py")):
        if "/tests/" in str(path) or "/build/" in str(path):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"\s*(from harness\.|import harness\.)", line):
                private.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert private == [], "plugins import from harness only:\n" + "\n".join(private)


def test_contributing_example_plugin_installs_and_runs(
    contributing_plugin: tuple[list[str], dict[str, str]], tmp_path: Path
) -> None:
    """Built and installed from the guide's own files and command, listed exactly as the guide
    shows, and run on the Debian dataset with every first-party plugin installed beside it."""
    harness, env = contributing_plugin
    listed = subprocess.run(
        [*harness, "plugins", "--hook", "register_retrievers"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    shown = contributing_block(r'"name": "keyword_overlap"')
    assert shown.rstrip("\n") in listed.stdout, "the guide's `harness plugins` entry differs from the real output"
    row = next(p for p in json.loads(listed.stdout) if p["name"] == "keyword_overlap")
    assert row == json.loads(shown)
    assert row["package"] == "harness-keyword-overlap 0.1.0"
    ran = subprocess.run(
        [
            *harness,
            "run",
            "--retriever",
            "keyword-overlap",
            "--dataset",
            "debian",
            "--split",
            "val",
            "--k",
            "20",
            "--format",
            "json",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)[0]["row"]
    assert result["retriever"]["package"] == "harness-keyword-overlap 0.1.0"
    val = load_dataset("debian").load_queries().split("val")
    assert result["num_queries"] == len(val) and 0.05 < result["metrics"]["hit@5"] <= 1
    # a run made outside this process is held to trec_eval's implementations too
    from harness.testing import check_run_dir

    assert check_run_dir(tmp_path / json.loads(ran.stdout)[0]["run_dir"])["pytrec_eval"] > 0


def test_committed_schema_is_current() -> None:
    committed = json.loads((REPO / "leaderboard" / "schema.json").read_text())
    assert committed == json_schema(), "run: harness leaderboard schema > leaderboard/schema.json"
