"""The ``hybrid`` retriever: fuses the rankings of the retrievers it uses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness


class HybridRetriever(harness.Retriever):
    """Fuses other retrievers (registry or plugin names) by reciprocal-rank fusion or by
    min-max normalised, weighted scores. With ``top_ranked``, every retriever it fuses reranks
    those candidates."""

    name = "hybrid"
    version = "1"
    batch_size = 16
    reranks = True  # hands top_ranked to every retriever it fuses (each must rerank)

    class Options(harness.Options):
        retrievers: list[str] = Field(description="the retrievers to fuse (registry entries or plugins), two or more")
        method: Literal["rrf", "weighted"] = Field(
            "rrf",
            description="rrf (reciprocal-rank fusion, 1 / (rrf_k + rank)) or weighted (min-max normalised "
            "scores, weighted sum; absent from a list = 0)",
        )
        weights: list[float] | None = Field(None, description="one per retriever (null: 1.0 each)")
        rrf_k: int = Field(60, ge=0, description="rrf: the constant added to each rank")
        depth: int = Field(100, gt=0, description="how many results to take from each retriever")

        @model_validator(mode="after")
        def _one_weight_each(self) -> Self:
            if len(self.retrievers) < 2:
                raise ValueError("give at least two retrievers to fuse (params.retrievers)")
            if self.weights is None:  # resolved here so that rows record what runs
                self.weights = [1.0] * len(self.retrievers)
            elif len(self.weights) != len(self.retrievers):
                raise ValueError(f"{len(self.weights)} weights for {len(self.retrievers)} retrievers")
            return self

    options: Options

    def uses(self) -> list[str]:
        return list(self.options.retrievers)

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        self.members = [context.retriever(name) for name in self.options.retrievers]

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        lists = [member.search(queries, self.options.depth, top_ranked) for member in self.members]
        return [self.fuse([rankings[i] for rankings in lists], k) for i in range(len(queries))]

    def fuse(self, rankings: Sequence[harness.Ranking], k: int) -> harness.Ranking:
        fused: dict[int, float] = {}
        assert self.options.weights is not None  # resolved by the options' validator
        for weight, ranking in zip(self.options.weights, rankings, strict=True):
            if self.options.method == "rrf":
                contributions = 1.0 / (self.options.rrf_k + np.arange(1, len(ranking.ids) + 1))
            else:
                low, high = (ranking.scores.min(), ranking.scores.max()) if len(ranking.scores) else (0.0, 0.0)
                span = high - low
                contributions = (ranking.scores - low) / span if span > 0 else np.ones(len(ranking.scores))
            for node, value in zip(ranking.ids.tolist(), contributions.tolist(), strict=True):
                fused[node] = fused.get(node, 0.0) + weight * value
        ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
        return harness.Ranking(np.array([n for n, _ in ordered], dtype=np.int64), np.array([s for _, s in ordered]))
