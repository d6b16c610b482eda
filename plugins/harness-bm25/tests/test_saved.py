"""A saved index read without bm25s (``SavedIndex``) searches exactly as bm25s's own loader does:
the same vocabulary, the same scores bit for bit, for every scoring method."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bm25s
import numpy as np
import pytest

from harness_bm25.saved import SavedIndex

WORDS = "kettle tea pot pan steel copper acme globex boil water quick electric whistle green fry é 茶".split()


def _saved(tmp_path: Path, method: str, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    corpus = [[str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 30)))] for _ in range(300)]
    index = bm25s.BM25(method=method, k1=0.9, b=0.4)
    index.index(corpus, show_progress=False)
    index.save(str(tmp_path / method))
    return tmp_path / method


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_scores_equal_bm25s_bit_for_bit(tmp_path: Path, method: str) -> None:
    directory = _saved(tmp_path, method)
    ours, theirs = SavedIndex.load(directory), bm25s.BM25.load(str(directory))
    assert ours is not None and ours.vocab_dict == theirs.vocab_dict and ours.dtype == theirs.dtype
    rng = np.random.default_rng(2)
    for _ in range(300):
        query = [str(w) for w in rng.choice([*WORDS, "unknown"], size=int(rng.integers(1, 9)))]
        query += query[: int(rng.integers(0, 3))]  # a word said twice counts twice
        ids = ours.get_tokens_ids(query)
        assert ids == theirs.get_tokens_ids(query)
        if ids:
            assert ours.get_scores_from_ids(ids).tobytes() == theirs.get_scores_from_ids(ids).tobytes()


def test_what_it_cannot_read_is_left_to_bm25s(tmp_path: Path) -> None:
    directory = _saved(tmp_path, "bm25l")
    params = json.loads((directory / "params.index.json").read_text())
    (directory / "params.index.json").write_text(json.dumps({**params, "backend": "numba"}))
    assert SavedIndex.load(directory) is None
    (directory / "params.index.json").write_text(json.dumps(params))
    (directory / "nonoccurrence_array.index.npy").unlink()
    assert SavedIndex.load(directory) is None


def test_a_warm_bm25_run_does_not_import_bm25s(tmp_path: Path) -> None:
    """The index is built with bm25s; searching it later needs neither bm25s nor scipy."""
    code = (
        "import sys, harness\n"
        "from harness.testing import TinyDataset\n"
        "harness.evaluate('bm25', TinyDataset(), 'test', k=3, output_dir=sys.argv[1], device='cpu')\n"
        "print(sorted(m for m in ('bm25s', 'scipy') if m in sys.modules))\n"
    )
    env = {**__import__("os").environ, "HARNESS_CACHE": str(tmp_path / "cache")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / f"runs{i}")], capture_output=True, text=True, env=env
        )
        for i in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    assert runs[0].stdout.split()[-1] != "[]"  # the cold run built the index with bm25s
    assert runs[1].stdout.strip().splitlines()[-1] == "[]"
