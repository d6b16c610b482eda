"""The library API: `harness.evaluate` and `harness.train` are `harness run` and `harness train`
as functions, with retrievers and datasets given by name or constructed by the caller."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import harness
from harness.testing import Components, OverlapRetriever, TinyDataset, plugin_manager


class Reversed(harness.Retriever):
    """Defined here as in a notebook: registered by no plugin. Ranks candidates by descending id."""

    name = "reversed"
    version = "2"

    class Options(harness.Options):
        depth: int = 3

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        self.ids = np.sort(skb.candidate_ids)[::-1]

    def search(self, queries, k, top_ranked=None):  # type: ignore[no-untyped-def]
        top = self.ids[: min(k, self.options.depth)]
        return [harness.Ranking(top, np.arange(len(top), 0, -1, dtype=np.float64)) for _ in queries]


def test_evaluate_by_name_is_what_the_command_line_runs(tmp_path: Path) -> None:
    plugins = plugin_manager(Components([OverlapRetriever]))
    outcome = harness.evaluate(
        "overlap", "tiny", "test", k=3, metrics=["hit@1", "mrr"], output_dir=tmp_path / "a", plugins=plugins
    )
    assert outcome.row.retriever.name == "overlap" and outcome.row.num_queries == 6
    assert set(outcome.row.metrics) == {"hit@1", "mrr"}
    # the same configuration through the runner the CLI uses: the same run directory name, the same numbers
    spec = harness.api.plan("overlap", "tiny", "test", k=3, metrics=["hit@1", "mrr"], plugins=plugins)
    again = harness.api.runner(output_dir=tmp_path / "b", plugins=plugins, device="cpu").run(spec)
    assert again.run_dir.name == outcome.run_dir.name and again.row.metrics == outcome.row.metrics
    # running it again resumes: nothing is searched twice
    resumed = harness.evaluate(
        "overlap", "tiny", "test", k=3, metrics=["hit@1", "mrr"], output_dir=tmp_path / "a", plugins=plugins
    )
    assert resumed.resumed_queries == 6 and resumed.row.metrics == outcome.row.metrics
    # the plugin's class constructed by the caller is the same configuration: it resumes the same run
    given = harness.evaluate(
        OverlapRetriever(), "tiny", "test", k=3, metrics=["hit@1", "mrr"], output_dir=tmp_path / "a", plugins=plugins
    )
    assert given.row.retriever == outcome.row.retriever and given.run_dir == outcome.run_dir


def test_a_retriever_constructed_by_the_caller_is_run_and_recorded(tmp_path: Path) -> None:
    plugins = plugin_manager()
    outcome = harness.evaluate(Reversed(depth=2), TinyDataset(), "test", k=2, output_dir=tmp_path, plugins=plugins)
    row = outcome.row
    assert (row.retriever.name, row.retriever.version, row.retriever.params) == ("reversed", "2", {"depth": 2})
    # registered by no plugin: recorded by its import path, never as a plugin's component
    assert row.retriever.plugin == f"{Reversed.__module__}:Reversed" and row.retriever.package is None
    assert row.dataset.name == "tiny"
    ranked = [json.loads(line)["ids"] for line in (outcome.run_dir / "results.jsonl").read_text().splitlines()]
    candidates = sorted(TinyDataset().load_skb().candidate_ids.tolist(), reverse=True)
    assert ranked == [candidates[:2]] * 6
    # another parameter is another configuration, never the earlier results
    other = harness.evaluate(Reversed(depth=1), TinyDataset(), "test", k=2, output_dir=tmp_path, plugins=plugins)
    assert other.run_dir != outcome.run_dir and other.resumed_queries == 0


def test_a_notebook_class_named_like_a_plugin_is_not_taken_for_it(tmp_path: Path) -> None:
    class Impostor(Reversed):
        name = "overlap"

    plugins = plugin_manager(Components([OverlapRetriever]))
    real = harness.evaluate("overlap", "tiny", "test", k=3, output_dir=tmp_path, plugins=plugins)
    other = harness.evaluate(Impostor(), "tiny", "test", k=3, output_dir=tmp_path, plugins=plugins)
    assert other.row.retriever.plugin.endswith("Impostor") and other.run_dir != real.run_dir
    assert other.resumed_queries == 0


def test_bad_requests_are_one_clear_error(tmp_path: Path) -> None:
    plugins = plugin_manager()
    with pytest.raises(harness.HarnessError, match="unknown retriever 'nope'"):
        harness.evaluate("nope", "tiny", "test", output_dir=tmp_path, plugins=plugins)
    with pytest.raises(harness.HarnessError, match="constructor"):
        harness.evaluate(Reversed(), "tiny", "test", params={"depth": 1}, output_dir=tmp_path, plugins=plugins)
    with pytest.raises(harness.HarnessError, match="is not trained"):
        harness.train(Reversed(), "tiny", plugins=plugins)
    assert not list(tmp_path.iterdir())  # nothing was written for requests refused up front
