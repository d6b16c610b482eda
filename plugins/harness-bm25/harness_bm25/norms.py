"""Lucene's BM25 scores for a bm25s index: one-byte length norms, float32 arithmetic.

Lucene does not store a document's length; it stores one byte (``SmallFloat.intToByte4``):
lengths below 24 exactly, longer ones with four significant bits, rounded down. Its
BM25Similarity scores with the decoded length, so a document of 1,000 terms is scored as
one of 984. bm25s uses exact lengths; ``rescore_like_lucene`` recomputes a bm25s index's
stored scores the way Lucene computes them, which makes the two rank alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["lucene_length", "rescore_like_lucene"]

_FREE = 24  # byte values below this encode lengths exactly (255 - intToByte4's largest 4-bit code)


def lucene_length(lengths: np.ndarray) -> np.ndarray:
    """The length Lucene's BM25 sees for each exact length: ``byte4ToInt(intToByte4(n))``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    rest = np.maximum(lengths - _FREE, 0)
    bits = np.zeros_like(rest)
    nonzero = rest > 0
    bits[nonzero] = np.floor(np.log2(rest[nonzero])).astype(np.int64) + 1
    shift = np.maximum(bits - 4, 0)  # keep the four most significant bits
    decoded = (rest >> shift) << shift
    return np.where(lengths < _FREE, lengths, _FREE + decoded)


def rescore_like_lucene(scores: dict, token_ids: Sequence[Sequence[int]], k1: float, b: float) -> None:
    """Replace the BM25 scores of a bm25s index (``BM25.scores``, CSC: one column per token) in place.

    ``token_ids`` are the indexed documents as bm25s token ids. Scores follow Lucene 9's
    BM25Similarity: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``,
    ``score = idf - idf / (1 + tf / (k1 · (1 - b + b · L / avgdl)))`` with L the decoded norm.
    """
    import scipy.sparse  # half a second to import: only when an index is built

    n_docs, n_vocab = len(token_ids), len(scores["indptr"]) - 1
    lengths = np.fromiter((len(doc) for doc in token_ids), dtype=np.int64, count=n_docs)
    rows = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    cols = np.fromiter((t for doc in token_ids for t in doc), dtype=np.int64, count=int(lengths.sum()))
    tf = scipy.sparse.csc_matrix((np.ones(len(cols), dtype=np.float32), (rows, cols)), shape=(n_docs, n_vocab))
    tf.sum_duplicates()
    tf.sort_indices()
    if not (np.array_equal(tf.indptr, scores["indptr"]) and np.array_equal(tf.indices, scores["indices"])):
        raise ValueError("bm25s index layout differs from its documents; cannot apply Lucene norms")
    df = np.diff(tf.indptr).astype(np.float64)
    idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    avgdl = np.float32(lengths.sum() / n_docs)
    norm_inverse = (1 / (k1 * ((1 - b) + b * lucene_length(lengths).astype(np.float32) / avgdl))).astype(np.float32)
    weight = np.repeat(idf, np.diff(tf.indptr))
    tf_data = tf.data.astype(np.float32)
    new = weight - weight / (np.float32(1) + tf_data * norm_inverse[tf.indices])
    scores["data"] = new.astype(scores["data"].dtype)
