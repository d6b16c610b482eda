"""Stages 2–4 of STaRK's synthesis pipeline, each asking an LLM (any ``provider:model``).

2. ``textual``: read the gold answer's document and list properties a user in some role
   would ask for.
3. ``fuse``: one LLM call writes a natural request combining the relational requirement and
   those properties; a second rephrases it in the role's voice with some context.
4. ``filter``: every verifier LLM judges every other candidate against the properties; a
   candidate joins the answers only if all say yes. The gold is judged too and the pass is
   recorded (the paper reports 86.6 / 98.9 / 92.3% on its datasets); it stays an answer.

Prompts are this project's own, in the paper's spirit. Answers the parsers cannot use are
recorded in the provenance rather than guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from harness.errors import HarnessError
from harness.llm import LLM, Message, get_llm
from harness.skb import SKB
from harness.synthesis import Draft, SynthesisStage

__all__ = ["Filter", "Fuse", "TextualProperties", "parse_properties", "parse_yes_no"]


def parse_properties(answer: str, limit: int, exclude: str = "") -> list[str]:
    """Bulleted or numbered lines → short properties (without the entity's own name)."""
    properties = []
    for line in answer.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip('"').rstrip(".")
        if 2 <= len(line) <= 120 and (not exclude or exclude.lower() not in line.lower()):
            properties.append(line)
    return properties[:limit]


def parse_yes_no(answer: str) -> bool | None:
    match = re.search(r"\b(yes|no)\b", answer.lower())
    return None if match is None else match.group(1) == "yes"


def _clean_query(answer: str) -> str:
    text = answer.strip().split("\n\n")[0].strip().strip('"').strip()
    return re.sub(r"^(?:request|query|question)\s*:\s*", "", text, flags=re.IGNORECASE)


def _mentions(text: str, names: Sequence[str]) -> bool:
    return bool(text) and all(name.lower() in text.lower() for name in names)


class _LLMStage(SynthesisStage):
    def __init__(self, llm: str, llm_params: dict[str, Any] | None = None, role: str = "user", **params: Any) -> None:
        if ":" not in llm:
            raise HarnessError(f"{self.name}: llm {llm!r} must read provider:model")
        super().__init__(llm=llm, llm_params=dict(llm_params or {}), role=role, **params)
        self._llm: LLM | None = None

    def llm(self, spec: str | None = None) -> LLM:
        if spec is not None and spec != self.params["llm"]:
            return get_llm(spec, **self.params["llm_params"])
        if self._llm is None:
            self._llm = get_llm(self.params["llm"], **self.params["llm_params"])
        return self._llm

    @staticmethod
    def gold(draft: Draft) -> int:
        try:
            return int(draft.provenance["relational"]["gold"])
        except KeyError:
            raise HarnessError(f"draft {draft.id}: no gold answer; run the relational stage first") from None


class TextualProperties(_LLMStage):
    """Stage 2. Parameters: llm, llm_params, role, properties (how many), doc_chars."""

    name = "textual"
    version = "1"

    def __init__(
        self,
        llm: str,
        llm_params: dict[str, Any] | None = None,
        role: str = "user",
        properties: int = 2,
        doc_chars: int = 1500,
    ) -> None:
        super().__init__(llm, llm_params, role, properties=properties, doc_chars=doc_chars)

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        out = []
        for draft in drafts:
            gold = self.gold(draft)
            kind, name = skb.node_type(gold), str(skb.names[gold])
            document = skb.document(gold)[: self.params["doc_chars"]]
            answer = self.llm().complete(
                [
                    Message(
                        "system",
                        f"You read a {kind} entry from a catalogue and note what a {self.params['role']} "
                        "would look for in it.",
                    ),
                    Message(
                        "user",
                        f"{document}\n\nList {self.params['properties']} short properties of this {kind} "
                        f"(a few words each, taken from the text) that a {self.params['role']} might ask "
                        "for. One per line. Do not use its name.",
                    ),
                ],
                max_tokens=80,
            )
            properties = parse_properties(answer.text, self.params["properties"], exclude=name)
            if not properties:
                continue  # nothing usable: the draft is dropped, as a failed extraction
            provenance = {
                **draft.provenance,
                self.name: {"role": self.params["role"], "properties": properties, "raw": answer.text},
            }
            out.append(Draft(draft.id, draft.text, list(draft.answer_ids), provenance))
        return out


class Fuse(_LLMStage):
    """Stage 3. Parameters: llm, llm_params, role; ``rephrase_llm`` (default: the same LLM).

    Provenance records both LLM answers and which text became the query ("rephrased", or
    "fused"/"template" when the LLM dropped a slot entity's name)."""

    name = "fuse"
    version = "2"

    def __init__(
        self, llm: str, llm_params: dict[str, Any] | None = None, role: str = "user", rephrase_llm: str | None = None
    ) -> None:
        super().__init__(llm, llm_params, role, rephrase_llm=rephrase_llm)

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        out, role = [], self.params["role"]
        for draft in drafts:
            properties = draft.provenance.get("textual", {}).get("properties", [])
            fused = self.llm().complete(
                [
                    Message(
                        "user",
                        f"Write one search request that a {role} could type, asking for: {draft.text} "
                        f"It must also ask for these properties: {'; '.join(properties)}. "
                        "Reply with the request only.",
                    )
                ],
                max_tokens=80,
            )
            first = _clean_query(fused.text) or draft.text
            rephrased = self.llm(self.params["rephrase_llm"]).complete(
                [
                    Message(
                        "user",
                        f"Rewrite this search request the way a {role} would ask it, adding a short reason "
                        f"for asking. Keep every requirement. Reply with the request only.\n\n{first}",
                    )
                ],
                max_tokens=100,
            )
            # The request must still name every slot entity, or the relational requirement is
            # lost (small models drift): fall back to the fused text, then to the template.
            names = [a["name"] for a in draft.provenance.get("relational", {}).get("anchors", {}).values()]
            text, used = _clean_query(rephrased.text), "rephrased"
            if not _mentions(text, names):
                text, used = first, "fused"
            if not _mentions(text, names):
                text, used = f"{draft.text} It should have: {'; '.join(properties)}.", "template"
            provenance = {**draft.provenance, self.name: {"fused": first, "rephrased": rephrased.text, "used": used}}
            out.append(Draft(draft.id, text, list(draft.answer_ids), provenance))
        return out


class Filter(_LLMStage):
    """Stage 4. Parameters: llm (the first verifier), llm_params, ``verifiers`` (more LLM specs),
    doc_chars, max_candidates (drafts with more candidates are dropped: too costly to verify)."""

    name = "filter"
    version = "1"

    def __init__(
        self,
        llm: str,
        llm_params: dict[str, Any] | None = None,
        role: str = "user",
        verifiers: Sequence[str] = (),
        doc_chars: int = 1000,
        max_candidates: int = 50,
    ) -> None:
        super().__init__(
            llm, llm_params, role, verifiers=list(verifiers), doc_chars=doc_chars, max_candidates=max_candidates
        )

    def _question(self, skb: SKB, node: int, properties: list[str]) -> list[Message]:
        """One question per candidate, asked of every verifier."""
        return [
            Message(
                "user",
                f"{skb.document(node)[: self.params['doc_chars']]}\n\nDoes this {skb.node_type(node)} have all of "
                f"these properties: {'; '.join(properties)}? Answer yes or no.",
            )
        ]

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        judges = [self.llm(), *(self.llm(spec) for spec in self.params["verifiers"])]
        out = []
        for draft in drafts:
            if len(draft.answer_ids) > self.params["max_candidates"]:
                continue
            gold, properties = self.gold(draft), draft.provenance.get("textual", {}).get("properties", [])
            verdicts: dict[int, list[bool | None]] = {
                node: [parse_yes_no(judge.complete(question, max_tokens=4).text) for judge in judges]
                for node, question in ((n, self._question(skb, n, properties)) for n in draft.answer_ids)
            }
            answers = sorted({gold, *(n for n, votes in verdicts.items() if all(v is True for v in votes))})
            provenance = {
                **draft.provenance,
                self.name: {
                    "verifiers": [j.label for j in judges],
                    "gold_passed": all(v is True for v in verdicts.get(gold, [])),
                    "verdicts": {str(n): votes for n, votes in verdicts.items()},
                    "candidates_before": len(draft.answer_ids),
                },
            }
            out.append(Draft(draft.id, draft.text, answers, provenance))
        return out
