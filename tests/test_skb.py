"""The SKB core: CSR neighbours, documents, persistence, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import tiny_skb

from harness.errors import HarnessError
from harness.skb import SKB, EdgeType


def test_neighbors_by_relation_and_direction() -> None:
    skb = tiny_skb()
    assert skb.neighbors(0, "made_by", "out").tolist() == [5]
    assert skb.neighbors(6, "made_by", "in").tolist() == [2, 3, 4]
    assert skb.neighbors(6, "made_by", "out").tolist() == []
    # symmetric relations are followed both ways whatever the direction
    assert skb.neighbors(1, "similar", "out").tolist() == [0]
    assert sorted(skb.neighbors(0).tolist()) == [1, 5]
    with pytest.raises(HarnessError, match="no relation 'sold_by'"):
        skb.neighbors(0, "sold_by")


def test_documents_with_and_without_relations() -> None:
    skb = tiny_skb()
    plain = skb.document(0)
    assert plain == "- product: red kettle\n- description: an electric kettle in red, boils water fast"
    full = skb.document(0, with_relations=True)
    assert full.startswith(plain)
    assert "- brand: Acme" in full and "- similar to: blue kettle" in full
    assert "- makes: green teapot, steel pan, copper pot" in skb.document(6, with_relations=True)
    assert list(skb.documents()) == [skb.document(i) for i in range(5)]  # candidates only


def test_neighbour_lists_in_documents_are_capped() -> None:
    skb = tiny_skb()
    skb.max_neighbors_in_doc = 2
    assert "- makes: green teapot, steel pan (and 1 more)" in skb.document(6, with_relations=True)


def test_counts_and_candidates() -> None:
    counts = tiny_skb().counts()
    assert counts["nodes"] == 7 and counts["edges"] == 6 and counts["candidates"] == 5
    assert counts["nodes_by_type"] == {"product": 5, "brand": 2}
    assert counts["edges_by_type"] == {"made_by": 5, "similar": 1}
    assert tiny_skb().is_candidate(np.array([0, 5, 99, -1])).tolist() == [True, False, False, False]


def test_save_load_round_trip(tmp_path: Path) -> None:
    skb = tiny_skb()
    skb.save(tmp_path / "skb")
    loaded = SKB.load(tmp_path / "skb")
    assert [loaded.document(i, True) for i in range(7)] == [skb.document(i, True) for i in range(7)]
    assert loaded.fingerprint == SKB.load(tmp_path / "skb").fingerprint
    assert not list(tmp_path.glob(".*tmp"))  # no temporary directory left behind


def test_fingerprint_changes_with_content() -> None:
    a, b = tiny_skb(), tiny_skb()
    assert a.fingerprint == b.fingerprint
    b.fields[0]["description"] = "changed"
    b._fingerprint = None
    assert a.fingerprint != b.fingerprint


def test_corrupt_or_incomplete_files_give_one_clear_error(tmp_path: Path) -> None:
    tiny_skb().save(tmp_path / "skb")
    data = (tmp_path / "skb" / "nodes.jsonl.xz").read_bytes()
    (tmp_path / "skb" / "nodes.jsonl.xz").write_bytes(data[: len(data) // 2])
    with pytest.raises(HarnessError, match=r"cannot read SKB|incomplete"):
        SKB.load(tmp_path / "skb")
    with pytest.raises(HarnessError, match="cannot read SKB"):
        SKB.load(tmp_path / "missing")


def test_invalid_graph_is_refused() -> None:
    with pytest.raises(HarnessError, match="outside"):
        SKB(
            "bad",
            ["t"],
            np.array([0, 0]),
            ["a", "b"],
            [{}, {}],
            [EdgeType("r")],
            np.array([0]),
            np.array([7]),
            np.array([0]),
        )
    with pytest.raises(HarnessError, match="unknown candidate types"):
        SKB(
            "bad",
            ["t"],
            np.array([0]),
            ["a"],
            [{}],
            [],
            np.array([]),
            np.array([]),
            np.array([]),
            candidate_types=["nope"],
        )
