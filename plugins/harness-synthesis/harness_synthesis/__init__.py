"""STaRK's query-synthesis stages as plugins (paper §2.4).

``relational``: stage 1 — sample a relational template, ground it with entities of the SKB,
and keep the candidate set that satisfies it. Each draft's provenance records the template,
the slot entities, the gold answer and the size of the candidate set; its ``text`` is the
filled template (a relational-only query until the LLM stages rewrite it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.plugins.hookspecs import hookimpl
from harness.skb import SKB
from harness.synthesis import Draft, SynthesisStage
from harness_synthesis.templates import TEMPLATES, Template, candidates, ground

__all__ = ["RelationalRequirement"]


class RelationalRequirement(SynthesisStage):
    """Ground ``n`` relational requirements.

    Parameters:
        templates: a template set ("amazon", "mag", "prime", "debian").
        n: drafts to produce (ids continue after any drafts given).
        min_candidates, max_candidates: groundings whose candidate set falls outside these
            bounds are drawn again (too broad a requirement says little; STaRK's fused queries
            then narrow it by text).
    """

    name = "relational"
    version = "1"

    def __init__(
        self, templates: str = "debian", n: int = 10, min_candidates: int = 1, max_candidates: int = 200
    ) -> None:
        if templates not in TEMPLATES:
            raise HarnessError(f"relational: no template set {templates!r}; known: {', '.join(sorted(TEMPLATES))}")
        if n < 1 or min_candidates < 1 or max_candidates < min_candidates:
            raise HarnessError("relational: need n ≥ 1 and 1 ≤ min_candidates ≤ max_candidates")
        super().__init__(templates=templates, n=n, min_candidates=min_candidates, max_candidates=max_candidates)

    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        rng = np.random.default_rng(seed)
        usable = [t for t in TEMPLATES[self.params["templates"]] if _applies(skb, t)]
        if not usable:
            raise HarnessError(f"relational: no {self.params['templates']!r} template fits SKB {skb.name!r}")
        out, next_id = list(drafts), max((d.id for d in drafts), default=-1) + 1
        attempts = 0
        while len(out) - len(drafts) < self.params["n"]:
            attempts += 1
            if attempts > 100 * self.params["n"]:
                raise HarnessError("relational: could not ground enough templates within the candidate bounds")
            template = usable[int(rng.integers(len(usable)))]
            grounded = ground(skb, template, rng)
            if grounded is None:
                continue
            gold, anchors = grounded
            found = candidates(skb, template, anchors)
            if not self.params["min_candidates"] <= len(found) <= self.params["max_candidates"]:
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


@hookimpl
def register_synthesis_stages(register: Any) -> None:
    from harness_synthesis.llm_stages import Filter, Fuse, TextualProperties

    for stage in (RelationalRequirement, TextualProperties, Fuse, Filter):
        register(stage)


@hookimpl
def register_commands(cli: Any) -> None:
    import click

    @cli.command()
    @click.option("--dataset", "-d", required=True, help="registry or plugin dataset whose SKB to use")
    @click.option("--n", "count", type=int, default=20, show_default=True, help="relational requirements to draw")
    @click.option("--llm", required=True, help="provider:model, e.g. openai:gpt-4o-mini")
    @click.option("--llm-param", "llm_params", multiple=True, help="KEY=VALUE for the provider (base_url=…)")
    @click.option("--verifier", "verifiers", multiple=True, help="more provider:model verifiers for the filter")
    @click.option("--templates", help="template set (default: the dataset's name without 'stark-')")
    @click.option("--role", help="who asks (default by template set: customer, researcher, doctor, Debian user)")
    @click.option("--max-candidates", type=int, default=20, show_default=True)
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--out", type=click.Path(file_okay=False), required=True)
    @click.option("--data-dir", type=click.Path(file_okay=False))
    def synthesize(
        dataset: str,
        count: int,
        llm: str,
        llm_params: tuple[str, ...],
        verifiers: tuple[str, ...],
        templates: str | None,
        role: str | None,
        max_candidates: int,
        seed: int,
        out: str,
        data_dir: str | None,
    ) -> None:
        """Synthesize a query set from an SKB with STaRK's four stages (resumable)."""
        from harness.cli import stdout
        from harness.run import load_dataset
        from harness_synthesis.llm_stages import Filter, Fuse, TextualProperties
        from harness_synthesis.pipeline import ROLES, run_pipeline, write_query_set

        params: dict[str, Any] = {}
        for item in llm_params:
            key, sep, value = item.partition("=")
            if not sep:
                raise HarnessError(f"--llm-param {item!r}: write KEY=VALUE")
            try:  # numbers, true/false, lists and objects as JSON; anything else is a string
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
        templates = templates or dataset.removeprefix("stark-")
        role = role or ROLES.get(templates, "user")
        common = {"llm": llm, "llm_params": params, "role": role}
        stages = [
            RelationalRequirement(templates=templates, n=count, max_candidates=max_candidates),
            TextualProperties(**common),
            Fuse(**common),
            Filter(**common, verifiers=list(verifiers), max_candidates=max_candidates),
        ]
        skb = load_dataset(dataset, data_dir).load_skb()
        drafts = run_pipeline(skb, stages, seed, Path(out) / "work", progress=lambda m: stdout.print(m))
        config = {
            "templates": templates,
            "role": role,
            "llm": llm,
            "verifiers": list(verifiers),
            "n": count,
            "max_candidates": max_candidates,
            "seed": seed,
        }
        summary = write_query_set(Path(out), dataset, drafts, config, seed)
        stdout.print(json.dumps({k: v for k, v in summary.items() if k != "config"}))
