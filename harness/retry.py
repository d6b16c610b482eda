"""One retry policy for every remote call: API embeddings and hosted LLMs.

A call either heals or stops with one clear error. Retried: connection errors, timeouts,
HTTP 408, 429 and 5xx, and a 200 reply that is not JSON or has the wrong shape (callers
raise :class:`Retryable` for those, and for replies that fail their own checks, such as
embedding vectors with NaN). Anything else (400, 401, 404, ...) fails at once. Waits grow
exponentially with jitter from ``backoff`` seconds; a server's ``Retry-After`` (seconds or
an HTTP-date, or OpenAI's ``retry-after-ms``) replaces the backoff; every wait is capped.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, TypeVar

__all__ = ["MAX_DELAY", "RetryPolicy", "Retryable", "classify", "retry_after", "retryable_status", "status_of"]

T = TypeVar("T")

#: No single wait (backoff or Retry-After) is longer than this, in seconds.
MAX_DELAY = 60.0

#: Words in an SDK exception's class name that mark a transient failure when it carries no
#: HTTP status (connection and timeout errors, Voyage's TryAgain, undecodable bodies).
_TRANSIENT_NAMES = (
    "timeout",
    "connection",
    "ratelimit",
    "serviceunavailable",
    "server",
    "tryagain",
    "json",
    "decode",
    "remotedisconnected",
    "protocolerror",
)


class Retryable(Exception):
    """A transient failure worth asking again; ``retry_after`` is the server's wish, in seconds."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(headers: Mapping[str, Any] | None, now: float | None = None) -> float | None:
    """Seconds a reply asks the client to wait, from ``retry-after-ms`` or ``Retry-After``
    (delay-seconds or an HTTP-date); None when absent or unreadable."""
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v).strip() for k, v in headers.items()}
    except (AttributeError, TypeError):
        return None
    seconds: float | None = None
    if lowered.get("retry-after-ms"):
        try:
            seconds = float(lowered["retry-after-ms"]) / 1000
        except ValueError:
            seconds = None
    value = lowered.get("retry-after")
    if seconds is None and value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def retryable_status(status: int) -> bool:
    """408, 429 and 5xx are transient; a 2xx that raised means the body could not be read."""
    return status in (408, 429) or status >= 500 or 200 <= status < 300


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception carries (OpenAI/Anthropic ``status_code``, Voyage ``http_status``)."""
    status = getattr(exc, "status_code", None) or getattr(exc, "http_status", None)
    response = getattr(exc, "response", None)
    if status is None and response is not None:
        status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _headers_of(exc: BaseException) -> Mapping[str, Any] | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    if headers is None:
        headers = getattr(exc, "headers", None)
    return headers if hasattr(headers, "items") else None


def describe(exc: BaseException) -> str:
    """One line for an error message: the status (if any), the exception type and its first line."""
    text = str(exc)
    first = text.splitlines()[0][:300] if text else ""
    status = status_of(exc)
    prefix = f"HTTP {status}: " if status is not None and not 200 <= status < 300 else ""
    return f"{prefix}{type(exc).__name__}: {first}" if first else f"{prefix}{type(exc).__name__}"


def classify(exc: BaseException) -> Retryable | None:
    """The :class:`Retryable` to raise for an SDK exception, or None when it is permanent."""
    if isinstance(exc, Retryable):
        return exc
    status = status_of(exc)
    if status is not None:
        if not retryable_status(status):
            return None
        what = "reply that could not be read" if 200 <= status < 300 else f"HTTP {status}"
        return Retryable(f"{what} ({describe(exc)})", retry_after(_headers_of(exc)))
    name = type(exc).__name__.lower()
    transient = isinstance(exc, ConnectionError | TimeoutError) or any(word in name for word in _TRANSIENT_NAMES)
    # Voyage's catch-all APIError (no status) covers undecodable bodies; permanent ones carry a status.
    transient = transient or name == "apierror"
    return Retryable(describe(exc), retry_after(_headers_of(exc))) if transient else None


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` further attempts after the first, ``backoff`` seconds before the first retry
    (doubled each time, with jitter), every wait capped at ``max_delay``."""

    retries: int
    backoff: float
    max_delay: float = MAX_DELAY
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def delay(self, attempt: int, after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        if after is not None:  # the server said when; a little jitter so clients do not return together
            return min(after * (1 + 0.1 * random.random()), self.max_delay)
        return min(self.backoff * (2.0**attempt) * (0.5 + random.random()), self.max_delay)

    def run(
        self,
        call: Callable[[], T],
        give_up: Callable[[int, Retryable], Exception],
        on_retry: Callable[[int, Retryable], None] | None = None,
    ) -> T:
        """``call()`` until it returns; a :class:`Retryable` waits and tries again, and after
        the last attempt ``give_up(attempts, last)`` is raised. Other exceptions propagate."""
        for attempt in range(self.retries + 1):
            try:
                return call()
            except Retryable as exc:
                if attempt == self.retries:
                    raise give_up(attempt + 1, exc) from exc
                if on_retry is not None:
                    on_retry(attempt, exc)
                self.sleep(self.delay(attempt, exc.retry_after))
        raise AssertionError("unreachable")
