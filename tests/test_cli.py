"""The command line, driven through click's runner (and once as a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import OverlapRetriever, installed_alone

import harness
from harness.cli import cli
from harness.plugins import PluginManager
from harness.testing import TinyDataset

PRESETS = """
defaults: {dataset: tiny, retriever: overlap, split: test, k: 3, metrics: [hit@1, mrr]}
datasets:
  tiny: {plugin: tiny, splits: [train, test]}
retrievers:
  overlap: {plugin: overlap}
  overlap-relations: {plugin: overlap, params: {with_relations: true}}
  overlap-strict: {plugin: overlap, params: {min_overlap: 2}}
conditions:
  - name: overlap/tiny/test
    retriever: overlap
    dataset: tiny
    split: test
    k: 3
    expected: {hit@1: 0.666667, mrr: 0.666667}
    tolerance: 0.0001
  - name: overlap/tiny/train
    retriever: overlap
    dataset: tiny
    split: train
    k: 3
    expected: {hit@1: 1.0, mrr: 1.0}
    tolerance: 0.0001
"""


class Unreachable(harness.Dataset):
    """A dataset whose files are missing, as a real one's are before they are downloaded."""

    name = "unreachable"

    def load_skb(self) -> harness.SKB:
        raise harness.HarnessError("the unreachable data directory /nowhere does not exist")

    def load_queries(self) -> harness.QuerySet:
        raise harness.HarnessError("the unreachable data directory /nowhere does not exist")


@pytest.fixture
def fake_plugin(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> PluginManager:
    """The process-wide plugin manager with no installed plugin, only the tiny dataset, a
    dataset that cannot load and the overlap retriever."""
    directory = tmp_path_factory.mktemp("fake-plugin")
    return installed_alone(
        monkeypatch, directory, PRESETS, [TinyDataset, Unreachable], [OverlapRetriever], "fake-plugin"
    )


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.usefixtures("fake_plugin")
def test_default_run_dry_run_and_check(tmp_path: Path) -> None:
    code, out, _ = invoke("run", "--dry-run")
    assert code == 0 and "would run overlap on tiny/test (k=3)" in out and "condition overlap/tiny/test" in out
    code, out, _ = invoke("run", "--all", "--dry-run", "--format", "json")
    runs = [d["run"] for d in json.loads(out)]
    assert runs == ["overlap on tiny/train (k=3)", "overlap on tiny/test (k=3)"]
    code, out, _ = invoke("run", "--check", "--format", "json")
    assert code == 0, out
    result = json.loads(out)[0]
    assert all(c["ok"] for c in result["checks"]) and len(result["checks"]) == 2
    # the run directory holds the row; nothing is written into a leaderboard unless asked
    assert result["row_path"] is None and not (tmp_path / "leaderboard").exists()
    assert (Path(result["run_dir"]) / "row.json").exists() and (Path(result["run_dir"]) / "qrels.trec").exists()


@pytest.mark.usefixtures("fake_plugin")
def test_check_fails_when_expected_scores_are_missed(tmp_path: Path) -> None:
    _, out, _ = invoke("list", "--format", "json")
    [condition] = [c for c in json.loads(out)["conditions"] if c["name"] == "overlap/tiny/test"]
    condition["expected"]["hit@1"] = 0.9
    (tmp_path / "registry.yaml").write_text(json.dumps({"conditions": [condition]}))  # ./registry.yaml wins
    code, out, _ = invoke("run", "--check")
    assert code == 1 and "FAIL hit@1: expected 90.0000" in out and "OK mrr" in out


@pytest.mark.usefixtures("fake_plugin")
def test_all_keeps_going_when_one_dataset_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "registry.yaml").write_text("datasets:\n  far: {plugin: unreachable, splits: [test, train]}\n")
    code, out, err = invoke("run", "--all", "--format", "json")
    assert code == 2
    assert [r["row"]["dataset"]["name"] for r in json.loads(out)] == ["tiny", "tiny"]
    assert "error: 2 of 4 runs failed" in err and "unreachable data directory" in err


