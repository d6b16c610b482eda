"""The LLM interface: complete a chat prompt, and say what it cost.

Providers (OpenAI, Anthropic, any OpenAI-compatible server, a model in this process) are
plugins registering :class:`LLM` subclasses through ``register_llms``; rerankers and
synthesis stages ask for one by provider name and model (``get_llm``) and never import a
provider themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = ["LLM", "Completion", "Message", "get_llm", "messages_of"]


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


class LLM(ABC):
    """Base class for LLM providers. Subclass, set ``name`` (the provider, e.g. "openai"),
    implement ``complete``.

    Constructor keyword arguments are the provider's parameters; ``model`` is always one.
    Keys come from the environment only and are never parameters, so rows, caches and logs
    cannot leak them.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"

    def __init__(self, model: str, **params: Any) -> None:
        self.model = model
        self.params = params

    @property
    def label(self) -> str:
        """``provider:model``, as recorded in leaderboard rows."""
        return f"{self.name}:{self.model}"

    @abstractmethod
    def complete(self, prompt: str | Sequence[Message], max_tokens: int = 256, temperature: float = 0.0) -> Completion:
        """Answer ``prompt``; raise ``harness.errors.HarnessError`` with one clear line on failure."""

    def complete_many(
        self, prompts: Sequence[str | Sequence[Message]], max_tokens: int = 256, temperature: float = 0.0
    ) -> list[Completion]:
        """Answer several prompts, in order (providers may run them concurrently)."""
        return [self.complete(p, max_tokens=max_tokens, temperature=temperature) for p in prompts]

    def usage(self) -> dict[str, Any]:
        """Calls, tokens, retries and cost so far."""
        return {}


def get_llm(spec: str, **params: Any) -> LLM:
    """The LLM for ``provider:model`` (e.g. ``openai:gpt-4o-mini``, ``local:/models/x.gguf``)."""
    from harness.errors import HarnessError
    from harness.plugins import get_plugin_manager

    provider, sep, model = spec.partition(":")
    if not sep or not model:
        raise HarnessError(f"LLM {spec!r}: write it as provider:model, e.g. openai:gpt-4o-mini")
    cls = get_plugin_manager().components.get("llm", provider)
    return cls(model=model, **params)
