"""Reproducing leaderboard rows from what they record (``harness leaderboard reproduce``,
``harness leaderboard regenerate``): real runs of the plain dataset merged into a leaderboard,
re-run from their row files, compared metric by metric; tampered and stale rows reported."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from helpers import Seeded

import harness
from harness import SKB, BuildContext, Query, Ranking
from harness.cli import cli
from harness.io import stable_hash, write_json
from harness.leaderboard import reproduce_command, run_command
from harness.leaderboard.merge import merge
from harness.leaderboard.reproduce import load_row, reproduce
from harness.leaderboard.rows import read_rows, row_path
from harness.plugins import PluginManager
from harness.run import Runner, resolve
from harness.run.registry import parse_registry
from harness.testing import Components, TinyTrainDataset, installed_plugins, invoke, plugin_manager, run_retriever

REGISTRY = """
defaults: {dataset: plain, retriever: overlap, split: test, k: 3}
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  overlap: {plugin: overlap, params: {min_overlap: 1}}
  overlap-strict: {plugin: overlap, params: {with_relations: true, min_overlap: 2}}
"""


def _run(plugins: PluginManager, out: Path, retriever: str, sample: float | None = None, seed: int = 0) -> Path:
    registry = parse_registry(REGISTRY, "test-registry.yaml")
    spec = resolve(
        registry, plugins, retriever, metrics=["hit@1", "recall@3", "mrr"], sample_fraction=sample, seed=seed
    )
    return Runner(plugins, output_dir=out, device="cpu").run(spec).run_dir


@pytest.fixture
def board(plain_plugins: PluginManager, tmp_path: Path) -> Path:
    """A curated leaderboard of two rows: ``overlap`` (every query) and ``overlap-strict`` (a
    seeded half of them)."""
    runs = [
        _run(plain_plugins, tmp_path / "runs", "overlap"),
        _run(plain_plugins, tmp_path / "runs", "overlap-strict", sample=0.5, seed=3),
    ]
    merge(runs, tmp_path / "leaderboard")
    return tmp_path / "leaderboard"


def _row_file(board: Path, name: str) -> Path:
    return next(p for p in (board / "rows").rglob(f"{name}-*.json"))


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_zero_shot_row_reproduces_exactly(board: Path, tmp_path: Path) -> None:
    file = _row_file(board, "overlap")
    row = read_rows(file)[0]
    result = _invoke("leaderboard", "reproduce", file, "--out", tmp_path / "again")
    assert result.exit_code == 0, result.output
    assert f"reproduced: 3 metrics match, configuration {row.config_hash}" in result.output
    assert "DIFFERS" not in result.output and "STALE" not in result.output
    # the new run directory is the row's configuration, with every metric to the last bit
    again = read_rows(tmp_path / "again" / f"plain-test-overlap-{row.config_hash}" / "row.json")[0]
    assert again.config_hash == row.config_hash and again.metrics == row.metrics
    # the registry resolves `overlap` to this configuration: `harness run` is the same run
    assert f"the same run: {run_command(row)}" in result.output


def test_a_sampled_row_reproduces_with_its_seed_and_a_run_directory_reproduces(board: Path, tmp_path: Path) -> None:
    file = _row_file(board, "overlap-strict")
    row = read_rows(file)[0]
    assert row.sample == 0.5 and row.num_queries == 2
    done = reproduce(file, tmp_path / "again", device="cpu")
    assert done.ok and done.reproduced.num_queries == 2, done.verdict()
    # a preset with these parameters is no registry entry here: no `harness run` equivalent
    assert done.run_command is None
    assert "--sample 0.5 --seed 3" in run_command(row, seed=3)
    # a run directory (row.json beside config.json) reproduces alike, never into itself
    run_dir = next((tmp_path / "runs").glob("plain-test-overlap-strict-*"))
    assert reproduce(run_dir, tmp_path / "third", device="cpu").ok
    refused = _invoke("leaderboard", "reproduce", run_dir, "--out", tmp_path / "runs")
    assert refused.exit_code == 2 and "would overwrite the run it reproduces" in refused.output


def test_a_tampered_metric_is_reported_as_a_mismatch(board: Path, tmp_path: Path) -> None:
    file = _row_file(board, "overlap")
    _edit(file, lambda row: row["metrics"].update({"hit@1": row["metrics"]["hit@1"] + 0.25}))
    result = _invoke("leaderboard", "reproduce", file, "--out", tmp_path / "again")
    assert result.exit_code == 1
    assert "DIFFERS" in result.output and "-2.50e-01" in result.output
    assert "NOT reproduced: 1 of 3 metrics differ (hit@1)" in result.output
    assert "STALE" not in result.output  # the configuration is the row's; its number is not
    # within a tolerance that covers the difference, it matches
    assert _invoke("leaderboard", "reproduce", file, "--out", tmp_path / "again", "--tolerance", "0.3").exit_code == 0


def test_a_row_whose_recorded_params_no_longer_hash_the_same_is_stale(board: Path, tmp_path: Path) -> None:
    """The row as an older ``overlap`` without the ``with_relations`` option recorded it (the
    row, its config.json and its hash consistent): the installed plugin resolves the option's
    default, so the configuration hash of the re-run is another; the metrics still match."""
    file = _row_file(board, "overlap")
    row = json.loads(file.read_text())
    config_file = board / row["run_dir"] / "config.json"
    config = json.loads(config_file.read_text())
    for record in (row["retriever"], config["retriever"]):
        del record["params"]["with_relations"]
    row["config_hash"] = stable_hash(config)
    write_json(config_file, config)
    write_json(file, row)
    result = _invoke("leaderboard", "reproduce", file, "--out", tmp_path / "again")
    assert result.exit_code == 1
    assert "STALE" in result.output and f"is not the row's {row['config_hash']}" in result.output
    assert "retriever.params.with_relations: (unset) → false" in result.output
    assert "DIFFERS" not in result.output


def test_regenerate_reports_every_row(board: Path, tmp_path: Path) -> None:
    _edit(_row_file(board, "overlap-strict"), lambda row: row["metrics"].update({"mrr": 0.0}))
    result = _invoke("leaderboard", "regenerate", board, "--out", tmp_path / "scratch")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert any(re.match(r"OK +plain/test overlap [0-9a-f]{16}: reproduced", line) for line in lines), result.output
    assert any(re.match(r"FAIL +plain/test overlap-strict .*: 1 of 3 metrics differ \(mrr\)", x) for x in lines)
    assert "1 of 2 rows reproduced" in result.output
    only = _invoke("leaderboard", "regenerate", board, "--out", tmp_path / "scratch", "-r", "overlap")
    assert only.exit_code == 0 and "1 of 1 rows reproduced" in only.output
    inside = _invoke("leaderboard", "regenerate", board, "--out", board / "runs" / "again")
    assert inside.exit_code == 2 and "is inside the leaderboard" in inside.output


def test_regenerate_goes_on_past_a_row_that_cannot_run(board: Path, tmp_path: Path) -> None:
    _edit(_row_file(board, "overlap"), lambda row: row["retriever"].update(plugin="uninstalled"))
    result = _invoke("leaderboard", "regenerate", board, "--out", tmp_path / "scratch")
    assert result.exit_code == 1
    assert re.search(r"ERROR plain/test overlap [0-9a-f]{16}: .*'uninstalled'", result.output), result.output
    assert re.search(r"OK +plain/test overlap-strict ", result.output)
    assert "1 of 2 rows reproduced" in result.output


def test_the_command_that_reproduces_a_row(board: Path) -> None:
    row = read_rows(_row_file(board, "overlap"))[0]
    assert (
        reproduce_command(row)
        == f"harness leaderboard reproduce leaderboard/rows/plain/test/overlap-{row.config_hash}.json"
    )
    assert row_path(Path("leaderboard"), row).as_posix() in reproduce_command(row)
    # the working directory holds the leaderboard (the fixture's tmp_path): the printed command is that one
    assert load_row(_row_file(board, "overlap")).command() == reproduce_command(row)
    assert run_command(row) == "harness run -r overlap -d plain -s test --k 3 -m hit@1,recall@3,mrr"


class CountingOverlap(harness.Retriever):
    """Word overlap weighted by how often a word is in the training queries: a trained
    retriever whose checkpoint depends on the split and seed it trained with."""

    name = "counting-overlap"
    regime = "trained"

    def fit(self, skb: SKB, train: Sequence[Query], context: Any) -> None:
        words: dict[str, int] = {}
        for query in train:
            for word in query.text.lower().split():
                words[word] = words.get(word, 0) + 1
        (context.checkpoint_dir / "words.json").write_text(json.dumps(words))

    def load_checkpoint(self, path: Path) -> None:
        self.words = json.loads((path / "words.json").read_text())

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        self.docs = [set(skb.document(int(i)).lower().split()) for i in self.ids]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        rankings = []
        for query in queries:
            words = set(query.text.lower().split())
            scores = np.array([sum(1 + self.words.get(w, 0) for w in words & d) for d in self.docs], dtype=float)
            order = np.lexsort((self.ids, -scores))[:k]
            rankings.append(Ranking(self.ids[order], scores[order]))
        return rankings


def test_a_trained_row_trains_again_with_its_recorded_seed(tmp_path: Path) -> None:
    outcome = run_retriever(CountingOverlap, {}, tmp_path, dataset="tiny-train", seed=2)
    assert outcome.row.training is not None and outcome.row.training.seed == 2
    manager = plugin_manager(Components([CountingOverlap]))
    # an empty cache: the checkpoint is trained again, on the row's split with the row's seed
    done = reproduce(
        outcome.run_dir, tmp_path / "again", cache_dir=tmp_path / "empty-cache", device="cpu", plugins=manager
    )
    assert done.ok, (done.verdict(), done.changes)
    assert done.reproduced.training is not None and done.reproduced.training.seed == 2


SEEDED_REGISTRY = {
    "defaults": {"dataset": "tiny-train", "split": "test", "k": 5},
    "datasets": {"tiny-train": {"plugin": "tiny-train", "splits": ["test"]}},
    "retrievers": {"seeded": {"plugin": "seeded"}},
}


@pytest.fixture
def seeded_board(tmp_path: Path) -> Path:
    """A leaderboard of one row over seeds 0, 1, 2 on a half of the test split sampled with seed 3
    (the sample's seed is not the training seeds': a row that reproduces used the recorded one)."""
    plugins = installed_plugins(Components([Seeded], [TinyTrainDataset]))
    registry = parse_registry(json.dumps(SEEDED_REGISTRY), "<test>")
    outcome = harness.evaluate(
        "seeded",
        plugins=plugins,
        registry=registry,
        output_dir=tmp_path / "runs",
        cache_dir=tmp_path / "cache",
        device="cpu",
        seeds=[0, 1, 2],
        sample=0.5,
        seed=3,
    )
    assert outcome.row.seeds is not None and len({s.mean for s in outcome.row.seeds.metrics.values()}) > 1
    merge([outcome.run_dir], tmp_path / "leaderboard")
    return tmp_path / "leaderboard"


def _reproduce_seeded(board: Path, out: Path) -> Result:
    # an empty cache: every seed's model is trained again
    return _invoke("leaderboard", "reproduce", _row_file(board, "seeded"), "--out", out, "--cache-dir", out / "cache")


def test_a_seeded_row_reproduces_every_seed_on_its_sample(seeded_board: Path, tmp_path: Path) -> None:
    row = read_rows(_row_file(seeded_board, "seeded"))[0]
    assert row.seeds is not None and row.sample == 0.5
    result = _reproduce_seeded(seeded_board, tmp_path / "again")
    assert result.exit_code == 0, result.output
    n = len(row.metrics)
    assert (
        f"reproduced: {n} metrics match (mean, std, min, max over seeds 0, 1, 2), configuration {row.config_hash}"
        in (result.output)
    )
    assert "mrr std" in result.output and "DIFFERS" not in result.output and "STALE" not in result.output
    # one re-run per seed, each on the sample of seed 3, combined into the row's configuration
    again = tmp_path / "again" / f"tiny-train-test-seeded-seeds-{row.config_hash}"
    new = read_rows(again / "row.json")[0]
    assert new.seeds is not None and new.seeds.config_hashes == row.seeds.config_hashes
    assert new.seeds.metrics == row.seeds.metrics
    for seed in (0, 1, 2):
        config = json.loads((again / f"seed-{seed}" / "config.json").read_text())
        assert config["seed"] == 3 and config["training"]["seeded"]["seed"] == seed

    # `harness run` with what run_command names makes the same row
    command = run_command(row, seed=3)
    assert "--sample 0.5" in command and "--seeds 0,1,2 --seed 3" in command
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(SEEDED_REGISTRY))
    words = [*shlex.split(command)[1:], "--registry", str(registry), "--output", str(tmp_path / "by-name")]
    ran = invoke(*words, "--device", "cpu", "--format", "json", env={"HARNESS_CACHE": str(tmp_path / "cache")})
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)[0]["row"]["config_hash"] == row.config_hash


def test_a_tampered_seed_mean_and_a_stale_seed_are_reported(
    seeded_board: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tamper(row: dict[str, Any]) -> None:
        row["metrics"]["mrr"] += 0.25
        row["seeds"]["metrics"]["mrr"]["mean"] += 0.25

    _edit(_row_file(seeded_board, "seeded"), tamper)
    result = _reproduce_seeded(seeded_board, tmp_path / "again")
    assert result.exit_code == 1
    n = len(read_rows(_row_file(seeded_board, "seeded"))[0].metrics)
    assert f"NOT reproduced: 1 of {n} metrics differ (mrr mean)" in result.output, result.output
    assert "-2.50e-01" in result.output and "STALE" not in result.output  # std, min and max still match

    # the plugin changed what it computes: every seed's configuration is another, each one listed
    monkeypatch.setattr(Seeded, "version", "9")
    stale = _reproduce_seeded(seeded_board, tmp_path / "third")
    assert stale.exit_code == 1 and "STALE" in stale.output
    for seed in (0, 1, 2):
        assert f'seed {seed}: retriever.version: "0" → "9"' in stale.output, stale.output
