"""Stages 2–4 of STaRK's synthesis pipeline, each asking an LLM (any ``provider:model``).

2. ``textual``: read the gold answer's document and list properties a user in some role
   would ask for.
3. ``fuse``: one LLM call writes a natural request combining the relational requirement and
   those properties; a second rephrases it in the role's voice with some context.
4. ``filter``: every verifier LLM judges every other candidate against the properties; a
   candidate joins the answers only if all say yes. The gold is judged too and the pass is
   recorded (the paper reports 86.6 / 98.9 / 92.3% on its datasets); it stays an answer.

Prompts are this project's own, in the paper's spirit. Answers the parsers cannot use are
recorded in the provenance rather than guessed at. Each stage asks its prompts for all drafts
together (``complete_many``), so a provider that batches (``local`` with ``batch_size``) or
runs requests concurrently does; a progress bar counts the answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

import harness
from harness import SKB, HarnessError
from harness_llm.api import LLM, Message, check_llm, get_llm, llm_class, options_of, split_spec
from harness_llm.options import LLMSpec, UsesLLM
from harness_synthesis.requests import (
    clean_request,
    property_holds,
    property_problem,
    request_problem,
    template_request,
)
from harness_synthesis.stage import Draft, SynthesisStage

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


@dataclass
class AskLLM:
    """An executor's worker that asks chunks of prompts (picklable: the LLM by name and
    parameters, made once per worker; answers go to the driver's response cache)."""

    llm: str
    params: dict[str, Any]
    max_tokens: int
    cache_dir: str

    def __call__(self) -> Any:
        import os

        os.environ["HARNESS_CACHE"] = self.cache_dir  # a shared filesystem: a later local run re-uses the answers
        llm = get_llm(self.llm, **self.params)
        return lambda prompts: [c.text for c in llm.complete_many(prompts, max_tokens=self.max_tokens)]


class LLMStage(SynthesisStage):
    """A stage that asks an LLM; its options (``llm``, ``llm_params``, ``role``) are shared."""

    class Options(UsesLLM):
        role: str = Field("user", description="who asks: customer, researcher, doctor, Debian user, …")

    options: Options

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._llm: LLM | None = None
        #: where the LLM calls run (``harness synthesize --executor ray``); not a parameter:
        #: every chunk of prompts is asked as a local run asks it, so the answers are the same
        self.executor: harness.Executor = harness.LocalExecutor()
        # a missing API key fails here, before the SKB loads, not at the first call
        check_llm(self.options.llm, self.options.llm_params, f"synthesis stage {self.name!r}")

    def llm_args(self, spec: str | None = None) -> tuple[str, dict[str, Any]]:
        """``provider:model`` and parameters of the stage's LLM, or of another (``spec``) with
        the same provider parameters, those its provider has (a verifier of another provider
        takes no ``device`` from a local model)."""
        if spec is None or spec == self.options.llm:
            return self.options.llm, dict(self.options.llm_params)
        accepted = options_of(llm_class(split_spec(spec)[0])).model_fields
        return spec, {k: v for k, v in self.options.llm_params.items() if k in accepted}

    def llm(self, spec: str | None = None) -> LLM:
        """The stage's LLM (made once), or another (``spec``; see :meth:`llm_args`)."""
        if spec is not None and spec != self.options.llm:
            name, params = self.llm_args(spec)
            return get_llm(name, **params)
        if self._llm is None:
            self._llm = get_llm(self.options.llm, **self.options.llm_params)
        return self._llm

    def ask(self, spec: str | None, prompts: list[list[Message]], max_tokens: int, what: str) -> list[str]:
        """Every prompt's answer from the LLM ``spec`` (None: the stage's), in order, asked in
        chunks with a progress bar on stderr; on the executor's workers when it is not local."""
        from rich.progress import Progress

        chunk = 64  # the response cache keeps each answer, so an interruption loses at most a chunk
        chunks = [prompts[start : start + chunk] for start in range(0, len(prompts), chunk)]
        if self.executor.local:
            llm = self.llm(spec)

            def asked() -> Iterator[tuple[int, list[str]]]:
                for index, part in enumerate(chunks):
                    yield index, [c.text for c in llm.complete_many(part, max_tokens=max_tokens)]

            done = asked()
        else:
            name, params = self.llm_args(spec)
            worker = AskLLM(name, params, max_tokens, str(harness.cache_root()))
            # an API model's calls hold no GPU; a local model's worker takes the executor's setting
            gpus = None if split_spec(name)[0] == "local" else 0
            done = self.executor.map(worker, chunks, description=f"{self.name}: {what}", num_gpus=gpus)
        answers: dict[int, list[str]] = {}
        with Progress(transient=True, disable=len(prompts) < chunk) as progress:
            task = progress.add_task(f"{self.name}: {what}", total=len(prompts))
            for index, texts in done:
                if len(texts) != len(chunks[index]):
                    raise HarnessError(
                        f"{self.name}: {what}: {len(texts)} answers came back for {len(chunks[index])} prompts"
                    )
                answers[index] = texts
                progress.advance(task, len(texts))
        return [text for index in range(len(chunks)) for text in answers[index]]

    @staticmethod
    def gold(draft: Draft) -> int:
        try:
            return int(draft.provenance["relational"]["gold"])
        except KeyError:
            raise HarnessError(f"draft {draft.id}: no gold answer; run the relational stage first") from None


