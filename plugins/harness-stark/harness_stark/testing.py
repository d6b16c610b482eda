"""For tests: STaRK SKBs written in exactly the official processed format (pickles + torch tensors).

``write_prime``, ``write_mag`` and ``write_amazon`` write tiny hand-made SKBs whose every node
a reader can check by eye. ``random_prime``, ``random_mag`` and ``random_amazon`` build a few
hundred nodes each, seeded, with what the real releases contain: relation groups mixing all
node types, multi-edges, self-loops, isolated nodes, one-directional edges, node pairs joined
by several relations, NaN / empty / unicode / list fields, non-dict ``details``, long review
and Q&A lists; plus, unconnected, a few nodes on which the official ``get_doc_info`` itself
fails. ``random_shapes`` puts every field the official documents read in any of many shapes
(or leaves it out). ``write_files`` lays any of them out as the release does, unzipped or as
``skb/<name>/processed.zip``. The differential tests run the official ``stark_qa`` loaders
on these files and compare every node. :func:`stark_data_dir` is where the real files are, if
anywhere (``$STARK_DATA_DIR``).
"""

from __future__ import annotations

import math
import os
import pickle
import random
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch


def save_processed(
    directory: Path,
    node_info: dict,
    edges: list[tuple[int, int, int]],
    node_types: list[int],
    edge_type_dict: dict | None,
    node_type_dict: dict | None,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "node_info.pkl").open("wb") as handle:
        pickle.dump(node_info, handle)
    torch.save(torch.LongTensor([[e[0] for e in edges], [e[1] for e in edges]]), directory / "edge_index.pt")
    torch.save(torch.LongTensor([e[2] for e in edges]), directory / "edge_types.pt")
    torch.save(torch.LongTensor(node_types), directory / "node_types.pt")
    for name, value in (("edge_type_dict", edge_type_dict), ("node_type_dict", node_type_dict)):
        if value is not None:
            with (directory / f"{name}.pkl").open("wb") as handle:
                pickle.dump(value, handle)


PRIME_NODE_TYPES = [
    "disease",
    "gene/protein",
    "molecular_function",
    "drug",
    "pathway",
    "anatomy",
    "effect/phenotype",
    "biological_process",
    "cellular_component",
    "exposure",
]
PRIME_RELATIONS = [
    "ppi",
    "carrier",
    "enzyme",
    "target",
    "transporter",
    "contraindication",
    "indication",
    "off-label use",
    "synergistic interaction",
    "associated with",
    "parent-child",
    "phenotype absent",
    "phenotype present",
    "side effect",
    "interacts with",
    "linked to",
    "expression present",
    "expression absent",
]


def write_prime(root: Path) -> None:
    rel = PRIME_RELATIONS.index
    node_info: dict[int, dict[str, Any]] = {
        0: {
            "id": "9796",
            "type": "gene/protein",
            "name": "PHYHIP",
            "source": "NCBI",
            "details": {
                "query": "PHYHIP",
                "_id": "9796",
                "_score": 17.6,
                "alias": ["DYRK1AP3", "PAHX-AP1"],
                "genomic_pos": [{"chr": "8", "start": 22219703, "end": 22232101}, {"chr": "8_alt", "start": 1}],
                "interpro": {"desc": "Fibronectin type III", "id": "IPR003961"},
                "generif": [{"pubmed": 1, "text": "binds PHYH"}, {"pubmed": 2, "text": "brain expressed"}],
                "name": "phytanoyl-CoA 2-hydroxylase interacting protein",
                "summary": "nan",
                "type_of_gene": "protein-coding",
                "ensembl_id": "ENSG1",
                "other_names": "",
            },
        },
        1: {
            "id": "7918",
            "type": "gene/protein",
            "name": "GPANK1",
            "source": "NCBI",
            "details": {
                "interpro": [{"desc": "Ankyrin repeat"}, {"desc": "G-patch domain"}],
                "summary": "G patch protein",
            },
        },
        2: {
            "id": "DB00001",
            "type": "drug",
            "name": "Lepirudin",
            "source": "DrugBank",
            "details": {
                "description": "Lepirudin is a recombinant hirudin.",
                "half_life": "nan",
                "indication": "",
                "mechanism_of_action": "Direct thrombin inhibitor",
                "molecular_weight": 6963.425,
            },
        },
        3: {
            "id": "5044",
            "type": "disease",
            "name": "hypertension",
            "source": "MONDO",
            "details": {
                "mondo_definition": "Persistently high arterial blood pressure.",
                "umls_description": math.nan,
                "mayo_symptoms": "Headache; nosebleeds",
            },
        },
        4: {"id": "R-HSA-1", "type": "pathway", "name": "Hemostasis", "source": "REACTOME"},
        5: {
            "id": "GO:1",
            "type": "biological_process",
            "name": "blood coagulation",
            "source": "GO",
            "details": {"go_def": ""},
        },
        6: {"id": "UBERON:1", "type": "anatomy", "name": "heart", "source": "UBERON"},
        7: {"id": "HP:1", "type": "effect/phenotype", "name": "Epistaxis", "source": "HPO"},
    }
    node_types = [PRIME_NODE_TYPES.index(info["type"]) for info in node_info.values()]
    edges = [
        (0, 1, rel("ppi")),
        (1, 0, rel("ppi")),  # already both ways
        (2, 0, rel("target")),
        (2, 1, rel("enzyme")),
        (2, 3, rel("indication")),
        (3, 2, rel("contraindication")),  # one pair, two relations
        (3, 0, rel("associated with")),
        (0, 4, rel("interacts with")),
        (0, 5, rel("interacts with")),
        (3, 7, rel("phenotype present")),
        (0, 6, rel("expression present")),
        (2, 7, rel("side effect")),
    ]
    save_processed(
        root / "skb" / "prime" / "processed",
        node_info,
        edges,
        node_types,
        dict(enumerate(PRIME_RELATIONS)),
        dict(enumerate(PRIME_NODE_TYPES)),
    )


