"""Embeddings from hosted APIs: OpenAI (and any OpenAI-compatible server) and Voyage AI.

Requests go through the providers' official SDKs, with their own retries switched off so
that this module controls them: batches sized by the provider's limits (inputs and
estimated tokens per request), bounded concurrency, retries with exponential backoff and
jitter on 429, 5xx, timeouts and malformed responses, and token and cost accounting.
API keys are read from the environment only (``OPENAI_API_KEY``, ``VOYAGE_API_KEY``) and are
never logged, cached or written into rows. Combined with the embedding cache, an
interrupted run never pays twice for the same text.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.io import stable_hash

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


class Retryable(Exception):
    """A failure worth retrying (rate limit, server error, timeout, malformed body)."""


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
    ) -> None:
        if provider not in LIMITS:
            raise HarnessError(f"unknown embedding provider {provider!r}; known: {', '.join(LIMITS)}")
        self.provider, self.model, self.base_url, self.dimensions = provider, model, base_url, dimensions
        self.concurrency, self.max_retries, self.timeout, self.backoff = concurrency, max_retries, timeout, backoff
        self.limits = LIMITS[provider]
        self.usage = Usage()
        self.identity = stable_hash(
            {"provider": provider, "model": model, "dimensions": dimensions, "base_url": base_url}
        )
        self._client: Any = None
        self._dimension: int | None = dimensions

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
                response = self.client().embeddings.create(model=self.model, input=texts, **extra)
                vectors = [item.embedding for item in sorted(response.data, key=lambda d: d.index)]
                tokens = int(getattr(response.usage, "prompt_tokens", 0) or 0)
            else:
                response = self.client().embed(
                    texts, model=self.model, input_type=kind, output_dimension=self.dimensions
                )
                vectors, tokens = response.embeddings, int(response.total_tokens or 0)
        except HarnessError:
            raise
        except Exception as exc:
            if _retryable(exc):
                raise Retryable(f"{type(exc).__name__}: {_first_line(exc)}") from exc
            raise HarnessError(f"{self.provider} embeddings failed: {type(exc).__name__}: {_first_line(exc)}") from exc
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or len(array) != len(texts):
            raise Retryable(f"malformed response: {len(array)} vectors for {len(texts)} inputs")
        return array, tokens

    def _with_retries(self, texts: list[str], kind: str) -> np.ndarray:
        for attempt in range(self.max_retries + 1):
            try:
                vectors, tokens = self._request(texts, kind)
                self.usage.add(tokens=tokens, requests=1)
                return vectors
            except Retryable as exc:
                self.usage.add(requests=1, retries=1 if attempt < self.max_retries else 0)
                if attempt == self.max_retries:
                    raise HarnessError(
                        f"{self.provider} embeddings failed after {attempt + 1} attempts: {exc}"
                    ) from exc
                time.sleep(self.backoff * (2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

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


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:300] if text else ""


def _retryable(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None) or getattr(exc, "http_status", None)
    if status is None and getattr(exc, "response", None) is not None:
        status = getattr(exc.response, "status_code", None)
    if isinstance(status, int):  # a 2xx here means the body could not be read: malformed
        return status in (408, 429) or status >= 500 or 200 <= status < 300
    name = type(exc).__name__.lower()
    return any(
        word in name
        for word in (
            "timeout",
            "connection",
            "ratelimit",
            "serviceunavailable",
            "server",
            "apierror",
            "tryagain",
            "json",
            "decode",
        )
    )
