"""Structure shared by graph-aware retrievers (harness.graph) and per-query diagnostics
(``Ranking.details``) through the runner."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import harness
from harness import SKB, EdgeType, EntityLinker, HarnessError, Hop, Query, Ranking, RelationPath, reach
from harness.testing import run_retriever, tiny_skb


def test_linker_finds_longest_mentions_first_without_overlap() -> None:
    skb = tiny_skb()
    linker = EntityLinker(skb.names)
    found = linker.mentions("Is the RED kettle by acme better than one from Glöbex?")
    assert found == [("red kettle", [0]), ("acme", [5]), ("glöbex", [6])]
    assert linker.link("a red kettle or a blue kettle", 1).tolist() == [0]
    assert linker.link("nothing here", 5).tolist() == []
    # an entity said twice is one mention: pairing it with itself would be a pair of nothing
    assert linker.mentions("acme kettles, or any acme product by Acme") == [("acme", [5])]


def test_linker_can_keep_some_types_only() -> None:
    skb = tiny_skb()
    brands = EntityLinker(skb.names, types=skb.node_types, keep_types=[skb.node_type_names.index("brand")])
    assert brands.link("red kettle by Acme", 5).tolist() == [5]


def test_paths_parse_print_and_check_against_the_schema() -> None:
    skb = tiny_skb()
    spec = "brand <-made_by- product -similar-> product"
    path = RelationPath.parse(spec)
    assert str(path) == spec and RelationPath.parse(str(path)) == path
    assert path.hops == (Hop("made_by", "in", "product"), Hop("similar", "out", "product"))
    assert path.answer_type == "product"
    path.check(skb)
    with pytest.raises(HarnessError, match="no relation 'sold_by'; relations: made_by, similar"):
        RelationPath.parse("brand <-sold_by- product").check(skb)
    with pytest.raises(HarnessError, match="no node type 'shop'; types: product, brand"):
        RelationPath.parse("shop <-made_by- product").check(skb)
    with pytest.raises(HarnessError, match="cannot read"):
        RelationPath.parse("brand made_by product")
    with pytest.raises(HarnessError, match="has no relation"):
        RelationPath.parse("brand")


def _random_skb(seed: int) -> SKB:
    """A directed multigraph with two node types, two directed relations and a symmetric one,
    self-loops and repeated edges."""
    rng = np.random.default_rng(seed)
    n, e = 60, 400
    src, dst, kind = rng.integers(0, n, e), rng.integers(0, n, e), rng.integers(0, 3, e)
    return SKB(
        name=f"random-{seed}",
        node_type_names=["a", "b"],
        node_types=rng.integers(0, 2, n),
        names=[f"node {i}" for i in range(n)],
        fields=[{} for _ in range(n)],
        edge_types=[EdgeType("r0", "to", "from"), EdgeType("r1", "up", "down"), EdgeType("r2")],
        src=src,
        dst=dst,
        edge_type=kind,
    )


def _brute_force(skb: SKB, start: set[int], hops: Sequence[Hop]) -> set[int]:
    """The path's endpoints by scanning every edge at every hop (no CSR, no numpy indexing); a
    symmetric relation is followed both ways."""
    names = [e.name for e in skb.edge_types]
    symmetric = {e.name for e in skb.edge_types if e.inverse_label is None}
    edges = list(zip(skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist(), strict=True))
    frontier = set(start)
    for hop in hops:
        nxt = set()
        for s, d, t in edges:
            if names[t] != hop.relation:
                continue
            both = hop.relation in symmetric
            if (hop.direction == "out" or both) and s in frontier:
                nxt.add(d)
            if (hop.direction == "in" or both) and d in frontier:
                nxt.add(s)
        frontier = {v for v in nxt if skb.node_type_names[skb.node_types[v]] == hop.node_type}
    return frontier


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reach_equals_a_brute_force_traversal(seed: int) -> None:
    skb = _random_skb(seed)
    rng = np.random.default_rng(100 + seed)
    for _ in range(30):
        hops = tuple(
            Hop(f"r{rng.integers(0, 3)}", str(rng.choice(["out", "in"])), str(rng.choice(["a", "b"])))
            for _ in range(int(rng.integers(1, 4)))
        )
        start = {int(x) for x in rng.integers(0, skb.num_nodes, int(rng.integers(1, 3)))}
        got = reach(skb, np.array(sorted(start)), hops)
        assert got is not None and got.tolist() == sorted(_brute_force(skb, start, hops))


def test_reach_stops_at_a_hub() -> None:
    n = 2001  # one hub with 2,000 spokes
    skb = SKB(
        name="star",
        node_type_names=["hub", "spoke"],
        node_types=np.array([0] + [1] * (n - 1)),
        names=[f"n{i}" for i in range(n)],
        fields=[{} for _ in range(n)],
        edge_types=[EdgeType("links")],
        src=np.zeros(n - 1, dtype=np.int64),
        dst=np.arange(1, n),
        edge_type=np.zeros(n - 1, dtype=np.int64),
    )
    hops = (Hop("links", "out", "spoke"),)
    assert reach(skb, 0, hops, limit=100) is None
    reached = reach(skb, 0, hops, limit=5000)
    assert reached is not None and len(reached) == n - 1


# -- per-query diagnostics ------------------------------------------------------------------
class Explained(harness.Retriever):
    """Ranks products by id and explains itself; ``bad`` makes the explanation unwritable."""

    name = "explained"
    bad: ClassVar[Any] = None

    def build(self, skb: SKB, context: harness.BuildContext) -> None:
        self.ids = skb.candidate_ids

    def search(self, queries: Sequence[Query], k: int, top_ranked: Any = None) -> list[Ranking]:
        out = []
        for q in queries:
            details = {"query_words": len(q.text.split()), "linked": [{"id": 5, "name": "Acme"}], "path": None}
            if Explained.bad is not None:
                details = Explained.bad
            out.append(Ranking(self.ids[:k], -np.arange(min(k, len(self.ids)), dtype=float), details))
        return out


def test_details_reach_the_resume_log_and_per_query_file(tmp_path: Path) -> None:
    Explained.bad = None
    outcome = run_retriever(Explained, {}, tmp_path)
    per_query = [json.loads(line) for line in (outcome.run_dir / "per_query.jsonl").read_text().splitlines()]
    logged = [json.loads(line) for line in (outcome.run_dir / "results.jsonl").read_text().splitlines()]
    for line in [*per_query, *logged]:
        assert line["details"]["linked"] == [{"id": 5, "name": "Acme"}] and line["details"]["path"] is None
    # a resumed run (nothing left to search) writes them again from the log
    again = run_retriever(Explained, {}, tmp_path, fresh=False)
    assert (again.run_dir / "per_query.jsonl").read_text() == (outcome.run_dir / "per_query.jsonl").read_text()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["not", "a", "dict"], "must be a dict"),
        ({"score": np.float32(1.0)}, "not JSON values"),
        ({"nan": float("nan")}, "not JSON values"),
        ({"pair": (1, 2)}, "read back the same"),
    ],
)
def test_details_that_cannot_be_written_are_one_clear_error(tmp_path: Path, bad: Any, message: str) -> None:
    Explained.bad = bad
    try:
        with pytest.raises(HarnessError, match=message):
            run_retriever(Explained, {}, tmp_path)
    finally:
        Explained.bad = None


@pytest.mark.parametrize("seed", [0, 1])
def test_the_schema_is_every_typed_edge_and_checks_directions(seed: int) -> None:
    skb = _random_skb(seed)
    schema = harness.Schema.of(skb)
    kinds, names = skb.node_type_names, [e.name for e in skb.edge_types]
    edges = zip(skb.src.tolist(), skb.dst.tolist(), skb.edge_type.tolist(), strict=True)
    expected = {(kinds[skb.node_types[s]], names[t], kinds[skb.node_types[d]]) for s, d, t in edges}
    assert set(schema.triples) == expected and len(schema.triples) == len(expected)
    for index, (source, relation, target) in zip(schema.examples, schema.triples, strict=True):
        assert (kinds[skb.node_types[skb.src[index]]], names[skb.edge_type[index]]) == (source, relation)
        assert kinds[skb.node_types[skb.dst[index]]] == target
    # a hop the schema allows leads somewhere from some node; one it refuses leads nowhere
    for node_type in kinds:
        allowed = set(schema.steps(node_type))
        for relation in names:
            for direction in ("out", "in"):
                for target in kinds:
                    hop = Hop(relation, direction, target)
                    starts = skb.nodes_of_type(node_type)
                    leads = bool(_brute_force(skb, set(starts.tolist()), (hop,)))
                    assert (hop in allowed) == leads, (node_type, hop)
                    path = RelationPath(node_type, (hop,))
                    if leads:
                        schema.check(path)
                    else:
                        with pytest.raises(HarnessError, match="no edge leads"):
                            schema.check(path)


def test_names_normalise_as_the_linker_matches_them() -> None:
    assert harness.normalize_name("  The  RED-Kettle (Glöbex)! ") == "the red kettle glöbex"
    assert harness.normalize_name("ﬁle") == "file"  # NFKC
