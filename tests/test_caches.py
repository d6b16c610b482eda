"""Caches keyed by content and verified on load: the digests and manifests every plugin's
cache uses (each plugin's own cache tests live next to it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import harness.caches
from harness.caches import file_digest, verify_manifest, write_manifest

# -- digests and manifests ------------------------------------------------------------------


def test_file_digest_reads_a_file_once_per_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x01" * 4096)
    reads: list[str] = []
    real = harness.caches.sha256_file

    def counting(path: os.PathLike[str]) -> str:
        reads.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(harness.caches, "sha256_file", counting)
    first = file_digest(weights)
    assert file_digest(weights) == first and len(reads) == 1
    harness.caches._DIGESTS.clear()  # a later run: the memo on disk answers
    assert file_digest(weights) == first and len(reads) == 1
    weights.write_bytes(b"\x02" * 4096)  # same size, other bytes
    assert file_digest(weights) != first and len(reads) == 2


def test_manifest_names_what_is_wrong(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    (entry / "sub").mkdir(parents=True)
    (entry / "a.npy").write_bytes(b"a" * 100)
    (entry / "sub" / "b.json").write_text("{}")
    (entry / "colbert.log").write_text("appended to later")
    write_manifest(entry, ignore=("*.log",))
    assert verify_manifest(entry) is None
    (entry / "colbert.log").write_text("more")  # ignored files may change
    assert verify_manifest(entry) is None
    (entry / "a.npy").write_bytes(b"a" * 50 + b"b" + b"a" * 49)
    assert "a.npy does not match" in str(verify_manifest(entry))
    (entry / "a.npy").write_bytes(b"")
    assert "a.npy has 0 bytes" in str(verify_manifest(entry))
    (entry / "sub" / "b.json").unlink()
    (entry / "a.npy").write_bytes(b"a" * 100)
    assert "sub/b.json is missing" in str(verify_manifest(entry))


# -- BM25 -----------------------------------------------------------------------------------
