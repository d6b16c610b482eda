"""The runner end to end with fake plugins: outputs, resume, composition, parameters, bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from pydantic import Field

import harness
from harness.errors import HarnessError
from harness.leaderboard.rows import LeaderboardRow, read_rows, record_row
from harness.plugins import PluginManager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query
from harness.retriever import BuildContext, Ranking, Reranker, Retriever
from harness.run import Runner, resolve
from harness.run.registry import parse_registry
from harness.skb import SKB
from harness.trec import read_run

PLAIN_REGISTRY = """
defaults: {dataset: plain, retriever: lexical, split: test, k: 3}
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  lexical: {plugin: overlap}
"""


class FlakyRetriever(Retriever):
    """Returns nodes in id order; can be armed to fail after some calls."""

    name = "flaky"
    batch_size = 1
    fail_after: ClassVar[int | None] = None
    searched: ClassVar[list[int]] = []

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        if FlakyRetriever.fail_after is not None and len(FlakyRetriever.searched) >= FlakyRetriever.fail_after:
            raise RuntimeError("simulated crash")
        FlakyRetriever.searched.extend(q.id for q in queries)
        return [Ranking(self.ids[:k], np.arange(k, 0, -1)) for _ in queries]


class ReverseReranker(Reranker):
    """Reverses the first stage's order: easy to verify by hand."""

    name = "reverse"

    def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
        return [Ranking(c.ids[::-1][:k], np.arange(len(c.ids))[:k][::-1] + 1.0) for c in candidates]


class FlakyPlugin:
    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register(FlakyRetriever)
        register(ReverseReranker)


@pytest.fixture
def manager(plain_plugins: PluginManager) -> PluginManager:
    plain_plugins.register(FlakyPlugin(), "flaky-plugin")
    FlakyRetriever.fail_after = None
    FlakyRetriever.searched = []
    return plain_plugins


def _run(manager: PluginManager, tmp_path: Path, **kwargs):  # type: ignore[no-untyped-def]
    registry = parse_registry(PLAIN_REGISTRY, "test-registry.yaml")
    spec = resolve(registry, manager, **kwargs)
    runner = Runner(manager, output_dir=tmp_path / "runs", device="cpu")
    outcome = runner.run(spec)
    outcome.row_path = record_row(tmp_path / "lb", outcome.row)
    return outcome


def test_a_run_writes_row_runs_and_trec(manager: PluginManager, tmp_path: Path) -> None:
    outcome = _run(manager, tmp_path, metrics=["hit@1", "recall@3", "mrr"])
    row = outcome.row
    assert row.num_queries == 4 and row.k == 3 and row.regime == "zero-shot"
    # "kettle" has two answers; word overlap finds the obvious ones first
    assert row.metrics["hit@1"] == pytest.approx(1.0)
    assert row.metrics["recall@3"] == pytest.approx(1.0)
    # every parameter is recorded with the value that ran, defaults included
    assert row.retriever.params == {"with_relations": False, "min_overlap": 1}
    config = json.loads((outcome.run_dir / "config.json").read_text())
    assert config["retriever"] == row.retriever.configuration()
    saved = read_rows(tmp_path / "lb")
    assert [r.config_hash for r in saved] == [row.config_hash]
    merged = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert len(merged) == 1 and LeaderboardRow.model_validate(merged[0]) == saved[0]
    # The TREC run is readable and scores the same as the row
    run, per_query = read_run(outcome.run_dir / "run.trec"), outcome.run_dir / "per_query.jsonl"
    assert set(run) == {"1", "2", "3", "4"}
    lines = [json.loads(line) for line in per_query.read_text().splitlines()]
    assert np.mean([line["metrics"]["mrr"] for line in lines]) == pytest.approx(row.metrics["mrr"])


def test_same_configuration_replaces_row_never_duplicates(manager: PluginManager, tmp_path: Path) -> None:
    first = _run(manager, tmp_path)
    second = _run(manager, tmp_path)
    assert first.row.config_hash == second.row.config_hash
    assert second.resumed_queries == 4  # nothing searched again
    assert len(read_rows(tmp_path / "lb")) == 1
    other = _run(manager, tmp_path, k=2)
    assert other.row.config_hash != first.row.config_hash
    assert len(read_rows(tmp_path / "lb")) == 2


