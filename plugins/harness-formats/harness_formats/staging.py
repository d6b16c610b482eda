"""Where ``harness import`` and ``harness export`` write: a directory staged beside ``--out``
and renamed into place when complete, under a lock that makes the target theirs alone.

- ``.NAME.lock`` beside ``--out`` (an ``flock``): held from the start of the command to its
  end. A second import or export into the same ``--out`` stops at once with one error line, and
  the kernel drops the lock of a process that dies, even by SIGKILL.
- ``.NAME.PID.staged``: the directory being written. Hidden and never named ``--out``, so a
  killed writer leaves nothing a run mistakes for data; the next writer of that ``--out``
  deletes such leftovers as soon as it holds the lock (no other writer can be running then, so
  the process id in the name is only a clue for people, never trusted: ids are reused).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import harness

#: the locks this process holds (target → how many claims), so that claims nest
_HELD: dict[Path, int] = {}


def _stale_names(name: str) -> re.Pattern[str]:
    """Staged directories of ``name``: ours (``.NAME.PID.staged``) and the nested temporary
    directories earlier versions left (``..NAME.PID.staged.PID.XXXX.tmp``)."""
    escaped = re.escape(name)
    return re.compile(rf"^(\.{escaped}\.\d+\.staged|\.\.{escaped}\.\d+\.staged\.\d+\..+\.tmp)$")


def _cannot_write(target: Path, exc: OSError) -> harness.HarnessError:
    """One line: the target, the cause, and the directory it was met in (our lock and staged
    directory sit beside the target, so their names would only puzzle)."""
    where = Path(exc.filename).parent if exc.filename else target.parent
    return harness.HarnessError(f"cannot write {target}: {exc.strerror or exc} (in {where})")


@contextmanager
def claimed(target: Path) -> Iterator[None]:
    """Hold ``target``'s lock (see the module); nested claims of one target share it. On the
    first claim, staged directories killed writers left beside ``target`` are deleted."""
    target = target.resolve()
    if target in _HELD:
        _HELD[target] += 1
        try:
            yield
        finally:
            _HELD[target] -= 1
        return
    if target.exists() and not target.is_dir():
        raise harness.HarnessError(f"--out {target} is a file, not a directory")
    lock = target.with_name(f".{target.name}.lock")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        release = _lock(lock)
    except OSError as exc:
        raise _cannot_write(target, exc) from None
    if release is None:
        raise harness.HarnessError(
            f"{target} is being written by another import or export (it holds {lock}); "
            "wait for it to finish, or choose another --out"
        )
    _HELD[target] = 1
    try:
        clean_stale(target)
        yield
    finally:
        del _HELD[target]
        with contextlib.suppress(OSError):
            lock.unlink()  # while still held: one who opened it meanwhile finds it gone (see _lock)
        release()


def _lock(path: Path) -> Callable[[], None] | None:
    """An exclusive lock on ``path`` (created if need be) without waiting: the function that
    releases it, or None when another process holds it. Not the core's ``harness.exclusive``:
    that one waits, and its lock file (filelock's) stays beside the target after release; this
    one refuses at once and its file is removed while held (the inode check below covers that)."""
    try:
        import fcntl
    except ImportError:  # Windows: filelock's lock (the core's dependency)
        from filelock import FileLock, Timeout

        lock = FileLock(os.fspath(path), blocking=False)
        try:
            lock.acquire()
        except Timeout:
            return None
        return lock.release

    for _ in range(10):
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            return None
        except BaseException:
            os.close(handle)
            raise
        # the holder we waited for may have unlinked the file as it let go: lock the one on disk
        try:
            if os.stat(path).st_ino == os.fstat(handle).st_ino:
                return lambda: os.close(handle)
        except FileNotFoundError:
            pass
        os.close(handle)
    return None


def clean_stale(target: Path) -> list[str]:
    """Delete the staged directories beside ``target`` (call it holding ``target``'s lock: none
    of them is then being written). Returns their names. The core's ``clean_stale`` holds no lock,
    so it trusts the process id in a name and spares a live one's; under the lock none is live."""
    pattern = _stale_names(target.name)
    try:
        stale = [p for p in target.parent.iterdir() if pattern.match(p.name)]
    except OSError:
        return []
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return [p.name for p in stale]


@contextmanager
def output_dir(target: Path, replace: bool) -> Iterator[Path]:
    """A directory built beside ``target`` under a name of ours, moved to ``target`` only when
    complete, deleted on any failure. ``replace``: ``target`` exists and is swapped out
    (--force). Otherwise a ``target`` that appears meanwhile (a process that took no lock) is an
    error: what we wrote is not there, so reporting it would be false."""
    target = target.resolve()  # "." has no name to build beside
    staged = target.with_name(f".{target.name}.{os.getpid()}.staged")
    with claimed(target):
        try:
            staged.mkdir()
        except OSError as exc:
            raise _cannot_write(target, exc) from None
        try:
            yield staged
            if replace:
                try:
                    harness.replace_dir(staged, target)
                except OSError as exc:
                    raise _cannot_write(target, exc) from None
                return
            try:
                os.rename(staged, target)  # fails on a directory that is not empty: nothing is lost
            except OSError as exc:
                raise harness.HarnessError(
                    f"{target} appeared while it was being written ({exc.strerror}); nothing was written to it"
                ) from None
        except BaseException as exc:
            shutil.rmtree(staged, ignore_errors=True)
            if isinstance(exc, OSError):
                _in_out(exc, staged, target)
            raise


def _in_out(exc: OSError, staged: Path, target: Path) -> None:
    """Make ``exc`` (a full disk, say) name the path under ``target`` the user gave, not our hidden
    staged directory; a write's error that names no file (``write``, ``writelines``) names
    ``target``. The core's full-disk error says its path in its message, which is rewritten too."""
    name = os.fspath(exc.filename) if isinstance(exc.filename, (str, os.PathLike)) else None
    if name is None:
        if exc.errno is not None:  # without an errno a filename would spoil its message
            exc.filename = str(target)
    elif name == str(staged) or name.startswith(str(staged) + os.sep):
        exc.filename = str(target) + name[len(str(staged)) :]
    if isinstance(exc, harness.HarnessError) and exc.args:
        exc.args = (str(exc.args[0]).replace(str(staged), str(target)), *exc.args[1:])
