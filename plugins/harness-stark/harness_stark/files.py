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
endpoint (``$HF_ENDPOINT``; none at all with ``HF_HUB_OFFLINE=1``) per process decides, files
already in the hub's cache are used, and anything else is one error saying where to put them.
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

from harness import HarnessError, atomic_dir, cache_root, stable_hash

REPO_ID = "snap-stanford/stark"
ENV_VAR = "STARK_DATA_DIR"
QA_FILES = ("stark_qa/stark_qa.csv", "stark_qa/stark_qa_human_generated_eval.csv")
SPLITS = ("train", "val", "test", "test-0.1")
#: The processed files an SKB needs, relative to ``processed/`` (Amazon: to the variant
#: directory ``processed/cache/brand-category-color/``).
PROCESSED_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt")
#: The query sets of the release (``split/*.index``) and its human-written one.
HUB_SPLITS = (*SPLITS, "human-generated")
#: seconds the probe of the hub may take (a network that drops packets answers nothing)
PROBE_TIMEOUT = 5.0
#: the probe's verdict per endpoint, for this process: None when the hub answered, else why not
_probes: dict[str, str | None] = {}
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


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached now, or None when it can: ``HF_HUB_OFFLINE`` set, else one
    quick probe of the endpoint per process (every STaRK split of ``--all`` reuses its verdict)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE"):
        return "HF_HUB_OFFLINE is set"
    endpoint = hub_endpoint()
    if endpoint not in _probes:
        _probes[endpoint] = _probe(endpoint)
    return _probes[endpoint]


def _probe(endpoint: str) -> str | None:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=PROBE_TIMEOUT).close()
    except urllib.error.HTTPError:
        return None  # it answered, if only with an error status: downloads decide file by file
    except Exception as exc:  # no DNS, refused, timed out, a malformed endpoint: all mean "not now"
        reason = getattr(exc, "reason", None) or exc
        return f"{endpoint} cannot be reached ({reason})"
    return None


def _quiet_hub() -> None:
    """The hub library's retry messages ("Retrying in 8s [Retry 5/5]") stay out of the console
    unless ``--verbose``; its download progress bars are not log records and stay."""
    if os.environ.get("HARNESS_VERBOSE") != "1":
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


def _download(filename: str, revision: str | None) -> Path:
    """One file of the official release, through the hub cache (resumable, atomic); from the
    cache alone when the hub cannot be reached."""
    from huggingface_hub import hf_hub_download

    unreachable = hub_unreachable()
    _quiet_hub()
    try:
        return Path(
            hf_hub_download(
                REPO_ID,
                filename,
                repo_type="dataset",
                revision=revision,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
                local_files_only=unreachable is not None,
            )
        )
    except Exception as exc:  # offline, no access, missing file: all end the same way for the user
        raise _unavailable(filename, None if unreachable else exc, unreachable) from exc


def cached(filename: str, revision: str | None) -> bool:
    """Whether the hub's local cache holds ``filename`` (no network)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(REPO_ID, filename, revision=revision, repo_type="dataset")
    return isinstance(found, str)


def check_available(name: str, data_dir: str | None, variant: str | None, revision: str | None = None) -> None:
    """Raise now, before anything loads, what loading ``name``'s queries and SKB would raise for
    want of files: missing from the local copy, or neither reachable on the hub nor in its cache."""
    root = local_root(data_dir)
    if root is not None:
        qa_dir(name, data_dir)
        if missing_skb_files(name, data_dir, variant):
            raise _missing_skb(name, root)
        return
    unreachable = hub_unreachable()
    if unreachable is None:
        return  # downloads happen when the run loads, with progress bars
    for filename in (f"qa/{name}/{QA_FILES[0]}", f"skb/{name}/processed.zip"):
        if not cached(filename, revision):
            raise _unavailable(filename, None, unreachable)


def _unavailable(filename: str, exc: BaseException | None, unreachable: str | None = None) -> HarnessError:
    if unreachable:
        reason = f": {unreachable}, and the hub's local cache does not hold it"
    else:
        reason = f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})" if exc else ""
    return HarnessError(
        f"cannot get {filename} from the Hugging Face hub ({REPO_ID}, repo type dataset){reason}. "
        f"Download the official files elsewhere and put them under one directory in the release's layout "
        f"({LAYOUT}), then pass --data-dir DIR or set {ENV_VAR}=DIR."
    )


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