def write_mag(root: Path) -> None:
    def paper(title: str, date: str, venue: str = "-1", journal: str = "-1", series: str = "-1", inst: str = "-1"):
        return {
            "type": "paper",
            "title": title,
            "abstract": f"We study {title.lower()}.\r\n",
            "Date": date,
            "OriginalVenue": venue,
            "JournalDisplayName": journal,
            "ConferenceSeriesDisplayName": series,
            "ConferenceInstancesDisplayName": inst,
        }

    node_info = {
        0: {"type": "author", "DisplayName": "Ada Lovelace", "PaperCount": 12, "CitationCount": -1},
        1: {"type": "author", "DisplayName": "-1", "PaperCount": -1, "CitationCount": 3},
        2: {"type": "author", "DisplayName": "Alan Turing", "PaperCount": 40, "CitationCount": 9000},
        3: {"type": "institution", "DisplayName": "University of London", "PaperCount": 100, "CitationCount": 5},
        4: {"type": "institution", "DisplayName": "Lab-1", "PaperCount": -1, "CitationCount": -1},
        5: {"type": "field_of_study", "DisplayName": "Computation", "PaperCount": 7, "CitationCount": 70},
        6: paper("Analytical Engines", "1843-01-01", venue="Scientific Memoirs"),
        7: paper("Computable Numbers", "1936-11-12", journal="Proceedings of the LMS"),
        8: paper("Machine Intelligence", "-1", series="Mind"),
        9: paper("Morphogenesis", "1952-08-14"),
    }
    types = {"author": 0, "institution": 1, "field_of_study": 2, "paper": 3}
    node_types = [types[info["type"]] for info in node_info.values()]
    edges = [
        (0, 3, 0),
        (2, 3, 0),
        (2, 4, 0),
        (1, 4, 0),  # affiliations
        (7, 6, 1),
        (8, 7, 1),
        (9, 7, 1),  # citations
        (6, 5, 2),
        (7, 5, 2),  # topics
        (0, 6, 3),
        (2, 7, 3),
        (2, 8, 3),
        (1, 9, 3),
        (2, 9, 3),  # authorship
    ]
    save_processed(root / "skb" / "mag" / "processed", node_info, edges, node_types, None, None)
    (root / "skb" / "mag" / "schema").mkdir(parents=True, exist_ok=True)


