"""Dense retrieval for stark-harness.

* ``dense`` — one vector per document from a local sentence-transformers model or a hosted
  API (``provider: openai | voyage``, :mod:`harness_dense.api`); exact top-k
  by chunked matrix products (torch, fp16 on GPU), or a FAISS index for large SKBs.
* ``multi-vector`` — documents split into overlapping chunks, each embedded; a document
  scores the max, mean or top-n mean of its chunks' similarities (STaRK's multi-VSS; the
  paper found the top-3 mean best).
* ``hybrid`` — fuses any registered retrievers by reciprocal-rank fusion or by min-max
  normalised, weighted scores.

Document embeddings are cached on disk by the model's content (every file's bytes) and
settings and by the exact text, so a second run encodes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query
from harness.retriever import BuildContext, Ranking, Retriever
from harness.skb import SKB
from harness_dense.embeddings import DEFAULT_MODEL, LocalEncoder, cache_for, embed_with_cache

__all__ = ["DenseRetriever", "HybridRetriever", "MultiVectorRetriever", "chunk_text", "top_k"]


def top_k(queries: np.ndarray, matrix: Any, k: int, chunk: int = 262_144) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-k of each query against ``matrix`` (a torch tensor), in chunks
    of rows so that the score matrix never exceeds ``len(queries) × chunk``."""
    import torch

    q = torch.from_numpy(queries).to(device=matrix.device, dtype=matrix.dtype)
    best_scores = best_ids = None
    for start in range(0, matrix.shape[0], chunk):
        scores = (q @ matrix[start : start + chunk].T).float()
        values, ids = torch.topk(scores, min(k, scores.shape[1]), dim=1)
        ids = ids + start
        if best_scores is None:
            best_scores, best_ids = values, ids
        else:
            merged_scores = torch.cat([best_scores, values], dim=1)
            merged_ids = torch.cat([best_ids, ids], dim=1)
            best_scores, order = torch.topk(merged_scores, min(k, merged_scores.shape[1]), dim=1)
            best_ids = torch.gather(merged_ids, 1, order)
    assert best_scores is not None and best_ids is not None
    return best_ids.cpu().numpy(), best_scores.cpu().numpy()


class _Encoded(Retriever):
    """Shared machinery: an encoder, a cache and a document matrix on the right device."""

    batch_size = 64

    def _encoder(self, context: BuildContext) -> Any:
        p = self.params
        if p.get("provider", "local") != "local":
            from harness_dense.api import APIEncoder

            return APIEncoder(
                p["provider"],
                p["model"],
                p["base_url"],
                p["dimensions"],
                p["concurrency"],
                timeout=p["timeout"],
                backoff=p["backoff"],
            )
        return LocalEncoder(
            p["model"], p["query_prefix"], p["document_prefix"], p["encode_batch_size"], p["max_length"], context.device
        )

    def usage(self) -> dict[str, Any]:
        """Tokens, requests, retries and cost of API embeddings (empty for local models)."""
        encoder = getattr(self, "encoder", None)
        return encoder.cost() if hasattr(encoder, "cost") else {}

    def _embed(self, texts: list[str], context: BuildContext, what: str) -> np.ndarray:
        self.encoder = self._encoder(context)
        cache = cache_for(self.encoder, Path(context.cache_dir))
        with context.task(f"{self.name}: encode {what}", len(texts)) as task:
            vectors = embed_with_cache(self.encoder, cache, texts, on_progress=task.advance)
        if isinstance(self.encoder, LocalEncoder):
            # A model's first forward pass sets up kernels (seconds on a CPU); pay it while
            # building, so that per-query latency measures searching, not start-up.
            self.encoder.encode(["warm-up"], "query")
        return vectors

    def _matrix(self, vectors: np.ndarray, context: BuildContext) -> Any:
        import torch

        matrix = torch.from_numpy(vectors)
        return matrix.to("cuda", dtype=torch.float16) if context.device == "cuda" else matrix

    def _queries(self, queries: Sequence[Query]) -> np.ndarray:
        return self.encoder.encode([q.text for q in queries], "query")


API_OPTIONS = {"base_url": None, "dimensions": None, "concurrency": 4, "timeout": 60.0, "backoff": 1.0}


