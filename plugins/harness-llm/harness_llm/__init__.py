"""LLMs for stark-harness: provider plugins and LLM rerankers.

Providers (``register_llms``): ``openai`` (official SDK; ``base_url`` for any
OpenAI-compatible server), ``anthropic`` (official SDK) and ``local`` (a GGUF file or model
directory in this process, through transformers). All share an on-disk response cache,
retries with backoff and bounded concurrency (``harness_llm.base``). ``harness-llm-serve``
puts a local model behind an OpenAI-compatible HTTP server.

Retrievers (``register_retrievers``): ``llm-reranker`` (STaRK's pointwise reranker, or
listwise).
"""

from __future__ import annotations

from typing import Any

from harness.plugins.hookspecs import hookimpl
from harness_llm.local import LocalLLM
from harness_llm.providers import AnthropicLLM, OpenAILLM
from harness_llm.rerank import LLMReranker

__all__ = ["AnthropicLLM", "LLMReranker", "LocalLLM", "OpenAILLM"]


@hookimpl
def register_llms(register: Any) -> None:
    register(OpenAILLM)
    register(AnthropicLLM)
    register(LocalLLM)


@hookimpl
def register_retrievers(register: Any) -> None:
    register(LLMReranker)
