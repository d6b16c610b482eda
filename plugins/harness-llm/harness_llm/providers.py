"""Hosted providers through their official SDKs: OpenAI (and any OpenAI-compatible server
via ``base_url``) and Anthropic. The SDKs' own retries are off; ``ResilientLLM`` retries with
the harness's one policy (:mod:`harness.retry`), so every provider backs off, honours
``Retry-After``, counts and gives up the same way. A 200 reply that is not JSON, or is not a
completion (no choices, Anthropic's empty ``content``), is retried, never taken as an answer.

Keys come from the environment only (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) and are
checked when a component naming the provider is constructed (:meth:`HostedLLM.check_ready`,
through :func:`harness_llm.api.check_llm`): a missing one fails before anything loads, not after
minutes of work.

Cost: ``price`` (USD per million input and output tokens) if given, else the built-in table's
(:data:`harness_llm.base.PRICES`); a model in neither costs 0 on a server of your own — a
``base_url`` on this machine or a private network (:func:`own_server`), which has no per-token
price; anywhere else (an OpenAI-compatible service such as OpenRouter or Together is paid) the
cost is unknown (recorded as null, never as $0)."""

from __future__ import annotations

import ipaddress
import os
from abc import abstractmethod
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from harness import HarnessError, Retryable, classify_failure, describe_failure
from harness_llm.api import Message
from harness_llm.base import PRICES, Attempt, ResilientLLM

__all__ = ["AnthropicLLM", "HostedLLM", "OpenAILLM", "own_server"]


def own_server(base_url: str) -> bool:
    """Whether ``base_url`` is a server of your own: on this machine (``localhost``, 127.0.0.0/8,
    ::1) or a private network (10/8, 172.16/12, 192.168/16, fc00::/7, link-local). Any other
    host name is taken as remote, a service that may charge per token: names are not resolved,
    as what a name resolves to can change between runs and a row must not."""
    host = (urlsplit(base_url if "//" in base_url else f"//{base_url}").hostname or "").rstrip(".")
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):  # RFC 6761: always loopback
        return True
    try:
        address = ipaddress.ip_address(host.split("%")[0])  # an IPv6 zone (fe80::1%eth0) is no part of it
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def _key(variable: str, provider: str, base_url: str | None) -> str:
    key = os.environ.get(variable)
    if key:
        return key
    if base_url:  # a local OpenAI-compatible server usually wants no key; the SDK wants a string
        return "unused"
    raise HarnessError(_missing_key(variable, provider))


def _missing_key(variable: str, provider: str) -> str:
    return (
        f"{provider} needs an API key: set {variable} in the environment (export {variable}=...; "
        "keys are never read from parameters)"
    )


class HostedLLM(ResilientLLM):
    """A provider reached through its SDK's client, made on first use (the SDK is imported then)."""

    #: where requests go when no ``base_url`` is given
    default_endpoint: ClassVar[str]
    #: the environment variable holding the key to ``default_endpoint``
    key_variable: ClassVar[str]

    class Options(ResilientLLM.Options):
        base_url: str | None = Field(None, description="another server speaking this API (a local one needs no key)")
        price: tuple[float, float] | None = Field(
            None,
            description="USD per million (input, output) tokens, e.g. [0.4, 1.6]; default: the built-in table, "
            "else 0 with a base_url on this machine or a private network (your own server), "
            "else the cost is unknown",
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

    @classmethod
    def check_ready(cls, params: dict[str, Any]) -> None:
        """The provider's own endpoint needs its key: a component naming this provider fails as
        it is made, before any work (another server, ``base_url``, may need none; its reply
        says if it does). The provider itself checks again on its first request."""
        if not params.get("base_url") and not os.environ.get(cls.key_variable):
            raise HarnessError(_missing_key(cls.key_variable, cls.name))

    def endpoint(self) -> str:
        return self.options.base_url or self.default_endpoint

    def price(self) -> tuple[float, float] | None:
        if self.options.price is not None:
            return self.options.price
        if self.model in PRICES:
            return PRICES[self.model]
        # a model the table does not know, on a server of your own: no per-token price; on
        # another host (OpenRouter, Together, …) it has one nobody gave: unknown, never $0
        base_url = self.options.base_url
        return (0.0, 0.0) if base_url and own_server(base_url) else None

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
    key_variable = "OPENAI_API_KEY"

    def make_client(self) -> Any:
        import openai

        base_url = self.options.base_url
        key = _key(self.key_variable, self.name, base_url)
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
    key_variable = "ANTHROPIC_API_KEY"

    def make_client(self) -> Any:
        import anthropic

        key = _key(self.key_variable, self.name, None)
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
