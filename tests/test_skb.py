"""The SKB core: CSR neighbours, documents, persistence, errors."""

from __future__ import annotations

import inspect
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import plain_skb

from harness import SKB, EdgeType, HarnessError


def test_neighbors_by_relation_and_direction() -> None:
    skb = plain_skb()
    assert skb.neighbors(0, "made_by", "out").tolist() == [5]
    assert skb.neighbors(6, "made_by", "in").tolist() == [2, 3, 4]
    assert skb.neighbors(6, "made_by", "out").tolist() == []
    # symmetric relations are followed both ways whatever the direction
    assert skb.neighbors(1, "similar", "out").tolist() == [0]
    assert sorted(skb.neighbors(0).tolist()) == [1, 5]
    with pytest.raises(HarnessError, match="no relation 'sold_by'"):
        skb.neighbors(0, "sold_by")


def test_documents_with_and_without_relations() -> None:
    skb = plain_skb()
    plain = skb.document(0)
    assert plain == "- product: red kettle\n- description: an electric kettle in red, boils water fast"
    full = skb.document(0, with_relations=True)
    assert full.startswith(plain)
    assert "- brand: Acme" in full and "- similar to: blue kettle" in full
    assert "- makes: green teapot, steel pan, copper pot" in skb.document(6, with_relations=True)
    assert list(skb.documents()) == [skb.document(i) for i in range(5)]  # candidates only


def test_neighbour_lists_in_documents_are_capped() -> None:
    skb = plain_skb()
    skb.max_neighbors_in_doc = 2
    assert "- makes: green teapot, steel pan (and 1 more)" in skb.document(6, with_relations=True)


def test_counts_and_candidates() -> None:
    counts = plain_skb().counts()
    assert counts["nodes"] == 7 and counts["edges"] == 6 and counts["candidates"] == 5
    assert counts["nodes_by_type"] == {"product": 5, "brand": 2}
    assert counts["edges_by_type"] == {"made_by": 5, "similar": 1}
    assert plain_skb().is_candidate(np.array([0, 5, 99, -1])).tolist() == [True, False, False, False]


def _graph_skb(undirected: bool) -> SKB:
    """Unicode text, a node without fields, list and empty values, a multi-edge (one pair
    joined twice by one relation and once by another), a neighbour cap, a fingerprint of its own
    and, when ``undirected``, edge arrays that hold both directions of every edge."""
    pairs = [(0, 1, 0), (0, 1, 0), (0, 1, 1), (1, 2, 0), (3, 0, 1), (2, 3, 0)]
    if undirected:
        pairs += [(b, a, t) for a, b, t in pairs]
    src, dst, edge_type = (np.array(column) for column in zip(*pairs, strict=True))
    return SKB(
        name="ünïcode-graph",
        description="Straße, 東京, emoji 🚀",
        node_type_names=["page", "tag", "extra"],
        node_types=np.array([0, 0, 1, 0]),
        names=["Zürich", "東京", "naïve tag", "🚀 launch"],
        fields=[
            {"text": "Grüße aus Zürich", "aliases": ["Zurich", "Züri"], "empty": "", "none": None},
            {"text": "首都", "ratio": 0.5},
            {},
            {"text": "line one\nline two: “quoted”"},
        ],
        edge_types=[EdgeType("links", "links to", "linked from"), EdgeType("related", "related to")],
        src=src,
        dst=dst,
        edge_type=edge_type,
        candidate_types=["page"],
        fingerprint="given-by-loader",
        max_neighbors_in_doc=1,
        undirected=undirected,
    )


def _as_built(skb: SKB) -> SKB:
    """The same SKB with the fingerprint computed from its content (none given)."""
    return SKB(**{**_arguments(skb), "fingerprint": None})


def _arguments(skb: SKB) -> dict[str, Any]:
    """What ``skb`` would be constructed with: every constructor argument, read back."""
    names = [p for p in inspect.signature(SKB.__init__).parameters if p != "self"]
    return {name: getattr(skb, name) for name in names}