@pytest.mark.usefixtures("fake_plugin")
def test_param_overrides_a_retriever_parameter_like_a_registry_entry() -> None:
    _, out, _ = invoke("run", "-r", "overlap-strict", "--format", "json")
    [entry] = json.loads(out)
    code, out, _ = invoke("run", "-r", "overlap", "-p", "min_overlap=2", "--format", "json")
    [overridden] = json.loads(out)
    assert code == 0 and overridden["row"]["retriever"]["params"] == entry["row"]["retriever"]["params"]
    assert overridden["row"]["retriever"]["name"] == "overlap"  # the row says which entry it overrode
    assert overridden["row"]["metrics"] == entry["row"]["metrics"]
    assert overridden["row"]["config_hash"] != json.loads(invoke("run", "--format", "json")[1])[0]["row"]["config_hash"]
    # the condition's expected scores are the entry's, so an override is not checked against them
    _, out, _ = invoke("run", "-p", "min_overlap=1", "--check", "--format", "json")
    assert json.loads(out)[0]["checks"] == []
    for args, message in [
        (["-p", "min_overlap"], "'min_overlap': expected KEY=VALUE"),
        (["-p", "min_overlap=[1"], "the value is not YAML"),
        (["-p", "min_overlap=1\x01"], "the value is not YAML (unacceptable character"),  # a ReaderError
        (["-p", "min_overlap=many"], "min_overlap"),
        (["-p", "colour=red"], "colour"),
    ]:
        code, out, err = invoke("run", *args)
        assert code != 0 and message in out + err, (args, out + err)


