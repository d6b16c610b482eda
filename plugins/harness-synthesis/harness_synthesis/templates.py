"""Relational query templates: metapaths with typed slots, grounded in an SKB.

A template names the answer type and one or more *paths*, each starting at a slot entity
(``<brand>``) and following typed relations to the answer type; the candidates are the
nodes every path reaches (an intersection, as in STaRK's "(color → product ← brand)").
Paths are written ``slot_type -relation-> type <-relation- type``: ``->`` follows an edge
from source to target, ``<-`` from target to source (on undirected SKBs, such as STaRK's,
both read the same).

Templates shipped: STaRK-Amazon's basic templates (paper, Appendix A.2) and two
compositions, STaRK-MAG's seven (Appendix A.3), and templates for the Debian SKB. STaRK-Prime's
28 (Appendix A.4) are not written out yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError
from harness.skb import SKB

__all__ = ["TEMPLATES", "Hop", "Path", "Template", "candidates", "ground"]

_STEP = re.compile(r"\s*(-(?P<out>[\w]+)->|<-(?P<in>[\w]+)-)\s*(?P<type>[\w/]+)")


@dataclass(frozen=True)
class Hop:
    relation: str
    direction: str  # "out" or "in"
    node_type: str


@dataclass(frozen=True)
class Path:
    slot: str  # the placeholder name in the template text
    slot_type: str
    hops: tuple[Hop, ...]

    @classmethod
    def parse(cls, slot: str, spec: str) -> Path:
        start, _, rest = spec.strip().partition(" ")
        hops, position = [], 0
        while position < len(rest):
            match = _STEP.match(rest, position)
            if match is None:
                raise HarnessError(f"template path {spec!r}: cannot read {rest[position:]!r}")
            direction = "out" if match.group("out") else "in"
            hops.append(Hop(match.group("out") or match.group("in"), direction, match.group("type")))
            position = match.end()
        if not hops:
            raise HarnessError(f"template path {spec!r} has no relation")
        return cls(slot, start, tuple(hops))


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    answer_type: str
    paths: tuple[Path, ...]

    def fill(self, names: dict[str, str]) -> str:
        text = self.text
        for slot, name in names.items():
            text = text.replace(f"<{slot}>", name)
        return text


def _t(name: str, text: str, answer_type: str, **paths: str) -> Template:
    """``slot=spec`` per path; ``slot__2=spec`` is a second path from the same slot entity."""
    return Template(
        name, text, answer_type, tuple(Path.parse(slot.split("__")[0], spec) for slot, spec in paths.items())
    )


TEMPLATES: dict[str, list[Template]] = {
    "amazon": [
        _t(
            "brand>product", "Can you list the products made by <brand>?", "product", brand="brand <-has_brand- product"
        ),
        _t(
            "product>product",
            "Which products are similar to <product>?",
            "product",
            product="product -also_view-> product",
        ),
        _t(
            "color>product",
            "Can you provide a list of products that are available in <color>?",
            "product",
            color="color <-has_color- product",
        ),
        _t(
            "category>product",
            "What products are available in the <category> category?",
            "product",
            category="category <-has_category- product",
        ),
        _t(
            "color>product<brand",
            "Which <brand> products come in <color>?",
            "product",
            brand="brand <-has_brand- product",
            color="color <-has_color- product",
        ),
        _t(
            "brand>product<category",
            "What <category> products does <brand> make?",
            "product",
            brand="brand <-has_brand- product",
            category="category <-has_category- product",
        ),
    ],
    "mag": [
        _t(
            "author>paper",
            "Can you list the papers authored by <author>?",
            "paper",
            author="author -author___writes___paper-> paper",
        ),
        _t(
            "paper>paper",
            "Which papers have been cited by the paper <paper>?",
            "paper",
            paper="paper -paper___cites___paper-> paper",
        ),
        _t(
            "field>paper",
            "Can you provide a list of papers in the field of <field_of_study>?",
            "paper",
            field_of_study="field_of_study <-paper___has_topic___field_of_study- paper",
        ),
        _t(
            "institution>author>paper",
            "What papers have been published by researchers from <institution>?",
            "paper",
            institution="institution <-author___affiliated_with___institution- author -author___writes___paper-> paper",
        ),
        _t(
            "paper>author>paper",
            "What papers have been published by researchers that are coauthors of <paper>?",
            "paper",
            paper="paper <-author___writes___paper- author -author___writes___paper-> paper",
        ),
        _t(
            "paper>author>paper<field<paper",
            "Can you find papers that share a coauthor with <paper> and are also in the same field of study?",
            "paper",
            paper="paper <-author___writes___paper- author -author___writes___paper-> paper",
            paper__2="paper -paper___has_topic___field_of_study-> field_of_study "
            "<-paper___has_topic___field_of_study- paper",
        ),
        _t(
            "institution>author>paper<field",
            "Are there any papers associated with <institution> and are in the field of <field_of_study>?",
            "paper",
            institution="institution <-author___affiliated_with___institution- author -author___writes___paper-> paper",
            field_of_study="field_of_study <-paper___has_topic___field_of_study- paper",
        ),
    ],
    "debian": [
        _t(
            "maintainer>package",
            "Which packages are maintained by <maintainer>?",
            "package",
            maintainer="maintainer <-maintained_by- package",
        ),
        _t(
            "section>package",
            "What packages are in the <section> section?",
            "package",
            section="section <-in_section- package",
        ),
        _t("tag>package", "Which packages are tagged <tag>?", "package", tag="tag <-tagged- package"),
        _t(
            "package>depends",
            "Which packages does <package> depend on?",
            "package",
            package="package -depends-> package",
        ),
        _t(
            "package<depends", "Which packages need <package> to work?", "package", package="package <-depends- package"
        ),
        _t(
            "maintainer>package<section",
            "Which packages in the <section> section does <maintainer> maintain?",
            "package",
            maintainer="maintainer <-maintained_by- package",
            section="section <-in_section- package",
        ),
        _t(
            "tag>package<maintainer",
            "Which packages tagged <tag> are maintained by <maintainer>?",
            "package",
            tag="tag <-tagged- package",
            maintainer="maintainer <-maintained_by- package",
        ),
    ],
}


def _reach(skb: SKB, start: int, hops: tuple[Hop, ...]) -> np.ndarray:
    frontier = np.array([start], dtype=np.int64)
    for hop in hops:
        wanted = skb.node_type_names.index(hop.node_type)
        found = [skb.neighbors(int(n), hop.relation, hop.direction) for n in frontier]
        frontier = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
        frontier = frontier[skb.node_types[frontier] == wanted]
    return frontier


def candidates(skb: SKB, template: Template, anchors: dict[str, int]) -> np.ndarray:
    """Nodes of the answer type that every path reaches from its anchor (anchors excluded)."""
    result: np.ndarray | None = None
    for path in template.paths:
        reached = _reach(skb, anchors[path.slot], path.hops)
        result = reached if result is None else np.intersect1d(result, reached)
    assert result is not None
    return np.setdiff1d(result, np.array(list(anchors.values()), dtype=np.int64))


def ground(
    skb: SKB, template: Template, rng: np.random.Generator, tries: int = 50
) -> tuple[int, dict[str, int]] | None:
    """Pick a gold answer, then walk each path backwards from it to pick the slot entities, so
    the grounded requirement is satisfied by at least the gold. None when ``tries`` fail."""
    answer_type = skb.node_type_names.index(template.answer_type)
    pool = np.flatnonzero(skb.node_types == answer_type)
    if not len(pool):
        return None
    for _ in range(tries):
        gold = int(rng.choice(pool))
        anchors: dict[str, int] = {}
        for path in template.paths:
            if path.slot in anchors:  # a second path from the same entity must reach the gold too
                if gold not in _reach(skb, anchors[path.slot], path.hops):
                    break
                continue
            node = gold
            types = [path.slot_type, *(h.node_type for h in path.hops[:-1])]
            for hop, previous_type in zip(reversed(path.hops), reversed(types), strict=True):
                back = "in" if hop.direction == "out" else "out"
                options = skb.neighbors(node, hop.relation, back)
                options = options[skb.node_types[options] == skb.node_type_names.index(previous_type)]
                options = options[options != gold]
                if not len(options):
                    break
                node = int(rng.choice(options))
            else:
                anchors[path.slot] = node
                continue
            break
        else:
            return gold, anchors
    return None
