"""Caches keyed by content and verified on load: digests of model files and directories,
manifests of SHA-256 digests written last, one process per cache entry, and what decides an
SKB's documents (the part of a cache key a retriever that indexes documents needs).

A cache entry is a directory: build it inside ``harness.atomic_dir``, call ``write_manifest``
last; before loading, ``verified_entry`` checks every file against the manifest (a damaged
entry is removed with a warning naming it, and rebuilt); ``entry_lock`` makes a second process
wait for the first's build instead of repeating it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.io import _rmtree, cache_root, exclusive, stable_hash, write_json

MANIFEST = "manifest.sha256.json"
#: ``full``: check cache entries against their manifests by reading every byte, not by the
#: digests memoized per file state.
VERIFY_ENV_VAR = "HARNESS_VERIFY_CACHES"

_DIGESTS: dict[tuple[Any, ...], str] = {}


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, memoized by the file's state (device, inode, size,
    mtime_ns, ctime_ns) in this process and under ``cache_root()/digests``: model weights are
    read once per change, not on every run. The state names no path, so a cache entry built
    under a temporary name and renamed into place is not read again to be verified."""
    before = Path(path).resolve().stat()
    state = [before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns]
    key = tuple(state)
    if key in _DIGESTS:
        return _DIGESTS[key]
    memo = cache_root() / "digests" / f"{stable_hash(state[:2], 32)}.json"
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        saved = json.loads(memo.read_text(encoding="utf-8"))
        if saved["state"] == state and saved["check"] == stable_hash([state, saved["sha256"]], 64):
            _DIGESTS[key] = saved["sha256"]
            return _DIGESTS[key]
    digest = sha256_file(path)
    after = Path(path).resolve().stat()
    if [after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns] == state:  # unchanged
        _DIGESTS[key] = digest
        with contextlib.suppress(OSError):
            memo_entry = {"state": state, "sha256": digest, "check": stable_hash([state, digest], 64)}
            write_json(memo, memo_entry, durable=False)  # a memo lost in a crash is only recomputed
    return digest


def directory_digest(directory: str | os.PathLike[str], skip: tuple[str, ...] = ("*.md",)) -> str:
    """A digest of every file under ``directory`` (names and bytes, through :func:`file_digest`);
    hidden files and names matching ``skip`` are left out (a model card does not change a model)."""
    root = Path(directory)
    entries = []
    for file in sorted(root.rglob("*")):
        relative = file.relative_to(root)
        if not file.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        if any(fnmatch.fnmatch(file.name, pattern) for pattern in skip) or "__pycache__" in relative.parts:
            continue
        entries.append([relative.as_posix(), file_digest(file)])
    return stable_hash(entries, 64)


def write_manifest(directory: str | os.PathLike[str], ignore: tuple[str, ...] = ()) -> None:
    """List the SHA-256 of every file under ``directory`` (except hidden ones and names matching
    ``ignore``) in its manifest, written last: an entry without a manifest is incomplete."""
    root = Path(directory)
    files = {}
    for file in sorted(root.rglob("*")):
        relative = file.relative_to(root).as_posix()
        if not file.is_file() or relative == MANIFEST or _ignored(relative, ignore):
            continue
        files[relative] = {"size": file.stat().st_size, "sha256": file_digest(file)}
    write_json(root / MANIFEST, {"files": files})


def verify_manifest(directory: str | os.PathLike[str]) -> str | None:
    """None when every file the manifest of ``directory`` lists is there with its digest;
    otherwise what is wrong, in a few words."""
    root = Path(directory)
    try:
        files = json.loads((root / MANIFEST).read_text(encoding="utf-8"))["files"]
        listed = [(name, int(entry["size"]), str(entry["sha256"])) for name, entry in files.items()]
    except FileNotFoundError:
        return "no manifest: incomplete or from an older layout"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"unreadable manifest: {exc}"
    for name, size, digest in listed:
        file = root / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != size:
            return f"{name} has {file.stat().st_size} bytes, its manifest says {size}"
        # Memoized by the file's state (inode, size, mtime, ctime): a warm load re-reads no bytes,
        # and a write to the file, even one that restores its mtime, changes its ctime. Damage
        # that leaves all of these as they were (the medium's) needs HARNESS_VERIFY_CACHES=full.
        actual = sha256_file(file) if os.environ.get(VERIFY_ENV_VAR) == "full" else file_digest(file)
        if actual != digest:
            return f"{name} does not match its digest"
    return None


def _ignored(relative: str, ignore: tuple[str, ...]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return name.startswith(".") or any(fnmatch.fnmatch(name, pattern) for pattern in ignore)


def entry_lock(entry: str | os.PathLike[str], doing: str) -> contextlib.AbstractContextManager[None]:
    """The lock of one cache entry (a file beside it): one process builds it, the others wait
    and then load it. ``doing`` says what the holder does, for the waiting message."""
    entry = Path(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    return exclusive(entry.with_name(f".{entry.name}.lock"), f"waiting for another process {doing} {entry}")


def verified_entry(entry: str | os.PathLike[str]) -> bool:
    """True when the cache directory ``entry`` exists and matches its manifest; a damaged one is
    deleted with a warning naming it (the caller rebuilds it)."""
    entry = Path(entry)
    if not entry.exists():
        return False
    problem = verify_manifest(entry)
    if problem is None:
        return True
    discard_entry(entry, problem)
    return False


def discard_entry(entry: str | os.PathLike[str], problem: str) -> None:
    """Delete a damaged cache entry (a directory or a file), saying which and why on stderr."""
    entry = Path(entry)
    print(f"warning: cache entry {entry} is damaged ({problem}); rebuilding it", file=sys.stderr, flush=True)
    if entry.is_dir() and not entry.is_symlink():
        _rmtree(entry)
    else:
        with contextlib.suppress(OSError):
            entry.unlink()


def documents_identity(skb: Any, with_relations: bool, compact: bool) -> dict[str, Any]:
    """What decides an SKB's documents besides its fingerprint (which covers nodes, names,
    fields and edges): the document variant, the neighbour cap, the relation labels and whether
    edges are read both ways."""
    return {
        "skb": skb.fingerprint,
        "candidates": hashlib.sha256(skb.candidate_ids.tobytes()).hexdigest()[:16],
        "with_relations": with_relations,
        "compact": compact,
        "max_neighbors_in_doc": skb.max_neighbors_in_doc if with_relations else None,
        "edge_types": [vars(e) for e in skb.edge_types] if with_relations else None,
        "undirected": bool(getattr(skb, "undirected", False)) if with_relations else None,
    }
