"""Parameters of components that ask an LLM (rerankers, synthesis stages), declared once."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import AfterValidator, Field, model_validator

import harness
from harness_llm.api import llm_class, options_of, split_spec

__all__ = ["LLMSpec", "UsesLLM"]


def _check_spec(spec: str) -> str:
    try:
        split_spec(spec)
    except harness.HarnessError as exc:
        raise ValueError(str(exc)) from None  # pydantic reports it among the other problems
    return spec


#: ``provider:model``, checked for its form wherever a component declares one.
LLMSpec = Annotated[str, AfterValidator(_check_spec)]


class UsesLLM(harness.Options):
    """Parameters of a component that asks an LLM. ``llm_params`` are checked against the
    provider's ``Options`` and replaced by all of them, defaults filled in, so rows record
    what ran and a typo fails before anything is built."""

    llm: LLMSpec = Field(description="provider:model, e.g. openai:gpt-5.4-mini or local:/path/model.gguf")
    llm_params: dict[str, Any] = Field(
        default_factory=dict, description="the provider's parameters (base_url, price, concurrency, timeout, …)"
    )

    @model_validator(mode="after")
    def _resolve_llm_params(self) -> Self:
        provider, _ = split_spec(self.llm)
        options = options_of(llm_class(provider))
        self.llm_params = harness.parse_options(options, self.llm_params, f"llm {self.llm!r}").model_dump(mode="json")
        return self