def write_amazon(root: Path) -> None:
    reviews = [
        {
            "reviewerID": f"r{i}",
            "summary": f"summary {i}",
            "reviewText": f"text {i}",
            "vote": [None, "2", "1,204", math.nan, "2"][i % 5],
            "overall": 5.0,
        }
        for i in range(30)
    ]
    qas = [{"question": f"question {i}?", "answer": f"answer {i}", "questionType": "yes/no"} for i in range(30)]
    node_info = {
        0: {
            "asin": "B0001",
            "title": "Trail Running Shoe",
            "brand": "Acme",
            "global_category": "Sports",
            "category": ["Running", "Shoes"],
            "color": ["Red"],
            "details": {"product_dimensions": "12 x 4 x 5 inches ; 1.5 pounds"},
            "description": ["Light shoe ", "for trails."],
            "feature": ["Grippy sole", "", "ASIN: B0001"],
            "review": reviews,
            "qa": qas,
        },
        1: {
            "asin": "B0002",
            "title": "Camping Stove",
            "brand": "Globex",
            "category": ["Camping"],
            "details": {"product_dimensions": "no weight"},
            "description": [],
            "feature": [],
            "review": [],
            "qa": [{"question": "Fuel?", "answer": "Butane"}],
        },
        2: {
            "asin": "B0003",
            "title": "Water Bottle",
            "category": ["Camping"],
            "color": ["Red", "Blue"],
            "details": {},
            "description": [" "],
            "feature": ["Holds 1 litre"],
            "review": [{"summary": "ok", "reviewText": "fine", "vote": None}],
            "qa": [],
        },
        3: {"brand_name": "Acme"},
        4: {"brand_name": "Globex"},
        5: {"category_name": "Camping"},
        6: {"category_name": "Running"},
        7: {"category_name": "Shoes"},
        8: {"color_name": "Blue"},
        9: {"color_name": "Red"},
    }
    node_types = [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    edges = [
        (0, 1, 0),
        (0, 2, 1),
        (1, 2, 1),
        (2, 0, 0),  # also_buy / also_view
        (0, 3, 2),
        (1, 4, 2),  # has_brand
        (0, 6, 3),
        (0, 7, 3),
        (1, 5, 3),
        (2, 5, 3),  # has_category
        (0, 9, 4),
        (2, 8, 4),
        (2, 9, 4),  # has_color
    ]
    save_processed(
        root / "skb" / "amazon" / "processed" / "cache" / "brand-category-color",
        node_info,
        edges,
        node_types,
        {0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"},
        {0: "product", 1: "brand", 2: "category", 3: "color"},
    )
    (root / "skb" / "amazon" / "category_list.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "skb" / "amazon" / "category_list.json").write_text("[]")


def write_all(root: Path) -> Path:
    write_prime(root)
    write_mag(root)
    write_amazon(root)
    return root


# -- seeded SKBs of a few hundred nodes -------------------------------------------------------

Graph = Literal["directed", "symmetric", "set-symmetric"]
#: Where each SKB's processed files lie under ``skb/<name>/``.
PROCESSED = {"prime": "processed", "mag": "processed", "amazon": "processed/cache/brand-category-color"}
AMAZON_NODE_TYPES = {0: "product", 1: "brand", 2: "category", 3: "color"}
AMAZON_RELATIONS = {0: "also_buy", 1: "also_view", 2: "has_brand", 3: "has_category", 4: "has_color"}
MAG_NODE_TYPES = {0: "author", 1: "institution", 2: "field_of_study", 3: "paper"}

WORDS = [
    "kinase",
    "receptor",
    "alpha",
    "protein",
    "naïve",
    "α-synuclein",
    "東京",
    "Ünïcödé",
    "O'Brien",
    'say "hi"',
    "a, b",
    "(paren)",
    "x - y",
    "semi; colon",
    "double  space",
    "tab\tchar",
    "🧬",
    "-1",
    "Lab-1",
    "line\nbreak",
    "- dash",
    "end.",
    ":colon",
    "ASIN",
    "{brace}",
    "trail\r",
]


@dataclass
class SKBFiles:
    """What one SKB's processed files hold."""

    node_info: dict[int, Any]
    edges: list[tuple[int, int, int]]
    node_types: list[int]
    edge_type_dict: dict[int, str] | None
    node_type_dict: dict[int, str] | None


def write_files(root: Path, name: str, files: SKBFiles, zipped: bool = False) -> Path:
    """Lay ``files`` out under ``root`` as the release does: ``skb/<name>/processed/…``, or only
    ``skb/<name>/processed.zip`` when ``zipped``. Returns the directory the official loader takes
    as ``root`` (for a zipped layout, an unzipped copy outside ``root/skb``)."""
    official = (root / "unzipped" if zipped else root) / "skb" / name
    processed = official / PROCESSED[name]
    save_processed(
        processed, files.node_info, files.edges, files.node_types, files.edge_type_dict, files.node_type_dict
    )
    if name == "mag":
        (official / "schema").mkdir(parents=True, exist_ok=True)  # else the official loader downloads it
    if zipped:
        archive = root / "skb" / name / "processed.zip"
        archive.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive, "w") as bundle:
            for file in sorted(processed.iterdir()):
                bundle.write(file, f"{PROCESSED[name]}/{file.name}")
    return official


def _text(rng: random.Random, low: int = 1, high: int = 5) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _shape(edges: list[tuple[int, int, int]], graph: Graph, rng: random.Random) -> list[tuple[int, int, int]]:
    """``directed``: as given. ``symmetric``: every edge also reversed, so the edge multiset is
    its own reverse (the official loader keeps it as is: duplicates and pairs under several
    relations stay). ``set-symmetric``: that plus a few extra copies in one direction only,
    symmetric as a set of node pairs but not as a multiset (the official loader merges it)."""
    if graph == "directed":
        return edges
    both = edges + [(d, s, t) for s, d, t in edges]
    if graph == "set-symmetric":
        extra = rng.sample(both, 12)
        both += extra[:6] + [(s, d, (t + 5) % 18) for s, d, t in extra[6:]]  # a copy under another of Prime's 18
    rng.shuffle(both)
    return both


def _links(
    rng: random.Random, linked: list[int], relations: int, count: int, unknown: tuple[int, ...] = ()
) -> list[tuple[int, int, int]]:
    """Random edges among ``linked``: hubs whose one relation reaches nodes of every type,
    plain edges, pairs joined by several relations, duplicates, self-loops, and edges whose
    type id is not in the edge type dictionary."""
    edges = []
    for hub in rng.sample(linked, 6):
        relation = rng.randrange(relations)
        for other in rng.sample(linked, 25):
            edges.append((hub, other, relation) if rng.random() < 0.7 else (other, hub, relation))
    for _ in range(count):
        u, v = rng.sample(linked, 2)
        edges.append((u, v, rng.randrange(relations)))
    for _ in range(25):
        u, v = rng.sample(linked, 2)
        for relation in rng.sample(range(relations), rng.randint(2, 4)):
            edges.append((u, v, relation) if rng.random() < 0.6 else (v, u, relation))
    edges += rng.sample(edges, 40)
    edges += [(u, u, rng.randrange(relations)) for u in rng.sample(linked, 8)]
    for type_id in unknown:
        u, v = rng.sample(linked, 2)
        edges.append((u, v, type_id))
    return edges


def _prime_details(rng: random.Random, kind: str) -> Any:
    maybe = rng.random

    def some(options: list[Any]) -> Any:
        return rng.choice(options)

    if kind == "gene/protein":
        details: dict[str, Any] = {"query": _text(rng, 1, 1), "_id": str(rng.randint(1, 99999)), "_score": maybe()}
        if maybe() < 0.7:
            details["name"] = _text(rng)
        if maybe() < 0.5:
            details["type_of_gene"] = some(["protein-coding", "ncRNA", "nan", ""])
        if maybe() < 0.5:
            details["alias"] = some([[_text(rng, 1, 1) for _ in range(rng.randint(1, 4))], _text(rng, 1, 1)])
        if maybe() < 0.3:
            details["other_names"] = some(["", [_text(rng)], _text(rng)])
        if maybe() < 0.6:
            details["genomic_pos"] = some(
                [
                    {"chr": str(rng.randint(1, 22)), "start": rng.randint(1, 10**8), "end": 5, "strand": -1},
                    [{"chr": "X", "start": 1, "end": 2}, {"chr": "X_alt", "start": 3}],
                ]
            )
        if maybe() < 0.5:
            details["generif"] = [{"pubmed": k, "text": _text(rng, 3, 12)} for k in range(rng.randint(1, 6))]
        if maybe() < 0.6:
            one = {"desc": _text(rng), "id": "IPR1"}
            details["interpro"] = some([one, [{"desc": _text(rng), "id": f"IPR{k}"} for k in range(rng.randint(1, 4))]])
        if maybe() < 0.6:
            details["summary"] = some([_text(rng, 5, 20), "nan", math.nan, ""])
        if maybe() < 0.3:
            details["ensembl_id"] = "ENSG1"  # keys with '_id' are left out
        if maybe() < 0.3:
            details["pathway"] = {"kegg": [{"id": "hsa1", "name": _text(rng)}], "reactome": "nan", "wiki": ""}
        if maybe() < 0.2:
            details["MIM"] = rng.randint(1, 10**6)
        return details
    if kind in ("drug", "disease"):
        keys = (
            ["description", "half_life", "indication", "mechanism_of_action", "state", "category", "atc_4"]
            if kind == "drug"
            else ["mondo_definition", "umls_description", "orphanet_prevalence", "mayo_symptoms", "mayo_causes"]
        )
        details = {k: some([_text(rng, 2, 15), "", math.nan, "nan", _text(rng)]) for k in keys}
        details[f"{kind}_id"] = "X1"
        details["molecular_weight" if kind == "drug" else "group_name_bert"] = some([rng.random() * 1000, math.nan])
        return details if maybe() < 0.85 else {k: math.nan for k in keys}  # all NaN: no details section
    if kind in ("biological_process", "molecular_function", "cellular_component"):
        return some([{"go_id": "GO:1", "go_def": _text(rng, 3, 9), "go_name": _text(rng)}, {"go_def": ""}, None])
    if kind == "pathway":
        return some(
            [
                {"dbId": rng.randint(1, 9999), "displayName": _text(rng), "summation": [_text(rng, 4, 12)]},
                {"stId": "R-HSA-1", "literatureReference": [{"title": _text(rng)}], "_private": "x"},
                None,
            ]
        )
    return some([None, None, {}, {"note": _text(rng)}])


def random_prime(seed: int, graph: Graph = "directed", num_nodes: int = 300) -> SKBFiles:
    """PrimeKG-like: the 10 node types (ids 0..9), the 18 relations, gene/protein details of
    every shape, relation groups that mix node types; the last nodes break the official code."""
    rng = random.Random(seed)
    node_info: dict[int, Any] = {}
    node_types: list[int] = []
    for i in range(num_nodes):
        kind_id = rng.randrange(len(PRIME_NODE_TYPES))
        kind = PRIME_NODE_TYPES[kind_id]
        info: dict[str, Any] = {"id": str(i), "type": kind, "name": f"{_text(rng, 1, 3)} {i}", "source": "NCBI"}
        details = _prime_details(rng, kind)
        if details is not None:
            info["details"] = details
        node_info[i] = info
        node_types.append(kind_id)
    node_info[1]["name"] = 12345  # not a string
    gene_type = PRIME_NODE_TYPES.index("gene/protein")
    node_info[2] = {"id": "2", "type": "gene/protein", "name": "LONG", "source": "NCBI", "details": {}}
    node_info[2]["details"]["generif"] = [{"text": "w " * 30000}, {"text": "v " * 30000}]  # cut at 50000 words
    node_types[2] = gene_type
    isolated = set(rng.sample(range(num_nodes), 10))
    linked = [i for i in range(num_nodes) if i not in isolated]
    edges = _shape(_links(rng, linked, len(PRIME_RELATIONS), 700, unknown=(18, 19, 40)), graph, rng)

    def gene(name: str, details: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "gene/protein", {"id": "b", "type": "gene/protein", "name": name, "source": "NCBI", "details": details}

    broken: list[tuple[str, dict[str, Any]]] = [  # the official get_doc_info raises on each (no edges: only itself)
        ("disease", {"id": "b", "type": "disease", "name": "nan", "source": "MONDO"}),  # 'nan' is cleaned away
        ("disease", {"id": "b", "type": "disease", "name": math.nan, "source": "MONDO"}),
        ("drug", {"id": "b", "type": "drug", "name": "no source"}),
        ("pathway", {"id": "b", "type": "pathway", "name": "text details", "source": "R", "details": "text"}),
        gene("no desc", {"interpro": {"id": "IPR1"}}),
        gene("text generif", {"generif": "text"}),
        gene("empty position", {"genomic_pos": []}),
    ]
    for kind, info in broken:
        node_info[len(node_info)] = info
        node_types.append(PRIME_NODE_TYPES.index(kind))
    edge_type_dict = dict(enumerate(PRIME_RELATIONS))
    node_type_dict = dict(enumerate(PRIME_NODE_TYPES))
    if graph == "directed":  # dictionaries in another key order: documents list relations in it
        edge_type_dict = dict(rng.sample(list(edge_type_dict.items()), len(edge_type_dict)))
        node_type_dict = dict(rng.sample(list(node_type_dict.items()), len(node_type_dict)))
    return SKBFiles(node_info, edges, node_types, edge_type_dict, node_type_dict)


def _reviews(rng: random.Random, count: int) -> list[dict[str, Any]]:
    votes = [None, math.nan, "1,204", "2", "12", "2", "0", None]
    return [
        {
            "reviewerID": f"R{k}",
            "summary": _text(rng, 1, 4),
            "style": rng.choice([{"Color:": " Red"}, math.nan]),
            "reviewText": rng.choice(["", _text(rng, 2, 20)]),
            "vote": rng.choice(votes),
            "overall": 5.0,
        }
        for k in range(count)
    ]


def _product(rng: random.Random, i: int) -> dict[str, Any]:
    info: dict[str, Any] = {"asin": f"B{i:05d}", "title": f"{_text(rng)} #{i}", "global_category": "Sports"}
    brand = rng.random()
    if brand < 0.8:
        info["brand"] = _text(rng, 1, 2) if brand < 0.6 else rng.choice([math.nan, ""])
    dimensions = rng.choice(["12 x 4 x 5 inches ; 1.5 pounds", "3 x 3 inches", "a ; b ; c", math.nan, {"in": "x ; y"}])
    details = rng.choice(
        [{"product_dimensions": dimensions}, {"shipping_weight": "1 pound"}, {}, math.nan, "1 x 2 ; 3", ["x ; y"], None]
    )
    if rng.random() < 0.9:
        info["details"] = details
    info["description"] = rng.choice(
        [[_text(rng, 3, 12) for _ in range(rng.randint(1, 3))], [], [""], [" ", ""], _text(rng, 1, 2), ["  pad  "]]
    )
    info["feature"] = rng.choice(
        [[], [_text(rng), "", "ASIN: B01", "contains asin", _text(rng)], [_text(rng, 2, 8)], [" "]]
    )
    info["review"] = _reviews(rng, rng.choice([0, 1, 3, 10, 26, 27, 28, 40]))
    count = rng.choice([0, 1, 5, 26, 27, 35])
    info["qa"] = [{"questionType": "yes/no", "question": _text(rng), "answer": _text(rng)} for _ in range(count)]
    info["price"] = rng.choice(["$12.00", math.nan, ""])
    info["category"] = [_text(rng, 1, 2)]
    return info


def random_amazon(seed: int, graph: Graph = "directed") -> SKBFiles:
    """Amazon-like: products (in shuffled order among brands, categories and colours) with every
    field shape the release has; the last nodes break the official code."""
    rng = random.Random(seed)
    kinds = [0] * 160 + [1] * 20 + [2] * 25 + [3] * 12
    rng.shuffle(kinds)
    node_info: dict[int, Any] = {}
    for i, kind in enumerate(kinds):
        if kind == 0:
            node_info[i] = _product(rng, i)
        else:
            key = f"{AMAZON_NODE_TYPES[kind]}_name"
            node_info[i] = {key: rng.choice([_text(rng, 1, 3), _text(rng, 1, 3), math.nan, ""])}
    by_kind = {k: [i for i, t in enumerate(kinds) if t == k] for k in AMAZON_NODE_TYPES}
    products = by_kind[0]
    node_info[products[0]]["title"] = math.nan  # a neighbour's "#k: " + title then fails
    alone = set(rng.sample(products, 8))
    linked = [p for p in products if p not in alone]
    edges: list[tuple[int, int, int]] = []
    for p in linked:
        edges += [(p, q, 0) for q in rng.sample(linked, rng.choice([0, 0, 1, 3]))]
        edges += [(p, q, 1) for q in rng.sample(linked, rng.choice([0, 1, 2, 5]))]
        brands = rng.sample(by_kind[1], rng.choice([0, 1, 1, 2]))
        edges += [(p, b, 2) if rng.random() < 0.8 else (b, p, 2) for b in brands]
        edges += [(p, c, 3) for c in rng.sample(by_kind[2], rng.randint(0, 3))]
        edges += [(p, c, 4) for c in rng.sample(by_kind[3], rng.randint(0, 2))]
    edges += [(s, d, 1) for s, d, t in rng.sample(edges, 60) if t == 0]  # also bought and also viewed
    edges += rng.sample(edges, 30)
    edges += [(p, p, 1) for p in rng.sample(linked, 5)]
    edges = _shape(edges, graph, rng)
    broken = [
        {"title": "no review", "description": [], "feature": [], "qa": []},
        {"title": "no description", "feature": [], "review": [], "qa": []},
        {"title": "no features", "description": [], "review": [], "qa": []},
        {"title": "no Q&A", "description": [], "feature": [], "review": []},
        {"title": "NaN description", "description": math.nan, "feature": [], "review": [], "qa": []},
        {"title": "NaN feature", "description": [], "feature": [math.nan], "review": [], "qa": []},
        {"title": "int vote", "description": [], "feature": [], "review": [{"vote": 3}], "qa": []},
        {"title": "no summary", "description": [], "feature": [], "review": [{"vote": None}], "qa": []},
        {"description": [], "feature": [], "review": [], "qa": []},  # no title
    ]
    types = kinds + [0] * len(broken) + [1]
    for info in [*broken, {"name": "a brand without brand_name"}]:
        node_info[len(node_info)] = info
    return SKBFiles(node_info, edges, types, dict(AMAZON_RELATIONS), dict(AMAZON_NODE_TYPES))


def _paper(rng: random.Random, i: int) -> dict[str, Any]:
    def venue() -> Any:
        return rng.choice(["-1", "-1", -1, _text(rng, 1, 3)])

    return {
        "type": "paper",
        "title": f"{_text(rng, 2, 6)} {i}",
        "abstract": rng.choice([_text(rng, 5, 30) + "\r\n", _text(rng, 3, 10), "", "-1 first.\n\n", "r\r\nn\n"]),
        "Date": rng.choice(["2001-02-03", "-1", -1, "1999-12-31"]),
        "OriginalVenue": venue(),
        "JournalDisplayName": venue(),
        "ConferenceSeriesDisplayName": venue(),
        "ConferenceInstancesDisplayName": venue(),
        "DocType": rng.choice(["Journal", math.nan]),
    }


def random_mag(seed: int, graph: Graph = "directed") -> SKBFiles:
    """MAG-like: authors, institutions, fields of study and papers with MAG's missing values
    (-1, '-1', NaN) and the four relations; the last nodes break the official code."""
    rng = random.Random(seed)
    kinds = [0] * 70 + [1] * 15 + [2] * 25 + [3] * 110
    rng.shuffle(kinds)
    node_info: dict[int, Any] = {}
    for i, kind in enumerate(kinds):
        if kind == 3:
            node_info[i] = _paper(rng, i)
            continue
        node_info[i] = {
            "type": MAG_NODE_TYPES[kind],
            "DisplayName": rng.choice([f"{_text(rng, 1, 3)} {i}", "-1", f"Jean-1 {i}", f"Ünï {i}"]),
            "PaperCount": rng.choice([rng.randint(0, 500), -1, math.nan]),
            "CitationCount": rng.choice([rng.randint(0, 9000), -1]),
        }
    by_kind = {k: [i for i, t in enumerate(kinds) if t == k] for k in MAG_NODE_TYPES}
    authors, institutions, fields, papers = (by_kind[k] for k in range(4))
    node_info[authors[0]]["DisplayName"] = 42  # not a string
    edges: list[tuple[int, int, int]] = []
    for a in authors[1:]:
        edges += [(a, j, 0) for j in rng.sample(institutions, rng.choice([0, 1, 1, 2]))]
    for p in papers:
        edges += [(p, q, 1) for q in rng.sample(papers, rng.choice([0, 1, 3, 5]))]
        edges += [(p, f, 2) for f in rng.sample(fields, rng.randint(0, 3))]
        edges += [(a, p, 3) for a in rng.sample(authors, rng.randint(1, 4))]
    edges += rng.sample(edges, 20) + [(p, p, 1) for p in rng.sample(papers, 4)]  # duplicates, self-citations
    # An author "affiliated with" a paper: the official code asserts on the papers around it.
    edges.append((authors[1], papers[0], 0))
    node_info[authors[1]]["DisplayName"] = "Affiliated With A Paper"
    node_info[institutions[0]]["DisplayName"] = math.nan  # joined with ", ": fails around its authors
    edges = _shape(edges, graph, rng)
    broken = [
        ("paper", {**_paper(rng, 0), "abstract": math.nan}),
        ("paper", {k: v for k, v in _paper(rng, 0).items() if k != "JournalDisplayName"} | {"OriginalVenue": "-1"}),
        ("author", {"type": "author", "PaperCount": 1, "CitationCount": 1}),
        ("author", {"type": "venue", "DisplayName": "not a MAG type", "PaperCount": 1, "CitationCount": 1}),
    ]
    types = list(kinds)
    for kind_name, info in broken:
        node_info[len(node_info)] = info
        types.append({v: k for k, v in MAG_NODE_TYPES.items()}[kind_name])
    return SKBFiles(node_info, edges, types, None, None)


#: Values a field may hold in place of the expected one; ``MISSING`` drops the field.
MISSING = object()
SHAPES: list[Any] = [
    None,
    math.nan,
    "",
    "nan",
    "-1",
    "text",
    "a ; b",
    [],
    ["a", "b"],
    ["a", math.nan],
    ("t", "u"),
    {},
    {"k": "v", "inner": {"x": "nan"}},
    {"product_dimensions": "1 ; 2"},
    [{"desc": "d", "text": "t"}],
    {"desc": "d"},
    0,
    -1,
    5.5,
    MISSING,
]


def random_shapes(name: Literal["prime", "mag", "amazon"], seed: int, num_nodes: int = 120) -> SKBFiles:
    """Nodes whose fields the official documents read hold, at random, any of ``SHAPES`` (or
    are missing), joined by random edges: most documents fail in the official code, some
    through a neighbour, and the harness must fail, or not, on exactly the same ones."""
    rng = random.Random(seed)

    def vary(base: dict[str, Any], keys: list[str]) -> dict[str, Any]:
        out = dict(base)
        for key in keys:
            value = rng.choice(SHAPES)
            if value is MISSING:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    kind: Any  # a type's id or name, or any of SHAPES
    base: dict[str, Any]
    type_dicts: tuple[dict[int, str] | None, dict[int, str] | None]
    node_info: dict[int, Any] = {}
    if name == "amazon":
        types = [rng.choice([0, 0, 0, 1, 2, 3]) for _ in range(num_nodes)]
        for i, kind in enumerate(types):
            if kind:
                key = f"{AMAZON_NODE_TYPES[kind]}_name"
                node_info[i] = {key: f"meta {i}"} if rng.random() < 0.7 else vary({}, [key])
                continue
            base = {"title": f"product {i}", "description": [], "feature": [], "review": [], "qa": []}
            fields = ["title", "brand", "details", "description", "feature", "review", "qa"]
            node_info[i] = vary(base, rng.sample(fields, rng.randint(1, 3)))
            if rng.random() < 0.3:
                votes = [None, math.nan, "3", "1,2", 3, "x"]
                node_info[i]["review"] = [
                    {"summary": rng.choice(SHAPES[:7]), "reviewText": "r", "vote": rng.choice(votes)}
                    for _ in range(rng.randint(1, 4))
                ]
            if rng.random() < 0.2:
                node_info[i]["details"] = {"product_dimensions": rng.choice(SHAPES)}
        relations, type_dicts = len(AMAZON_RELATIONS), (dict(AMAZON_RELATIONS), dict(AMAZON_NODE_TYPES))
    elif name == "mag":
        types = [rng.randrange(4) for _ in range(num_nodes)]
        for i in range(num_nodes):
            kind = MAG_NODE_TYPES[rng.randrange(4)] if rng.random() < 0.9 else rng.choice(SHAPES[:6])
            if kind == "paper":
                base = {"type": "paper", "title": f"p{i}", "abstract": "a", "Date": "-1", "OriginalVenue": "-1"}
                base |= {"JournalDisplayName": "-1", "ConferenceSeriesDisplayName": "-1"}
                base |= {"ConferenceInstancesDisplayName": "-1"}
            else:
                base = {"type": kind, "DisplayName": f"n{i}", "PaperCount": 1, "CitationCount": -1}
            node_info[i] = vary(base, rng.sample(list(base)[1:], rng.randint(0, 3)))
        relations, type_dicts = 4, (None, None)
    else:
        types = [rng.randrange(10) for _ in range(num_nodes)]
        gene_keys = ["name", "type_of_gene", "alias", "other_names", "genomic_pos", "generif", "interpro", "summary"]
        for i, kind_id in enumerate(types):
            kind = PRIME_NODE_TYPES[kind_id] if rng.random() < 0.8 else "gene/protein"
            info = vary(
                {"type": kind, "name": f"n{i}", "source": "S"}, rng.sample(["name", "source"], rng.choice([0, 0, 1]))
            )
            if rng.random() < 0.8:
                keys = rng.sample([*gene_keys, "_private", "go_id", "other"], rng.randint(0, 5))
                info["details"] = vary({}, keys) if rng.random() < 0.9 else rng.choice(SHAPES[:11])
            node_info[i] = info
        relations, type_dicts = (
            len(PRIME_RELATIONS),
            (dict(enumerate(PRIME_RELATIONS)), dict(enumerate(PRIME_NODE_TYPES))),
        )
    edges = [
        (rng.randrange(num_nodes), rng.randrange(num_nodes), rng.randrange(relations)) for _ in range(3 * num_nodes)
    ]
    return SKBFiles(node_info, edges, types, *type_dicts)


def stark_data_dir() -> Path | None:
    """``$STARK_DATA_DIR``: real STaRK files in the official layout (``qa/<name>/...``), which the
    tests that read real query sets use (skipped without it); ``.ci/run`` points it at
    ``../shared/stark``."""
    value = os.environ.get("STARK_DATA_DIR")
    return Path(value) if value and (Path(value) / "qa").is_dir() else None
