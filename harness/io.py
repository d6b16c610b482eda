"""Small file helpers shared by the runner, the leaderboard and plugins' caches.

Every write in the harness goes through :func:`atomic_write` so that an interrupted
process never leaves a half-written file behind: readers see the old file or the new one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from harness.errors import HarnessError


@contextlib.contextmanager
def exclusive(path: str | os.PathLike[str], waiting: str = "") -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (``filelock``: also on Windows); print
    ``waiting`` when another process holds it."""
    from filelock import FileLock, Timeout  # 20-30 ms: not for `harness --help`, which imports this module

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
def atomic_write(path: str | os.PathLike[str], mode: str = "w", durable: bool = True) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.
    ``durable``: flushed to disk before the rename (what a crash must not lose); without it the
    file is still whole or absent after a crash of this process, only not after a power loss.
    A full disk is one :class:`NoSpaceError` naming ``path``."""
    target = Path(path)
    with _writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(target)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp")
        try:
            with _renamed(Path(tmp), target), os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
                yield handle
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; keep the usual mode
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a directory under a temporary name; move it into place only on success. A full
    disk while it is built is one :class:`NoSpaceError` naming the file in ``path``."""
    target = Path(path)
    with _writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(target)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp"))
        try:
            with _renamed(tmp, target):
                tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
                yield tmp
            if target.exists():
                # Another process finished first; keep theirs (contents are keyed, so equal).
                _rmtree(tmp)
            else:
                os.replace(tmp, target)
        except BaseException:
            _rmtree(tmp)
            raise


# -- a full disk: one error that says so and names the file ------------------------------

#: numpy's ``tofile`` (under ``np.save``) when ``fwrite`` falls short: an OSError without errno
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")
_FULL = {errno.ENOSPC: "no space left on device", getattr(errno, "EDQUOT", -1): "disk quota exceeded"}


class NoSpaceError(HarnessError, OSError):
    """The disk (or the user's quota) filled while writing ``filename``: a :class:`HarnessError`
    (one line from the CLI) that is still an ``OSError`` (a cache that gives up on a full disk
    still catches it)."""

    def __init__(self, message: str, code: int = errno.ENOSPC, filename: str | None = None) -> None:
        super().__init__(message)
        self.errno, self.filename = code, filename

    def __str__(self) -> str:
        return str(self.args[0])  # not OSError's "[Errno N] strerror: filename"


def no_space(exc: BaseException, path: str | os.PathLike[str] | None = None) -> NoSpaceError | None:
    """``exc`` as a :class:`NoSpaceError` when it is a full disk (``ENOSPC``, ``EDQUOT``, numpy's
    short write, or a Rust library's I/O error such as safetensors'), naming ``exc.filename`` or
    else ``path``; None for any other error."""
    if isinstance(exc, NoSpaceError):
        return exc
    if not isinstance(exc, OSError):  # safetensors: "... (os error 28)", not an OSError
        if isinstance(exc, HarnessError) or "No space left on device" not in str(exc):
            return None  # a harness error says what it means already
        exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    short = _SHORT_WRITE.search(str(exc)) if exc.errno is None else None
    code = errno.ENOSPC if short else exc.errno
    if code is None or code not in _FULL:
        return None
    name = exc.filename if isinstance(exc.filename, (str, os.PathLike)) else path
    where = f" while writing {os.fspath(name)}" if name is not None else ""
    detail = f" ({short.group(1)} items requested, {short.group(2)} written)" if short else ""
    return NoSpaceError(f"{_FULL[code]}{where}{detail}", code, None if name is None else os.fspath(name))


@contextlib.contextmanager
def _writing(target: Path) -> Iterator[None]:
    """A full disk while writing ``target`` becomes one :class:`NoSpaceError`."""
    try:
        yield
    except Exception as exc:
        full = no_space(exc, target)
        if full is None or full is exc:
            raise
        raise full from exc


@contextlib.contextmanager
def _renamed(tmp: Path, target: Path) -> Iterator[None]:
    """An OSError naming the temporary ``tmp`` (or a file in it) names ``target`` instead: the
    temporary name means nothing to the user."""
    try:
        yield
    except OSError as exc:
        name = os.fspath(exc.filename) if isinstance(exc.filename, (str, os.PathLike)) else None
        if isinstance(name, str) and (name == str(tmp) or name.startswith(str(tmp) + os.sep)):
            exc.filename = str(target) + name[len(str(tmp)) :]
            if isinstance(exc, NoSpaceError):  # from a write nested in this one: its message names the file too
                exc.args = (str(exc.args[0]).replace(name, exc.filename),)
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
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result: int = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def write_json(path: str | os.PathLike[str], data: Any, durable: bool = True) -> None:
    """Write ``data`` as indented JSON, atomically (see :func:`atomic_write` for ``durable``)."""
    with atomic_write(path, durable=durable) as handle:
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


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` that imports each public name from its module (``exports``:
    name -> module) on first use and keeps it in ``namespace``: the package imports cheaply."""

    def load(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return load