class TextualProperties(LLMStage):
    """Stage 2: properties of the gold answer a user in ``role`` would ask for."""

    name = "textual"
    version = "2"

    class Options(LLMStage.Options):
        properties: int = Field(2, ge=1, description="properties to extract per draft")
        doc_chars: int = Field(1500, gt=0, description="characters of the gold answer's document shown")
        literal: bool = Field(
            False,
            description="keep only properties the gold's document says word for word (for the literal judge: "
            "a property a small model invented or cut short is dropped, the draft kept if one remains)",
        )

    options: Options

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        prompts = []
        for draft in drafts:
            gold = self.gold(draft)
            kind = skb.node_type(gold)
            document = skb.document(gold)[: self.options.doc_chars]
            prompts.append(
                [
                    Message(
                        "system",
                        f"You read a {kind} entry from a catalogue and note what a {self.options.role} "
                        "would look for in it.",
                    ),
                    Message(
                        "user",
                        f"{document}\n\nList {self.options.properties} short properties of this {kind} "
                        f"(a few words each, taken from the text) that a {self.options.role} might ask "
                        "for. One per line. Do not use its name.",
                    ),
                ]
            )
        answers = self.ask(None, prompts, 80, "properties")
        out = []
        for draft, answer in zip(drafts, answers, strict=True):
            name = str(skb.names[self.gold(draft)])
            # a property naming the node ("package: …", "homepage: …") would give an answer away
            parsed = parse_properties(answer, 100, exclude=name)
            properties = list(dict.fromkeys(p for p in parsed if property_problem(p, skb.node_type_names) is None))
            if self.options.literal:
                properties = [p for p in properties if property_holds(skb.document(self.gold(draft)), p)]
            properties = properties[: self.options.properties]
            if not properties:
                continue  # nothing usable: the draft is dropped, as a failed extraction
            provenance = {
                **draft.provenance,
                self.name: {"role": self.options.role, "properties": properties, "raw": answer},
            }
            out.append(Draft(draft.id, draft.text, list(draft.answer_ids), provenance))
        return out


