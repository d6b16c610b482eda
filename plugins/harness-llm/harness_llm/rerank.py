"""LLM rerankers: STaRK's pointwise satisfaction score, and a listwise variant.

Pointwise (STaRK §4): for each of the first stage's top-v candidates, the LLM reads the query
and the candidate's document *with its relations* and answers with a number from 0 to 1
for how fully the candidate meets the query's requirements. The final score is that number
plus ``first_stage_weight × (v − rank) / v`` (STaRK's ``sim_weight``, 0.1), so the first
stage breaks ties. An answer without a usable number is asked once more with a terse
reminder; if that fails too, the candidate scores 0 and the row counts it as malformed.

Listwise: one prompt lists the v candidates; the LLM answers with their numbers in order of
relevance (``3 > 1 > 2``); candidates it leaves out keep their first-stage order after the
ones it ranked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness import SKB, BuildContext, HarnessError, Query, Ranking
from harness_llm.api import LLM, Message, check_llm, get_llm
from harness_llm.options import LLMSpec, UsesLLM

__all__ = ["LLMReranker", "parse_ranking", "parse_score"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(%?)")


def parse_score(answer: str) -> float | None:
    """The first number in ``answer`` if it is a score in [0, 1] (``80%`` reads as 0.8)."""
    match = _NUMBER.search(answer)
    if match is None:
        return None
    value = float(match.group(0).rstrip("%"))
    if match.group(1):
        value /= 100
    return value if 0.0 <= value <= 1.0 else None


def parse_ranking(answer: str, count: int) -> list[int] | None:
    """Candidate numbers (1-based in the answer, 0-based out) in the order given, each once."""
    order: list[int] = []
    for token in re.findall(r"\d+", answer):
        index = int(token) - 1
        if 0 <= index < count and index not in order:
            order.append(index)
    return order or None


class LLMReranker(harness.Reranker):
    """Rerank a first stage's top candidates with an LLM (STaRK's reranker, or listwise)."""

    name = "llm-reranker"
    version = "1"
    regime = "llm-at-query-time"
    batch_size = 4

    class Options(harness.Reranker.Options, UsesLLM):
        # required, no default: a run never pays an API model nobody named, and no default
        # model goes stale when its provider retires it
        llm: LLMSpec = Field(
            description="provider:model (required), e.g. openai:gpt-5.4-mini, anthropic:claude-haiku-4-5, "
            "local:/path/model.gguf",
        )
        mode: Literal["pointwise", "listwise"] = Field(
            "pointwise", description="pointwise: a 0-1 score per candidate (STaRK); listwise: one ordering of all"
        )
        first_stage_weight: float = Field(
            0.1, ge=0, description="weight of the first-stage rank in the pointwise score (STaRK's sim_weight)"
        )
        doc_chars: int = Field(2000, gt=0, description="characters of each document (with relations) shown")
        max_tokens: int | None = Field(
            None, gt=0, description="the answer budget; default 8 pointwise (a number), 64 listwise (a list)"
        )

        @model_validator(mode="after")
        def _derive_max_tokens(self) -> Self:
            # resolved here, not at use, so the row records (and hashes) the budget that runs
            if self.max_tokens is None:
                self.max_tokens = 8 if self.mode == "pointwise" else 64
            return self

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        # a missing key fails here, as the run resolves, not after the SKB and the first stage are built
        check_llm(self.options.llm, self.options.llm_params, f"retriever {self.name!r}")
        self._llm: LLM | None = None
        self._skb: SKB | None = None
        self._malformed = 0

    def build(self, skb: SKB, context: BuildContext) -> None:
        super().build(skb, context)
        params = dict(self.options.llm_params)
        if "device" in params and params["device"] is None:  # a local model runs where the run does
            params["device"] = context.device
        self._llm = get_llm(self.options.llm, **params)
        self._skb = skb

    def usage(self) -> dict[str, Any]:
        return {**(self._llm.usage() if self._llm else {}), "malformed_answers": self._malformed}

    def _document(self, node: int) -> str:
        assert self._skb is not None
        text = self._skb.document(int(node), with_relations=True)
        limit = self.options.doc_chars
        return text if len(text) <= limit else text[:limit] + " …"

    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        if not details or "answers" not in details:
            return {}
        return {"answers": float(details["answers"]), "readable": float(details["answers"] - details["unreadable"])}

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[harness.HealthCheck]:
        # answers that do not parse score 0 (pointwise) or keep the first stage's order (listwise)
        return [harness.HealthCheck("readable", "the LLM's answer was readable", at_least=0.5, per="answers")]

    def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
        if self._llm is None or self._skb is None:
            raise HarnessError("llm-reranker: rerank() before build()")
        one = self._listwise if self.options.mode == "listwise" else self._pointwise
        # a query without candidates costs no prompt
        return [one(q, c, k) if len(c.ids) else c for q, c in zip(queries, candidates, strict=True)]

    # -- pointwise -----------------------------------------------------------------------
    def _prompt(self, query: Query, node: int) -> list[Message]:
        assert self._skb is not None
        kind = self._skb.node_type(int(node))
        return [
            Message(
                "system",
                f"You check whether a {kind} from a knowledge base meets every requirement of a search query "
                "and answer with one number from 0 to 1.",
            ),
            Message(
                "user",
                f"Search query:\n{query.text}\n\n"
                f"Candidate {kind}, with its properties and relations:\n{self._document(node)}\n\n"
                f"Score 1 if the text clearly shows the {kind} meets all the query's requirements, 0 if it "
                "meets none, and something in between for partial or weak evidence. "
                "Reply with the number only.",
            ),
        ]

    def _pointwise(self, query: Query, candidates: Ranking, k: int) -> Ranking:
        assert self._llm is not None and self.options.max_tokens is not None  # the latter derived by Options
        ids = candidates.ids
        prompts = [self._prompt(query, node) for node in ids]
        answers = self._llm.complete_many(prompts, max_tokens=self.options.max_tokens)
        scores = [parse_score(a.text) for a in answers]
        retry = [i for i, s in enumerate(scores) if s is None]
        if retry:
            reminder = Message("user", "Only a number from 0 to 1, please.")
            again = [[*prompts[i], Message("assistant", answers[i].text), reminder] for i in retry]
            second = self._llm.complete_many(again, max_tokens=self.options.max_tokens)
            for i, answer in zip(retry, second, strict=True):
                scores[i] = parse_score(answer.text)
        unreadable = sum(s is None for s in scores)
        self._malformed += unreadable
        v = len(ids)
        final = np.array(
            [(s or 0.0) + self.options.first_stage_weight * (v - rank) / v for rank, s in enumerate(scores)]
        )
        order = np.argsort(-final, kind="stable")[:k]
        return Ranking(ids[order], final[order], {"answers": v, "unreadable": unreadable})

    # -- listwise ------------------------------------------------------------------------
    def _listwise(self, query: Query, candidates: Ranking, k: int) -> Ranking:
        assert self._llm is not None and self.options.max_tokens is not None  # the latter derived by Options
        ids = candidates.ids
        listing = "\n\n".join(f"[{i + 1}] {self._document(node)}" for i, node in enumerate(ids))
        prompt = [
            Message("system", "You rank knowledge-base entries by how well they meet a search query's requirements."),
            Message(
                "user",
                f"Search query:\n{query.text}\n\nCandidates:\n{listing}\n\n"
                f"Rank all {len(ids)} candidates from best to worst match. Reply only with their numbers "
                "separated by '>', for example: 3 > 1 > 2",
            ),
        ]
        answer = self._llm.complete(prompt, max_tokens=self.options.max_tokens)
        order = parse_ranking(answer.text, len(ids))
        if order is None:
            again = [*prompt, Message("assistant", answer.text), Message("user", "Only the numbers, like 3 > 1 > 2.")]
            order = parse_ranking(self._llm.complete(again, max_tokens=self.options.max_tokens).text, len(ids))
        unreadable = order is None
        if order is None:
            self._malformed += 1
            order = []
        order += [i for i in range(len(ids)) if i not in order]  # the rest keep first-stage order
        order = order[:k]
        details = {"answers": 1, "unreadable": int(unreadable)}
        return Ranking(ids[order], np.linspace(1.0, 0.0, num=len(ids))[: len(order)], details)
