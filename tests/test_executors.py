"""Executors: the local one, the ``register_executors`` hook, and the runner's sharded search
through an executor that is not local — driven here by a fake that behaves as a cluster does
(work pickled, a worker built per process, shards back out of order, a shard answered twice
after a retry), so the runner's side is tested without Ray (harness-ray's tests run Ray itself)."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import Field

import harness
from harness.errors import HarnessError
from harness.plugins import PluginManager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query
from harness.retriever import Ranking, Reranker
from harness.run import Runner, resolve
from harness.run.registry import parse_registry
from harness.run.shards import shard_size

REGISTRY = """
defaults: {dataset: plain, retriever: lexical, split: test, k: 3}
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  lexical: {plugin: overlap}
  flipped: {plugin: flip, params: {first_stage: lexical, candidates: 3}}
"""

#: queries over the plain SKB: many, so that they make several shards
QUERIES = [
    [i, text, [answer]]
    for i, (text, answer) in enumerate(
        [("red kettle that boils water", 0), ("kettle", 1), ("copper pot for soups", 4), ("glass teapot", 2)] * 5, 1
    )
]


class Flip(Reranker):
    """Reverses its first stage and spends a call per query (as an LLM reranker would)."""

    name = "flip"

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.calls = 0

    def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
        self.calls += len(queries)
        return [Ranking(c.ids[::-1][:k], np.arange(len(c.ids))[:k][::-1] + 1.0) for c in candidates]

    def usage(self) -> dict[str, Any]:
        return {"calls": self.calls, "cost_usd": 0.5 * self.calls}


class Cluster(harness.Executor):
    """A stand-in for a cluster executor: the factory and items travel pickled, each of two
    "workers" builds its own worker once, and results come back in reverse order; ``again``
    answers the first shard a second time (Ray running a shard again after its worker died),
    ``fail_after`` fails like a dead cluster after that many results."""

    name = "cluster"

    class Options(harness.Options):
        again: bool = Field(False, description="answer the first item twice")
        fail_after: int | None = Field(None, description="fail after this many results")

    built: ClassVar[list[int]] = []

    def map(
        self,
        factory: Callable[[], Callable[[Any], Any]],
        items: Iterable[Any],
        *,
        description: str,
        num_gpus: Any = None,
    ) -> Iterator[tuple[int, Any]]:
        factory = pickle.loads(pickle.dumps(factory))
        workers: dict[int, Any] = {}
        results = []
        for index, item in enumerate(pickle.loads(pickle.dumps(list(items)))):
            if index % 2 not in workers:
                workers[index % 2] = factory()
                Cluster.built.append(index % 2)
            results.append((index, pickle.loads(pickle.dumps(workers[index % 2](item)))))
        if self.options.again:
            results.append(results[0])
        for count, result in enumerate(reversed(results)):
            if self.options.fail_after is not None and count == self.options.fail_after:
                raise HarnessError(f"{description}: the cluster went away")
            yield result


class Plugin:
    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register(Flip)

    @hookimpl
    def register_executors(self, register):  # type: ignore[no-untyped-def]
        register(Cluster)


@pytest.fixture
def manager(plain_plugins: PluginManager) -> PluginManager:
    plain_plugins.register(Plugin(), "cluster-plugin")
    Cluster.built = []
    return plain_plugins


def _run(manager: PluginManager, out: Path, retriever: str, executor: harness.Executor | None = None) -> Any:
    registry = parse_registry(REGISTRY, "registry.yaml")
    spec = resolve(registry, manager, retriever, dataset_params={"queries": QUERIES})
    return Runner(manager, output_dir=out, device="cpu", batch_size=2, executor=executor).run(spec)


def _qids(run_dir: Path) -> list[int]:
    return [json.loads(line)["qid"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


def _metrics(run_dir: Path) -> list[Any]:
    return [(line["qid"], line["metrics"]) for line in map(json.loads, (run_dir / "per_query.jsonl").open())]


def test_the_local_executor_builds_once_in_input_order() -> None:
    built: list[int] = []

    def factory() -> Callable[[int], int]:
        built.append(1)
        return lambda item: item * 10

    executor = harness.LocalExecutor()
    assert list(executor.map(factory, [3, 1, 2], description="x")) == [(0, 30), (1, 10), (2, 20)]
    assert built == [1]
    assert list(executor.map(factory, [], description="x")) == [] and built == [1]  # no items: nothing built
    assert executor.local and executor.worker_device("cpu") == "cpu" and executor.describe() == {"name": "local"}
    with executor.limiter("api", 2), executor.limiter("api", 2):
        pass  # two slots


def test_executors_come_from_plugins_and_their_options_are_checked(manager: PluginManager) -> None:
    from harness import executor_from_options as from_command_line

    assert isinstance(harness.make_executor("cluster", {"again": True}, manager), Cluster)
    with pytest.raises(HarnessError, match=r"executor 'cluster': bad parameters: again: Input should be a valid"):
        harness.make_executor("cluster", {"again": "twice"}, manager)
    with pytest.raises(HarnessError, match=r"unknown executor 'ray' \(pip install 'stark-harness-ray'\)"):
        harness.make_executor("ray", plugins=PluginManager(load_entry_points=False))
    with pytest.raises(HarnessError, match=r"--address, --workers: for --executor ray"):
        from_command_line("local", "auto", None, 2)


def test_shards_are_whole_batches() -> None:
    assert [shard_size(n, 2) for n in (1, 20, 128, 129, 1000)] == [2, 2, 2, 4, 8]
    assert shard_size(100_000, 64) == 256  # at most 4 batches: what a killed worker loses


@pytest.mark.parametrize("retriever", ["lexical", "flipped"])
def test_sharded_search_gives_the_local_run(manager: PluginManager, tmp_path: Path, retriever: str) -> None:
    local = _run(manager, tmp_path / "local", retriever)
    remote = _run(manager, tmp_path / "remote", retriever, Cluster(again=True))
    assert Cluster.built == [0, 1]  # each worker built the retriever (a composite whole) once
    assert remote.row.config_hash == local.row.config_hash
    assert (remote.run_dir / "run.trec").read_bytes() == (local.run_dir / "run.trec").read_bytes()
    assert _metrics(remote.run_dir) == _metrics(local.run_dir) and remote.row.metrics == local.row.metrics
    qids = _qids(remote.run_dir)
    assert len(qids) == len(set(qids)) == len(QUERIES)  # the shard answered twice is logged once
    assert remote.row.hardware.executor == {"name": "cluster", "again": True, "fail_after": None}
    if retriever == "flipped":  # spent on the workers, summed into the row (the repeat counted as it was paid)
        assert remote.row.usage["calls"] == len(QUERIES) + 2 and local.row.usage["calls"] == len(QUERIES)


def test_a_cluster_failing_mid_run_keeps_what_finished(manager: PluginManager, tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"the cluster went away\. Completed queries are kept in .*to resume"):
        _run(manager, tmp_path, "lexical", Cluster(fail_after=4))
    [run_dir] = list(tmp_path.iterdir())
    assert len(_qids(run_dir)) == 8  # 4 shards of 2
    resumed = _run(manager, tmp_path, "lexical", Cluster())
    assert resumed.resumed_queries == 8 and len(_qids(resumed.run_dir)) == len(QUERIES)
    local = _run(manager, tmp_path / "local", "lexical")
    assert (resumed.run_dir / "run.trec").read_bytes() == (local.run_dir / "run.trec").read_bytes()