@pytest.mark.parametrize(
    "make",
    [plain_skb, lambda: _graph_skb(False), lambda: _graph_skb(True), lambda: _as_built(_graph_skb(True))],
    ids=["plain", "directed", "undirected", "computed-fingerprint"],
)
def test_save_load_round_trip(tmp_path: Path, make: Callable[[], SKB], own_cache: Path) -> None:
    """The loaded SKB is the one saved: every constructor argument, documents in every
    variant, the graph, the candidates and the fingerprint."""
    original = make()
    original.save(tmp_path / "skb")
    # parsed from the files; loaded (parsed, then compiled into the cache); loaded again (mapped)
    for loaded in (SKB.parse(tmp_path / "skb"), SKB.load(tmp_path / "skb"), SKB.load(tmp_path / "skb")):
        _assert_same_skb(loaded, original)
    assert len(_compiled(own_cache)) == 1  # one compiled copy
    assert not list(tmp_path.glob(".*tmp"))  # no temporary directory left behind


@pytest.fixture
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A cache of this test's own (the session's is shared), to count compiled copies in."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "skb"


def _compiled(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if not p.name.startswith(".")]


def _edges(skb: SKB) -> list[tuple[int, int, int]]:
    return sorted(zip(skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist(), strict=True))


def _assert_same_skb(loaded: SKB, original: SKB) -> None:
    got = _arguments(loaded)
    for name, value in _arguments(original).items():
        if name in ("src", "dst", "edge_type", "indptr"):
            continue  # the compiled copy orders edges by source (its indptr's layout): compared as a multiset
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        else:  # names and fields may be lazy sequences
            assert list(got[name]) == list(value) if name in ("names", "fields") else got[name] == value, name
    assert _edges(loaded) == _edges(original)
    np.testing.assert_array_equal(loaded.candidate_ids, original.candidate_ids)
    for node in range(original.num_nodes):
        for with_relations in (False, True):
            for compact in (False, True):
                assert loaded.document(node, with_relations, compact) == original.document(
                    node, with_relations, compact
                ), (node, with_relations, compact)
        for relation in (None, *(e.name for e in original.edge_types)):
            for direction in ("out", "in", "both"):
                assert loaded.neighbors(node, relation, direction).tolist() == (
                    original.neighbors(node, relation, direction).tolist()
                )
    assert loaded.counts() == original.counts()


def test_undirected_documents_list_each_neighbour_once(tmp_path: Path) -> None:
    """The reason ``undirected`` must survive a save: read as directed, the reversed copy of
    every edge would add "linked from" lines to the documents."""
    _graph_skb(True).save(tmp_path / "skb")
    document = SKB.load(tmp_path / "skb").document(1, with_relations=True)
    assert "- links to: Zürich" in document and "linked from" not in document


def test_a_file_from_before_undirected_was_recorded_is_refused(tmp_path: Path) -> None:
    """Version 1 files do not say whether their edges are undirected: loading one as directed
    could give other documents, so it is refused with what to do."""
    _graph_skb(True).save(tmp_path / "skb")
    meta_path = tmp_path / "skb" / "skb.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    del meta["undirected"]
    meta_path.write_text(json.dumps({**meta, "format": "harness-skb/1"}), encoding="utf-8")
    with pytest.raises(HarnessError, match=r'harness-skb/1 does not say .*add "undirected"'):
        SKB.load(tmp_path / "skb")
    meta_path.write_text(json.dumps({**meta, "format": "harness-skb/2"}), encoding="utf-8")
    with pytest.raises(HarnessError, match="lacks undirected"):
        SKB.load(tmp_path / "skb")


def test_an_skb_whose_class_builds_its_documents_is_not_saved(tmp_path: Path) -> None:
    class Shouting(SKB):
        def document(self, node: int, with_relations: bool = False, compact: bool = False) -> str:
            return super().document(node, with_relations, compact).upper()

    skb = plain_skb()
    shouting = Shouting(**_arguments(skb))
    with pytest.raises(HarnessError, match="builds its own documents"):
        shouting.save(tmp_path / "skb")
    assert not (tmp_path / "skb").exists()


def test_fingerprint_changes_with_content() -> None:
    a, b = plain_skb(), plain_skb()
    assert a.fingerprint == b.fingerprint
    b.fields[0]["description"] = "changed"
    b._fingerprint = None
    assert a.fingerprint != b.fingerprint


def test_corrupt_or_incomplete_files_give_one_clear_error(tmp_path: Path) -> None:
    plain_skb().save(tmp_path / "skb")
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


