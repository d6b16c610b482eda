"""The Hugging Face hub, for plugins: models named by hub id, and single files of a repository.

A hub id is ``org/name`` or ``org/name@revision`` (a branch, a tag or a commit).
:func:`hub_snapshot` downloads a model repository with ``huggingface_hub.snapshot_download``
into the hub's own cache (``HF_HOME`` / ``HF_HUB_CACHE``), without the weights of other
frameworks (TensorFlow, Flax, ONNX, ...) and without a pickled ``*.bin`` beside
``*.safetensors``; the commit it resolves to is what runs, and what a retriever reports in
``provenance()``. :func:`hub_file` gets one file (a dataset's archive) the same way.

Without network the hub is not retried for half a minute per file: one quick probe of its
endpoint (``$HF_ENDPOINT``; none at all with ``HF_HUB_OFFLINE=1``) per process decides
(:func:`hub_unreachable`); what the cache holds is used, and anything else is one
:class:`harness.HarnessError` saying how to use a local copy. A commit id already in the
cache is used without asking the hub at all.

``huggingface_hub`` is imported when a function needs it, so the core does not depend on it.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import posixpath
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

__all__ = ["HubSnapshot", "hub_file", "hub_snapshot", "hub_unreachable", "parse_hub_id"]

#: ``org/name`` with an optional ``@revision``; a path that does not exist looks alike, so
#: callers try local directories first
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[^\s@]+))?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: weights torch never reads: other frameworks' copies of the model
FOREIGN = (
    "*.h5",
    "*.msgpack",
    "*.onnx",
    "*.onnx_data",
    "*.ot",
    "*.tflite",
    "*.gguf",
    "*.mlmodel",
    "onnx/*",
    "openvino/*",
    "coreml/*",
)
#: seconds the probe of the hub may take (a network that drops packets answers nothing)
PROBE_TIMEOUT = 5.0
#: the probe's verdict per endpoint, for this process: None when the hub answered, else why not
_probes: dict[str, str | None] = {}


@dataclass(frozen=True)
class HubSnapshot:
    """A repository's files at one commit, in the hub's cache."""

    repo: str
    commit: str
    path: Path

    def provenance(self, prefix: str = "model") -> dict[str, str]:
        """What a row records of it (``Retriever.provenance``): ``{prefix}_repo``, ``{prefix}_revision``."""
        return {f"{prefix}_repo": self.repo, f"{prefix}_revision": self.commit}


def parse_hub_id(spec: str) -> tuple[str, str | None] | None:
    """``(repo, revision)`` of a hub id (revision None: the default branch), else None."""
    found = HUB_ID.match(spec)
    return (found["repo"], found["revision"]) if found else None


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached now, or None when it can: ``HF_HUB_OFFLINE`` set, else one
    quick probe of the endpoint per process (every run of ``--all`` reuses its verdict)."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE"):
        return "HF_HUB_OFFLINE is set"
    endpoint = hub_endpoint()
    if endpoint not in _probes:
        _probes[endpoint] = _probe(endpoint)
    return _probes[endpoint]


def _probe(endpoint: str) -> str | None:
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=PROBE_TIMEOUT).close()
    except urllib.error.HTTPError:
        return None  # it answered, if only with an error status: the download decides
    except Exception as exc:  # no DNS, refused, timed out, a malformed endpoint: all mean "not now"
        reason = getattr(exc, "reason", None) or exc
        return f"{endpoint} cannot be reached ({reason})"
    return None


def _library(purpose: str) -> Any:
    """``huggingface_hub``, quietened: its retry messages ("Retrying in 8s [Retry 5/5]") stay
    out of the console unless ``--verbose`` (its progress bars are not log records and stay)."""
    try:  # an optional dependency, and seconds to import: only when the hub is used
        import huggingface_hub
    except ImportError:
        raise HarnessError(
            f"{purpose} needs huggingface_hub, which is not installed: pip install huggingface_hub"
        ) from None
    if os.environ.get("HARNESS_VERBOSE") != "1":
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    return huggingface_hub


def hub_cache() -> str:
    from huggingface_hub import constants  # optional: only when the hub is used

    return str(constants.HF_HUB_CACHE)


def wanted(files: list[str]) -> list[str]:
    """The repository files torch-based libraries read: no other framework's weights, and no
    pickled ``*.bin`` in a folder that has ``*.safetensors`` (half the download, and no pickle)."""
    kept = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in FOREIGN)]
    safe = {posixpath.dirname(f) for f in kept if f.endswith(".safetensors")}
    return [f for f in kept if not (f.endswith(".bin") and posixpath.dirname(f) in safe)]


def hub_file(repo: str, filename: str, *, remedy: str, revision: str | None = None, repo_type: str = "model") -> Path:
    """One file of ``repo`` through the hub's cache (resumable, atomic); from the cache alone
    when the hub cannot be reached. Any failure is one error: ``cannot get FILE from the Hugging
    Face hub (REPO, repo type TYPE): why. REMEDY`` (``remedy`` says where a local copy goes)."""
    hub = _library(f"downloading {filename} from the Hugging Face hub")
    unreachable = hub_unreachable()
    try:
        return Path(
            hub.hf_hub_download(
                repo,
                filename,
                repo_type=repo_type,
                revision=revision,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
                local_files_only=unreachable is not None,
            )
        )
    except Exception as exc:  # offline, no access, missing file: all end the same way for the user
        if unreachable:
            reason = f": {unreachable}, and the hub's local cache does not hold it"
        else:
            reason = f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        raise HarnessError(
            f"cannot get {filename} from the Hugging Face hub ({repo}, repo type {repo_type}){reason}. {remedy}"
        ) from exc


def hub_snapshot(repo: str, revision: str | None, *, what: str, local: str) -> HubSnapshot:
    """The snapshot of the model ``repo`` at ``revision`` (None: the default branch), from the
    cache when it holds it and the hub cannot be asked (or ``revision`` is a commit it holds),
    else downloaded. ``what`` names the parameter in errors (``dense: model``); ``local`` says
    what a local copy would be (``model: a directory holding ...``)."""
    hub = _library(f"{what} {repo!r} (a Hugging Face hub id)")
    from huggingface_hub.errors import (  # loaded by _library above
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    name = f"{repo}@{revision}" if revision else repo
    if revision and COMMIT.match(revision):
        try:  # a pinned commit in the cache needs nobody's answer
            return _snapshot(repo, hub.snapshot_download(repo, revision=revision, local_files_only=True))
        except LocalEntryNotFoundError:
            pass
    unreachable = hub_unreachable()
    try:
        if unreachable is not None:
            return _snapshot(repo, hub.snapshot_download(repo, revision=revision, local_files_only=True))
        endpoint = os.environ.get("HF_ENDPOINT") or None
        try:
            info = hub.HfApi(endpoint=endpoint).model_info(repo, revision=revision)
        except Exception as exc:
            if not _connection_failed(exc):
                raise
            # it answered the probe but not this: the cache, as when it cannot be reached
            unreachable = f"{hub_endpoint()} did not answer ({type(exc).__name__})"
            return _snapshot(repo, hub.snapshot_download(repo, revision=revision, local_files_only=True))
        files = wanted([s.rfilename for s in info.siblings or []])
        # by the name asked for (not info.sha), so that the cache records the branch's commit
        # and a later offline run of the same name finds it
        path = hub.snapshot_download(repo, revision=revision, allow_patterns=files or None, endpoint=endpoint)
        return _snapshot(repo, path)
    except LocalEntryNotFoundError:
        reason = unreachable or f"{hub_endpoint()} cannot be reached"
        pinned = f" --revision {revision}" if revision else ""
        raise HarnessError(
            f"{what} {name!r} is no local directory, and the Hugging Face hub cannot give it: {reason}, "
            f"and the hub's cache ({hub_cache()}) does not hold it. Give a local copy instead ({local}), or "
            f"download it where the hub can be reached (hf download {repo}{pinned}) and "
            "point HF_HUB_CACHE at that cache (with HF_HUB_OFFLINE=1)"
        ) from None
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        why = (
            "is gated: accept its terms and log in (hf auth login)"
            if isinstance(exc, GatedRepoError)
            else (
                "is neither a local directory nor a model on the Hugging Face hub (or it is private: log in with "
                "hf auth login)"
            )
        )
        raise HarnessError(f"{what} {name!r} {why} ({hub_endpoint()})") from None
    except RevisionNotFoundError:
        raise HarnessError(f"{what} {name!r}: the hub has no revision {revision!r} of {repo}") from None
    except Exception as exc:  # a reply that is no model, a full disk, a broken download
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise HarnessError(
            f"{what} {name!r}: download from {hub_endpoint()} failed ({type(exc).__name__}: {first})"
        ) from exc


def _connection_failed(exc: BaseException) -> bool:
    """A connection that failed or timed out: requests' errors (huggingface_hub < 1) or httpx's."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"ConnectionError", "Timeout", "ConnectError", "TimeoutException", "NetworkError"})


def _snapshot(repo: str, path: str) -> HubSnapshot:
    folder = Path(path)
    return HubSnapshot(repo, folder.name, folder)  # the hub cache names snapshots by commit