def test_interrupted_run_resumes_without_losing_or_double_counting(manager: PluginManager, tmp_path: Path) -> None:
    FlakyRetriever.fail_after = 2
    with pytest.raises(HarnessError, match=r"simulated crash.*resume"):
        _run(manager, tmp_path, retriever="flaky")
    run_dir = next((tmp_path / "runs").iterdir())
    results = run_dir / "results.jsonl"
    assert len(results.read_text().splitlines()) == 2
    with results.open("a") as handle:  # a write cut short by the crash
        handle.write('{"qid": 3, "ids": [0, 1')
    FlakyRetriever.fail_after = None
    outcome = _run(manager, tmp_path, retriever="flaky")
    assert outcome.resumed_queries == 2
    assert FlakyRetriever.searched == [1, 2, 3, 4]  # queries 3 and 4 searched once, after the resume
    qids = [json.loads(line)["qid"] for line in results.read_text().splitlines()]
    assert sorted(qids) == [1, 2, 3, 4]
    assert outcome.row.num_queries == 4


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"retriever": "nope"}, "unknown retriever 'nope'"),
        ({"dataset": "nope"}, "unknown dataset 'nope'"),
        ({"k": 0}, "k must be a positive integer"),
        ({"k": -3}, "k must be a positive integer"),
        ({"metrics": ["recall@0"]}, "positive"),
        ({"split": "val"}, "no split 'val'"),
    ],
)
def test_bad_requests_fail_with_one_clear_error(manager: PluginManager, tmp_path: Path, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(HarnessError, match=message):
        _run(manager, tmp_path, **kwargs)
    assert not (tmp_path / "lb").exists()


@pytest.mark.parametrize(
    "queries, message",
    [
        ([], "has no queries"),
        ([[1, "a", [0]], [1, "b", [1]]], "duplicate query id 1"),
        ([[1, "a", [0, 99]]], r"1 answer ids are not nodes of SKB 'plain' \(query 1: 99\)"),
    ],
)
def test_bad_query_sets(manager: PluginManager, tmp_path: Path, queries: list, message: str) -> None:
    registry = parse_registry(
        PLAIN_REGISTRY.replace(
            "{plugin: plain, splits: [test]}", f"{{plugin: plain, params: {{queries: {json.dumps(queries)}}}}}"
        ),
        "r.yaml",
    )
    runner = Runner(manager, output_dir=tmp_path / "runs", device="cpu")
    with pytest.raises(HarnessError, match=message):
        runner.run(resolve(registry, manager))


def test_device_cuda_without_gpu_is_a_clear_error(manager: PluginManager) -> None:
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    except ImportError:
        pass
    with pytest.raises(HarnessError, match="no CUDA device"):
        Runner(manager, device="cuda")


def test_edited_queries_get_a_new_configuration(manager: PluginManager, tmp_path: Path) -> None:
    first = _run(manager, tmp_path)
    registry = parse_registry(
        PLAIN_REGISTRY.replace(
            "{plugin: plain, splits: [test]}", '{plugin: plain, params: {queries: [[1, "red kettle", [0]]]}}'
        ),
        "r.yaml",
    )
    runner = Runner(manager, output_dir=tmp_path / "runs", device="cpu")
    second = runner.run(resolve(registry, manager))
    assert second.row.config_hash != first.row.config_hash and second.resumed_queries == 0


def test_reranker_is_composed_with_its_first_stage(manager: PluginManager, tmp_path: Path) -> None:
    text = PLAIN_REGISTRY + "  reverse: {plugin: reverse, first_stage: flaky, candidates: 3}\n"
    registry = parse_registry(text, "r.yaml")
    spec = resolve(registry, manager, retriever="reverse", k=2)
    outcome = Runner(manager, output_dir=tmp_path / "runs", device="cpu").run(spec)
    # flaky returns candidates 0, 1, 2; the reranker reverses them and keeps k=2
    run = read_run(outcome.run_dir / "run.trec")
    assert run["1"] == ["2", "1"]
    # one composition mechanism: the first stage is a parameter and what the reranker uses
    assert outcome.row.retriever.params == {"first_stage": "flaky", "candidates": 3}
    assert [info.name for info in outcome.row.uses] == ["flaky"]
    assert spec.describe() == "flaky → reverse on plain/test (k=2)"
    bare = parse_registry(PLAIN_REGISTRY + "  reverse: {plugin: reverse}\n", "r.yaml")
    with pytest.raises(HarnessError, match=r"retriever 'reverse': bad parameters: first_stage: Field required"):
        resolve(bare, manager, retriever="reverse")


@pytest.mark.parametrize(
    "line",
    [
        '{"qid": 3, "ids": ["x"], "scores": [1.0], "latency_ms": 1.0}\n',  # valid JSON, wrong shape
        '{"qid": 3, "ids": [0, 1], "scores": [1.0], "latency_ms": 1.0}\n',  # lengths differ
        '{"qid": "3", "ids": [0], "scores": [1.0], "latency_ms": 1.0}\n',
        '{"qid": 3, "ids": [0], "scores": [NaN], "latency_ms": 1.0}\n',
        "[1, 2, 3]\n",
    ],
)
def test_a_foreign_resume_log_line_is_cut_and_searched_again(manager: PluginManager, tmp_path: Path, line: str) -> None:
    first = _run(manager, tmp_path, retriever="flaky")
    results = first.run_dir / "results.jsonl"
    kept = results.read_text().splitlines(keepends=True)[:2]
    results.write_text("".join(kept) + line + '{"qid": 4, "ids": [0], "scores": [1.0], "latency_ms": 1.0}\n')
    (first.run_dir / "build.json").write_text('{"seconds": 1.')  # cut short too
    FlakyRetriever.searched = []
    again = _run(manager, tmp_path, retriever="flaky")
    assert again.resumed_queries == 2 and sorted(FlakyRetriever.searched) == [3, 4]
    assert any("cut at byte" in note for note in again.notes)
    assert again.row.metrics == first.row.metrics


def test_an_empty_or_undecodable_registry_is_an_error_not_a_silent_fallback(tmp_path: Path) -> None:
    from harness.run.registry import load_registry

    (tmp_path / "registry.yaml").write_text("")
    with pytest.raises(HarnessError, match="the registry is empty; delete it to use the plugins' presets"):
        load_registry()
    (tmp_path / "registry.yaml").write_bytes("datasets: {caf\xe9: {plugin: x}}\n".encode("latin-1"))
    with pytest.raises(HarnessError, match=r"cannot read registry registry.yaml \(UTF-8 YAML expected\)"):
        load_registry()


def test_temporary_files_of_a_killed_process_are_cleaned_by_the_next_write(tmp_path: Path) -> None:
    import subprocess
    import sys

    from harness.io import atomic_write, temp_prefix

    target = tmp_path / "run.trec"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has exited: what a kill -9 leaves looks like this
    (tmp_path / f".run.trec.{pid}.abc123.tmp").write_text("half a file")
    (tmp_path / f".run.trec.{pid}.def456.tmp").mkdir()
    mine = tmp_path / f"{temp_prefix(target)}ghi789.tmp"  # this process is alive: not touched
    mine.write_text("in progress")
    with atomic_write(target) as handle:
        handle.write("1 Q0 a 1 1.0 x\n")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["run.trec", mine.name])
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", f"leaderboard/rows/.x.json.{pid}.abc.tmp"], cwd=Path(__file__).parent.parent
    )
    assert ignored.returncode == 0


