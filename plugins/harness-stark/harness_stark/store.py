"""A compact on-disk copy of ``node_info.pkl``, read one node at a time.

The official ``node_info.pkl`` is one pickled dict of every node's attributes; for
STaRK-Amazon that is ~600M tokens of text, which as Python objects takes several times its
size on disk. The first load converts it, streaming, into ``blobs.bin`` (one pickle per
node, concatenated) and ``offsets.npy``; later loads open those, and a node's attributes
are read and unpickled only when its document is built.

A file under :data:`WHOLE_BELOW` is read whole by the C unpickler instead. Larger ones are
read with a streaming unpickler that hands over each top-level
entry as soon as it is complete and later forgets what it built (keeping dict keys and
anything a later entry read back), so memory stays bounded by a window of entries. Should a file
share other objects between entries, the streaming reader cannot resolve them and falls
back to a plain ``pickle.load`` (correct, only heavier).
"""

from __future__ import annotations

import collections
import os
import pickle
import struct
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np

from harness import HarnessError, atomic_dir, entry_lock, verified_entry, write_manifest

_WINDOW = 1000  # entries whose objects stay memoized, so that sharing between them is seen


class _StreamingUnpickler(pickle._Unpickler):  # the pure-Python reader exposes its opcodes
    """Unpickles a top-level dict, passing each (key, value) to ``sink`` instead of keeping it."""

    # the pure-Python reader's own state and helpers, which typeshed leaves out
    stack: list[Any]
    metastack: list[list[Any]]
    memo: dict[int, Any]
    append: Callable[[Any], None]
    read: Callable[[int], bytes]
    readline: Callable[[], bytes]
    pop_mark: Callable[[], list[Any]]

    def __init__(self, handle: BinaryIO, sink: Callable[[Any, Any], None]) -> None:
        super().__init__(handle)
        self.sink = sink
        self.top: dict | None = None
        self.mark_memo = 0
        self.memo_count = 0  # MEMOIZE numbers objects by count; the memo itself shrinks
        self.keys: set[int] = set()  # ids of objects used as dict keys: those are shared
        self.fetched: set[int] = set()  # memo indices read back at least once: shared too
        self.pending: collections.deque[tuple[int, int]] = collections.deque()

    def load_empty_dictionary(self) -> None:
        value: dict = {}
        if self.top is None and not self.stack and not self.metastack:
            self.top = value
        self.append(value)

    def _take(self, key: Any, value: Any) -> None:
        self.sink(key, value)
        # Forget what entries built once they are old, except what later entries read back
        # (dict keys, shared constants): keeping the last _WINDOW entries lets sharing show.
        self.pending.append((self.mark_memo, self.memo_count))
        self.mark_memo = self.memo_count
        while len(self.pending) > _WINDOW:
            start, end = self.pending.popleft()
            for index in range(start, end):
                if index in self.memo and index not in self.fetched and id(self.memo[index]) not in self.keys:
                    del self.memo[index]

    def _fetch(self, index: int) -> None:
        self.fetched.add(index)
        try:
            self.append(self.memo[index])
        except KeyError:
            raise pickle.UnpicklingError(f"Memo value not found at index {index}") from None

    def load_get(self) -> None:
        self._fetch(int(self.readline()[:-1]))

    def load_binget(self) -> None:
        self._fetch(self.read(1)[0])

    def load_long_binget(self) -> None:
        self._fetch(struct.unpack("<I", self.read(4))[0])

    def load_memoize(self) -> None:
        self.memo[self.memo_count] = self.stack[-1]
        self.memo_count += 1

    def load_setitems(self) -> None:
        items = self.pop_mark()
        target = self.stack[-1]
        for i in range(0, len(items), 2):
            if target is self.top:
                self._take(items[i], items[i + 1])
            else:
                self.keys.add(id(items[i]))
                target[items[i]] = items[i + 1]

    def load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        if self.stack[-1] is self.top:
            self._take(key, value)
        else:
            self.keys.add(id(key))
            self.stack[-1][key] = value

    dispatch: ClassVar[dict[int, Callable[..., None]]] = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.EMPTY_DICT[0]] = load_empty_dictionary
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.MEMOIZE[0]] = load_memoize
    dispatch[pickle.GET[0]] = load_get
    dispatch[pickle.BINGET[0]] = load_binget
    dispatch[pickle.LONG_BINGET[0]] = load_long_binget


def _read_entries(path: Path, sink: Callable[[Any, Any], None]) -> None:
    """Hand every (key, value) of a pickled dict to ``sink``, streamed when possible."""
    try:
        with path.open("rb") as handle:
            reader = _StreamingUnpickler(handle, sink)
            reader.load()
            if reader.top is None:
                raise pickle.UnpicklingError("not a pickled dict")
            return
    except (KeyError, pickle.UnpicklingError) as exc:
        if isinstance(exc, pickle.UnpicklingError) and "Memo value not found" not in str(exc):
            raise
        # a shared reference the streaming reader had already forgotten: read the file whole
    raise _Restart


