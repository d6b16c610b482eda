"""Embeddings from hosted APIs: OpenAI (and any OpenAI-compatible server) and Voyage AI.

Requests go through the providers' official SDKs, with their own retries switched off so
that this module controls them: batches sized by the provider's limits (inputs and
estimated tokens per request), bounded concurrency, retries by the harness's one policy
(:class:`harness.RetryPolicy`: backoff with jitter, ``Retry-After`` honoured, capped) on 429, 5xx,
timeouts and malformed responses, and token and cost accounting. Every reply's vectors are
checked (one per input, finite, one dimension) before anything caches or ranks them; a bad
reply is retried, and one still bad after the last retry is one clear ``HarnessError``.
API keys are read from the environment only (``OPENAI_API_KEY``, ``VOYAGE_API_KEY``) and are
never logged, cached or written into rows. Combined with the embedding cache, an
interrupted run never pays twice for the same text.

``concurrency`` bounds the requests in flight through a :class:`harness.Limiter`: this
process's own, or, when an executor's workers encode (``--executor ray``), one the executor
holds for the whole cluster, so N workers never send N times the requests the limit allows.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness import HarnessError, Limiter, Retryable, RetryPolicy, stable_hash
from harness import classify_failure as classify
from harness import describe_failure as describe

#: USD per million input tokens (list prices when these models were current).
PRICES = {
    "text-embedding-ada-002": 0.10,
    "text-embedding-3-small": 0.02,
    "text-embedding-3-large": 0.13,
    "voyage-2": 0.10,
    "voyage-large-2-instruct": 0.12,
    "voyage-3": 0.06,
    "voyage-3-lite": 0.02,
}


@dataclass
class Limits:
    max_inputs: int
    max_tokens: int


LIMITS = {"openai": Limits(2048, 300_000), "voyage": Limits(128, 120_000)}


def estimate_tokens(text: str) -> int:
    """A conservative token estimate (≈ 3 characters per token) for sizing batches."""
    return len(text) // 3 + 1


def batches(texts: Sequence[str], limits: Limits) -> list[list[int]]:
    """Indices of ``texts`` grouped so that no request exceeds the provider's limits."""
    out: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for i, text in enumerate(texts):
        cost = estimate_tokens(text)
        if current and (len(current) >= limits.max_inputs or tokens + cost > limits.max_tokens):
            out.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += cost
    if current:
        out.append(current)
    return out


@dataclass
class Usage:
    tokens: int = 0
    requests: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, tokens: int = 0, requests: int = 0, retries: int = 0) -> None:
        with self.lock:
            self.tokens += tokens
            self.requests += requests
            self.retries += retries