class EndpointRetriever(FlakyRetriever):
    """Records the endpoint it was built with (as a plugin talking to a server would)."""

    name = "endpoint"
    seen: ClassVar[list[str]] = []

    class Options(harness.Options):
        endpoint: str = ""
        llm_params: dict = Field(default_factory=dict)

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        EndpointRetriever.seen.append(self.options.endpoint)


def test_credentials_never_reach_what_is_written(manager: PluginManager, tmp_path: Path) -> None:
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):  # type: ignore[no-untyped-def]
            register(EndpointRetriever)

    manager.register(Plugin(), "endpoint-plugin")
    secret = PLAIN_REGISTRY + "  keyed: {plugin: endpoint, params: {llm_params: {api_key: sk-live-123}}}\n"
    with pytest.raises(HarnessError, match=r"parameter 'llm_params.api_key' holds a credential.*environment"):
        Runner(manager, output_dir=tmp_path / "runs", device="cpu").run(
            resolve(parse_registry(secret, "r.yaml"), manager, retriever="keyed")
        )
    url = PLAIN_REGISTRY + '  remote: {plugin: endpoint, params: {endpoint: "https://me:hunter2@127.0.0.1:9/v1"}}\n'
    EndpointRetriever.seen = []
    outcome = Runner(manager, output_dir=tmp_path / "runs", device="cpu").run(
        resolve(parse_registry(url, "r.yaml"), manager, retriever="remote")
    )
    record_row(tmp_path / "lb", outcome.row)  # as `harness run --leaderboard lb` does
    assert "https://me:hunter2@127.0.0.1:9/v1" in EndpointRetriever.seen  # the plugin gets the real URL
    assert outcome.row.retriever.params["endpoint"] == "https://***@127.0.0.1:9/v1"
    written = [p for p in [*outcome.run_dir.rglob("*"), *(tmp_path / "lb").rglob("*")] if p.is_file()]
    assert written and not [p for p in written if b"hunter2" in p.read_bytes()]