class Fuse(LLMStage):
    """Stage 3: one request combining the requirement and the properties, then rephrased.

    Provenance records both LLM answers and which text became the query ("rephrased", or
    "fused"/"template" when the LLM's text no longer states the requirement:
    ``harness_synthesis.requests``)."""

    name = "fuse"
    version = "3"

    class Options(LLMStage.Options):
        rephrase_llm: LLMSpec | None = Field(None, description="provider:model that rephrases (default: llm)")
        request: Literal["llm", "template"] = Field(
            "llm",
            description="llm: the LLM writes and rephrases the request; template: the template with the "
            "properties appended, no LLM call (for a model whose requests never keep the requirement)",
        )

    options: Options

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        role = self.options.role
        properties = [d.provenance.get("textual", {}).get("properties", []) for d in drafts]
        if self.options.request == "template":
            return [
                Draft(
                    d.id,
                    template_request(d.text, props),
                    list(d.answer_ids),
                    {**d.provenance, self.name: {"used": "template", "request": "template"}},
                )
                for d, props in zip(drafts, properties, strict=True)
            ]
        fused = self.ask(
            None,
            [
                [
                    Message(
                        "user",
                        f"Write one search request that a {role} could type, asking for: {draft.text} "
                        f"It must also ask for these properties: {'; '.join(props)}. "
                        "Reply with the request only.",
                    )
                ]
                for draft, props in zip(drafts, properties, strict=True)
            ],
            80,
            "fuse",
        )
        firsts = [clean_request(answer) or draft.text for draft, answer in zip(drafts, fused, strict=True)]
        rephrased = self.ask(
            self.options.rephrase_llm,
            [
                [
                    Message(
                        "user",
                        f"Rewrite this search request the way a {role} would ask it, adding a short reason "
                        f"for asking. Keep every requirement. Reply with the request only.\n\n{first}",
                    )
                ]
                for first in firsts
            ],
            100,
            "rephrase",
        )
        out = []
        for draft, props, first, again in zip(drafts, properties, firsts, rephrased, strict=True):
            # The request must still state the requirement (small models drift: a slot entity
            # or the relation lost, talk about the task, loops): fall back to the fused text,
            # then to the template, which states everything.
            names = [a["name"] for a in draft.provenance.get("relational", {}).get("anchors", {}).values()]
            text, used = clean_request(again), "rephrased"
            if request_problem(text, draft.text, names, props):
                text, used = first, "fused"
            if request_problem(text, draft.text, names, props):
                text, used = template_request(draft.text, props), "template"
            provenance = {**draft.provenance, self.name: {"fused": first, "rephrased": again, "used": used}}
            out.append(Draft(draft.id, text, list(draft.answer_ids), provenance))
        return out


class Filter(LLMStage):
    """Stage 4: every verifier (``llm`` first) judges every candidate; the answers are the gold
    plus the candidates all accept. ``judge: literal`` judges without an LLM: a candidate has a
    property when its document says it (``harness_synthesis.requests.property_holds``), and a
    draft whose gold does not have its own properties is dropped; ``both`` asks both."""

    name = "filter"
    version = "2"

    class Options(LLMStage.Options):
        verifiers: list[LLMSpec] = Field(default_factory=list, description="more provider:model verifiers")
        judge: Literal["llm", "literal", "both"] = Field(
            "llm", description="who judges the candidates: the verifier LLMs, the literal check, or both"
        )
        doc_chars: int = Field(1000, gt=0, description="characters of each candidate's document shown")
        max_candidates: int = Field(
            50, ge=1, description="drafts with more candidates are dropped (too costly to verify)"
        )

    options: Options

    def _question(self, skb: SKB, node: int, properties: list[str]) -> list[Message]:
        """One question per candidate, asked of every verifier."""
        return [
            Message(
                "user",
                f"{skb.document(node)[: self.options.doc_chars]}\n\nDoes this {skb.node_type(node)} have all of "
                f"these properties: {'; '.join(properties)}? Answer yes or no.",
            )
        ]

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        judge = self.options.judge
        judges = [self.options.llm, *self.options.verifiers] if judge != "literal" else []
        kept = [d for d in drafts if len(d.answer_ids) <= self.options.max_candidates]
        asked = [(d, n) for d in kept for n in d.answer_ids]
        properties = {d.id: d.provenance.get("textual", {}).get("properties", []) for d in kept}
        questions = [self._question(skb, n, properties[d.id]) for d, n in asked]
        # votes[i][j]: judge j's verdict on question i
        by_judge = [self.ask(j, questions, 4, f"verify with {j}") for j in judges]
        votes = {(d.id, n): [parse_yes_no(answers[i]) for answers in by_judge] for i, (d, n) in enumerate(asked)}
        if judge != "llm":
            for d, n in asked:
                document = skb.document(n)
                votes[(d.id, n)].append(all(property_holds(document, p) for p in properties[d.id]))
        out = []
        for draft in kept:
            gold = self.gold(draft)
            verdicts = {n: votes[(draft.id, n)] for n in draft.answer_ids}
            if judge != "llm" and not verdicts[gold][-1]:
                continue  # the gold lacks its own properties: they were not taken from its text
            answers = sorted({gold, *(n for n, v in verdicts.items() if all(x is True for x in v))})
            provenance = {
                **draft.provenance,
                self.name: {
                    "judge": judge,
                    "verifiers": [self.llm(j).label for j in judges] + (["literal"] if judge != "llm" else []),
                    "gold_passed": all(v is True for v in verdicts.get(gold, [])),
                    "verdicts": {str(n): v for n, v in verdicts.items()},
                    "candidates_before": len(draft.answer_ids),
                },
            }
            out.append(Draft(draft.id, draft.text, answers, provenance))
        return out