def _common(
    model: str,
    query_prefix: str,
    document_prefix: str,
    with_relations: bool,
    compact: bool,
    encode_batch_size: int,
    max_length: int | None,
    provider: str,
    api: dict[str, Any],
) -> dict[str, Any]:
    params = {
        "model": model,
        "query_prefix": query_prefix,
        "document_prefix": document_prefix,
        "with_relations": with_relations,
        "compact": compact,
        "encode_batch_size": encode_batch_size,
        "max_length": max_length,
    }
    unknown = set(api) - set(API_OPTIONS)
    if unknown:
        raise HarnessError(f"unknown parameters {sorted(unknown)}; API options are {sorted(API_OPTIONS)}")
    if provider != "local":  # keys come from the environment, never from parameters
        if provider not in ("openai", "voyage"):
            raise HarnessError(f"unknown embedding provider {provider!r}; use local, openai or voyage")
        params.update(provider=provider, **{**API_OPTIONS, **api})
    elif api:
        raise HarnessError(f"{sorted(api)} apply to provider openai or voyage only")
    return params


class DenseRetriever(_Encoded):
    """One embedding per candidate document; cosine similarity (vectors are normalised).

    Parameters:
        model: a local sentence-transformers directory or an installed model package.
        query_prefix, document_prefix: instructions some models need ("query: ", "passage: ").
        with_relations, compact: which document variant to embed (STaRK's VSS: plain).
        index: "exact" (torch matrix products) or "faiss" (an exact FAISS inner-product
            index; needs faiss-cpu).
        provider: "local", or "openai" / "voyage" for hosted embeddings (``model`` is then the
            API model name); with it ``base_url`` (any OpenAI-compatible server),
            ``dimensions``, ``concurrency``, ``timeout`` and ``backoff`` (seconds, doubled per retry).
    """

    name = "dense"
    version = "1"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        query_prefix: str = "",
        document_prefix: str = "",
        with_relations: bool = False,
        compact: bool = False,
        index: str = "exact",
        encode_batch_size: int = 64,
        max_length: int | None = None,
        provider: str = "local",
        **api: Any,
    ) -> None:
        if index not in ("exact", "faiss"):
            raise HarnessError(f"dense: index must be 'exact' or 'faiss', not {index!r}")
        common = _common(
            model, query_prefix, document_prefix, with_relations, compact, encode_batch_size, max_length, provider, api
        )
        super().__init__(**common, index=index)

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        texts = list(skb.documents(self.ids, self.params["with_relations"], self.params["compact"]))
        vectors = self._embed(texts, context, "documents")
        if self.params["index"] == "faiss":
            try:
                import faiss
            except ImportError:
                raise HarnessError("dense: index 'faiss' needs faiss-cpu (pip install faiss-cpu)") from None
            self.faiss = faiss.IndexFlatIP(vectors.shape[1])
            self.faiss.add(vectors)
        else:
            self.matrix = self._matrix(vectors, context)

    def search(self, queries: Sequence[Query], k: int) -> list[Ranking]:
        vectors = self._queries(queries)
        if self.params["index"] == "faiss":
            scores, rows = self.faiss.search(vectors, min(k, len(self.ids)))
        else:
            rows, scores = top_k(vectors, self.matrix, k)
        return [Ranking(self.ids[r[r >= 0]], s[r >= 0]) for r, s in zip(rows, scores, strict=True)]


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Overlapping windows of about ``size`` characters, cut at word boundaries."""
    words = list(re.finditer(r"\S+", text))
    if not words:
        return [text]
    chunks, start = [], 0
    while start < len(words):
        end = start
        while end < len(words) and words[end].end() - words[start].start() <= size:
            end += 1
        end = max(end, start + 1)
        chunks.append(text[words[start].start() : words[end - 1].end()])
        if end >= len(words):
            break
        back = end
        while back > start + 1 and words[end - 1].end() - words[back - 1].start() < overlap:
            back -= 1
        start = max(back, start + 1)
    return chunks


class MultiVectorRetriever(_Encoded):
    """Documents (with relations, compact, as STaRK's multi-VSS) split into overlapping
    chunks; a document's score aggregates its chunks' similarities.

    Parameters (besides the encoder's): chunk_size and overlap in characters;
    aggregate "max", "mean" or "top-mean" (mean of the ``top_n`` best chunks).
    """

    name = "multi-vector"
    version = "1"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        query_prefix: str = "",
        document_prefix: str = "",
        with_relations: bool = True,
        compact: bool = True,
        chunk_size: int = 256,
        overlap: int = 51,
        aggregate: str = "top-mean",
        top_n: int = 3,
        encode_batch_size: int = 64,
        max_length: int | None = None,
        provider: str = "local",
        **api: Any,
    ) -> None:
        if aggregate not in ("max", "mean", "top-mean"):
            raise HarnessError(f"multi-vector: aggregate must be max, mean or top-mean, not {aggregate!r}")
        if chunk_size <= 0 or not 0 <= overlap < chunk_size or top_n <= 0:
            raise HarnessError("multi-vector: need chunk_size > overlap >= 0 and top_n > 0")
        super().__init__(
            **_common(
                model,
                query_prefix,
                document_prefix,
                with_relations,
                compact,
                encode_batch_size,
                max_length,
                provider,
                api,
            ),
            chunk_size=chunk_size,
            overlap=overlap,
            aggregate=aggregate,
            top_n=top_n,
        )

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        texts, owner = [], []
        for row, doc in enumerate(skb.documents(self.ids, self.params["with_relations"], self.params["compact"])):
            pieces = chunk_text(doc, self.params["chunk_size"], self.params["overlap"])
            texts.extend(pieces)
            owner.extend([row] * len(pieces))
        self.owner = np.asarray(owner, dtype=np.int64)
        self.starts = np.flatnonzero(np.r_[True, np.diff(self.owner) != 0])
        self.matrix = self._matrix(self._embed(texts, context, "chunks"), context)

    def search(self, queries: Sequence[Query], k: int) -> list[Ranking]:
        import torch

        q = torch.from_numpy(self._queries(queries)).to(self.matrix.device, self.matrix.dtype)
        chunk_scores = (q @ self.matrix.T).float().cpu().numpy()
        rankings = []
        for scores in chunk_scores:
            doc_scores = self._aggregate(scores)
            top = np.argsort(-doc_scores, kind="stable")[:k]
            rankings.append(Ranking(self.ids[top], doc_scores[top]))
        return rankings

    def _aggregate(self, scores: np.ndarray) -> np.ndarray:
        how = self.params["aggregate"]
        if how == "max":
            return np.maximum.reduceat(scores, self.starts)
        counts = np.diff(np.r_[self.starts, len(scores)])
        if how == "mean":
            return np.add.reduceat(scores, self.starts) / counts
        # top-mean: sort chunks by (document, descending score), keep each document's first n
        order = np.lexsort((-scores, self.owner))
        rank_in_doc = np.arange(len(scores)) - np.repeat(self.starts, counts)
        keep = rank_in_doc < self.params["top_n"]
        sums = np.bincount(self.owner[order][keep], weights=scores[order][keep], minlength=len(self.starts))
        return sums / np.minimum(counts, self.params["top_n"])


class HybridRetriever(Retriever):
    """Fuses other retrievers (registry or plugin names).

    Parameters:
        retrievers: the names to fuse.
        method: "rrf" (reciprocal-rank fusion, 1 / (rrf_k + rank)) or "weighted"
            (min-max normalised scores, weighted sum; absent from a list = 0).
        weights: one per retriever (default equal).
        depth: how many results to take from each retriever.
    """

    name = "hybrid"
    version = "1"
    batch_size = 16

    def __init__(
        self,
        retrievers: list[str] | None = None,
        method: str = "rrf",
        weights: list[float] | None = None,
        rrf_k: int = 60,
        depth: int = 100,
    ) -> None:
        names = list(retrievers or [])
        if len(names) < 2:
            raise HarnessError("hybrid: give at least two retrievers to fuse (params.retrievers)")
        if method not in ("rrf", "weighted"):
            raise HarnessError(f"hybrid: method must be rrf or weighted, not {method!r}")
        weights = list(weights) if weights is not None else [1.0] * len(names)
        if len(weights) != len(names):
            raise HarnessError(f"hybrid: {len(weights)} weights for {len(names)} retrievers")
        super().__init__(retrievers=names, method=method, weights=weights, rrf_k=rrf_k, depth=depth)

    def uses(self) -> list[str]:
        return list(self.params["retrievers"])

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.members = [context.retriever(name) for name in self.params["retrievers"]]

    def search(self, queries: Sequence[Query], k: int) -> list[Ranking]:
        lists = [member.search(queries, self.params["depth"]) for member in self.members]
        return [self.fuse([rankings[i] for rankings in lists], k) for i in range(len(queries))]

    def fuse(self, rankings: Sequence[Ranking], k: int) -> Ranking:
        fused: dict[int, float] = {}
        for weight, ranking in zip(self.params["weights"], rankings, strict=True):
            if self.params["method"] == "rrf":
                contributions = 1.0 / (self.params["rrf_k"] + np.arange(1, len(ranking.ids) + 1))
            else:
                low, high = (ranking.scores.min(), ranking.scores.max()) if len(ranking.scores) else (0.0, 0.0)
                span = high - low
                contributions = (ranking.scores - low) / span if span > 0 else np.ones(len(ranking.scores))
            for node, value in zip(ranking.ids.tolist(), contributions.tolist(), strict=True):
                fused[node] = fused.get(node, 0.0) + weight * value
        ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
        return Ranking(np.array([n for n, _ in ordered], dtype=np.int64), np.array([s for _, s in ordered]))


@hookimpl
def register_retrievers(register: Any) -> None:
    for retriever in (DenseRetriever, MultiVectorRetriever, HybridRetriever):
        register(retriever)
