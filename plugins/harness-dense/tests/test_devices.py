"""``--devices``: documents encoded by one process per device (sentence-transformers' pool), here
two CPU processes, giving exactly the vectors one process gives; and what the runner refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import harness
from harness import HarnessError
from harness.testing import OverlapRetriever, run_retriever
from harness_dense.embeddings import EmbeddingCache, LocalEncoder, embed_with_cache

TEXTS = [
    f"package {i}: a {'small ' * (i % 7)}tool for {['mail', 'audio', 'kernels', 'fonts'][i % 4]}" for i in range(40)
]


@pytest.mark.slow
def test_two_cpu_processes_give_the_vectors_of_one(tmp_path: Path) -> None:
    encoder = LocalEncoder(batch_size=8)
    alone = embed_with_cache(encoder, EmbeddingCache(tmp_path / "one"), TEXTS, shard_size=12)
    advanced: list[int] = []
    pooled = embed_with_cache(
        encoder,
        EmbeddingCache(tmp_path / "two"),
        TEXTS,
        shard_size=12,  # 4 shards, in 2 groups of one shard per process
        on_progress=advanced.append,
        devices=("cpu", "cpu"),
    )
    assert np.array_equal(pooled, alone)  # whole shards per process: the batches one process makes
    assert sorted(advanced) == [4, 12, 12, 12]
    # the shards are the cache's, as one process writes them: a later run encodes nothing
    assert sorted(p.name for p in (tmp_path / "two").glob("shard-*.json")) == [f"shard-{i}.json" for i in range(4)]
    assert np.array_equal(
        encoder.encode(["after the pool"], "query"), LocalEncoder().encode(["after the pool"], "query")
    )


def test_devices_are_checked_before_anything_runs(tmp_path: Path) -> None:
    def run(**settings: object) -> None:
        run_retriever(OverlapRetriever, {}, tmp_path, **settings)
        raise AssertionError(f"{settings} ran")

    with pytest.raises(HarnessError, match="give devices of one kind"):
        run(devices=["cuda:0", "cpu"])
    with pytest.raises(HarnessError, match="name two or more devices"):
        run(devices=["cuda:1"])
    with pytest.raises(HarnessError, match="each GPU once"):
        run(devices=["cuda:0", "cuda:0"])
    with pytest.raises(HarnessError, match="--device cuda and --devices cpu,cpu disagree"):
        run(device="cuda", devices=["cpu", "cpu"])

    class Elsewhere(harness.LocalExecutor):
        name, local = "elsewhere", False

    with pytest.raises(HarnessError, match="with --executor elsewhere the workers have the devices"):
        run(executor=Elsewhere(), devices=["cpu", "cpu"])
    assert not (tmp_path / "runs").exists(), "a run started before its settings were checked"
