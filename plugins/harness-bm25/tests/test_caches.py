"""The BM25 index cache: keyed by content, verified on load, one process per entry."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness import BuildContext, Query
from harness.testing import entry_problem, run_concurrently, tiny_skb
from harness_bm25.retriever import BM25Retriever

QUERIES = [Query(1, "copper pot soups", (4,)), Query(2, "kettle", (0, 1)), Query(3, "glass tea", (2,))]


def _ranking(retriever: BM25Retriever) -> list[list[int]]:
    return [r.ids.tolist() for r in retriever.search(QUERIES, 5)]


def _bm25_entry(cache: Path) -> Path:
    return next(p for p in (cache / "bm25").iterdir() if p.is_dir())


@pytest.mark.parametrize("damage", ["garbled", "truncated", "missing"])
def test_damaged_bm25_index_is_rebuilt_with_a_warning(
    damage: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    skb = tiny_skb()
    first = BM25Retriever()
    first.build(skb, BuildContext(cache_dir=tmp_path))
    expected = _ranking(first)
    target = _bm25_entry(tmp_path) / "data.csc.index.npy"
    data = bytearray(target.read_bytes())
    if damage == "garbled":  # mid-file, same size: still a valid .npy, other numbers
        middle = len(data) - 8
        data[middle:] = bytes(b ^ 0x01 for b in data[middle:])
        target.write_bytes(bytes(data))
    elif damage == "truncated":
        target.write_bytes(b"")
    else:
        target.unlink()
    capfd.readouterr()
    for _ in range(2):  # rebuilt once, then loaded: never a permanent failure
        again = BM25Retriever()
        again.build(skb, BuildContext(cache_dir=tmp_path))
        assert _ranking(again) == expected
    warning = capfd.readouterr().err
    assert warning.count("warning: cache entry") == 1 and str(_bm25_entry(tmp_path)) in warning
    assert entry_problem(_bm25_entry(tmp_path)) is None


def test_bm25_key_covers_the_documents() -> None:
    skb, other = tiny_skb(), tiny_skb()
    other.max_neighbors_in_doc = 1  # changes documents with relations only
    assert BM25Retriever().cache_key(skb) == BM25Retriever().cache_key(other)
    assert BM25Retriever(with_relations=True).cache_key(skb) != BM25Retriever(with_relations=True).cache_key(other)


# -- two processes on one cache entry -------------------------------------------------------

_BM25_CHILD = """
import sys, time
from pathlib import Path
import bm25s
from harness import BuildContext, Query
from harness.testing import tiny_skb
from harness_bm25.retriever import BM25Retriever

index = bm25s.BM25.index
def slow_index(self, *args, **kwargs):
    with open({log!r}, "a") as log:
        log.write("built\\n")
    time.sleep(1.0)  # long enough for the other process to reach the cache
    return index(self, *args, **kwargs)
bm25s.BM25.index = slow_index
retriever = BM25Retriever(analyzer="bm25s", stopwords="en")  # no NLTK to import: a quicker child
retriever.build(tiny_skb(), BuildContext(cache_dir=Path({cache!r})))
print(retriever.search([Query(1, "copper pot soups", (4,))], 3)[0].ids.tolist())
"""


def test_two_processes_build_one_bm25_index_once(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    outputs = run_concurrently(textwrap.dedent(_BM25_CHILD).format(log=str(log), cache=str(tmp_path / "c")))
    assert outputs[0] == outputs[1] and outputs[0].strip() == "[4]"
    assert log.read_text().count("built") == 1, "the second process built the index again instead of waiting"
