"""The changelog is published: it names where merged rows came from by the rows themselves (a
run directory) or by file name and digest (a bundle), never by a maintainer's paths."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import REPO

from harness.leaderboard.bundles import sha256
from harness.leaderboard.merge import merge
from harness.leaderboard.rows import read_rows
from harness.leaderboard.submit import bundle
from harness.plugins import PluginManager
from harness.run import Runner, resolve
from harness.run.registry import parse_registry

REGISTRY = """
defaults: {dataset: plain, retriever: overlap, split: test, k: 3}
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  overlap: {plugin: overlap}
  overlap-strict: {plugin: overlap, params: {with_relations: true, min_overlap: 2}}
"""

#: an absolute path, one from the home directory or one out of the working directory
PATH = re.compile(r"(^|[\s`(])(/|~/|\.\./)", flags=re.MULTILINE)


def _runs(plugins: PluginManager, out: Path) -> list[Path]:
    registry = parse_registry(REGISTRY, "test-registry.yaml")
    return [
        Runner(plugins, output_dir=out, device="cpu").run(resolve(registry, plugins, name, metrics=["hit@1"])).run_dir
        for name in ("overlap", "overlap-strict")
    ]


def _from_line(changelog: str) -> str:
    return next(line for line in changelog.splitlines() if line.startswith("From "))


def test_a_merge_from_absolute_paths_names_the_rows_not_the_paths(plain_plugins: PluginManager, tmp_path: Path) -> None:
    home = tmp_path / "maintainer-home" / "scratch-runs"
    runs = _runs(plain_plugins, home)
    board = tmp_path / "leaderboard"
    # a run directory, and a folder of run directories, each given by its absolute path
    merge([runs[0].resolve()], board)
    merge([home.resolve()], board)
    changelog = (board / "CHANGELOG.md").read_text()
    for leaked in (str(tmp_path), "maintainer-home", "scratch-runs", runs[0].name):
        assert leaked not in changelog
    assert not PATH.search(changelog), changelog
    rows = {r.retriever.name: r for r in read_rows(board)}
    names = [f"`plain/test {name} {rows[name].config_hash}`" for name in ("overlap", "overlap-strict")]
    froms = [line for line in changelog.splitlines() if line.startswith("From ")]
    assert froms == [f"From {names[0]}, {names[1]}.", f"From {names[0]}."]  # newest first


def test_a_bundle_is_named_by_its_file_name_and_digest(plain_plugins: PluginManager, tmp_path: Path) -> None:
    runs = _runs(plain_plugins, tmp_path / "runs")
    archive = tmp_path / "maintainer-home" / "submission.tar.gz"
    archive.parent.mkdir()
    bundle(runs, archive)
    board = tmp_path / "leaderboard"
    merge([archive.resolve()], board)
    changelog = (board / "CHANGELOG.md").read_text()
    assert _from_line(changelog) == f"From `submission.tar.gz` (sha256 {sha256(archive)[:12]})."
    assert str(tmp_path) not in changelog and "maintainer-home" not in changelog


def test_the_committed_changelog_names_no_path() -> None:
    changelog = (REPO / "leaderboard" / "CHANGELOG.md").read_text()
    froms = [line for line in changelog.splitlines() if line.startswith("From ")]
    assert froms
    for line in froms:
        for source in re.findall(r"`([^`]*)`", line):
            assert re.fullmatch(r"[\w.-]+\.tar\.gz|[\w.-]+/[\w.-]+ [\w.-]+ [0-9a-f]{16}", source), line
    assert not PATH.search(changelog)
