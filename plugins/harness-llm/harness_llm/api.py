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
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import harness

if TYPE_CHECKING:
    from harness import Options

__all__ = [
    "LLM",
    "Completion",
    "Message",
    "check_llm",
    "get_llm",
    "llm_class",
    "messages_of",
    "options_of",
    "split_spec",
]


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass
class Completion:
    """One answer. ``cached`` answers cost nothing now; their tokens are still reported.
    ``cost_usd`` is None when the model has no price (the cost is unknown, not 0)."""

    text: str
    input_tokens: int
    output_tokens: int
    seconds: float
    cost_usd: float | None = 0.0
    cached: bool = False


def messages_of(prompt: str | Sequence[Message]) -> list[Message]:
    """A bare string is one user message."""
    return [Message("user", prompt)] if isinstance(prompt, str) else list(prompt)


class LLM(ABC):
    """Base class for LLM providers. Subclass, set ``name`` (the provider, e.g. "openai"),
    declare ``Options`` (a :class:`harness.Options` model) if it takes parameters, implement
    ``complete``.

    ``model`` is the part of ``provider:model`` after the colon; every other constructor
    keyword argument is validated against ``Options`` into ``self.options``. Keys come from
    the environment only and are never parameters, so rows, caches and logs cannot leak them.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"
    Options: ClassVar[type[Options]] = harness.Options

    def __init__(self, model: str, **params: Any) -> None:
        self.model = model
        self.options = harness.parse_options(options_of(type(self)), params, f"llm {getattr(self, 'name', '?')!r}")

    @classmethod  # noqa: B027 (not abstract: most providers need nothing)
    def check_ready(cls, params: dict[str, Any]) -> None:
        """Raise :class:`harness.HarnessError` if this provider cannot answer here with ``params``
        (validated, defaults filled in), e.g. its API key is not set. Components naming the
        provider call it when they are constructed (:func:`check_llm`), before anything loads."""

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
        """Calls, tokens, retries and cost so far (``cost_usd``: USD, or None when unknown, with
        the reason in ``cost_unknown``)."""
        return {}


def options_of(component: type[Any]) -> type[Options]:
    """A provider's parameters model (``harness.Options``, no parameters, if it declares none)."""
    return component.Options


def split_spec(spec: str) -> tuple[str, str]:
    """``provider:model`` → ``(provider, model)``, or a :class:`harness.HarnessError`."""
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise harness.HarnessError(f"LLM {spec!r}: write it as provider:model, e.g. openai:gpt-5.4-mini")
    return provider, model


def llm_class(provider: str) -> type[LLM]:
    """The provider class registered under ``provider`` (``register_llms``), in the plugin
    manager the run or resolution is using."""
    return harness.lookup("llm", provider)


def get_llm(spec: str, **params: Any) -> LLM:
    """The LLM for ``provider:model`` (e.g. ``openai:gpt-5.4-mini``, ``local:/models/x.gguf``)."""
    provider, model = split_spec(spec)
    return llm_class(provider)(model, **params)


def check_llm(spec: str, params: dict[str, Any], where: str) -> None:
    """What a component naming ``spec`` calls when it is constructed: the provider's
    :meth:`LLM.check_ready` (a missing key), its error prefixed with ``where`` and the LLM."""
    provider, _ = split_spec(spec)
    try:
        llm_class(provider).check_ready(params)
    except harness.HarnessError as exc:
        raise harness.HarnessError(f"{where}: llm {spec!r}: {exc}") from None