SLOW_PLUGIN = """
import time

import numpy as np

import harness


class Sixty(harness.Dataset):
    name = "sixty"

    def load_skb(self):
        from helpers import plain_skb

        return plain_skb()

    def load_queries(self):
        words = ["kettle", "pot", "teapot", "pan", "red", "copper"]
        queries = [harness.Query(i, words[i % 6] + " " + str(i), (i % 5,)) for i in range(60)]
        return harness.QuerySet("sixty", {"test": queries})


class Slow(harness.Retriever):
    name = "slow"
    batch_size = 1

    def build(self, skb, context):
        self.ids = skb.candidate_ids

    def search(self, queries, k, top_ranked=None):
        time.sleep(0.02)
        return [harness.Ranking(np.roll(self.ids, q.id)[:k], np.arange(k, 0, -1)) for q in queries]


@harness.hookimpl
def register_datasets(register):
    register(Sixty)


@harness.hookimpl
def register_retrievers(register):
    register(Slow)
"""


def test_two_processes_on_one_configuration_give_the_reference_metrics(tmp_path: Path) -> None:
    """Started together, the second waits for the first's lock and resumes from its results:
    no query searched twice, none counted twice, the same row. (The plugin is one file in a
    plugins directory, loaded with no installed plugins.)"""
    import os
    import subprocess
    import sys

    plugins_dir = tmp_path / "plugins"
    plugins_dir.mkdir()
    (plugins_dir / "slow.py").write_text(SLOW_PLUGIN)
    env = {
        **os.environ,
        "HARNESS_PLUGINS": "",
        "HARNESS_PLUGINS_DIR": str(plugins_dir),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }
    harness = [sys.executable, "-c", "from harness.cli import main; main()"]
    args = ["run", "-r", "slow", "-d", "sixty", "--k", "3", "--metrics", "hit@1,recall@3,mrr", "--format", "json"]
    reference = subprocess.run([*harness, *args, "--output", "reference"], capture_output=True, text=True, env=env)
    assert reference.returncode == 0, reference.stderr
    both = [
        subprocess.Popen([*harness, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in "ab"
    ]
    outputs = [p.communicate(timeout=600) for p in both]
    assert [p.returncode for p in both] == [0, 0], [err for _, err in outputs]
    expected = json.loads(reference.stdout)[0]["row"]["metrics"]
    for out, _ in outputs:
        assert json.loads(out)[0]["row"]["metrics"] == expected
    [run_dir] = list((tmp_path / "runs").iterdir())
    qids = [json.loads(line)["qid"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(qids) == len(set(qids)) == 60


class Paying(FlakyRetriever):
    """Reports a call and a cost per query searched (as an API retriever would)."""

    name = "paying"

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self.calls = 0

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        rankings = super().search(queries, k)
        self.calls += len(queries)
        return rankings

    def usage(self) -> dict[str, object]:
        return {"calls": self.calls, "cost_usd": 0.25 * self.calls, "model": "m"}


def test_a_resumed_run_reports_what_every_session_spent(manager: PluginManager, tmp_path: Path) -> None:
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):  # type: ignore[no-untyped-def]
            register(Paying)

    manager.register(Plugin(), "paying-plugin")
    FlakyRetriever.fail_after = 3
    with pytest.raises(HarnessError, match="simulated crash"):
        _run(manager, tmp_path, retriever="paying")
    FlakyRetriever.fail_after = None
    resumed = _run(manager, tmp_path, retriever="paying")
    assert resumed.resumed_queries == 3
    assert resumed.row.usage == {"calls": 4, "cost_usd": 1.0, "model": "m"}
    again = _run(manager, tmp_path, retriever="paying")  # nothing left to search: nothing new spent
    assert again.resumed_queries == 4 and again.row.usage == resumed.row.usage


def test_a_condition_applies_only_to_its_own_depth_and_sample(manager: PluginManager, tmp_path: Path) -> None:
    text = PLAIN_REGISTRY + "conditions:\n  - {name: c, retriever: lexical, dataset: plain, split: test, k: 3}\n"
    registry = parse_registry(text, "r.yaml")
    assert resolve(registry, manager).condition is not None
    assert resolve(registry, manager, k=2).condition is None
    assert resolve(registry, manager, sample_fraction=0.5).condition is None


class Pinned(FlakyRetriever):
    """Reports, after its build, the commit its model resolved to (as a retriever of a hub id does)."""

    name = "pinned"
    commit: ClassVar[str] = "1" * 40
    built: ClassVar[int] = 0

    def build(self, skb: SKB, context: BuildContext) -> None:
        super().build(skb, context)
        self.resolved = Pinned.commit  # what the branch points to at build time
        Pinned.built += 1

    def provenance(self) -> dict[str, object]:
        return {"model_repo": "org/model", "model_revision": self.resolved}


@pytest.fixture
def pinned(manager: PluginManager) -> PluginManager:
    class Plugin:
        @hookimpl
        def register_retrievers(self, register):  # type: ignore[no-untyped-def]
            register(Pinned)

    manager.register(Plugin(), "pinned-plugin")
    Pinned.commit, Pinned.built = "1" * 40, 0
    return manager


def test_provenance_is_recorded_after_the_build_outside_the_configuration(
    pinned: PluginManager, tmp_path: Path
) -> None:
    first = _run(pinned, tmp_path, retriever="pinned")
    assert first.row.retriever.provenance == {"model_repo": "org/model", "model_revision": "1" * 40}
    config = json.loads((first.run_dir / "config.json").read_text())
    assert "provenance" not in config["retriever"]  # known only once built: never hashed
    build = json.loads((first.run_dir / "build.json").read_text())
    assert build["provenance"] == {"pinned": {"model_repo": "org/model", "model_revision": "1" * 40}}
    # the row as written and read back keeps it; a reranker's first stage reports its own
    assert read_rows(tmp_path / "lb")[0].retriever.provenance == first.row.retriever.provenance
    text = PLAIN_REGISTRY + "  reverse: {plugin: reverse, first_stage: pinned, candidates: 3}\n"
    spec = resolve(parse_registry(text, "r.yaml"), pinned, retriever="reverse", k=2)
    composed = Runner(pinned, output_dir=tmp_path / "runs", device="cpu").run(spec)
    assert composed.row.retriever.provenance == {}
    assert composed.row.uses[0].provenance == first.row.retriever.provenance
    # another commit of the same parameters is the same configuration, told apart by provenance
    Pinned.commit = "2" * 40
    moved = Runner(pinned, output_dir=tmp_path / "other", device="cpu").run(
        resolve(parse_registry(PLAIN_REGISTRY, "r.yaml"), pinned, retriever="pinned")
    )
    assert moved.row.config_hash == first.row.config_hash
    assert moved.row.retriever.provenance["model_revision"] == "2" * 40


def test_a_resumed_run_whose_model_moved_is_refused(pinned: PluginManager, tmp_path: Path) -> None:
    FlakyRetriever.fail_after = 2
    with pytest.raises(HarnessError, match="simulated crash"):
        _run(pinned, tmp_path, retriever="pinned")
    run_dir = next((tmp_path / "runs").iterdir())
    FlakyRetriever.fail_after = None
    Pinned.commit = "2" * 40  # the branch moved between the sessions
    with pytest.raises(HarnessError) as refused:
        _run(pinned, tmp_path, retriever="pinned")
    message = str(refused.value)
    assert message.startswith(f"run {run_dir}: the model changed since this run began (pinned: model_revision ")
    assert f"{'1' * 40} → {'2' * 40}" in message and "2 answered queries" in message and "--fresh" in message
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2  # nothing lost, nothing mixed
    Pinned.commit = "1" * 40  # back where it was: the run goes on
    resumed = _run(pinned, tmp_path, retriever="pinned")
    assert resumed.resumed_queries == 2 and resumed.row.retriever.provenance["model_revision"] == "1" * 40
    Pinned.commit = "2" * 40
    registry = parse_registry(PLAIN_REGISTRY, "r.yaml")
    runner = Runner(pinned, output_dir=tmp_path / "runs", device="cpu", fresh=True)
    fresh = runner.run(resolve(registry, pinned, retriever="pinned"))
    assert fresh.run_dir == run_dir and fresh.resumed_queries == 0
    assert fresh.row.retriever.provenance["model_revision"] == "2" * 40
    # every query answered: nothing is built, and the row says what the answers came from
    Pinned.commit, built = "3" * 40, Pinned.built
    done = _run(pinned, tmp_path, retriever="pinned")
    assert Pinned.built == built and done.row.retriever.provenance["model_revision"] == "2" * 40


def test_a_run_directory_of_an_older_harness_resumes_and_records_provenance(
    pinned: PluginManager, tmp_path: Path
) -> None:
    FlakyRetriever.fail_after = 2
    with pytest.raises(HarnessError, match="simulated crash"):
        _run(pinned, tmp_path, retriever="pinned")
    run_dir = next((tmp_path / "runs").iterdir())
    (run_dir / "build.json").write_text('{"seconds": 1.5}')  # written before provenance was recorded
    FlakyRetriever.fail_after = None
    resumed = _run(pinned, tmp_path, retriever="pinned")
    assert resumed.resumed_queries == 2 and resumed.row.index_build_seconds == 1.5
    assert json.loads((run_dir / "build.json").read_text())["provenance"]["pinned"]["model_revision"] == "1" * 40


def test_rows_name_the_query_set_and_the_skb(manager: PluginManager, tmp_path: Path) -> None:
    from helpers import PlainDataset, plain_skb

    whole = _run(manager, tmp_path)
    queries = PlainDataset().load_queries().split("test")
    assert whole.row.queries_digest == harness.stable_hash([[q.id, q.text, list(q.answer_ids)] for q in queries])
    assert whole.row.dataset_fingerprint == plain_skb().fingerprint
    assert whole.row.dataset.version == PlainDataset.version
    sampled = _run(manager, tmp_path, sample_fraction=0.5)
    assert sampled.row.queries_digest == whole.row.queries_digest  # the split's, not the sample's
    # another query set on the same SKB: another digest
    edited = PLAIN_REGISTRY.replace(
        "{plugin: plain, splits: [test]}", '{plugin: plain, params: {queries: [[1, "kettle", [0]]]}}'
    )
    spec = resolve(parse_registry(edited, "r.yaml"), manager)
    other = Runner(manager, output_dir=tmp_path / "runs", device="cpu").run(spec)
    assert other.row.dataset_fingerprint == whole.row.dataset_fingerprint
    assert other.row.queries_digest != whole.row.queries_digest
