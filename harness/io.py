"""Small file helpers shared by the runner, the leaderboard and plugins' caches.

Every write in the harness goes through :func:`atomic_write` so that an interrupted
process never leaves a half-written file behind: readers see the old file or the new one.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def exclusive(path: str | os.PathLike[str], waiting: str = "") -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (``filelock``: also on Windows); print
    ``waiting`` when another process holds it."""
    import sys

    from filelock import FileLock, Timeout

    lock = FileLock(os.fspath(path))
    try:
        lock.acquire(timeout=0.05)
    except Timeout:
        if waiting:
            print(f"note: {waiting}", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def leaderboard_lock(directory: str | os.PathLike[str]) -> Path:
    """The lock every writer of the leaderboard ``directory`` takes (merge, runs with --leaderboard)."""
    directory = Path(directory)
    return directory.with_name(f".{directory.name}.lock")


def temp_prefix(target: Path) -> str:
    """The name prefix of temporary siblings of ``target``: ``.NAME.PID.`` — the process id
    lets a later run tell a leftover of a killed process from another process's work."""
    return f".{target.name}.{os.getpid()}."


def clean_stale(target: Path) -> None:
    """Delete temporary siblings of ``target`` (files or directories) left by processes that
    no longer run — a ``kill -9`` skips every cleanup."""
    try:
        siblings = list(target.parent.glob(f".{glob_escape(target.name)}.*"))
    except OSError:
        return
    for sibling in siblings:
        pid = sibling.name[len(target.name) + 2 :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        if sibling.is_dir() and not sibling.is_symlink():
            _rmtree(sibling)
        else:
            with contextlib.suppress(OSError):
                sibling.unlink()


def glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists but is not ours
    return True


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; keep the usual mode
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a directory under a temporary name; move it into place only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(target)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp"))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
    try:
        yield tmp
        if target.exists():
            # Another process finished first; keep theirs (contents are keyed, so equal).
            _rmtree(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        _rmtree(tmp)
        raise


def replace_dir(staged: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Put the directory ``staged`` in the place of ``target`` in one step.

    On Linux both are swapped atomically (``renameat2`` with ``RENAME_EXCHANGE``), so a reader
    sees the whole old directory or the whole new one; elsewhere the old one is moved aside
    first. The old contents are deleted afterwards. ``staged`` must be on the same file system.
    """
    staged, target = Path(staged), Path(target)
    if not target.exists():
        os.replace(staged, target)
        return
    if not _exchange(staged, target):
        aside = target.with_name(f".{target.name}.old")
        _rmtree(aside)
        os.replace(target, aside)
        os.replace(staged, target)
        staged = aside
    _rmtree(staged)  # now holds the old contents


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's renameat2; False where that is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as indented JSON, atomically."""
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=2, sort_keys=False, ensure_ascii=False)
        handle.write("\n")


def stable_hash(data: Any, length: int = 16) -> str:
    """A short SHA-256 of ``data`` serialised as canonical JSON (sorted keys)."""
    payload = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def cache_root() -> Path:
    """Where plugins keep caches: ``$HARNESS_CACHE`` or ``~/.cache/stark-harness``."""
    env = os.environ.get("HARNESS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stark-harness"


# -- content-keyed, digest-verified cache entries ----------------------------------------

#: The file a verified cache directory lists its files' digests in; written last.
MANIFEST = "manifest.sha256.json"

_DIGESTS: dict[tuple[Any, ...], str] = {}


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, memoized by the file's state (path, size, mtime_ns,
    ctime_ns, inode) in this process and under ``cache_root()/digests``: model weights are read
    once per change, not on every run."""
    path = Path(path).resolve()
    before = path.stat()
    state = [str(path), before.st_size, before.st_mtime_ns, before.st_ctime_ns, before.st_ino]
    key = tuple(state)
    if key in _DIGESTS:
        return _DIGESTS[key]
    memo = cache_root() / "digests" / f"{hashlib.sha256(str(path).encode()).hexdigest()[:32]}.json"
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        saved = json.loads(memo.read_text(encoding="utf-8"))
        if saved["state"] == state and saved["check"] == stable_hash([state, saved["sha256"]], 64):
            _DIGESTS[key] = saved["sha256"]
            return _DIGESTS[key]
    digest = sha256_file(path)
    after = path.stat()
    if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) == tuple(state[1:4]):  # unchanged while read
        _DIGESTS[key] = digest
        with contextlib.suppress(OSError):
            write_json(memo, {"state": state, "sha256": digest, "check": stable_hash([state, digest], 64)})
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
        files[relative] = {"size": file.stat().st_size, "sha256": sha256_file(file)}
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
        if sha256_file(file) != digest:
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
    import sys

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
