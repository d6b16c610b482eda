"""A bm25s index as ``bm25s.BM25.save`` wrote it, read and searched without importing bm25s.

Importing bm25s imports scipy.sparse: a quarter of a warm run's CPU time, for a search that
needs neither. :class:`SavedIndex` reads the saved arrays, vocabulary and parameters and scores
a query exactly as bm25s's numpy backend does (``get_scores_from_ids``: each query term's
postings added with ``np.add.at``, in query order, then the non-occurrence scores of BM25L and
BM25+), so rankings are bit for bit bm25s's; ``tests/test_saved.py`` holds the two side by side.
An index it does not know how to read (another backend, a missing file) is left to bm25s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

#: the methods whose scores bm25s completes with a non-occurrence array
_NONOCCURRENCE = ("bm25l", "bm25+")


class SavedIndex:
    """What searching needs of a saved bm25s index: ``vocab_dict``, ``scores`` (the CSC arrays
    and ``num_docs``), ``dtype``, ``int_dtype`` and ``nonoccurrence_array``, as bm25s names them."""

    def __init__(
        self, params: dict[str, Any], vocab: dict[str, int], scores: dict[str, Any], nonoccurrence: Any
    ) -> None:
        self.method: str = params["method"]
        self.dtype: str = params["dtype"]
        self.int_dtype: str = params["int_dtype"]
        self.vocab_dict = vocab
        self.scores = scores
        self.nonoccurrence_array = nonoccurrence

    @classmethod
    def load(cls, directory: str | Path) -> SavedIndex | None:
        """The index saved in ``directory``, or None when it is not one this reader knows (then
        load it with bm25s)."""
        directory = Path(directory)
        params = json.loads((directory / "params.index.json").read_text(encoding="utf-8"))
        if params.get("backend", "numpy") != "numpy" or not isinstance(params.get("num_docs"), int):
            return None
        vocab = _json((directory / "vocab.index.json").read_bytes())
        scores = {
            name: np.load(directory / f"{name}.csc.index.npy", allow_pickle=False)
            for name in ("data", "indices", "indptr")
        }
        scores["num_docs"] = params["num_docs"]
        nonoccurrence = None
        if params["method"] in _NONOCCURRENCE:
            path = directory / "nonoccurrence_array.index.npy"
            if not path.exists():
                return None
            nonoccurrence = np.load(path, allow_pickle=False)
        return cls(params, vocab, scores, nonoccurrence)

    def get_tokens_ids(self, query_tokens: list[str]) -> list[int]:
        """The query's terms that are in the vocabulary, as ids, in order (repeats kept)."""
        return [self.vocab_dict[token] for token in query_tokens if token in self.vocab_dict]

    def get_scores_from_ids(self, query_tokens_ids: list[int]) -> np.ndarray:
        """Every document's score for the query: bm25s's sums, in bm25s's order."""
        data, indices, indptr = self.scores["data"], self.scores["indices"], self.scores["indptr"]
        ids = np.asarray(query_tokens_ids, dtype=np.dtype(self.int_dtype))
        if int(ids.max(initial=0)) >= len(indptr) - 1:
            raise ValueError(f"token id {int(ids.max())} is not in the index's vocabulary of {len(indptr) - 1}")
        scores = np.zeros(self.scores["num_docs"], dtype=np.dtype(self.dtype))
        for start, end in zip(indptr[ids], indptr[ids + 1], strict=True):
            np.add.at(scores, indices[start:end], data[start:end])
        if self.nonoccurrence_array is not None:
            scores += self.nonoccurrence_array[ids].sum()
        return scores


def _json(raw: bytes) -> Any:
    try:  # what bm25s reads its files with, when installed: several times faster on a large vocabulary
        import orjson
    except ImportError:
        return json.loads(raw)
    return orjson.loads(raw)
