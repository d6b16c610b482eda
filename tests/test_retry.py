"""The one retry policy the embedding and LLM clients share (harness.retry)."""

from __future__ import annotations

import email.utils

import pytest

from harness.errors import HarnessError
from harness.retry import MAX_DELAY, Retryable, RetryPolicy, classify, retry_after


def test_retry_after_in_seconds_as_a_date_and_in_milliseconds() -> None:
    now = 1_700_000_000.0
    assert retry_after({"Retry-After": "3"}) == 3.0
    assert retry_after({"retry-after": " 0.25 "}) == 0.25
    assert retry_after({"Retry-After": email.utils.formatdate(now + 7, usegmt=True)}, now=now) == pytest.approx(7.0)
    assert retry_after({"Retry-After": email.utils.formatdate(now - 7, usegmt=True)}, now=now) == 0.0
    assert retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}) is None and retry_after(None) is None
    assert retry_after({"Retry-After": "nan"}) is None


def test_waits_grow_with_jitter_and_every_wait_is_capped() -> None:
    policy = RetryPolicy(retries=20, backoff=1.0)
    for attempt in range(4):
        assert 0.5 * 2**attempt <= policy.delay(attempt) <= 1.5 * 2**attempt
    assert policy.delay(15) == MAX_DELAY and policy.delay(0, after=86_400) == MAX_DELAY
    assert 2.0 <= policy.delay(0, after=2.0) <= 2.2  # the server's wish replaces the backoff


def test_run_heals_or_gives_up_with_the_callers_error() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=2, backoff=0.5, sleep=waits.append)
    replies = iter([Retryable("429", retry_after=4.0), Retryable("500"), "answer"])

    def call() -> str:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    retried: list[int] = []
    assert policy.run(call, lambda n, e: HarnessError(str(e)), lambda a, e: retried.append(a)) == "answer"
    assert retried == [0, 1] and 4.0 <= waits[0] <= 4.4 and 0.5 <= waits[1] <= 1.5

    def always() -> str:
        raise Retryable("NaN in reply")

    with pytest.raises(HarnessError, match="3 attempts: NaN in reply"):
        policy.run(always, lambda n, e: HarnessError(f"{n} attempts: {e}"))
    with pytest.raises(KeyError):  # anything else is not retried
        policy.run(lambda: {}["x"], lambda n, e: HarnessError(str(e)))


class _StatusError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"status {status}")
        self.status_code = status
        self.headers = headers or {}


class APITimeoutError(Exception):
    pass


def test_which_failures_are_retried() -> None:
    assert classify(_StatusError(429, {"Retry-After": "2"})).retry_after == 2.0  # type: ignore[union-attr]
    assert classify(_StatusError(503)) is not None and classify(_StatusError(408)) is not None
    assert classify(_StatusError(200)) is not None  # a 200 whose body could not be read
    assert classify(_StatusError(400)) is None and classify(_StatusError(401)) is None
    assert classify(APITimeoutError("read timed out")) is not None
    assert classify(ConnectionResetError()) is not None
    assert classify(AttributeError("x")) is None
