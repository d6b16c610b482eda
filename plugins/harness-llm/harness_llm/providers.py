"""Hosted providers through their official SDKs: OpenAI (and any OpenAI-compatible server
via ``base_url``) and Anthropic. The SDKs' own retries are off; ``ResilientLLM`` retries with
the harness's one policy (:mod:`harness.retry`), so every provider backs off, honours
``Retry-After``, counts and gives up the same way. A 200 reply that is not JSON, or is not a
completion (no choices, Anthropic's empty ``content``), is retried, never taken as an answer.

Cost: ``price`` (USD per million input and output tokens) if given, else the built-in table's
(:data:`harness_llm.base.PRICES`); a model in neither served from a ``base_url`` of your own
costs 0 (a server you run has no per-token price); otherwise the cost is unknown (recorded as
null, never as $0)."""

from __future__ import annotations

import os
from abc import abstractmethod
from typing import Any, ClassVar

from pydantic import Field, field_validator

from harness import HarnessError, Retryable, classify_failure, describe_failure
from harness_llm.api import Message
from harness_llm.base import PRICES, Attempt, ResilientLLM

__all__ = ["AnthropicLLM", "HostedLLM", "OpenAILLM"]


def _key(variable: str, provider: str, base_url: str | None) -> str:
    key = os.environ.get(variable)
    if key:
        return key
    if base_url:  # a local OpenAI-compatible server usually wants no key; the SDK wants a string
        return "unused"
    raise HarnessError(f"{provider}: set {variable} in the environment (keys are never read from parameters)")


class HostedLLM(ResilientLLM):
    """A provider reached through its SDK's client, made on first use (the SDK is imported then)."""

    #: where requests go when no ``base_url`` is given
    default_endpoint: ClassVar[str]

    class Options(ResilientLLM.Options):
        base_url: str | None = Field(None, description="another server speaking this API (a local one needs no key)")
        price: tuple[float, float] | None = Field(
            None,
            description="USD per million (input, output) tokens, e.g. [0.4, 1.6]; default: the built-in table, "
            "else 0 with base_url (your own server), else the cost is unknown",
        )

        @field_validator("price")
        @classmethod
        def _not_negative(cls, price: tuple[float, float] | None) -> tuple[float, float] | None:
            if price is not None and min(price) < 0:
                raise ValueError("a price is not negative")
            return price

    options: Options

    def __init__(self, model: str, **params: Any) -> None:
        super().__init__(model, **params)
        self._client: Any = None

    def endpoint(self) -> str:
        return self.options.base_url or self.default_endpoint

    def price(self) -> tuple[float, float] | None:
        if self.options.price is not None:
            return self.options.price
        if self.model in PRICES:
            return PRICES[self.model]
        # a model the table does not know, on a server of your own: no per-token price
        return (0.0, 0.0) if self.options.base_url else None

    def client(self) -> Any:
        if self._client is None:
            self._client = self.make_client()
        return self._client

    @abstractmethod
    def make_client(self) -> Any:
        """The SDK client, with the SDK's own retries off (``ResilientLLM`` retries)."""


class OpenAILLM(HostedLLM):
    """Chat completions through the ``openai`` SDK; ``base_url`` for vLLM, llama.cpp, … ."""

    name = "openai"
    default_endpoint = "https://api.openai.com/v1"

    def make_client(self) -> Any:
        import openai

        base_url = self.options.base_url
        key = _key("OPENAI_API_KEY", "openai", base_url)
        return openai.OpenAI(api_key=key, base_url=base_url, timeout=self.options.timeout, max_retries=0)

    def _call(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        try:
            response = self.client().chat.completions.create(
                model=self.model,
                messages=[{"role": m.role, "content": m.content} for m in messages],
                max_tokens=max_tokens,
                temperature=temperature,
            )
        except Exception as exc:
            raise _failure(self.label, exc) from None
        try:
            text = response.choices[0].message.content
            usage = response.usage
            if not isinstance(text, str):
                raise TypeError("no content")
            return Attempt(text, usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        except (AttributeError, IndexError, KeyError, TypeError) as exc:  # not JSON, or JSON but not a completion
            raise Retryable(f"malformed response ({type(response).__name__}: {exc})") from None


class AnthropicLLM(HostedLLM):
    """Messages through the ``anthropic`` SDK (system prompts go in ``system``)."""

    name = "anthropic"
    default_endpoint = "https://api.anthropic.com"

    def make_client(self) -> Any:
        import anthropic

        key = _key("ANTHROPIC_API_KEY", "anthropic", None)
        return anthropic.Anthropic(
            api_key=key, base_url=self.options.base_url, timeout=self.options.timeout, max_retries=0
        )

    def _call(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        extra: dict[str, Any] = {"system": system} if system else {}
        if temperature > 0:  # newer Messages APIs dropped the parameter; send it only when asked for
            extra["extra_body"] = {"temperature": temperature}
        try:
            response = self.client().messages.create(model=self.model, messages=chat, max_tokens=max_tokens, **extra)
        except Exception as exc:
            raise _failure(self.label, exc) from None
        try:
            texts = [block.text for block in response.content if getattr(block, "type", "") == "text"]
            if not texts:  # an empty ``content`` is a fault to retry, not an empty answer
                raise TypeError(f"no text in content {response.content!r:.100}")
            return Attempt("".join(texts), response.usage.input_tokens, response.usage.output_tokens)
        except (AttributeError, KeyError, TypeError) as exc:
            raise Retryable(f"malformed response ({type(response).__name__}: {exc})") from None


def _failure(label: str, exc: Exception) -> Exception:
    """What an SDK exception becomes: ``Retryable`` when transient (the shared policy decides,
    reading ``Retry-After``), otherwise one clear ``HarnessError``."""
    if isinstance(exc, HarnessError):
        return exc
    retry = classify_failure(exc)
    if retry is not None:
        return retry
    return HarnessError(f"{label}: {describe_failure(exc)}")
