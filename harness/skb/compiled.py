"""Compiled copies of SKBs saved in the harness format, so that a warm load maps, not parses.

:meth:`harness.SKB.load` parses ``nodes.jsonl.xz`` and ``edges.npz`` once, then writes the
SKB here under the digest of those files: edges ordered by (source, relation) with their row
offsets (memory-mapped on load: the graph needs no sort), node types, names, and each node's
fields pickled one after another with their offsets (read when a document needs them). The
entry carries a manifest of digests written last and is checked before use; a damaged one is
rebuilt with a warning.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import numpy as np

from harness.caches import discard_entry, entry_lock, file_digest, verified_entry, write_manifest
from harness.errors import HarnessError
from harness.io import atomic_dir, cache_root, stable_hash
from harness.skb.arrays import TRUSTED_LAYOUT, EdgeType, row_offsets, sort_edges

#: Part of the cache key: bump it whenever what is compiled, or how, changes.
LAYOUT = "harness-skb-compiled/1"
_ARRAYS = ("node_types", "src", "dst", "edge_type", "indptr")


class _Parses(Protocol):
    """An SKB class (harness.skb.base imports this module): ``parse`` reads its files uncached."""

    @classmethod
    def parse(cls, directory: str | Path) -> Self: ...


S = TypeVar("S", bound=_Parses)


class Records(Sequence[Any]):
    """Python objects pickled one after another in ``<name>.bin``, with their byte offsets in
    ``<name>.offsets.npy``; each is read (``os.pread``) and unpickled when asked for, so the
    file's pages stay in the operating system's cache, not in this process's memory."""

    def __init__(self, directory: str | os.PathLike[str], name: str) -> None:
        directory = Path(directory)
        self.offsets = np.load(directory / f"{name}.offsets.npy")
        self._fd = os.open(directory / f"{name}.bin", os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)  # closed with the object, or at exit
        size = os.fstat(self._fd).st_size
        if self.offsets.ndim != 1 or not len(self.offsets) or int(self.offsets[-1]) != size:
            raise HarnessError(f"{directory / name}.bin: {size} bytes, its offsets end at {self.offsets[-1:]}")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = int(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return pickle.loads(os.pread(self._fd, end - start, start))

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))


def write_records(directory: str | os.PathLike[str], name: str, rows: Iterable[Any]) -> int:
    """Write ``rows`` as :class:`Records` ``name`` in ``directory``; returns how many."""
    directory = Path(directory)
    offsets = [0]
    with (directory / f"{name}.bin").open("wb") as out:
        for row in rows:
            offsets.append(offsets[-1] + out.write(pickle.dumps(row, protocol=pickle.HIGHEST_PROTOCOL)))
    np.save(directory / f"{name}.offsets.npy", np.asarray(offsets, dtype=np.int64))
    return len(offsets) - 1


def load_compiled(cls: type[S], directory: Path) -> S:
    """``cls.parse(directory)`` through the cache: the compiled copy when there is a sound one,
    else parse and compile (one process compiles; another waits, then maps it). Without a
    usable cache directory the SKB is parsed, with a warning."""
    files = sorted(p for p in directory.iterdir() if p.is_file()) if directory.is_dir() else []
    if not files:
        return cls.parse(directory)  # its error names what is missing
    key = _key(cls, files)
    entry = cache_root() / "skb" / key
    try:
        lock = entry_lock(entry, "compiling the SKB")
        lock.__enter__()
    except OSError as exc:
        print(f"warning: cannot use the cache at {entry.parent} ({exc}); reading {directory} uncached", file=sys.stderr)
        return cls.parse(directory)
    try:
        if verified_entry(entry):
            try:
                return _open(cls, entry)
            except (HarnessError, OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as exc:
                discard_entry(entry, f"cannot be opened: {exc}")
        skb = cls.parse(directory)
        if _key(cls, files) != key:  # the files changed while being read: keep nothing of them
            return skb
        try:
            _compile(skb, entry)
        except OSError as exc:  # a full disk, a read-only cache: the parsed SKB is as good
            print(f"warning: cannot write the compiled SKB at {entry} ({exc}); using it uncached", file=sys.stderr)
            return skb
        return _open(cls, entry)
    finally:
        lock.__exit__(None, None, None)


def _key(cls: type, files: list[Path]) -> str:
    return stable_hash([LAYOUT, f"{cls.__module__}.{cls.__qualname__}", [[p.name, file_digest(p)] for p in files]], 32)


def _compile(skb: Any, entry: Path) -> None:

    with atomic_dir(entry) as tmp:
        src, dst, edge_type = sort_edges(skb.src, skb.dst, skb.edge_type)
        arrays = {"node_types": skb.node_types, "src": src, "dst": dst, "edge_type": edge_type.astype(np.int32)}
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", array)
        np.save(tmp / "indptr.npy", row_offsets(src, skb.num_nodes))
        with (tmp / "names.pkl").open("wb") as out:
            pickle.dump(list(skb.names), out, protocol=pickle.HIGHEST_PROTOCOL)
        write_records(tmp, "fields", (dict(skb.fields[i]) for i in range(skb.num_nodes)))
        (tmp / "skb.json").write_text(json.dumps(_meta(skb), ensure_ascii=False), encoding="utf-8")
        write_manifest(tmp)


def _meta(skb: Any) -> dict[str, Any]:
    return {
        "layout": LAYOUT,
        "name": skb.name,
        "description": skb.description,
        "node_types": skb.node_type_names,
        "edge_types": [vars(e) for e in skb.edge_types],
        "candidate_types": skb.candidate_types,
        "max_neighbors_in_doc": skb.max_neighbors_in_doc,
        "undirected": skb.undirected,
        "fingerprint": skb.fingerprint,
    }


def _open(cls: type[S], entry: Path) -> S:
    meta = json.loads((entry / "skb.json").read_text(encoding="utf-8"))
    if meta.get("layout") != LAYOUT:
        raise HarnessError(f"layout {meta.get('layout')!r}, expected {LAYOUT!r}")
    arrays = {name: np.load(entry / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
    with (entry / "names.pkl").open("rb") as handle:
        names = pickle.load(handle)
    trusted = TRUSTED_LAYOUT.set(True)
    try:
        return _construct(cls, entry, meta, arrays, names)
    finally:
        TRUSTED_LAYOUT.reset(trusted)


def _construct(cls: type[S], entry: Path, meta: dict[str, Any], arrays: dict[str, Any], names: Any) -> S:
    return cls(  # type: ignore[call-arg]
        name=meta["name"],
        description=meta["description"],
        node_type_names=meta["node_types"],
        node_types=arrays["node_types"],
        names=names,
        fields=Records(entry, "fields"),
        edge_types=[EdgeType(**e) for e in meta["edge_types"]],
        src=arrays["src"],
        dst=arrays["dst"],
        edge_type=arrays["edge_type"],
        candidate_types=meta["candidate_types"],
        fingerprint=meta["fingerprint"],
        max_neighbors_in_doc=meta["max_neighbors_in_doc"],
        undirected=meta["undirected"],
        indptr=arrays["indptr"],
    )
