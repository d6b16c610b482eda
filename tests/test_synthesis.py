"""Stage 1 of query synthesis: relational templates grounded in a real SKB, checked against an
independent walk over the raw edge list."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import HarnessError
from harness.plugins import get_plugin_manager
from harness.skb import SKB
from harness_debian import DebianDataset
from harness_synthesis import RelationalRequirement
from harness_synthesis.templates import TEMPLATES, Path


@pytest.fixture(scope="module")
def skb() -> SKB:
    return DebianDataset().load_skb()


def _brute_force(skb: SKB, template_name: str, anchors: dict[str, int]) -> set[int]:
    """Follow each path over the edge arrays directly (not the SKB's CSR look-ups)."""
    template = next(t for t in TEMPLATES["debian"] if t.name == template_name)
    result: set[int] | None = None
    for path in template.paths:
        frontier = {anchors[path.slot]}
        for hop in path.hops:
            relation = [e.name for e in skb.edge_types].index(hop.relation)
            mask = skb.edge_type == relation
            src, dst = skb.src[mask], skb.dst[mask]
            if hop.direction == "out":
                reached = dst[np.isin(src, list(frontier))]
            else:
                reached = src[np.isin(dst, list(frontier))]
            wanted = skb.node_type_names.index(hop.node_type)
            frontier = {int(n) for n in reached if skb.node_types[n] == wanted}
        result = frontier if result is None else result & frontier
    assert result is not None
    return result - set(anchors.values())


def test_grounded_requirements_have_exactly_their_candidates(skb: SKB) -> None:
    drafts = RelationalRequirement(templates="debian", n=25, max_candidates=300).run(skb, [], seed=7)
    assert len(drafts) == 25 and [d.id for d in drafts] == list(range(25))
    seen_templates = set()
    for draft in drafts:
        record = draft.provenance["relational"]
        anchors = {slot: a["id"] for slot, a in record["anchors"].items()}
        assert set(draft.answer_ids) == _brute_force(skb, record["template"], anchors)
        assert record["gold"] in draft.answer_ids and 1 <= len(draft.answer_ids) <= 300
        assert all(a["name"] in draft.text for a in record["anchors"].values()) and "<" not in draft.text
        seen_templates.add(record["template"])
    assert len(seen_templates) >= 5, "templates are sampled, not one repeated"
    again = RelationalRequirement(templates="debian", n=25, max_candidates=300).run(skb, [], seed=7)
    assert [(d.text, d.answer_ids) for d in again] == [(d.text, d.answer_ids) for d in drafts]


def test_the_stage_is_a_plugin_and_checks_its_parameters(skb: SKB) -> None:
    assert get_plugin_manager().components.get("synthesis stage", "relational") is RelationalRequirement
    with pytest.raises(HarnessError, match="no template set 'prime'"):
        RelationalRequirement(templates="prime")
    with pytest.raises(HarnessError, match="no 'amazon' template fits"):
        RelationalRequirement(templates="amazon").run(skb, [], seed=0)
    with pytest.raises(HarnessError, match="cannot read"):
        Path.parse("x", "brand ~~has_brand~~ product")


def test_stark_templates_use_the_official_relation_names() -> None:
    amazon = {"also_buy", "also_view", "has_brand", "has_category", "has_color"}
    mag = {
        "author___affiliated_with___institution",
        "paper___cites___paper",
        "paper___has_topic___field_of_study",
        "author___writes___paper",
    }
    for name, relations in (("amazon", amazon), ("mag", mag)):
        used = {hop.relation for t in TEMPLATES[name] for p in t.paths for hop in p.hops}
        assert used <= relations, used - relations
    assert len(TEMPLATES["mag"]) == 7  # the paper's Appendix A.3
