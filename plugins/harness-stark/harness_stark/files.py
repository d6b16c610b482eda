"""Where the STaRK files come from: a local copy in the official layout, or the hub.

The official release is the Hugging Face dataset repository ``snap-stanford/stark``::

    qa/<name>/stark_qa/stark_qa.csv
    qa/<name>/stark_qa/stark_qa_human_generated_eval.csv
    qa/<name>/split/{train,val,test,test-0.1}.index
    skb/<name>/processed.zip          (unpacks to processed/…)

A local copy in the same layout is used when ``data_dir`` (``--data-dir``) or
``$STARK_DATA_DIR`` names it; an already unpacked ``skb/<name>/processed/`` is used as is.
Otherwise the files are downloaded with ``huggingface_hub`` into its cache (with progress
bars), and archives are unpacked into the harness cache — atomically, so an interrupted
download or unpack never leaves a half-written copy behind.

Without network the hub is not retried for half a minute per file: one quick probe of its
endpoint (``$HF_ENDPOINT``; none at all with ``HF_HUB_OFFLINE=1``) per process decides
(:func:`harness.hub_unreachable`), files already in the hub's cache are used, and anything
else is one error saying where to put them (:func:`harness.hub_file`).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from harness import HarnessError, atomic_dir, cache_root, hub_file, hub_unreachable, stable_hash

REPO_ID = "snap-stanford/stark"
ENV_VAR = "STARK_DATA_DIR"
QA_FILES = ("stark_qa/stark_qa.csv", "stark_qa/stark_qa_human_generated_eval.csv")
SPLITS = ("train", "val", "test", "test-0.1")
#: The processed files an SKB needs, relative to ``processed/`` (Amazon: to the variant
#: directory ``processed/cache/brand-category-color/``).
PROCESSED_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
#: The query sets of the release (``split/*.index``) and its human-written one.
HUB_SPLITS = (*SPLITS, "human-generated")
LAYOUT = (
    "qa/<name>/stark_qa/stark_qa.csv, qa/<name>/stark_qa/stark_qa_human_generated_eval.csv, "
    "qa/<name>/split/{train,val,test}.index, skb/<name>/processed.zip"
)


def local_root(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The local copy to use, if any: ``data_dir``, else ``$STARK_DATA_DIR``."""
    chosen = data_dir or os.environ.get(ENV_VAR)
    if not chosen:
        return None
    root = Path(chosen).expanduser()
    if not root.is_dir():
        raise HarnessError(f"STaRK data directory {root} does not exist")
    return root


def _download(filename: str, revision: str | None) -> Path:
    """One file of the official release, through the hub cache (resumable, atomic); from the
    cache alone when the hub cannot be reached."""
    remedy = (
        f"Download the official files elsewhere and put them under one directory in the release's layout "
        f"({LAYOUT}), then pass --data-dir DIR or set {ENV_VAR}=DIR."
    )
    return hub_file(REPO_ID, filename, remedy=remedy, revision=revision, repo_type="dataset")


def check_available(name: str, data_dir: str | None, variant: str | None, revision: str | None = None) -> None:
    """Raise now, before anything loads, what loading ``name``'s queries and SKB would raise for
    want of files: missing from the local copy, or neither reachable on the hub nor in its cache."""
    root = local_root(data_dir)
    if root is not None:
        qa_dir(name, data_dir)
        if missing_skb_files(name, data_dir, variant):
            raise _missing_skb(name, root)
        return
    if hub_unreachable() is None:
        return  # downloads happen when the run loads, with progress bars
    for filename in (f"qa/{name}/{QA_FILES[0]}", f"skb/{name}/processed.zip"):
        _download(filename, revision)  # the hub's cache alone: no network, the error loading would give


def _missing_skb(name: str, root: Path) -> HarnessError:
    return HarnessError(
        f"the {name} SKB is missing under {root}: need skb/{name}/processed.zip "
        f"(or an unpacked skb/{name}/processed/ with {', '.join(PROCESSED_FILES)})"
    )


def qa_dir(name: str, data_dir: str | None, revision: str | None = None) -> Path:
    """Directory ``qa/<name>/`` holding the query files (downloaded if needed)."""
    root = local_root(data_dir)
    if root is not None:
        directory = root / "qa" / name
        if not (directory / QA_FILES[0]).exists():
            raise HarnessError(
                f"{directory / QA_FILES[0]} is missing; expected STaRK's layout under {root} "
                f"(qa/{name}/stark_qa/stark_qa.csv, qa/{name}/split/*.index)"
            )
        return directory
    first = _download(f"qa/{name}/{QA_FILES[0]}", revision)
    directory = first.parents[1]
    for extra in (QA_FILES[1], *(f"split/{s}.index" for s in SPLITS)):
        try:
            _download(f"qa/{name}/{extra}", revision)
        except HarnessError:
            if extra.startswith("split/test-0.1") or extra == QA_FILES[1]:
                continue  # optional in older revisions
            raise
    return directory


def processed_dir(name: str, data_dir: str | None, variant: str | None, revision: str | None = None) -> Path:
    """Directory holding the processed SKB files (unpacked from ``processed.zip`` if needed)."""
    root = local_root(data_dir)
    if root is not None:
        unpacked = root / "skb" / name / "processed"
        if _complete(unpacked, variant):
            return _variant(unpacked, variant)
        archive = root / "skb" / name / "processed.zip"
        if not archive.exists():
            raise _missing_skb(name, root)
    else:
        archive = _download(f"skb/{name}/processed.zip", revision)
    return _variant(unpack(archive, name, variant), variant)


def missing_skb_files(name: str, data_dir: str | None, variant: str | None) -> list[str]:
    """What a local copy lacks for the SKB (for ``harness describe``)."""
    root = local_root(data_dir)
    if root is None:
        return []
    base = root / "skb" / name
    if (base / "processed.zip").exists() or _complete(base / "processed", variant):
        return []
    inner = f"processed/{'cache/' + variant + '/' if variant else ''}"
    return [f"skb/{name}/processed.zip"] + [f"skb/{name}/{inner}{f}" for f in PROCESSED_FILES]


def _variant(directory: Path, variant: str | None) -> Path:
    return directory / "cache" / variant if variant else directory


def _complete(processed: Path, variant: str | None) -> bool:
    return all((_variant(processed, variant) / f).exists() for f in PROCESSED_FILES)


def unpack(archive: Path, name: str, variant: str | None) -> Path:
    """Unpack ``processed.zip`` once into the harness cache; return its ``processed/``."""
    stat = archive.stat()
    # Keyed by the archive's path and state, not its size and mtime alone: two archives of one
    # size written within the same second (variants of one SKB) must not share an unpacked copy.
    state = stable_hash([str(archive.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino], length=12)
    target = cache_root() / "stark" / f"{name}-{stat.st_size}-{state}"
    if _complete(target / "processed", variant):
        return target / "processed"
    try:
        with atomic_dir(target) as tmp, zipfile.ZipFile(archive) as bundle:
            bundle.extractall(tmp)
    except (zipfile.BadZipFile, OSError) as exc:
        raise HarnessError(f"cannot unpack {archive}: {exc}; delete it and download it again") from exc
    if not _complete(target / "processed", variant):
        raise HarnessError(f"{archive} does not contain processed/{PROCESSED_FILES[0]} and friends")
    return target / "processed"
