"""Record the official stark_qa loaders' documents for the test SKBs (run once, committed).

    pip install stark-qa torch torch_geometric
    python tests/reference/make_stark_documents.py

Writes ``stark_documents.json``: for every node of the three tiny SKBs in
``tests/stark_fixtures.py``, ``get_doc_info`` without and with relations, each plain and
compact, plus the candidate ids and the undirected edge list the official loader builds.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stark_fixtures import write_all


def main() -> None:
    from stark_qa.skb import AmazonSKB, MagSKB, PrimeSKB

    out = {"versions": {p: importlib.metadata.version(p) for p in ("stark-qa", "torch", "torch_geometric")}}
    with tempfile.TemporaryDirectory() as tmp:
        root = write_all(Path(tmp))
        skbs = {
            "prime": PrimeSKB(root=str(root / "skb" / "prime"), download_processed=False),
            "mag": MagSKB(root=str(root / "skb" / "mag"), download_processed=False),
            "amazon": AmazonSKB(root=str(root / "skb" / "amazon"), download_processed=False),
        }
        for name, skb in skbs.items():
            docs = {}
            for i in range(skb.num_nodes()):
                docs[i] = {
                    "plain": skb.get_doc_info(i, add_rel=False, compact=False),
                    "relations": skb.get_doc_info(i, add_rel=True, compact=False),
                    "compact": skb.get_doc_info(i, add_rel=False, compact=True),
                    "relations_compact": skb.get_doc_info(i, add_rel=True, compact=True),
                }
            out[name] = {
                "candidate_ids": list(map(int, skb.candidate_ids)),
                "edges": sorted(
                    zip(skb.edge_index[0].tolist(), skb.edge_index[1].tolist(), skb.edge_types.tolist(), strict=True)
                ),
                "documents": docs,
            }
    path = Path(__file__).with_name("stark_documents.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
