"""ColBERTv2 through colbert-ai: real indexing and search with a checkpoint built from MiniLM,
the index cache, the official-weights download path (against a local HTTP server), the
parameters, the presets and the retriever contract."""

from __future__ import annotations

import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
import harness_colbert
from harness import SKB, BuildContext, HarnessError, Query, QuerySet
from harness.testing import check_retriever, entry_problem, recorded_params, registry, require, tiny_skb
from harness_colbert.checkpoint import build_minilm_checkpoint, resolve_checkpoint
from harness_colbert.retriever import ColBERTRetriever
from harness_debian.testing import debian_slice

require("colbert", extra="stark-harness-colbert")

SLICE = (40, 300)  # 300 real Debian packages: what colbert-ai's k-means needs, quick to encode
SMALL = {"checkpoint": "minilm-untrained", "doc_maxlen": 48, "query_maxlen": 32}


@pytest.fixture(scope="module")
def slice_skb() -> SKB:
    return debian_slice(*SLICE)


def _retriever() -> ColBERTRetriever:
    return ColBERTRetriever(**SMALL)


@pytest.mark.slow
def test_index_and_search_with_colbert_ai(
    slice_skb: SKB, session_cache: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    retriever = _retriever()
    retriever.build(slice_skb, BuildContext(cache_dir=session_cache))
    # colbert-ai's messages and faiss's k-means report (printed from C) stay off standard
    # output, where they would corrupt `harness run --format json`.
    assert "Clustering" not in capfd.readouterr().out
    # A document's own opening words find it first: MaxSim of identical tokens is maximal, and
    # this only holds when passage ids map back to the right nodes.
    nodes = [3, 77, 150, 220, 299]
    queries = [Query(n, slice_skb.document(n, compact=True)[:80], (n,)) for n in nodes]
    rankings = retriever.search(queries, 10)
    assert [r.ids[0] for r in rankings] == nodes
    for ranking in rankings:
        assert len(ranking.ids) == 10 and len(set(ranking.ids.tolist())) == 10
        assert np.all(np.diff(ranking.scores) <= 1e-6)
    # the index was built under the cache, with colbert-ai's messages in a log beside it
    index = next((session_cache / "colbert" / "indexes").glob("debian-slice-*"))
    assert (index / "complete.json").exists() and "Clustering" in (index / "colbert.log").read_text()


def test_second_build_reuses_the_index(slice_skb: SKB, session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _retriever()
    first.build(slice_skb, BuildContext(cache_dir=session_cache))
    query = [Query(1, "a library for parsing command line options", ())]
    expected = first.search(query, 5)[0].ids.tolist()

    import colbert

    def no_indexing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the ColBERT index was rebuilt instead of reused")

    monkeypatch.setattr(colbert, "Indexer", no_indexing)
    again = _retriever()
    again.build(slice_skb, BuildContext(cache_dir=session_cache))
    assert again.search(query, 5)[0].ids.tolist() == expected


def test_damaged_index_is_rebuilt_with_a_warning(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    skb = debian_slice(*SLICE)  # in a cache of its own: indexed twice here
    first = _retriever()
    first.build(skb, BuildContext(cache_dir=tmp_path))
    query = [Query(1, "a library for parsing command line options", ())]
    expected = first.search(query, 5)[0].ids.tolist()
    index = next((tmp_path / "colbert" / "indexes").glob("debian-slice-*"))
    assert entry_problem(index) is None, "searching (which appends to its logs) kept the index valid"
    target = max((f for f in index.rglob("*") if f.is_file() and f.suffix == ".pt"), key=lambda f: f.stat().st_size)
    data = bytearray(target.read_bytes())  # garbled mid-file, same size
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    target.write_bytes(bytes(data))
    capfd.readouterr()
    again = _retriever()
    again.build(skb, BuildContext(cache_dir=tmp_path))
    assert again.search(query, 5)[0].ids.tolist() == expected
    warning = capfd.readouterr().err
    assert "warning: cache entry" in warning and str(index) in warning
    assert entry_problem(index) is None


def test_too_few_documents_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="too few for colbert-ai's k-means"):
        _retriever().build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    assert not list((tmp_path / "colbert" / "indexes").glob("tiny-*")), "a failed index must not be kept"


@pytest.fixture
def archive_server(tmp_path: Path) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Serves files from a dict over HTTP on 127.0.0.1, as downloads.cs.stanford.edu would."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", files
    server.shutdown()


def test_official_weights_are_downloaded_once(tmp_path: Path, archive_server: tuple[str, dict[str, bytes]]) -> None:
    base, files = archive_server
    checkpoint = build_minilm_checkpoint(tmp_path / "colbertv2.0")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(checkpoint, arcname="colbertv2.0")
    files["/colbertv2.0.tar.gz"] = buffer.getvalue()
    files["/broken.tar.gz"] = buffer.getvalue()[:5000]
    cache = tmp_path / "cache"

    got = resolve_checkpoint("colbertv2.0", cache, f"{base}/colbertv2.0.tar.gz")
    assert (got / "model.safetensors").read_bytes() == (checkpoint / "model.safetensors").read_bytes()
    files.clear()  # the server forgets it: the second call must not download
    assert resolve_checkpoint("colbertv2.0", cache, f"{base}/colbertv2.0.tar.gz") == got

    with pytest.raises(HarnessError, match="cannot download ColBERTv2 weights"):
        resolve_checkpoint("colbertv2.0", cache, f"{base}/missing.tar.gz")
    files["/broken.tar.gz"] = buffer.getvalue()[:5000]
    with pytest.raises(HarnessError, match="damaged"):
        resolve_checkpoint("colbertv2.0", cache, f"{base}/broken.tar.gz")
    leftovers = [p for p in (cache / "colbert" / "checkpoints").iterdir() if p != got.parent]
    assert not leftovers, "failed downloads must leave nothing behind"


def test_bad_checkpoint_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="neither a directory"):
        resolve_checkpoint("colbert-large-please", tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessError, match="not a checkpoint directory"):
        resolve_checkpoint(str(tmp_path / "empty"), tmp_path)


def test_bad_parameters_are_one_error_naming_each() -> None:
    with pytest.raises(HarnessError, match="retriever 'colbertv2': bad parameters") as raised:
        ColBERTRetriever(nbits=3, doc_maxlen=4, colour="red")
    assert all(f"{name}:" in str(raised.value) for name in ("nbits", "doc_maxlen", "colour")), raised.value


@pytest.mark.parametrize("preset", ["colbertv2", "colbert-minilm"])
def test_a_presets_row_records_every_option(preset: str) -> None:
    presets = registry(harness_colbert)
    assert not presets.problems
    recorded = recorded_params(preset, harness_colbert)
    assert set(recorded) == set(ColBERTRetriever.Options.model_fields)
    assert recorded == {**ColBERTRetriever().params, **presets.retrievers[preset].params}
    assert recorded["compact"] is True and recorded["with_relations"] is False  # STaRK's documents


class DebianSlice(harness.Dataset):
    """300 packages (what colbert-ai's k-means needs, quick enough to index twice), with queries
    made of documents' opening words (each finds its document)."""

    name = "debian-slice"

    def load_skb(self) -> SKB:
        return debian_slice(*SLICE)

    def load_queries(self) -> QuerySet:
        skb = self.load_skb()
        queries = [Query(n, skb.document(n, compact=True)[:80], (n,)) for n in (3, 120, 299)]
        return QuerySet(self.name, {"test": queries})


class SlicePlugin:
    @harness.hookimpl
    def register_datasets(self, register: Any) -> None:
        register(DebianSlice)


@pytest.mark.slow
def test_colbert_keeps_the_retriever_contract(tmp_path: Path) -> None:
    rankings = check_retriever(ColBERTRetriever, SMALL, tmp_path, k=5, plugins=[SlicePlugin()], dataset="debian-slice")
    assert [r["ids"][0] for r in rankings] == [r["qid"] for r in rankings]  # as in the test above
