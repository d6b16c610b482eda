"""Relational query templates: metapaths with typed slots, grounded in an SKB.

A template names the answer type and one or more *paths*, each starting at a slot entity
(``<brand>``) and following typed relations to the answer type; the candidates are the
nodes every path reaches (an intersection, as in STaRK's "(color → product ← brand)").
Paths are :class:`harness.graph.RelationPath` specs, ``slot_type -relation-> type <-relation- type``:
``->`` follows an edge from source to target, ``<-`` from target to source (on undirected SKBs,
such as STaRK's, both read the same).

Templates shipped: STaRK-Amazon's basic templates (paper, Appendix A.2) and two
compositions, STaRK-MAG's seven (Appendix A.3), STaRK-Prime's 28 (Appendix A.4; with a
negated relation and two paths from one entity where the paper has them), and templates for the
Debian SKB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from harness import SKB, HarnessError, Hop, RelationPath, reach

__all__ = ["TEMPLATES", "Hop", "Path", "Template", "candidates", "ground"]


@dataclass(frozen=True)
class Path:
    slot: str  # the placeholder name in the template text
    slot_type: str
    hops: tuple[Hop, ...]

    @classmethod
    def parse(cls, slot: str, spec: str) -> Path:
        try:
            path = RelationPath.parse(spec)
        except HarnessError as exc:
            raise HarnessError(f"template {exc}") from None
        return cls(slot, path.start_type, path.hops)


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    answer_type: str
    paths: tuple[Path, ...]
    none_of: tuple[Hop, ...] = ()  # the answer must have no neighbour through these (Prime's "[!indication]")

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


def _prime(name: str, text: str, answer: str, *paths: tuple[str, list[str]], none_of: tuple[Hop, ...] = ()) -> Template:
    """PrimeKG names hold spaces and slashes, so its paths are lists: [start, relation, type, ...]."""
    built = []
    for slot, chain in paths:
        hops = tuple(Hop(chain[i], "out", chain[i + 1]) for i in range(1, len(chain), 2))
        built.append(Path(slot, chain[0], hops))
    return Template(name, text, answer, tuple(built), none_of)


# STaRK-Prime, Appendix A.4: the 28 templates, with the paper's question texts.
_EP, _GP, _BP = "effect/phenotype", "gene/protein", "biological_process"
PRIME = [
    _prime(
        "ep>disease!drug",
        "Find diseases with zero indication drug and are associated with <effect/phenotype>",
        "disease",
        ("effect/phenotype", [_EP, "phenotype absent", "disease"]),
        none_of=(Hop("indication", "out", "drug"),),
    ),
    _prime(
        "drug>disease<gp",
        "Identify diseases associated with <gene/protein> and are contraindicated with <drug>",
        "disease",
        ("drug", ["drug", "contraindication", "disease"]),
        ("gene/protein", [_GP, "associated with", "disease"]),
    ),
    _prime(
        "anatomy>gp<anatomy",
        "What gene or protein is expressed in <anatomy1> while is absent in <anatomy2>?",
        _GP,
        ("anatomy1", ["anatomy", "expression present", _GP]),
        ("anatomy2", ["anatomy", "expression absent", _GP]),
    ),
    _prime(
        "anatomy>gp<anatomy(absent)",
        "What gene/protein is absent in both <anatomy1> and <anatomy2>?",
        _GP,
        ("anatomy1", ["anatomy", "expression absent", _GP]),
        ("anatomy2", ["anatomy", "expression absent", _GP]),
    ),
    _prime(
        "drug>gp<drug(carrier)",
        "Which target genes are shared carriers between <drug1> and <drug2>?",
        _GP,
        ("drug1", ["drug", "carrier", _GP]),
        ("drug2", ["drug", "carrier", _GP]),
    ),
    _prime(
        "anatomy>gp>drug(target)",
        "What is the drug that targets the genes or proteins which are expressed in <anatomy>?",
        "drug",
        ("anatomy", ["anatomy", "expression present", _GP, "target", "drug"]),
    ),
    _prime(
        "drug>ep>drug",
        "What drug has common side effects as <drug>?",
        "drug",
        ("drug", ["drug", "side effect", _EP, "side effect", "drug"]),
    ),
    _prime(
        "drug>gp>drug(carrier)",
        "What is the drug that has common gene/protein carrier with <drug>?",
        "drug",
        ("drug", ["drug", "carrier", _GP, "carrier", "drug"]),
    ),
    _prime(
        "anatomy>gp>drug(enzyme)",
        "What is the drug that some genes or proteins act as an enzyme upon, where the "
        "genes or proteins are expressed in <anatomy>?",
        "drug",
        ("anatomy", ["anatomy", "expression present", _GP, "enzyme", "drug"]),
    ),
    _prime(
        "cc>gp>drug",
        "What is the drug carried by genes or proteins that interact with <cellular_component>?",
        "drug",
        ("cellular_component", ["cellular_component", "interacts with", _GP, "carrier", "drug"]),
    ),
    _prime(
        "mf>gp>drug",
        "What drug targets the genes or proteins that interact with <molecular_function>?",
        "drug",
        ("molecular_function", ["molecular_function", "interacts with", _GP, "target", "drug"]),
    ),
    _prime(
        "ep>drug>drug",
        "What drug has a synergistic interaction with the drug that has <effect/phenotype> as a side effect?",
        "drug",
        ("effect/phenotype", [_EP, "side effect", "drug", "synergistic interaction", "drug"]),
    ),
    _prime(
        "disease>drug>disease",
        "What disease is a contraindication for the drugs indicated for <disease>?",
        "disease",
        ("disease", ["disease", "indication", "drug", "contraindication", "disease"]),
    ),
    _prime(
        "disease>disease>ep",
        "What effect or phenotype is present in the sub type of <disease>?",
        _EP,
        ("disease", ["disease", "parent-child", "disease", "phenotype present", _EP]),
    ),
    _prime(
        "gp>drug>ep",
        "What effect or phenotype is a side effect of the drug transported by <gene/protein>?",
        _EP,
        ("gene/protein", [_GP, "transporter", "drug", "side effect", _EP]),
    ),
    _prime(
        "drug>gp>exposure",
        "What exposure may affect <drug>s efficacy by acting on its transporter genes?",
        "exposure",
        ("drug", ["drug", "transporter", _GP, "interacts with", "exposure"]),
    ),
    _prime(
        "pathway>gp>gp",
        "What gene/protein interacts with the gene/protein that related to <pathway>?",
        _GP,
        ("pathway", ["pathway", "interacts with", _GP, "ppi", _GP]),
    ),
    _prime(
        "drug>drug>gp",
        "What gene or protein transports the drugs that have a synergistic interaction with <drug>?",
        _GP,
        ("drug", ["drug", "synergistic interaction", "drug", "transporter", _GP]),
    ),
    _prime(
        "bp>gp>bp",
        "What biological process has the common interaction pattern with gene or proteins as <biological_process>?",
        _BP,
        ("biological_process", [_BP, "interacts with", _GP, "interacts with", _BP]),
    ),
    _prime(
        "ep>gp>bp",
        "What biological process interacts with the gene/protein associated with <effect/phenotype>?",
        _BP,
        ("effect/phenotype", [_EP, "associated with", _GP, "interacts with", _BP]),
    ),
    _prime(
        "drug>gp>anatomy",
        "What anatomy expresses the gene/protein that affect the transporter of <drug>?",
        "anatomy",
        ("drug", ["drug", "transporter", _GP, "expression present", "anatomy"]),
    ),
    _prime(
        "drug>gp>cc",
        "What cellular component interacts with genes or proteins targeted by <drug>?",
        "cellular_component",
        ("drug", ["drug", "target", _GP, "interacts with", "cellular_component"]),
    ),
    _prime(
        "bp>gp>anatomy",
        "What anatomy does not express the genes or proteins that interacts with <biological_process>?",
        "anatomy",
        ("biological_process", [_BP, "interacts with", _GP, "expression absent", "anatomy"]),
    ),
    _prime(
        "ep>gp>anatomy",
        "What anatomy does not express the genes or proteins associated with <effect/phenotype>?",
        "anatomy",
        ("effect/phenotype", [_EP, "associated with", _GP, "expression absent", "anatomy"]),
    ),
    _prime(
        "drug>disease>drug&drug",
        "Find drugs that has a synergistic interaction with <drug> and both are indicated for the same disease.",
        "drug",
        ("drug", ["drug", "indication", "disease", "indication", "drug"]),
        ("drug", ["drug", "synergistic interaction", "drug"]),
    ),
    _prime(
        "pathway>gp>pathway&pathway",
        "Find pathway that is related with <pathway> and both can interact with the same gene/protein.",
        "pathway",
        ("pathway", ["pathway", "interacts with", _GP, "interacts with", "pathway"]),
        ("pathway", ["pathway", "parent-child", "pathway"]),
    ),
    _prime(
        "gp>disease>gp&gp",
        "Find gene/protein that can interact with <gene/protein> and both are associated with the same disease.",
        _GP,
        ("gene/protein", [_GP, "associated with", "disease", "associated with", _GP]),
        ("gene/protein", [_GP, "ppi", _GP]),
    ),
    _prime(
        "gp>ep>gp&gp",
        "Find gene/protein that can interact with <gene/protein> and both are associated with the "
        "same effect/phenotype.",
        _GP,
        ("gene/protein", [_GP, "associated with", _EP, "associated with", _GP]),
        ("gene/protein", [_GP, "ppi", _GP]),
    ),
]

TEMPLATES: dict[str, list[Template]] = {
    "prime": PRIME,
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
        _t(
            "package>recommends",
            "Which packages does <package> recommend?",
            "package",
            package="package -recommends-> package",
        ),
        _t(
            "section>package<depends",
            "Which packages in the <section> section depend on <package>?",
            "package",
            section="section <-in_section- package",
            package="package <-depends- package",
        ),
        # two hops: a requirement on a neighbour of the answer
        _t(
            "maintainer>package>depends",
            "Which packages depend on a package maintained by <maintainer>?",
            "package",
            maintainer="maintainer <-maintained_by- package <-depends- package",
        ),
        _t(
            "package>maintainer>package",
            "Which other packages are maintained by the maintainer of <package>?",
            "package",
            package="package -maintained_by-> maintainer <-maintained_by- package",
        ),
        _t(
            "tag>package+maintainer>package>depends",
            "Which packages tagged <tag> depend on a package maintained by <maintainer>?",
            "package",
            tag="tag <-tagged- package",
            maintainer="maintainer <-maintained_by- package <-depends- package",
        ),
        _t(
            "section>package+maintainer>package>depends",
            "Which packages in the <section> section depend on a package maintained by <maintainer>?",
            "package",
            section="section <-in_section- package",
            maintainer="maintainer <-maintained_by- package <-depends- package",
        ),
        _t(
            "maintainer>package+section>package<depends",
            "Which packages maintained by <maintainer> are needed by a package in the <section> section?",
            "package",
            maintainer="maintainer <-maintained_by- package",
            section="section <-in_section- package -depends-> package",
        ),
    ],
}


def _reach(skb: SKB, start: int, hops: tuple[Hop, ...]) -> np.ndarray:
    reached = reach(skb, start, hops)
    assert reached is not None  # no limit: never None
    return reached


def candidates(skb: SKB, template: Template, anchors: dict[str, int]) -> np.ndarray:
    """Nodes of the answer type that every path reaches from its anchor (anchors excluded)."""
    result: np.ndarray | None = None
    for path in template.paths:
        reached = _reach(skb, anchors[path.slot], path.hops)
        result = reached if result is None else np.intersect1d(result, reached)
    assert result is not None
    result = np.setdiff1d(result, np.array(list(anchors.values()), dtype=np.int64))
    return np.array([n for n in result if _free_of(skb, int(n), template.none_of)], dtype=np.int64)


def _free_of(skb: SKB, node: int, none_of: tuple[Hop, ...]) -> bool:
    for hop in none_of:
        neighbours = skb.neighbors(node, hop.relation, hop.direction)
        if (skb.node_types[neighbours] == skb.node_type_names.index(hop.node_type)).any():
            return False
    return True


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
        if not _free_of(skb, gold, template.none_of):
            continue
        anchors: dict[str, int] = {}
        for path in template.paths:
            if path.slot in anchors:  # a second path from the same entity must reach the gold too
                if gold not in _reach(skb, anchors[path.slot], path.hops):
                    break
                continue
            node = gold
            types = [path.slot_type, *(h.node_type for h in path.hops[:-1])]
            for hop, previous_type in zip(reversed(path.hops), reversed(types), strict=True):
                back: Literal["in", "out"] = "in" if hop.direction == "out" else "out"
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
