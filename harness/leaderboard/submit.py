"""Writing a submission: run directories validated, then bundled into one archive with a manifest
(the harness version, the environment, every file's SHA-256) that ``harness leaderboard merge``
verifies. Reading archives back is ``bundles``."""

from __future__ import annotations

import io
import json
import platform
import tarfile
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.io import atomic_write
from harness.leaderboard.bundles import ARCHIVE_FORMAT, MANIFEST, collect, run_files, run_members, sha256
from harness.leaderboard.validate import summarize_failures, validate
from harness.version import __version__


def environment() -> dict[str, Any]:
    """Where the runs were made: interpreter, platform and every installed distribution."""
    packages = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            packages[name] = dist.version
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": dict(sorted(packages.items(), key=lambda item: item[0].lower())),
    }


def bundle(
    run_dirs: Sequence[str | Path], out: str | Path, check: bool = True, data_dir: str | None = None
) -> dict[str, Any]:
    """Write the runs in ``run_dirs`` into one submission archive at ``out``; return its manifest.

    With ``check`` the runs are validated first, so a submission that would be refused is
    never written."""
    with tempfile.TemporaryDirectory() as work:
        entries = [e for i, path in enumerate(run_dirs) for e in collect(path, Path(work) / str(i))]
        entries = [e for e in entries if e.directory is not None]
        if not entries:
            raise HarnessError("submit: no runs found")
        if check:
            results = validate(entries, data_dir)
            if not all(r.ok for r in results):
                raise HarnessError("submit: these runs do not validate:\n" + summarize_failures(results))
        members: dict[str, Path] = {}
        runs = []
        for entry in entries:
            assert entry.directory is not None
            data = entry.data if isinstance(entry.data, dict) else {}
            name = "runs/" + _run_name(data, entry.directory)
            if name in runs:
                raise HarnessError(f"submit: {entry.source} is given twice")
            runs.append(name)
            seeded = isinstance(data.get("seeds"), dict)  # its TREC runs are its seeds'
            for role, path in run_files(entry.directory).items():
                if not path.is_file() and not (seeded and role == "run.trec"):
                    raise HarnessError(f"submit: {entry.directory} has no {role}; run `harness run` again to write it")
            members.update({f"{name}/{inner}": path for inner, path in run_members(entry.directory).items()})
        manifest = {
            "format": ARCHIVE_FORMAT,
            "created": datetime.now(UTC).isoformat(),
            "harness": __version__,
            "environment": environment(),
            "runs": runs,
            "files": {name: sha256(path) for name, path in sorted(members.items())},
        }
        payload = json.dumps(manifest, indent=2).encode("utf-8")
        with atomic_write(out, "wb") as handle, tarfile.open(fileobj=handle, mode="w:gz", compresslevel=6) as archive:
            _add_bytes(archive, MANIFEST, payload)
            for name, path in sorted(members.items()):
                _add_bytes(archive, name, path.read_bytes())
    return manifest


def _run_name(row: dict[str, Any], directory: Path) -> str:
    try:
        return f"{row['dataset']['name']}-{row['split']}-{row['retriever']['name']}-{row['config_hash']}".replace(
            "/", "_"
        )
    except (KeyError, TypeError):
        return directory.name


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))