class _Restart(Exception):
    pass


class NodeStore(Mapping[int, Any]):
    """Node id → attribute dict, read from the blob file on demand.

    Reads go through ``os.pread`` rather than a memory map: the operating system still
    caches the file, but the pages do not count as this process's memory.
    """

    def __init__(self, directory: Path) -> None:
        self.offsets = np.load(directory / "offsets.npy")
        self._fd = os.open(directory / "blobs.bin", os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)  # closed with the object, or at exit
        #: the nodes as objects, when the process that converted the file still holds them
        self.objects: Mapping[int, Any] | None = None

    def __getitem__(self, node: int) -> Any:
        if not 0 <= node < len(self.offsets) - 1:
            raise KeyError(node)
        if self.objects is not None:
            return self.objects[node]
        start, end = int(self.offsets[node]), int(self.offsets[node + 1])
        return pickle.loads(os.pread(self._fd, end - start, start))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self)))


#: Below this size ``node_info.pkl`` is read whole by the C unpickler (several times faster than
#: streaming; STaRK-Prime's 150 MB take ~1 GB as objects), and the process that converted it
#: keeps the objects. Larger files (STaRK-Amazon) are streamed, in bounded memory.
WHOLE_BELOW = 256 << 20


def build_store(source: Path, directory: Path) -> NodeStore:
    """Convert ``node_info.pkl`` into a :class:`NodeStore` at ``directory`` (atomically, with a
    manifest of digests checked on every later open; one process converts, another waits)."""
    with entry_lock(directory, "converting node_info.pkl"):
        if verified_entry(directory):  # a damaged copy is deleted, with a warning, and converted again
            return NodeStore(directory)
        return _convert(source, directory)


def _convert(source: Path, directory: Path) -> NodeStore:
    whole: Mapping[Any, Any] | None = None
    try:
        with atomic_dir(directory) as tmp:
            if source.stat().st_size < WHOLE_BELOW:
                whole = _load_whole(source)
                positions = _write_blobs(tmp / "blobs.bin", lambda sink: _feed(whole, sink))
            else:
                try:
                    positions = _write_blobs(tmp / "blobs.bin", lambda sink: _read_entries(source, sink))
                except _Restart:
                    positions = _write_blobs(tmp / "blobs.bin", lambda sink: _whole(source, sink))
            _write_offsets(tmp, positions, source)
            write_manifest(tmp)
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError) as exc:
        raise HarnessError(f"cannot read {source}: {exc}") from exc
    store = NodeStore(directory)
    if whole is not None and all(type(key) is int for key in whole):
        store.objects = whole  # already in memory: this process reads them, not the file
    return store


def _load_whole(source: Path) -> Mapping[Any, Any]:
    with source.open("rb") as handle:
        whole = pickle.load(handle)
    if not isinstance(whole, Mapping):
        raise HarnessError(f"{source}: expected a pickled dict of node attributes")
    return whole


def _feed(whole: Mapping[Any, Any], sink: Callable[[Any, Any], None]) -> None:
    for key, value in whole.items():
        sink(key, value)


def _whole(source: Path, sink: Callable[[Any, Any], None]) -> None:
    """The fallback of streaming: the whole file read at once."""
    _feed(_load_whole(source), sink)


def _write_blobs(path: Path, feed: Callable[[Callable[[Any, Any], None]], None]) -> dict[int, tuple[int, int]]:
    positions: dict[int, tuple[int, int]] = {}
    with path.open("wb") as blobs:

        def sink(key: Any, value: Any) -> None:
            blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            positions[int(key)] = (blobs.tell(), len(blob))
            blobs.write(blob)

        feed(sink)
    return positions


def _write_offsets(directory: Path, positions: dict[int, tuple[int, int]], source: Path) -> None:
    count = len(positions)
    if sorted(positions) != list(range(count)):
        raise HarnessError(f"{source}: node ids are not 0..{count - 1}")
    starts = np.array([positions[i][0] for i in range(count)], dtype=np.int64)
    lengths = np.array([positions[i][1] for i in range(count)], dtype=np.int64)
    if count > 1 and not np.all(np.diff(starts) > 0):  # blobs are in file order; lay them out by id
        _reorder(directory / "blobs.bin", starts, lengths)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    end = int(starts[-1] + lengths[-1]) if count else 0
    np.save(directory / "offsets.npy", np.concatenate([starts, [end]]).astype(np.int64))


def _reorder(path: Path, starts: np.ndarray, lengths: np.ndarray) -> None:
    ordered = path.with_suffix(".ordered")
    with path.open("rb") as source, ordered.open("wb") as target:
        for start, length in zip(starts, lengths, strict=True):
            source.seek(int(start))
            target.write(source.read(int(length)))
    ordered.replace(path)
