"""Stage 1 of STaRK's query synthesis (paper §2.4): relational requirements.

``relational`` samples a relational template, grounds it with entities of the SKB, and keeps
the candidate set that satisfies it. Each draft's provenance records the template, the slot
entities, the gold answer and the size of the candidate set; its ``text`` is the filled
template (a relational-only query until the LLM stages rewrite it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

import numpy as np
from pydantic import Field, model_validator

import harness
from harness import SKB, HarnessError
from harness_synthesis.stage import Draft, SynthesisStage
from harness_synthesis.templates import TEMPLATES, Template, candidates, ground

__all__ = ["RelationalRequirement"]


class RelationalRequirement(SynthesisStage):
    """Ground ``n`` relational requirements. Groundings whose candidate set falls outside
    [min_candidates, max_candidates] are drawn again (too broad a requirement says little;
    STaRK's fused queries then narrow it by text)."""

    name = "relational"
    version = "1"

    class Options(harness.Options):
        templates: str = Field("debian", description=f"the template set: {', '.join(sorted(TEMPLATES))}")
        n: int = Field(10, ge=1, description="drafts to produce (ids continue after any drafts given)")
        min_candidates: int = Field(1, ge=1, description="fewest answers a grounded requirement may admit")
        max_candidates: int = Field(200, ge=1, description="most answers a grounded requirement may admit")
        exclude_gold: list[int] = Field(
            default_factory=list,
            description="nodes never drawn as the gold answer (an evaluation set's answers, so a train "
            "set shares no (template, gold) pair with it)",
        )

        @model_validator(mode="after")
        def _check(self) -> Self:
            if self.templates not in TEMPLATES:
                raise ValueError(f"no template set {self.templates!r}; known: {', '.join(sorted(TEMPLATES))}")
            if self.max_candidates < self.min_candidates:
                raise ValueError("need min_candidates ≤ max_candidates")
            return self

    options: Options

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        rng = np.random.default_rng(seed)
        usable = [t for t in TEMPLATES[self.options.templates] if _applies(skb, t)]
        if not usable:
            raise HarnessError(f"relational: no {self.options.templates!r} template fits SKB {skb.name!r}")
        out, next_id = list(drafts), max((d.id for d in drafts), default=-1) + 1
        excluded = set(self.options.exclude_gold)
        attempts = 0
        while len(out) - len(drafts) < self.options.n:
            attempts += 1
            if attempts > 100 * self.options.n:
                raise HarnessError("relational: could not ground enough templates within the candidate bounds")
            template = usable[int(rng.integers(len(usable)))]
            grounded = ground(skb, template, rng)
            if grounded is None:
                continue
            gold, anchors = grounded
            if gold in excluded:
                continue
            found = candidates(skb, template, anchors)
            if not self.options.min_candidates <= len(found) <= self.options.max_candidates:
                continue
            names = {slot: str(skb.names[node]) for slot, node in anchors.items()}
            out.append(
                Draft(
                    id=next_id,
                    text=template.fill(names),
                    answer_ids=[int(i) for i in found],
                    provenance={
                        self.name: {
                            "template": template.name,
                            "template_text": template.text,
                            "anchors": {slot: {"id": node, "name": names[slot]} for slot, node in anchors.items()},
                            "gold": gold,
                            "candidates": len(found),
                        }
                    },
                )
            )
            next_id += 1
        return out


def _applies(skb: SKB, template: Template) -> bool:
    types = set(skb.node_type_names)
    relations = {e.name for e in skb.edge_types}
    hops = [h for p in template.paths for h in p.hops] + list(template.none_of)
    return (
        template.answer_type in types
        and all(p.slot_type in types for p in template.paths)
        and all(h.relation in relations and h.node_type in types for h in hops)
    )