@pytest.mark.usefixtures("fake_plugin")
def test_errors_are_one_line_without_traceback() -> None:
    for args, message in [
        (["run", "--retriever", "nope"], "error: unknown retriever 'nope'; known: "),
        (["run", "--k", "0"], "error: k must be a positive integer, got 0"),
        (["run", "--registry", "missing.yaml"], "error: registry file missing.yaml does not exist"),
        (["describe", "nope"], "error: unknown dataset 'nope'"),
        (["plugins", "--hook", "register_nothing"], "error: unknown hook 'register_nothing'"),
    ]:
        code, _, err = invoke(*args)
        assert code == 2 and err.strip().startswith(message), (args, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err


@pytest.mark.usefixtures("fake_plugin")
def test_list_and_plugins() -> None:
    code, out, _ = invoke("list", "--format", "json")
    data = json.loads(out)
    assert data["datasets"]["tiny"]["splits"] == ["train", "test"]
    assert set(data["retrievers"]) == {"overlap", "overlap-relations", "overlap-strict"}
    code, _, err = invoke("run", "--retriever", "nope")
    assert "known: overlap, overlap-relations, overlap-strict" in err
    assert {"hit@k", "recall@k", "mrr[@k]", "rprecision"} <= set(data["metrics"])
    assert [c["name"] for c in data["conditions"]] == ["overlap/tiny/test", "overlap/tiny/train"]
    code, out, _ = invoke("list")
    assert code == 0 and "conditions" in out and "overlap/tiny/train" in out
    code, out, _ = invoke("plugins", "--hook", "register_datasets")
    assert [p["name"] for p in json.loads(out)] == ["fake-plugin"]


@pytest.mark.usefixtures("fake_plugin")
def test_describe_a_dataset() -> None:
    _, out, _ = invoke("describe", "tiny", "--format", "json")
    info = json.loads(out)
    assert info["nodes_by_type"] == {"product": 5, "brand": 2} and info["candidates"] == 5
    assert info["edges_by_type"] == {"made_by": 5, "similar": 3}
    assert info["queries"] == {"test": 6, "train": 4}


@pytest.mark.usefixtures("fake_plugin")
def test_leaderboard_show_formats(tmp_path: Path) -> None:
    invoke("run", "--leaderboard", "board")
    code, out, _ = invoke("leaderboard", "show", "board", "--format", "markdown", "--metrics", "hit@1,mrr")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "| dataset | split | retriever | n | hit@1 | mrr | ms/query | regime | date |"
    assert lines[2].startswith("| tiny | test | overlap | 6 | 66.67 | 66.67 |")
    code, out, _ = invoke("leaderboard", "show", "board")
    assert code == 0 and "overlap" in out
    code, out, _ = invoke("leaderboard", "schema")
    assert json.loads(out)["title"] == "LeaderboardRow"


def test_evaluate_trec_files(tmp_path: Path) -> None:
    (tmp_path / "run.trec").write_text(
        "q1 Q0 d3 1 3.0 x\nq1 Q0 d1 2 2.0 x\nq1 Q0 d2 3 1.0 x\n"
        "q2 Q0 d9 1 1.0 x\nq2 Q0 d8 2 5.0 x\n"  # trec_eval orders by score, not by the rank column
    )
    (tmp_path / "qrels.trec").write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d9 2\nq3 0 d4 1\n")
    code, out, _ = invoke(
        "evaluate",
        "--run",
        "run.trec",
        "--qrels",
        "qrels.trec",
        "--metrics",
        "hit@1,mrr,recall@2",
        "--format",
        "json",
        "--per-query",
    )
    data = json.loads(out)
    # as trec_eval: the mean over the queries the run answers; q3 is missing, said on stderr
    assert data["queries"] == 2 and data["qrels_queries"] == 3 and data["queries_missing_from_run"] == 1
    assert data["per_query"]["q1"] == {"hit@1": 0.0, "mrr": 0.5, "recall@2": 1.0}
    assert data["per_query"]["q2"] == {"hit@1": 0.0, "mrr": 0.5, "recall@2": 1.0}
    assert data["metrics"]["mrr"] == pytest.approx(1 / 2)
    code, out, _ = invoke(
        "evaluate", "--run", "run.trec", "--qrels", "qrels.trec", "--metrics", "mrr", "--format", "json", "--complete"
    )
    assert json.loads(out)["queries"] == 3 and json.loads(out)["metrics"]["mrr"] == pytest.approx(1 / 3)  # trec_eval -c
    (tmp_path / "bad.trec").write_text("q1 Q0 d1 1\n")
    code, _, err = invoke("evaluate", "--run", "bad.trec", "--qrels", "qrels.trec")
    assert code == 2 and "bad.trec:1: a run line has 6 columns" in err


def test_the_console_script_lists_every_command() -> None:
    harness = Path(sys.executable).with_name("harness")
    result = subprocess.run([harness, "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1]
    listed = {line.split()[0] for line in commands.splitlines() if line.strip()}
    assert {"run", "list", "plugins", "describe", "stats", "evaluate", "compare", "submit", "leaderboard"} <= listed
    assert "--plugins-dir" in result.stdout
    result = subprocess.run([harness, "leaderboard", "--help"], capture_output=True, text=True, check=True)
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()}
    commands = {"show", "schema", "validate", "merge", "withdraw", "migrate", "publish", "reproduce", "regenerate"}
    assert listed == commands
    result = subprocess.run([harness, "nope"], capture_output=True, text=True)
    assert result.returncode == 2 and "No such command 'nope'" in result.stderr


def test_the_built_in_commands_are_plugins() -> None:
    _, out, _ = invoke("plugins", "--hook", "register_commands")
    builtin = {p["name"] for p in json.loads(out) if p.get("builtin")}
    assert {"harness.cli.run", "harness.cli.inspect", "harness.cli.leaderboard", "harness.cli.submit"} <= builtin


@pytest.mark.usefixtures("fake_plugin")
def test_all_runs_the_datasets_it_can_when_one_plugin_failed_to_load(tmp_path: Path) -> None:
    registry = tmp_path / "r.yaml"
    registry.write_text(
        "defaults: {retriever: overlap, split: test, k: 3}\n"
        "datasets:\n  gone: {plugin: gone-plugin, splits: [test]}\n  tiny: {plugin: tiny, splits: [test]}\n"
        "retrievers:\n  overlap: {plugin: overlap}\n"
    )
    result = CliRunner().invoke(
        cli,
        ["run", "--all", "--registry", str(registry), "--no-leaderboard", "--metrics", "hit@1,mrr", "--format", "json"],
    )
    assert result.exit_code == 2, result.output
    assert "1 of 2 runs failed" in result.output and "gone/test: unknown dataset 'gone-plugin'" in result.output
    assert (tmp_path / "runs").is_dir() and any(
        p.name.startswith("tiny-test-overlap-") for p in (tmp_path / "runs").iterdir()
    )


def test_a_plugin_exception_is_one_line_with_its_file_and_line(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "boom_plugin.py"
    plugin.parent.mkdir()
    plugin.write_text(
        "import harness\n\n"
        "class Boom(harness.Retriever):\n"
        "    name = 'boom'\n"
        "    def build(self, skb, context):\n"
        "        pass\n"
        "    def search(self, queries, k, top_ranked=None):\n"
        "        raise KeyError('no such field')\n\n"
        "@harness.hookimpl\n"
        "def register_retrievers(register):\n"
        "    register(Boom)\n\n"
        "@harness.hookimpl\n"
        "def register_datasets(register):\n"
        "    from harness.testing import TinyDataset\n\n"
        "    register(TinyDataset)\n"
    )
    harness = str(Path(sys.executable).with_name("harness"))
    args = [
        harness,
        "--plugins-dir",
        "plugins",
        "run",
        "-r",
        "boom",
        "-d",
        "tiny",
        "--split",
        "train",
        "--sample",
        "0.5",
    ]
    env = {**os.environ, "HARNESS_PLUGINS": ""}  # the file's plugin alone
    short = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert short.returncode == 2
    last = short.stderr.strip().splitlines()[-1]
    assert last.startswith("error: retriever 'boom' failed on queries") and "KeyError" in last
    assert last.endswith(f"(at {plugin}:8 in search)") and "Traceback" not in short.stderr
    full = subprocess.run([harness, "--traceback", *args[1:]], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert "Traceback (most recent call last)" in full.stderr and full.returncode == 2


# -- single-file plugins, and what `list` shows -------------------------------------------------
SINGLE_FILE_PLUGIN = """
import numpy as np
from pydantic import Field

import harness


class Three(harness.Dataset):
    name = "three"

    def load_skb(self):
        return harness.SKB(
            name="three", node_type_names=["doc"], node_types=np.zeros(3), names=["a", "b", "c"],
            fields=[{}, {}, {}], edge_types=[], src=np.zeros(0), dst=np.zeros(0), edge_type=np.zeros(0),
        )

    def load_queries(self):
        return harness.QuerySet("three", {"test": [harness.Query(1, "a", (0,)), harness.Query(2, "b", (2,))]})


class InOrder(harness.Retriever):
    name = "in-order"

    class Options(harness.Options):
        depth: int = Field(5, gt=0, description="how many candidates to return at most")

    def build(self, skb, context):
        self.ids = skb.candidate_ids[: self.options.depth]

    def search(self, queries, k, top_ranked=None):
        ids = self.ids[:k]
        return [harness.Ranking(ids, -np.arange(len(ids), dtype=float)) for _ in queries]


class Reverse(harness.Reranker):
    name = "reverse"

    def rerank(self, queries, candidates, k):
        return [harness.Ranking(c.ids[::-1][:k], np.arange(len(c.ids), dtype=float)[:k]) for c in candidates]


@harness.hookimpl
def register_datasets(register):
    register(Three)


@harness.hookimpl
def register_retrievers(register):
    register(InOrder)
    register(Reverse)
"""


@pytest.fixture
def plugins_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with one single-file plugin; no entry-point plugin loads."""
    from harness.plugins import DIRS_ENV_VAR

    monkeypatch.setenv("HARNESS_PLUGINS", "")
    monkeypatch.setenv(DIRS_ENV_VAR, "")  # restored after the test, whatever --plugins-dir sets
    directory = tmp_path / "my-plugins"
    directory.mkdir()
    (directory / "three.py").write_text(SINGLE_FILE_PLUGIN)
    return directory


def test_a_single_file_plugin_loads_with_plugins_dir(plugins_dir: Path, tmp_path: Path) -> None:
    harness = str(Path(sys.executable).with_name("harness"))
    listed = subprocess.run(
        [harness, "--plugins-dir", str(plugins_dir), "list", "--format", "json"], capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert set(data["retrievers"]) == {"in-order"} and set(data["datasets"]) == {"three"}
    without = json.loads(subprocess.run([harness, "list", "--format", "json"], capture_output=True, text=True).stdout)
    assert without["retrievers"] == {} and without["datasets"] == {}
    run = ["run", "-r", "in-order", "-d", "three", "--k", "2", "--metrics", "hit@1,mrr", "--format", "json"]
    ran = subprocess.run(
        [harness, "--plugins-dir", str(plugins_dir), *run],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    [outcome] = json.loads(ran.stdout)
    assert outcome["row"]["metrics"] == {"hit@1": 0.5, "mrr": 0.5}
    assert outcome["row"]["retriever"]["params"] == {"depth": 5}
    # in-process too: the option takes effect before the command is looked up
    code, out, _ = invoke("--plugins-dir", str(plugins_dir), "list", "--format", "json")
    assert code == 0 and set(json.loads(out)["retrievers"]) == {"in-order"}
    code, _, err = invoke("--plugins-dir", str(tmp_path / "nowhere"), "list")
    assert code == 2 and "does not exist" in err


def test_list_hides_what_cannot_run_and_says_why(plugins_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "registry.yaml").write_text(
        "datasets:\n  three-copy: {plugin: three}\n  gone: {plugin: not-installed}\n"
        "retrievers:\n"
        "  shallow: {plugin: in-order, params: {depth: 2}}\n"
        "  broken: {plugin: in-order, params: {depth: 0}}\n"
        "  typo: {plugin: in-order, params: {deep: 2}}\n"
        "  ghost: {plugin: not-installed}\n"
        "  reverse-shallow: {plugin: reverse, params: {first_stage: shallow, candidates: 2}}\n"
        "  reverse-ghost: {plugin: reverse, params: {first_stage: ghost}}\n"
        "conditions:\n"
        "  - {name: ok, retriever: shallow, dataset: three-copy, split: test}\n"
        "  - {name: not-ok, retriever: ghost, dataset: three, split: test}\n"
    )
    code, out, _ = invoke("--plugins-dir", str(plugins_dir), "list", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert set(data["datasets"]) == {"three-copy", "three"}
    assert set(data["retrievers"]) == {"shallow", "reverse-shallow", "in-order"}
    assert data["retrievers"]["reverse-shallow"]["uses"] == ["shallow"]
    assert [c["name"] for c in data["conditions"]] == ["ok"]
    hidden = {h["name"]: h["reason"] for h in data["hidden"]}
    assert hidden == {
        "gone": "its plugin is not installed",
        "ghost": "its plugin is not installed",
        "broken": "invalid parameters",
        "typo": "invalid parameters",
        "reverse-ghost": "uses a retriever that cannot run",
        "reverse": "needs parameters (a registry entry gives them)",
        "not-ok": "names an entry that cannot run",
    }
    assert "depth: Input should be greater than 0" in next(h["error"] for h in data["hidden"] if h["name"] == "broken")
    code, out, _ = invoke("--plugins-dir", str(plugins_dir), "list")
    assert code == 0
    [line] = [line for line in out.splitlines() if "hidden" in line]
    assert line.startswith("7 hidden because they cannot run here: ")
    assert "its plugin is not installed (2)" in line and "invalid parameters (2)" in line
    assert "reverse-ghost" not in out and "reverse-shallow" in out


def test_list_params_prints_what_components_declare(plugins_dir: Path) -> None:
    code, out, _ = invoke("--plugins-dir", str(plugins_dir), "list", "--params", "--format", "json")
    assert code == 0
    params = json.loads(out)["params"]
    assert params["retriever"]["in-order"]["params"] == [
        {"name": "depth", "type": "int", "default": 5, "description": "how many candidates to return at most"}
    ]
    assert [p["name"] for p in params["retriever"]["reverse"]["params"]] == ["first_stage", "candidates"]
    assert params["retriever"]["reverse"]["params"][0]["default"] == "(required)"
    assert params["dataset"]["three"]["params"] == []
    code, out, _ = invoke("--plugins-dir", str(plugins_dir), "list", "--params")
    assert code == 0 and "how many candidates to return at most" in out and "(required)" in out


def test_with_no_plugins_list_shows_nothing_that_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    code, out, _ = invoke("list", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["datasets"] == {} and data["retrievers"] == {} and data["conditions"] == []
    assert data["hidden"] == [] and "hit@k" in data["metrics"]
    code, out, _ = invoke("list")
    assert code == 0 and "metrics: hit@k, map[@k]" in out and "hidden" not in out
