"""The ``dense`` and ``multi-vector`` retrievers: one encoder (a local sentence-transformers
model or a hosted API), their shared parameters, and exact search over the embeddings."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness_dense.embeddings import DEFAULT_MODEL, LocalEncoder, cache_for, embed_with_cache

#: Settings of hosted embeddings (``provider: openai | voyage``), and the values they take
#: when not given; with ``provider: local`` they stay null, and giving one is an error.
API_DEFAULTS: dict[str, Any] = {"concurrency": 4, "timeout": 60.0, "backoff": 1.0}
API_ONLY = ("base_url", "dimensions", *API_DEFAULTS)


class EncoderOptions(harness.DocumentOptions):
    """The parameters of everything that embeds documents (``dense``, ``multi-vector``)."""

    model: str = Field(
        DEFAULT_MODEL,
        description="a local sentence-transformers directory, an installed model package, or a Hugging Face "
        "hub id (org/name, org/name@revision; downloaded into the hub's cache, the commit recorded); "
        "with an API provider, the API's model name",
    )
    provider: Literal["local", "openai", "voyage"] = Field(
        "local",
        description="local (sentence-transformers), or hosted embeddings: openai (any "
        "OpenAI-compatible server with base_url) or voyage; keys from $OPENAI_API_KEY / $VOYAGE_API_KEY",
    )
    query_prefix: str = Field("", description='text put before each query ("query: " for E5); local models only')
    document_prefix: str = Field("", description='text put before each document ("passage: "); local models only')
    encode_batch_size: int = Field(64, gt=0, description="texts per forward pass of a local model")
    max_length: int | None = Field(
        None, gt=0, description="tokens of each text a local model reads (null: the model's own limit)"
    )
    base_url: str | None = Field(None, description="API providers: the server (null: the provider's own)")
    dimensions: int | None = Field(
        None, gt=0, description="API providers: the vector length to ask for (null: the model's own, not sent)"
    )
    concurrency: int | None = Field(
        None, gt=0, description=f"API providers: parallel requests (default {API_DEFAULTS['concurrency']})"
    )
    timeout: float | None = Field(
        None, gt=0, description=f"API providers: seconds per request (default {API_DEFAULTS['timeout']})"
    )
    backoff: float | None = Field(
        None,
        ge=0,
        description=f"API providers: seconds before the first retry, doubled per retry "
        f"(default {API_DEFAULTS['backoff']})",
    )

    @model_validator(mode="after")
    def _provider_settings(self) -> Self:
        if self.provider == "local":
            given = [name for name in API_ONLY if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: for provider openai or voyage only")
            return self
        # an API encoder would ignore these silently: the row must not claim they ran
        ignored = [name for name in ("query_prefix", "document_prefix", "max_length") if getattr(self, name)]
        if ignored:
            raise ValueError(f"{', '.join(ignored)}: for provider local only (an API encoder ignores it)")
        for name, default in API_DEFAULTS.items():  # resolved here so that rows record what runs
            if getattr(self, name) is None:
                setattr(self, name, default)
        return self


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
        if best_scores is None or best_ids is None:  # the first chunk (both are set together)
            best_scores, best_ids = values, ids
        else:
            merged_scores = torch.cat([best_scores, values], dim=1)
            merged_ids = torch.cat([best_ids, ids], dim=1)
            best_scores, order = torch.topk(merged_scores, min(k, merged_scores.shape[1]), dim=1)
            best_ids = torch.gather(merged_ids, 1, order)
    assert best_scores is not None and best_ids is not None
    return best_ids.cpu().numpy(), best_scores.cpu().numpy()


class _Encoded(harness.Retriever):
    """Shared machinery: an encoder, a cache, a document matrix on the right device, and
    reranking of given candidates (``top_ranked``)."""

    batch_size = 64
    reranks = True  # with top_ranked, only the given candidates are scored
    Options = EncoderOptions
    options: EncoderOptions

    def _encoder(self, context: harness.BuildContext) -> Any:
        o = self.options
        if o.provider != "local":
            from harness_dense.api import APIEncoder

            assert o.concurrency is not None and o.timeout is not None and o.backoff is not None  # Options filled them
            encoder = APIEncoder(
                o.provider, o.model, o.base_url, o.dimensions, o.concurrency, timeout=o.timeout, backoff=o.backoff
            )
            # the executor's bound: on a cluster, `concurrency` requests in flight across every worker
            encoder.limiter = context.executor.limiter(encoder.limiter_key, max(1, o.concurrency or 1))
            return encoder
        return LocalEncoder(
            o.model, o.query_prefix, o.document_prefix, o.encode_batch_size, o.max_length, context.device
        )

    def usage(self) -> dict[str, Any]:
        """Tokens, requests, retries and cost of API embeddings (empty for local models)."""
        encoder: Any = getattr(self, "encoder", None)
        return encoder.cost() if hasattr(encoder, "cost") else {}

    def provenance(self) -> dict[str, Any]:
        """For a model named by hub id, its repository and the commit that ran (``model_repo``,
        ``model_revision``)."""
        snapshot = getattr(getattr(self, "encoder", None), "snapshot", None)
        return snapshot.provenance("model") if snapshot is not None else {}

    def _documents(self, skb: harness.SKB) -> list[str]:
        self.ids = skb.candidate_ids
        self.sorter = np.argsort(self.ids, kind="stable")
        return list(skb.documents(self.ids, self.options.with_relations, self.options.compact))

    def _embed(self, texts: list[str], context: harness.BuildContext, what: str) -> np.ndarray:
        self.encoder = self._encoder(context)
        cache = cache_for(self.encoder, Path(context.cache_dir))
        with context.task(f"{self.name}: encode {what}", len(texts)) as task:
            vectors = embed_with_cache(
                self.encoder, cache, texts, on_progress=task.advance, executor=context.executor, devices=context.devices
            )
        if isinstance(self.encoder, LocalEncoder) and context.executor.local:
            # A model's first forward pass sets up kernels (seconds on a CPU); pay it while
            # building, so that per-query latency measures searching, not start-up.
            self.encoder.encode(["warm-up"], "query")
        return vectors

    def _matrix(self, vectors: np.ndarray, context: harness.BuildContext) -> Any:
        import torch

        matrix = torch.from_numpy(vectors)
        # with another executor this build only fills the cache: its workers search, on their GPUs
        searched_here = context.executor.local
        return matrix.to("cuda", dtype=torch.float16) if context.device == "cuda" and searched_here else matrix

    def _queries(self, queries: Sequence[harness.Query]) -> np.ndarray:
        return self.encoder.encode([q.text for q in queries], "query")

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """The document rows of candidate ``ids`` (from ``top_ranked``)."""
        rows, unknown = np.zeros(0, dtype=np.int64), ids
        if len(self.ids):  # candidate_ids are sorted already; the sorter makes that no assumption
            positions = np.searchsorted(self.ids, ids, sorter=self.sorter)
            rows = self.sorter[np.minimum(positions, len(self.ids) - 1)]
            unknown = ids[self.ids[rows] != ids]
        if len(unknown):
            raise harness.HarnessError(f"{self.name}: top_ranked holds ids that are not candidates: {unknown[:5]}")
        return rows

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        vectors = self._queries(queries)
        if top_ranked is not None:
            return self._rerank(vectors, top_ranked, k)
        return self._search(vectors, k)

    def _search(self, vectors: np.ndarray, k: int) -> list[harness.Ranking]:
        """The top ``k`` candidates of each query vector, among all candidates."""
        raise NotImplementedError

    def _rerank(self, vectors: np.ndarray, top_ranked: Sequence[harness.Ranking], k: int) -> list[harness.Ranking]:
        """Each query's given candidates, scored by this retriever, best ``k`` first."""
        rankings = []
        for vector, given in zip(vectors, top_ranked, strict=True):
            rows = self._rows(given.ids)
            scores = self._score_rows(vector, rows)
            top = np.argsort(-scores, kind="stable")[:k]
            rankings.append(harness.Ranking(self.ids[rows[top]], scores[top]))
        return rankings

    def _score_rows(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """One query vector's scores for the documents in ``rows``."""
        raise NotImplementedError


class DenseRetriever(_Encoded):
    """One embedding per candidate document; cosine similarity (vectors are normalised).
    Exact top-k by chunked matrix products (torch), or an exact FAISS inner-product index."""

    name = "dense"
    version = "1"

    class Options(EncoderOptions):
        index: Literal["exact", "faiss"] = Field(
            "exact", description="exact (torch matrix products) or faiss (an exact FAISS index; needs faiss-cpu)"
        )

    options: Options

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        vectors = self._embed(self._documents(skb), context, "documents")
        if self.options.index == "faiss":
            try:
                import faiss
            except ImportError:
                raise harness.HarnessError("dense: index 'faiss' needs faiss-cpu (pip install faiss-cpu)") from None
            self.faiss = faiss.IndexFlatIP(vectors.shape[1])
            self.faiss.add(vectors)
        else:
            self.matrix = self._matrix(vectors, context)

    def _search(self, vectors: np.ndarray, k: int) -> list[harness.Ranking]:
        if self.options.index == "faiss":
            scores, rows = self.faiss.search(vectors, min(k, len(self.ids)))
        else:
            rows, scores = top_k(vectors, self.matrix, k)
        return [harness.Ranking(self.ids[r[r >= 0]], s[r >= 0]) for r, s in zip(rows, scores, strict=True)]

    def _score_rows(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if self.options.index == "faiss":
            return self.faiss.reconstruct_batch(rows) @ vector
        import torch

        q = torch.from_numpy(vector).to(self.matrix.device, self.matrix.dtype)
        return (self.matrix[torch.from_numpy(rows)] @ q).float().cpu().numpy()


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
    chunks; a document's score aggregates its chunks' similarities."""

    name = "multi-vector"
    version = "1"

    class Options(EncoderOptions):
        with_relations: bool = Field(True, description="embed documents with their relations linearized (multi-VSS)")
        compact: bool = Field(True, description="embed the compact variant of each document (multi-VSS)")
        chunk_size: int = Field(256, gt=0, description="characters per chunk (cut at word boundaries)")
        overlap: int = Field(51, ge=0, description="characters consecutive chunks share (less than chunk_size)")
        aggregate: Literal["max", "mean", "top-mean"] = Field(
            "top-mean", description="a document's score from its chunks': max, mean, or the mean of the top_n best"
        )
        top_n: int = Field(3, gt=0, description="chunks that top-mean averages")

        @model_validator(mode="after")
        def _overlap_below_size(self) -> Self:
            if self.overlap >= self.chunk_size:
                raise ValueError(f"overlap ({self.overlap}) must be less than chunk_size ({self.chunk_size})")
            return self

    options: Options

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        texts, owner = [], []
        for row, doc in enumerate(self._documents(skb)):
            pieces = chunk_text(doc, self.options.chunk_size, self.options.overlap)
            texts.extend(pieces)
            owner.extend([row] * len(pieces))
        self.owner = np.asarray(owner, dtype=np.int64)
        self.starts = np.flatnonzero(np.r_[True, np.diff(self.owner) != 0])
        self.matrix = self._matrix(self._embed(texts, context, "chunks"), context)

    def _search(self, vectors: np.ndarray, k: int) -> list[harness.Ranking]:
        rankings = []
        for doc_scores in self._document_scores(vectors):
            top = np.argsort(-doc_scores, kind="stable")[:k]
            rankings.append(harness.Ranking(self.ids[top], doc_scores[top]))
        return rankings

    def _document_scores(self, vectors: np.ndarray) -> list[np.ndarray]:
        import torch

        q = torch.from_numpy(vectors).to(self.matrix.device, self.matrix.dtype)
        return [self._aggregate(scores) for scores in (q @ self.matrix.T).float().cpu().numpy()]

    def _score_rows(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._document_scores(vector[None, :])[0][rows]

    def _aggregate(self, scores: np.ndarray) -> np.ndarray:
        how, top_n = self.options.aggregate, self.options.top_n
        if how == "max":
            return np.maximum.reduceat(scores, self.starts)
        counts = np.diff(np.r_[self.starts, len(scores)])
        if how == "mean":
            return np.add.reduceat(scores, self.starts) / counts
        # top-mean: sort chunks by (document, descending score), keep each document's first n
        order = np.lexsort((-scores, self.owner))
        rank_in_doc = np.arange(len(scores)) - np.repeat(self.starts, counts)
        keep = rank_in_doc < top_n
        sums = np.bincount(self.owner[order][keep], weights=scores[order][keep], minlength=len(self.starts))
        return sums / np.minimum(counts, top_n)