def test_edges_given_with_their_row_offsets_are_used_in_place() -> None:
    """``indptr`` with edges ordered by (source, relation): the same neighbours and documents as
    the SKB that sorts them itself; offsets that do not fit the edges are refused."""
    from harness import row_offsets, sort_edges

    for undirected in (False, True):
        plain = _graph_skb(undirected)
        src, dst, edge_type = sort_edges(plain.src, plain.dst, plain.edge_type)
        arguments = {**_arguments(plain), "src": src, "dst": dst, "edge_type": edge_type}
        given = SKB(**{**arguments, "indptr": row_offsets(src, plain.num_nodes)})
        _assert_same_skb(given, plain)
        bad = {
            "wrong length": row_offsets(src, plain.num_nodes)[:-1],
            "wrong counts": np.linspace(0, len(src), plain.num_nodes + 1).astype(np.int64),
        }
        for indptr in bad.values():
            with pytest.raises(HarnessError, match="indptr"):
                SKB(**{**arguments, "indptr": indptr})
        shuffled = {**arguments, "edge_type": edge_type[::-1].copy()}  # same counts per source, relations out of order
        with pytest.raises(HarnessError, match=r"not ordered by \(source, relation\)"):
            SKB(**{**shuffled, "indptr": row_offsets(src, plain.num_nodes)})


def test_a_damaged_compiled_copy_is_rebuilt_with_a_warning(
    tmp_path: Path, own_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _graph_skb(False)
    original.save(tmp_path / "skb")
    SKB.load(tmp_path / "skb")
    (entry,) = _compiled(own_cache)
    with (entry / "fields.bin").open("r+b") as handle:  # same size, other bytes
        handle.seek(3)
        handle.write(b"\xff\xff")
    _assert_same_skb(SKB.load(tmp_path / "skb"), original)
    warning = capsys.readouterr().err
    assert "is damaged (fields.bin does not match its digest)" in warning and str(entry) in warning
    _assert_same_skb(SKB.load(tmp_path / "skb"), original)  # the rebuilt copy is sound
    assert "damaged" not in capsys.readouterr().err


def test_the_compiled_copy_follows_the_files(tmp_path: Path, own_cache: Path) -> None:
    """An edited SKB directory is compiled anew, never read from the old copy."""
    first = _graph_skb(False)
    first.save(tmp_path / "skb")
    SKB.load(tmp_path / "skb")
    second = SKB(**{**_arguments(first), "names": ["a", "b", "c", "d"], "fingerprint": "edited"})
    shutil.rmtree(tmp_path / "skb")
    second.save(tmp_path / "skb")
    assert list(SKB.load(tmp_path / "skb").names) == ["a", "b", "c", "d"]
    assert len(_compiled(own_cache)) == 2


def test_without_a_usable_cache_the_skb_is_read_uncached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _graph_skb(False)
    original.save(tmp_path / "skb")
    (tmp_path / "not-a-directory").write_text("")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "not-a-directory"))
    _assert_same_skb(SKB.load(tmp_path / "skb"), original)
    assert "reading" in capsys.readouterr().err


def test_a_fast_save_holds_what_a_small_save_holds(tmp_path: Path) -> None:
    """``save(fast=True)`` (large imports) compresses for speed: the same files, the same
    content, byte for byte once decompressed, and the same SKB loaded back."""
    import lzma

    from harness.testing import tiny_skb

    skb = tiny_skb()
    skb.save(tmp_path / "small")
    skb.save(tmp_path / "fast", fast=True)
    small, fast = tmp_path / "small", tmp_path / "fast"
    assert (fast / "skb.json").read_bytes() == (small / "skb.json").read_bytes()
    assert lzma.decompress((fast / "nodes.jsonl.xz").read_bytes()) == lzma.decompress(
        (small / "nodes.jsonl.xz").read_bytes()
    )
    with np.load(fast / "edges.npz") as ours, np.load(small / "edges.npz") as theirs:
        assert sorted(ours.files) == sorted(theirs.files)
        for key in theirs.files:
            assert ours[key].dtype == theirs[key].dtype and np.array_equal(ours[key], theirs[key]), key
    loaded = SKB.load(fast)
    assert loaded.fingerprint == skb.fingerprint == json.loads((fast / "skb.json").read_text())["fingerprint"]
    assert [loaded.document(n) for n in range(loaded.num_nodes)] == [skb.document(n) for n in range(skb.num_nodes)]