class APIEncoder:
    """Embeds with a hosted model. ``provider`` is "openai" (also for OpenAI-compatible
    servers through ``base_url``) or "voyage"."""

    def __init__(
        self,
        provider: str,
        model: str,
        base_url: str | None = None,
        dimensions: int | None = None,
        concurrency: int = 4,
        max_retries: int = 6,
        timeout: float = 60.0,
        backoff: float = 1.0,
        limiter: Limiter | None = None,
    ) -> None:
        if provider not in LIMITS:
            raise HarnessError(f"unknown embedding provider {provider!r}; known: {', '.join(LIMITS)}")
        self.provider, self.model, self.base_url, self.dimensions = provider, model, base_url, dimensions
        self.concurrency, self.max_retries, self.timeout, self.backoff = concurrency, max_retries, timeout, backoff
        self.limits = LIMITS[provider]
        #: the bound on requests in flight (an executor's is shared by its workers: ``limiter_key``)
        self.limiter = limiter or Limiter(max(1, concurrency))
        self.limiter_key = f"embeddings-{stable_hash([provider, model, dimensions, base_url])}"
        self.usage = Usage()
        self.identity = stable_hash(
            {"provider": provider, "model": model, "dimensions": dimensions, "base_url": base_url}
        )
        self._client: Any = None
        self._dimension: int | None = dimensions
        self._dimension_lock = threading.Lock()

    # -- the provider call ---------------------------------------------------------------
    def client(self) -> Any:
        if self._client is None:
            env = "OPENAI_API_KEY" if self.provider == "openai" else "VOYAGE_API_KEY"
            key = os.environ.get(env)
            if not key:
                raise HarnessError(
                    f"{self.provider} embeddings need an API key in ${env} (read from the environment only)"
                )
            if self.provider == "openai":
                import openai

                self._client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout)
            else:
                import voyageai

                self._client = voyageai.Client(api_key=key, max_retries=0, timeout=self.timeout, base_url=self.base_url)
        return self._client

    def _request(self, texts: list[str], kind: str) -> tuple[np.ndarray, int]:
        try:
            if self.provider == "openai":
                extra = {"dimensions": self.dimensions} if self.dimensions else {}
                # the raw reply, parsed below: a 200 that is not JSON fails in parse(), not in the call
                raw = self.client().embeddings.with_raw_response.create(model=self.model, input=texts, **extra)
            else:
                response = self.client().embed(
                    texts, model=self.model, input_type=kind, output_dimension=self.dimensions
                )
        except HarnessError:
            raise
        except Exception as exc:
            retry = classify(exc)
            if retry is not None:
                raise retry from exc
            raise HarnessError(f"{self._who()} failed: {describe(exc)}") from exc
        try:  # a 200 reply that is not JSON, or JSON of another shape, comes back as something else
            if self.provider == "openai":
                response = raw.parse()
                items = sorted(response.data, key=lambda d: d.index)
                if [item.index for item in items] != list(range(len(items))):
                    raise Retryable(f"malformed response: indices {[item.index for item in items][:10]}")
                vectors = [item.embedding for item in items]
                tokens = int(getattr(response.usage, "prompt_tokens", 0) or 0)
            else:
                vectors, tokens = list(response.embeddings), int(response.total_tokens or 0)
        except Retryable:
            raise
        except Exception as exc:  # parsing failed: the body, not the request, was at fault
            raise Retryable(f"malformed response ({type(exc).__name__}: {_first_line(exc)})") from exc
        return self._checked(vectors, len(texts)), tokens

    def _checked(self, vectors: list[Any], expected: int) -> np.ndarray:
        """The reply's vectors as a matrix, or ``Retryable`` saying what is wrong with them: one
        per input, all of one length (``dimensions``, or the first good reply's), all finite.
        Checked here, before anything is cached or ranked."""
        if len(vectors) != expected:
            raise Retryable(f"{len(vectors)} vectors for {expected} inputs")
        try:
            rows = [np.asarray(v, dtype=np.float32) for v in vectors]
        except (TypeError, ValueError) as exc:
            raise Retryable(f"vectors that are not lists of numbers ({_first_line(exc)})") from exc
        lengths = sorted({row.shape[0] if row.ndim == 1 else -1 for row in rows})
        if len(lengths) != 1 or lengths[0] <= 0:
            raise Retryable(f"vectors of different lengths {lengths[:5]} in one reply")
        dimension = lengths[0]
        array = np.stack(rows) if rows else np.zeros((0, dimension), dtype=np.float32)
        bad = int((~np.isfinite(array).all(axis=1)).sum())
        if bad:
            raise Retryable(f"{bad} of {expected} vectors contain NaN or infinity")
        with self._dimension_lock:  # only a good reply sets the dimension the others must have
            if self._dimension is None:
                self._dimension = dimension
            elif dimension != self._dimension:
                raise Retryable(f"vectors of dimension {dimension}, expected {self._dimension}")
        return array

    def _who(self) -> str:
        return f"{self.provider} embeddings ({self.model})"

    def _with_retries(self, texts: list[str], kind: str) -> np.ndarray:
        policy = RetryPolicy(self.max_retries, self.backoff)

        def attempt() -> np.ndarray:
            try:
                with self.limiter:  # held for the request only, never through a backoff
                    vectors, tokens = self._request(texts, kind)
            except Retryable:
                self.usage.add(requests=1)
                raise
            self.usage.add(tokens=tokens, requests=1)
            return vectors

        def give_up(attempts: int, last: Retryable) -> HarnessError:
            return HarnessError(f"{self._who()} failed after {attempts} attempts; last: {last}")

        return policy.run(attempt, give_up, on_retry=lambda _attempt, _exc: self.usage.add(retries=1))

    # -- the encoder interface -----------------------------------------------------------
    def encode(
        self,
        texts: Sequence[str],
        kind: str,
        on_batch: Callable[[list[int], np.ndarray], None] | None = None,
    ) -> np.ndarray:
        groups = batches(texts, self.limits)
        results: list[np.ndarray | None] = [None] * len(groups)

        def run(position: int) -> None:
            vectors = self._with_retries([texts[i] for i in groups[position]], kind)
            results[position] = vectors
            if on_batch is not None:
                on_batch(groups[position], vectors)

        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            for future in [pool.submit(run, p) for p in range(len(groups))]:
                future.result()
        if not groups:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        out = np.concatenate([r for r in results if r is not None])
        self._dimension = out.shape[1]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1)

    def worker_factory(self) -> APIEncoderFactory:
        """What builds this encoder on an executor's workers, sharing its limiter (the
        executor's, given by the retriever: see ``limiter``)."""
        settings = ("provider", "model", "base_url", "dimensions", "concurrency", "max_retries", "timeout", "backoff")
        return APIEncoderFactory({name: getattr(self, name) for name in settings}, self.limiter)

    def absorb(self, result: dict[str, Any]) -> None:
        """Count what a worker's shard spent as this encoder's (rows and cost report it)."""
        self.usage.add(**result["usage"])
        if self._dimension is None and result["batches"]:
            self._dimension = int(result["batches"][0][1].shape[1])

    def keyed(self, texts: Sequence[str], kind: str) -> list[str]:
        """Cache keys: the text, and for Voyage the input type it was embedded as."""
        import hashlib

        prefix = f"{kind}\n" if self.provider == "voyage" else ""
        return [hashlib.sha1((prefix + t).encode("utf-8")).hexdigest() for t in texts]

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = self.encode(["dimension probe"], "query").shape[1]
        return self._dimension

    def cost(self) -> dict[str, Any]:
        price = PRICES.get(self.model)
        return {
            "provider": self.provider,
            "model": self.model,
            "tokens": self.usage.tokens,
            "requests": self.usage.requests,
            "retries": self.usage.retries,
            "cost_usd": None if price is None else round(self.usage.tokens * price / 1e6, 9),
        }


@dataclass
class APIEncoderFactory:
    """Builds an :class:`APIEncoder` on a worker (picklable; the key comes from the worker's
    environment). Its worker embeds a shard of documents and returns each request's vectors as
    they came (``batches``: rows of the shard and raw vectors) and what the shard spent."""

    #: the encoder's constructor arguments but its limiter
    settings: dict[str, Any]
    limiter: Limiter

    def __call__(self) -> Callable[[Sequence[str]], dict[str, Any]]:
        encoder = APIEncoder(**self.settings, limiter=self.limiter)

        def embed(texts: Sequence[str]) -> dict[str, Any]:
            before = (encoder.usage.tokens, encoder.usage.requests, encoder.usage.retries)
            batches: list[tuple[list[int], np.ndarray]] = []
            lock = threading.Lock()

            def keep(rows: list[int], vectors: np.ndarray) -> None:
                with lock:
                    batches.append((list(rows), vectors))

            encoder.encode(texts, "document", on_batch=keep)
            after = (encoder.usage.tokens, encoder.usage.requests, encoder.usage.retries)
            spent = {name: a - b for name, a, b in zip(("tokens", "requests", "retries"), after, before, strict=True)}
            return {"batches": batches, "usage": spent}

        return embed


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:300] if text else ""
