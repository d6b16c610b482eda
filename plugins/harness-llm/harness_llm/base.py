"""What every provider shares: an on-disk response cache, retries (the harness's one retry
policy, :mod:`harness.retry`: backoff with jitter, ``Retry-After`` honoured, capped), bounded
concurrency and usage accounting.

Cost: a provider's :meth:`ResilientLLM.price` (USD per million input and output tokens) prices
each answer; a model without a price has an unknown cost, recorded as ``cost_usd: null`` with
the reason in ``cost_unknown`` and said once on stderr — never as $0, which would read as free.

The cache key is (provider, model, endpoint, messages, generation parameters); an answer is
written the moment it arrives, atomically, with a digest every load checks (a damaged entry
is asked again, with a warning naming it), so an interrupted run resumes without paying for
any prompt twice. Keys (API secrets) never enter the cache key or the cache.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from abc import abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

import harness
from harness import HarnessError, Retryable, RetryPolicy, cache_root, discard_entry, exclusive, stable_hash, write_json
from harness_llm.api import LLM, Completion, Message, messages_of

__all__ = ["Attempt", "ResilientLLM", "Retryable"]

# USD per million (input, output) tokens of API models, for the cost column (list prices when
# these models were current). A model missing here has no price: give one with the provider's
# ``price`` parameter, or its cost is recorded as unknown (see ``ResilientLLM.price``).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4-1106-preview": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "claude-3-opus-20240229": (15.00, 75.00),
    "claude-3-5-sonnet-20241022": (3.00, 15.00),
    "claude-3-5-haiku-20241022": (0.80, 4.00),
    "claude-sonnet-4-20250514": (3.00, 15.00),
}


@dataclass
class Attempt:
    """One provider answer, before caching and accounting."""

    text: str
    input_tokens: int
    output_tokens: int


class ResilientLLM(LLM):
    """An LLM with caching, retries and concurrency; subclasses implement ``_call`` only."""

    class Options(harness.Options):
        concurrency: int = Field(4, ge=1, description="requests in flight at once")
        retries: int = Field(5, ge=0, description="retries of a transient fault before giving up")
        backoff: float = Field(1.0, ge=0, description="seconds before the first retry, doubled each time")
        timeout: float = Field(60.0, gt=0, description="seconds to wait for one answer")
        cache: bool = Field(True, description="keep answers in the on-disk response cache")

    options: Options

    def __init__(self, model: str, **params: Any) -> None:
        super().__init__(model, **params)
        self._lock = threading.Lock()
        self._usage = {"calls": 0, "cached": 0, "retries": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        self._told_unpriced = False

    # -- what a provider implements ------------------------------------------------------
    @abstractmethod
    def _call(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        """One request; raise ``Retryable`` for transient faults, ``HarnessError`` otherwise."""

    def endpoint(self) -> str:
        """Where requests go (part of the cache key; never a secret)."""
        return ""

    def price(self) -> tuple[float, float] | None:
        """USD per million (input, output) tokens, or None when unknown: then every cost this
        object reports is None (unknown), never 0. By default the built-in table's price."""
        return PRICES.get(self.model)

    def unpriced(self) -> str:
        """Why the cost is unknown and how to give a price (``usage()["cost_unknown"]``)."""
        return f"no price for {self.label}; give llm_params: {{price: [IN, OUT]}} (USD per million tokens)"

    # -- shared machinery --------------------------------------------------------------
    def _cache_path(self, messages: list[Message], max_tokens: int, temperature: float) -> Path:
        key = stable_hash(
            {
                "provider": self.name,
                "model": self.model,
                "endpoint": self.endpoint(),
                "messages": [[m.role, m.content] for m in messages],
                "max_tokens": max_tokens,
                "temperature": temperature,
                "layout": 2,  # entries carry a digest of their answer
            }
        )
        return Path(cache_root()) / "llm" / self.name / key[:2] / f"{key}.json"

    def _read_cache(self, path: Path) -> Completion | None:
        """The cached answer at ``path``, or None: absent, or damaged (a warning names it, and
        the prompt is asked again and the entry overwritten)."""
        if not path.exists():
            return None
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            answer = {k: cached[k] for k in ("text", "input_tokens", "output_tokens", "model")}
            if cached["sha256"] != stable_hash(answer, 64):
                raise ValueError("the answer does not match its digest")
            return Completion(answer["text"], answer["input_tokens"], answer["output_tokens"], 0.0, 0.0, cached=True)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            discard_entry(path, str(exc))
            return None

    def complete(self, prompt: str | Sequence[Message], max_tokens: int = 256, temperature: float = 0.0) -> Completion:
        messages = messages_of(prompt)
        path = self._cache_path(messages, max_tokens, temperature)
        if not self.options.cache:
            return self._ask(messages, max_tokens, temperature, path)
        cached = self._read_cache(path)
        if cached is None:
            # Two processes asking the same prompt: one asks, the other waits and reads its answer.
            # The lock is one of 256 per cache directory (by key prefix), not one file per prompt.
            with exclusive(path.parent / f".{path.name[:2]}.lock", f"waiting for another process asking {path}"):
                cached = self._read_cache(path)
                if cached is None:
                    return self._ask(messages, max_tokens, temperature, path)
        self._count(cached)
        return cached

    def _ask(self, messages: list[Message], max_tokens: int, temperature: float, path: Path) -> Completion:
        started = time.perf_counter()
        attempt = self._with_retries(messages, max_tokens, temperature)
        return self._record(attempt, time.perf_counter() - started, path)

    def _record(self, attempt: Attempt, seconds: float, path: Path) -> Completion:
        """Cache and count a fresh answer (``path``: its cache entry)."""
        completion = Completion(
            attempt.text,
            attempt.input_tokens,
            attempt.output_tokens,
            seconds,
            self._cost(attempt.input_tokens, attempt.output_tokens),
        )
        if self.options.cache:
            answer = {
                "text": attempt.text,
                "input_tokens": attempt.input_tokens,
                "output_tokens": attempt.output_tokens,
                "model": self.model,
            }
            write_json(path, {**answer, "sha256": stable_hash(answer, 64)})  # the digest a load checks
        self._count(completion)
        return completion

    def complete_many(
        self, prompts: Sequence[str | Sequence[Message]], max_tokens: int = 256, temperature: float = 0.0
    ) -> list[Completion]:
        if len(prompts) <= 1 or self.options.concurrency == 1:
            return super().complete_many(prompts, max_tokens, temperature)
        with ThreadPoolExecutor(self.options.concurrency) as pool:
            return list(pool.map(lambda p: self.complete(p, max_tokens, temperature), prompts))

    def _with_retries(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        policy = RetryPolicy(self.options.retries, self.options.backoff)

        def count_retry(_attempt: int, _exc: Retryable) -> None:
            with self._lock:
                self._usage["retries"] += 1

        def give_up(attempts: int, last: Retryable) -> HarnessError:
            return HarnessError(f"{self.label}: gave up after {attempts} attempts; last error: {last}")

        return policy.run(lambda: self._call(messages, max_tokens, temperature), give_up, on_retry=count_retry)

    def _cost(self, input_tokens: int, output_tokens: int) -> float | None:
        price = self.price()
        if price is None:
            return None
        price_in, price_out = price
        return (input_tokens * price_in + output_tokens * price_out) / 1e6

    def _count(self, completion: Completion) -> None:
        with self._lock:
            self._usage["cached" if completion.cached else "calls"] += 1
            self._usage["input_tokens"] += completion.input_tokens
            self._usage["output_tokens"] += completion.output_tokens
            if completion.cost_usd is not None:
                self._usage["cost_usd"] += completion.cost_usd
            tell = self.price() is None and not self._told_unpriced
            self._told_unpriced = self._told_unpriced or tell
        if tell:  # once per object, when it first answers: the row's cost column will say "unknown"
            print(f"note: cost unknown: {self.unpriced()}", file=sys.stderr, flush=True)

    def usage(self) -> dict[str, Any]:
        with self._lock:
            usage: dict[str, Any] = {"llm": self.label, **self._usage}
        if self.price() is None:  # unknown, even if every answer came from the cache: never $0
            usage["cost_usd"] = None
            usage["cost_unknown"] = self.unpriced()
        return usage
