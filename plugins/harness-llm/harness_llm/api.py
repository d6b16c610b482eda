"""The LLM interface: complete a chat prompt, and say what it cost.

Providers (OpenAI, Anthropic, any OpenAI-compatible server, a model in this process) are
plugins registering :class:`LLM` subclasses through ``register_llms`` (a hook this plugin
offers; see :mod:`harness_llm.hookspecs`); rerankers and synthesis stages ask for one by
provider name and model (``get_llm``) and never import a provider themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, Field, model_validator

import harness

__all__ = ["LLM", "Completion", "LLMSpec", "Message", "UsesLLM", "get_llm", "llm_class", "messages_of"]


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass
class Completion:
    """One answer. ``cached`` answers cost nothing now; their tokens are still reported."""

    text: str
    input_tokens: int
    output_tokens: int
    seconds: float
    cost_usd: float = 0.0
    cached: bool = False


def messages_of(prompt: str | Sequence[Message]) -> list[Message]:
    """A bare string is one user message."""
    return [Message("user", prompt)] if isinstance(prompt, str) else list(prompt)


def _parse(options: type[harness.Options], params: dict[str, Any], what: str) -> harness.Options:
    # The core's own parameter validation, so errors read the same as a retriever's.
    from harness.options import parse_options

    return parse_options(options, params, what)


class LLM(ABC):
    """Base class for LLM providers. Subclass, set ``name`` (the provider, e.g. "openai"),
    declare ``Options``, implement ``complete``.

    ``model`` is the part of ``provider:model`` after the colon; every other constructor
    keyword argument is validated against ``Options`` into ``self.options``. Keys come from
    the environment only and are never parameters, so rows, caches and logs cannot leak them.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"
    Options: ClassVar[type[harness.Options]] = harness.Options

    def __init__(self, model: str, **params: Any) -> None:
        self.model = model
        self.options = _parse(type(self).Options, params, f"llm {getattr(self, 'name', '?')!r}")

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter with the value that runs (JSON types)."""
        return self.options.model_dump(mode="json")

    @property
    def label(self) -> str:
        """``provider:model``, as recorded in leaderboard rows."""
        return f"{self.name}:{self.model}"

    @abstractmethod
    def complete(self, prompt: str | Sequence[Message], max_tokens: int = 256, temperature: float = 0.0) -> Completion:
        """Answer ``prompt``; raise :class:`harness.HarnessError` with one clear line on failure."""

    def complete_many(
        self, prompts: Sequence[str | Sequence[Message]], max_tokens: int = 256, temperature: float = 0.0
    ) -> list[Completion]:
        """Answer several prompts, in order (providers may run them concurrently)."""
        return [self.complete(p, max_tokens=max_tokens, temperature=temperature) for p in prompts]

    def usage(self) -> dict[str, Any]:
        """Calls, tokens, retries and cost so far."""
        return {}


def _split(spec: str) -> tuple[str, str]:
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise harness.HarnessError(f"LLM {spec!r}: write it as provider:model, e.g. openai:gpt-4o-mini")
    return provider, model


def _check_spec(spec: str) -> str:
    try:
        _split(spec)
    except harness.HarnessError as exc:
        raise ValueError(str(exc)) from None  # pydantic reports it among the other problems
    return spec


#: ``provider:model``, checked for its form wherever a component declares one.
LLMSpec = Annotated[str, AfterValidator(_check_spec)]


def llm_class(provider: str) -> type[LLM]:
    """The provider class registered under ``provider`` (``register_llms``)."""
    # The process-wide manager: the one that loaded this plugin and its providers.
    from harness.plugins import get_plugin_manager

    return get_plugin_manager().components.get("llm", provider)


def get_llm(spec: str, **params: Any) -> LLM:
    """The LLM for ``provider:model`` (e.g. ``openai:gpt-4o-mini``, ``local:/models/x.gguf``)."""
    provider, model = _split(spec)
    return llm_class(provider)(model, **params)


class UsesLLM(harness.Options):
    """Parameters of a component that asks an LLM. ``llm_params`` are checked against the
    provider's ``Options`` and replaced by all of them, defaults filled in, so rows record
    what ran and a typo fails before anything is built."""

    llm: LLMSpec = Field(description="provider:model, e.g. openai:gpt-4o-mini or local:/path/model.gguf")
    llm_params: dict[str, Any] = Field(
        default_factory=dict, description="the provider's parameters (base_url, concurrency, timeout, …)"
    )

    @model_validator(mode="after")
    def _resolve_llm_params(self) -> Self:
        provider, _ = _split(self.llm)
        options = llm_class(provider).Options
        self.llm_params = _parse(options, self.llm_params, f"llm {self.llm!r}").model_dump(mode="json")
        return self
