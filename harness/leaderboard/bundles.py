"""Submissions: finding runs (run directories, submission archives, a leaderboard) and
bundling runs into a submission archive.

A run directory written by ``harness run`` holds everything needed to check its row::

    row.json  config.json  per_query.jsonl  run.trec (or run.trec.gz)

A submission (``harness submit``) is a gzip'd tar of such directories under ``runs/`` plus
``manifest.json``: the harness version, the environment that produced the runs and a SHA-256
of every file. The leaderboard keeps the same files for each row under
``runs/<dataset>/<split>/<row>/``, so a published row can be checked again at any time.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.leaderboard.rows import run_dir_of

MANIFEST = "manifest.json"
ARCHIVE_FORMAT = 1
RUN_FILES = ("row.json", "config.json", "per_query.jsonl")


@dataclass
class RunEntry:
    """One row with the directory of its per-query results, as found in a submission."""

    source: str
    directory: Path | None
    data: Any = None
    error: str | None = None


# -- finding runs --------------------------------------------------------------------------
def collect(path: str | Path, workdir: Path) -> list[RunEntry]:
    """The runs in ``path``: a submission archive (unpacked into ``workdir``), a run
    directory, a directory of run directories, a leaderboard directory, or rows of a
    leaderboard (a row file or a folder under its ``rows/``)."""
    path = Path(path)
    root = _leaderboard_of(path)
    if root is not None:
        return _leaderboard_entries(root, path)
    if path.is_file() and path.suffix == ".json":
        raise HarnessError(
            f"{path}: a row alone cannot be checked; give its run directory (row.json beside per_query.jsonl "
            "and run.trec), a submission archive or the leaderboard directory"
        )
    if path.is_file():
        return _open_archive(path, workdir)
    if not path.is_dir():
        raise HarnessError(f"{path}: no such file or directory")
    if (path / "row.json").is_file():
        return [_run_entry(path, str(path))]
    if (path / "rows").is_dir():
        return _leaderboard_entries(path)
    runs = sorted(p for p in path.iterdir() if (p / "row.json").is_file())
    if runs:
        return [_run_entry(run, str(run)) for run in runs]
    raise HarnessError(
        f"{path}: not a submission archive, a run directory (with row.json) or a leaderboard (with rows/)"
    )


def run_files(directory: Path) -> dict[str, Path]:
    """The files of a run directory by role; the TREC run may be gzip-compressed."""
    files = {name: directory / name for name in RUN_FILES}
    trec = directory / "run.trec"
    files["run.trec"] = trec if trec.exists() else directory / "run.trec.gz"
    return files


def run_members(directory: Path) -> dict[str, Path]:
    """Every file a run directory ships, by its path inside it: the row, its configuration and
    per-query results, the TREC run, the qrels of what was evaluated (a sample's own), and for a
    row over several seeds each seed's run under ``seed-<n>/``."""
    members = {
        name: directory / name
        for name in (*RUN_FILES, "run.trec", "run.trec.gz", "qrels.trec")
        if (directory / name).is_file()
    }
    for sub in sorted(directory.glob("seed-*")):
        if sub.is_dir():
            members.update({f"{sub.name}/{name}": path for name, path in run_members(sub).items()})
    return members


def _run_entry(directory: Path, source: str) -> RunEntry:
    try:
        data = json.loads((directory / "row.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return RunEntry(source, directory, error=f"row.json is not readable JSON: {exc}")
    return RunEntry(source, directory, data)


def _leaderboard_of(path: Path) -> Path | None:
    """The leaderboard whose ``rows/`` holds ``path``, if one does."""
    for parent in path.resolve().parents:
        if parent.name == "rows" and (parent.parent / "runs").is_dir():
            return parent.parent
    return None


def _leaderboard_entries(root: Path, only: Path | None = None) -> list[RunEntry]:
    """The rows of the leaderboard ``root`` (those in the file or folder ``only``, if given)."""
    entries = []
    if only is None:
        files = sorted((root / "rows").rglob("*.json"))
    else:
        files = [only] if only.is_file() else sorted(only.rglob("*.json"))
    for file in files:
        source = str(file)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            entries.append(RunEntry(source, None, error=f"not readable JSON: {exc}"))
            continue
        run_dir = data.get("run_dir") if isinstance(data, dict) else None
        directory = run_dir_of(root, run_dir if isinstance(run_dir, str) else None)
        entries.append(RunEntry(source, directory, data))
    return entries


#: Limits on a submission archive, checked from its headers before anything is extracted
#: (a STaRK-Amazon run of 9,100 queries × 100 results is ~40 MB of TREC text).
MAX_MEMBER_BYTES = 512 << 20
MAX_TOTAL_BYTES = 2 << 30
MAX_MEMBERS = 10_000


def _open_archive(path: Path, workdir: Path) -> list[RunEntry]:
    try:
        with tarfile.open(path, "r:*") as archive:
            members = archive.getmembers()
            too_big = [m for m in members if m.size > MAX_MEMBER_BYTES]
            if too_big or len(members) > MAX_MEMBERS or sum(m.size for m in members) > MAX_TOTAL_BYTES:
                what = (
                    f"{too_big[0].name} is {too_big[0].size:,} bytes (limit {MAX_MEMBER_BYTES:,})"
                    if too_big
                    else f"{len(members):,} members, {sum(m.size for m in members):,} bytes "
                    f"(limits {MAX_MEMBERS:,} and {MAX_TOTAL_BYTES:,})"
                )
                raise HarnessError(f"{path}: refused before extracting: {what}")
            # The "data" filter refuses absolute paths, "..", links out of the tree and devices.
            archive.extractall(workdir, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise HarnessError(f"{path}: not a readable submission archive: {exc}") from None
    try:
        manifest = json.loads((workdir / MANIFEST).read_text(encoding="utf-8"))
        runs, files = manifest["runs"], manifest["files"]
        if manifest.get("format") != ARCHIVE_FORMAT or not isinstance(runs, list) or not isinstance(files, dict):
            raise ValueError(f"unsupported format {manifest.get('format')!r}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{path}: no valid {MANIFEST} in the archive ({exc})") from None
    present = {p.relative_to(workdir).as_posix() for p in workdir.rglob("*") if p.is_file()} - {MANIFEST}
    if present - set(files):
        raise HarnessError(f"{path}: files not listed in the manifest: {sorted(present - set(files))[:5]}")
    if set(files) - present:
        raise HarnessError(f"{path}: files listed in the manifest are missing: {sorted(set(files) - present)[:5]}")
    for name, digest in files.items():
        if sha256(workdir / name) != digest:
            raise HarnessError(f"{path}: {name} does not match its checksum in the manifest (corrupt or edited)")
    entries = []
    for run in runs:
        directory = workdir / str(run)
        if not directory.is_dir() or workdir not in directory.resolve().parents:
            raise HarnessError(f"{path}: the manifest lists run {run!r}, which the archive does not hold")
        entries.append(_run_entry(directory, f"{path.name}:{run}"))
    return entries


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- bundling ------------------------------------------------------------------------------
