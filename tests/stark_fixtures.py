"""Tiny STaRK SKBs written in exactly the official processed format (pickles + torch tensors).

Used by the tests, and once by ``reference/make_stark_documents.py`` to record what the
official ``stark_qa`` loaders make of the same files. Each SKB exercises the fields its
document builder reads: Prime's details (gene/protein fields, 'nan' values, private keys),
MAG's missing values (-1) and author affiliations, Amazon's dimensions, reviews sorted by
votes (with ties and more than ``max_entries``), Q&A, and meta nodes.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import torch


def _save(
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
    node_info = {
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
    _save(
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
    _save(root / "skb" / "mag" / "processed", node_info, edges, node_types, None, None)
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
    _save(
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
