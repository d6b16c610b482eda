"""LLMs for stark-harness: the LLM interface, provider plugins and LLM rerankers.

Offers other plugins the ``register_llms`` hook and the interface: ``LLM``, ``Message``,
``Completion`` and ``get_llm`` in ``harness_llm.api``; ``harness_llm.options.UsesLLM``, the
shared parameters of components that ask an LLM.

Providers: ``openai`` (official SDK; ``base_url`` for any OpenAI-compatible server),
``anthropic`` (official SDK) and ``local`` (a GGUF file or model directory in this process,
through transformers). All share an on-disk response cache, retries with backoff and bounded
concurrency (``harness_llm.base``). ``harness-llm-serve`` puts a local model behind an
OpenAI-compatible HTTP server.

Retrievers: ``llm-reranker`` (STaRK's pointwise reranker, or listwise). Presets: three
rerankers over BM25 (``presets.yaml``).

This module is the entry point: it holds only the hooks and imports nothing heavy. The
interface, providers, the reranker and their pydantic models live in submodules and load when
first used (the component kind is named by its dotted path, so adding the hook imports
nothing either).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness


@harness.hookimpl
def add_hookspecs(manager: Any) -> None:
    from harness_llm.hookspecs import offer

    offer(manager)


@harness.hookimpl
def register_llms(register: Any) -> None:
    register("harness_llm.providers:OpenAILLM", name="openai")
    register("harness_llm.providers:AnthropicLLM", name="anthropic")
    register("harness_llm.local:LocalLLM", name="local")


@harness.hookimpl
def register_retrievers(register: Any) -> None:
    register("harness_llm.rerank:LLMReranker", name="llm-reranker")


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
